//! The kernels with AVX2: each tile is taken as two halves of 8 rows;
//! `vpmaddubsw` multiplies unsigned by signed bytes into `i16` pairs and
//! `vpmaddwd` sums those into one `i32` per row. Up to 4 activation rows
//! share each unpacked half tile (Q4_0 and Q4_1: each unpacked vector of
//! it). Same arithmetic, in the same order, as [`super::plain`].

use super::activations::{QuantizedActivations, BLOCK};
use super::ggml_blocks::IQ4_VALUES;
use super::matmul::Output;
use super::packed::{
    KGroup, Q8Group, TileIq4Nl, TileIq4Xs, TileQ2K, TileQ3K, TileQ4, TileQ40, TileQ4K, TileQ5, TileQ5K, TileQ6K,
    TileQ8, TileRow, TILES_PER_SUPER, TILE_ROWS,
};
use std::arch::x86_64::*;
use std::ops::Range;

/// Activation rows sharing one pass over a row group's tiles. Q4_0 and Q4_1
/// unpack one value vector at a time and multiply it by every row before the
/// next ([`nibble_tokens`]); the other types, whose weights take more
/// unpacking (bit planes, scales, look-ups), unpack a half tile at once, which
/// the compiler keeps on the stack (a 64-row product 5–14 % faster than with
/// 2 rows on Zen 2).
const MORE_TOKENS: usize = 4;
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

/// Values `4j..4j + 4` of each row of a half tile in `w[j]`, unsigned bytes.
type Weights = [__m256i; 8];

/// The low 4 bits of half `h` of a tile's values (layout of [`TileQ4`]).
#[inline(always)]
unsafe fn nibbles(qs: &[[u8; 64]; 4], h: usize) -> Weights {
    let mut w = [_mm256_setzero_si256(); 8];
    for (p, plane) in qs.iter().enumerate() {
        [w[2 * p], w[2 * p + 1]] = plane_nibbles(plane, h);
    }
    w
}

/// `w[2p]` and `w[2p + 1]` of [`nibbles`] from plane `p`: its bytes' low
/// and high 4 bits.
#[inline(always)]
unsafe fn plane_nibbles(plane: &[u8; 64], h: usize) -> [__m256i; 2] {
    let low = _mm256_set1_epi8(0x0F);
    let packed = _mm256_loadu_si256(plane.as_ptr().add(32 * h) as *const __m256i);
    [_mm256_and_si256(packed, low), _mm256_and_si256(_mm256_srli_epi16(packed, 4), low)]
}

/// Bits `shift..` of each byte of `plane`, masked by `mask`.
#[inline(always)]
unsafe fn plane_bits(plane: __m256i, shift: i32, mask: i8) -> __m256i {
    _mm256_and_si256(_mm256_srl_epi16(plane, _mm_cvtsi32_si128(shift)), _mm256_set1_epi8(mask))
}

/// Adds bit `j` of a bit plane as bit `to` of `w[j]` (Q5's bit 4, Q3_K's 2).
#[inline(always)]
unsafe fn with_plane_bit(mut w: Weights, qh: &[u8; 64], h: usize, to: i32) -> Weights {
    let plane = _mm256_loadu_si256(qh.as_ptr().add(32 * h) as *const __m256i);
    for (j, w) in w.iter_mut().enumerate() {
        *w = _mm256_or_si256(*w, _mm256_sll_epi16(plane_bits(plane, j as i32, 1), _mm_cvtsi32_si128(to)));
    }
    w
}

/// The 2-bit fields of two planes: bits `2j, 2j + 1` of plane `p` in
/// `w[4p + j]`.
#[inline(always)]
unsafe fn two_bit_fields(planes: &[[u8; 64]; 2], h: usize) -> Weights {
    let mut w = [_mm256_setzero_si256(); 8];
    for (p, plane) in planes.iter().enumerate() {
        let plane = _mm256_loadu_si256(plane.as_ptr().add(32 * h) as *const __m256i);
        for j in 0..4 {
            w[4 * p + j] = plane_bits(plane, 2 * j as i32, 3);
        }
    }
    w
}

