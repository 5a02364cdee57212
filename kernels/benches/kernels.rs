//! Micro-benchmarks of the quantized products, at the sizes of the default
//! model (SmolLM2-135M: hidden 576, MLP 1536, vocabulary 49152), for every
//! kernel level this CPU runs and for candle's own GGML kernels:
//!
//!     cargo bench -p cake-kernels
//!
//! `decode` multiplies one activation row (a generated token), `prefill` 64.

use cake_kernels::activations::QuantizedActivations;
use cake_kernels::cpu::Level;
use cake_kernels::matmul::matmul_quantized;
use cake_kernels::packed::{GgmlFormat, PackedMatrix};
use cake_kernels::pool::Pool;
use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::{Device, Module, Tensor};
use divan::Bencher;
use std::sync::OnceLock;

fn main() {
    divan::main();
}

/// (format, rows, cols): attention output, MLP up, MLP down, tied LM head.
const SHAPES: [(GgmlFormat, usize, usize); 4] = [
    (GgmlFormat::Q4_1, 576, 576),
    (GgmlFormat::Q4_1, 1536, 576),
    (GgmlFormat::Q4_1, 576, 1536),
    (GgmlFormat::Q8_0, 49152, 576),
];

fn candle_dtype(format: GgmlFormat) -> GgmlDType {
    match format {
        GgmlFormat::Q4_0 => GgmlDType::Q4_0,
        GgmlFormat::Q4_1 => GgmlDType::Q4_1,
        GgmlFormat::Q8_0 => GgmlDType::Q8_0,
    }
}

fn values(n: usize, seed: u32) -> Vec<f32> {
    let mut state = seed | 1;
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            (state % 2001) as f32 / 1000.0 - 1.0
        })
        .collect()
}

fn quantized(format: GgmlFormat, rows: usize, cols: usize) -> QTensor {
    let dense = Tensor::from_vec(values(rows * cols, rows as u32), (rows, cols), &Device::Cpu).unwrap();
    QTensor::quantize(&dense, candle_dtype(format)).unwrap()
}

fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(|| Pool::new(std::thread::available_parallelism().map_or(1, |n| n.get())))
}

fn levels() -> Vec<&'static str> {
    Level::all_supported().into_iter().map(Level::name).collect()
}

fn level_named(name: &str) -> Level {
    Level::all_supported().into_iter().find(|l| l.name() == name).unwrap()
}

/// The four products for `tokens` activation rows, one sample covering all four.
fn bench_cake(bencher: Bencher, level: &str, tokens: usize) {
    let level = level_named(level);
    let mut prepared: Vec<(PackedMatrix, QuantizedActivations, Vec<f32>)> = SHAPES
        .iter()
        .map(|&(format, rows, cols)| {
            let q = quantized(format, rows, cols);
            let w = PackedMatrix::from_ggml(format, &q.data().unwrap(), rows, cols).unwrap();
            let mut acts = QuantizedActivations::default();
            acts.quantize(&values(tokens * cols, 7), tokens, cols);
            (w, acts, vec![0f32; tokens * rows])
        })
        .collect();
    bencher.bench_local(|| {
        for (w, acts, out) in prepared.iter_mut() {
            matmul_quantized(w, acts, out, level, pool());
        }
    });
}

/// The four products of one token, on Cake's kernels at each level.
#[divan::bench(args = levels())]
fn decode(bencher: Bencher, level: &str) {
    bench_cake(bencher, level, 1);
}

/// The four products of 64 tokens.
#[divan::bench(args = levels())]
fn prefill(bencher: Bencher, level: &str) {
    bench_cake(bencher, level, 64);
}

/// Activation quantization of 64 rows of the MLP width.
#[divan::bench]
fn quantize_activations(bencher: Bencher) {
    let x = values(64 * 1536, 3);
    let mut acts = QuantizedActivations::default();
    bencher.bench_local(|| acts.quantize(&x, 64, 1536));
}

/// The same four products on candle's GGML kernels (1 or 64 tokens).
#[divan::bench(args = [1, 64])]
fn candle(bencher: Bencher, tokens: usize) {
    let prepared: Vec<(QMatMul, Tensor)> = SHAPES
        .iter()
        .map(|&(format, rows, cols)| {
            let m = QMatMul::from_qtensor(quantized(format, rows, cols)).unwrap();
            let x = Tensor::from_vec(values(tokens * cols, 7), (tokens, cols), &Device::Cpu).unwrap();
            (m, x)
        })
        .collect();
    bencher.bench_local(|| {
        for (m, x) in &prepared {
            divan::black_box(m.forward(x).unwrap());
        }
    });
}
