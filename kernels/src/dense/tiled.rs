//! The prompt-sized case of `y = x · Wᵀ` with AVX2: a tiled product in
//! which every widened weight and every activation loaded is used many
//! times from the first-level cache.
//!
//! The dot-product blocks of the parent module re-read their activation
//! rows from memory for every 4 weight rows; for 64 prompt rows of a
//! 2 048-wide matrix those rows take 512 KB, more than the second-level
//! cache, so that kernel reached a sixth of the FMA units' speed. Here:
//!
//! - the activations are transposed once per product (`cols × tokens`,
//!   tokens padded to a multiple of 8), so 8 tokens' values of one column
//!   are one vector;
//! - each work item takes its weight rows [`SLICE`] columns at a time (f16
//!   and bf16 widened into f32, 24 rows × 128 columns = 12 KB; f32 read
//!   where it lies: copying it cost 6 % of an F32 prefill), and for each
//!   slice runs tiles of 6 weight rows × 16 tokens: per column, 2
//!   activation vectors, 6 broadcast weights and 12 FMAs, the 12 sums in
//!   registers;
//! - sums carry from one slice to the next in a small per-item buffer and
//!   are written out once.

use super::Output;
use crate::values::{widen_into, StoredValue};
use std::ops::Range;

/// Weight columns widened at a time.
const SLICE: usize = 128;
/// Weight rows per work item (4 tiles).
pub(super) const ROWS_PER_ITEM: usize = 4 * TILE_ROWS;
/// Weight rows per tile.
const TILE_ROWS: usize = 6;
/// Most 8-token vectors per tile: the 12 sums, 2 activations and a
/// broadcast weight take 15 of AVX2's 16 registers. (4 rows × 3 vectors
/// would need all 16, and the compiler then keeps a sum on the stack,
/// which halved the speed.)
const TILE_VECTORS: usize = 2;

/// The activations transposed: `values[c * tokens_padded + t] = x[t][c]`,
/// padded tokens zero.
pub(super) struct Transposed {
    values: Vec<f32>,
    tokens_padded: usize,
}

impl Transposed {
    /// `x` (`m × cols`, row-major) transposed.
    pub(super) fn new(x: &[f32], m: usize, cols: usize) -> Self {
        let tokens_padded = m.div_ceil(8) * 8;
        let mut values = vec![0f32; cols * tokens_padded];
        // 8 tokens at a time: one pass reads 8 rows and writes whole vectors.
        for t0 in (0..m).step_by(8) {
            for c in 0..cols {
                let to = &mut values[c * tokens_padded + t0..][..8];
                for (k, slot) in to.iter_mut().enumerate().take(m - t0) {
                    *slot = x[(t0 + k) * cols + c];
                }
            }
        }
        Self { values, tokens_padded }
    }
}

/// Writes `out[t][row]` for the weight rows `range` and every token.
///
/// # Safety
/// The CPU has AVX2, FMA and F16C; `out` holds `m × stride` values and no
/// other caller writes these rows.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn rows_avx2<W: StoredValue>(
    w: &[W],
    cols: usize,
    x: &Transposed,
    m: usize,
    range: Range<usize>,
    out: &Output,
    stride: usize,
) {
    let padded = x.tokens_padded;
    let row_slots = range.len().div_ceil(TILE_ROWS) * TILE_ROWS;
    // Slots past the last row repeat it; their sums are dropped.
    let row_of = |slot: usize| (range.start + slot).min(range.end - 1);
    let mut wide = if W::WIDENS { vec![0f32; row_slots * SLICE] } else { Vec::new() };
    let mut sums = vec![0f32; row_slots * padded];
    for k0 in (0..cols).step_by(SLICE) {
        let width = SLICE.min(cols - k0);
        if W::WIDENS {
            for (slot, wide_row) in wide.chunks_exact_mut(SLICE).enumerate() {
                widen_into(&w[row_of(slot) * cols + k0..][..width], &mut wide_row[..width]);
            }
        }
        // Where each slot's `width` weights lie as f32: f32 weights where
        // they are, others widened into `wide`.
        let slot_at = |slot: usize| -> *const f32 {
            if W::WIDENS {
                wide[slot * SLICE..].as_ptr()
            } else {
                W::as_f32(&w[row_of(slot) * cols + k0..], &mut Vec::new()).as_ptr()
            }
        };
        let x_slice = x.values[k0 * padded..].as_ptr();
        for group in 0..row_slots / TILE_ROWS {
            let w_tile: [*const f32; TILE_ROWS] = std::array::from_fn(|r| slot_at(group * TILE_ROWS + r));
            let s_tile = sums[group * TILE_ROWS * padded..].as_mut_ptr();
            let mut t0 = 0;
            while t0 < padded {
                let x_at = x_slice.add(t0);
                let s_at = s_tile.add(t0);
                if padded - t0 >= 16 {
                    tile::<2>(&w_tile, x_at, s_at, padded, width);
                } else {
                    tile::<1>(&w_tile, x_at, s_at, padded, width);
                }
                t0 += 8 * TILE_VECTORS;
            }
        }
    }
    // Token by token, so each token's outputs are written side by side.
    for t in 0..m {
        for (slot, row) in range.clone().enumerate() {
            // SAFETY: in bounds; this work item alone writes `row`.
            *out.0.add(t * stride + row) = sums[slot * padded + t];
        }
    }
}

/// Adds to the sums of 6 weight rows × `V` 8-token vectors the products over
/// `width` columns. `w` points at the 6 rows' first column (as f32), `x` the
/// tile's first token in column 0 (columns `padded` apart), `sums` the
/// tile's first sum (rows `padded` apart).
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn tile<const V: usize>(
    w: &[*const f32; TILE_ROWS],
    x: *const f32,
    sums: *mut f32,
    padded: usize,
    width: usize,
) {
    use std::arch::x86_64::*;
    let mut acc: [[__m256; V]; TILE_ROWS] =
        std::array::from_fn(|r| std::array::from_fn(|v| _mm256_loadu_ps(sums.add(r * padded + 8 * v))));
    for c in 0..width {
        let xv: [__m256; V] = std::array::from_fn(|v| _mm256_loadu_ps(x.add(c * padded + 8 * v)));
        for (r, acc) in acc.iter_mut().enumerate() {
            let weight = _mm256_broadcast_ss(&*w[r].add(c));
            for (acc, xv) in acc.iter_mut().zip(&xv) {
                *acc = _mm256_fmadd_ps(weight, *xv, *acc);
            }
        }
    }
    for (r, acc) in acc.iter().enumerate() {
        for (v, acc) in acc.iter().enumerate() {
            _mm256_storeu_ps(sums.add(r * padded + 8 * v), *acc);
        }
    }
}
