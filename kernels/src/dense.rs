//! `y = x · Wᵀ` for a dense `W` (f32, or f16 or bf16 widened as it is read) and a
//! few rows of `x`: generating one
//! token multiplies every weight by one activation row, so the product is
//! bound by reading `W`; this streams the rows of `W` on the pool's threads,
//! each dotted with the activation rows while it is in cache. With one
//! activation row each weight row is read front to back on its own. With
//! AVX-512 and several activation rows, blocks of 4 weight rows × up to 4
//! activation rows reuse every load (short prompts); with AVX2, blocks of
//! 4 × up to 3, and from [`TILED_MIN_ROWS`] rows the tiled product of
//! [`tiled`]. Longer prompts than [`MAX_ROWS`] are taken in pieces.

#[cfg(target_arch = "x86_64")]
mod bf16_pairs;
#[cfg(target_arch = "x86_64")]
mod tiled;

use super::cpu::Level;
use super::pool::Pool;
use super::values::StoredValue;
use std::ops::Range;

/// Most activation rows Cake uses this kernel for; more go to a GEMM. (On the
/// development machine it takes half the time of candle's GEMM for a
/// 16-token prompt and the same for 256 tokens.)
pub const MAX_ROWS: usize = 64;
/// Weight rows per work item.
const ROWS_PER_ITEM: usize = 16;
/// Fewest activation rows the AVX2 level multiplies by [`tiled`] rather
/// than by dot-product blocks.
pub const TILED_MIN_ROWS: usize = 8;

/// Most activation rows to hand [`matmul_dense`] at once for weights of
/// type `W` at `level`: [`MAX_ROWS`], or 256 for bf16 weights multiplied in
/// bf16 ([`rounds_bf16_prompts`]), whose weights are then read once per 256
/// prompt tokens rather than per 64 (a 256-token prefill 10 % faster).
pub fn rows_per_call<W: StoredValue>(level: Level) -> usize {
    if W::bf16_bits(&[]).is_some() && rounds_bf16_prompts(level, TILED_MIN_ROWS) {
        256
    } else {
        MAX_ROWS
    }
}

/// Whether [`matmul_dense`] rounds `m` activation rows to bf16 for bf16
/// weights at `level`: from [`TILED_MIN_ROWS`] rows, with AVX-512 on a CPU
/// with bf16 dot products ([`bf16_pairs`]).
pub fn rounds_bf16_prompts(level: Level, m: usize) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        static SUPPORTED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        level == Level::Avx512Vnni && m >= TILED_MIN_ROWS && *SUPPORTED.get_or_init(bf16_pairs::supported)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (level, m);
        false
    }
}

/// `out (m × rows) = x (m × cols) · Wᵀ` with `W` row-major `rows × cols`.
#[allow(clippy::too_many_arguments)]
pub fn matmul_dense<W: StoredValue>(
    w: &[W],
    rows: usize,
    cols: usize,
    x: &[f32],
    m: usize,
    out: &mut [f32],
    level: Level,
    pool: &Pool,
) {
    assert!(w.len() == rows * cols && x.len() == m * cols && out.len() == m * rows, "sizes disagree");
    let output = Output(out.as_mut_ptr());
    #[cfg(target_arch = "x86_64")]
    if let Some(bits) = W::bf16_bits(w).filter(|_| rounds_bf16_prompts(level, m)) {
        // SAFETY (both): `rounds_bf16_prompts` checked the CPU's instructions.
        let pairs = unsafe { bf16_pairs::Pairs::new(x, m, cols, pool) };
        let item = |item| unsafe { bf16_pairs::rows(bits, cols, &pairs, m, item, &output, rows) };
        return by_items(rows, bf16_pairs::ROWS_PER_ITEM, pool, &item);
    }
    #[cfg(target_arch = "x86_64")]
    if level == Level::Avx2 && m >= TILED_MIN_ROWS {
        let transposed = tiled::Transposed::new(x, m, cols);
        // SAFETY: `Level` is only this high when the CPU has AVX2, FMA and F16C.
        let item = |item| unsafe { tiled::rows_avx2(w, cols, &transposed, m, item, &output, rows) };
        return by_items(rows, tiled::ROWS_PER_ITEM, pool, &item);
    }
    pool.run(rows.div_ceil(ROWS_PER_ITEM), &|items| {
        let range = items.start * ROWS_PER_ITEM..(items.end * ROWS_PER_ITEM).min(rows);
        rows_of(w, cols, x, m, range, &output, rows, level)
    });
}

