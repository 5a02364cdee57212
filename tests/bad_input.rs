//! Broken model files and bad requests give clear errors that name the file
//! and the problem, and never a panic or a huge allocation. Every input that
//! once made a fuzz target fail is replayed here, through the same entry
//! points the fuzzers drive (`cake::fuzz_targets`), without the fuzzer; each
//! case lives in `tests/fuzz_regressions/<target>/`.

mod common;

use cake::fuzz_targets::TARGETS;
use common::{cake_error, fixture};
use std::path::{Path, PathBuf};

/// Runs `cake run` on `model` and returns stderr, checking it did not panic.
fn run_error(model: &Path) -> String {
    let err = cake_error(&["run", "--model", model.to_str().unwrap(), "--prompt", "Hello", "--max-tokens", "1"]);
    assert!(!err.contains("panicked"), "cake panicked:\n{err}");
    err
}

fn assert_mentions(err: &str, needles: &[&str]) {
    for needle in needles {
        assert!(err.contains(needle), "error should mention {needle:?}:\n{err}");
    }
}

/// A copy of the tiny Llama fixture folder whose `model.safetensors` the test may break.
fn tiny_model_copy() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&fixture("tiny/llama_tied"), dir.path());
    let weights = dir.path().join("model.safetensors");
    (dir, weights)
}

/// A safetensors file from a raw header string and data bytes.
fn write_safetensors(path: &Path, header: &str, data: &[u8]) {
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header.as_bytes());
    bytes.extend_from_slice(data);
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn truncated_safetensors_data_is_reported() {
    let (dir, weights) = tiny_model_copy();
    let bytes = std::fs::read(&weights).unwrap();
    std::fs::write(&weights, &bytes[..bytes.len() / 2]).unwrap();
    let err = run_error(dir.path());
    assert_mentions(&err, &["model.safetensors", "truncated"]);
}

#[test]
fn safetensors_shorter_than_its_length_prefix_is_reported() {
    let (dir, weights) = tiny_model_copy();
    std::fs::write(&weights, [1u8, 2, 3]).unwrap();
    let err = run_error(dir.path());
    assert_mentions(&err, &["model.safetensors", "truncated"]);
}

#[test]
fn header_length_beyond_file_is_reported() {
    let (dir, weights) = tiny_model_copy();
    let mut bytes = 5000u64.to_le_bytes().to_vec();
    bytes.extend_from_slice(b"{}");
    std::fs::write(&weights, bytes).unwrap();
    let err = run_error(dir.path());
    assert_mentions(&err, &["model.safetensors", "5000 bytes", "truncated"]);
}

#[test]
fn absurd_header_length_is_refused_without_allocating_it() {
    let (dir, weights) = tiny_model_copy();
    let mut bytes = u64::MAX.to_le_bytes().to_vec();
    bytes.extend_from_slice(b"{}");
    std::fs::write(&weights, bytes).unwrap();
    let err = run_error(dir.path());
    assert_mentions(&err, &["model.safetensors", "limit"]);
}

#[test]
fn header_that_is_not_json_is_reported() {
    let (dir, weights) = tiny_model_copy();
    write_safetensors(&weights, "this is not json", &[0; 16]);
    let err = run_error(dir.path());
    assert_mentions(&err, &["model.safetensors", "not a JSON object"]);
}

#[test]
fn tensor_outside_data_is_reported() {
    let (dir, weights) = tiny_model_copy();
    let header = r#"{"model.norm.weight":{"dtype":"F32","shape":[32],"data_offsets":[0,128]}}"#;
    write_safetensors(&weights, header, &[0; 64]);
    let err = run_error(dir.path());
    assert_mentions(&err, &["model.safetensors", "model.norm.weight", "outside"]);
}

#[test]
fn overlapping_tensors_are_reported() {
    let (dir, weights) = tiny_model_copy();
    let header = r#"{"a":{"dtype":"F32","shape":[16],"data_offsets":[0,64]},"b":{"dtype":"F32","shape":[16],"data_offsets":[32,96]}}"#;
    write_safetensors(&weights, header, &[0; 96]);
    let err = run_error(dir.path());
    assert_mentions(&err, &["model.safetensors", "overlap"]);
}

