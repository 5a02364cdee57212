//! A master and two worker processes on loopback: the layers split over
//! three processes give exactly the single-process output.

mod common;

use cake::models::loader::Checkpoint;
use common::{cake_json, fixture, join_ids};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

const KEY: &str = "loopback cluster key";

/// A `cake worker` process on a free loopback port.
struct Worker {
    child: Child,
    address: String,
}

impl Worker {
    fn start(name: &str, max_memory: Option<u64>) -> Self {
        let mut command = Command::new(env!("CARGO_BIN_EXE_cake"));
        command
            .args(["worker", "--name", name, "--host", "127.0.0.1", "--port", "0"])
            .env("CAKE_CLUSTER_KEY", KEY)
            .env("RAYON_NUM_THREADS", "1")
            .stderr(Stdio::piped());
        if let Some(bytes) = max_memory {
            command.args(["--max-memory", &bytes.to_string()]);
        }
        let mut child = command.spawn().expect("cake worker starts");
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let address = loop {
            let line = lines.next().expect("the worker reports its address").unwrap();
            if let Some(rest) = line.split(" ready on ").nth(1) {
                break rest.split_whitespace().next().unwrap().to_string();
            }
        };
        std::thread::spawn(move || for _ in lines {});
        Self { child, address }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs greedy generation over the two workers, the master holding at most `master_memory`.
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

#[test]
fn tiny_models_split_over_three_processes_match_transformers() {
    for family in ["llama3_rope_scaling", "llama_tied", "qwen2", "qwen3", "mistral_window"] {
        let dir = fixture(&format!("tiny/{family}"));
        let (layers, other) = Checkpoint::open(&dir).unwrap().layer_bytes().unwrap();
        assert_eq!(layers.len(), 2);
        // The master keeps only the embedding and head; each worker fits one layer.
        let a = Worker::start("a", Some(layers[0]));
        let b = Worker::start("b", Some(layers[1]));
        let reference: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("reference.json")).unwrap()).unwrap();
        let prompt: Vec<u64> = reference["prompt_tokens"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
        let out = distributed_tokens(&dir, &["--prompt-tokens", &join_ids(&prompt), "--max-tokens", "16"], &[&a, &b], other);
        assert_eq!(out["tokens"], reference["greedy_tokens"], "{family}");
    }
}

#[test]
fn default_model_split_over_three_processes_matches_one_process() {
    let model = common::server::default_model_file();
    let (layers, other) = Checkpoint::open(&model).unwrap().layer_bytes().unwrap();
    let third: u64 = layers.iter().take(layers.len() / 3).sum();
    let a = Worker::start("a", Some(third));
    let b = Worker::start("b", None);
    let prompt = ["--prompt", "The capital of France is", "--max-tokens", "24"];
    let split = distributed_tokens(&model, &prompt, &[&a, &b], other + third);
    let mut single_args = vec!["run", "--model", model.to_str().unwrap(), "--temperature", "0", "--ignore-eos", "--json"];
    single_args.extend_from_slice(&prompt);
    let single = cake_json(&single_args);
    assert_eq!(split["tokens"], single["tokens"]);
    assert_eq!(split["text"], single["text"]);
}

#[test]
fn a_master_with_the_wrong_key_is_refused() {
    let a = Worker::start("a", None);
    let model = fixture("tiny/qwen2");
    let out = common::cake(&[
        "run", "--model", model.to_str().unwrap(), "--prompt-tokens", "5,6,7", "--max-tokens", "2",
        "--worker", &a.address, "--cluster-key", "not the right key",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("does not hold this cluster's key"), "{err}");
    assert!(!err.contains(KEY) && !err.contains("not the right key"), "the key must never be printed: {err}");
}
