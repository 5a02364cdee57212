//! Tiny random checkpoints of every family agree with transformers.
//!
//! `tests/fixtures/generate_tiny_models.py` wrote each model folder and the
//! outputs transformers computed on it (`reference.json`); these tests run
//! the `cake` binary on the same folders and inputs.

mod common;

use common::{cake_json, fixture, join_ids};
use serde_json::Value;

fn reference(family: &str) -> Value {
    let path = fixture(&format!("tiny/{family}/reference.json"));
    serde_json::from_str(&std::fs::read_to_string(&path).expect("reference.json")).expect("valid JSON")
}

fn ids(value: &Value) -> Vec<u64> {
    value.as_array().expect("array of ids").iter().map(|v| v.as_u64().expect("id")).collect()
}

/// The model of `family`: its folder, or with `file` a file in it (a GGUF
/// conversion of the same weights).
fn model_of(family: &str, file: Option<&str>) -> std::path::PathBuf {
    let folder = fixture(&format!("tiny/{family}"));
    file.map_or(folder.clone(), |f| folder.join(f))
}

/// Cake's per-token NLL of the reference's tokens (`cake perplexity` with
/// `extra` arguments), next to transformers', checked to be as many.
fn nll_beside_transformers(family: &str, file: Option<&str>, extra: &[&str]) -> (Vec<f64>, Vec<f64>) {
    let reference = reference(family);
    let model = model_of(family, file);
    let tokens = join_ids(&ids(&reference["nll_tokens"]));
    let mut args = vec!["perplexity", "--model", model.to_str().unwrap(), "--tokens", &tokens, "--json"];
    args.extend_from_slice(extra);
    let out = cake_json(&args);
    let values = |v: &Value| -> Vec<f64> { v.as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect() };
    let (ours, theirs) = (values(&out["nll"]), values(&reference["nll"]));
    assert_eq!(ours.len(), theirs.len(), "{family}: number of scored tokens");
    (ours, theirs)
}

fn check_nll_matches_transformers(family: &str, file: Option<&str>) {
    // transformers' reference runs in f32 (a no-op for the f32 fixtures;
    // the FP8 one keeps its weights in F8E4M3 and computes in f32).
    let (ours, theirs) = nll_beside_transformers(family, file, &["--dtype", "f32"]);
    for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
        assert!((a - b).abs() < 1e-3, "{family} {file:?}: nll[{i}] is {a}, transformers says {b}");
    }
}

/// `cake run --json` of the reference's prompt, 16 greedy tokens in f32
/// with `extra` arguments.
fn greedy_run(family: &str, file: Option<&str>, extra: &[&str]) -> Value {
    let reference = reference(family);
    let model = model_of(family, file);
    let prompt = join_ids(&ids(&reference["prompt_tokens"]));
    let mut args = vec![
        "run",
        "--model",
        model.to_str().unwrap(),
        "--prompt-tokens",
        &prompt,
        "--temperature",
        "0",
        "--max-tokens",
        "16",
        "--ignore-eos",
        "--dtype",
        "f32",
        "--json",
    ];
    args.extend_from_slice(extra);
    cake_json(&args)
}

fn check_greedy_matches_transformers(family: &str, file: Option<&str>, no_kv_cache: bool) {
    let extra: &[&str] = if no_kv_cache { &["--no-kv-cache"] } else { &[] };
    let out = greedy_run(family, file, extra);
    assert_eq!(
        ids(&out["tokens"]),
        ids(&reference(family)["greedy_tokens"]),
        "{family} {file:?} (no_kv_cache = {no_kv_cache}): greedy continuation differs from transformers"
    );
}

/// Decode steps of several sequences on the GPU (each row over its own
/// cache in VRAM) equal each step alone, windows and norms included.
#[test]
fn gpu_steps_of_several_sequences_equal_each_alone() {
    use cake::models::gpu_offload::{GpuMode, GpuRequest};
    for family in ["qwen3", "gemma3_hybrid", "mistral_window"] {
        check_streams_equal_each_alone_on(family, GpuRequest { mode: GpuMode::On, ..Default::default() });
    }
}