/// Calls `item` on the pool's threads for consecutive ranges of `per_item`
/// of the `rows` weight rows.
#[cfg(target_arch = "x86_64")]
fn by_items(rows: usize, per_item: usize, pool: &Pool, item: &(dyn Fn(Range<usize>) + Sync)) {
    pool.run(rows.div_ceil(per_item), &|items| {
        let range = items.start * per_item..(items.end * per_item).min(rows);
        for start in range.clone().step_by(per_item) {
            item(start..range.end.min(start + per_item));
        }
    });
}

/// Memory the pool's threads fill together (outputs, or [`bf16_pairs`]'
/// transposed activations).
struct Output<T = f32>(*mut T);
// SAFETY: work items write disjoint parts.
unsafe impl<T> Sync for Output<T> {}

impl<T> Output<T> {
    /// # Safety
    /// `i` is in bounds and no other thread writes it.
    #[cfg(target_arch = "x86_64")]
    unsafe fn write(&self, i: usize, value: T) {
        *self.0.add(i) = value;
    }
}

#[allow(clippy::too_many_arguments)]
fn rows_of<W: StoredValue>(
    w: &[W],
    cols: usize,
    x: &[f32],
    m: usize,
    range: Range<usize>,
    out: &Output,
    stride: usize,
    level: Level,
) {
    #[cfg(target_arch = "x86_64")]
    if level == Level::Avx512Vnni && m > 1 {
        // SAFETY: `Level` is only this high when the CPU has AVX-512.
        return unsafe { blocked_rows::<W, Avx512Blocks>(w, cols, x, m, range, out, stride) };
    }
    #[cfg(target_arch = "x86_64")]
    if level == Level::Avx2 && m > 1 {
        // SAFETY: `Level` is only this high when the CPU has AVX2, FMA and F16C.
        return unsafe { blocked_rows::<W, Avx2Blocks>(w, cols, x, m, range, out, stride) };
    }
    // One row at a time, read front to back: with one activation row there
    // is no load to share, and a single stream through memory keeps the
    // prefetchers ahead (blocks of 4 rows read as 4 streams took twice as
    // long per token for F16 weights).
    for row in range {
        let weights = &w[row * cols..(row + 1) * cols];
        for t in 0..m {
            let value = dot(weights, &x[t * cols..(t + 1) * cols], level);
            // SAFETY: in bounds; this item alone writes `row`.
            unsafe { *out.0.add(t * stride + row) = value };
        }
    }
}

/// A SIMD level's dot products of 4 weight rows with `T` activation rows.
#[cfg(target_arch = "x86_64")]
trait BlockDots {
    /// Most activation rows one block takes (at most 4).
    const MAX_TOKENS: usize;

    /// # Safety
    /// The CPU has the level's instructions.
    unsafe fn dots<W: StoredValue, const T: usize>(w: &[&[W]; 4], x: &[&[f32]; T], cols: usize) -> [[f32; T]; 4];
}

/// Blocks of 4 × up to 4 with AVX-512.
#[cfg(target_arch = "x86_64")]
struct Avx512Blocks;

#[cfg(target_arch = "x86_64")]
impl BlockDots for Avx512Blocks {
    const MAX_TOKENS: usize = 4;

    unsafe fn dots<W: StoredValue, const T: usize>(w: &[&[W]; 4], x: &[&[f32]; T], cols: usize) -> [[f32; T]; 4] {
        dots_avx512(w, x, cols)
    }
}

/// Blocks of 4 × up to 3 with AVX2: the 12 sums, 3 activations and a
/// weight fill its 16 registers.
#[cfg(target_arch = "x86_64")]
struct Avx2Blocks;

#[cfg(target_arch = "x86_64")]
impl BlockDots for Avx2Blocks {
    const MAX_TOKENS: usize = 3;

    unsafe fn dots<W: StoredValue, const T: usize>(w: &[&[W]; 4], x: &[&[f32]; T], cols: usize) -> [[f32; T]; 4] {
        dots_avx2(w, x, cols)
    }
}

