//! Prompt-sized products with bf16 weights on CPUs with AVX512_BF16: one
//! `vdpbf16ps` multiplies 16 tokens' values of two adjacent columns by the
//! two weights of a row and adds both products to f32 sums, twice the work
//! of an f32 FMA. The activations are rounded to bf16 for it, as llama.cpp
//! rounds them for bf16 weights; the sums stay f32. One token (decoding)
//! keeps the f32 kernel of the parent module.
//!
//! - The activations are paired and transposed once per product:
//!   `words[j × padded + t]` holds token `t`'s columns `2j` (low half) and
//!   `2j + 1` (high half) as bf16, tokens padded to 16 with zeros.
//! - The weights are read where they lie: a row's pair `j` is the 32-bit
//!   word at column `2j`, broadcast to the 16 lanes.
//! - Tiles of 6 weight rows × 4 vectors of 16 tokens keep 24 sums in
//!   registers, over slices of 64 pairs (64 tokens' slice of activations,
//!   16 KB, stays in the first-level cache); the next slice's weights are
//!   asked for from memory while one is multiplied.

use super::Output;
use crate::pool::Pool;
use half::bf16;
use std::arch::x86_64::*;
use std::ops::Range;

/// Weight rows per work item (4 tiles).
pub(super) const ROWS_PER_ITEM: usize = 4 * TILE_ROWS;
/// Weight rows per tile.
const TILE_ROWS: usize = 6;
/// Tokens per vector.
const LANES: usize = 16;
/// Column pairs multiplied before the tiles move to the next slice.
const SLICE_PAIRS: usize = 64;

/// Whether this CPU has the instruction.
pub(super) fn supported() -> bool {
    is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512bf16")
}

/// The activations as bf16 column pairs, transposed (see the module's doc).
pub(super) struct Pairs {
    words: Vec<u32>,
    /// Tokens, padded to a multiple of [`LANES`].
    padded: usize,
    /// Column pairs (the last one half empty for an odd width).
    count: usize,
}

impl Pairs {
    /// `x` (`m × cols`, row-major) rounded to bf16, paired and transposed,
    /// 16 tokens per work item on `pool`'s threads.
    ///
    /// # Safety
    /// The CPU has AVX-512 F and BF16 ([`supported`]).
    pub(super) unsafe fn new(x: &[f32], m: usize, cols: usize, pool: &Pool) -> Self {
        let padded = m.div_ceil(LANES) * LANES;
        let count = cols.div_ceil(2);
        let mut words = vec![0u32; count * padded];
        let target = Output(words.as_mut_ptr());
        pool.run(padded / LANES, &|blocks| {
            let mut row_words = vec![0u32; count];
            for t in blocks.start * LANES..(blocks.end * LANES).min(m) {
                // SAFETY: the caller checked the CPU's instructions.
                unsafe { round_pairs(&x[t * cols..][..cols], &mut row_words) };
                for (j, &word) in row_words.iter().enumerate() {
                    // SAFETY: in bounds; this item alone writes token `t`'s words.
                    unsafe { target.write(j * padded + t, word) };
                }
            }
        });
        Self { words, padded, count }
    }
}

/// `row` rounded to bf16 as pairs: word `j` holds values `2j` (low half)
/// and `2j + 1` (high half, zero past the end).
#[target_feature(enable = "avx512f,avx512bf16")]
unsafe fn round_pairs(row: &[f32], words: &mut [u32]) {
    let halves = words.as_mut_ptr() as *mut u16;
    let whole = row.len() / 16 * 16;
    for i in (0..whole).step_by(16) {
        let rounded = _mm512_cvtneps_pbh(_mm512_loadu_ps(row.as_ptr().add(i)));
        _mm256_storeu_si256(halves.add(i) as *mut __m256i, std::mem::transmute::<__m256bh, __m256i>(rounded));
    }
    for (i, &value) in row.iter().enumerate().skip(whole) {
        *halves.add(i) = bf16::from_f32(value).to_bits();
    }
    if row.len() % 2 == 1 {
        *halves.add(row.len()) = 0;
    }
}