/// Adds bits 4–5 from two planes of 2-bit fields (Q6_K).
#[inline(always)]
unsafe fn with_two_high_bits(mut w: Weights, qh: &[[u8; 64]; 2], h: usize) -> Weights {
    for (w, high) in w.iter_mut().zip(two_bit_fields(qh, h)) {
        *w = _mm256_or_si256(*w, _mm256_slli_epi16(high, 4));
    }
    w
}

/// `Σ_j w[j] · a[4j..4j + 4]` for `j` in `range`, per row, with `i16`
/// sums of `chunk` products' pairs before widening (`chunk` small enough
/// that they cannot overflow: 8 for 4-bit, 4 for 5-bit, 2 for 6-bit values).
#[inline(always)]
unsafe fn dot(w: &Weights, acts: &QuantizedActivations, block: usize, range: Range<usize>, chunk: usize) -> __m256i {
    assert!(range.end <= w.len());
    let ones = _mm256_set1_epi16(1);
    let mut isum = _mm256_setzero_si256();
    let mut start = range.start;
    while start < range.end {
        let stop = (start + chunk).min(range.end);
        let mut pairs = _mm256_setzero_si256();
        // A range zipped with a slice: `enumerate().take().skip()` here was
        // left as a call per value vector (a tenth of a decode step's samples).
        for (j, w) in (start..stop).zip(&w[start..stop]) {
            pairs = _mm256_add_epi16(pairs, _mm256_maddubs_epi16(*w, broadcast_four(acts, block, j)));
        }
        isum = _mm256_add_epi32(isum, _mm256_madd_epi16(pairs, ones));
        start = stop;
    }
    isum
}

/// 8 signed bytes as `i32` lanes.
#[inline(always)]
unsafe fn i8_lanes(bytes: &[i8]) -> __m256i {
    _mm256_cvtepi8_epi32(_mm_loadl_epi64(bytes[..HALF].as_ptr() as *const __m128i))
}

/// 8 unsigned bytes as floats.
#[inline(always)]
unsafe fn u8_floats(bytes: &[u8]) -> __m256 {
    _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(bytes.as_ptr() as *const __m128i)))
}

#[inline(always)]
unsafe fn f16_floats(values: &[half::f16]) -> __m256 {
    _mm256_cvtph_ps(_mm_loadu_si128(values.as_ptr() as *const __m128i))
}

/// The scales and offsets of a tile of `d · q + m` weights (Q4_0, Q4_1, Q5_0, Q5_1).
trait LinearTile {
    fn d(&self) -> &[half::f16; TILE_ROWS];
    /// Half `h` of the rows' offsets `m`, given their scales `d` as floats.
    unsafe fn offsets(&self, h: usize, d: __m256) -> __m256;
}

impl LinearTile for TileQ40 {
    fn d(&self) -> &[half::f16; TILE_ROWS] {
        &self.d
    }
    #[inline(always)]
    unsafe fn offsets(&self, _: usize, d: __m256) -> __m256 {
        _mm256_mul_ps(d, _mm256_set1_ps(-8.0))
    }
}

impl LinearTile for TileQ4 {
    fn d(&self) -> &[half::f16; TILE_ROWS] {
        &self.d
    }
    #[inline(always)]
    unsafe fn offsets(&self, h: usize, _: __m256) -> __m256 {
        f16_floats(&self.m[HALF * h..])
    }
}

impl LinearTile for TileQ5 {
    fn d(&self) -> &[half::f16; TILE_ROWS] {
        &self.d
    }
    #[inline(always)]
    unsafe fn offsets(&self, h: usize, _: __m256) -> __m256 {
        f16_floats(&self.m[HALF * h..])
    }
}

/// A [`LinearTile`] of 4-bit values, their nibbles laid out as [`nibbles`] reads them.
trait NibbleTile: LinearTile {
    fn qs(&self) -> &[[u8; 64]; 4];
}

impl NibbleTile for TileQ40 {
    fn qs(&self) -> &[[u8; 64]; 4] {
        &self.qs
    }
}

impl NibbleTile for TileQ4 {
    fn qs(&self) -> &[[u8; 64]; 4] {
        &self.qs
    }
}

fn k_chunk<T: KTile>(_: &[T]) -> usize {
    T::CHUNK
}

/// See [`super::plain::q4`].
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn q4_0(tiles: &[TileQ40], groups: Range<usize>, acts: &QuantizedActivations, out: &Output) {
    over_tokens!(nibble_tokens, tiles, groups, acts, out, max MORE_TOKENS, rest [1, 2, 3])
}

