//! `y = x · Wᵀ` for a dense f32 `W` and a few rows of `x`: generating one
//! token multiplies every weight by one activation row, so the product is
//! bound by reading `W`; this streams the rows of `W` on the pool's threads,
//! each dotted with up to 4 activation rows while it is in cache.
//! (Products with many rows, a prompt's, are left to a blocked GEMM.)

use super::cpu::Level;
use super::pool::Pool;
use std::ops::Range;

/// Most activation rows this kernel takes; more go to a GEMM.
pub const MAX_ROWS: usize = 4;
/// Weight rows per work item.
const ROWS_PER_ITEM: usize = 16;

/// `out (m × rows) = x (m × cols) · Wᵀ` with `W` row-major `rows × cols`
/// and `m ≤` [`MAX_ROWS`].
pub fn matmul_f32(w: &[f32], rows: usize, cols: usize, x: &[f32], m: usize, out: &mut [f32], level: Level, pool: &Pool) {
    assert!(m <= MAX_ROWS, "{m} activation rows: at most {MAX_ROWS}");
    assert!(w.len() == rows * cols && x.len() == m * cols && out.len() == m * rows, "sizes disagree");
    let output = Output(out.as_mut_ptr());
    pool.run(rows.div_ceil(ROWS_PER_ITEM), &|items| {
        let range = items.start * ROWS_PER_ITEM..(items.end * ROWS_PER_ITEM).min(rows);
        rows_of(w, cols, x, m, range, &output, rows, level)
    });
}

struct Output(*mut f32);
// SAFETY: work items write disjoint row ranges.
unsafe impl Sync for Output {}

#[allow(clippy::too_many_arguments)]
fn rows_of(w: &[f32], cols: usize, x: &[f32], m: usize, range: Range<usize>, out: &Output, stride: usize, level: Level) {
    for row in range {
        let weights = &w[row * cols..(row + 1) * cols];
        for t in 0..m {
            let xs = &x[t * cols..(t + 1) * cols];
            let value = dot(weights, xs, level);
            // SAFETY: in bounds; this item alone writes `row`.
            unsafe { *out.0.add(t * stride + row) = value };
        }
    }
}

/// `Σ a[i] · b[i]` at `level`.
pub(crate) fn dot(a: &[f32], b: &[f32], level: Level) -> f32 {
    match level {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Level` is only this high when the CPU has the instructions.
        Level::Avx512Vnni => unsafe { dot_avx512(a, b) },
        #[cfg(target_arch = "x86_64")]
        Level::Avx2 => unsafe { dot_avx2(a, b) },
        _ => dot_plain(a, b),
    }
}

fn dot_plain(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0f32; 8];
    let chunks = a.len() / 8 * 8;
    for (ca, cb) in a[..chunks].chunks_exact(8).zip(b[..chunks].chunks_exact(8)) {
        for i in 0..8 {
            lanes[i] = ca[i].mul_add(cb[i], lanes[i]);
        }
    }
    let tail: f32 = a[chunks..].iter().zip(&b[chunks..]).map(|(x, y)| x * y).sum();
    lanes.iter().sum::<f32>() + tail
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,fma")]
unsafe fn dot_avx512(a: &[f32], b: &[f32]) -> f32 {
    use std::arch::x86_64::*;
    let n = a.len();
    let mut acc = [_mm512_setzero_ps(); 4];
    let mut i = 0;
    while i + 64 <= n {
        for (k, acc) in acc.iter_mut().enumerate() {
            let at = i + 16 * k;
            *acc = _mm512_fmadd_ps(_mm512_loadu_ps(a.as_ptr().add(at)), _mm512_loadu_ps(b.as_ptr().add(at)), *acc);
        }
        i += 64;
    }
    while i + 16 <= n {
        acc[0] = _mm512_fmadd_ps(_mm512_loadu_ps(a.as_ptr().add(i)), _mm512_loadu_ps(b.as_ptr().add(i)), acc[0]);
        i += 16;
    }
    if i < n {
        let mask: __mmask16 = (1u32 << (n - i)) as u16 - 1;
        let (x, y) = (_mm512_maskz_loadu_ps(mask, a.as_ptr().add(i)), _mm512_maskz_loadu_ps(mask, b.as_ptr().add(i)));
        acc[1] = _mm512_fmadd_ps(x, y, acc[1]);
    }
    let sum = _mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3]));
    _mm512_reduce_add_ps(sum)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn dot_avx2(a: &[f32], b: &[f32]) -> f32 {
    use std::arch::x86_64::*;
    let n = a.len();
    let mut acc = [_mm256_setzero_ps(); 4];
    let mut i = 0;
    while i + 32 <= n {
        for (k, acc) in acc.iter_mut().enumerate() {
            let at = i + 8 * k;
            *acc = _mm256_fmadd_ps(_mm256_loadu_ps(a.as_ptr().add(at)), _mm256_loadu_ps(b.as_ptr().add(at)), *acc);
        }
        i += 32;
    }
    while i + 8 <= n {
        acc[0] = _mm256_fmadd_ps(_mm256_loadu_ps(a.as_ptr().add(i)), _mm256_loadu_ps(b.as_ptr().add(i)), acc[0]);
        i += 8;
    }
    let sum = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
    let half = _mm_add_ps(_mm256_castps256_ps128(sum), _mm256_extractf128_ps(sum, 1));
    let pairs = _mm_add_ps(half, _mm_movehl_ps(half, half));
    let single = _mm_add_ss(pairs, _mm_shuffle_ps(pairs, pairs, 1));
    let tail: f32 = a[i..].iter().zip(&b[i..]).map(|(x, y)| x * y).sum();
    _mm_cvtss_f32(single) + tail
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_level_matches_a_double_precision_product() {
        let pools = [Pool::new(1), Pool::new(3)];
        for (rows, cols, m) in [(1, 1, 1), (5, 7, 2), (37, 100, 4), (64, 576, 1), (17, 1000, 3)] {
            let w: Vec<f32> = (0..rows * cols).map(|i| ((i * 7919 % 1000) as f32 - 500.0) / 250.0).collect();
            let x: Vec<f32> = (0..m * cols).map(|i| ((i * 104729 % 777) as f32 - 388.0) / 200.0).collect();
            for level in Level::all_supported() {
                for pool in &pools {
                    let mut out = vec![f32::NAN; m * rows];
                    matmul_f32(&w, rows, cols, &x, m, &mut out, level, pool);
                    for t in 0..m {
                        for r in 0..rows {
                            let pairs = (0..cols).map(|c| x[t * cols + c] as f64 * w[r * cols + c] as f64);
                            let exact: f64 = pairs.clone().sum();
                            let scale: f64 = pairs.map(f64::abs).sum();
                            let got = out[t * rows + r] as f64;
                            assert!((got - exact).abs() <= 1e-6 * scale + 1e-9, "{rows}×{cols}, token {t} row {r}, {level:?}: {got} vs {exact}");
                        }
                    }
                }
            }
        }
    }
}