/// A GPU cache cut back (a conversation edited) or copied (a prompt
/// shared with another) continues as a fresh run does, through growth of
/// its buffers.
#[test]
fn gpu_caches_cut_and_copied_continue_as_fresh_ones() {
    use cake::models::decoder::LogitsFor;
    use cake::models::gpu_offload::{GpuMode, GpuRequest};
    use cake::text::model::{LoadOptions, TextModel};
    let gpu = GpuRequest { mode: GpuMode::On, ..Default::default() };
    let model = TextModel::load(&model_of("qwen3", None), &LoadOptions { gpu, ..Default::default() }).unwrap();
    assert_eq!(model.decoder().gpu.layers, [0, 1]);
    let tokens: Vec<u32> = (1..100).collect();
    let last = |session: &mut cake::models::pipeline::Session, part: &[u32]| {
        model.forward(part, session, LogitsFor::Last).unwrap().to_vec2::<f32>().unwrap()
    };
    let mut fresh = model.new_session();
    let want = last(&mut fresh, &tokens);
    let mut cut = model.new_session();
    last(&mut cut, &tokens[..90]);
    let mut copied = model.new_session();
    copied.cache = cut.cache.copy_prefix(30).unwrap().expect("a GPU cache copies");
    assert!(cut.cache.truncate(30), "a GPU cache cuts");
    for session in [&mut cut, &mut copied] {
        assert_eq!(session.cache.position(), 30);
        let got = last(session, &tokens[30..]);
        let gap = got[0].iter().zip(&want[0]).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
        assert!(gap <= 1e-4, "continued logits differ by {gap}");
    }
    for session in [fresh, cut, copied] {
        model.end_session(session);
    }
}

/// The families whose every layer the GPU runs (the others keep their
/// mixture-of-experts, Gated DeltaNet, gated-attention or FP8 layers on
/// the CPU and run the rest on the GPU).
const GPU_WHOLE: &[&str] = &[
    "llama3_rope_scaling",
    "llama_tied",
    "qwen2",
    "qwen3",
    "mistral_window",
    "olmo2",
    "phi4_mini_longrope",
    "phi3_window",
    "exaone4_hybrid",
    "gemma3_hybrid",
    "gemma3_gguf",
    "falcon3",
    "deepseek_r1_distill_qwen",
];

fn layer_count(family: &str) -> usize {
    let config: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture(&format!("tiny/{family}/config.json"))).unwrap())
            .unwrap();
    let text = config.get("text_config").unwrap_or(&config);
    text["num_hidden_layers"].as_u64().expect("num_hidden_layers") as usize
}

/// The GPU path (`--gpu on`: Mesa's lavapipe where there is no GPU) with
/// every layer offloaded and with the first half: per-token NLL within
/// 1e-3 of transformers and the same greedy tokens, and the placement
/// `--json` reports.
fn check_gpu_matches_transformers(family: &str, file: Option<&str>) {
    let layers = layer_count(family);
    for offloaded in [layers, layers / 2] {
        let count = offloaded.to_string();
        let gpu = ["--gpu", "on", "--gpu-layers", count.as_str()];
        let mut extra = vec!["--dtype", "f32"];
        extra.extend_from_slice(&gpu);
        let (ours, theirs) = nll_beside_transformers(family, file, &extra);
        for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
            assert!(
                (a - b).abs() < 1e-3,
                "{family} {file:?} on the GPU ({count} layers): nll[{i}] is {a}, transformers says {b}"
            );
        }
        let out = greedy_run(family, file, &gpu);
        assert_eq!(
            ids(&out["tokens"]),
            ids(&reference(family)["greedy_tokens"]),
            "{family} {file:?} on the GPU ({count} layers): greedy continuation differs from transformers"
        );
        let placement = &out["gpu"];
        assert!(placement["device"].is_string(), "{family}: no GPU used: {placement}");
        let placed = placement["layers"].as_array().expect("GPU layers").len();
        if GPU_WHOLE.contains(&family) {
            assert_eq!(placed, offloaded, "{family}: {placement}");
        } else {
            assert!(placed <= offloaded, "{family}: {placement}");
            // Asked for every layer, the load log says which stay and why.
            let reasons = placement["cpu_reasons"].as_array().unwrap();
            assert!(offloaded < layers || !reasons.is_empty(), "{family}: {placement}");
        }
    }
}

