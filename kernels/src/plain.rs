//! The kernels in plain Rust: the reference the SIMD paths must equal, and
//! the path for CPUs without them.
//!
//! For each of 16 rows and each block: the integer dot product of the
//! weights' and activations' quantized values, scaled by `d_w · d_a`, plus
//! (4-bit weights) the offset `m_w` times `d_a · Σq_a`. Both are fused
//! multiply-adds, in this order, in every path.

use super::activations::{QuantizedActivations, BLOCK};
use super::matmul::Output;
use super::packed::{
    self, KGroup, SuperScales, TileIq4Nl, TileIq4Xs, TileQ2K, TileQ3K, TileQ4, TileQ40, TileQ4K, TileQ5, TileQ5K,
    TileQ6K, TileQ8, TILES_PER_SUPER, TILE_ROWS,
};
use half::f16;
use std::ops::Range;

/// `Σ_v q(v) · qa[v]` over `values`.
fn dot(qa: &[i8], values: Range<usize>, q: impl Fn(usize) -> u8) -> i32 {
    values.map(|v| q(v) as i32 * qa[v] as i32).sum()
}

/// A tile of 4-bit `d · q + m` weights (Q4_0, Q4_1).
pub(super) trait FourBitLinear: Sync {
    fn qs(&self) -> &[[u8; 64]; 4];
    fn d(&self, r: usize) -> f32;
    fn m(&self, r: usize) -> f32;
}

impl FourBitLinear for TileQ40 {
    fn qs(&self) -> &[[u8; 64]; 4] {
        &self.qs
    }
    fn d(&self, r: usize) -> f32 {
        self.d[r].to_f32()
    }
    fn m(&self, r: usize) -> f32 {
        self.offset(r)
    }
}

impl FourBitLinear for TileQ4 {
    fn qs(&self) -> &[[u8; 64]; 4] {
        &self.qs
    }
    fn d(&self, r: usize) -> f32 {
        self.d[r].to_f32()
    }
    fn m(&self, r: usize) -> f32 {
        self.m[r].to_f32()
    }
}

/// `out[t][row] = Σ_b …` for the rows of `groups`, every activation row `t`.
pub(super) fn q4(tiles: &[impl FourBitLinear], groups: Range<usize>, acts: &QuantizedActivations, out: &Output) {
    each_tile_row(tiles, groups, acts, out, |tile, block, acc| {
        let qa = &acts.qs[block * BLOCK..(block + 1) * BLOCK];
        let (da, sa) = (acts.scales[block], acts.scaled_sums[block]);
        for (r, acc) in acc.iter_mut().enumerate() {
            let isum = dot(qa, 0..BLOCK, |v| packed::low_bits(tile.qs(), r, v));
            *acc = (isum as f32).mul_add(tile.d(r) * da, *acc);
            *acc = tile.m(r).mul_add(sa, *acc);
        }
    });
}

/// As [`q4`], with the fifth bit.
pub(super) fn q5(tiles: &[TileQ5], groups: Range<usize>, acts: &QuantizedActivations, out: &Output) {
    each_tile_row(tiles, groups, acts, out, |tile, block, acc| {
        let qa = &acts.qs[block * BLOCK..(block + 1) * BLOCK];
        let (da, sa) = (acts.scales[block], acts.scaled_sums[block]);
        for (r, acc) in acc.iter_mut().enumerate() {
            let isum = dot(qa, 0..BLOCK, |v| packed::low_bits(&tile.qs, r, v) | packed::high_bit(&tile.qh, r, v) << 4);
            *acc = (isum as f32).mul_add(tile.d[r].to_f32() * da, *acc);
            *acc = tile.m[r].to_f32().mul_add(sa, *acc);
        }
    });
}

/// Q4_K and Q5_K: the integer dot product scaled by `d · scale · d_a`,
/// minus `dmin · min` times `d_a · Σq_a` (`scale`, `min` as integers first
/// multiplied by the row's `d` and `dmin`).
fn k_sub_block(isum: i32, supers: &SuperScales, r: usize, scale: u8, min: u8, da: f32, sa: f32, acc: f32) -> f32 {
    let scale = supers.d[r].to_f32() * scale as f32;
    let min = supers.dmin[r].to_f32() * min as f32;
    let acc = (isum as f32).mul_add(scale * da, acc);
    (-min).mul_add(sa, acc)
}

