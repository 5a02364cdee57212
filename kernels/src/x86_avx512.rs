//! The kernels with AVX-512 VNNI: `vpdpbusd` multiplies 64 unsigned by 64
//! signed bytes and adds each group of 4 into one of 16 `i32` lanes, one
//! lane per tile row. Up to 4 activation rows share each unpacked tile.
//! Same arithmetic, in the same order, as [`super::plain`].

use super::activations::{QuantizedActivations, BLOCK};
use super::ggml_blocks::IQ4_VALUES;
use super::matmul::Output;
use super::packed::{
    KGroup, Q8Group, TileIq4Nl, TileIq4Xs, TileQ2K, TileQ3K, TileQ4, TileQ40, TileQ4K, TileQ5, TileQ5K, TileQ6K,
    TileQ8, TileRow, TILES_PER_SUPER, TILE_ROWS,
};
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

/// Values `4j..4j + 4` of each row of a tile in `w[j]`, unsigned bytes.
type Weights = [__m512i; 8];

/// The low 4 bits of a tile's values (layout of [`TileQ4`]).
#[inline(always)]
unsafe fn nibbles(qs: &[[u8; 64]; 4]) -> Weights {
    let low = _mm512_set1_epi8(0x0F);
    let mut w = [_mm512_setzero_si512(); 8];
    for p in 0..4 {
        let packed = _mm512_loadu_si512(qs[p].as_ptr() as *const _);
        w[2 * p] = _mm512_and_si512(packed, low);
        w[2 * p + 1] = _mm512_and_si512(_mm512_srli_epi16(packed, 4), low);
    }
    w
}

/// Adds `value` to `w[j]` where a bit plane has bit `j` set (Q5's bit 4:
/// 16, Q3_K's bit 2: 4).
#[inline(always)]
unsafe fn with_plane_bit(mut w: Weights, qh: &[u8; 64], value: i8) -> Weights {
    let plane = _mm512_loadu_si512(qh.as_ptr() as *const _);
    let value = _mm512_set1_epi8(value);
    for (j, w) in w.iter_mut().enumerate() {
        let set = _mm512_test_epi8_mask(plane, _mm512_set1_epi8(1 << j));
        *w = _mm512_mask_add_epi8(*w, set, *w, value);
    }
    w
}

/// The 2-bit fields of two planes: bits `2j, 2j + 1` of plane `p` in
/// `w[4p + j]`.
#[inline(always)]
unsafe fn two_bit_fields(planes: &[[u8; 64]; 2]) -> Weights {
    let three = _mm512_set1_epi8(3);
    let mut w = [_mm512_setzero_si512(); 8];
    for (p, plane) in planes.iter().enumerate() {
        let plane = _mm512_loadu_si512(plane.as_ptr() as *const _);
        w[4 * p] = _mm512_and_si512(plane, three);
        w[4 * p + 1] = _mm512_and_si512(_mm512_srli_epi16(plane, 2), three);
        w[4 * p + 2] = _mm512_and_si512(_mm512_srli_epi16(plane, 4), three);
        w[4 * p + 3] = _mm512_and_si512(_mm512_srli_epi16(plane, 6), three);
    }
    w
}

/// Adds bits 4–5 from two planes of 2-bit fields (Q6_K).
#[inline(always)]
unsafe fn with_two_high_bits(mut w: Weights, qh: &[[u8; 64]; 2]) -> Weights {
    for (w, high) in w.iter_mut().zip(two_bit_fields(qh)) {
        *w = _mm512_or_si512(*w, _mm512_slli_epi16(high, 4));
    }
    w
}

/// `Σ_j w[j] · a[4j..4j + 4]` for `j` in `range`, per row.
#[inline(always)]
unsafe fn dot(w: &Weights, acts: &QuantizedActivations, block: usize, range: Range<usize>) -> __m512i {
    let mut isum = _mm512_setzero_si512();
    for j in range {
        isum = _mm512_dpbusd_epi32(isum, w[j], broadcast_four(acts, block, j));
    }
    isum
}

/// 16 signed bytes as `i32` lanes.
#[inline(always)]
unsafe fn i8_lanes(bytes: &[i8; TILE_ROWS]) -> __m512i {
    _mm512_cvtepi8_epi32(_mm_loadu_si128(bytes.as_ptr() as *const __m128i))
}