thread_local! {
    /// A work item's sums, kept from one item to the next.
    static SUMS: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Writes `out[t][row]` for the weight rows `range` and every token.
///
/// # Safety
/// The CPU has AVX-512 F and BF16 ([`supported`]); `w` holds `bf16` bits
/// of a matrix `cols` wide; `out` holds `m × stride` values and no other
/// caller writes these rows.
#[target_feature(enable = "avx512f,avx512bf16")]
pub(super) unsafe fn rows(
    w: &[u16],
    cols: usize,
    x: &Pairs,
    m: usize,
    range: Range<usize>,
    out: &Output,
    stride: usize,
) {
    let padded = x.padded;
    let groups = range.len().div_ceil(TILE_ROWS);
    // Slots past the last row repeat it; their sums are dropped.
    let row_of = |slot: usize| (range.start + slot).min(range.end - 1);
    SUMS.with_borrow_mut(|sums| {
        sums.clear();
        sums.resize(groups * TILE_ROWS * padded, 0.0);
        for j0 in (0..x.count).step_by(SLICE_PAIRS) {
            let next = j0 + SLICE_PAIRS;
            if next < x.count {
                for slot in 0..groups * TILE_ROWS {
                    let row = &w[row_of(slot) * cols..][..cols];
                    prefetch(&row[2 * next..cols.min(2 * (next + SLICE_PAIRS))]);
                }
            }
            let pairs = j0..next.min(x.count);
            for group in 0..groups {
                let w_rows: [*const u16; TILE_ROWS] =
                    std::array::from_fn(|r| w.as_ptr().add(row_of(group * TILE_ROWS + r) * cols));
                let s_group = sums.as_mut_ptr().add(group * TILE_ROWS * padded);
                let mut t0 = 0;
                while t0 < padded {
                    let tile = Tile { w_rows, cols, x: x.words.as_ptr().add(t0), padded, sums: s_group.add(t0) };
                    t0 += match (padded - t0) / LANES {
                        1 => tile.add::<1>(pairs.clone()),
                        2 => tile.add::<2>(pairs.clone()),
                        3 => tile.add::<3>(pairs.clone()),
                        _ => tile.add::<4>(pairs.clone()),
                    };
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
    });
}

/// 6 weight rows × some vectors of tokens.
struct Tile {
    /// Each row's first weight.
    w_rows: [*const u16; TILE_ROWS],
    cols: usize,
    /// Pair 0 of the tile's first token (pairs `padded` apart).
    x: *const u32,
    padded: usize,
    /// The first row's sum of the tile's first token (rows `padded` apart).
    sums: *mut f32,
}

impl Tile {
    /// Adds the products over column pairs `pairs` to the sums of `V`
    /// vectors of tokens; returns the tokens done.
    #[target_feature(enable = "avx512f,avx512bf16")]
    #[inline]
    unsafe fn add<const V: usize>(&self, pairs: Range<usize>) -> usize {
        let mut acc: [[__m512; V]; TILE_ROWS] = std::array::from_fn(|r| {
            std::array::from_fn(|v| _mm512_loadu_ps(self.sums.add(r * self.padded + LANES * v)))
        });
        // An odd width's last pair has one weight: its word is built, not
        // read, since the next one belongs to another row.
        let whole = pairs.start..pairs.end.min(self.cols / 2);
        for j in whole.clone() {
            let words: [u32; TILE_ROWS] =
                std::array::from_fn(|r| (self.w_rows[r].add(2 * j) as *const u32).read_unaligned());
            self.step(&mut acc, j, words);
        }
        if whole.end < pairs.end {
            let j = whole.end;
            self.step(&mut acc, j, std::array::from_fn(|r| *self.w_rows[r].add(2 * j) as u32));
        }
        for (r, acc) in acc.iter().enumerate() {
            for (v, acc) in acc.iter().enumerate() {
                _mm512_storeu_ps(self.sums.add(r * self.padded + LANES * v), *acc);
            }
        }
        LANES * V
    }

    /// One column pair `j` with the rows' weight words.
    #[target_feature(enable = "avx512f,avx512bf16")]
    #[inline]
    unsafe fn step<const V: usize>(&self, acc: &mut [[__m512; V]; TILE_ROWS], j: usize, words: [u32; TILE_ROWS]) {
        let xv: [__m512bh; V] = std::array::from_fn(|v| {
            std::mem::transmute::<__m512i, __m512bh>(_mm512_loadu_si512(
                self.x.add(j * self.padded + LANES * v) as *const __m512i
            ))
        });
        for (acc, word) in acc.iter_mut().zip(words) {
            let weights = std::mem::transmute::<__m512i, __m512bh>(_mm512_set1_epi32(word as i32));
            for (acc, xv) in acc.iter_mut().zip(&xv) {
                *acc = _mm512_dpbf16_ps(*acc, *xv, weights);
            }
        }
    }
}

/// Asks for `values`' cache lines to be read into the first-level cache.
fn prefetch(values: &[u16]) {
    let start = values.as_ptr() as *const i8;
    for offset in (0..std::mem::size_of_val(values)).step_by(64) {
        // SAFETY: a hint on addresses inside `values`; it reads nothing.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(start.add(offset)) };
    }
}