fn check_tokenizer_matches_transformers(family: &str, file: Option<&str>) {
    let reference = reference(family);
    let model = model_of(family, file);
    let out = cake_json(&[
        "run",
        "--model",
        model.to_str().unwrap(),
        "--prompt",
        reference["text"].as_str().unwrap(),
        "--max-tokens",
        "1",
        "--json",
    ]);
    assert_eq!(ids(&out["prompt_tokens"]), ids(&reference["text_tokens"]), "{family} {file:?}: tokenization");
}

macro_rules! family_tests {
    ($($module:ident => $family:literal),* $(,)?) => {
        /// The families given tests here, to check against the fixtures on disk.
        const FAMILIES: &[&str] = &[$($family),*];
        $(
        mod $module {
            #[test]
            fn nll_matches_transformers() {
                super::check_nll_matches_transformers($family, None);
            }
            #[test]
            fn greedy_with_kv_cache_matches_transformers() {
                super::check_greedy_matches_transformers($family, None, false);
            }
            #[test]
            fn greedy_without_kv_cache_matches_transformers() {
                super::check_greedy_matches_transformers($family, None, true);
            }
            #[test]
            fn tokenizer_matches_transformers() {
                super::check_tokenizer_matches_transformers($family, None);
            }
            #[test]
            fn steps_of_several_sequences_equal_each_alone() {
                super::check_streams_equal_each_alone($family);
            }
            #[test]
            fn gpu_offload_matches_transformers() {
                super::check_gpu_matches_transformers($family, None);
            }
        }
    )*};
}

/// Decode steps of three sequences together (prompts shorter and longer
/// than the 8-position windows of the windowed families) give each row
/// the logits its step alone gives: positions, windows, rotary variants,
/// norms and recurrent layers are kept per sequence.
fn check_streams_equal_each_alone(family: &str) {
    check_streams_equal_each_alone_on(family, Default::default());
}

fn check_streams_equal_each_alone_on(family: &str, gpu: cake::models::gpu_offload::GpuRequest) {
    use cake::models::decoder::LogitsFor;
    use cake::text::model::{LoadOptions, TextModel};
    let model = TextModel::load(&model_of(family, None), &LoadOptions { gpu, ..Default::default() }).unwrap();
    let prompts: [Vec<u32>; 3] = [vec![5, 9, 14], (20..32).collect(), (40..61).rev().collect()];
    let mut together: Vec<_> = prompts.iter().map(|_| model.new_session()).collect();
    let mut alone: Vec<_> = prompts.iter().map(|_| model.new_session()).collect();
    for (prompt, (a, b)) in prompts.iter().zip(together.iter_mut().zip(alone.iter_mut())) {
        model.hidden_states(prompt, a).unwrap();
        model.hidden_states(prompt, b).unwrap();
    }
    for (step, next) in [[7u32, 8, 9], [70, 80, 90], [3, 2, 1]].iter().enumerate() {
        let mut rows: Vec<_> = together.iter_mut().collect();
        let batched = model.forward_streams(next, &mut rows).unwrap().to_vec2::<f32>().unwrap();
        for (i, session) in alone.iter_mut().enumerate() {
            let single = model.forward(&next[i..i + 1], session, LogitsFor::Last).unwrap().to_vec2::<f32>().unwrap();
            let gap = single[0].iter().zip(&batched[i]).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
            assert!(gap <= 1e-4, "{family}: step {step}, sequence {i} differs by {gap} from its step alone");
        }
    }
    for session in together.into_iter().chain(alone) {
        model.end_session(session);
    }
}