/// 16 unsigned bytes as floats.
#[inline(always)]
unsafe fn u8_floats(bytes: &[u8; TILE_ROWS]) -> __m512 {
    _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(bytes.as_ptr() as *const __m128i)))
}

#[inline(always)]
unsafe fn f16_floats(values: &[half::f16; TILE_ROWS]) -> __m512 {
    _mm512_cvtph_ps(_mm256_loadu_si256(values.as_ptr() as *const __m256i))
}

/// A tile of `d · q + m` weights (Q4_0, Q4_1, Q5_0, Q5_1).
trait LinearTile {
    unsafe fn weights(&self) -> Weights;
    fn d(&self) -> &[half::f16; TILE_ROWS];
    /// The rows' offsets `m`, given their scales `d` as floats.
    unsafe fn offsets(&self, d: __m512) -> __m512;
}

impl LinearTile for TileQ40 {
    #[inline(always)]
    unsafe fn weights(&self) -> Weights {
        nibbles(&self.qs)
    }
    fn d(&self) -> &[half::f16; TILE_ROWS] {
        &self.d
    }
    #[inline(always)]
    unsafe fn offsets(&self, d: __m512) -> __m512 {
        _mm512_mul_ps(d, _mm512_set1_ps(-8.0))
    }
}

impl LinearTile for TileQ4 {
    #[inline(always)]
    unsafe fn weights(&self) -> Weights {
        nibbles(&self.qs)
    }
    fn d(&self) -> &[half::f16; TILE_ROWS] {
        &self.d
    }
    #[inline(always)]
    unsafe fn offsets(&self, _: __m512) -> __m512 {
        f16_floats(&self.m)
    }
}

impl LinearTile for TileQ5 {
    #[inline(always)]
    unsafe fn weights(&self) -> Weights {
        with_plane_bit(nibbles(&self.qs), &self.qh, 16)
    }
    fn d(&self) -> &[half::f16; TILE_ROWS] {
        &self.d
    }
    #[inline(always)]
    unsafe fn offsets(&self, _: __m512) -> __m512 {
        f16_floats(&self.m)
    }
}

/// See [`super::plain::q4`].
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,fma,f16c")]
pub(super) unsafe fn q4_0(tiles: &[TileQ40], groups: Range<usize>, acts: &QuantizedActivations, out: &Output) {
    over_tokens!(linear_tokens, tiles, groups, acts, out, max TOKENS, rest [1, 2, 3])
}

/// See [`super::plain::q4`].
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,fma,f16c")]
pub(super) unsafe fn q4(tiles: &[TileQ4], groups: Range<usize>, acts: &QuantizedActivations, out: &Output) {
    over_tokens!(linear_tokens, tiles, groups, acts, out, max TOKENS, rest [1, 2, 3])
}

/// See [`super::plain::q5`].
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,fma,f16c")]
pub(super) unsafe fn q5(tiles: &[TileQ5], groups: Range<usize>, acts: &QuantizedActivations, out: &Output) {
    over_tokens!(linear_tokens, tiles, groups, acts, out, max TOKENS, rest [1, 2, 3])
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,fma,f16c")]
unsafe fn linear_tokens<const N: usize>(
    tiles: &[impl LinearTile],
    acts: &QuantizedActivations,
    t0: usize,
    g: usize,
    out: &Output,
) {
    let blocks = tiles.len();
    let mut acc = [_mm512_setzero_ps(); N];
    for (b, tile) in tiles.iter().enumerate() {
        let w = tile.weights();
        let d = f16_floats(tile.d());
        let m = tile.offsets(d);
        for (n, acc) in acc.iter_mut().enumerate() {
            let block = (t0 + n) * blocks + b;
            let isum = dot(&w, acts, block, 0..8);
            let scale = _mm512_mul_ps(d, _mm512_set1_ps(acts.scales[block]));
            *acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), scale, *acc);
            *acc = _mm512_fmadd_ps(m, _mm512_set1_ps(acts.scaled_sums[block]), *acc);
        }
    }
    for (n, acc) in acc.iter().enumerate() {
        store(*acc, out, t0 + n, g);
    }
}

/// A Q4_K or Q5_K tile: `d · scale · q − dmin · min`.
trait KTile {
    unsafe fn weights(&self) -> Weights;
    fn scale(&self) -> &[u8; TILE_ROWS];
    fn min(&self) -> &[u8; TILE_ROWS];
}

