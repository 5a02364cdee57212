//! Every GPU kernel against a plain CPU computation on random inputs, odd
//! sizes included, on the machine's adapter (Mesa's lavapipe in CI).
//!
//! Tolerances: the weights decode exactly as the CPU decodes them, so a
//! product differs from the double-precision reference only by f32
//! summation: at most `1e-5 · Σ|w·x|` (every type). RMSNorm, rotary
//! embeddings and the activations agree to `1e-5` relative; attention reads
//! keys and values rounded to f16, which the reference rounds the same way,
//! and agrees to `1e-4`.

use cake_gpu::attention::{AttentionShape, KvPrecision};
use cake_gpu::matmul::WeightFormat;
use cake_gpu::ops::{Activation, RotaryPairs};
use cake_gpu::{Batch, Gpu, GpuOptions};
use cake_kernels::ggml_blocks::{dequantize_block, GgmlFormat};
use half::{bf16, f16};

/// The machine's GPU, software drivers included; the tests fail without one
/// (`make test` installs lavapipe).
fn gpu(options: GpuOptions) -> Gpu {
    Gpu::open(GpuOptions { allow_software: true, ..options })
        .unwrap_or_else(|why| panic!("the GPU tests need a Vulkan driver (lavapipe will do): {why}"))
}

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in [-1, 1).
    fn value(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }

    fn values(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.value()).collect()
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

/// A random matrix in `format`: its stored bytes and its values.
fn random_matrix(rng: &mut Rng, format: WeightFormat, rows: usize, cols: usize) -> (Vec<u8>, Vec<f32>) {
    match format {
        WeightFormat::F32 => {
            let values = rng.values(rows * cols);
            (values.iter().flat_map(|v| v.to_le_bytes()).collect(), values)
        }
        WeightFormat::F16 => {
            let values: Vec<f16> = rng.values(rows * cols).into_iter().map(f16::from_f32).collect();
            (values.iter().flat_map(|v| v.to_le_bytes()).collect(), values.iter().map(|v| v.to_f32()).collect())
        }
        WeightFormat::Bf16 => {
            let values: Vec<bf16> = rng.values(rows * cols).into_iter().map(bf16::from_f32).collect();
            (values.iter().flat_map(|v| v.to_le_bytes()).collect(), values.iter().map(|v| v.to_f32()).collect())
        }
        WeightFormat::Ggml(format) => {
            let blocks = rows * cols / format.block_values();
            let mut bytes = rng.bytes(blocks * format.block_bytes());
            let mut values = vec![0f32; rows * cols];
            for (block, out) in
                bytes.chunks_exact_mut(format.block_bytes()).zip(values.chunks_exact_mut(format.block_values()))
            {
                // Random bits are any f16, NaN included: real scales are small.
                for &at in format.f16_offsets() {
                    let scale = f16::from_f32(rng.value() * 0.02);
                    block[at..at + 2].copy_from_slice(&scale.to_le_bytes());
                }
                dequantize_block(format, block, out);
            }
            (bytes, values)
        }
    }
}

fn all_formats() -> Vec<WeightFormat> {
    let mut formats = vec![WeightFormat::F32, WeightFormat::F16, WeightFormat::Bf16];
    formats.extend(GgmlFormat::ALL.map(WeightFormat::Ggml));
    formats
}

/// `y = x Wᵀ` in f64, and the bound on an f32 result's error.
fn reference_product(w: &[f32], x: &[f32], rows: usize, cols: usize, tokens: usize) -> (Vec<f64>, Vec<f64>) {
    let mut y = vec![0f64; tokens * rows];
    let mut bound = vec![0f64; tokens * rows];
    for t in 0..tokens {
        for r in 0..rows {
            let (mut sum, mut magnitude) = (0f64, 0f64);
            for c in 0..cols {
                let term = w[r * cols + c] as f64 * x[t * cols + c] as f64;
                sum += term;
                magnitude += term.abs();
            }
            y[t * rows + r] = sum;
            bound[t * rows + r] = 1e-5 * magnitude + 1e-7;
        }
    }
    (y, bound)
}