pub(super) fn q4k(group: KGroup<TileQ4K>, groups: Range<usize>, acts: &QuantizedActivations, out: &Output) {
    each_k_tile_row(group, groups, acts, out, |tile, supers, block, acc| {
        let qa = &acts.qs[block * BLOCK..(block + 1) * BLOCK];
        for (r, acc) in acc.iter_mut().enumerate() {
            let isum = dot(qa, 0..BLOCK, |v| packed::low_bits(&tile.qs, r, v));
            *acc = k_sub_block(
                isum,
                supers,
                r,
                tile.scale[r],
                tile.min[r],
                acts.scales[block],
                acts.scaled_sums[block],
                *acc,
            );
        }
    });
}

pub(super) fn q5k(group: KGroup<TileQ5K>, groups: Range<usize>, acts: &QuantizedActivations, out: &Output) {
    each_k_tile_row(group, groups, acts, out, |tile, supers, block, acc| {
        let qa = &acts.qs[block * BLOCK..(block + 1) * BLOCK];
        for (r, acc) in acc.iter_mut().enumerate() {
            let isum = dot(qa, 0..BLOCK, |v| packed::low_bits(&tile.qs, r, v) | packed::high_bit(&tile.qh, r, v) << 4);
            *acc = k_sub_block(
                isum,
                supers,
                r,
                tile.scale[r],
                tile.min[r],
                acts.scales[block],
                acts.scaled_sums[block],
                *acc,
            );
        }
    });
}

/// Q6_K: `scale_h · (Σ q · q_a − 32 Σ q_a)` per half (see [`halves`]).
pub(super) fn q6k(group: KGroup<TileQ6K>, groups: Range<usize>, acts: &QuantizedActivations, out: &Output) {
    let scales = |tile: &TileQ6K, r: usize| HalfScales { scales: tile.scale.map(|s| s[r] as i32), mins: None };
    halves(group, groups, acts, out, 32, scales, |tile, r, v| {
        packed::low_bits(&tile.qs, r, v) | packed::two_bits(&tile.qh, r, v) << 4
    });
}

/// Q3_K: as [`q6k`], 3-bit values offset by 4.
pub(super) fn q3k(group: KGroup<TileQ3K>, groups: Range<usize>, acts: &QuantizedActivations, out: &Output) {
    let scales = |tile: &TileQ3K, r: usize| HalfScales { scales: tile.scale.map(|s| s[r] as i32), mins: None };
    halves(group, groups, acts, out, 4, scales, packed::q3k_value);
}

/// Q2_K: `scale_h · Σ q · q_a` per half, and mins (see [`halves`]).
pub(super) fn q2k(group: KGroup<TileQ2K>, groups: Range<usize>, acts: &QuantizedActivations, out: &Output) {
    let scales = |tile: &TileQ2K, r: usize| {
        let [low, high] = tile.scale_min.map(|s| s[r]);
        HalfScales {
            scales: [(low & 0x0F) as i32, (high & 0x0F) as i32],
            mins: Some([(low >> 4) as i32, (high >> 4) as i32]),
        }
    };
    halves(group, groups, acts, out, 0, scales, |tile, r, v| packed::two_bits(&tile.qs, r, v));
}

/// A row's integer scales of a tile's two halves of 16 values, and mins
/// for the formats that have them.
struct HalfScales {
    scales: [i32; 2],
    mins: Option<[i32; 2]>,
}

/// Tiles with a scale per 16 values (Q6_K, Q3_K, Q2_K), `weight = d ·
/// scale_h · (q − offset) − dmin · min_h`: per half, `scale_h · (Σ q · q_a −
/// offset · Σ q_a)` in integers, summed and scaled by `d · d_a`; then, with
/// mins, `Σ_h min_h · Σ q_a` scaled by `dmin · d_a` taken off.
fn halves<T>(
    group: KGroup<T>,
    groups: Range<usize>,
    acts: &QuantizedActivations,
    out: &Output,
    offset: i32,
    half_scales: impl Fn(&T, usize) -> HalfScales,
    q: impl Fn(&T, usize, usize) -> u8,
) {
    each_k_tile_row(group, groups, acts, out, |tile, supers, block, acc| {
        let qa = &acts.qs[block * BLOCK..(block + 1) * BLOCK];
        let half_sums = [acts.half_sums[2 * block], acts.half_sums[2 * block + 1]];
        let da = acts.scales[block];
        for (r, acc) in acc.iter_mut().enumerate() {
            let HalfScales { scales, mins } = half_scales(tile, r);
            let isum: i32 = (0..2)
                .map(|h| scales[h] * (dot(qa, 16 * h..16 * h + 16, |v| q(tile, r, v)) - offset * half_sums[h]))
                .sum();
            *acc = (isum as f32).mul_add(supers.d[r].to_f32() * da, *acc);
            if let Some(mins) = mins {
                let msum = mins[0] * half_sums[0] + mins[1] * half_sums[1];
                *acc = (-(msum as f32)).mul_add(supers.dmin[r].to_f32() * da, *acc);
            }
        }
    });
}