impl KTile for TileQ4K {
    #[inline(always)]
    unsafe fn weights(&self) -> Weights {
        nibbles(&self.qs)
    }
    fn scale(&self) -> &[u8; TILE_ROWS] {
        &self.scale
    }
    fn min(&self) -> &[u8; TILE_ROWS] {
        &self.min
    }
}

impl KTile for TileQ5K {
    #[inline(always)]
    unsafe fn weights(&self) -> Weights {
        with_plane_bit(nibbles(&self.qs), &self.qh, 16)
    }
    fn scale(&self) -> &[u8; TILE_ROWS] {
        &self.scale
    }
    fn min(&self) -> &[u8; TILE_ROWS] {
        &self.min
    }
}

/// See [`super::plain::q4k`].
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,fma,f16c")]
pub(super) unsafe fn q4k(group: KGroup<TileQ4K>, groups: Range<usize>, acts: &QuantizedActivations, out: &Output) {
    let blocks = acts.blocks_per_row();
    over_tokens!(groups |g| group.row_group(blocks, g), k_tokens, groups, acts, out, max TOKENS, rest [1, 2, 3])
}

/// See [`super::plain::q5k`].
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,fma,f16c")]
pub(super) unsafe fn q5k(group: KGroup<TileQ5K>, groups: Range<usize>, acts: &QuantizedActivations, out: &Output) {
    let blocks = acts.blocks_per_row();
    over_tokens!(groups |g| group.row_group(blocks, g), k_tokens, groups, acts, out, max TOKENS, rest [1, 2, 3])
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,fma,f16c")]
unsafe fn k_tokens<const N: usize>(
    group: KGroup<impl KTile>,
    acts: &QuantizedActivations,
    t0: usize,
    g: usize,
    out: &Output,
) {
    let blocks = group.tiles.len();
    let mut acc = [_mm512_setzero_ps(); N];
    for (s, (tiles, supers)) in group.tiles.chunks_exact(TILES_PER_SUPER).zip(group.supers).enumerate() {
        let d = f16_floats(&supers.d);
        let dmin = f16_floats(&supers.dmin);
        for (j, tile) in tiles.iter().enumerate() {
            let b = s * TILES_PER_SUPER + j;
            let w = tile.weights();
            let scale = _mm512_mul_ps(d, u8_floats(tile.scale()));
            let min = _mm512_mul_ps(dmin, u8_floats(tile.min()));
            for (n, acc) in acc.iter_mut().enumerate() {
                let block = (t0 + n) * blocks + b;
                let isum = dot(&w, acts, block, 0..8);
                let scale = _mm512_mul_ps(scale, _mm512_set1_ps(acts.scales[block]));
                *acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), scale, *acc);
                *acc = _mm512_fnmadd_ps(min, _mm512_set1_ps(acts.scaled_sums[block]), *acc);
            }
        }
    }
    for (n, acc) in acc.iter().enumerate() {
        store(*acc, out, t0 + n, g);
    }
}

/// A tile with a scale per 16 values (Q6_K, Q3_K, Q2_K):
/// `weight = d · scale_h · (q − OFFSET) − dmin · min_h`.
trait HalvesTile {
    const OFFSET: i32;
    unsafe fn weights(&self) -> Weights;
    /// Each half's scale, one `i32` lane per row.
    unsafe fn scales(&self) -> [__m512i; 2];
    /// Each half's min, for the formats that have them.
    unsafe fn mins(&self) -> Option<[__m512i; 2]>;
}

impl HalvesTile for TileQ6K {
    const OFFSET: i32 = 32;
    #[inline(always)]
    unsafe fn weights(&self) -> Weights {
        with_two_high_bits(nibbles(&self.qs), &self.qh)
    }
    #[inline(always)]
    unsafe fn scales(&self) -> [__m512i; 2] {
        [i8_lanes(&self.scale[0]), i8_lanes(&self.scale[1])]
    }
    unsafe fn mins(&self) -> Option<[__m512i; 2]> {
        None
    }
}

