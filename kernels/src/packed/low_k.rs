//! Tiles of the K-quants below 4 bits, Q3_K and Q2_K: values in two planes
//! of 2-bit fields (as [`TileQ6K`](super::TileQ6K)'s `qh`), plus a bit
//! plane for Q3_K's third bit, and a scale per 16 values and row.

use super::{each_k_sub_block, high_bit, pack_bit, pack_two_bits, two_bits, Source, SuperScales, TILE_ROWS};
use crate::ggml_blocks::{self as blocks, SUB_BLOCK};
use half::f16;

/// One Q3_K sub-block for 16 rows: `value = d · scale[h] · (q − 4)` for
/// values `16h..16h + 16`, `q` in 0..8: bits 0–1 in `ql`, bit 2 in the bit
/// plane `qh`; `d` per row in [`SuperScales`] (`dmin` zero).
#[derive(Clone, Copy)]
#[repr(C)]
pub struct TileQ3K {
    pub scale: [[i8; TILE_ROWS]; 2],
    pub ql: [[u8; 64]; 2],
    pub qh: [u8; 64],
}

/// One Q2_K sub-block for 16 rows: `value = d · scale_h · q − dmin · min_h`
/// for values `16h..16h + 16`, `q` in 0..4 in `qs` (as [`TileQ3K`]'s `ql`),
/// `scale_h` in the low and `min_h` in the high nibble of `scale_min[h]`
/// (as GGML stores them); `d`, `dmin` per row in [`SuperScales`].
#[derive(Clone, Copy)]
#[repr(C)]
pub struct TileQ2K {
    pub scale_min: [[u8; TILE_ROWS]; 2],
    pub qs: [[u8; 64]; 2],
}

/// Value `v` of row `r` of a Q3_K tile, 0..8.
pub(crate) fn q3k_value(tile: &TileQ3K, r: usize, v: usize) -> u8 {
    two_bits(&tile.ql, r, v) | high_bit(&tile.qh, r, v) << 2
}

pub(super) fn fill_q3k(source: &Source, g: usize, tiles: &mut [TileQ3K], supers: &mut [SuperScales]) {
    let scales = |block: &[u8]| (blocks::q3_k_scale_d(block), f16::ZERO);
    each_k_sub_block(source, g, tiles, supers, scales, |tile, r, block, j| {
        let (scale, q) = blocks::q3_k_block(block, j);
        (tile.scale[0][r], tile.scale[1][r]) = (scale[0], scale[1]);
        pack_two_bits(&q, 0, r, &mut tile.ql);
        pack_bit(&q, 2, r, &mut tile.qh);
    });
}

/// Row `r`'s 32 values of a Q3_K tile.
pub(super) fn q3k_values(tile: &TileQ3K, supers: &SuperScales, r: usize, values: &mut [f32]) {
    let d = supers.d[r].to_f32();
    for (v, value) in values[..SUB_BLOCK].iter_mut().enumerate() {
        *value = d * tile.scale[v / 16][r] as f32 * (q3k_value(tile, r, v) as i32 - 4) as f32;
    }
}

pub(super) fn fill_q2k(source: &Source, g: usize, tiles: &mut [TileQ2K], supers: &mut [SuperScales]) {
    each_k_sub_block(source, g, tiles, supers, blocks::q2_k_super_scales, |tile, r, block, j| {
        let (scale_min, q) = blocks::q2_k_block(block, j);
        (tile.scale_min[0][r], tile.scale_min[1][r]) = (scale_min[0], scale_min[1]);
        pack_two_bits(&q, 0, r, &mut tile.qs);
    });
}

/// Row `r`'s 32 values of a Q2_K tile.
pub(super) fn q2k_values(tile: &TileQ2K, supers: &SuperScales, r: usize, values: &mut [f32]) {
    let (d, dmin) = (supers.d[r].to_f32(), supers.dmin[r].to_f32());
    for (v, value) in values[..SUB_BLOCK].iter_mut().enumerate() {
        let scale_min = tile.scale_min[v / 16][r];
        let (scale, min) = (d * (scale_min & 0x0F) as f32, dmin * (scale_min >> 4) as f32);
        *value = scale * two_bits(&tile.qs, r, v) as f32 - min;
    }
}
