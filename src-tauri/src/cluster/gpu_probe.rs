//! What this machine's GPU offers a plan: its free memory now and its
//! speed, measured once per process like the CPU's (see [`super::machine`]):
//! the decode speed from one large Q8_0 product, the prompt speed from a
//! layer-sized product over many tokens, and the fixed cost of a layer from
//! synthetic layers run on the GPU.

use super::assignment::GpuCapacity;
use super::layer_probe::{layer_overhead_seconds, median_seconds};
use super::machine::synthetic_blocks;
use super::protocol::GpuReport;
use crate::models::gpu_offload::{device_name, shared_gpu, usable_vram, GpuMode, GpuRequest};
use anyhow::Result;
use cake_gpu::matmul::WeightFormat;
use cake_gpu::{Batch, Gpu};
use cake_kernels::ggml_blocks::GgmlFormat;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

/// The GPU's speeds (see [`GpuCapacity`]).
#[derive(Debug, Clone, Copy, PartialEq)]
struct GpuSpeed {
    decode_bytes_per_second: f64,
    prompt_bytes_per_second: f64,
    layer_overhead_seconds: f64,
}

/// The GPU `request` would use, with its memory now and its speed, or
/// `None` when it asks for none or there is none (the load log says why).
pub fn report(request: GpuRequest) -> Option<GpuReport> {
    if request.mode == GpuMode::Off {
        return None;
    }
    let gpu = shared_gpu(request.mode).ok()?;
    let speed = match speed(request.mode, &gpu) {
        Ok(speed) => speed,
        Err(error) => {
            tracing::warn!("the GPU {} could not be timed, so no layers are planned on it: {error:#}", gpu.info().name);
            return None;
        }
    };
    let memory = gpu.memory();
    Some(GpuReport {
        device: device_name(&gpu),
        total_bytes: memory.map(|m| m.total_bytes),
        free_bytes: memory.map(|m| m.free_bytes),
        capacity: GpuCapacity {
            memory_bytes: request.memory.or_else(|| usable_vram(&gpu)),
            max_layers: request.layers,
            bytes_per_second: speed.decode_bytes_per_second,
            prompt_bytes_per_second: speed.prompt_bytes_per_second,
            layer_overhead_seconds: speed.layer_overhead_seconds,
        },
    })
}

/// The speed of the GPU opened for `mode`, measured on first use.
fn speed(mode: GpuMode, gpu: &Gpu) -> Result<GpuSpeed> {
    static MEASURED: Mutex<Option<HashMap<GpuMode, GpuSpeed>>> = Mutex::new(None);
    let mut measured = MEASURED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(speed) = measured.get_or_insert_with(HashMap::new).get(&mode) {
        return Ok(*speed);
    }
    let speed = measure(mode, gpu)?;
    tracing::info!(
        "GPU {}: {:.1} GB/s decoding, {:.1} GB/s reading prompts, {:.2} ms per layer beyond its weights",
        gpu.info().name,
        speed.decode_bytes_per_second / 1e9,
        speed.prompt_bytes_per_second / 1e9,
        speed.layer_overhead_seconds * 1e3
    );
    measured.get_or_insert_with(HashMap::new).insert(mode, speed);
    Ok(speed)
}

/// Times the three on `gpu` (a second or two on a GPU, several on lavapipe).
fn measure(mode: GpuMode, gpu: &Gpu) -> Result<GpuSpeed> {
    // 71 MB: more than a GPU's last-level cache, so weights come from VRAM.
    let (large, large_bytes) = product_seconds(gpu, 8192, 8192, 1, Duration::from_millis(150))?;
    let decode_bytes_per_second = large_bytes / large;
    let tokens = 256;
    let (layer, layer_bytes) = product_seconds(gpu, 1536, 576, tokens, Duration::from_millis(40))?;
    let prompt_bytes_per_second = layer_bytes * tokens as f64 / layer;
    let request = GpuRequest { mode, ..GpuRequest::default() };
    let layer_overhead_seconds = layer_overhead_seconds(Duration::from_millis(60), decode_bytes_per_second, request)?;
    Ok(GpuSpeed { decode_bytes_per_second, prompt_bytes_per_second, layer_overhead_seconds })
}

/// The median seconds of one product of a synthetic `rows × cols` Q8_0
/// matrix with `tokens` rows of activations, and the matrix's bytes.
fn product_seconds(gpu: &Gpu, rows: usize, cols: usize, tokens: usize, budget: Duration) -> Result<(f64, f64)> {
    let blocks = synthetic_blocks(GgmlFormat::Q8_0, rows, cols);
    let matrix = gpu.upload_matrix("speed probe", WeightFormat::Ggml(GgmlFormat::Q8_0), rows, cols, &blocks)?;
    let x: Vec<f32> = (0..tokens * cols).map(|i| ((i * 7919) % 2001) as f32 / 1000.0 - 1.0).collect();
    let (x, y) = (gpu.upload("speed probe input", &x)?, gpu.zeros("speed probe output", tokens * rows)?);
    let run = || -> Result<()> {
        let mut batch = Batch::new(gpu);
        batch.matmul(&matrix, &x, tokens, &y)?;
        batch.submit()?;
        gpu.wait()
    };
    run()?; // compiles the kernel
    let seconds = median_seconds(budget, run)?;
    Ok((seconds.max(1e-9), matrix.bytes() as f64))
}