impl HalvesTile for TileQ3K {
    const OFFSET: i32 = 4;
    #[inline(always)]
    unsafe fn weights(&self) -> Weights {
        with_plane_bit(two_bit_fields(&self.ql), &self.qh, 4)
    }
    #[inline(always)]
    unsafe fn scales(&self) -> [__m512i; 2] {
        [i8_lanes(&self.scale[0]), i8_lanes(&self.scale[1])]
    }
    unsafe fn mins(&self) -> Option<[__m512i; 2]> {
        None
    }
}

impl HalvesTile for TileQ2K {
    const OFFSET: i32 = 0;
    #[inline(always)]
    unsafe fn weights(&self) -> Weights {
        two_bit_fields(&self.qs)
    }
    #[inline(always)]
    unsafe fn scales(&self) -> [__m512i; 2] {
        [nibble_lanes(&self.scale_min[0])[0], nibble_lanes(&self.scale_min[1])[0]]
    }
    #[inline(always)]
    unsafe fn mins(&self) -> Option<[__m512i; 2]> {
        Some([nibble_lanes(&self.scale_min[0])[1], nibble_lanes(&self.scale_min[1])[1]])
    }
}

/// The low and the high nibbles of 16 bytes, one `i32` lane each.
#[inline(always)]
unsafe fn nibble_lanes(bytes: &[u8; TILE_ROWS]) -> [__m512i; 2] {
    let lanes = _mm512_cvtepu8_epi32(_mm_loadu_si128(bytes.as_ptr() as *const __m128i));
    [_mm512_and_si512(lanes, _mm512_set1_epi32(0x0F)), _mm512_srli_epi32(lanes, 4)]
}

fn offset<T: HalvesTile>(_: &[T]) -> i32 {
    T::OFFSET
}

/// See [`super::plain::q6k`].
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,fma,f16c")]
pub(super) unsafe fn q6k(group: KGroup<TileQ6K>, groups: Range<usize>, acts: &QuantizedActivations, out: &Output) {
    let blocks = acts.blocks_per_row();
    over_tokens!(groups |g| group.row_group(blocks, g), halves_tokens, groups, acts, out, max TOKENS, rest [1, 2, 3])
}

/// See [`super::plain::q3k`].
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,fma,f16c")]
pub(super) unsafe fn q3k(group: KGroup<TileQ3K>, groups: Range<usize>, acts: &QuantizedActivations, out: &Output) {
    let blocks = acts.blocks_per_row();
    over_tokens!(groups |g| group.row_group(blocks, g), halves_tokens, groups, acts, out, max TOKENS, rest [1, 2, 3])
}

/// See [`super::plain::q2k`].
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,fma,f16c")]
pub(super) unsafe fn q2k(group: KGroup<TileQ2K>, groups: Range<usize>, acts: &QuantizedActivations, out: &Output) {
    let blocks = acts.blocks_per_row();
    over_tokens!(groups |g| group.row_group(blocks, g), halves_tokens, groups, acts, out, max TOKENS, rest [1, 2, 3])
}

/// See [`super::plain::halves`].
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,fma,f16c")]
unsafe fn halves_tokens<const N: usize>(
    group: KGroup<impl HalvesTile>,
    acts: &QuantizedActivations,
    t0: usize,
    g: usize,
    out: &Output,
) {
    let blocks = group.tiles.len();
    let offset = offset(group.tiles);
    let mut acc = [_mm512_setzero_ps(); N];
    for (s, (tiles, supers)) in group.tiles.chunks_exact(TILES_PER_SUPER).zip(group.supers).enumerate() {
        let d = f16_floats(&supers.d);
        let dmin = f16_floats(&supers.dmin);
        for (j, tile) in tiles.iter().enumerate() {
            let b = s * TILES_PER_SUPER + j;
            let w = tile.weights();
            let (scales, mins) = (tile.scales(), tile.mins());
            for (n, acc) in acc.iter_mut().enumerate() {
                let block = (t0 + n) * blocks + b;
                let half_sums = [acts.half_sums[2 * block], acts.half_sums[2 * block + 1]];
                let mut isum = _mm512_setzero_si512();
                for h in 0..2 {
                    let half = _mm512_add_epi32(
                        dot(&w, acts, block, 4 * h..4 * h + 4),
                        _mm512_set1_epi32(-offset * half_sums[h]),
                    );
                    isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(scales[h], half));
                }
                let da = _mm512_set1_ps(acts.scales[block]);
                *acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(d, da), *acc);
                if let Some(mins) = mins {
                    let low = _mm512_mullo_epi32(mins[0], _mm512_set1_epi32(half_sums[0]));
                    let msum = _mm512_add_epi32(low, _mm512_mullo_epi32(mins[1], _mm512_set1_epi32(half_sums[1])));
                    *acc = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(msum), _mm512_mul_ps(dmin, da), *acc);
                }
            }
        }
    }
    for (n, acc) in acc.iter().enumerate() {
        store(*acc, out, t0 + n, g);
    }
}