#[test]
fn shape_disagreeing_with_dtype_size_is_reported() {
    let (dir, weights) = tiny_model_copy();
    let header = r#"{"a":{"dtype":"F32","shape":[1000000,1000000],"data_offsets":[0,64]}}"#;
    write_safetensors(&weights, header, &[0; 64]);
    let err = run_error(dir.path());
    assert_mentions(&err, &["model.safetensors", "occupies 64 bytes"]);
}

#[test]
fn missing_tensor_is_named() {
    let (dir, weights) = tiny_model_copy();
    let header = r#"{"model.embed_tokens.weight":{"dtype":"F32","shape":[300,32],"data_offsets":[0,38400]}}"#;
    write_safetensors(&weights, header, &vec![0; 38400]);
    let err = run_error(dir.path());
    assert_mentions(&err, &["model.layers.0", "missing"]);
}

#[test]
fn shape_disagreeing_with_config_is_named() {
    let (dir, _) = tiny_model_copy();
    let config_path = dir.path().join("config.json");
    let config = std::fs::read_to_string(&config_path).unwrap();
    std::fs::write(&config_path, config.replace("\"intermediate_size\": 64", "\"intermediate_size\": 96")).unwrap();
    let err = run_error(dir.path());
    assert_mentions(&err, &["mlp.gate_proj.weight", "[64, 32]", "config.json implies [96, 32]"]);
}

#[test]
fn unknown_architecture_lists_supported_ones() {
    let (dir, _) = tiny_model_copy();
    let config_path = dir.path().join("config.json");
    let config = std::fs::read_to_string(&config_path).unwrap();
    std::fs::write(
        &config_path,
        config
            .replace("LlamaForCausalLM", "FooForCausalLM")
            .replace("\"model_type\": \"llama\"", "\"model_type\": \"foo\""),
    )
    .unwrap();
    let err = run_error(dir.path());
    assert_mentions(&err, &["config.json", "FooForCausalLM", "supported: llama, qwen2, qwen3"]);
}

#[test]
fn quantized_checkpoints_are_refused_with_their_method_and_listed_as_unsupported() {
    let (dir, _) = tiny_model_copy();
    let config_path = dir.path().join("config.json");
    let mut config: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&config_path).unwrap()).unwrap();
    config["quantization_config"] = serde_json::json!({"quant_method": "awq", "bits": 4, "group_size": 128});
    std::fs::write(&config_path, config.to_string()).unwrap();
    let err = run_error(dir.path());
    assert_mentions(&err, &["config.json", "`awq`", "quantization_config.quant_method"]);

    // In the Hugging Face cache (put there by another tool) it is listed, with why it cannot load.
    let cache = tempfile::tempdir().unwrap();
    let snapshot = cache.path().join("models--someone--tiny-awq/snapshots/abc");
    std::fs::create_dir_all(snapshot.parent().unwrap()).unwrap();
    copy_dir(dir.path(), &snapshot);
    std::fs::create_dir_all(cache.path().join("models--someone--tiny-awq/refs")).unwrap();
    std::fs::write(cache.path().join("models--someone--tiny-awq/refs/main"), "abc").unwrap();
    let catalog = cake::library::catalog::Catalog::new(cache.path().join("data"), cache.path().to_path_buf());
    let entry = catalog.find("hf:someone/tiny-awq").unwrap();
    assert_eq!(entry.status, cake::library::catalog::ModelStatus::Unsupported);
    assert_eq!(entry.quantization.as_deref(), Some("awq"));
    assert_eq!(entry.architecture.as_deref(), Some("llama"));
    assert!(entry.problem.unwrap().contains("`awq`"));
    // Importing it is refused with the same reason.
    let err = format!("{:#}", catalog.import(dir.path()).unwrap_err());
    assert_mentions(&err, &["cannot run here", "`awq`"]);
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

