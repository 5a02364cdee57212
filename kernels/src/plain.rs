//! The kernels in plain Rust: the reference the SIMD paths must equal, and
//! the path for CPUs without them.
//!
//! For each of 16 rows and each block: the integer dot product of the
//! weights' and activations' quantized values, scaled by `d_w · d_a`, plus
//! (4-bit weights) the offset `m_w` times `d_a · Σq_a`. Both are fused
//! multiply-adds, in this order, in every path.

use super::activations::{QuantizedActivations, BLOCK};
use super::matmul::Output;
use super::packed::{TileQ4, TileQ8, TILE_ROWS};
use std::ops::Range;

/// `out[t][row] = Σ_b …` for the rows of `groups`, every activation row `t`.
pub(super) fn q4(tiles: &[TileQ4], groups: Range<usize>, acts: &QuantizedActivations, out: &Output) {
    each_tile_row(tiles, groups, acts, out, |tile, block, acc| {
        let qa = &acts.qs[block * BLOCK..(block + 1) * BLOCK];
        let (da, sa) = (acts.scales[block], acts.scaled_sums[block]);
        for (r, acc) in acc.iter_mut().enumerate() {
            let mut isum = 0i32;
            for p in 0..4 {
                for i in 0..4 {
                    let byte = tile.qs[p][4 * r + i];
                    isum += (byte & 0x0F) as i32 * qa[8 * p + i] as i32 + (byte >> 4) as i32 * qa[8 * p + 4 + i] as i32;
                }
            }
            *acc = (isum as f32).mul_add(tile.d[r].to_f32() * da, *acc);
            *acc = tile.m[r].to_f32().mul_add(sa, *acc);
        }
    });
}

/// As [`q4`], for 8-bit weights.
pub(super) fn q8(tiles: &[TileQ8], groups: Range<usize>, acts: &QuantizedActivations, out: &Output) {
    each_tile_row(tiles, groups, acts, out, |tile, block, acc| {
        let qa = &acts.qs[block * BLOCK..(block + 1) * BLOCK];
        let da = acts.scales[block];
        for (r, acc) in acc.iter_mut().enumerate() {
            let mut isum = 0i32;
            for j in 0..8 {
                for i in 0..4 {
                    isum += tile.qs[j][4 * r + i] as i32 * qa[4 * j + i] as i32;
                }
            }
            *acc = (isum as f32).mul_add(tile.d[r].to_f32() * da, *acc);
        }
    });
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