#[test]
fn every_fixture_family_has_its_tests() {
    let mut listed: Vec<&str> = FAMILIES.to_vec();
    listed.sort();
    assert_eq!(listed, common::tiny_families(), "family_tests! and tests/fixtures/tiny disagree");
    let mut gguf: Vec<&str> = GGUF_FAMILIES.to_vec();
    gguf.sort();
    assert_eq!(gguf, common::tiny_gguf_families(), "gguf_tests! and the model-f32.gguf files disagree");
}

family_tests! {
    llama3_rope_scaling => "llama3_rope_scaling",
    llama_tied => "llama_tied",
    qwen2 => "qwen2",
    qwen3 => "qwen3",
    qwen3_moe => "qwen3_moe",
    qwen3_5_hybrid => "qwen3_5_hybrid",
    qwen3_5_moe => "qwen3_5_moe",
    qwen3_next => "qwen3_next",
    mistral_window => "mistral_window",
    olmo2 => "olmo2",
    phi4_mini_longrope => "phi4_mini_longrope",
    phi3_window => "phi3_window",
    exaone4_hybrid => "exaone4_hybrid",
    gemma3_hybrid => "gemma3_hybrid",
    gemma3_gguf => "gemma3_gguf",
    qwen3_moe_sparse => "qwen3_moe_sparse",
    qwen3_next_sparse => "qwen3_next_sparse",
    llama_fp8 => "llama_fp8",
    falcon3 => "falcon3",
    deepseek_r1_distill_qwen => "deepseek_r1_distill_qwen",
}

/// llama.cpp's own conversion of a fixture (`model-f32.gguf`, written by
/// `tests/fixtures/convert_tiny_to_gguf.py`) gives transformers' outputs on
/// the folder's weights: llama.cpp's tensor names, fused tensors, LongRoPE
/// factor tensors and window patterns are read as the folder's config.
macro_rules! gguf_tests {
    ($($module:ident => $family:literal),* $(,)?) => {
        const GGUF_FAMILIES: &[&str] = &[$($family),*];
        $(
        mod $module {
            const FILE: Option<&str> = Some("model-f32.gguf");
            #[test]
            fn gguf_nll_matches_transformers() {
                super::check_nll_matches_transformers($family, FILE);
            }
            #[test]
            fn gguf_greedy_matches_transformers() {
                super::check_greedy_matches_transformers($family, FILE, false);
            }
            #[test]
            fn gguf_tokenizer_matches_transformers() {
                super::check_tokenizer_matches_transformers($family, FILE);
            }
            #[test]
            fn gguf_gpu_offload_matches_transformers() {
                super::check_gpu_matches_transformers($family, FILE);
            }
        }
    )*};
}

gguf_tests! {
    llama_tied_gguf => "llama_tied",
    qwen2_gguf => "qwen2",
    qwen3_gguf => "qwen3",
    olmo2_gguf => "olmo2",
    phi3_window_gguf => "phi3_window",
    phi4_mini_longrope_gguf => "phi4_mini_longrope",
    exaone4_hybrid_gguf => "exaone4_hybrid",
    gemma3_gguf_gguf => "gemma3_gguf",
    qwen3_moe_sparse_gguf => "qwen3_moe_sparse",
    qwen3_5_hybrid_gguf => "qwen3_5_hybrid",
    qwen3_5_moe_gguf => "qwen3_5_moe",
    qwen3_next_sparse_gguf => "qwen3_next_sparse",
}

