//! A master and two worker processes on loopback: the layers split over
//! three processes give exactly the single-process output. Workers
//! advertise over mDNS restricted to IPv4 loopback (`--mdns-iface lo`), so
//! no multicast leaves the machine; each test uses its own cluster key, so
//! tests running side by side never pick each other's workers.

mod common;

use common::place::Place;
use common::worker::Worker;
use common::{cake_json, fixture, join_ids, share};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

const KEY: &str = "loopback cluster key";
/// Generated-format keys: their cluster ids tell the clusters apart in mDNS.
const DISCOVERY_KEY: &str = "cake1-discover-bakiro-tunela-mosipa-dukefo-rinavu-lesoti-paguhe";
const STRANGER_KEY: &str = "cake1-stranger-zovime-hadupi-sekoru-nafite-gulobe-pivaso-tedamu";

/// Runs greedy generation over `workers`, the master holding at most `master_memory`.
fn distributed_tokens(model: &Path, prompt_args: &[&str], workers: &[&Worker], master_memory: u64) -> Value {
    let mut args = vec!["run", "--model", model.to_str().unwrap()];
    args.extend_from_slice(prompt_args);
    let memory = master_memory.to_string();
    args.extend(["--temperature", "0", "--ignore-eos", "--json", "--max-memory", &memory, "--cluster-key", KEY]);
    for w in workers {
        args.extend(["--worker", w.address.as_str()]);
    }
    cake_json(&args)
}