/// [`rows_of`] in blocks of 4 weight rows × up to `K::MAX_TOKENS`
/// activation rows, each block reusing every load. Edge blocks repeat
/// their last row and drop the repeats' results.
///
/// # Safety
/// The CPU has `K`'s instructions.
#[cfg(target_arch = "x86_64")]
unsafe fn blocked_rows<W: StoredValue, K: BlockDots>(
    w: &[W],
    cols: usize,
    x: &[f32],
    m: usize,
    range: Range<usize>,
    out: &Output,
    stride: usize,
) {
    let mut r0 = range.start;
    while r0 < range.end {
        let rows = r0..range.end.min(r0 + 4);
        let w_rows: [&[W]; 4] = std::array::from_fn(|k| {
            let row = (r0 + k).min(rows.end - 1);
            &w[row * cols..(row + 1) * cols]
        });
        let mut t0 = 0;
        while t0 < m {
            let tokens = t0..m.min(t0 + K::MAX_TOKENS);
            match tokens.len() {
                1 => block::<W, K, 1>(&w_rows, rows.clone(), x, tokens, cols, out, stride),
                2 => block::<W, K, 2>(&w_rows, rows.clone(), x, tokens, cols, out, stride),
                3 => block::<W, K, 3>(&w_rows, rows.clone(), x, tokens, cols, out, stride),
                _ => block::<W, K, 4>(&w_rows, rows.clone(), x, tokens, cols, out, stride),
            }
            t0 += K::MAX_TOKENS;
        }
        r0 += 4;
    }
}

/// Writes the dot products of weight rows `rows` (`w` holds them, the last
/// repeated to 4) with activation rows `tokens` (at most `T`).
///
/// # Safety
/// The CPU has `K`'s instructions.
#[cfg(target_arch = "x86_64")]
unsafe fn block<W: StoredValue, K: BlockDots, const T: usize>(
    w: &[&[W]; 4],
    rows: Range<usize>,
    x: &[f32],
    tokens: Range<usize>,
    cols: usize,
    out: &Output,
    stride: usize,
) {
    let x_rows: [&[f32]; T] = std::array::from_fn(|k| {
        let t = (tokens.start + k).min(tokens.end - 1);
        &x[t * cols..(t + 1) * cols]
    });
    let values = K::dots::<W, T>(w, &x_rows, cols);
    for (row, row_values) in rows.zip(&values) {
        for (t, &value) in tokens.clone().zip(row_values) {
            // SAFETY: in bounds; this work item alone writes these rows.
            *out.0.add(t * stride + row) = value;
        }
    }
}

/// The 4 × `T` dot products of 4 weight rows with `T` activation rows.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,fma,f16c")]
unsafe fn dots_avx512<W: StoredValue, const T: usize>(w: &[&[W]; 4], x: &[&[f32]; T], cols: usize) -> [[f32; T]; 4] {
    use std::arch::x86_64::*;
    let mut acc = [[_mm512_setzero_ps(); T]; 4];
    let mut i = 0;
    let mut step = |wv: [__m512; 4], xv: [__m512; T]| {
        for r in 0..4 {
            for t in 0..T {
                acc[r][t] = _mm512_fmadd_ps(wv[r], xv[t], acc[r][t]);
            }
        }
    };
    while i + 16 <= cols {
        step(
            std::array::from_fn(|r| W::load16(w[r].as_ptr().add(i), 0xFFFF)),
            std::array::from_fn(|t| _mm512_loadu_ps(x[t].as_ptr().add(i))),
        );
        i += 16;
    }
    if i < cols {
        let mask: __mmask16 = ((1u32 << (cols - i)) - 1) as u16;
        step(
            std::array::from_fn(|r| W::load16(w[r].as_ptr().add(i), mask)),
            std::array::from_fn(|t| _mm512_maskz_loadu_ps(mask, x[t].as_ptr().add(i))),
        );
    }
    std::array::from_fn(|r| std::array::from_fn(|t| _mm512_reduce_add_ps(acc[r][t])))
}

/// The 4 × `T` dot products of 4 weight rows with `T` activation rows.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dots_avx2<W: StoredValue, const T: usize>(w: &[&[W]; 4], x: &[&[f32]; T], cols: usize) -> [[f32; T]; 4] {
    use std::arch::x86_64::*;
    let mut acc = [[_mm256_setzero_ps(); T]; 4];
    let mut i = 0;
    while i + 8 <= cols {
        let xv: [__m256; T] = std::array::from_fn(|t| _mm256_loadu_ps(x[t].as_ptr().add(i)));
        for (acc, w) in acc.iter_mut().zip(w) {
            let wv = W::load8(w.as_ptr().add(i));
            for (acc, xv) in acc.iter_mut().zip(&xv) {
                *acc = _mm256_fmadd_ps(wv, *xv, *acc);
            }
        }
        i += 8;
    }
    std::array::from_fn(|r| {
        std::array::from_fn(|t| {
            let tail: f32 = (i..cols).map(|c| w[r][c].widen() * x[t][c]).sum();
            sum_lanes_avx2(acc[r][t]) + tail
        })
    })
}

