//! Tiles of the non-linear 4-bit formats, IQ4_NL and IQ4_XS: 4-bit codes
//! stored as in [`TileQ4`](super::TileQ4), each standing for one of the 16
//! signed values of [`IQ4_VALUES`]; the kernels look the codes up in that
//! table (`vpshufb`).

use super::{each_k_sub_block, pack_nibbles, Source, SuperScales, TILE_ROWS};
use crate::ggml_blocks::{self as blocks, IQ4_VALUES, SUB_BLOCK};
use half::f16;

/// 16 rows × 32 IQ4_NL values: `value = d · IQ4_VALUES[q]`, codes `q` in
/// `qs` as in [`TileQ4`](super::TileQ4).
#[derive(Clone, Copy)]
#[repr(C)]
pub struct TileIq4Nl {
    pub d: [f16; TILE_ROWS],
    pub qs: [[u8; 64]; 4],
}

/// One IQ4_XS sub-block for 16 rows: `value = d · scale · IQ4_VALUES[q]`,
/// a signed scale (`ls − 32`) per row, codes as in [`TileIq4Nl`]; `d` per
/// row in [`SuperScales`] (`dmin` zero).
#[derive(Clone, Copy)]
#[repr(C)]
pub struct TileIq4Xs {
    pub scale: [i8; TILE_ROWS],
    pub qs: [[u8; 64]; 4],
}

/// Code `v` of row `r` of a tile as the value it stands for.
pub(crate) fn iq4_value(qs: &[[u8; 64]; 4], r: usize, v: usize) -> i8 {
    IQ4_VALUES[super::low_bits(qs, r, v) as usize]
}

pub(super) fn fill_iq4_nl(source: &Source, g: usize, tiles: &mut [TileIq4Nl]) {
    for r in 0..source.rows_of_group(g) {
        for (tile, block) in tiles.iter_mut().zip(source.row_blocks(g * TILE_ROWS + r)) {
            let (d, q) = blocks::iq4_nl_block(block);
            tile.d[r] = d;
            pack_nibbles(&q, r, &mut tile.qs);
        }
    }
}

/// Row `r`'s 32 values of an IQ4_NL tile.
pub(super) fn iq4_nl_values(tile: &TileIq4Nl, r: usize, values: &mut [f32]) {
    for (v, value) in values[..SUB_BLOCK].iter_mut().enumerate() {
        *value = tile.d[r].to_f32() * iq4_value(&tile.qs, r, v) as f32;
    }
}

pub(super) fn fill_iq4_xs(source: &Source, g: usize, tiles: &mut [TileIq4Xs], supers: &mut [SuperScales]) {
    let scales = |block: &[u8]| (blocks::iq4_xs_scale(block), f16::ZERO);
    each_k_sub_block(source, g, tiles, supers, scales, |tile, r, block, j| {
        let (scale, q) = blocks::iq4_xs_block(block, j);
        tile.scale[r] = scale;
        pack_nibbles(&q, r, &mut tile.qs);
    });
}

/// Row `r`'s 32 values of an IQ4_XS tile.
pub(super) fn iq4_xs_values(tile: &TileIq4Xs, supers: &SuperScales, r: usize, values: &mut [f32]) {
    let scale = supers.d[r].to_f32() * tile.scale[r] as f32;
    for (v, value) in values[..SUB_BLOCK].iter_mut().enumerate() {
        *value = scale * iq4_value(&tile.qs, r, v) as f32;
    }
}