/// See [`super::plain::q4`].
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn q4(tiles: &[TileQ4], groups: Range<usize>, acts: &QuantizedActivations, out: &Output) {
    over_tokens!(nibble_tokens, tiles, groups, acts, out, max MORE_TOKENS, rest [1, 2, 3])
}

/// Q4_0 and Q4_1 (see [`super::plain::q4`]): each of a half tile's value vectors is
/// unpacked and multiplied by every row's activations before the next is
/// unpacked, so up to 4 rows' sums stay in registers (4 rows 5 % faster than
/// two passes of 2 on Zen 2). A block's 8 products of pairs, each at most
/// 2 · 15 · 127, sum in `i16` without overflow. The same sums in the same order.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn nibble_tokens<const N: usize>(
    tiles: &[impl NibbleTile],
    acts: &QuantizedActivations,
    t0: usize,
    g: usize,
    out: &Output,
) {
    let blocks = tiles.len();
    let ones = _mm256_set1_epi16(1);
    let mut acc = [[_mm256_setzero_ps(); 2]; N];
    for (b, tile) in tiles.iter().enumerate() {
        for h in 0..2 {
            let mut pairs = [_mm256_setzero_si256(); N];
            for (p, plane) in tile.qs().iter().enumerate() {
                for (k, w) in plane_nibbles(plane, h).into_iter().enumerate() {
                    for (n, pairs) in pairs.iter_mut().enumerate() {
                        let a = broadcast_four(acts, (t0 + n) * blocks + b, 2 * p + k);
                        *pairs = _mm256_add_epi16(*pairs, _mm256_maddubs_epi16(w, a));
                    }
                }
            }
            let d = f16_floats(&tile.d()[HALF * h..]);
            let m = tile.offsets(h, d);
            for (n, (acc, pairs)) in acc.iter_mut().zip(pairs).enumerate() {
                let block = (t0 + n) * blocks + b;
                let scale = _mm256_mul_ps(d, _mm256_set1_ps(acts.scales[block]));
                acc[h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(pairs, ones)), scale, acc[h]);
                acc[h] = _mm256_fmadd_ps(m, _mm256_set1_ps(acts.scaled_sums[block]), acc[h]);
            }
        }
    }
    for (n, acc) in acc.iter().enumerate() {
        store(acc, out, t0 + n, g);
    }
}

/// Products of pairs of 5-bit values summed in `i16` before widening (see [`dot`]).
const Q5_CHUNK: usize = 4;