/// A tile of `d · w` with signed integer weights (Q8_0, IQ4_NL). `vpdpbusd`
/// wants unsigned weights: they are given as `w + 128` and [`offset_dot`]
/// takes `128 · Σq_a` back off.
trait SignedTile {
    unsafe fn weights_plus_128(&self) -> Weights;
    fn d(&self) -> &[half::f16; TILE_ROWS];
}

impl SignedTile for TileQ8 {
    /// `w + 128` is `w` with its sign bit flipped.
    #[inline(always)]
    unsafe fn weights_plus_128(&self) -> Weights {
        let sign = _mm512_set1_epi8(-128);
        let mut w = [_mm512_setzero_si512(); 8];
        for (j, w) in w.iter_mut().enumerate() {
            *w = _mm512_xor_si512(_mm512_loadu_si512(self.qs[j].as_ptr() as *const _), sign);
        }
        w
    }
    fn d(&self) -> &[half::f16; TILE_ROWS] {
        &self.d
    }
}

impl SignedTile for TileIq4Nl {
    #[inline(always)]
    unsafe fn weights_plus_128(&self) -> Weights {
        look_up_iq4_plus_128(nibbles(&self.qs))
    }
    fn d(&self) -> &[half::f16; TILE_ROWS] {
        &self.d
    }
}

/// A Q8_0 block of 16 rows made into a tile as it is read where it lies.
struct Q8Block {
    weights_plus_128: Weights,
    d: [half::f16; TILE_ROWS],
}

impl SignedTile for Q8Block {
    #[inline(always)]
    unsafe fn weights_plus_128(&self) -> Weights {
        self.weights_plus_128
    }
    fn d(&self) -> &[half::f16; TILE_ROWS] {
        &self.d
    }
}

impl<T: SignedTile> SignedTile for &T {
    #[inline(always)]
    unsafe fn weights_plus_128(&self) -> Weights {
        (**self).weights_plus_128()
    }
    fn d(&self) -> &[half::f16; TILE_ROWS] {
        (**self).d()
    }
}

/// A row group of Q8_0 blocks where they lie, each block's tile made in
/// registers as it is read.
#[derive(Clone, Copy)]
struct InPlaceRow<'a>(Q8Group<'a>);

impl TileRow for InPlaceRow<'_> {
    type Tile = Q8Block;
    fn blocks(&self) -> usize {
        self.0.blocks()
    }
    #[inline(always)]
    unsafe fn tile(&self, b: usize) -> Q8Block {
        let group = &self.0;
        group.prefetch_next(b);
        let [low, high] = [group.half_words(b, 0), group.half_words(b, 1)];
        let sign = _mm512_set1_epi8(-128);
        let weights_plus_128 = std::array::from_fn(|j| {
            _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(low[j]), high[j], 1), sign)
        });
        Q8Block { weights_plus_128, d: group.scales(b) }
    }
}

/// [`q8`] for full row groups of a Q8_0 matrix read where it lies, each
/// block's tile made in registers as it is multiplied.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,fma,f16c")]
pub(super) unsafe fn q8_in_place<'a>(
    group: impl Fn(usize) -> Q8Group<'a>,
    groups: Range<usize>,
    acts: &QuantizedActivations,
    out: &Output,
) {
    over_tokens!(groups |g| InPlaceRow(group(g)), signed_tokens, groups, acts, out, max TOKENS, rest [1, 2, 3])
}

/// [`IQ4_VALUES`] plus 128: all in 1..=241, unsigned bytes.
const IQ4_VALUES_PLUS_128: [u8; 16] = {
    let mut table = [0u8; 16];
    let mut i = 0;
    while i < 16 {
        table[i] = (IQ4_VALUES[i] as u8) ^ 0x80;
        i += 1;
    }
    table
};