fn check_product(gpu: &Gpu, rng: &mut Rng, format: WeightFormat, rows: usize, cols: usize, tokens: usize) {
    let (bytes, values) = random_matrix(rng, format, rows, cols);
    let x = rng.values(tokens * cols);
    let matrix = gpu.upload_matrix("w", format, rows, cols, &bytes).unwrap();
    let input = gpu.upload("x", &x).unwrap();
    let output = gpu.zeros("y", tokens * rows).unwrap();
    let mut batch = Batch::new(gpu);
    batch.matmul(&matrix, &input, tokens, &output).unwrap();
    batch.submit().unwrap();
    let got = gpu.read(&output, tokens * rows).unwrap();
    let (want, bound) = reference_product(&values, &x, rows, cols, tokens);
    for (i, ((g, w), b)) in got.iter().zip(&want).zip(&bound).enumerate() {
        assert!(
            (*g as f64 - w).abs() <= *b,
            "{} {rows}×{cols}, {tokens} tokens: output {i} is {g}, want {w} (±{b})",
            format.name()
        );
    }
}

#[test]
fn products_match_the_cpu_for_every_type_and_odd_size() {
    let gpu = gpu(GpuOptions::default());
    let mut rng = Rng(0x5EED);
    for format in all_formats() {
        let block = match format {
            WeightFormat::Ggml(f) => f.block_values(),
            _ => 1,
        };
        // Decode (1 token), prompts (tiles of 4 and a remainder), odd row
        // counts, rows of one block and of several; float rows of any width.
        let widths = if block == 1 { vec![1, 45, 100, 259] } else { vec![block, 3 * block, 5 * block] };
        for (i, cols) in widths.into_iter().enumerate() {
            for (rows, tokens) in [(1, 1), (67, 1), (33, 5), (130, 9)] {
                if i > 0 && rows == 1 {
                    continue;
                }
                check_product(&gpu, &mut rng, format, rows, cols, tokens);
            }
        }
    }
}

#[test]
fn matrices_larger_than_a_buffer_split_by_rows() {
    // 4 KiB buffers: a Q8_0 matrix of 100 rows of 256 values (272 bytes a
    // row) spreads over 8 buffers, an F16 one of odd width over several too.
    let gpu = gpu(GpuOptions { max_buffer_bytes: Some(4096), ..Default::default() });
    let mut rng = Rng(7);
    check_product(&gpu, &mut rng, WeightFormat::Ggml(GgmlFormat::Q8_0), 100, 256, 3);
    check_product(&gpu, &mut rng, WeightFormat::F16, 51, 77, 2);
    let too_wide = gpu.upload_matrix("wide", WeightFormat::F32, 1, 2048, &[0; 8192]).unwrap_err();
    assert!(too_wide.to_string().contains("more than a GPU buffer may hold"), "{too_wide}");
}

#[test]
fn malformed_matrices_are_refused_with_their_name() {
    let gpu = gpu(GpuOptions::default());
    let short = gpu.upload_matrix("blk.0.ffn_up.weight", WeightFormat::Ggml(GgmlFormat::Q4_K), 2, 256, &[0; 100]);
    let error = short.unwrap_err().to_string();
    assert!(error.contains("blk.0.ffn_up.weight") && error.contains("100 bytes"), "{error}");
    let partial_block = gpu.upload_matrix("w", WeightFormat::Ggml(GgmlFormat::Q4_0), 1, 48, &[0; 27]);
    assert!(partial_block.unwrap_err().to_string().contains("whole blocks of 32"));
}

fn assert_close(what: &str, got: &[f32], want: &[f64], relative: f64) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let tolerance = relative * w.abs().max(1.0);
        assert!((*g as f64 - w).abs() <= tolerance, "{what}: value {i} is {g}, want {w}");
    }
}