/// See [`super::plain::q5`].
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn q5(tiles: &[TileQ5], groups: Range<usize>, acts: &QuantizedActivations, out: &Output) {
    over_tokens!(q5_tokens, tiles, groups, acts, out, max MORE_TOKENS, rest [1, 2, 3])
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q5_tokens<const N: usize>(tiles: &[TileQ5], acts: &QuantizedActivations, t0: usize, g: usize, out: &Output) {
    let blocks = tiles.len();
    let mut acc = [[_mm256_setzero_ps(); 2]; N];
    for (b, tile) in tiles.iter().enumerate() {
        for h in 0..2 {
            let w = with_plane_bit(nibbles(&tile.qs, h), &tile.qh, h, 4);
            let d = f16_floats(&tile.d()[HALF * h..]);
            let m = tile.offsets(h, d);
            for (n, acc) in acc.iter_mut().enumerate() {
                let block = (t0 + n) * blocks + b;
                let isum = dot(&w, acts, block, 0..8, Q5_CHUNK);
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

/// A Q4_K or Q5_K tile: `d · scale · q − dmin · min`.
trait KTile {
    const CHUNK: usize;
    unsafe fn weights(&self, h: usize) -> Weights;
    fn scale(&self) -> &[u8; TILE_ROWS];
    fn min(&self) -> &[u8; TILE_ROWS];
}

impl KTile for TileQ4K {
    const CHUNK: usize = 8;
    #[inline(always)]
    unsafe fn weights(&self, h: usize) -> Weights {
        nibbles(&self.qs, h)
    }
    fn scale(&self) -> &[u8; TILE_ROWS] {
        &self.scale
    }
    fn min(&self) -> &[u8; TILE_ROWS] {
        &self.min
    }
}

impl KTile for TileQ5K {
    const CHUNK: usize = 4;
    #[inline(always)]
    unsafe fn weights(&self, h: usize) -> Weights {
        with_plane_bit(nibbles(&self.qs, h), &self.qh, h, 4)
    }
    fn scale(&self) -> &[u8; TILE_ROWS] {
        &self.scale
    }
    fn min(&self) -> &[u8; TILE_ROWS] {
        &self.min
    }
}

/// See [`super::plain::q4k`].
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn q4k(group: KGroup<TileQ4K>, groups: Range<usize>, acts: &QuantizedActivations, out: &Output) {
    let blocks = acts.blocks_per_row();
    over_tokens!(groups |g| group.row_group(blocks, g), k_tokens, groups, acts, out, max MORE_TOKENS, rest [1, 2, 3])
}

/// See [`super::plain::q5k`].
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn q5k(group: KGroup<TileQ5K>, groups: Range<usize>, acts: &QuantizedActivations, out: &Output) {
    let blocks = acts.blocks_per_row();
    over_tokens!(groups |g| group.row_group(blocks, g), k_tokens, groups, acts, out, max MORE_TOKENS, rest [1, 2, 3])
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn k_tokens<const N: usize>(
    group: KGroup<impl KTile>,
    acts: &QuantizedActivations,
    t0: usize,
    g: usize,
    out: &Output,
) {
    let blocks = group.tiles.len();
    let chunk = k_chunk(group.tiles);
    let mut acc = [[_mm256_setzero_ps(); 2]; N];
    for (s, (tiles, supers)) in group.tiles.chunks_exact(TILES_PER_SUPER).zip(group.supers).enumerate() {
        for h in 0..2 {
            let d = f16_floats(&supers.d[HALF * h..]);
            let dmin = f16_floats(&supers.dmin[HALF * h..]);
            for (j, tile) in tiles.iter().enumerate() {
                let b = s * TILES_PER_SUPER + j;
                let w = tile.weights(h);
                let scale = _mm256_mul_ps(d, u8_floats(&tile.scale()[HALF * h..]));
                let min = _mm256_mul_ps(dmin, u8_floats(&tile.min()[HALF * h..]));
                for (n, acc) in acc.iter_mut().enumerate() {
                    let block = (t0 + n) * blocks + b;
                    let isum = dot(&w, acts, block, 0..8, chunk);
                    let scale = _mm256_mul_ps(scale, _mm256_set1_ps(acts.scales[block]));
                    acc[h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), scale, acc[h]);
                    acc[h] = _mm256_fnmadd_ps(min, _mm256_set1_ps(acts.scaled_sums[block]), acc[h]);
                }
            }
        }
    }
    for (n, acc) in acc.iter().enumerate() {
        store(acc, out, t0 + n, g);
    }
}

/// A tile with a scale per 16 values (Q6_K, Q3_K, Q2_K):
/// `weight = d · scale_h · (q − OFFSET) − dmin · min_h`.
trait HalvesTile {
    const OFFSET: i32;
    /// Products of pairs summed in `i16` before widening (see [`dot`]).
    const CHUNK: usize;
    unsafe fn weights(&self, h: usize) -> Weights;
    /// Each half's scale, one `i32` lane per row of half tile `h`.
    unsafe fn scales(&self, h: usize) -> [__m256i; 2];
    /// Each half's min, for the formats that have them.
    unsafe fn mins(&self, h: usize) -> Option<[__m256i; 2]>;
}

impl HalvesTile for TileQ6K {
    const OFFSET: i32 = 32;
    const CHUNK: usize = 2;
    #[inline(always)]
    unsafe fn weights(&self, h: usize) -> Weights {
        with_two_high_bits(nibbles(&self.qs, h), &self.qh, h)
    }
    #[inline(always)]
    unsafe fn scales(&self, h: usize) -> [__m256i; 2] {
        [i8_lanes(&self.scale[0][HALF * h..]), i8_lanes(&self.scale[1][HALF * h..])]
    }
    unsafe fn mins(&self, _: usize) -> Option<[__m256i; 2]> {
        None
    }
}

impl HalvesTile for TileQ3K {
    const OFFSET: i32 = 4;
    const CHUNK: usize = 4;
    #[inline(always)]
    unsafe fn weights(&self, h: usize) -> Weights {
        with_plane_bit(two_bit_fields(&self.ql, h), &self.qh, h, 2)
    }
    #[inline(always)]
    unsafe fn scales(&self, h: usize) -> [__m256i; 2] {
        [i8_lanes(&self.scale[0][HALF * h..]), i8_lanes(&self.scale[1][HALF * h..])]
    }
    unsafe fn mins(&self, _: usize) -> Option<[__m256i; 2]> {
        None
    }
}

impl HalvesTile for TileQ2K {
    const OFFSET: i32 = 0;
    const CHUNK: usize = 4;
    #[inline(always)]
    unsafe fn weights(&self, h: usize) -> Weights {
        two_bit_fields(&self.qs, h)
    }
    #[inline(always)]
    unsafe fn scales(&self, h: usize) -> [__m256i; 2] {
        [nibble_lanes(&self.scale_min[0][HALF * h..])[0], nibble_lanes(&self.scale_min[1][HALF * h..])[0]]
    }
    #[inline(always)]
    unsafe fn mins(&self, h: usize) -> Option<[__m256i; 2]> {
        Some([nibble_lanes(&self.scale_min[0][HALF * h..])[1], nibble_lanes(&self.scale_min[1][HALF * h..])[1]])
    }
}

/// The low and the high nibbles of 8 bytes, one `i32` lane each.
#[inline(always)]
unsafe fn nibble_lanes(bytes: &[u8]) -> [__m256i; 2] {
    let lanes = _mm256_cvtepu8_epi32(_mm_loadl_epi64(bytes[..HALF].as_ptr() as *const __m128i));
    [_mm256_and_si256(lanes, _mm256_set1_epi32(0x0F)), _mm256_srli_epi32(lanes, 4)]
}

fn halves_consts<T: HalvesTile>(_: &[T]) -> (i32, usize) {
    (T::OFFSET, T::CHUNK)
}

/// See [`super::plain::q6k`].
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn q6k(group: KGroup<TileQ6K>, groups: Range<usize>, acts: &QuantizedActivations, out: &Output) {
    let blocks = acts.blocks_per_row();
    over_tokens!(groups |g| group.row_group(blocks, g), halves_tokens, groups, acts, out, max MORE_TOKENS, rest [1, 2, 3])
}

/// See [`super::plain::q3k`].
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn q3k(group: KGroup<TileQ3K>, groups: Range<usize>, acts: &QuantizedActivations, out: &Output) {
    let blocks = acts.blocks_per_row();
    over_tokens!(groups |g| group.row_group(blocks, g), halves_tokens, groups, acts, out, max MORE_TOKENS, rest [1, 2, 3])
}

/// See [`super::plain::q2k`].
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn q2k(group: KGroup<TileQ2K>, groups: Range<usize>, acts: &QuantizedActivations, out: &Output) {
    let blocks = acts.blocks_per_row();
    over_tokens!(groups |g| group.row_group(blocks, g), halves_tokens, groups, acts, out, max MORE_TOKENS, rest [1, 2, 3])
}

/// See [`super::plain::halves`].
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn halves_tokens<const N: usize>(
    group: KGroup<impl HalvesTile>,
    acts: &QuantizedActivations,
    t0: usize,
    g: usize,
    out: &Output,
) {
    let blocks = group.tiles.len();
    let (offset, chunk) = halves_consts(group.tiles);
    let mut acc = [[_mm256_setzero_ps(); 2]; N];
    for (s, (tiles, supers)) in group.tiles.chunks_exact(TILES_PER_SUPER).zip(group.supers).enumerate() {
        for h in 0..2 {
            let d = f16_floats(&supers.d[HALF * h..]);
            let dmin = f16_floats(&supers.dmin[HALF * h..]);
            for (j, tile) in tiles.iter().enumerate() {
                let b = s * TILES_PER_SUPER + j;
                let w = tile.weights(h);
                let (scales, mins) = (tile.scales(h), tile.mins(h));
                for (n, acc) in acc.iter_mut().enumerate() {
                    let block = (t0 + n) * blocks + b;
                    let half_sums = [acts.half_sums[2 * block], acts.half_sums[2 * block + 1]];
                    let mut isum = _mm256_setzero_si256();
                    for half in 0..2 {
                        let sum = dot(&w, acts, block, 4 * half..4 * half + 4, chunk);
                        let sum = _mm256_add_epi32(sum, _mm256_set1_epi32(-offset * half_sums[half]));
                        isum = _mm256_add_epi32(isum, _mm256_mullo_epi32(scales[half], sum));
                    }
                    let da = _mm256_set1_ps(acts.scales[block]);
                    acc[h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(d, da), acc[h]);
                    if let Some(mins) = mins {
                        let low = _mm256_mullo_epi32(mins[0], _mm256_set1_epi32(half_sums[0]));
                        let msum = _mm256_add_epi32(low, _mm256_mullo_epi32(mins[1], _mm256_set1_epi32(half_sums[1])));
                        acc[h] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(msum), _mm256_mul_ps(dmin, da), acc[h]);
                    }
                }
            }
        }
    }
    for (n, acc) in acc.iter().enumerate() {
        store(acc, out, t0 + n, g);
    }
}

/// A tile of `d · w` with signed integer weights (Q8_0, IQ4_NL).
trait SignedTile {
    unsafe fn signed_weights(&self, h: usize) -> Weights;
    fn d(&self) -> &[half::f16; TILE_ROWS];
}

impl SignedTile for TileQ8 {
    #[inline(always)]
    unsafe fn signed_weights(&self, h: usize) -> Weights {
        let mut w = [_mm256_setzero_si256(); 8];
        for (j, w) in w.iter_mut().enumerate() {
            *w = _mm256_loadu_si256(self.qs[j].as_ptr().add(32 * h) as *const __m256i);
        }
        w
    }
    fn d(&self) -> &[half::f16; TILE_ROWS] {
        &self.d
    }
}

impl SignedTile for TileIq4Nl {
    #[inline(always)]
    unsafe fn signed_weights(&self, h: usize) -> Weights {
        look_up_iq4(nibbles(&self.qs, h))
    }
    fn d(&self) -> &[half::f16; TILE_ROWS] {
        &self.d
    }
}

/// A Q8_0 block of 16 rows where it lies, each half made into a tile's
/// as it is read.
struct Q8Block<'a> {
    group: Q8Group<'a>,
    b: usize,
    d: [half::f16; TILE_ROWS],
}

impl SignedTile for Q8Block<'_> {
    #[inline(always)]
    unsafe fn signed_weights(&self, h: usize) -> Weights {
        self.group.half_words(self.b, h)
    }
    fn d(&self) -> &[half::f16; TILE_ROWS] {
        &self.d
    }
}

impl<T: SignedTile> SignedTile for &T {
    #[inline(always)]
    unsafe fn signed_weights(&self, h: usize) -> Weights {
        (**self).signed_weights(h)
    }
    fn d(&self) -> &[half::f16; TILE_ROWS] {
        (**self).d()
    }
}

/// A row group of Q8_0 blocks where they lie, each half of a block's tile
/// made in registers as it is read.
#[derive(Clone, Copy)]
struct InPlaceRow<'a>(Q8Group<'a>);

impl<'a> TileRow for InPlaceRow<'a> {
    type Tile = Q8Block<'a>;
    fn blocks(&self) -> usize {
        self.0.blocks()
    }
    #[inline(always)]
    unsafe fn tile(&self, b: usize) -> Q8Block<'a> {
        self.0.prefetch_next(b);
        Q8Block { group: self.0, b, d: self.0.scales(b) }
    }
}

