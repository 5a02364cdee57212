//! Choosing the GPU at load: what runs where, and the CPU whenever the GPU
//! cannot (no driver, a software-only driver under `auto`, a memory cap),
//! with the reason printed. `--gpu on` takes Mesa's lavapipe, which
//! `make test` installs, where the machine has no GPU.

mod common;

use common::{fixture, join_ids};
use serde_json::Value;
use std::process::Command;

/// `cake run --json` on the tiny Qwen3 fixture's prompt (8 greedy tokens,
/// f32) with `args`, and `envs`: the JSON and what it printed to stderr.
fn run_qwen3(args: &[&str], envs: &[(&str, &str)]) -> (Value, String) {
    let model = fixture("tiny/qwen3");
    let reference = reference();
    let prompt: Vec<u64> = reference["prompt_tokens"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
    let prompt = join_ids(&prompt);
    let mut command = Command::new(env!("CARGO_BIN_EXE_cake"));
    command.args(["run", "--model", model.to_str().unwrap(), "--prompt-tokens", &prompt, "--max-tokens", "8"]);
    command.args(["--temperature", "0", "--ignore-eos", "--dtype", "f32", "--json"]).args(args);
    for (name, value) in envs {
        command.env(name, value);
    }
    let out = command.output().expect("cake runs");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "cake {args:?} failed:\n{stderr}");
    (serde_json::from_slice(&out.stdout).expect("JSON"), stderr)
}

fn reference() -> Value {
    let text = std::fs::read_to_string(fixture("tiny/qwen3/reference.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn first_greedy_tokens(n: usize) -> Vec<Value> {
    reference()["greedy_tokens"].as_array().unwrap()[..n].to_vec()
}

fn gpu_layers(out: &Value) -> Vec<u64> {
    out["gpu"]["layers"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect()
}

#[test]
fn without_a_driver_the_cpu_runs_everything_and_says_why() {
    let (out, stderr) = run_qwen3(&["--gpu", "on"], &[("VK_ICD_FILENAMES", "/nonexistent/icd.json")]);
    assert!(stderr.contains("CPU only; no GPU: no GPU driver found"), "{stderr}");
    assert_eq!(out["gpu"]["device"], Value::Null);
    assert!(gpu_layers(&out).is_empty());
    assert_eq!(out["tokens"].as_array().unwrap(), &first_greedy_tokens(8));
}

#[test]
fn auto_refuses_a_driver_that_computes_on_the_cpu() {
    let (out, stderr) = run_qwen3(&["--gpu", "auto"], &[]);
    match out["gpu"]["device"].as_str() {
        // A machine with a real GPU uses it.
        Some(device) => assert!(!device.contains("software"), "{device}"),
        None => assert!(
            stderr.contains("computes on the CPU") || stderr.contains("no GPU driver found"),
            "auto took no GPU without saying why: {stderr}"
        ),
    }
    assert_eq!(out["tokens"].as_array().unwrap(), &first_greedy_tokens(8));
}

#[test]
fn a_memory_cap_keeps_the_layers_past_it_on_the_cpu() {
    let (whole, _) = run_qwen3(&["--gpu", "on", "--ctx", "64"], &[]);
    assert_eq!(gpu_layers(&whole), [0, 1]);
    // One layer's weights plus its f32 keys and values for 64 positions.
    let config: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("tiny/qwen3/config.json")).unwrap()).unwrap();
    let kv_width = config["num_key_value_heads"].as_u64().unwrap() * config["head_dim"].as_u64().unwrap();
    let per_layer = whole["gpu"]["weight_bytes"].as_u64().unwrap() / 2 + 2 * 4 * kv_width * 64;
    let cap = (per_layer + per_layer / 2).to_string();
    let (capped, stderr) = run_qwen3(&["--gpu", "on", "--ctx", "64", "--gpu-memory", &cap], &[]);
    assert_eq!(gpu_layers(&capped), [0], "{stderr}");
    assert!(stderr.contains("layer 1 and later: over the GPU memory cap"), "{stderr}");
    assert_eq!(capped["tokens"].as_array().unwrap(), &first_greedy_tokens(8));
    let (counted, _) = run_qwen3(&["--gpu", "on", "--gpu-layers", "1"], &[]);
    assert_eq!(gpu_layers(&counted), [0]);
}

#[test]
fn the_gpu_counts_its_matrices_by_stored_type() {
    let gguf = fixture("tiny/olmo2/model-q8_0.gguf");
    let out = common::cake_json(&[
        "run",
        "--model",
        gguf.to_str().unwrap(),
        "--prompt",
        "hello",
        "--max-tokens",
        "2",
        "--gpu",
        "on",
        "--json",
    ]);
    let kernels = out["kernels"].as_array().unwrap();
    let on_gpu: Vec<&Value> = kernels.iter().filter(|k| k["kernel"] == "gpu wgsl").collect();
    assert!(on_gpu.iter().any(|k| k["stored"] == "Q8_0"), "{kernels:?}");
    assert_eq!(out["kv_cache"], "f16", "quantized files keep f16 keys and values, on the GPU too");
}

/// What a machine tells planners about its GPU (`--gpu on`: lavapipe where
/// there is no GPU): its name, its memory as the driver reports it with a
/// spare share kept, its measured speeds, and the caps asked for.
#[test]
fn the_gpu_reports_its_memory_and_measured_speed() {
    use cake::models::gpu_offload::{GpuMode, GpuRequest};
    let request = GpuRequest { mode: GpuMode::On, ..GpuRequest::default() };
    let report = cake::cluster::gpu_probe::report(request).expect("a GPU (lavapipe will do)");
    let capacity = &report.capacity;
    let (total, free) = (report.total_bytes.expect("Vulkan reports its heaps"), report.free_bytes.unwrap());
    assert!(free <= total && total > 0, "{report:?}");
    let usable = capacity.memory_bytes.unwrap();
    assert!(usable < free && usable >= free - (free / 20).max(512 << 20), "{report:?}");
    for speed in [capacity.bytes_per_second, capacity.prompt_bytes_per_second] {
        assert!(speed.is_finite() && speed > 1e6, "{report:?}");
    }
    assert!((0.0..1.0).contains(&capacity.layer_overhead_seconds), "{report:?}");
    let capped = GpuRequest { memory: Some(123_456_789), layers: Some(3), ..request };
    let capped = cake::cluster::gpu_probe::report(capped).unwrap().capacity;
    assert_eq!((capped.memory_bytes, capped.max_layers), (Some(123_456_789), Some(3)));
    assert_eq!(capped.bytes_per_second, capacity.bytes_per_second, "measured once per process");
    assert!(cake::cluster::gpu_probe::report(GpuRequest::default()).is_none(), "--gpu off reports none");
}