#[test]
fn rms_norm_matches() {
    let gpu = gpu(GpuOptions::default());
    let mut rng = Rng(11);
    for (rows, width) in [(1, 64), (3, 1000), (5, 7)] {
        let x = rng.values(rows * width);
        let weight = rng.values(width);
        let eps = 1e-6f32;
        let (xs, ws, ys) =
            (gpu.upload("x", &x).unwrap(), gpu.upload("w", &weight).unwrap(), gpu.zeros("y", x.len()).unwrap());
        let mut batch = Batch::new(&gpu);
        batch.rms_norm(&xs, &ws, eps, rows, &ys).unwrap();
        batch.submit().unwrap();
        let mut want = Vec::new();
        for row in x.chunks(width) {
            let mean = row.iter().map(|v| (*v as f64).powi(2)).sum::<f64>() / width as f64;
            let scale = 1.0 / (mean + eps as f64).sqrt();
            want.extend(row.iter().zip(&weight).map(|(v, w)| *v as f64 * scale * *w as f64));
        }
        assert_close(&format!("RMSNorm {rows}×{width}"), &gpu.read(&ys, x.len()).unwrap(), &want, 1e-5);
    }
}

#[test]
fn rotary_embeddings_match_for_both_pairings_and_partial_rotation() {
    let gpu = gpu(GpuOptions::default());
    let mut rng = Rng(13);
    for (tokens, heads, head_dim, rotary) in [(1, 4, 64, 64), (5, 3, 80, 40), (2, 2, 16, 16)] {
        for pairs in [RotaryPairs::Halves, RotaryPairs::Adjacent] {
            let x = rng.values(tokens * heads * head_dim);
            let angles: Vec<f32> = (0..tokens * rotary / 2).map(|i| i as f32 * 0.37).collect();
            let table: Vec<f32> = angles.iter().flat_map(|a| [a.cos(), a.sin()]).collect();
            let (xs, ts) = (gpu.upload("x", &x).unwrap(), gpu.upload("table", &table).unwrap());
            let mut batch = Batch::new(&gpu);
            batch.rope(&xs, &ts, (tokens, heads, head_dim), rotary, pairs).unwrap();
            batch.submit().unwrap();
            let mut want: Vec<f64> = x.iter().map(|v| *v as f64).collect();
            let half = rotary / 2;
            for t in 0..tokens {
                for h in 0..heads {
                    let base = (t * heads + h) * head_dim;
                    for i in 0..half {
                        let (a, b) = match pairs {
                            RotaryPairs::Halves => (base + i, base + i + half),
                            RotaryPairs::Adjacent => (base + 2 * i, base + 2 * i + 1),
                        };
                        let (c, s) = (table[2 * (t * half + i)] as f64, table[2 * (t * half + i) + 1] as f64);
                        let (x0, x1) = (x[a] as f64, x[b] as f64);
                        want[a] = x0 * c - x1 * s;
                        want[b] = x1 * c + x0 * s;
                    }
                }
            }
            let what = format!("rotary {tokens}×{heads}×{head_dim} ({rotary}, {pairs:?})");
            assert_close(&what, &gpu.read(&xs, x.len()).unwrap(), &want, 1e-5);
        }
    }
}