/// The sum of a vector's 8 lanes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn sum_lanes_avx2(v: std::arch::x86_64::__m256) -> f32 {
    use std::arch::x86_64::*;
    let half = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    let pairs = _mm_add_ps(half, _mm_movehl_ps(half, half));
    _mm_cvtss_f32(_mm_add_ss(pairs, _mm_shuffle_ps(pairs, pairs, 1)))
}

/// `Σ w[i] · x[i]` at `level`, `w` widened to f32 as it is read.
pub(crate) fn dot<W: StoredValue>(w: &[W], x: &[f32], level: Level) -> f32 {
    debug_assert_eq!(w.len(), x.len());
    match level {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Level` is only this high when the CPU has the instructions.
        Level::Avx512Vnni => unsafe { dot_avx512(w, x) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as above.
        Level::Avx2 => unsafe { dot_avx2(w, x) },
        _ => dot_plain(w, x),
    }
}

fn dot_plain<W: StoredValue>(w: &[W], x: &[f32]) -> f32 {
    let mut lanes = [0f32; 8];
    let chunks = w.len() / 8 * 8;
    for (cw, cx) in w[..chunks].chunks_exact(8).zip(x[..chunks].chunks_exact(8)) {
        for i in 0..8 {
            lanes[i] = cw[i].widen().mul_add(cx[i], lanes[i]);
        }
    }
    let tail: f32 = w[chunks..].iter().zip(&x[chunks..]).map(|(a, b)| a.widen() * b).sum();
    lanes.iter().sum::<f32>() + tail
}

/// Four independent sums of 16 lanes, so that each FMA waits on none.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,fma,f16c")]
unsafe fn dot_avx512<W: StoredValue>(w: &[W], x: &[f32]) -> f32 {
    use std::arch::x86_64::*;
    let n = w.len();
    let mut acc = [_mm512_setzero_ps(); 4];
    let mut i = 0;
    while i + 64 <= n {
        for (k, acc) in acc.iter_mut().enumerate() {
            let at = i + 16 * k;
            *acc = _mm512_fmadd_ps(W::load16(w.as_ptr().add(at), 0xFFFF), _mm512_loadu_ps(x.as_ptr().add(at)), *acc);
        }
        i += 64;
    }
    while i < n {
        let mask: __mmask16 = ((1u32 << (n - i).min(16)) - 1) as u16;
        let (a, b) = (W::load16(w.as_ptr().add(i), mask), _mm512_maskz_loadu_ps(mask, x.as_ptr().add(i)));
        acc[0] = _mm512_fmadd_ps(a, b, acc[0]);
        i += 16;
    }
    let sum = _mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3]));
    _mm512_reduce_add_ps(sum)
}

/// Four independent sums of 8 lanes; the last `n % 8` products in scalar.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_avx2<W: StoredValue>(w: &[W], x: &[f32]) -> f32 {
    use std::arch::x86_64::*;
    let n = w.len();
    let mut acc = [_mm256_setzero_ps(); 4];
    let mut i = 0;
    while i + 32 <= n {
        for (k, acc) in acc.iter_mut().enumerate() {
            let at = i + 8 * k;
            *acc = _mm256_fmadd_ps(W::load8(w.as_ptr().add(at)), _mm256_loadu_ps(x.as_ptr().add(at)), *acc);
        }
        i += 32;
    }
    while i + 8 <= n {
        acc[0] = _mm256_fmadd_ps(W::load8(w.as_ptr().add(i)), _mm256_loadu_ps(x.as_ptr().add(i)), acc[0]);
        i += 8;
    }
    let sum = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
    let tail: f32 = w[i..].iter().zip(&x[i..]).map(|(a, b)| a.widen() * b).sum();
    sum_lanes_avx2(sum) + tail
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::{bf16, f16};

    /// f16 and bf16 weights give, at every level, the product of their f32
    /// values (with the activations rounded to bf16 where bf16 prompts are).
    #[test]
    fn half_precision_weights_multiply_as_their_f32_values() {
        fn check<W: StoredValue>(
            narrow: impl Fn(f32) -> W,
            widen: impl Fn(W) -> f32,
            rounds: fn(Level, usize) -> bool,
        ) {
            let pool = Pool::new(2);
            for (rows, cols, m) in [(5, 7, 1), (37, 100, 1), (17, 64, 3), (9, 33, 9), (37, 600, 20), (6, 300, 64)] {
                let w: Vec<W> = (0..rows * cols).map(|i| narrow(((i * 7919 % 1000) as f32 - 500.0) / 250.0)).collect();
                let wide: Vec<f32> = w.iter().map(|&v| widen(v)).collect();
                let x: Vec<f32> = (0..m * cols).map(|i| ((i * 104729 % 777) as f32 - 388.0) / 200.0).collect();
                let rounded: Vec<f32> = x.iter().map(|&v| bf16::from_f32(v).to_f32()).collect();
                for level in Level::all_supported() {
                    let (mut got, mut expected) = (vec![f32::NAN; m * rows], vec![f32::NAN; m * rows]);
                    matmul_dense(&w, rows, cols, &x, m, &mut got, level, &pool);
                    let x_used = if rounds(level, m) { &rounded } else { &x };
                    matmul_dense(&wide, rows, cols, x_used, m, &mut expected, level, &pool);
                    for (i, (a, b)) in got.iter().zip(&expected).enumerate() {
                        let scale: f32 =
                            (0..cols).map(|c| (x[i / rows * cols + c] * wide[i % rows * cols + c]).abs()).sum();
                        assert!(
                            (a - b).abs() <= 1e-6 * scale + 1e-9,
                            "{rows}×{cols}, m {m}, value {i}, {level:?}: {a} vs {b}"
                        );
                    }
                }
            }
        }
        check(f16::from_f32, f16::to_f32, |_, _| false);
        check(bf16::from_f32, bf16::to_f32, rounds_bf16_prompts);
    }

    /// Prompts against bf16 weights on bf16 dot products: the exact sums of
    /// the weights by the activations rounded to bf16, for odd widths, token
    /// counts that leave part of a tile, and rows that leave part of an item.
    #[test]
    fn bf16_prompts_multiply_activations_rounded_to_bf16() {
        let level = Level::detected();
        if !rounds_bf16_prompts(level, TILED_MIN_ROWS) {
            eprintln!("this CPU has no bf16 dot products: nothing to check");
            return;
        }
        let pool = Pool::new(2);
        for (rows, cols, m) in [(7, 5, 8), (25, 129, 17), (50, 300, 70), (13, 1001, 256)] {
            let w: Vec<bf16> =
                (0..rows * cols).map(|i| bf16::from_f32(((i * 7919 % 1000) as f32 - 500.0) / 250.0)).collect();
            let x: Vec<f32> = (0..m * cols).map(|i| ((i * 104729 % 777) as f32 - 388.3) / 200.7).collect();
            let mut out = vec![f32::NAN; m * rows];
            matmul_dense(&w, rows, cols, &x, m, &mut out, level, &pool);
            for t in 0..m {
                for r in 0..rows {
                    let pairs = (0..cols).map(|c| bf16::from_f32(x[t * cols + c]).to_f64() * w[r * cols + c].to_f64());
                    let exact: f64 = pairs.clone().sum();
                    let scale: f64 = pairs.map(f64::abs).sum();
                    let got = out[t * rows + r] as f64;
                    assert!(
                        (got - exact).abs() <= 1e-6 * scale + 1e-9,
                        "{rows}×{cols}, token {t} row {r}: {got} vs {exact}"
                    );
                }
            }
        }
    }

    #[test]
    fn every_level_matches_a_double_precision_product() {
        let pools = [Pool::new(1), Pool::new(3)];
        for (rows, cols, m) in [
            (1, 1, 1),
            (5, 7, 2),
            (37, 100, 4),
            (64, 576, 1),
            (17, 1000, 3),
            (7, 33, 9),
            (21, 64, 6),
            (33, 520, 8),
            (18, 257, 31),
        ] {
            let w: Vec<f32> = (0..rows * cols).map(|i| ((i * 7919 % 1000) as f32 - 500.0) / 250.0).collect();
            let x: Vec<f32> = (0..m * cols).map(|i| ((i * 104729 % 777) as f32 - 388.0) / 200.0).collect();
            for level in Level::all_supported() {
                for pool in &pools {
                    let mut out = vec![f32::NAN; m * rows];
                    matmul_dense(&w, rows, cols, &x, m, &mut out, level, pool);
                    for t in 0..m {
                        for r in 0..rows {
                            let pairs = (0..cols).map(|c| x[t * cols + c] as f64 * w[r * cols + c] as f64);
                            let exact: f64 = pairs.clone().sum();
                            let scale: f64 = pairs.map(f64::abs).sum();
                            let got = out[t * rows + r] as f64;
                            assert!(
                                (got - exact).abs() <= 1e-6 * scale + 1e-9,
                                "{rows}×{cols}, token {t} row {r}, {level:?}: {got} vs {exact}"
                            );
                        }
                    }
                }
            }
        }
    }
}