/// A GGUF v3 file with the given string metadata and no tensors.
fn gguf_with_metadata(entries: &[(&str, &str)]) -> Vec<u8> {
    let mut bytes = b"GGUF".to_vec();
    bytes.extend_from_slice(&3u32.to_le_bytes());
    bytes.extend_from_slice(&0u64.to_le_bytes()); // tensors
    bytes.extend_from_slice(&(entries.len() as u64).to_le_bytes());
    for (key, value) in entries {
        bytes.extend_from_slice(&(key.len() as u64).to_le_bytes());
        bytes.extend_from_slice(key.as_bytes());
        bytes.extend_from_slice(&8u32.to_le_bytes()); // string
        bytes.extend_from_slice(&(value.len() as u64).to_le_bytes());
        bytes.extend_from_slice(value.as_bytes());
    }
    bytes
}

#[test]
fn gguf_with_bad_magic_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("broken.gguf");
    let mut bytes = gguf_with_metadata(&[("general.architecture", "llama")]);
    bytes[..4].copy_from_slice(b"GGXX");
    std::fs::write(&path, bytes).unwrap();
    let err = run_error(&path);
    assert_mentions(&err, &["broken.gguf", "not a GGUF file"]);
}

#[test]
fn gguf_truncated_inside_header_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("short.gguf");
    let bytes = gguf_with_metadata(&[("general.architecture", "llama")]);
    std::fs::write(&path, &bytes[..bytes.len() - 3]).unwrap();
    let err = run_error(&path);
    assert_mentions(&err, &["short.gguf", "truncated"]);
}

#[test]
fn gguf_with_absurd_string_length_is_refused_without_allocating_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("huge.gguf");
    let mut bytes = gguf_with_metadata(&[("general.architecture", "llama")]);
    // The value's length field sits just before the 5-byte value "llama".
    let at = bytes.len() - 5 - 8;
    bytes[at..at + 8].copy_from_slice(&(1u64 << 40).to_le_bytes());
    std::fs::write(&path, bytes).unwrap();
    let err = run_error(&path);
    assert_mentions(&err, &["huge.gguf", "invalid GGUF header"]);
}

#[test]
fn gguf_with_tensor_data_cut_off_is_reported() {
    let real = cake::files::paths::default_model_path();
    let real = std::env::var_os("CAKE_TEST_MODEL").map(PathBuf::from).unwrap_or(real);
    assert!(real.exists(), "the default model is missing at {}: run `make model`", real.display());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cut.gguf");
    let bytes = std::fs::read(&real).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() / 3]).unwrap();
    let err = run_error(&path);
    assert_mentions(&err, &["cut.gguf", "truncated"]);
}

#[test]
fn gguf_of_unknown_architecture_lists_supported_ones() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("alien.gguf");
    std::fs::write(&path, gguf_with_metadata(&[("general.architecture", "alien")])).unwrap();
    let err = run_error(&path);
    assert_mentions(&err, &["alien.gguf", "alien", "supported in GGUF: llama, qwen2, qwen3"]);
}

#[test]
fn empty_prompt_is_refused() {
    let model = fixture("tiny/llama_tied");
    let err = cake_error(&["run", "--model", model.to_str().unwrap(), "--prompt", "", "--max-tokens", "1"]);
    assert_mentions(&err, &["prompt is empty"]);
}

#[test]
fn prompt_longer_than_context_is_refused() {
    let model = fixture("tiny/llama_tied");
    let tokens = vec!["5"; 200].join(",");
    let err = cake_error(&["run", "--model", model.to_str().unwrap(), "--prompt-tokens", &tokens]);
    assert_mentions(&err, &["200 tokens", "context length is 128"]);
}

#[test]
fn a_chosen_context_bounds_the_prompt_and_must_fit_the_model() {
    let model = fixture("tiny/llama_tied");
    let model = model.to_str().unwrap();
    let tokens = vec!["5"; 110].join(",");
    let err = cake_error(&["run", "--model", model, "--prompt-tokens", &tokens, "--ctx", "100"]);
    assert_mentions(&err, &["110 tokens", "context length is 100"]);
    let err = cake_error(&["run", "--model", model, "--prompt-tokens", "5,6", "--ctx", "500"]);
    assert_mentions(&err, &["500 tokens", "longer than the model's own (128)"]);
    let err = cake_error(&["run", "--model", model, "--prompt-tokens", "5,6", "--ctx", "10"]);
    assert_mentions(&err, &["10 tokens", "too short"]);
}