#[test]
fn gated_activations_adds_and_biases_match() {
    let gpu = gpu(GpuOptions::default());
    let mut rng = Rng(17);
    let len = 1000;
    let (gate, up) = (rng.values(len).iter().map(|v| v * 6.0).collect::<Vec<_>>(), rng.values(len));
    let (gs, us, ys) = (gpu.upload("g", &gate).unwrap(), gpu.upload("u", &up).unwrap(), gpu.zeros("y", len).unwrap());
    for activation in [Activation::Silu, Activation::GeluTanh] {
        let mut batch = Batch::new(&gpu);
        batch.glu(&gs, &us, activation, len, &ys).unwrap();
        batch.submit().unwrap();
        let want: Vec<f64> = gate
            .iter()
            .zip(&up)
            .map(|(&g, &u)| {
                let g = g as f64;
                let a = match activation {
                    Activation::Silu => g / (1.0 + (-g).exp()),
                    Activation::GeluTanh => {
                        0.5 * g * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (g + 0.044715 * g.powi(3))).tanh())
                    }
                };
                a * u as f64
            })
            .collect();
        assert_close(&format!("{activation:?}"), &gpu.read(&ys, len).unwrap(), &want, 1e-5);
    }
    let bias = rng.values(7);
    let bs = gpu.upload("bias", &bias).unwrap();
    let mut batch = Batch::new(&gpu);
    batch.add(&gs, &us, len, &ys).unwrap();
    batch.add_bias(&ys, &bs, 142).unwrap();
    batch.submit().unwrap();
    let want: Vec<f64> =
        (0..len).map(|i| gate[i] as f64 + up[i] as f64 + if i < 994 { bias[i % 7] as f64 } else { 0.0 }).collect();
    assert_close("add then bias", &gpu.read(&ys, len).unwrap(), &want, 1e-6);
}

/// Attention in f64 over keys and values rounded as the cache keeps them.
#[allow(clippy::too_many_arguments)]
fn reference_attention(
    precision: KvPrecision,
    q: &[f32],
    keys: &[f32],
    values: &[f32],
    (tokens, heads, kv_heads, head_dim): (usize, usize, usize, usize),
    positions: usize,
    scale: f32,
    softcap: Option<f32>,
    window: Option<usize>,
    mutual: &[std::ops::Range<usize>],
) -> Vec<f64> {
    let round = |v: f32| match precision {
        KvPrecision::F16 => f16::from_f32(v).to_f32() as f64,
        KvPrecision::F32 => v as f64,
    };
    let mut out = vec![0f64; tokens * heads * head_dim];
    for t in 0..tokens {
        let pos = positions - tokens + t;
        let start = window.map_or(0, |w| (pos + 1).saturating_sub(w));
        let last = mutual.iter().find(|span| span.contains(&pos)).map_or(pos, |span| span.end - 1);
        for h in 0..heads {
            let kvh = h / (heads / kv_heads);
            let qv = &q[(t * heads + h) * head_dim..][..head_dim];
            let scores: Vec<f64> = (start..=last)
                .map(|p| {
                    let k = &keys[(p * kv_heads + kvh) * head_dim..][..head_dim];
                    let s = qv.iter().zip(k).map(|(a, b)| *a as f64 * round(*b)).sum::<f64>() * scale as f64;
                    softcap.map_or(s, |c| c as f64 * (s / c as f64).tanh())
                })
                .collect();
            let max = scores.iter().cloned().fold(f64::MIN, f64::max);
            let weights: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
            let total: f64 = weights.iter().sum();
            for d in 0..head_dim {
                let v: f64 = (start..=last)
                    .zip(&weights)
                    .map(|(p, w)| w * round(values[(p * kv_heads + kvh) * head_dim + d]))
                    .sum();
                out[(t * heads + h) * head_dim + d] = v / total;
            }
        }
    }
    out
}

