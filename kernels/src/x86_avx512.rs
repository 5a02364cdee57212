//! The kernels with AVX-512 VNNI: `vpdpbusd` multiplies 64 unsigned by 64
//! signed bytes and adds each group of 4 into one of 16 `i32` lanes, one
//! lane per tile row. Up to 4 activation rows share each unpacked tile.
//! Same arithmetic, in the same order, as [`super::plain`].

use super::activations::{QuantizedActivations, BLOCK};
use super::matmul::Output;
use super::packed::{TileQ4, TileQ8, TILE_ROWS};
use std::arch::x86_64::*;
use std::ops::Range;

/// Activation rows sharing one pass over a row group's tiles.
const TOKENS: usize = 4;

/// The 4 activation values `4j..4j + 4` of block `block`, in every lane.
#[inline(always)]
unsafe fn broadcast_four(acts: &QuantizedActivations, block: usize, j: usize) -> __m512i {
    let at = acts.qs.as_ptr().add(block * BLOCK + 4 * j) as *const i32;
    _mm512_set1_epi32(at.read_unaligned())
}

#[inline(always)]
unsafe fn store(acc: __m512, out: &Output, t: usize, g: usize) {
    let mut values = [0f32; TILE_ROWS];
    _mm512_storeu_ps(values.as_mut_ptr(), acc);
    out.store(t, g, &values);
}

/// See [`super::plain::q4`].
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,fma,f16c")]
pub(super) unsafe fn q4(tiles: &[TileQ4], groups: Range<usize>, acts: &QuantizedActivations, out: &Output) {
    over_tokens!(q4_tokens, tiles, groups, acts, out, max TOKENS, rest [1, 2, 3])
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,fma,f16c")]
unsafe fn q4_tokens<const N: usize>(tiles: &[TileQ4], acts: &QuantizedActivations, t0: usize, g: usize, out: &Output) {
    let blocks = tiles.len();
    let low = _mm512_set1_epi8(0x0F);
    let mut acc = [_mm512_setzero_ps(); N];
    for (b, tile) in tiles.iter().enumerate() {
        // w[j]: values 4j..4j + 4 of each row, as unsigned bytes.
        let mut w = [_mm512_setzero_si512(); 8];
        for p in 0..4 {
            let packed = _mm512_loadu_si512(tile.qs[p].as_ptr() as *const _);
            w[2 * p] = _mm512_and_si512(packed, low);
            w[2 * p + 1] = _mm512_and_si512(_mm512_srli_epi16(packed, 4), low);
        }
        let d = _mm512_cvtph_ps(_mm256_loadu_si256(tile.d.as_ptr() as *const __m256i));
        let m = _mm512_cvtph_ps(_mm256_loadu_si256(tile.m.as_ptr() as *const __m256i));
        for (n, acc) in acc.iter_mut().enumerate() {
            let block = (t0 + n) * blocks + b;
            let mut isum = _mm512_setzero_si512();
            for (j, w) in w.iter().enumerate() {
                isum = _mm512_dpbusd_epi32(isum, *w, broadcast_four(acts, block, j));
            }
            let scale = _mm512_mul_ps(d, _mm512_set1_ps(acts.scales[block]));
            *acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), scale, *acc);
            *acc = _mm512_fmadd_ps(m, _mm512_set1_ps(acts.scaled_sums[block]), *acc);
        }
    }
    for (n, acc) in acc.iter().enumerate() {
        store(*acc, out, t0 + n, g);
    }
}

/// See [`super::plain::q8`]. `vpdpbusd` wants unsigned weights: they are
/// offset by 128 (a sign-bit flip) and `128 · Σq_a` is taken back off.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,fma,f16c")]
pub(super) unsafe fn q8(tiles: &[TileQ8], groups: Range<usize>, acts: &QuantizedActivations, out: &Output) {
    over_tokens!(q8_tokens, tiles, groups, acts, out, max TOKENS, rest [1, 2, 3])
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,fma,f16c")]
unsafe fn q8_tokens<const N: usize>(tiles: &[TileQ8], acts: &QuantizedActivations, t0: usize, g: usize, out: &Output) {
    let blocks = tiles.len();
    let sign = _mm512_set1_epi8(-128);
    let mut acc = [_mm512_setzero_ps(); N];
    for (b, tile) in tiles.iter().enumerate() {
        let mut w = [_mm512_setzero_si512(); 8];
        for (j, w) in w.iter_mut().enumerate() {
            *w = _mm512_xor_si512(_mm512_loadu_si512(tile.qs[j].as_ptr() as *const _), sign);
        }
        let d = _mm512_cvtph_ps(_mm256_loadu_si256(tile.d.as_ptr() as *const __m256i));
        for (n, acc) in acc.iter_mut().enumerate() {
            let block = (t0 + n) * blocks + b;
            let mut isum = _mm512_set1_epi32(-128 * acts.sums[block]);
            for (j, w) in w.iter().enumerate() {
                isum = _mm512_dpbusd_epi32(isum, *w, broadcast_four(acts, block, j));
            }
            let scale = _mm512_mul_ps(d, _mm512_set1_ps(acts.scales[block]));
            *acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), scale, *acc);
        }
    }
    for (n, acc) in acc.iter().enumerate() {
        store(*acc, out, t0 + n, g);
    }
}