#[test]
fn token_outside_vocabulary_is_refused() {
    let model = fixture("tiny/llama_tied");
    let err = cake_error(&["run", "--model", model.to_str().unwrap(), "--prompt-tokens", "1,99999"]);
    assert_mentions(&err, &["99999", "outside the vocabulary"]);
}

#[test]
fn missing_model_path_is_reported() {
    let err = cake_error(&["run", "--model", "/nonexistent/model.gguf", "--prompt", "x"]);
    assert_mentions(&err, &["/nonexistent/model.gguf", "no such model"]);
}

#[test]
fn no_subcommand_without_a_display_points_to_cake_serve() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cake"))
        .env_remove("DISPLAY")
        .env_remove("WAYLAND_DISPLAY")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cake serve") && !err.contains("panicked"), "{err}");
}

#[test]
fn every_input_that_once_failed_a_fuzz_target_is_now_refused_cleanly() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fuzz_regressions");
    let mut replayed = 0;
    for (name, target) in TARGETS {
        let dir = root.join(name);
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        let mut files: Vec<_> = entries.map(|e| e.unwrap().path()).collect();
        files.sort();
        for file in files {
            eprintln!("{name}: {}", file.display());
            target(&std::fs::read(&file).unwrap());
            replayed += 1;
        }
    }
    // Every target has at least one case: hand-made hostile inputs beside what the fuzzers found.
    assert!(replayed >= TARGETS.len(), "only {replayed} cases under {}", root.display());
    for (name, _) in TARGETS {
        assert!(root.join(name).read_dir().is_ok_and(|mut d| d.next().is_some()), "no cases for {name}");
    }
}

/// A copy of a tiny GGUF fixture with the string value of `key` replaced by
/// `value` (of the same length, so every offset stays where it was).
fn gguf_with_string_replaced(key: &str, value: &str) -> Vec<u8> {
    let mut bytes = std::fs::read(fixture("tiny/olmo2/model-f32.gguf")).unwrap();
    let at = bytes.windows(key.len()).position(|w| w == key.as_bytes()).expect("key in the fixture") + key.len();
    let len_at = at + 4; // after the value's type
    let len = u64::from_le_bytes(bytes[len_at..len_at + 8].try_into().unwrap()) as usize;
    assert_eq!(len, value.len(), "same length as the fixture's value");
    bytes[len_at + 8..len_at + 8 + len].copy_from_slice(value.as_bytes());
    bytes
}

#[test]
fn gguf_with_unknown_pre_tokenizer_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("odd-split.gguf");
    std::fs::write(&path, gguf_with_string_replaced("tokenizer.ggml.pre", "gpt-9")).unwrap();
    let err = run_error(&path);
    assert_mentions(&err, &["odd-split.gguf", "pre-tokenizer `gpt-9`", "known: default, llama3"]);
}

#[test]
fn gguf_with_unknown_tokenizer_model_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("odd-model.gguf");
    std::fs::write(&path, gguf_with_string_replaced("tokenizer.ggml.model", "rwkv")).unwrap();
    let err = run_error(&path);
    assert_mentions(&err, &["odd-model.gguf", "tokenizer model `rwkv`"]);
}

#[test]
fn gguf_with_unknown_pre_tokenizer_is_listed_as_unable_to_run() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("odd-split.gguf");
    std::fs::write(&path, gguf_with_string_replaced("tokenizer.ggml.pre", "gpt-9")).unwrap();
    let catalog = cake::library::catalog::Catalog::new(dir.path().join("data"), dir.path().join("hf"));
    let err = format!("{:#}", catalog.import(&path).unwrap_err());
    assert_mentions(&err, &["cannot run here", "pre-tokenizer `gpt-9`"]);
}