#[test]
fn attention_matches_for_prompts_and_decode_steps() {
    let gpu = gpu(GpuOptions::default());
    let mut rng = Rng(19);
    struct Case {
        heads: usize,
        kv_heads: usize,
        head_dim: usize,
        prompt: usize,
        steps: usize,
        softcap: Option<f32>,
        window: Option<usize>,
    }
    let cases = [
        Case { heads: 4, kv_heads: 2, head_dim: 64, prompt: 7, steps: 3, softcap: None, window: None },
        // More than one tile of keys, a head wider than the workgroup.
        Case { heads: 2, kv_heads: 1, head_dim: 256, prompt: 70, steps: 2, softcap: None, window: None },
        Case { heads: 3, kv_heads: 3, head_dim: 80, prompt: 100, steps: 2, softcap: Some(50.0), window: Some(37) },
        Case { heads: 8, kv_heads: 1, head_dim: 6, prompt: 1, steps: 4, softcap: None, window: Some(2) },
    ];
    for (c, precision) in cases.iter().flat_map(|c| [(c, KvPrecision::F16), (c, KvPrecision::F32)]) {
        let capacity = c.prompt + c.steps + 3;
        let width = c.kv_heads * c.head_dim;
        let total = c.prompt + c.steps;
        // Large scores test the running maximum.
        let keys: Vec<f32> = rng.values(total * width).iter().map(|v| v * 4.0).collect();
        let values = rng.values(total * width);
        let mut cache = gpu.kv_cache(precision, c.kv_heads, c.head_dim, capacity).unwrap();
        let scale = 1.0 / (c.head_dim as f32).sqrt();
        let mut done = 0;
        for tokens in std::iter::once(c.prompt).chain(std::iter::repeat_n(1, c.steps)) {
            let q = rng.values(tokens * c.heads * c.head_dim);
            let new = done * width..(done + tokens) * width;
            let ks = gpu.upload("k", &keys[new.clone()]).unwrap();
            let vs = gpu.upload("v", &values[new]).unwrap();
            let (qs, out) = (gpu.upload("q", &q).unwrap(), gpu.zeros("out", q.len()).unwrap());
            let shape =
                AttentionShape { tokens, heads: c.heads, scale, softcap: c.softcap, window: c.window, mutual: &[] };
            let mut batch = Batch::new(&gpu);
            batch.kv_append(&mut cache, &ks, &vs, tokens).unwrap();
            batch.attention(&qs, &cache, shape, &out).unwrap();
            batch.submit().unwrap();
            done += tokens;
            let dims = (tokens, c.heads, c.kv_heads, c.head_dim);
            let want = reference_attention(precision, &q, &keys, &values, dims, done, scale, c.softcap, c.window, &[]);
            let what = format!("attention {}/{}×{} at {done} ({precision:?})", c.heads, c.kv_heads, c.head_dim);
            assert_close(&what, &gpu.read(&out, q.len()).unwrap(), &want, 1e-4);
        }
        let mut batch = Batch::new(&gpu);
        let ks = gpu.zeros("k", capacity * width).unwrap();
        let full = batch.kv_append(&mut cache, &ks, &ks, 4).unwrap_err();
        assert!(full.to_string().contains("do not fit"), "{full}");
    }
}

/// Gemma 3's mask for pictures: a span's positions see each other both
/// ways, within the sliding window's reach back, over two prompt pieces.
#[test]
fn attention_lets_a_span_of_positions_see_itself_both_ways() {
    let gpu = gpu(GpuOptions::default());
    let mut rng = Rng(31);
    let (heads, kv_heads, head_dim) = (4, 2, 64);
    let width = kv_heads * head_dim;
    let pieces: [(usize, &[std::ops::Range<usize>]); 2] = [(40, &[3..9, 12..40]), (30, &[45..46, 50..69])];
    for window in [None, Some(16)] {
        let total = 70;
        let keys: Vec<f32> = rng.values(total * width).iter().map(|v| v * 3.0).collect();
        let values = rng.values(total * width);
        let mut cache = gpu.kv_cache(KvPrecision::F32, kv_heads, head_dim, total).unwrap();
        let mut done = 0;
        for (tokens, mutual) in pieces {
            let q = rng.values(tokens * heads * head_dim);
            let new = done * width..(done + tokens) * width;
            let (ks, vs) = (gpu.upload("k", &keys[new.clone()]).unwrap(), gpu.upload("v", &values[new]).unwrap());
            let (qs, out) = (gpu.upload("q", &q).unwrap(), gpu.zeros("out", q.len()).unwrap());
            let shape = AttentionShape { tokens, heads, scale: 0.125, softcap: None, window, mutual };
            let mut batch = Batch::new(&gpu);
            batch.kv_append(&mut cache, &ks, &vs, tokens).unwrap();
            batch.attention(&qs, &cache, shape, &out).unwrap();
            batch.submit().unwrap();
            done += tokens;
            let dims = (tokens, heads, kv_heads, head_dim);
            let want =
                reference_attention(KvPrecision::F32, &q, &keys, &values, dims, done, 0.125, None, window, mutual);
            let causal =
                reference_attention(KvPrecision::F32, &q, &keys, &values, dims, done, 0.125, None, window, &[]);
            let got = gpu.read(&out, q.len()).unwrap();
            assert_close(&format!("spans {mutual:?}, window {window:?}"), &got, &want, 1e-4);
            let apart = got.iter().zip(&causal).map(|(a, b)| (*a as f64 - b).abs()).fold(0.0, f64::max);
            assert!(apart > 1e-2, "the spans changed nothing ({apart})");
        }
        // A span reaching past the cached positions is refused.
        let (qs, out) = (gpu.zeros("q", heads * head_dim).unwrap(), gpu.zeros("out", heads * head_dim).unwrap());
        let past_the_end = 69..71;
        let mutual = std::slice::from_ref(&past_the_end);
        let shape = AttentionShape { tokens: 1, heads, scale: 1.0, softcap: None, window, mutual };
        let refused = Batch::new(&gpu).attention(&qs, &cache, shape, &out).unwrap_err();
        assert!(refused.to_string().contains("not within the 70 cached"), "{refused}");
    }
}

