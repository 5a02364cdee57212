//! What this machine can offer the cluster: OS, CPU, devices, memory for
//! a model's share, and how fast it runs quantized weights in a decode
//! step and in a prompt.

use super::gpu_probe;
use super::layer_probe::{layer_overhead_seconds, median_seconds};
use super::protocol::WorkerInfo;
use crate::formats::gguf_header::GgmlType;
use crate::models::gpu_offload::GpuRequest;
use crate::models::weights::repackable;
use cake_kernels::activations::QuantizedActivations;
use cake_kernels::cpu::Level;
use cake_kernels::dense::matmul_dense;
use cake_kernels::matmul::matmul_quantized;
use cake_kernels::packed::{GgmlFormat, PackedMatrix};
use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock};
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
    /// What a decoder layer's step costs beyond its products (see
    /// [`super::layer_probe`]).
    pub layer_overhead_seconds: f64,
}

/// This machine's speed, measured the first time it is asked for and kept
/// for the life of the process: a master describes itself at every load,
/// scan and preview, and its speed does not change between them.
pub fn speed() -> MeasuredSpeed {
    static MEASURED: OnceLock<MeasuredSpeed> = OnceLock::new();
    *MEASURED.get_or_init(measure_speed)
}

/// Times the three, the median of repeated runs each (about 0.3 s and
/// 290 MB for a moment): a shared or virtual machine's speed moves from
/// run to run, and the median is what a model's steps will see.
fn measure_speed() -> MeasuredSpeed {
    let (level, pool) = (Level::detected(), cake_kernels::pool::global());
    // The median time of `products` products of `rows` rows by `matrix`.
    let product_seconds = |matrix: &PackedMatrix, rows: usize, products: usize, budget: Duration| {
        let cols = matrix.cols;
        let x: Vec<f32> = (0..rows * cols).map(|i| ((i * 7919) % 2001) as f32 / 1000.0 - 1.0).collect();
        let mut acts = QuantizedActivations::default();
        acts.quantize(&x, rows, cols);
        let mut out = vec![0f32; rows * matrix.rows];
        let seconds = median_seconds(budget, || {
            for _ in 0..products {
                matmul_quantized(matrix, &acts, &mut out, level, pool);
            }
            Ok(())
        });
        std::hint::black_box(&out);
        seconds.unwrap_or(f64::INFINITY).max(1e-9)
    };
    let large = q8_0_matrix(16384, 8192);
    let decode_bytes_per_second = large.bytes() as f64 / product_seconds(&large, 1, 1, Duration::from_millis(150));
    drop(large);
    let layer = q8_0_matrix(1536, 576);
    let prompt_bytes_per_second =
        (layer.bytes() * 256) as f64 / product_seconds(&layer, 256, 1, Duration::from_millis(40));
    let layer_overhead_seconds =
        layer_overhead_seconds(Duration::from_millis(60), decode_bytes_per_second, GpuRequest::default())
            .unwrap_or_else(|error| {
                tracing::warn!("cannot time a synthetic layer ({error:#}); counting five tiny products instead");
                product_seconds(&q8_0_matrix(64, 576), 1, 5, Duration::from_millis(10))
            });
    MeasuredSpeed { decode_bytes_per_second, prompt_bytes_per_second, layer_overhead_seconds }
}

/// The stored blocks of a `rows × cols` matrix in `format` of arbitrary
/// quants with small scales (speed does not depend on the values): one row
/// of blocks, repeated.
pub(super) fn synthetic_blocks(format: GgmlFormat, rows: usize, cols: usize) -> Vec<u8> {
    let mut row: Vec<u8> =
        (0..cols / format.block_values() * format.block_bytes()).map(|i| (i * 131 % 251) as u8).collect();
    let scale = half::f16::from_f32(0.01).to_le_bytes();
    for block in row.chunks_exact_mut(format.block_bytes()) {
        for &at in format.f16_offsets() {
            block[at..at + 2].copy_from_slice(&scale);
        }
    }
    row.repeat(rows)
}

/// [`synthetic_blocks`] as the CPU kernels hold them.
pub(super) fn synthetic_matrix(format: GgmlFormat, rows: usize, cols: usize) -> PackedMatrix {
    let bytes = synthetic_blocks(format, rows, cols);
    if PackedMatrix::reads_in_place(format) {
        // Stored as a model's would be: read where it lies.
        return PackedMatrix::in_place(format, std::sync::Arc::new(bytes), 0, rows, cols)
            .expect("a whole number of blocks");
    }
    PackedMatrix::from_ggml(format, &bytes, rows, cols).expect("a whole number of blocks")
}

/// A Q8_0 [`synthetic_matrix`].
pub(super) fn q8_0_matrix(rows: usize, cols: usize) -> PackedMatrix {
    synthetic_matrix(GgmlFormat::Q8_0, rows, cols)
}

/// How long a decode step takes to multiply a byte of weights stored as
/// `stored`, relative to a byte of Q8_0 (what [`MeasuredSpeed`]'s decode
/// speed is timed in), on this machine: a 4-bit type unpacks more per
/// byte, a 16-bit float converts more. Timed once per type and kept.
/// Types Cake multiplies some other way count as Q8_0.
pub fn read_cost(stored: GgmlType) -> f64 {
    static COSTS: Mutex<BTreeMap<GgmlType, f64>> = Mutex::new(BTreeMap::new());
    if stored == GgmlType::Q8_0 {
        return 1.0;
    }
    let mut costs = COSTS.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    *costs.entry(stored).or_insert_with(|| timed_read_cost(stored).unwrap_or(1.0))
}

