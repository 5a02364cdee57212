//! `y = x · Wᵀ` for a repacked quantized `W`: the entry point of the kernels.

use super::activations::QuantizedActivations;
use super::cpu::Level;
use super::packed::{PackedMatrix, Tiles, TILE_ROWS};
use super::{plain, pool};
use std::cell::RefCell;
use std::ops::Range;

/// Where a product's values go: `values[t · stride + row]`, rows past
/// `rows` (a last tile's padding) dropped. Threads write disjoint tiles.
pub(super) struct Output {
    values: *mut f32,
    stride: usize,
    rows: usize,
    tokens: usize,
}

// SAFETY: every (token, row group) is stored by exactly one thread.
unsafe impl Sync for Output {}

impl Output {
    /// Stores row group `g` of token `t`.
    pub(super) fn store(&self, t: usize, g: usize, values: &[f32; TILE_ROWS]) {
        let first = g * TILE_ROWS;
        assert!(t < self.tokens && first < self.rows, "token {t}, row group {g} outside the output");
        let n = TILE_ROWS.min(self.rows - first);
        // SAFETY: in bounds (checked above); no other thread writes these.
        unsafe { std::ptr::copy_nonoverlapping(values.as_ptr(), self.values.add(t * self.stride + first), n) }
    }
}

/// `out (m × rows) = x (m × cols) · Wᵀ`, at the CPU's best [`Level`], on
/// the [`pool::global`] threads.
pub fn matmul(w: &PackedMatrix, x: &[f32], m: usize, out: &mut [f32]) {
    thread_local! {
        static ACTIVATIONS: RefCell<QuantizedActivations> = RefCell::default();
    }
    ACTIVATIONS.with(|cell| {
        let mut acts = cell.borrow_mut();
        acts.quantize(x, m, w.cols);
        matmul_quantized(w, &acts, out, Level::detected(), pool::global());
    })
}

/// [`matmul`] with activations already quantized, at a given level and on
/// a given pool.
pub fn matmul_quantized(w: &PackedMatrix, acts: &QuantizedActivations, out: &mut [f32], level: Level, pool: &pool::Pool) {
    assert_eq!(acts.k, w.cols, "activations of {} values for a matrix of {} columns", acts.k, w.cols);
    assert_eq!(out.len(), acts.rows * w.rows, "output of {} values for {} × {}", out.len(), acts.rows, w.rows);
    let output = Output { values: out.as_mut_ptr(), stride: w.rows, rows: w.rows, tokens: acts.rows };
    pool.run(w.row_groups(), &|groups| row_groups(w, groups, acts, &output, level));
}

fn row_groups(w: &PackedMatrix, groups: Range<usize>, acts: &QuantizedActivations, out: &Output, level: Level) {
    match (&w.tiles, level) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Level` is only this high when the CPU has the instructions.
        (Tiles::Q4(tiles), Level::Avx512Vnni) => unsafe { super::x86_avx512::q4(tiles, groups, acts, out) },
        #[cfg(target_arch = "x86_64")]
        (Tiles::Q8(tiles), Level::Avx512Vnni) => unsafe { super::x86_avx512::q8(tiles, groups, acts, out) },
        #[cfg(target_arch = "x86_64")]
        (Tiles::Q4(tiles), Level::Avx2) => unsafe { super::x86_avx2::q4(tiles, groups, acts, out) },
        #[cfg(target_arch = "x86_64")]
        (Tiles::Q8(tiles), Level::Avx2) => unsafe { super::x86_avx2::q8(tiles, groups, acts, out) },
        (Tiles::Q4(tiles), _) => plain::q4(tiles, groups, acts, out),
        (Tiles::Q8(tiles), _) => plain::q8(tiles, groups, acts, out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packed::tests::random_ggml;
    use crate::packed::GgmlFormat;

    fn random_activations(m: usize, k: usize, seed: u32) -> Vec<f32> {
        let mut state = seed | 1;
        (0..m * k)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 17;
                state ^= state << 5;
                (state % 4001) as f32 / 1000.0 - 2.0
            })
            .collect()
    }

    /// Every level gives bit-identical results, and they agree with a
    /// float product of the dequantized matrices to quantization accuracy.
    #[test]
    fn every_level_equals_the_plain_kernel_and_the_float_product() {
        let pools = [pool::Pool::new(1), pool::Pool::new(3)];
        for dtype in [GgmlFormat::Q4_1, GgmlFormat::Q4_0, GgmlFormat::Q8_0] {
            for (rows, cols, m) in [(16, 32, 1), (1, 64, 3), (37, 96, 5), (70, 576, 2), (33, 160, 9)] {
                let (bytes, dense) = random_ggml(dtype, rows, cols, (rows * cols) as u64);
                let w = PackedMatrix::from_ggml(dtype, &bytes, rows, cols).unwrap();
                let x = random_activations(m, cols, (rows + m) as u32);
                let mut acts = QuantizedActivations::default();
                acts.quantize(&x, m, cols);
                let mut reference = vec![0f32; m * rows];
                matmul_quantized(&w, &acts, &mut reference, Level::Plain, &pools[0]);
                for level in Level::all_supported() {
                    for pool in &pools {
                        let mut out = vec![f32::NAN; m * rows];
                        matmul_quantized(&w, &acts, &mut out, level, pool);
                        assert_eq!(out, reference, "{dtype:?} {rows}×{cols}, {m} rows, {level:?}, {} threads", pool.threads());
                    }
                }
                for t in 0..m {
                    for r in 0..rows {
                        let exact: f32 = (0..cols).map(|c| x[t * cols + c] * dense[r * cols + c]).sum();
                        let scale: f32 = (0..cols).map(|c| (x[t * cols + c] * dense[r * cols + c]).abs()).sum();
                        let got = reference[t * rows + r];
                        assert!((got - exact).abs() <= 0.02 * scale + 1e-4, "{dtype:?} token {t} row {r}: {got} vs {exact}");
                    }
                }
            }
        }
    }
}
