//! The kernels with AVX2: each tile is taken as two halves of 8 rows;
//! `vpmaddubsw` multiplies unsigned by signed bytes into `i16` pairs and
//! `vpmaddwd` sums those into one `i32` per row. Up to 2 activation rows
//! share each unpacked half tile. Same arithmetic, in the same order, as
//! [`super::plain`].

use super::activations::{QuantizedActivations, BLOCK};
use super::matmul::Output;
use super::packed::{TileQ4, TileQ8, TILE_ROWS};
use std::arch::x86_64::*;
use std::ops::Range;

/// Activation rows sharing one pass over a row group's tiles.
const TOKENS: usize = 2;
const HALF: usize = TILE_ROWS / 2;

#[inline(always)]
unsafe fn broadcast_four(acts: &QuantizedActivations, block: usize, j: usize) -> __m256i {
    let at = acts.qs.as_ptr().add(block * BLOCK + 4 * j) as *const i32;
    _mm256_set1_epi32(at.read_unaligned())
}

#[inline(always)]
unsafe fn store(acc: &[__m256; 2], out: &Output, t: usize, g: usize) {
    let mut values = [0f32; TILE_ROWS];
    _mm256_storeu_ps(values.as_mut_ptr(), acc[0]);
    _mm256_storeu_ps(values.as_mut_ptr().add(HALF), acc[1]);
    out.store(t, g, &values);
}

/// See [`super::plain::q4`].
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn q4(tiles: &[TileQ4], groups: Range<usize>, acts: &QuantizedActivations, out: &Output) {
    over_tokens!(q4_tokens, tiles, groups, acts, out, max TOKENS, rest [1])
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q4_tokens<const N: usize>(tiles: &[TileQ4], acts: &QuantizedActivations, t0: usize, g: usize, out: &Output) {
    let blocks = tiles.len();
    let low = _mm256_set1_epi8(0x0F);
    let ones = _mm256_set1_epi16(1);
    let mut acc = [[_mm256_setzero_ps(); 2]; N];
    for (b, tile) in tiles.iter().enumerate() {
        for h in 0..2 {
            let mut w = [_mm256_setzero_si256(); 8];
            for p in 0..4 {
                let packed = _mm256_loadu_si256(tile.qs[p].as_ptr().add(32 * h) as *const __m256i);
                w[2 * p] = _mm256_and_si256(packed, low);
                w[2 * p + 1] = _mm256_and_si256(_mm256_srli_epi16(packed, 4), low);
            }
            let d = _mm256_cvtph_ps(_mm_loadu_si128(tile.d.as_ptr().add(HALF * h) as *const __m128i));
            let m = _mm256_cvtph_ps(_mm_loadu_si128(tile.m.as_ptr().add(HALF * h) as *const __m128i));
            for (n, acc) in acc.iter_mut().enumerate() {
                let block = (t0 + n) * blocks + b;
                // 16 products of at most 15 · 127 per i16 lane: no overflow.
                let mut pairs = _mm256_setzero_si256();
                for (j, w) in w.iter().enumerate() {
                    pairs = _mm256_add_epi16(pairs, _mm256_maddubs_epi16(*w, broadcast_four(acts, block, j)));
                }
                let isum = _mm256_madd_epi16(pairs, ones);
                let scale = _mm256_mul_ps(d, _mm256_set1_ps(acts.scales[block]));
                acc[h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), scale, acc[h]);
                acc[h] = _mm256_fmadd_ps(m, _mm256_set1_ps(acts.scaled_sums[block]), acc[h]);
            }
        }
    }
    for (n, acc) in acc.iter().enumerate() {
        store(acc, out, t0 + n, g);
    }
}

/// See [`super::plain::q8`]. `vpmaddubsw` wants one unsigned operand: the
/// weights' magnitudes, with their signs moved onto the activations.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn q8(tiles: &[TileQ8], groups: Range<usize>, acts: &QuantizedActivations, out: &Output) {
    over_tokens!(q8_tokens, tiles, groups, acts, out, max TOKENS, rest [1])
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q8_tokens<const N: usize>(tiles: &[TileQ8], acts: &QuantizedActivations, t0: usize, g: usize, out: &Output) {
    let blocks = tiles.len();
    let ones = _mm256_set1_epi16(1);
    let mut acc = [[_mm256_setzero_ps(); 2]; N];
    for (b, tile) in tiles.iter().enumerate() {
        for h in 0..2 {
            let d = _mm256_cvtph_ps(_mm_loadu_si128(tile.d.as_ptr().add(HALF * h) as *const __m128i));
            for (n, acc) in acc.iter_mut().enumerate() {
                let block = (t0 + n) * blocks + b;
                let mut isum = _mm256_setzero_si256();
                for j in 0..8 {
                    let w = _mm256_loadu_si256(tile.qs[j].as_ptr().add(32 * h) as *const __m256i);
                    let a = _mm256_sign_epi8(broadcast_four(acts, block, j), w);
                    // Two products of at most 128 · 127 per i16 lane: no overflow.
                    isum = _mm256_add_epi32(isum, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(w), a), ones));
                }
                let scale = _mm256_mul_ps(d, _mm256_set1_ps(acts.scales[block]));
                acc[h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), scale, acc[h]);
            }
        }
    }
    for (n, acc) in acc.iter().enumerate() {
        store(acc, out, t0 + n, g);
    }
}