/// [`q8`] for full row groups of a Q8_0 matrix read where it lies, each
/// block's tile made in registers as it is multiplied.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn q8_in_place<'a>(
    group: impl Fn(usize) -> Q8Group<'a>,
    groups: Range<usize>,
    acts: &QuantizedActivations,
    out: &Output,
) {
    over_tokens!(groups |g| InPlaceRow(group(g)), signed_tokens, groups, acts, out, max MORE_TOKENS, rest [1, 2, 3])
}

/// IQ4 codes (bytes < 16) replaced by their signed values: one `vpshufb`
/// per vector, the table repeated in both 128-bit lanes.
#[inline(always)]
unsafe fn look_up_iq4(mut codes: Weights) -> Weights {
    let table = _mm256_broadcastsi128_si256(_mm_loadu_si128(IQ4_VALUES.as_ptr() as *const __m128i));
    for w in codes.iter_mut() {
        *w = _mm256_shuffle_epi8(table, *w);
    }
    codes
}

/// `Σ_j w[j] · a[4j..4j + 4]` per row for signed weights. `vpmaddubsw`
/// wants one unsigned operand: the weights' magnitudes, with their signs
/// moved onto the activations. Its two products of at most 128 · 127 per
/// `i16` lane cannot overflow; each is widened at once.
#[inline(always)]
unsafe fn signed_dot(w: &Weights, acts: &QuantizedActivations, block: usize) -> __m256i {
    let ones = _mm256_set1_epi16(1);
    let mut isum = _mm256_setzero_si256();
    for (j, w) in w.iter().enumerate() {
        let a = _mm256_sign_epi8(broadcast_four(acts, block, j), *w);
        isum = _mm256_add_epi32(isum, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(*w), a), ones));
    }
    isum
}