/// As [`q4`], for 8-bit weights.
pub(super) fn q8(tiles: &[TileQ8], groups: Range<usize>, acts: &QuantizedActivations, out: &Output) {
    signed(tiles, groups, acts, out, |tile| &tile.d, |tile, r, v| tile.qs[v / 4][4 * r + v % 4]);
}

/// IQ4_NL: as [`q8`], each code standing for its value in the table.
pub(super) fn iq4_nl(tiles: &[TileIq4Nl], groups: Range<usize>, acts: &QuantizedActivations, out: &Output) {
    signed(tiles, groups, acts, out, |tile| &tile.d, |tile, r, v| packed::iq4_value(&tile.qs, r, v));
}

/// IQ4_XS: the sub-block's signed scale times the dot product of the
/// codes' values, in integers, scaled by `d · d_a`.
pub(super) fn iq4_xs(group: KGroup<TileIq4Xs>, groups: Range<usize>, acts: &QuantizedActivations, out: &Output) {
    each_k_tile_row(group, groups, acts, out, |tile, supers, block, acc| {
        let qa = &acts.qs[block * BLOCK..(block + 1) * BLOCK];
        for (r, acc) in acc.iter_mut().enumerate() {
            let isum = tile.scale[r] as i32 * signed_dot(qa, |v| packed::iq4_value(&tile.qs, r, v));
            *acc = (isum as f32).mul_add(supers.d[r].to_f32() * acts.scales[block], *acc);
        }
    });
}

/// Tiles of `d · w`, `w(tile, r, v)` a signed integer: the integer dot
/// product scaled by `d · d_a`.
fn signed<T>(
    tiles: &[T],
    groups: Range<usize>,
    acts: &QuantizedActivations,
    out: &Output,
    d: impl Fn(&T) -> &[f16; TILE_ROWS],
    w: impl Fn(&T, usize, usize) -> i8,
) {
    each_tile_row(tiles, groups, acts, out, |tile, block, acc| {
        let qa = &acts.qs[block * BLOCK..(block + 1) * BLOCK];
        let da = acts.scales[block];
        for (r, acc) in acc.iter_mut().enumerate() {
            let isum = signed_dot(qa, |v| w(tile, r, v));
            *acc = (isum as f32).mul_add(d(tile)[r].to_f32() * da, *acc);
        }
    });
}

/// `Σ_v w(v) · qa[v]` over a block.
fn signed_dot(qa: &[i8], w: impl Fn(usize) -> i8) -> i32 {
    (0..BLOCK).map(|v| w(v) as i32 * qa[v] as i32).sum()
}

/// As [`each_tile_row`] for K-quant tiles, handing `add` each tile's
/// super-block scales too.
fn each_k_tile_row<T>(
    group: KGroup<T>,
    groups: Range<usize>,
    acts: &QuantizedActivations,
    out: &Output,
    add: impl Fn(&T, &SuperScales, usize, &mut [f32; TILE_ROWS]),
) {
    let blocks = acts.blocks_per_row();
    for g in groups {
        let row = group.row_group(blocks, g);
        for t in 0..acts.rows {
            let mut acc = [0f32; TILE_ROWS];
            for (b, tile) in row.tiles.iter().enumerate() {
                add(tile, &row.supers[b / TILES_PER_SUPER], t * blocks + b, &mut acc);
            }
            out.store(t, g, &acc);
        }
    }
}

/// For each row group of `groups` and activation row `t`: accumulates
/// `add(tile, activation block, accumulators)` over the group's tiles and
/// stores the 16 sums.
fn each_tile_row<T>(
    tiles: &[T],
    groups: Range<usize>,
    acts: &QuantizedActivations,
    out: &Output,
    add: impl Fn(&T, usize, &mut [f32; TILE_ROWS]),
) {
    let blocks = acts.blocks_per_row();
    for g in groups {
        for t in 0..acts.rows {
            let mut acc = [0f32; TILE_ROWS];
            for (b, tile) in tiles[g * blocks..(g + 1) * blocks].iter().enumerate() {
                add(tile, t * blocks + b, &mut acc);
            }
            out.store(t, g, &acc);
        }
    }
}
