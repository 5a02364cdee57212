//! Micro-benchmarks of the quantized products, at the sizes of the default
//! model (SmolLM2-135M: hidden 576, MLP 1536, vocabulary 49152), for every
//! kernel level this CPU runs and for candle's own GGML kernels:
//!
//!     cargo bench -p cake-kernels
//!
//! `decode` multiplies one activation row (a generated token), `prefill` 64.
//! `decode_format` times one decode product of each GGML format.
//! `decode_step` runs every product of a whole decode step of that model
//! (about 96 MB of weights) on 1 and on 2 threads, for 1 and for 4
//! conversations decoded together: it reads more than any cache holds, so
//! it shows how far memory lets the products scale.
//! `attention` is one layer's decode attention over 384 cached positions;
//! `prefill_attention_turn` a later chat turn's 22 new rows over 768.
//! `dense_f16` multiplies 64 activation rows by an f16 matrix of a 1B
//! model's MLP (2048 → 8192), as a prompt does on F16 files.
//! `q8_in_place` runs 8 layers of a 1B model's Q8_0 MLP products repacked
//! and read in place, for 1 and 64 activation rows.

use cake_kernels::activations::QuantizedActivations;
use cake_kernels::attention::{decode_attention, prefill_attention, CachedKv};
use cake_kernels::cpu::Level;
use cake_kernels::matmul::{matmul_quantized, matmul_quantized_stacked};
use cake_kernels::packed::{GgmlFormat, PackedMatrix, RepackScratch};
use cake_kernels::pool::Pool;
use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::{Device, Module, Tensor};
use divan::Bencher;
use std::sync::OnceLock;

fn main() {
    divan::main();
}

/// (format, candle's name for it, rows, cols): attention output, MLP up,
/// MLP down, tied LM head.
const SHAPES: [(GgmlFormat, GgmlDType, usize, usize); 4] = [
    (GgmlFormat::Q4_1, GgmlDType::Q4_1, 576, 576),
    (GgmlFormat::Q4_1, GgmlDType::Q4_1, 1536, 576),
    (GgmlFormat::Q4_1, GgmlDType::Q4_1, 576, 1536),
    (GgmlFormat::Q8_0, GgmlDType::Q8_0, 49152, 576),
];

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