/// Every architecture split across a process boundary: the master keeps the
/// first layer (it always does) and one worker runs the others.
#[test]
fn tiny_models_split_between_master_and_worker_match_transformers() {
    // Folders run in f32, as transformers ran them (the FP8 one keeps its
    // weights in F8E4M3), and llama.cpp's conversions beside them.
    let folders = common::tiny_families().into_iter().map(|family| fixture(&format!("tiny/{family}")));
    let gguf_files =
        common::tiny_gguf_families().into_iter().map(|family| fixture(&format!("tiny/{family}/model-f32.gguf")));
    for model in folders.chain(gguf_files) {
        let n = common::layer_count(&model);
        assert!(n >= 2, "{}", model.display());
        // The master fits the embedding, head and layer 0; the worker fits the rest.
        let f32 = Some(candle_core::DType::F32);
        let a = Worker::start(KEY, "a", Some(share(&model, f32, 1..n, false)));
        let folder = if model.is_file() { model.parent().unwrap().to_path_buf() } else { model.clone() };
        let reference: Value =
            serde_json::from_str(&std::fs::read_to_string(folder.join("reference.json")).unwrap()).unwrap();
        let prompt: Vec<u64> =
            reference["prompt_tokens"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
        let out = distributed_tokens(
            &model,
            &["--prompt-tokens", &join_ids(&prompt), "--max-tokens", "16", "--dtype", "f32"],
            &[&a],
            share(&model, f32, 0..1, true),
        );
        assert_eq!(out["tokens"], reference["greedy_tokens"], "{}", model.display());
    }
}

/// Gemma 3 reading two pictures with its layers split: the master reads
/// the pictures and runs three sliding-window layers, a worker two more and
/// the global one, and each picture's span of tokens that see each other travels with the
/// hidden states: each position's NLL within 1e-3 of transformers'.
#[test]
fn pictures_read_across_master_and_worker_match_transformers() {
    let model = fixture("tiny/gemma3_vision");
    let reference: Value =
        serde_json::from_str(&std::fs::read_to_string(model.join("reference.json")).unwrap()).unwrap();
    let prompt = &reference["prompt"];
    let f32 = Some(candle_core::DType::F32);
    let a = Worker::start(KEY, "a", Some(share(&model, f32, 3..6, false)));
    let ids: Vec<u64> = prompt["ids"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
    let ids = join_ids(&ids);
    let files: Vec<String> = prompt["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|name| model.join(name.as_str().unwrap()).to_str().unwrap().to_string())
        .collect();
    let memory = share(&model, f32, 0..3, true).to_string();
    let model_path = model.to_str().unwrap();
    let mut args = vec!["perplexity", "--model", model_path, "--tokens", &ids, "--dtype", "f32", "--json"];
    for file in &files {
        args.extend(["--image", file.as_str()]);
    }
    args.extend(["--max-memory", &memory, "--cluster-key", KEY, "--worker", a.address.as_str()]);
    let out = cake_json(&args);
    let ours = out["nll"].as_array().unwrap();
    let theirs = prompt["nll"].as_array().unwrap();
    assert_eq!(ours.len(), theirs.len());
    for (position, (a, b)) in ours.iter().zip(theirs).enumerate() {
        let gap = (a.as_f64().unwrap() - b.as_f64().unwrap()).abs();
        assert!(gap < 1e-3, "position {position}: NLL {a} against transformers' {b}");
    }
}

/// A worker on a GPU (`--gpu on`: lavapipe where there is none) names it
/// among its devices and runs the layers a CPU master gives it there:
/// transformers' tokens, and its log names the GPU and the layers.
#[test]
fn a_worker_runs_its_layers_on_its_gpu() {
    for family in ["qwen3", "gemma3_hybrid", "phi3_window"] {
        let model = fixture(&format!("tiny/{family}"));
        let n = common::layer_count(&model);
        let f32 = Some(candle_core::DType::F32);
        let gpu = Worker::start_with(KEY, "gpu", Some(share(&model, f32, 1..n, false)), &["--gpu", "on"]);
        // It tells masters (and so the Cluster screen) which GPU it has.
        let key = cake::cluster::cluster_key::ClusterKey::from_passphrase(KEY).unwrap();
        let info = cake::cluster::remote::RemoteWorker::connect(&gpu.address, &key).unwrap().info.clone();
        assert!(info.devices.iter().any(|d| d.starts_with("gpu: ")), "{family}: {:?}", info.devices);
        let reported = info.gpu.expect("its GPU's memory and speed");
        assert!(reported.capacity.memory_bytes.is_some() && reported.capacity.bytes_per_second > 0.0);
        // The master's preview plans its layers on that GPU.
        let memory = share(&model, f32, 0..1, true).to_string();
        let preview = common::cake_json(&[
            "run",
            "--model",
            model.to_str().unwrap(),
            "--plan",
            "--json",
            "--dtype",
            "f32",
            "--max-memory",
            &memory,
            "--cluster-key",
            KEY,
            "--worker",
            &gpu.address,
        ]);
        let chosen = &preview["options"][preview["chosen"].as_u64().unwrap() as usize]["plan"]["stages"];
        let worker = chosen.as_array().unwrap().iter().find(|s| s["node"] == "gpu").expect("a stage on the worker");
        let on_gpu: Vec<u64> = worker["gpu_layers"].as_array().unwrap().iter().map(|l| l.as_u64().unwrap()).collect();
        assert_eq!(on_gpu, (1..n as u64).collect::<Vec<_>>(), "{family}: {worker:#}");
        assert!(worker["reason"].as_str().unwrap().contains("on its GPU"), "{worker:#}");
        let reference: Value =
            serde_json::from_str(&std::fs::read_to_string(model.join("reference.json")).unwrap()).unwrap();
        let prompt: Vec<u64> =
            reference["prompt_tokens"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
        let out = distributed_tokens(
            &model,
            &["--prompt-tokens", &join_ids(&prompt), "--max-tokens", "16", "--dtype", "f32"],
            &[&gpu],
            share(&model, f32, 0..1, true),
        );
        assert_eq!(out["tokens"], reference["greedy_tokens"], "{family}");
        let log = gpu.log.lock().unwrap().join("\n");
        let placed = format!("layers 1-{} of {n}", n - 1);
        let placed = if n == 2 { "layers 1 of 2".to_string() } else { placed };
        assert!(log.contains("GPU ") && log.contains(&placed), "{family}: the worker's log: {log}");
    }
}

#[test]
fn default_model_split_over_three_processes_matches_one_process() {
    let model = common::server::default_model_file();
    let third = common::layer_count(&model) / 3;
    // Each machine capped to its third, so every run has the same plan (and the workers keep their weights).
    let a = Worker::start(KEY, "a", Some(share(&model, None, third..2 * third, false)));
    let b = Worker::start(KEY, "b", Some(share(&model, None, 2 * third..3 * third, false)));
    let master_memory = share(&model, None, 0..third, true);
    let mut single_args =
        vec!["run", "--model", model.to_str().unwrap(), "--temperature", "0", "--ignore-eos", "--json"];
    single_args.extend_from_slice(&["--prompt", "The capital of France is", "--max-tokens", "24"]);
    let single = cake_json(&single_args);
    // Hidden states back through the master after each worker (twice: the
    // first run also sends the workers their weights), then straight from
    // worker to worker (the default): the same tokens, and one
    // link crossing less per step (master → a → b → master crosses three
    // instead of four): the hidden states of each position, once.
    let mut bytes = Vec::new();
    for route in ["through-master", "through-master", "worker-to-worker"] {
        let prompt = ["--prompt", "The capital of France is", "--max-tokens", "24", "--hidden-route", route];
        let split = distributed_tokens(&model, &prompt, &[&a, &b], master_memory);
        assert_eq!(split["tokens"], single["tokens"], "{route}");
        assert_eq!(split["text"], single["text"], "{route}");
        bytes.push(split["network_bytes"].as_f64().unwrap());
    }
    let crossing = 24.0 * 576.0 * 4.0;
    let saved = bytes[1] - bytes[2];
    assert!((crossing..2.0 * crossing).contains(&saved), "{saved} bytes saved, {crossing} per crossing of 24 steps");
}

/// Hidden states can cross machines in f16 (`--wire f16`). On the default
/// model split over master and worker, computed in f32, the per-token NLL
/// of an English text stays within 1e-3 nats of the same split sending f32.
/// With its weights kept quantized, activations are rounded to int8 inside
/// every product, which turns the f16 rounding into per-token noise (about
/// 0.05 nats, as int8 activations cost against exact arithmetic) with no
/// shift of the mean, and can flip a greedy token at a near tie (so f32
/// stays the default). Computed in f32, greedy tokens stay the same, and
/// decoding moves about half the bytes.
#[test]
fn hidden_states_in_half_precision_keep_tokens_and_nll_and_halve_the_bytes() {
    let model = common::server::default_model_file();
    let layers = common::layer_count(&model);
    let text = fixture("english.txt");
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    for dtype in [Some(candle_core::DType::F32), None] {
        let worker = Worker::start(KEY, "a", Some(share(&model, dtype, layers / 2..layers, false)));
        let master_memory = share(&model, dtype, 0..layers / 2, true).to_string();
        let over_the_wire = |command: &[&str], wire: &str| {
            let mut args = command.to_vec();
            args.extend(["--model", model.to_str().unwrap(), "--json", "--wire", wire, "--cluster-key", KEY]);
            args.extend(["--worker", worker.address.as_str(), "--max-memory", master_memory.as_str()]);
            if dtype.is_some() {
                args.extend(["--dtype", "f32"]);
            }
            cake_json(&args)
        };
        let nll =
            |out: &Value| -> Vec<f64> { out["nll"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect() };
        let score = ["perplexity", "--file", text.to_str().unwrap()];
        let (exact, half) = (nll(&over_the_wire(&score, "f32")), nll(&over_the_wire(&score, "f16")));
        assert!(exact.len() > 100 && exact.len() == half.len(), "{} and {} tokens", exact.len(), half.len());
        let shift = (mean(&exact) - mean(&half)).abs();
        let per_token = exact.iter().zip(&half).map(|(a, b)| (a - b).abs()).sum::<f64>() / exact.len() as f64;
        match dtype {
            Some(_) => assert!(shift < 1e-3 && per_token < 1e-3, "f32 compute: shift {shift}, per token {per_token}"),
            None => assert!(shift < 5e-3 && per_token < 0.1, "int8 activations: shift {shift}, per token {per_token}"),
        }
        if dtype.is_none() {
            // With int8 activations the rounding can flip a near-tie greedy
            // token (docs/cluster.md): tokens are compared in f32 compute.
            continue;
        }
        let generate =
            ["run", "--prompt", "The capital of France is", "--max-tokens", "48", "--temperature", "0", "--ignore-eos"];
        let (exact, half) = (over_the_wire(&generate, "f32"), over_the_wire(&generate, "f16"));
        assert_eq!(exact["tokens"], half["tokens"]);
        let bytes = |out: &Value| out["network_bytes"].as_f64().unwrap();
        let ratio = bytes(&half) / bytes(&exact);
        assert!((0.45..0.6).contains(&ratio), "f16 moved {ratio:.2} of f32's bytes");
    }
}

#[test]
fn a_master_with_the_wrong_key_is_refused() {
    let a = Worker::start(KEY, "a", None);
    let model = fixture("tiny/qwen2");
    let out = common::cake(&[
        "run",
        "--model",
        model.to_str().unwrap(),
        "--prompt-tokens",
        "5,6,7",
        "--max-tokens",
        "2",
        "--worker",
        &a.address,
        "--cluster-key",
        "not the right key",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("does not hold this cluster's key"), "{err}");
    assert!(!err.contains(KEY) && !err.contains("not the right key"), "the key must never be printed: {err}");
}

#[test]
fn workers_are_discovered_over_loopback_mdns_and_other_clusters_are_ignored() {
    let place = Place::new("discovery");
    let stranger = Worker::advertised(&place, STRANGER_KEY, "stranger", None);
    // Each model gets its own pair of workers, with memory caps that leave the
    // planner one choice: a third of the layers on each process (measured
    // speeds vary too much on a busy machine to rely on them).
    let discovered_run = |model: &Path, caps: [u64; 3], prompt: &[&str]| {
        let a = Worker::advertised(&place, DISCOVERY_KEY, "disc-a", Some(caps[1]));
        let b = Worker::advertised(&place, DISCOVERY_KEY, "disc-b", Some(caps[2]));
        let out = place
            .command(env!("CARGO_BIN_EXE_cake"))
            .args(["run", "--model", model.to_str().unwrap(), "--temperature", "0", "--ignore-eos", "--json"])
            .args(prompt)
            .args(["--cluster-key", DISCOVERY_KEY, "--mdns-iface", "lo", "--discovery-timeout", "3"])
            .args(["--max-memory", &caps[0].to_string()])
            .env("RAYON_NUM_THREADS", "2")
            .output()
            .unwrap();
        drop((a, b));
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{err}");
        assert!(err.contains("found worker disc-a") && err.contains("found worker disc-b"), "{err}");
        assert!(!err.contains("stranger"), "a worker of another cluster was used: {err}");
        assert!(!err.contains(DISCOVERY_KEY), "the key must never be printed");
        // Both workers hold layers: the model runs over three processes.
        for name in ["disc-a", "disc-b"] {
            let plan =
                err.lines().find(|l| l.starts_with(&format!("{name}: layers"))).unwrap_or_else(|| panic!("{err}"));
            assert!(!plan.contains("no layers"), "{plan}");
        }
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };

    // The default model: a third of the layers on each process.
    let model = common::server::default_model_file();
    let n = common::layer_count(&model);
    let third = n / 3;
    let caps = [
        share(&model, None, 0..third, true),
        share(&model, None, third..2 * third, false),
        share(&model, None, 2 * third..n, false),
    ];
    let prompt = ["--prompt", "The capital of France is", "--max-tokens", "24"];
    let split = discovered_run(&model, caps, &prompt);
    let mut single_args =
        vec!["run", "--model", model.to_str().unwrap(), "--temperature", "0", "--ignore-eos", "--json"];
    single_args.extend_from_slice(&prompt);
    let single = cake_json(&single_args);
    assert_eq!(split["tokens"], single["tokens"]);
    drop(stranger);
}

#[test]
fn a_worker_killed_mid_generation_is_noticed_and_the_reply_finishes() {
    use std::io::Read;
    use std::sync::mpsc;
    use std::time::{Duration, Instant};

    let model = common::server::default_model_file();
    let third = common::layer_count(&model) / 3;
    let a = Worker::start(KEY, "steady", None);
    let mut doomed = Worker::start(KEY, "doomed", None);
    let prompt = ["--prompt", "Once upon a time, in a small village by the sea,", "--max-tokens", "64"];

    let mut master = Command::new(env!("CARGO_BIN_EXE_cake"));
    master
        .args(["run", "--model", model.to_str().unwrap(), "--temperature", "0", "--ignore-eos"])
        .args(prompt)
        .args(["--max-memory", &share(&model, None, 0..third, true).to_string(), "--cluster-key", KEY])
        .args(["--worker", &a.address, "--worker", &doomed.address])
        .env("RAYON_NUM_THREADS", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut master = master.spawn().unwrap();
    let (lines_tx, lines_rx) = mpsc::channel::<(Instant, String)>();
    let stderr = master.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = lines_tx.send((Instant::now(), line));
        }
    });
    let mut stdout = master.stdout.take().unwrap();
    let mut streamed = Vec::new();
    let mut buf = [0u8; 64];
    while streamed.len() < 20 {
        let n = stdout.read(&mut buf).unwrap();
        assert!(n > 0, "the master ended before the worker was killed");
        streamed.extend_from_slice(&buf[..n]);
    }
    let before_kill = streamed.len();
    let killed_at = Instant::now();
    doomed.child.kill().unwrap(); // SIGKILL
    let _ = doomed.child.wait();
    stdout.read_to_end(&mut streamed).unwrap();
    let status = master.wait().unwrap();

    let stderr: Vec<(Instant, String)> = lines_rx.try_iter().collect();
    let log: Vec<&str> = stderr.iter().map(|(_, l)| l.as_str()).collect();
    assert!(status.success(), "{log:#?}");
    let planned = log.iter().find(|l| l.starts_with("doomed: layers")).expect("the plan is printed");
    assert!(!planned.contains("no layers"), "the doomed worker must hold layers: {planned}");
    let (noticed_at, _) = stderr.iter().find(|(_, l)| l.contains("lost worker doomed")).expect("the loss is reported");
    let delay = noticed_at.saturating_duration_since(killed_at);
    assert!(delay < Duration::from_secs(5), "noticed after {delay:?}");

    let mut single_args =
        vec!["run", "--model", model.to_str().unwrap(), "--temperature", "0", "--ignore-eos", "--json"];
    single_args.extend_from_slice(&prompt);
    let single = cake_json(&single_args);
    let text = String::from_utf8(streamed).unwrap();
    let single = single["text"].as_str().unwrap();
    // Before the loss the reply is the single machine's; after it, the prompt
    // and the reply so far are processed again in one batch, whose rounding
    // differs slightly from token-by-token decoding, so the greedy
    // continuation may take another (equally valid) path.
    assert_eq!(text.as_bytes()[..before_kill], single.as_bytes()[..before_kill], "the reply before the loss");
    assert!(text.len() > before_kill + 60, "the reply went on after the loss: {text:?}");
}

#[test]
fn cake_serve_answers_through_the_cluster() {
    let model = common::server::default_model_file();
    let half = common::layer_count(&model) / 2;
    let worker = Worker::start(KEY, "serve-helper", None);
    let root = tempfile::tempdir().unwrap();
    let data = common::server::data_dir_with_default_model(root.path());
    let memory = share(&model, None, 0..half, true).to_string();
    let server = common::server::Server::start_with_env(
        &data,
        &root.path().join("hf"),
        // Master and worker share this machine's kernel: pipelining is asked for.
        &["--worker", &worker.address, "--max-memory", &memory, "--decode-steps", "pipelined"],
        &[("CAKE_CLUSTER_KEY", KEY)],
    );
    let (status, reply) = server.post(
        "/v1/chat/completions",
        &serde_json::json!({"model": "default", "messages": [{"role": "user", "content": "What is the capital of France?"}],
                            "temperature": 0, "max_tokens": 12}),
    );
    assert_eq!(status, 200, "{reply}");
    // One process's chat reply to `prompt` (after `system`, if any).
    let single = |system: Option<&str>, prompt: &str| {
        let mut args = vec!["run", "--model", model.to_str().unwrap(), "--chat", "--prompt", prompt];
        args.extend(["--temperature", "0", "--max-tokens", "12", "--json"]);
        args.extend(system.iter().flat_map(|system| ["--system", system]));
        cake_json(&args)["text"].clone()
    };
    assert_eq!(reply["choices"][0]["message"]["content"], single(None, "What is the capital of France?"));
    let cached = std::fs::read_dir(worker.data.path().join("worker-cache")).map_or(0, |d| d.count());
    assert_eq!(cached, 1, "the worker received the weights of its layers");

    // Chats in flight together step together on both machines, in two
    // groups whose steps are in flight at once (one on each machine), and
    // each replies as it does alone.
    let prompts = ["Name three rivers.", "Count to four.", "Say good night in German."];
    let chat = |prompt: &str| {
        let body = serde_json::json!({
            "model_id": "default", "messages": [{"role": "user", "content": prompt}],
            "sampling": {"temperature": 0.0}, "max_tokens": 16,
        });
        let done = server.chat_done(&body);
        let stat = |name: &str| done["stats"][name].as_u64().unwrap_or(1);
        (done["text"].as_str().unwrap().to_string(), stat("decoded_together"), stat("groups_in_flight"))
    };
    let alone: Vec<String> = prompts.iter().map(|p| chat(p).0).collect();
    // A fourth chat, closed after its first tokens, leaves the others as they were.
    let long = serde_json::json!({
        "model_id": "default", "messages": [{"role": "user", "content": "Tell me a very long story."}],
        "sampling": {"temperature": 0.0}, "max_tokens": 2000,
    });
    let together: Vec<(String, u64, u64)> = std::thread::scope(|scope| {
        let handles: Vec<_> = prompts.iter().map(|p| scope.spawn(|| chat(p))).collect();
        let (status, payloads) = server.stream("/app/chat", &long, |i, _| i < 3);
        assert_eq!((status, payloads.len()), (200, 4));
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(chat(prompts[0]).1, 1, "the closed chat was still decoding");
    assert_eq!(together.iter().map(|(text, _, _)| text.clone()).collect::<Vec<_>>(), alone);
    assert!(together.iter().any(|&(_, n, _)| n >= 2), "never decoded together over the cluster: {together:?}");
    assert!(together.iter().any(|&(_, _, g)| g == 2), "steps never pipelined over the cluster: {together:?}");
    let (_, cluster) = server.post("/app/cluster_status", &serde_json::json!({}));
    assert_eq!(cluster["run"]["decode_steps"]["pipelined"], true, "the cluster view says so: {cluster}");

    // A conversation sharing the last one's system prompt starts from a
    // copy of its cached positions, here and on the worker, and replies
    // as one process does.
    let system = "You are a careful assistant who answers in one short sentence.";
    let questions =
        ["What is bread made of, and how did bakers in different countries make it long ago?", "Name a river."];
    for (turn, question) in questions.into_iter().enumerate() {
        let body = serde_json::json!({"model": "default", "temperature": 0, "max_tokens": 12,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": question}]});
        let (status, reply) = server.post("/v1/chat/completions", &body);
        assert_eq!(status, 200, "{reply}");
        assert_eq!(reply["choices"][0]["message"]["content"], single(Some(system), question), "{question}");
        let cached = reply["usage"]["prompt_tokens_details"]["cached_tokens"].as_u64().unwrap();
        assert!(turn == 0 || cached >= 12, "{cached} prompt tokens from the cache over the cluster");
    }
    // Asked again (as Regenerate does), the last prompt is read from its
    // own cache cut back, here and on the worker, but for its last token.
    let body = serde_json::json!({"model": "default", "temperature": 0, "max_tokens": 12,
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": questions[1]}]});
    let (status, reply) = server.post("/v1/chat/completions", &body);
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply["choices"][0]["message"]["content"], single(Some(system), questions[1]), "asked again");
    let (cached, prompt) =
        (&reply["usage"]["prompt_tokens_details"]["cached_tokens"], &reply["usage"]["prompt_tokens"]);
    assert_eq!(cached.as_u64().unwrap() + 1, prompt.as_u64().unwrap(), "asked again: {}", reply["usage"]);
}

#[test]
fn a_topology_file_fixes_some_layers_and_the_rest_is_planned() {
    let model = common::server::default_model_file();
    let n = common::layer_count(&model);
    let fixed = Worker::start(KEY, "fixed", None);
    let free = Worker::start(KEY, "free", None);
    let dir = tempfile::tempdir().unwrap();
    let topology = dir.path().join("topology.yaml");
    std::fs::write(
        &topology,
        format!(
            "fixed:\n  host: {}\n  description: holds the last layers\n  layers: ['model.layers.{}-{}']\nfree:\n  host: {}\n",
            fixed.address,
            2 * n / 3,
            n - 1,
            free.address
        ),
    )
    .unwrap();
    let prompt = ["--prompt", "The capital of France is", "--max-tokens", "16"];
    let mut args = vec!["run", "--model", model.to_str().unwrap(), "--temperature", "0", "--ignore-eos", "--json"];
    args.extend_from_slice(&prompt);
    let single = cake_json(&args);
    let memory = share(&model, None, 0..n / 3, true).to_string();
    args.extend(["--cluster-key", KEY, "--topology", topology.to_str().unwrap(), "--max-memory", &memory]);
    let out = common::cake(&args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains(&format!(
            "fixed: layers {}..{n} — layers {}-{}, as the topology file says",
            2 * n / 3,
            2 * n / 3,
            n - 1
        )),
        "{err}"
    );
    assert!(err.contains("free: layers "), "{err}");
    let split: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(split["tokens"], single["tokens"]);

    // A topology the model cannot follow is refused with the reason.
    std::fs::write(&topology, format!("fixed:\n  host: {}\n  layers: ['model.layers.0-{}']\n", fixed.address, n + 3))
        .unwrap();
    let err = common::cake_error(&args);
    assert!(err.contains("do not exist"), "{err}");
}

#[test]
fn the_app_continues_a_reply_when_a_worker_dies() {
    use std::time::{Duration, Instant};
    let model = common::server::default_model_file();
    let third = common::layer_count(&model) / 3;
    let steady = Worker::start(KEY, "steady", None);
    let mut doomed = Worker::start(KEY, "doomed", None);
    let root = tempfile::tempdir().unwrap();
    let data = common::server::data_dir_with_default_model(root.path());
    let memory = share(&model, None, 0..third, true).to_string();
    let server = common::server::Server::start_with_env(
        &data,
        &root.path().join("hf"),
        // Pipelined: the worker dies with steps of both chats in flight.
        &[
            "--worker",
            &steady.address,
            "--worker",
            &doomed.address,
            "--max-memory",
            &memory,
            "--decode-steps",
            "pipelined",
        ],
        &[("CAKE_CLUSTER_KEY", KEY)],
    );
    let request = serde_json::json!({
        "model_id": "default", "max_tokens": 48, "sampling": {"temperature": 0},
        "messages": [{"role": "user", "content": "Tell me a long story about a lighthouse keeper."}],
    });
    // A second chat in flight at the same time continues too.
    let other = serde_json::json!({
        "model_id": "default", "max_tokens": 48, "sampling": {"temperature": 0},
        "messages": [{"role": "user", "content": "Describe a harbour at dawn."}],
    });
    let mut killed_at = None;
    let mut noticed_at = None;
    let mut tokens = 0;
    let ((status, events), (other_status, other_events)) = std::thread::scope(|scope| {
        let other = scope.spawn(|| server.stream("/app/chat", &other, |_, _| true));
        let first = server.stream("/app/chat", &request, |_, payload| {
            tokens += usize::from(payload.contains("\"token\""));
            if tokens == 8 && killed_at.is_none() {
                doomed.child.kill().unwrap(); // SIGKILL
                let _ = doomed.child.wait();
                killed_at = Some(Instant::now());
            }
            if payload.contains("\"notice\"") && noticed_at.is_none() {
                noticed_at = Some(Instant::now());
            }
            true
        });
        (first, other.join().unwrap())
    });
    assert_eq!(status, 200);
    assert_eq!(other_status, 200);
    let other_done: Value = serde_json::from_str(other_events.last().unwrap()).unwrap();
    assert_eq!(other_done["type"], "done", "{other_events:#?}");
    assert!(other_events.iter().any(|e| e.contains("lost worker doomed")), "{other_events:#?}");
    let notice = events.iter().find(|e| e.contains("\"notice\"")).unwrap_or_else(|| panic!("no notice: {events:#?}"));
    assert!(notice.contains("lost worker doomed"), "{notice}");
    let delay = noticed_at.unwrap().saturating_duration_since(killed_at.unwrap());
    assert!(delay < Duration::from_secs(5), "noticed after {delay:?}");
    let done: Value = serde_json::from_str(events.last().unwrap()).unwrap();
    assert_eq!(done["type"], "done", "{events:#?}");
    let tokens_streamed = events.iter().filter(|e| e.contains("\"token\"")).count();
    assert!(tokens_streamed > 9, "the reply went on after the loss: {events:#?}");
    let groups = |done: &Value| done["stats"]["groups_in_flight"].as_u64().unwrap_or(1);
    assert!(groups(&done).max(groups(&other_done)) == 2, "never pipelined: {done} {other_done}");
    // The cluster view names the lost machine; the next reply re-plans without it.
    let (_, status) = server.post("/app/cluster_status", &serde_json::json!({}));
    let stages = status["run"]["stages"].as_array().unwrap();
    assert!(stages.iter().all(|s| s["node"] != "doomed"), "re-planned without the lost worker: {status}");
    assert!(stages.iter().any(|s| s["node"] == "steady"), "{status}");
    assert_eq!(status["run"]["decode_steps"]["pipelined"], true, "{status}");
}

/// Streams an OpenAI chat completion, killing `doomed` once `after`
/// chunks have come; returns the stream's lines.
fn stream_killing(server: &common::server::Server, doomed: &mut Worker, after: usize) -> Vec<String> {
    let request = serde_json::json!({
        "model": "default", "stream": true, "max_tokens": 40, "temperature": 0,
        "messages": [{"role": "user", "content": "Tell me a long story about a lighthouse keeper."}],
    });
    let mut chunks = 0;
    let (status, lines) = server.stream_lines("/v1/chat/completions", &request, |line| {
        chunks += usize::from(line.starts_with("data: {"));
        if chunks == after {
            doomed.child.kill().unwrap(); // SIGKILL
            let _ = doomed.child.wait();
        }
    });
    assert_eq!(status, 200);
    assert_eq!(lines.last().map(String::as_str), Some("data: [DONE]"), "{lines:#?}");
    lines
}

/// Workers lost in two requests, one after the other: the second re-plan
/// leaves out the first lost worker too (named with --worker or not), each
/// reply goes on over the machines left and says so in a comment line,
/// the next request is served, and the cluster view shows both as lost.
/// When no machine is left that can hold the model, a stream ends with an
/// error chunk, a finish reason and [DONE], and the next request gets 503.
#[test]
fn workers_lost_one_after_another_leave_the_cluster_serving_with_those_left() {
    let model = common::server::default_model_file();
    let quarter = common::layer_count(&model) / 4;
    let mut first = Worker::start(KEY, "first-lost", None);
    let mut second = Worker::start(KEY, "second-lost", None);
    let mut last = Worker::start(KEY, "last-lost", None);
    let root = tempfile::tempdir().unwrap();
    let data = common::server::data_dir_with_default_model(root.path());
    // The master alone cannot hold the model: a worker must stay.
    let memory = share(&model, None, 0..quarter, true).to_string();
    let mut args = vec!["--max-memory", &memory];
    for worker in [&first, &second, &last] {
        args.extend(["--worker", worker.address.as_str()]);
    }
    let server =
        common::server::Server::start_with_env(&data, &root.path().join("hf"), &args, &[("CAKE_CLUSTER_KEY", KEY)]);
    for (doomed, name) in [(&mut first, "first-lost"), (&mut second, "second-lost")] {
        let lines = stream_killing(&server, doomed, 6);
        let notice = lines.iter().find(|l| l.starts_with(": notice:")).unwrap_or_else(|| panic!("{lines:#?}"));
        assert!(notice.contains(&format!("lost worker {name}")), "{notice}");
        assert!(lines.iter().any(|l| l.contains("\"finish_reason\":\"length\"")), "finished: {lines:#?}");
    }
    let (status, reply) = server.post(
        "/v1/chat/completions",
        &serde_json::json!({"model": "default", "max_tokens": 4, "messages": [{"role": "user", "content": "Hi"}]}),
    );
    assert_eq!(status, 200, "served by the machines left: {reply}");
    let (_, view) = server.post("/app/cluster_status", &serde_json::json!({}));
    let state = |name: &str| {
        let machines = view["machines"].as_array().unwrap();
        machines.iter().find(|m| m["name"] == name).map(|m| m["state"].clone()).unwrap_or_default()
    };
    assert_eq!((state("first-lost"), state("second-lost")), ("lost".into(), "lost".into()), "{view}");
    let stages = view["run"]["stages"].as_array().unwrap();
    assert!(stages.iter().all(|s| s["node"] != "first-lost" && s["node"] != "second-lost"), "{view}");

    // The last worker goes too: the master cannot hold the model alone.
    let lines = stream_killing(&server, &mut last, 6);
    let error = lines.iter().find(|l| l.contains("\"error\":{")).unwrap_or_else(|| panic!("{lines:#?}"));
    assert!(error.contains("lost worker last-lost"), "{error}");
    assert!(lines.iter().any(|l| l.contains("\"finish_reason\":\"error\"")), "{lines:#?}");
    let (status, body) = server.post(
        "/v1/chat/completions",
        &serde_json::json!({"model": "default", "max_tokens": 4, "messages": [{"role": "user", "content": "Hi"}]}),
    );
    assert_eq!(status, 503, "retrying may help once a worker is back: {body}");
}

#[test]
fn a_workers_mdns_record_holds_its_cluster_id_and_nothing_from_the_secret() {
    use mdns_sd::{IfKind, ServiceDaemon, ServiceEvent};
    use std::collections::BTreeMap;
    use std::time::{Duration, Instant};

    let place = Place::new("txt");
    let _worker = Worker::advertised(&place, DISCOVERY_KEY, "txt-check", None);
    let record: BTreeMap<String, String> = place.run(|| {
        let daemon = ServiceDaemon::new().unwrap();
        daemon.disable_interface(IfKind::All).unwrap();
        daemon.enable_interface(IfKind::LoopbackV4).unwrap();
        let events = daemon.browse("_cake._tcp.local.").unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        let record = loop {
            let left = deadline.checked_duration_since(Instant::now()).expect("the worker is seen within 10 s");
            if let Ok(ServiceEvent::ServiceResolved(service)) = events.recv_timeout(left) {
                if service.get_property_val_str("name") == Some("txt-check") {
                    break service
                        .get_properties()
                        .iter()
                        .map(|p| (p.key().to_string(), p.val_str().to_string()))
                        .collect();
                }
            }
        };
        let _ = daemon.shutdown();
        record
    });
    let keys: Vec<&str> = record.keys().map(String::as_str).collect();
    assert_eq!(keys, ["cluster", "name", "v"], "{record:?}");
    assert_eq!(record["cluster"], "discover");
    let secret_words = DISCOVERY_KEY.split('-').skip(2);
    for word in secret_words {
        assert!(record.values().all(|v| !v.contains(word)), "{word} is in {record:?}");
    }
}

/// With a 4 096-token context, a worker whose cap holds its share's weights
/// but not their KV cache is given fewer layers (another machine takes the
/// rest), or the model is refused with what is missing when no machine can;
/// and the KV cache the worker allocates at full context is the plan's figure.
#[test]
fn plans_count_the_kv_cache_and_workers_hold_what_was_planned() {
    use cake::models::{loader::Checkpoint, loader::LoadOptions, memory_needs::MemoryNeeds};
    let model = common::server::default_model_file();
    let options = LoadOptions { context_length: Some(4096), ..Default::default() };
    let needs = MemoryNeeds::of(&Checkpoint::open(&model).unwrap(), &options).unwrap();
    let n = needs.layer_weights.len();
    let half = n / 2;
    let weights_only = MemoryNeeds { layer_kv: vec![0; n], ..needs.clone() };
    let worker_cap = weights_only.machine_bytes(half..n, false);
    assert!(needs.machine_bytes(half..n, false) > worker_cap, "the KV cache tips the balance");
    let master_cap = needs.machine_bytes(0..half, true).to_string();
    let capped = Worker::start(KEY, "kv-capped", Some(worker_cap));
    let prompt: Vec<u64> = (0..3500).map(|i| 1000 + (i * 7919) % 20000).collect();
    let prompt = join_ids(&prompt);
    let run = ["run", "--model", model.to_str().unwrap(), "--prompt-tokens", &prompt, "--max-tokens", "4"];
    let greedy = ["--temperature", "0", "--ignore-eos", "--json", "--ctx", "4096"];
    let cluster = ["--cluster-key", KEY, "--max-memory", &master_cap, "--worker", &capped.address];

    // Alone with the master, the capped worker cannot take the other half.
    let err = common::cake_error(&[&run[..], &greedy[..], &cluster[..]].concat());
    assert!(err.contains("KV cache for 4096 tokens") && err.contains("missing"), "{err}");

    // With a second worker the layers are split again.
    let roomy = Worker::start(KEY, "kv-roomy", None);
    let split = cake_json(&[&run[..], &greedy[..], &cluster[..], &["--worker", &roomy.address][..]].concat());
    let single = cake_json(&[&run[..], &greedy[..]].concat());
    assert_eq!(split["tokens"], single["tokens"]);
    let stage = split["stages"].as_array().unwrap().iter().find(|s| s["node"] == "kv-capped").expect("a stage");
    let [start, end] = [0, 1].map(|i| stage["layers"][i].as_u64().unwrap() as usize);
    assert!(end - start < n - half, "the capped worker got layers {start}..{end}");
    assert!(needs.machine_bytes(start..end, false) <= worker_cap);
    let planned: u64 = needs.layer_kv[start..end].iter().sum();
    let allocated = stage["kv_bytes"].as_u64().unwrap();
    let ratio = allocated as f64 / planned as f64;
    assert!((0.9..=1.1).contains(&ratio), "allocated {allocated} bytes of KV cache, planned {planned}");
}

/// `cake run --plan` over two workers on loopback contacts them, measures
/// each link and compares this machine alone, all three machines and the
/// best subset, each with its layers, memory and predicted speed, without
/// loading anything anywhere. With the master capped below the model,
/// "alone" is refused with the missing amount and a plan over the workers
/// is picked, with its reason.
#[test]
fn the_placement_preview_compares_plans_without_loading() {
    let model = common::server::default_model_file();
    let layers = common::layer_count(&model);
    let a = Worker::start(KEY, "a", None);
    let b = Worker::start(KEY, "b", None);
    let cap = share(&model, None, 0..layers / 3, true).to_string();
    let preview = cake_json(&[
        "run",
        "--model",
        model.to_str().unwrap(),
        "--plan",
        "--json",
        "--max-memory",
        &cap,
        "--cluster-key",
        KEY,
        "--worker",
        &a.address,
        "--worker",
        &b.address,
    ]);
    let options = preview["options"].as_array().unwrap();
    let labels: Vec<&str> = options.iter().map(|o| o["label"].as_str().unwrap()).collect();
    assert_eq!(&labels[..2], ["this machine alone", "all 3 machines"], "{preview:#}");
    assert_eq!(options.len(), 3, "alone, all, and the best subset: {preview:#}");
    assert!(options[0]["refused"].as_str().unwrap().contains("missing"), "{preview:#}");
    let chosen = preview["chosen"].as_u64().unwrap() as usize;
    assert_ne!(chosen, 0, "{preview:#}");
    assert!(preview["reason"].as_str().unwrap().contains("tok/s"), "{preview:#}");
    for option in &options[1..] {
        let stages = option["plan"]["stages"].as_array().unwrap();
        let covered: u64 =
            stages.iter().map(|s| s["layers"]["end"].as_u64().unwrap() - s["layers"]["start"].as_u64().unwrap()).sum();
        assert_eq!(covered, layers as u64, "{option:#}");
        let prediction = &option["prediction"];
        assert!(prediction["decode_tokens_per_second"].as_f64().unwrap() > 1.0, "{option:#}");
        assert!(prediction["first_token_seconds"].as_f64().unwrap() > 0.0, "{option:#}");
        // Loopback: a hop costs well under a few milliseconds, but something.
        let link = prediction["link_seconds_per_token"].as_f64().unwrap();
        assert!(link > 0.0 && link < 0.02, "{option:#}");
    }
    // Nothing was sent to the workers: their weight caches stay empty.
    for worker in [&a, &b] {
        let stored: u64 = walk_bytes(worker.data.path());
        assert!(stored < 100_000, "worker holds {stored} bytes after a preview");
    }
}

/// Bytes of the files under `folder`.
fn walk_bytes(folder: &Path) -> u64 {
    std::fs::read_dir(folder).map_or(0, |entries| {
        entries
            .flatten()
            .map(|e| match e.file_type() {
                Ok(t) if t.is_dir() => walk_bytes(&e.path()),
                _ => e.metadata().map_or(0, |m| m.len()),
            })
            .sum()
    })
}

/// Two adverts naming the port of one real worker (say, spoofed by
/// someone on the LAN) lead to one machine in every plan, not three stages
/// on one process: the worker's per-process id gives them away.
#[test]
fn adverts_that_all_reach_one_worker_plan_it_once() {
    use cake::cluster::secure_channel::PROTOCOL_VERSION;
    use mdns_sd::{IfKind, ServiceDaemon, ServiceInfo};

    let place = Place::new("spoof");
    let genuine = Worker::advertised(&place, DISCOVERY_KEY, "genuine", None);
    let port: u16 = genuine.address.rsplit(':').next().unwrap().parse().unwrap();
    let spoofer = place.run(|| {
        let daemon = ServiceDaemon::new().unwrap();
        daemon.disable_interface(IfKind::All).unwrap();
        daemon.enable_interface(IfKind::LoopbackV4).unwrap();
        for name in ["spoof-1", "spoof-2"] {
            let properties =
                [("name", name.to_string()), ("v", PROTOCOL_VERSION.to_string()), ("cluster", "discover".to_string())];
            let host = format!("{name}.local.");
            let info = ServiceInfo::new("_cake._tcp.local.", name, &host, "127.0.0.1", port, &properties[..]).unwrap();
            daemon.register(info).unwrap();
        }
        daemon
    });
    let model = fixture("tiny/llama_tied");
    let out = place
        .command(env!("CARGO_BIN_EXE_cake"))
        .args(["run", "--model", model.to_str().unwrap(), "--plan", "--json"])
        .args(["--cluster-key", DISCOVERY_KEY, "--mdns-iface", "lo", "--discovery-timeout", "3"])
        .output()
        .unwrap();
    let _ = spoofer.shutdown();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    for name in ["genuine", "spoof-1", "spoof-2"] {
        assert!(err.contains(&format!("found worker {name}")), "{name} was not found: {err}");
    }
    assert_eq!(err.matches("is worker genuine again: planned once").count(), 2, "{err}");
    let preview: Value = serde_json::from_slice(&out.stdout).unwrap();
    for option in preview["options"].as_array().unwrap() {
        let machines: Vec<&str> = option["machines"].as_array().unwrap().iter().map(|m| m.as_str().unwrap()).collect();
        assert!(machines.len() <= 2 && !machines.iter().any(|m| m.contains("spoof")), "{preview:#}");
    }
}

/// A `cake run` over two workers that something stops (a harness's
/// timeout, `kill`) says on stderr which signal stopped it, after how long
/// and what it was doing, and ends with that signal's status, rather than
/// ending without a word (its `--json` answer comes only at the end).
#[test]
fn a_cluster_run_stopped_by_a_signal_says_why() {
    let model = common::server::default_model_file();
    let third = common::layer_count(&model) / 3;
    let (a, b) = (Worker::start(KEY, "sig-a", None), Worker::start(KEY, "sig-b", None));
    let mut master = Command::new(env!("CARGO_BIN_EXE_cake"))
        .args(["run", "--model", model.to_str().unwrap(), "--temperature", "0", "--ignore-eos", "--json"])
        .args(["--prompt", "Once upon a time", "--max-tokens", "4000"])
        .args(["--max-memory", &share(&model, None, 0..third, true).to_string(), "--cluster-key", KEY])
        .args(["--worker", &a.address, "--worker", &b.address])
        .env("RAYON_NUM_THREADS", "2")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(master.stderr.take().unwrap()).lines();
    let mut seen = Vec::new();
    // The plan's last line comes once the model is loaded over the three.
    for line in lines.by_ref() {
        let line = line.unwrap();
        let loaded = line.starts_with("kernels:");
        seen.push(line);
        if loaded {
            break;
        }
    }
    assert!(seen.last().is_some_and(|l| l.starts_with("kernels:")), "{seen:#?}");
    std::thread::sleep(std::time::Duration::from_secs(2));
    // SAFETY: a plain kill(2) of our own child.
    assert_eq!(unsafe { libc::kill(master.id() as libc::pid_t, libc::SIGTERM) }, 0);
    let status = master.wait().unwrap();
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let said = rest.join("\n");
    assert_eq!(status.code(), Some(128 + libc::SIGTERM), "{said}");
    assert!(said.contains("error: stopped by SIGTERM after") && said.contains("while generating ("), "{said}");
    drop((a, b));
}