/// llama.cpp's Q8_0 conversions (8-bit weights wherever a row holds whole
/// 32-value blocks; `convert_tiny_to_gguf.py --outtype q8_0`) run on Cake's
/// quantized kernels: expert slices, value-head reordering and column
/// moves on quantized data included. On these random tiny models 8-bit
/// rounding moves each token's NLL by 0.02–0.06 nats on average; a wrong
/// reordering moves it by about 0.8.
#[test]
fn q8_0_conversions_score_close_to_transformers() {
    for family in ["olmo2", "phi4_mini_longrope", "qwen3_moe_sparse", "qwen3_5_moe", "qwen3_next_sparse", "gemma3_gguf"]
    {
        // The GPU reads the same blocks (Q8_0 where rows allow, F32 elsewhere).
        for extra in [&[][..], &["--gpu", "on"][..]] {
            let (ours, theirs) = nll_beside_transformers(family, Some("model-q8_0.gguf"), extra);
            let mean: f64 = ours.iter().zip(&theirs).map(|(a, b)| (a - b).abs()).sum::<f64>() / ours.len() as f64;
            assert!(mean < 0.1, "{family} {extra:?}: Q8_0 NLL is {mean:.3} nats per token from transformers' f32");
        }
    }
}

/// BF16 copies of llama.cpp's conversions (every matrix in bf16, as
/// llama.cpp's quantizer writes them; `convert_tiny_gguf_to_bf16.py`) are
/// read where they lie in the file, expert slices included, by Cake's
/// streaming kernel, and score as transformers' f32 does up to bf16's
/// rounding of the weights (8 significant bits): on these tiny models 0.005
/// to 0.006 nats per token, where a misread half (a wrong shift, a swapped
/// byte order) costs more than 1.
#[test]
fn bf16_conversions_stream_and_score_close_to_transformers() {
    for family in ["olmo2", "qwen3_moe_sparse"] {
        let (ours, theirs) = nll_beside_transformers(family, Some("model-bf16.gguf"), &[]);
        let mean: f64 = ours.iter().zip(&theirs).map(|(a, b)| (a - b).abs()).sum::<f64>() / ours.len() as f64;
        eprintln!("{family}: BF16 NLL is {mean:.4} nats per token from transformers' f32");
        assert!(mean < 0.03, "{family}: BF16 NLL is {mean:.4} nats per token from transformers' f32");
        let model = model_of(family, Some("model-bf16.gguf"));
        let prompt = join_ids(&ids(&reference(family)["prompt_tokens"]));
        let out = cake_json(&[
            "run",
            "--model",
            model.to_str().unwrap(),
            "--prompt-tokens",
            &prompt,
            "--max-tokens",
            "1",
            "--json",
        ]);
        let kernels = out["kernels"].as_array().expect("kernels in the JSON");
        let bf16: Vec<&Value> = kernels.iter().filter(|k| k["stored"] == "BF16").collect();
        assert!(!bf16.is_empty(), "{family}: no BF16 matrices counted: {kernels:?}");
        let bf16_kernel =
            |k: &&Value| k["kernel"] == "cake bf16 stream" || k["kernel"] == "cake bf16 stream, prompts in bf16 pairs";
        assert!(bf16.iter().all(bf16_kernel), "{family}: {kernels:?}");
        assert_eq!(out["kv_cache"], "f16", "{family}: a BF16 file keeps keys and values in f16, as llama.cpp does");
    }
}