fn quantized(dtype: GgmlDType, rows: usize, cols: usize) -> QTensor {
    let dense = Tensor::from_vec(values(rows * cols, rows as u32), (rows, cols), &Device::Cpu).unwrap();
    QTensor::quantize(&dense, dtype).unwrap()
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
        .map(|&(format, dtype, rows, cols)| {
            let q = quantized(dtype, rows, cols);
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

/// 64 tokens through a `rows × cols` matrix of weights `narrow`ed from f32, at `level`.
fn bench_dense<W: cake_kernels::values::StoredValue>(
    bencher: Bencher,
    level: &str,
    (rows, cols): (usize, usize),
    narrow: fn(f32) -> W,
) {
    let (level, tokens) = (level_named(level), 64);
    let w: Vec<W> = values(rows * cols, 3).into_iter().map(narrow).collect();
    let x = values(tokens * cols, 5);
    let mut out = vec![0f32; tokens * rows];
    bencher.bench_local(|| cake_kernels::dense::matmul_dense(&w, rows, cols, &x, tokens, &mut out, level, pool()));
}

/// 64 tokens through an f16 2048 → 8192 matrix (1B shape, MLP up), at each level.
#[divan::bench(args = levels())]
fn dense_f16(bencher: Bencher, level: &str) {
    bench_dense(bencher, level, (8192, 2048), half::f16::from_f32);
}

/// 64 tokens through an f32 576 → 1536 matrix (default model's shape, MLP up), at each level.
#[divan::bench(args = levels())]
fn dense_f32_small(bencher: Bencher, level: &str) {
    bench_dense(bencher, level, (1536, 576), |v| v);
}

/// The same shape with bf16 weights (bf16 dot products for prompts where the CPU has them).
#[divan::bench(args = levels())]
fn dense_bf16_small(bencher: Bencher, level: &str) {
    bench_dense(bencher, level, (1536, 576), half::bf16::from_f32);
}

/// One layer's matrices: q, k, v, o, gate, up (576 wide) and down (1536 wide).
struct Layer([PackedMatrix; 7]);

/// Random GGML blocks (random bytes, small finite f16 scales): repacking
/// them is much quicker than quantizing floats, and speed does not depend
/// on the values.
fn random_matrix(format: GgmlFormat, rows: usize, cols: usize, seed: u32) -> PackedMatrix {
    PackedMatrix::from_ggml(format, &random_ggml_bytes(format, rows, cols, seed), rows, cols).unwrap()
}

/// The GGML bytes of [`random_matrix`].
fn random_ggml_bytes(format: GgmlFormat, rows: usize, cols: usize, seed: u32) -> Vec<u8> {
    let bytes = values(rows * cols / format.block_values() * format.block_bytes(), seed);
    let mut data: Vec<u8> = bytes.iter().map(|v| ((v + 1.0) * 127.5) as u8).collect();
    for block in data.chunks_exact_mut(format.block_bytes()) {
        for &at in format.f16_offsets() {
            block[at..at + 2].copy_from_slice(&half::f16::from_f32(0.01).to_le_bytes());
        }
    }
    data
}

/// Random Q8_0 bytes for `random_matrix`, as the file holds them.
fn random_q8_bytes(rows: usize, cols: usize, seed: u32) -> Vec<u8> {
    let format = GgmlFormat::Q8_0;
    let bytes = values(rows * cols / format.block_values() * format.block_bytes(), seed);
    let mut data: Vec<u8> = bytes.iter().map(|v| ((v + 1.0) * 127.5) as u8).collect();
    for block in data.chunks_exact_mut(format.block_bytes()) {
        block[..2].copy_from_slice(&half::f16::from_f32(0.01).to_le_bytes());
    }
    data
}

/// The MLPs of 8 layers of a 1B model in Q8_0 (gate, up: 8192 × 2048;
/// down: 2048 × 8192; 428 MB in all, far more than the caches hold, as a
/// decode step reads), `tokens` activation rows, on 2 threads: the
/// matrices repacked into tiles, or read where they lie.
#[divan::bench(consts = [1, 64], args = ["tiles", "in place"], sample_count = 10)]
fn q8_in_place<const TOKENS: usize>(bencher: Bencher, form: &str) {
    let (hidden, ffn) = (2048, 8192);
    let shapes = [(ffn, hidden), (ffn, hidden), (hidden, ffn)];
    let layers: Vec<Vec<PackedMatrix>> = (0..8u32)
        .map(|layer| {
            let one = |i: u32, (rows, cols): (usize, usize)| {
                let bytes = random_q8_bytes(rows, cols, layer * 3 + i + 1);
                match form {
                    "tiles" => PackedMatrix::from_ggml(GgmlFormat::Q8_0, &bytes, rows, cols).unwrap(),
                    _ => PackedMatrix::in_place(GgmlFormat::Q8_0, std::sync::Arc::new(bytes), 0, rows, cols).unwrap(),
                }
            };
            shapes.iter().zip(0..).map(|(&shape, i)| one(i, shape)).collect()
        })
        .collect();
    let (mut narrow, mut wide) = (QuantizedActivations::default(), QuantizedActivations::default());
    narrow.quantize(&values(TOKENS * hidden, 3), TOKENS, hidden);
    wide.quantize(&values(TOKENS * ffn, 4), TOKENS, ffn);
    let mut out = vec![0f32; TOKENS * 2 * ffn];
    let (level, pool) = (Level::detected(), Pool::new(2));
    bencher.bench_local(|| {
        for mlp in &layers {
            matmul_quantized_stacked(&[&mlp[0], &mlp[1]], &narrow, &mut out, level, &pool);
            matmul_quantized(&mlp[2], &wide, &mut out[..TOKENS * hidden], level, &pool);
        }
    });
}

fn format_names() -> Vec<&'static str> {
    GgmlFormat::ALL.iter().map(|f| f.name()).collect()
}

fn format_named(name: &str) -> GgmlFormat {
    GgmlFormat::ALL.into_iter().find(|f| f.name() == name).unwrap()
}

/// Repacking one 2048 × 2048 matrix of each format into tiles, as a first
/// load does (the tiles handed to a writer that drops them).
#[divan::bench(args = format_names())]
fn repack(bencher: Bencher, format: &str) {
    let format = format_named(format);
    let (rows, cols) = (2048, 2048);
    let data = random_ggml_bytes(format, rows, cols, 1);
    let mut scratch = RepackScratch::default();
    bencher.bench_local(|| {
        PackedMatrix::repack_into(format, &data, rows, cols, &mut scratch, &mut |_, _| Ok(())).unwrap()
    });
}

/// One decode-shaped product (`TOKENS` activation rows: one generated
/// token, or one of each of 4 conversations decoded together; a 2048 ×
/// 2048 matrix) per format, at the CPU's best level.
#[divan::bench(consts = [1, 4], args = format_names())]
fn decode_format<const TOKENS: usize>(bencher: Bencher, format: &str) {
    let format = format_named(format);
    let (rows, cols) = (2048, 2048);
    let w = random_matrix(format, rows, cols, 1);
    let mut acts = QuantizedActivations::default();
    acts.quantize(&values(TOKENS * cols, 7), TOKENS, cols);
    let mut out = vec![0f32; TOKENS * rows];
    bencher.bench_local(|| matmul_quantized(&w, &acts, &mut out, Level::detected(), pool()));
}

/// All the products of one decode step of SmolLM2-135M (30 layers, Q4_1,
/// projections of the same input stacked as the engine does, and the Q8_0
/// head) for `ROWS` conversations decoded together, on a pool of `threads`.
#[divan::bench(consts = [1, 4], args = [1, 2], sample_count = 20)]
fn decode_step<const ROWS: usize>(bencher: Bencher, threads: usize) {
    let q = GgmlFormat::Q4_1;
    let shapes = [(576, 576), (192, 576), (192, 576), (576, 576), (1536, 576), (1536, 576), (576, 1536)];
    let layers: Vec<Layer> = (0..30u32)
        .map(|l| Layer(std::array::from_fn(|i| random_matrix(q, shapes[i].0, shapes[i].1, l * 7 + i as u32))))
        .collect();
    let head = random_matrix(GgmlFormat::Q8_0, 49152, 576, 99);
    let (mut narrow, mut wide) = (QuantizedActivations::default(), QuantizedActivations::default());
    narrow.quantize(&values(ROWS * 576, 3), ROWS, 576);
    wide.quantize(&values(ROWS * 1536, 4), ROWS, 1536);
    let mut out = vec![0f32; ROWS * 49152];
    let (level, pool) = (Level::detected(), Pool::new(threads));
    bencher.bench_local(|| {
        for Layer([wq, wk, wv, wo, gate, up, down]) in &layers {
            matmul_quantized_stacked(&[wq, wk, wv], &narrow, &mut out[..ROWS * 960], level, &pool);
            matmul_quantized(wo, &narrow, &mut out[..ROWS * 576], level, &pool);
            matmul_quantized_stacked(&[gate, up], &narrow, &mut out[..ROWS * 3072], level, &pool);
            matmul_quantized(down, &wide, &mut out[..ROWS * 576], level, &pool);
        }
        matmul_quantized(&head, &narrow, &mut out, level, &pool);
    });
}

/// One layer's decode attention (9 query heads, 3 kv heads of 64) over 384
/// cached positions, on a pool of `threads`; a sample runs it 32 times in a
/// row, as a decode step runs layer after layer, so the pool's threads are
/// as warm as they are there.
#[divan::bench(args = [1, 2], sample_size = 32)]
fn attention(bencher: Bencher, threads: usize) {
    let (heads, kv_heads, d, len) = (9, 3, 64, 384);
    let (keys, cached) = (values(kv_heads * len * d, 5), values(kv_heads * len * d, 6));
    let q = values(heads * d, 7);
    let mut out = vec![0f32; heads * d];
    let kv = CachedKv { keys: &keys, values: &cached, kv_heads, head_stride: len * d, len, head_dim: d };
    let (level, pool) = (Level::detected(), Pool::new(threads));
    bencher.bench_local(|| decode_attention(&q, &kv, heads, 0.125, None, &mut out, level, &pool));
}

/// One layer's attention of a later chat turn: 22 new rows over 768
/// cached positions (f16 cache, as GGUF models keep it), on a pool of
/// `threads`.
#[divan::bench(args = [1, 2], sample_size = 8)]
fn prefill_attention_turn(bencher: Bencher, threads: usize) {
    let (heads, kv_heads, d, len, t) = (9, 3, 64, 768, 22);
    let to_f16 = |v: Vec<f32>| v.into_iter().map(half::f16::from_f32).collect::<Vec<_>>();
    let (keys, cached) = (to_f16(values(kv_heads * len * d, 5)), to_f16(values(kv_heads * len * d, 6)));
    let q = values(t * heads * d, 7);
    let mut out = vec![0f32; t * heads * d];
    let kv = CachedKv { keys: &keys, values: &cached, kv_heads, head_stride: len * d, len, head_dim: d };
    let (level, pool) = (Level::detected(), Pool::new(threads));
    bencher.bench_local(|| prefill_attention(&q, &kv, t, heads, 0.125, None, &mut out, level, &pool));
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
        .map(|&(_, dtype, rows, cols)| {
            let m = QMatMul::from_qtensor(quantized(dtype, rows, cols)).unwrap();
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

/// A job of two empty items on a pool of `threads`: what handing work to
/// the pool and waiting for it costs, paid by every product and attention.
#[divan::bench(args = [1, 2], sample_size = 32)]
fn pool_round_trip(bencher: Bencher, threads: usize) {
    let pool = Pool::new(threads);
    bencher.bench_local(|| {
        pool.run(2, &|range| {
            divan::black_box(range);
        })
    });
}
