//! Weight matrices repacked into tiles of 16 rows for the SIMD kernels.
//!
//! GGML stores a quantized matrix row by row, each row a run of 32-value
//! blocks. Here one tile holds the same block column of 16 consecutive rows,
//! interleaved so that one 64-byte load gives 4 consecutive values of each
//! of the 16 rows: a VNNI instruction then advances 16 output rows at once.
//! Tiles of a row group are stored one after another along the row.
//!
//! Repacking keeps the size: a Q4_1 tile is 16 × 20 bytes, a Q8_0 tile
//! 16 × 34 bytes. Q4_0 is stored as Q4_1 with the offset `m = -8d` (exact).

use super::activations::BLOCK;
use super::memory::{Zeroed, ZeroedBuffer};
use anyhow::{ensure, Result};
use half::f16;

/// The GGML block formats repacked here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GgmlFormat {
    /// 32 values: `d` (f16), 16 bytes of 4-bit `q`; value `d · (q - 8)`.
    Q4_0,
    /// 32 values: `d`, `m` (f16), 16 bytes of 4-bit `q`; value `d · q + m`.
    Q4_1,
    /// 32 values: `d` (f16), 32 signed bytes `q`; value `d · q`.
    Q8_0,
}

impl GgmlFormat {
    /// Bytes of one 32-value block.
    pub fn block_bytes(self) -> usize {
        match self {
            GgmlFormat::Q4_0 => 18,
            GgmlFormat::Q4_1 => 20,
            GgmlFormat::Q8_0 => 34,
        }
    }
}

/// Rows per tile.
pub const TILE_ROWS: usize = 16;

/// 16 rows × 32 values of 4-bit weights, `value = d · q + m`, `q` in 0..16.
/// `qs[p][4r + i]` holds `q[r][8p + i]` in its low nibble and
/// `q[r][8p + 4 + i]` in its high nibble (`r` the row, `i` < 4).
#[derive(Clone, Copy)]
#[repr(C)]
pub struct TileQ4 {
    pub d: [f16; TILE_ROWS],
    pub m: [f16; TILE_ROWS],
    pub qs: [[u8; 64]; 4],
}

/// 16 rows × 32 values of 8-bit weights, `value = d · q`.
/// `qs[j][4r + i]` holds `q[r][4j + i]`.
#[derive(Clone, Copy)]
#[repr(C)]
pub struct TileQ8 {
    pub d: [f16; TILE_ROWS],
    pub qs: [[i8; 64]; 8],
}

/// The tiles of a matrix, `row_groups × blocks_per_row` of them.
pub enum Tiles {
    Q4(ZeroedBuffer<TileQ4>),
    Q8(ZeroedBuffer<TileQ8>),
}

/// A quantized `rows × cols` matrix in tiles.
pub struct PackedMatrix {
    pub rows: usize,
    pub cols: usize,
    pub tiles: Tiles,
}

fn read_f16(bytes: &[u8]) -> f16 {
    f16::from_le_bytes([bytes[0], bytes[1]])
}

impl PackedMatrix {
    /// Repacks a GGML matrix stored row by row (`rows × cols`, `cols` a
    /// multiple of 32).
    pub fn from_ggml(dtype: GgmlFormat, data: &[u8], rows: usize, cols: usize) -> Result<Self> {
        ensure!(cols % BLOCK == 0, "{cols} columns are not whole blocks of {BLOCK}");
        let blocks = cols / BLOCK;
        ensure!(
            data.len() == rows * blocks * dtype.block_bytes(),
            "{} bytes do not hold {rows} × {cols} {dtype:?} weights",
            data.len()
        );
        let source = Source { data, dtype, rows, blocks };
        let tiles = match dtype {
            GgmlFormat::Q8_0 => Tiles::Q8(fill_tiles(&source, fill_q8)),
            GgmlFormat::Q4_0 | GgmlFormat::Q4_1 => Tiles::Q4(fill_tiles(&source, fill_q4)),
        };
        Ok(Self { rows, cols, tiles })
    }