/// Local (sliding-window) layers keep only the keys their window can still
/// see, and the outputs stay those of the uncapped reference (above).
#[test]
fn local_layers_cache_at_most_their_window() {
    use cake::text::model::{LoadOptions, TextModel};
    let model = TextModel::load(&fixture("tiny/gemma3_hybrid"), &LoadOptions::default()).unwrap();
    let tokens: Vec<u32> = ids(&reference("gemma3_hybrid")["nll_tokens"]).into_iter().map(|t| t as u32).collect();
    assert!(tokens.len() > 8, "the sequence is longer than the window");
    let mut session = model.new_session();
    model.hidden_states(&tokens[..tokens.len() - 1], &mut session).unwrap();
    model.hidden_states(&tokens[tokens.len() - 1..], &mut session).unwrap();
    let [local, global] = [&session.cache.layers[0], &session.cache.layers[1]];
    let n = tokens.len();
    assert_eq!((local.len(), local.first_position()), (n, n - 8), "the local layer keeps its window of 8");
    assert_eq!((global.len(), global.first_position()), (n, 0), "the global layer keeps everything");
}

/// FP8 layers stay one byte per weight in memory (plus their block scales):
/// about half of what the same layers take in bf16.
#[test]
fn fp8_layers_take_about_half_the_memory_of_bf16() {
    use cake::formats::safetensors::SafetensorsHeader;
    use cake::models::loader::{Checkpoint, LoadOptions};
    use cake::models::sources::selection::TensorSelection;
    let dir = fixture("tiny/llama_fp8");
    let checkpoint = Checkpoint::open(&dir).unwrap();
    let layers = TensorSelection { layers: 0..2, embedding: false, head: false };
    let options = LoadOptions { dtype: Some(candle_core::DType::BF16), ..Default::default() };
    let held = checkpoint.load_decoder(Some(layers), &options).unwrap().weight_bytes();
    // The same layers in bf16: two bytes for every weight (scales aside).
    let header = SafetensorsHeader::read(&dir.join("model.safetensors")).unwrap();
    let bf16: usize = header
        .tensors
        .iter()
        .filter(|(n, _)| n.starts_with("model.layers.") && !n.ends_with("_scale_inv"))
        .map(|(_, e)| e.shape.iter().product::<usize>() * 2)
        .sum();
    let ratio = held as f64 / bf16 as f64;
    eprintln!("FP8 layers hold {held} bytes, bf16 would hold {bf16}: {ratio:.3}");
    assert!((0.5..0.6).contains(&ratio), "FP8 layers hold {held} bytes against {bf16} in bf16 ({ratio:.3})");
}

/// The model library names each fixture's architecture and quantization.
#[test]
fn the_library_shows_architecture_and_quantization() {
    use cake::library::catalog::{Catalog, ModelStatus};
    let data = tempfile::tempdir().unwrap();
    let catalog = Catalog::new(data.path().join("data"), data.path().join("hf"));
    for (family, architecture, quantization) in [
        ("qwen3_moe", "qwen3_moe", None),
        ("gemma3_hybrid", "gemma3_text", None),
        ("phi4_mini_longrope", "phi3", None),
        ("exaone4_hybrid", "exaone4", None),
        ("olmo2", "olmo2", None),
        ("falcon3", "llama", None),
        ("llama_fp8", "llama", Some("fp8")),
    ] {
        let entry = catalog.import(&fixture(&format!("tiny/{family}"))).unwrap();
        assert_eq!(entry.status, ModelStatus::Complete, "{family}: {:?}", entry.problem);
        assert_eq!(entry.architecture.as_deref(), Some(architecture), "{family}");
        assert_eq!(entry.quantization.as_deref(), quantization, "{family}");
    }
    let gguf = catalog.import(&common::server::default_model_file()).unwrap();
    assert_eq!(gguf.quantization.as_deref(), Some("Q4_1"));
}