/// Weights in a cost probe's matrices: more than the caches hold, in rows
/// as wide as a 1 B model's hidden state.
const PROBE_ROWS: usize = 32768;
const PROBE_COLS: usize = 2048;

/// [`read_cost`], timed: one activation row multiplied by a matrix of
/// `stored` weights and by one of Q8_0 in turn, so that both see the
/// machine in the same state; the median of the ratios over about 0.2 s.
/// `None` for types with no kernel here.
fn timed_read_cost(stored: GgmlType) -> Option<f64> {
    let mut base = SyntheticProduct::new(GgmlType::Q8_0)?;
    let mut probe = SyntheticProduct::new(stored)?;
    let began = Instant::now();
    let mut ratios = Vec::new();
    while ratios.len() < 5 || (ratios.len() < 100 && began.elapsed() < Duration::from_millis(200)) {
        ratios.push(probe.seconds_per_byte() / base.seconds_per_byte());
    }
    ratios.sort_by(f64::total_cmp);
    Some(ratios[ratios.len() / 2])
}

/// One activation row and a synthetic matrix of a stored type, ready to be
/// multiplied.
struct SyntheticProduct {
    weights: SyntheticWeights,
    x: Vec<f32>,
    out: Vec<f32>,
}

enum SyntheticWeights {
    Packed(Box<(PackedMatrix, QuantizedActivations)>),
    F16(Vec<half::f16>),
    BF16(Vec<half::bf16>),
    F32(Vec<f32>),
}

impl SyntheticProduct {
    /// `None` for a type with no kernel here.
    fn new(stored: GgmlType) -> Option<Self> {
        let (rows, cols) = (PROBE_ROWS, PROBE_COLS);
        let x: Vec<f32> = (0..cols).map(|i| ((i * 7919) % 2001) as f32 / 1000.0 - 1.0).collect();
        let weights = match (repackable(stored), stored) {
            (Some(format), _) => {
                let mut acts = QuantizedActivations::default();
                acts.quantize(&x, 1, cols);
                SyntheticWeights::Packed(Box::new((synthetic_matrix(format, rows, cols), acts)))
            }
            (None, GgmlType::F16) => SyntheticWeights::F16(vec![half::f16::from_f32(0.01); rows * cols]),
            (None, GgmlType::BF16) => SyntheticWeights::BF16(vec![half::bf16::from_f32(0.01); rows * cols]),
            (None, GgmlType::F32) => SyntheticWeights::F32(vec![0.01; rows * cols]),
            _ => return None,
        };
        Some(Self { weights, x, out: vec![0.0; rows] })
    }

    /// Seconds per stored byte of one product.
    fn seconds_per_byte(&mut self) -> f64 {
        let (level, pool) = (Level::detected(), cake_kernels::pool::global());
        let (rows, cols, x, out) = (PROBE_ROWS, PROBE_COLS, &self.x, &mut self.out);
        let start = Instant::now();
        let bytes = match &self.weights {
            SyntheticWeights::Packed(packed) => {
                let (matrix, acts) = packed.as_ref();
                matmul_quantized(matrix, acts, out, level, pool);
                let format = matrix.format;
                rows * cols / format.block_values() * format.block_bytes()
            }
            SyntheticWeights::F16(w) => {
                matmul_dense(w, rows, cols, x, 1, out, level, pool);
                2 * w.len()
            }
            SyntheticWeights::BF16(w) => {
                matmul_dense(w, rows, cols, x, 1, out, level, pool);
                2 * w.len()
            }
            SyntheticWeights::F32(w) => {
                matmul_dense(w, rows, cols, x, 1, out, level, pool);
                4 * w.len()
            }
        };
        start.elapsed().as_secs_f64().max(1e-9) / bytes as f64
    }
}

/// This machine as a worker describes itself, with the GPU `gpu` asks for
/// (measured on first use).
pub fn describe(name: &str, memory_limit: Option<u64>, gpu: GpuRequest) -> WorkerInfo {
    let speed = speed();
    let gpu = gpu_probe::report(gpu).map(Box::new);
    let mut devices = vec!["cpu".to_string()];
    if let Some(gpu) = &gpu {
        let free = gpu.free_bytes.map_or(String::new(), |free| format!(", {:.1} GB free", free as f64 / 1e9));
        devices.push(format!("gpu: {}{free}", gpu.device));
    }
    WorkerInfo {
        name: name.to_string(),
        os: format!("{} {}", std::env::consts::OS, std::env::consts::ARCH),
        cpu: cpu_name(),
        devices,
        memory_bytes: memory_limit.unwrap_or_else(usable_memory_bytes),
        bytes_per_second: speed.decode_bytes_per_second,
        prompt_bytes_per_second: speed.prompt_bytes_per_second,
        layer_overhead_seconds: speed.layer_overhead_seconds,
        kernel_boot: kernel_boot(),
        instance: process_instance().to_string(),
        gpu,
    }
}

/// This process's random id (see [`WorkerInfo::instance`]).
fn process_instance() -> &'static str {
    static INSTANCE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    INSTANCE.get_or_init(|| format!("{:016x}", rand::random::<u64>()))
}

/// The first 16 hex digits of the SHA-256 of the running kernel's boot id
/// (random at each boot, shared by everything running on that kernel);
/// empty where there is none to read.
fn kernel_boot() -> String {
    use sha2::Digest;
    match std::fs::read_to_string("/proc/sys/kernel/random/boot_id") {
        Ok(id) => sha2::Sha256::digest(id.trim().as_bytes())[..8].iter().map(|b| format!("{b:02x}")).collect(),
        Err(_) => String::new(),
    }
}