#[test]
fn software_drivers_are_refused_unless_allowed() {
    let opened = Gpu::open(GpuOptions::default());
    let allowed = gpu(GpuOptions::default());
    match opened {
        Ok(gpu) => assert_ne!(gpu.info().kind, cake_gpu::device::AdapterKind::Software),
        Err(why) => {
            assert_eq!(allowed.info().kind, cake_gpu::device::AdapterKind::Software);
            assert!(why.to_string().contains(&allowed.info().name), "{why}");
        }
    }
}

#[test]
fn copied_caches_keep_their_prefix_and_grow() {
    let gpu = gpu(GpuOptions::default());
    let mut rng = Rng(23);
    let (heads, kv_heads, head_dim) = (4, 2, 32);
    let width = kv_heads * head_dim;
    let (keys, values) = (rng.values(10 * width), rng.values(10 * width));
    let mut cache = gpu.kv_cache(KvPrecision::F16, kv_heads, head_dim, 10).unwrap();
    let mut batch = Batch::new(&gpu);
    let (ks, vs) = (gpu.upload("k", &keys).unwrap(), gpu.upload("v", &values).unwrap());
    batch.kv_append(&mut cache, &ks, &vs, 10).unwrap();
    batch.submit().unwrap();
    // Keep 6 positions in room for 40, then attend 4 new ones over them:
    // the same as attending them over the first 10 of the original inputs.
    let mut grown = gpu.kv_copy(&cache, 6, 40).unwrap();
    assert_eq!((grown.len, grown.capacity), (6, 40));
    let new = 6 * width..10 * width;
    let (ks, vs) = (gpu.upload("k", &keys[new.clone()]).unwrap(), gpu.upload("v", &values[new]).unwrap());
    let q = rng.values(4 * heads * head_dim);
    let (qs, out) = (gpu.upload("q", &q).unwrap(), gpu.zeros("out", q.len()).unwrap());
    let scale = 0.2;
    let shape = AttentionShape { tokens: 4, heads, scale, softcap: None, window: None, mutual: &[] };
    let mut batch = Batch::new(&gpu);
    batch.kv_append(&mut grown, &ks, &vs, 4).unwrap();
    batch.attention(&qs, &grown, shape, &out).unwrap();
    batch.submit().unwrap();
    let dims = (4, heads, kv_heads, head_dim);
    let want = reference_attention(KvPrecision::F16, &q, &keys, &values, dims, 10, scale, None, None, &[]);
    assert_close("attention over a copied cache", &gpu.read(&out, q.len()).unwrap(), &want, 1e-4);
    assert!(gpu.kv_copy(&cache, 11, 40).is_err(), "more positions than cached");
}