    pub fn blocks_per_row(&self) -> usize {
        self.cols / BLOCK
    }

    pub fn row_groups(&self) -> usize {
        self.rows.div_ceil(TILE_ROWS)
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        match &self.tiles {
            Tiles::Q4(t) => std::mem::size_of_val(&t[..]),
            Tiles::Q8(t) => std::mem::size_of_val(&t[..]),
        }
    }

    /// Writes row `row`'s values into `out` (`cols` long).
    pub fn dequantize_row(&self, row: usize, out: &mut [f32]) {
        assert!(row < self.rows && out.len() == self.cols, "row {row} of {} × {}", self.rows, self.cols);
        let (g, r) = (row / TILE_ROWS, row % TILE_ROWS);
        let blocks = self.blocks_per_row();
        for (b, values) in out.chunks_exact_mut(BLOCK).enumerate() {
            match &self.tiles {
                Tiles::Q4(tiles) => {
                    let tile = &tiles[g * blocks + b];
                    let (d, m) = (tile.d[r].to_f32(), tile.m[r].to_f32());
                    for (v, value) in values.iter_mut().enumerate() {
                        let byte = tile.qs[v / 8][4 * r + v % 4];
                        let q = if v % 8 < 4 { byte & 0x0F } else { byte >> 4 };
                        *value = d * q as f32 + m;
                    }
                }
                Tiles::Q8(tiles) => {
                    let tile = &tiles[g * blocks + b];
                    let d = tile.d[r].to_f32();
                    for (v, value) in values.iter_mut().enumerate() {
                        *value = d * tile.qs[v / 4][4 * r + v % 4] as f32;
                    }
                }
            }
        }
    }

    /// All rows' values, row by row.
    pub fn dequantize(&self) -> Vec<f32> {
        let mut out = vec![0f32; self.rows * self.cols];
        for (row, values) in out.chunks_exact_mut(self.cols).enumerate() {
            self.dequantize_row(row, values);
        }
        out
    }
}

/// A GGML matrix being repacked.
struct Source<'a> {
    data: &'a [u8],
    dtype: GgmlFormat,
    rows: usize,
    blocks: usize,
}

impl Source<'_> {
    /// Block `b` of row `row`.
    fn block(&self, row: usize, b: usize) -> &[u8] {
        let size = self.dtype.block_bytes();
        let start = (row * self.blocks + b) * size;
        &self.data[start..start + size]
    }

    /// Rows of row group `g` that exist (the last group may be short).
    fn rows_of_group(&self, g: usize) -> usize {
        TILE_ROWS.min(self.rows - g * TILE_ROWS)
    }
}

/// All tiles, zero-initialised (padding rows stay zero), each row group
/// filled by `fill`. (Filling on several threads measured slower: the page
/// faults of the fresh memory serialise in the kernel.)
fn fill_tiles<T: Zeroed>(source: &Source, fill: fn(&Source, usize, &mut [T])) -> ZeroedBuffer<T> {
    let mut tiles = ZeroedBuffer::<T>::new(source.rows.div_ceil(TILE_ROWS) * source.blocks);
    if source.blocks > 0 {
        for (g, row) in tiles.chunks_exact_mut(source.blocks).enumerate() {
            fill(source, g, row);
        }
    }
    tiles
}

// SAFETY: tiles are arrays of numbers; all-zero bytes are an empty tile.
unsafe impl Zeroed for TileQ4 {}
unsafe impl Zeroed for TileQ8 {}

fn fill_q8(source: &Source, g: usize, tiles: &mut [TileQ8]) {
    for (b, tile) in tiles.iter_mut().enumerate() {
        for r in 0..source.rows_of_group(g) {
            let block = source.block(g * TILE_ROWS + r, b);
            tile.d[r] = read_f16(block);
            for (v, &q) in block[2..].iter().enumerate() {
                tile.qs[v / 4][4 * r + v % 4] = q as i8;
            }
        }
    }
}