/// Released Qwen3.5 checkpoints are `Qwen3_5ForConditionalGeneration`: the
/// text model's config under `text_config` and its tensors under
/// `model.language_model.`. The same weights in that layout give the same NLL.
/// A copy of fixture `family` laid out as a multimodal checkpoint: its
/// config nested as `text_config` in `outer`, and every `model.*` tensor
/// renamed to `{prefix}*` (`lm_head.weight` to `head`, if it has one).
fn as_multimodal(family: &str, outer: Value, prefix: &str, head: &str) -> tempfile::TempDir {
    let src = fixture(&format!("tiny/{family}"));
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(&src).unwrap() {
        let entry = entry.unwrap();
        if entry.path().is_file() {
            std::fs::copy(entry.path(), dir.path().join(entry.file_name())).unwrap();
        }
    }
    let text_config: Value = serde_json::from_str(&std::fs::read_to_string(src.join("config.json")).unwrap()).unwrap();
    let mut outer = outer;
    outer["text_config"] = text_config;
    std::fs::write(dir.path().join("config.json"), outer.to_string()).unwrap();
    // Rename the tensors (the header only).
    let bytes = std::fs::read(src.join("model.safetensors")).unwrap();
    let header_len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: serde_json::Map<String, Value> = serde_json::from_slice(&bytes[8..8 + header_len]).unwrap();
    let renamed: serde_json::Map<String, Value> = header
        .into_iter()
        .map(|(name, entry)| match name.strip_prefix("model.") {
            Some(rest) => (format!("{prefix}{rest}"), entry),
            None if name == "lm_head.weight" => (head.to_string(), entry),
            None => (name, entry),
        })
        .collect();
    let new_header = serde_json::to_vec(&renamed).unwrap();
    let mut file = (new_header.len() as u64).to_le_bytes().to_vec();
    file.extend_from_slice(&new_header);
    file.extend_from_slice(&bytes[8 + header_len..]);
    std::fs::write(dir.path().join("model.safetensors"), file).unwrap();
    dir
}

/// The per-token NLL of the folder `dir` equals transformers' on `family`.
fn check_nll_of_folder(dir: &std::path::Path, family: &str) {
    let reference = reference(family);
    let out = cake_json(&[
        "perplexity",
        "--model",
        dir.to_str().unwrap(),
        "--tokens",
        &join_ids(&ids(&reference["nll_tokens"])),
        "--dtype",
        "f32",
        "--json",
    ]);
    let ours = out["nll"].as_array().unwrap();
    let theirs = reference["nll"].as_array().unwrap();
    assert_eq!(ours.len(), theirs.len(), "{family}: scored tokens");
    for (i, (ours, theirs)) in ours.iter().zip(theirs).enumerate() {
        let (a, b) = (ours.as_f64().unwrap(), theirs.as_f64().unwrap());
        assert!((a - b).abs() < 1e-3, "{family}: nll[{i}] is {a}, transformers says {b}");
    }
}

#[test]
fn qwen3_5_in_the_released_multimodal_layout_loads_its_text_model() {
    let outer = serde_json::json!({
        "architectures": ["Qwen3_5ForConditionalGeneration"],
        "model_type": "qwen3_5",
        "vision_config": {"model_type": "qwen3_5_vision", "depth": 1},
    });
    let dir = as_multimodal("qwen3_5_hybrid", outer, "model.language_model.", "lm_head.weight");
    check_nll_of_folder(dir.path(), "qwen3_5_hybrid");
}

/// Gemma 3's multimodal checkpoints, as transformers 5 saves them and as the
/// Hub's (saved by transformers 4) have them: the text model is read, the
/// vision tower left alone.
#[test]
fn gemma3_multimodal_checkpoints_in_both_layouts_load_their_text_model() {
    let outer = serde_json::json!({
        "architectures": ["Gemma3ForConditionalGeneration"],
        "model_type": "gemma3",
        "vision_config": {"model_type": "siglip_vision_model"},
        "mm_tokens_per_image": 256,
    });
    for (prefix, head) in
        [("model.language_model.", "lm_head.weight"), ("language_model.model.", "language_model.lm_head.weight")]
    {
        let dir = as_multimodal("gemma3_hybrid", outer.clone(), prefix, head);
        check_nll_of_folder(dir.path(), "gemma3_hybrid");
    }
}