/// See [`super::plain::q8`].
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn q8(tiles: &[TileQ8], groups: Range<usize>, acts: &QuantizedActivations, out: &Output) {
    over_tokens!(signed_tokens, tiles, groups, acts, out, max MORE_TOKENS, rest [1, 2, 3])
}

/// See [`super::plain::iq4_nl`].
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn iq4_nl(tiles: &[TileIq4Nl], groups: Range<usize>, acts: &QuantizedActivations, out: &Output) {
    over_tokens!(signed_tokens, tiles, groups, acts, out, max MORE_TOKENS, rest [1, 2, 3])
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn signed_tokens<const N: usize>(
    row: impl TileRow<Tile: SignedTile>,
    acts: &QuantizedActivations,
    t0: usize,
    g: usize,
    out: &Output,
) {
    let blocks = row.blocks();
    let mut acc = [[_mm256_setzero_ps(); 2]; N];
    for b in 0..blocks {
        let tile = row.tile(b);
        for h in 0..2 {
            let w = tile.signed_weights(h);
            let d = f16_floats(&tile.d()[HALF * h..]);
            for (n, acc) in acc.iter_mut().enumerate() {
                let block = (t0 + n) * blocks + b;
                let isum = signed_dot(&w, acts, block);
                let scale = _mm256_mul_ps(d, _mm256_set1_ps(acts.scales[block]));
                acc[h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), scale, acc[h]);
            }
        }
    }
    for (n, acc) in acc.iter().enumerate() {
        store(acc, out, t0 + n, g);
    }
}