fn fill_q4(source: &Source, g: usize, tiles: &mut [TileQ4]) {
    for (b, tile) in tiles.iter_mut().enumerate() {
        for r in 0..source.rows_of_group(g) {
            let block = source.block(g * TILE_ROWS + r, b);
            let (d, m, nibbles) = if source.dtype == GgmlFormat::Q4_1 {
                (read_f16(block), read_f16(&block[2..]), &block[4..20])
            } else {
                let d = read_f16(block);
                (d, f16::from_f32(-8.0 * d.to_f32()), &block[2..18])
            };
            tile.d[r] = d;
            tile.m[r] = m;
            // GGML keeps values 0..16 in the low nibbles and 16..32 in the
            // high ones; a tile byte pairs values v and v + 4 (see `TileQ4`).
            let n = nibbles;
            for i in 0..4 {
                tile.qs[0][4 * r + i] = (n[i] & 0x0F) | (n[4 + i] << 4);
                tile.qs[1][4 * r + i] = (n[8 + i] & 0x0F) | (n[12 + i] << 4);
                tile.qs[2][4 * r + i] = (n[i] >> 4) | (n[4 + i] & 0xF0);
                tile.qs[3][4 * r + i] = (n[8 + i] >> 4) | (n[12 + i] & 0xF0);
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use candle_core::quantized::{GgmlDType, QTensor};
    use candle_core::{Device, Tensor};

    /// A random `rows × cols` matrix quantized by candle to `dtype`, with its
    /// GGML bytes and its dequantized values.
    pub(crate) fn random_ggml(format: GgmlFormat, rows: usize, cols: usize, seed: u64) -> (Vec<u8>, Vec<f32>) {
        let dtype = match format {
            GgmlFormat::Q4_0 => GgmlDType::Q4_0,
            GgmlFormat::Q4_1 => GgmlDType::Q4_1,
            GgmlFormat::Q8_0 => GgmlDType::Q8_0,
        };
        let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let values: Vec<f32> = (0..rows * cols)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state % 2001) as f32 / 1000.0 - 1.0
            })
            .collect();
        let tensor = Tensor::from_vec(values, (rows, cols), &Device::Cpu).unwrap();
        let q = QTensor::quantize(&tensor, dtype).unwrap();
        let bytes = q.data().unwrap().into_owned();
        let dequantized = q.dequantize(&Device::Cpu).unwrap().flatten_all().unwrap().to_vec1().unwrap();
        (bytes, dequantized)
    }

    #[test]
    fn repacked_rows_dequantize_as_ggml_does() {
        for dtype in [GgmlFormat::Q4_0, GgmlFormat::Q4_1, GgmlFormat::Q8_0] {
            for (rows, cols) in [(1, 32), (16, 64), (37, 96)] {
                let (bytes, expected) = random_ggml(dtype, rows, cols, rows as u64);
                let packed = PackedMatrix::from_ggml(dtype, &bytes, rows, cols).unwrap();
                let ours = packed.dequantize();
                for (i, (a, b)) in ours.iter().zip(&expected).enumerate() {
                    assert!((a - b).abs() <= 1e-6 * b.abs().max(1.0), "{dtype:?} {rows}×{cols} value {i}: {a} vs {b}");
                }
                assert_eq!(packed.row_groups(), rows.div_ceil(16));
            }
        }
    }

    #[test]
    fn wrong_sizes_are_refused() {
        assert!(PackedMatrix::from_ggml(GgmlFormat::Q4_1, &[0; 20], 1, 16).is_err());
        assert!(PackedMatrix::from_ggml(GgmlFormat::Q4_1, &[0; 19], 1, 32).is_err());
        assert!(PackedMatrix::from_ggml(GgmlFormat::Q8_0, &[0; 34], 2, 32).is_err());
    }
}