/// IQ4 codes (bytes < 16) replaced by their values plus 128: one
/// `vpshufb` per vector, the table repeated in each 128-bit lane.
#[inline(always)]
unsafe fn look_up_iq4_plus_128(mut codes: Weights) -> Weights {
    let table = _mm512_broadcast_i32x4(_mm_loadu_si128(IQ4_VALUES_PLUS_128.as_ptr() as *const __m128i));
    for w in codes.iter_mut() {
        *w = _mm512_shuffle_epi8(table, *w);
    }
    codes
}

/// `Σ_j (w[j] − 128) · a[4j..4j + 4]` per row, for weights given plus 128.
#[inline(always)]
unsafe fn offset_dot(w: &Weights, acts: &QuantizedActivations, block: usize) -> __m512i {
    let mut isum = _mm512_set1_epi32(-128 * acts.sums[block]);
    for (j, w) in w.iter().enumerate() {
        isum = _mm512_dpbusd_epi32(isum, *w, broadcast_four(acts, block, j));
    }
    isum
}

/// See [`super::plain::q8`].
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,fma,f16c")]
pub(super) unsafe fn q8(tiles: &[TileQ8], groups: Range<usize>, acts: &QuantizedActivations, out: &Output) {
    over_tokens!(signed_tokens, tiles, groups, acts, out, max TOKENS, rest [1, 2, 3])
}

/// See [`super::plain::iq4_nl`].
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,fma,f16c")]
pub(super) unsafe fn iq4_nl(tiles: &[TileIq4Nl], groups: Range<usize>, acts: &QuantizedActivations, out: &Output) {
    over_tokens!(signed_tokens, tiles, groups, acts, out, max TOKENS, rest [1, 2, 3])
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,fma,f16c")]
unsafe fn signed_tokens<const N: usize>(
    row: impl TileRow<Tile: SignedTile>,
    acts: &QuantizedActivations,
    t0: usize,
    g: usize,
    out: &Output,
) {
    let blocks = row.blocks();
    let mut acc = [_mm512_setzero_ps(); N];
    for b in 0..blocks {
        let tile = row.tile(b);
        let w = tile.weights_plus_128();
        let d = f16_floats(tile.d());
        for (n, acc) in acc.iter_mut().enumerate() {
            let block = (t0 + n) * blocks + b;
            let isum = offset_dot(&w, acts, block);
            let scale = _mm512_mul_ps(d, _mm512_set1_ps(acts.scales[block]));
            *acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), scale, *acc);
        }
    }
    for (n, acc) in acc.iter().enumerate() {
        store(*acc, out, t0 + n, g);
    }
}

/// See [`super::plain::iq4_xs`].
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,fma,f16c")]
pub(super) unsafe fn iq4_xs(group: KGroup<TileIq4Xs>, groups: Range<usize>, acts: &QuantizedActivations, out: &Output) {
    let blocks = acts.blocks_per_row();
    over_tokens!(groups |g| group.row_group(blocks, g), iq4_xs_tokens, groups, acts, out, max TOKENS, rest [1, 2, 3])
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,fma,f16c")]
unsafe fn iq4_xs_tokens<const N: usize>(
    group: KGroup<TileIq4Xs>,
    acts: &QuantizedActivations,
    t0: usize,
    g: usize,
    out: &Output,
) {
    let blocks = group.tiles.len();
    let mut acc = [_mm512_setzero_ps(); N];
    for (s, (tiles, supers)) in group.tiles.chunks_exact(TILES_PER_SUPER).zip(group.supers).enumerate() {
        let d = f16_floats(&supers.d);
        for (j, tile) in tiles.iter().enumerate() {
            let b = s * TILES_PER_SUPER + j;
            let w = look_up_iq4_plus_128(nibbles(&tile.qs));
            let scale = i8_lanes(&tile.scale);
            for (n, acc) in acc.iter_mut().enumerate() {
                let block = (t0 + n) * blocks + b;
                let isum = _mm512_mullo_epi32(scale, offset_dot(&w, acts, block));
                let d_scale = _mm512_mul_ps(d, _mm512_set1_ps(acts.scales[block]));
                *acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), d_scale, *acc);
            }
        }
    }
    for (n, acc) in acc.iter().enumerate() {
        store(*acc, out, t0 + n, g);
    }
}