/// See [`super::plain::iq4_xs`].
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn iq4_xs(group: KGroup<TileIq4Xs>, groups: Range<usize>, acts: &QuantizedActivations, out: &Output) {
    let blocks = acts.blocks_per_row();
    over_tokens!(groups |g| group.row_group(blocks, g), iq4_xs_tokens, groups, acts, out, max MORE_TOKENS, rest [1, 2, 3])
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn iq4_xs_tokens<const N: usize>(
    group: KGroup<TileIq4Xs>,
    acts: &QuantizedActivations,
    t0: usize,
    g: usize,
    out: &Output,
) {
    let blocks = group.tiles.len();
    let mut acc = [[_mm256_setzero_ps(); 2]; N];
    for (s, (tiles, supers)) in group.tiles.chunks_exact(TILES_PER_SUPER).zip(group.supers).enumerate() {
        for h in 0..2 {
            let d = f16_floats(&supers.d[HALF * h..]);
            for (j, tile) in tiles.iter().enumerate() {
                let b = s * TILES_PER_SUPER + j;
                let w = look_up_iq4(nibbles(&tile.qs, h));
                let scale = i8_lanes(&tile.scale[HALF * h..]);
                for (n, acc) in acc.iter_mut().enumerate() {
                    let block = (t0 + n) * blocks + b;
                    let isum = _mm256_mullo_epi32(scale, signed_dot(&w, acts, block));
                    let d_scale = _mm256_mul_ps(d, _mm256_set1_ps(acts.scales[block]));
                    acc[h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), d_scale, acc[h]);
                }
            }
        }
    }
    for (n, acc) in acc.iter().enumerate() {
        store(acc, out, t0 + n, g);
    }
}
