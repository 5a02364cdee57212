//! What this machine can offer the cluster: OS, CPU, devices, memory for
//! a model's share, and how fast it runs quantized weights in a decode
//! step and in a prompt.

use super::protocol::WorkerInfo;
use cake_kernels::activations::QuantizedActivations;
use cake_kernels::cpu::Level;
use cake_kernels::matmul::matmul_quantized;
use cake_kernels::packed::{GgmlFormat, PackedMatrix};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Bytes a model's share may take when no limit is set: nine tenths of
/// the memory available, a tenth left to the system and other programs.
pub fn usable_memory_bytes() -> u64 {
    let available = available_memory_bytes();
    available - available / 10
}

/// Bytes of memory the OS reports as available (Linux `MemAvailable`).
fn available_memory_bytes() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| l.starts_with("MemAvailable:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .map_or(4 << 30, |kb| kb * 1024)
}

fn cpu_name() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| t.lines().find(|l| l.starts_with("model name"))?.split(':').nth(1).map(|s| s.trim().to_string()))
        .unwrap_or_else(|| std::env::consts::ARCH.to_string())
}

/// How fast this machine runs quantized weights, timed on Cake's own
/// kernels with Q8_0 matrices.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MeasuredSpeed {
    /// Weight bytes a decode step (one row of activations) streams per
    /// second, over a matrix (143 MB) larger than a desktop's caches.
    pub decode_bytes_per_second: f64,
    /// Weight bytes × prompt tokens per second when a prompt's rows are
    /// multiplied together (256 rows by a 1536 × 576 matrix, a small
    /// model's feed-forward shape): what reading a prompt runs at.
    pub prompt_bytes_per_second: f64,
    /// What a decoder layer costs beyond streaming its weights: the time of
    /// five products of one row by a tiny matrix (a layer's pooled steps:
    /// the q/k/v, output, gate/up and down products and attention).
    pub layer_overhead_seconds: f64,
}

/// This machine's speed, measured the first time it is asked for and kept
/// for the life of the process: a master describes itself at every load,
/// scan and preview, and its speed does not change between them.
pub fn speed() -> MeasuredSpeed {
    static MEASURED: OnceLock<MeasuredSpeed> = OnceLock::new();
    *MEASURED.get_or_init(measure_speed)
}

/// Times the three, the best of repeated runs each (about 0.2 s and 290 MB
/// for a moment): a machine shared with other work shows its speed when
/// left alone for a moment, which one run may miss.
fn measure_speed() -> MeasuredSpeed {
    let (level, pool) = (Level::detected(), cake_kernels::pool::global());
    // The best time of `products` products of `rows` rows by `matrix`.
    let best_seconds = |matrix: &PackedMatrix, rows: usize, products: usize, budget: Duration| {
        let cols = matrix.cols;
        let x: Vec<f32> = (0..rows * cols).map(|i| ((i * 7919) % 2001) as f32 / 1000.0 - 1.0).collect();
        let mut acts = QuantizedActivations::default();
        acts.quantize(&x, rows, cols);
        let mut out = vec![0f32; rows * matrix.rows];
        let (mut best, began) = (f64::INFINITY, Instant::now());
        // At least three runs, then more while the budget lasts (at most 64).
        for run in 0..64 {
            if run >= 3 && began.elapsed() > budget {
                break;
            }
            let start = Instant::now();
            for _ in 0..products {
                matmul_quantized(matrix, &acts, &mut out, level, pool);
            }
            best = best.min(start.elapsed().as_secs_f64());
        }
        std::hint::black_box(&out);
        best.max(1e-9)
    };
    let large = q8_0_matrix(16384, 8192);
    let decode_bytes_per_second = large.bytes() as f64 / best_seconds(&large, 1, 1, Duration::from_millis(60));
    drop(large);
    let layer = q8_0_matrix(1536, 576);
    let prompt_bytes_per_second =
        (layer.bytes() * 256) as f64 / best_seconds(&layer, 256, 1, Duration::from_millis(40));
    let tiny = q8_0_matrix(64, 576);
    let layer_overhead_seconds = best_seconds(&tiny, 1, 5, Duration::from_millis(10));
    MeasuredSpeed { decode_bytes_per_second, prompt_bytes_per_second, layer_overhead_seconds }
}

/// A Q8_0 matrix of arbitrary quants with small scales (speed does not
/// depend on the values): one row of blocks, repeated.
fn q8_0_matrix(rows: usize, cols: usize) -> PackedMatrix {
    let format = GgmlFormat::Q8_0;
    let mut row: Vec<u8> =
        (0..cols / format.block_values() * format.block_bytes()).map(|i| (i * 131 % 251) as u8).collect();
    let scale = half::f16::from_f32(0.01).to_le_bytes();
    for block in row.chunks_exact_mut(format.block_bytes()) {
        for &at in format.f16_offsets() {
            block[at..at + 2].copy_from_slice(&scale);
        }
    }
    PackedMatrix::from_ggml(format, &row.repeat(rows), rows, cols).expect("a whole number of Q8_0 blocks")
}

/// This machine as a worker describes itself.
pub fn describe(name: &str, memory_limit: Option<u64>) -> WorkerInfo {
    let speed = speed();
    WorkerInfo {
        name: name.to_string(),
        os: format!("{} {}", std::env::consts::OS, std::env::consts::ARCH),
        cpu: cpu_name(),
        devices: vec!["cpu".into()],
        memory_bytes: memory_limit.unwrap_or_else(usable_memory_bytes),
        bytes_per_second: speed.decode_bytes_per_second,
        prompt_bytes_per_second: speed.prompt_bytes_per_second,
        layer_overhead_seconds: speed.layer_overhead_seconds,
    }
}
