//! Weight matrices repacked into tiles of 16 rows for the SIMD kernels.
//!
//! GGML stores a quantized matrix row by row, each row a run of blocks (see
//! [`super::ggml_blocks`]). Here one tile holds the same 32-column block of
//! 16 consecutive rows, interleaved so that one 64-byte load gives 4
//! consecutive values of each of the 16 rows: a VNNI instruction then
//! advances 16 output rows at once. Tiles of a row group are stored one
//! after another along the row. Every weight keeps exactly the value the
//! file gives it (the scales are the file's, never rounded).
//!
//! - [`TileQ4`] (Q4_1) and [`TileQ5`] (Q5_0, Q5_1): `d · q + m` per row,
//!   `m = −16d` for Q5_0 (exact). [`TileQ40`] (Q4_0): `d · (q − 8)`, the
//!   offset not stored.
//! - [`TileQ8`] (Q8_0): `d · q`.
//! - [`TileQ4K`] (Q4_K) and [`TileQ5K`] (Q5_K): integer scale and min per
//!   row, with the super-block's `d` and `dmin` per row in [`SuperScales`].
//! - [`TileQ6K`] (Q6_K): two signed integer scales per row (one per 16
//!   values), the super-block's `d` per row in [`SuperScales`].
//! - [`TileQ3K`] (Q3_K): as Q6_K, with 3-bit values; [`TileQ2K`] (Q2_K):
//!   2-bit values, a 4-bit scale and min per 16 values and row, `d` and
//!   `dmin` per row in [`SuperScales`] (in `packed/low_k.rs`).
//! - [`TileIq4Nl`] (IQ4_NL): 4-bit codes of a table of 16 values, `d` per
//!   row; [`TileIq4Xs`] (IQ4_XS): the same codes, a signed integer scale
//!   per row, the super-block's `d` per row in [`SuperScales`] (in
//!   `packed/iq4.rs`).
//!
//! 4-bit parts are stored as in [`TileQ4`]; a fifth bit (Q5) is one bit
//! plane of 64 bytes, two more bits (Q6_K) two planes: byte `4r + i` of a
//! plane holds, in bit `j` (or bits `2j'`, `2j' + 1`), the high bits of
//! value `4j + i` of row `r`. Q3_K's values are two planes of 2 bits and a
//! bit plane, Q2_K's two planes of 2 bits. Sizes per 16 × 32 values: Q4_0
//! 288 bytes (GGML 288), Q4_1 320 (320), Q5 384 (352–384), Q8 544 (544), Q4_K 296
//! (288), Q5_K 360 (352), Q6_K 424 (420), IQ4_NL 288 (288), IQ4_XS 280
//! (272), Q3_K 232 (220), Q2_K 168 (168).

use super::activations::BLOCK;
pub use super::ggml_blocks::GgmlFormat;
use super::ggml_blocks::{self as blocks, ValueWords, LOW_NIBBLES, SUB_BLOCK, SUPER_BLOCK};
use super::memory::{bytes_of, FileMapping, Zeroed, ZeroedBuffer};
use anyhow::{ensure, Context, Result};
use half::f16;
use std::sync::Arc;

mod in_place;
mod iq4;
mod low_k;
pub use in_place::GgmlRows;
pub(crate) use in_place::Q8Group;
pub(crate) use iq4::iq4_value;
pub use iq4::{TileIq4Nl, TileIq4Xs};
pub(crate) use low_k::q3k_value;
pub use low_k::{TileQ2K, TileQ3K};

/// Rows per tile.
pub const TILE_ROWS: usize = 16;
/// Tiles (32-column blocks) per K-quant super-block.
pub const TILES_PER_SUPER: usize = SUPER_BLOCK / SUB_BLOCK;

/// 16 rows × 32 values of Q4_0, `value = d · (q − 8)`, `q` in 0..16 stored
/// as in [`TileQ4`]. The offset `−8d` is computed, not stored: 288 bytes
/// per tile as in the file instead of 320, bytes every decode step reads
/// (a tenth of a Q4_0 model's decode time).
#[derive(Clone, Copy)]
#[repr(C)]
pub struct TileQ40 {
    pub d: [f16; TILE_ROWS],
    pub qs: [[u8; 64]; 4],
}

impl TileQ40 {
    /// Row `r`'s offset `m = −8d` (exact in f32, as in f16).
    pub fn offset(&self, r: usize) -> f32 {
        -8.0 * self.d[r].to_f32()
    }
}

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

/// As [`TileQ4`] with a fifth bit: `q` in 0..32, its bit 4 in `qh`.
#[derive(Clone, Copy)]
#[repr(C)]
pub struct TileQ5 {
    pub d: [f16; TILE_ROWS],
    pub m: [f16; TILE_ROWS],
    pub qs: [[u8; 64]; 4],
    pub qh: [u8; 64],
}

/// 16 rows × 32 values of 8-bit weights, `value = d · q`.
/// `qs[j][4r + i]` holds `q[r][4j + i]`.
#[derive(Clone, Copy)]
#[repr(C)]
pub struct TileQ8 {
    pub d: [f16; TILE_ROWS],
    pub qs: [[i8; 64]; 8],
}

impl TileQ8 {
    pub const ZERO: Self = Self { d: [f16::ZERO; TILE_ROWS], qs: [[0; 64]; 8] };
}

/// One sub-block of Q4_K for 16 rows: `value = d · scale · q − dmin · min`,
/// `q` in 0..16 stored as in [`TileQ4`]; `d`, `dmin` in [`SuperScales`].
#[derive(Clone, Copy)]
#[repr(C)]
pub struct TileQ4K {
    pub scale: [u8; TILE_ROWS],
    pub min: [u8; TILE_ROWS],
    pub qs: [[u8; 64]; 4],
}

/// As [`TileQ4K`] with a fifth bit (Q5_K): `q` in 0..32, bit 4 in `qh`.
#[derive(Clone, Copy)]
#[repr(C)]
pub struct TileQ5K {
    pub scale: [u8; TILE_ROWS],
    pub min: [u8; TILE_ROWS],
    pub qs: [[u8; 64]; 4],
    pub qh: [u8; 64],
}

/// One sub-block of Q6_K for 16 rows: `value = d · scale[h] · (q − 32)`
/// for values `16h..16h + 16`, `q` in 0..64: the low 4 bits as in
/// [`TileQ4`], bits 4–5 of values `4j + i` in bits `2(j % 4)`.. of
/// `qh[j / 4][4r + i]`.
#[derive(Clone, Copy)]
#[repr(C)]
pub struct TileQ6K {
    pub scale: [[i8; TILE_ROWS]; 2],
    pub qs: [[u8; 64]; 4],
    pub qh: [[u8; 64]; 2],
}

/// A K-quant super-block's scales for the 16 rows of a row group
/// (`dmin` is zero for Q6_K).
#[derive(Clone, Copy)]
#[repr(C)]
pub struct SuperScales {
    pub d: [f16; TILE_ROWS],
    pub dmin: [f16; TILE_ROWS],
}

/// The tiles of a K-quant matrix: `row_groups × blocks_per_row` tiles and
/// `row_groups × blocks_per_row / 8` super-block scales.
pub struct KTiles<T: Zeroed> {
    pub tiles: ZeroedBuffer<T>,
    pub supers: ZeroedBuffer<SuperScales>,
}

/// A K-quant matrix's tiles and super-block scales, as the kernels take them.
pub struct KGroup<'a, T> {
    pub tiles: &'a [T],
    pub supers: &'a [SuperScales],
}

impl<T> Clone for KGroup<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for KGroup<'_, T> {}

impl<'a, T> KGroup<'a, T> {
    /// Row group `g`'s tiles and super-block scales, for rows of `blocks` tiles.
    #[inline(always)]
    pub fn row_group(self, blocks: usize, g: usize) -> KGroup<'a, T> {
        let supers = blocks / TILES_PER_SUPER;
        KGroup { tiles: &self.tiles[g * blocks..(g + 1) * blocks], supers: &self.supers[g * supers..(g + 1) * supers] }
    }
}

impl<T: Zeroed> KTiles<T> {
    pub fn group(&self) -> KGroup<'_, T> {
        KGroup { tiles: &self.tiles, supers: &self.supers }
    }
}

/// The tiles of one row group as a kernel reads them, block by block:
/// stored ones (a slice), or ones made as they are read (Q8_0 in place).
pub(crate) trait TileRow: Copy {
    type Tile;
    fn blocks(&self) -> usize;
    /// Block `b`'s tile (`b < blocks()`).
    unsafe fn tile(&self, b: usize) -> Self::Tile;
}

impl<'a, T> TileRow for &'a [T] {
    type Tile = &'a T;
    fn blocks(&self) -> usize {
        self.len()
    }
    #[inline(always)]
    unsafe fn tile(&self, b: usize) -> &'a T {
        self.get_unchecked(b)
    }
}

/// The tiles of a matrix, `row_groups × blocks_per_row` of them.
pub enum Tiles {
    Q40(ZeroedBuffer<TileQ40>),
    Q4(ZeroedBuffer<TileQ4>),
    Q5(ZeroedBuffer<TileQ5>),
    Q8(ZeroedBuffer<TileQ8>),
    Q4K(KTiles<TileQ4K>),
    Q5K(KTiles<TileQ5K>),
    Q6K(KTiles<TileQ6K>),
    Iq4Nl(ZeroedBuffer<TileIq4Nl>),
    Iq4Xs(KTiles<TileIq4Xs>),
    Q3K(KTiles<TileQ3K>),
    Q2K(KTiles<TileQ2K>),
    /// Q8_0 blocks where they lie, made into tiles as they are multiplied.
    Q8InPlace(GgmlRows),
}

/// A quantized `rows × cols` matrix in tiles.
pub struct PackedMatrix {
    pub rows: usize,
    pub cols: usize,
    /// The GGML format the weights came in.
    pub format: GgmlFormat,
    pub tiles: Tiles,
}

impl PackedMatrix {
    /// Repacks a GGML matrix stored row by row (`rows × cols`, `cols` a
    /// multiple of the format's block).
    pub fn from_ggml(format: GgmlFormat, data: &[u8], rows: usize, cols: usize) -> Result<Self> {
        let source = Source::checked(format, data, rows, cols)?;
        let tiles = match format {
            GgmlFormat::Q8_0 => Tiles::Q8(fill_tiles(&source, fill_q8)),
            GgmlFormat::Q4_0 => Tiles::Q40(fill_tiles(&source, fill_q4_0)),
            GgmlFormat::Q4_1 => Tiles::Q4(fill_tiles(&source, fill_q4)),
            GgmlFormat::Q5_0 | GgmlFormat::Q5_1 => Tiles::Q5(fill_tiles(&source, fill_q5)),
            GgmlFormat::Q4_K => Tiles::Q4K(fill_k_tiles(&source, fill_q4k)),
            GgmlFormat::Q5_K => Tiles::Q5K(fill_k_tiles(&source, fill_q5k)),
            GgmlFormat::Q6_K => Tiles::Q6K(fill_k_tiles(&source, fill_q6k)),
            GgmlFormat::IQ4_NL => Tiles::Iq4Nl(fill_tiles(&source, iq4::fill_iq4_nl)),
            GgmlFormat::IQ4_XS => Tiles::Iq4Xs(fill_k_tiles(&source, iq4::fill_iq4_xs)),
            GgmlFormat::Q3_K => Tiles::Q3K(fill_k_tiles(&source, low_k::fill_q3k)),
            GgmlFormat::Q2_K => Tiles::Q2K(fill_k_tiles(&source, low_k::fill_q2k)),
        };
        Ok(Self { rows, cols, format, tiles })
    }

    /// Whether matrices of `format` are read where they lie
    /// ([`PackedMatrix::in_place`]) rather than repacked: Q8_0, whose tiles
    /// are its blocks' bytes rearranged, cheap to make as they are used.
    pub fn reads_in_place(format: GgmlFormat) -> bool {
        format == GgmlFormat::Q8_0
    }

    /// The GGML `rows × cols` matrix of `format` at byte `start` of `owner`
    /// (a mapped file, say), read there from now on, for a format that
    /// [`PackedMatrix::reads_in_place`].
    pub fn in_place(
        format: GgmlFormat,
        owner: Arc<dyn AsRef<[u8]> + Send + Sync>,
        start: usize,
        rows: usize,
        cols: usize,
    ) -> Result<Self> {
        ensure!(Self::reads_in_place(format), "{format:?} matrices are repacked, not read in place");
        Ok(Self { rows, cols, format, tiles: Tiles::Q8InPlace(GgmlRows::new(owner, start, rows, cols)?) })
    }

    /// Whether the weights are read where they lie in the file.
    pub fn is_in_place(&self) -> bool {
        matches!(self.tiles, Tiles::Q8InPlace(_))
    }

    /// Repacks a GGML matrix as [`PackedMatrix::from_ggml`] does, without
    /// holding the result: `write(part, bytes)` gets the tiles (part 0) a few
    /// megabytes at a time, then the super-block scales (part 1, K-quants
    /// only), the bytes [`PackedMatrix::parts`] would hold. For writing a
    /// repack straight to a file, touching only a small reused buffer.
    pub fn repack_into(
        format: GgmlFormat,
        data: &[u8],
        rows: usize,
        cols: usize,
        scratch: &mut RepackScratch,
        write: &mut dyn FnMut(usize, &[u8]) -> std::io::Result<()>,
    ) -> Result<()> {
        let source = Source::checked(format, data, rows, cols)?;
        let s = scratch;
        let written = match format {
            GgmlFormat::Q8_0 => stream_tiles(&source, fill_q8, s, write),
            GgmlFormat::Q4_0 => stream_tiles(&source, fill_q4_0, s, write),
            GgmlFormat::Q4_1 => stream_tiles(&source, fill_q4, s, write),
            GgmlFormat::Q5_0 | GgmlFormat::Q5_1 => stream_tiles(&source, fill_q5, s, write),
            GgmlFormat::IQ4_NL => stream_tiles(&source, iq4::fill_iq4_nl, s, write),
            GgmlFormat::Q4_K => stream_k_tiles(&source, fill_q4k, s, write),
            GgmlFormat::Q5_K => stream_k_tiles(&source, fill_q5k, s, write),
            GgmlFormat::Q6_K => stream_k_tiles(&source, fill_q6k, s, write),
            GgmlFormat::IQ4_XS => stream_k_tiles(&source, iq4::fill_iq4_xs, s, write),
            GgmlFormat::Q3_K => stream_k_tiles(&source, low_k::fill_q3k, s, write),
            GgmlFormat::Q2_K => stream_k_tiles(&source, low_k::fill_q2k, s, write),
        };
        Ok(written?)
    }

    pub fn blocks_per_row(&self) -> usize {
        self.cols / BLOCK
    }

    pub fn row_groups(&self) -> usize {
        self.rows.div_ceil(TILE_ROWS)
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.parts().iter().map(|part| part.len()).sum()
    }

    /// The matrix as stored, in two parts: its tiles, and (K-quants) its
    /// super-block scales, else nothing. [`PackedMatrix::from_file`] reads
    /// them back. (A matrix read in place: its GGML bytes, and nothing.)
    pub fn parts(&self) -> [&[u8]; 2] {
        fn k<T: Zeroed>(t: &KTiles<T>) -> [&[u8]; 2] {
            [t.tiles.as_bytes(), t.supers.as_bytes()]
        }
        match &self.tiles {
            Tiles::Q40(t) => [t.as_bytes(), &[]],
            Tiles::Q4(t) => [t.as_bytes(), &[]],
            Tiles::Q5(t) => [t.as_bytes(), &[]],
            Tiles::Q8(t) => [t.as_bytes(), &[]],
            Tiles::Q4K(t) => k(t),
            Tiles::Q5K(t) => k(t),
            Tiles::Q6K(t) => k(t),
            Tiles::Iq4Nl(t) => [t.as_bytes(), &[]],
            Tiles::Iq4Xs(t) => k(t),
            Tiles::Q3K(t) => k(t),
            Tiles::Q2K(t) => k(t),
            Tiles::Q8InPlace(rows) => [rows.bytes(), &[]],
        }
    }

    /// The byte sizes of [`PackedMatrix::parts`] for a `rows × cols` matrix
    /// of `format`; `None` unless `cols` is whole blocks.
    pub fn part_sizes(format: GgmlFormat, rows: usize, cols: usize) -> Option<[usize; 2]> {
        if !cols.is_multiple_of(format.block_values()) {
            return None;
        }
        let tiles = rows.div_ceil(TILE_ROWS).checked_mul(cols / BLOCK)?;
        let supers = if format.is_k_quant() { tiles / TILES_PER_SUPER } else { 0 };
        Some([tiles.checked_mul(tile_bytes(format))?, supers.checked_mul(std::mem::size_of::<SuperScales>())?])
    }

    /// A matrix whose [`PackedMatrix::parts`] lie at `offsets` of a mapped
    /// file, used where they lie.
    pub fn from_file(
        format: GgmlFormat,
        rows: usize,
        cols: usize,
        mapping: &Arc<FileMapping>,
        offsets: [usize; 2],
    ) -> Result<Self> {
        let sizes = Self::part_sizes(format, rows, cols);
        let [tiles, supers] = sizes.with_context(|| format!("{cols} columns are not whole {format:?} blocks"))?;
        fn buffer<T: Zeroed>(mapping: &Arc<FileMapping>, offset: usize, bytes: usize) -> Result<ZeroedBuffer<T>> {
            let len = bytes / std::mem::size_of::<T>();
            ZeroedBuffer::in_file(mapping, offset, len)
                .with_context(|| format!("{bytes} bytes at {offset} do not lie in a file of {}", mapping.len()))
        }
        fn k<T: Zeroed>(mapping: &Arc<FileMapping>, offsets: [usize; 2], sizes: [usize; 2]) -> Result<KTiles<T>> {
            Ok(KTiles { tiles: buffer(mapping, offsets[0], sizes[0])?, supers: buffer(mapping, offsets[1], sizes[1])? })
        }
        let tiles = match format {
            GgmlFormat::Q8_0 => Tiles::Q8(buffer(mapping, offsets[0], tiles)?),
            GgmlFormat::Q4_0 => Tiles::Q40(buffer(mapping, offsets[0], tiles)?),
            GgmlFormat::Q4_1 => Tiles::Q4(buffer(mapping, offsets[0], tiles)?),
            GgmlFormat::Q5_0 | GgmlFormat::Q5_1 => Tiles::Q5(buffer(mapping, offsets[0], tiles)?),
            GgmlFormat::IQ4_NL => Tiles::Iq4Nl(buffer(mapping, offsets[0], tiles)?),
            GgmlFormat::Q4_K => Tiles::Q4K(k(mapping, offsets, [tiles, supers])?),
            GgmlFormat::Q5_K => Tiles::Q5K(k(mapping, offsets, [tiles, supers])?),
            GgmlFormat::Q6_K => Tiles::Q6K(k(mapping, offsets, [tiles, supers])?),
            GgmlFormat::IQ4_XS => Tiles::Iq4Xs(k(mapping, offsets, [tiles, supers])?),
            GgmlFormat::Q3_K => Tiles::Q3K(k(mapping, offsets, [tiles, supers])?),
            GgmlFormat::Q2_K => Tiles::Q2K(k(mapping, offsets, [tiles, supers])?),
        };
        Ok(Self { rows, cols, format, tiles })
    }

    /// Writes row `row`'s values into `out` (`cols` long).
    pub fn dequantize_row(&self, row: usize, out: &mut [f32]) {
        assert!(row < self.rows && out.len() == self.cols, "row {row} of {} × {}", self.rows, self.cols);
        let (g, r) = (row / TILE_ROWS, row % TILE_ROWS);
        let blocks = self.blocks_per_row();
        if let Tiles::Q8InPlace(ggml) = &self.tiles {
            let source = Source { data: ggml.bytes(), format: self.format, rows: self.rows, blocks };
            for (values, block) in out.chunks_exact_mut(BLOCK).zip(source.row_blocks(row)) {
                let (d, q) = blocks::q8_0_block(block);
                for (value, q) in values.iter_mut().zip(q) {
                    *value = d.to_f32() * q as f32;
                }
            }
            return;
        }
        for (b, values) in out.chunks_exact_mut(BLOCK).enumerate() {
            let at = g * blocks + b;
            let s = at / TILES_PER_SUPER;
            match &self.tiles {
                Tiles::Q40(tiles) => {
                    let t = &tiles[at];
                    fill_linear(values, t.d[r], t.offset(r), |v| low_bits(&t.qs, r, v));
                }
                Tiles::Q4(tiles) => {
                    let t = &tiles[at];
                    fill_linear(values, t.d[r], t.m[r].to_f32(), |v| low_bits(&t.qs, r, v));
                }
                Tiles::Q5(tiles) => {
                    let t = &tiles[at];
                    let m = t.m[r].to_f32();
                    fill_linear(values, t.d[r], m, |v| low_bits(&t.qs, r, v) | high_bit(&t.qh, r, v) << 4);
                }
                Tiles::Q8(tiles) => {
                    let t = &tiles[at];
                    for (v, value) in values.iter_mut().enumerate() {
                        *value = t.d[r].to_f32() * t.qs[v / 4][4 * r + v % 4] as f32;
                    }
                }
                Tiles::Q4K(k) => {
                    let t = &k.tiles[at];
                    fill_k(values, &k.supers[s], r, t.scale[r], t.min[r], |v| low_bits(&t.qs, r, v));
                }
                Tiles::Q5K(k) => {
                    let t = &k.tiles[at];
                    fill_k(values, &k.supers[s], r, t.scale[r], t.min[r], |v| {
                        low_bits(&t.qs, r, v) | high_bit(&t.qh, r, v) << 4
                    });
                }
                Tiles::Q6K(k) => {
                    let t = &k.tiles[at];
                    let d = k.supers[s].d[r].to_f32();
                    for (v, value) in values.iter_mut().enumerate() {
                        let q = low_bits(&t.qs, r, v) | two_bits(&t.qh, r, v) << 4;
                        *value = d * t.scale[v / 16][r] as f32 * (q as i32 - 32) as f32;
                    }
                }
                Tiles::Iq4Nl(tiles) => iq4::iq4_nl_values(&tiles[at], r, values),
                Tiles::Iq4Xs(k) => iq4::iq4_xs_values(&k.tiles[at], &k.supers[s], r, values),
                Tiles::Q3K(k) => low_k::q3k_values(&k.tiles[at], &k.supers[s], r, values),
                Tiles::Q2K(k) => low_k::q2k_values(&k.tiles[at], &k.supers[s], r, values),
                Tiles::Q8InPlace(_) => unreachable!("handled above"),
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

/// Bytes of one tile of `format`.
fn tile_bytes(format: GgmlFormat) -> usize {
    use std::mem::size_of;
    match format {
        GgmlFormat::Q4_0 => size_of::<TileQ40>(),
        GgmlFormat::Q4_1 => size_of::<TileQ4>(),
        GgmlFormat::Q5_0 | GgmlFormat::Q5_1 => size_of::<TileQ5>(),
        GgmlFormat::Q8_0 => size_of::<TileQ8>(),
        GgmlFormat::Q4_K => size_of::<TileQ4K>(),
        GgmlFormat::Q5_K => size_of::<TileQ5K>(),
        GgmlFormat::Q6_K => size_of::<TileQ6K>(),
        GgmlFormat::IQ4_NL => size_of::<TileIq4Nl>(),
        GgmlFormat::IQ4_XS => size_of::<TileIq4Xs>(),
        GgmlFormat::Q3_K => size_of::<TileQ3K>(),
        GgmlFormat::Q2_K => size_of::<TileQ2K>(),
    }
}

/// A number that changes whenever the tiles do: a hash of what every
/// format's repack makes of one fixed matrix. Files of repacked weights
/// record it, so that tiles a build with another layout wrote are never read.
pub fn layout_fingerprint() -> u64 {
    static FINGERPRINT: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *FINGERPRINT.get_or_init(|| {
        // FNV-1a: stable from one build to the next, unlike std's hasher.
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        let mut add = |bytes: &[u8]| {
            for &byte in bytes {
                hash = (hash ^ byte as u64).wrapping_mul(0x0100_0000_01b3);
            }
        };
        let (rows, cols) = (TILE_ROWS + 1, SUPER_BLOCK);
        for format in GgmlFormat::ALL {
            let len = rows * cols / format.block_values() * format.block_bytes();
            let data: Vec<u8> = (0..len as u32).map(|i| i.wrapping_mul(2_654_435_761).rotate_right(13) as u8).collect();
            let matrix = PackedMatrix::from_ggml(format, &data, rows, cols).expect("whole blocks");
            add(format.name().as_bytes());
            for part in matrix.parts() {
                add(&(part.len() as u64).to_le_bytes());
                add(part);
            }
        }
        hash
    })
}

/// The low 4 bits of value `v` of row `r` (layout of [`TileQ4`]).
pub(crate) fn low_bits(qs: &[[u8; 64]; 4], r: usize, v: usize) -> u8 {
    let byte = qs[v / 8][4 * r + v % 4];
    if v % 8 < 4 {
        byte & 0x0F
    } else {
        byte >> 4
    }
}

/// The bit of value `v` of row `r` in a bit plane (Q5's bit 4, Q3_K's bit 2).
pub(crate) fn high_bit(qh: &[u8; 64], r: usize, v: usize) -> u8 {
    (qh[4 * r + v % 4] >> (v / 4)) & 1
}

/// The 2-bit field of value `v` of row `r`, from two planes (Q6_K's bits
/// 4–5, Q3_K's and Q2_K's bits 0–1).
pub(crate) fn two_bits(qh: &[[u8; 64]; 2], r: usize, v: usize) -> u8 {
    let j = v / 4;
    (qh[j / 4][4 * r + v % 4] >> (2 * (j % 4))) & 3
}

fn fill_linear(values: &mut [f32], d: f16, m: f32, q: impl Fn(usize) -> u8) {
    for (v, value) in values.iter_mut().enumerate() {
        *value = d.to_f32() * q(v) as f32 + m;
    }
}

fn fill_k(values: &mut [f32], supers: &SuperScales, r: usize, scale: u8, min: u8, q: impl Fn(usize) -> u8) {
    let (scale, min) = (supers.d[r].to_f32() * scale as f32, supers.dmin[r].to_f32() * min as f32);
    for (v, value) in values.iter_mut().enumerate() {
        *value = scale * q(v) as f32 - min;
    }
}

/// A GGML matrix being repacked.
struct Source<'a> {
    data: &'a [u8],
    format: GgmlFormat,
    rows: usize,
    /// 32-value blocks per row.
    blocks: usize,
}

impl<'a> Source<'a> {
    /// `data` as a `rows × cols` matrix of `format`, if its size is right.
    fn checked(format: GgmlFormat, data: &'a [u8], rows: usize, cols: usize) -> Result<Self> {
        let per_block = format.block_values();
        ensure!(cols.is_multiple_of(per_block), "{cols} columns are not whole {format:?} blocks of {per_block}");
        let expected = rows.checked_mul(cols / per_block).and_then(|n| n.checked_mul(format.block_bytes()));
        ensure!(expected == Some(data.len()), "{} bytes do not hold {rows} × {cols} {format:?} weights", data.len());
        Ok(Self { data, format, rows, blocks: cols / BLOCK })
    }

    /// The GGML blocks of row `row` in order (32-value blocks, or
    /// super-blocks).
    fn row_blocks(&self, row: usize) -> std::slice::ChunksExact<'a, u8> {
        let size = self.format.block_bytes();
        let row_bytes = self.blocks * BLOCK / self.format.block_values() * size;
        self.data[row * row_bytes..(row + 1) * row_bytes].chunks_exact(size)
    }

    /// Rows of row group `g` that exist (the last group may be short).
    fn rows_of_group(&self, g: usize) -> usize {
        TILE_ROWS.min(self.rows - g * TILE_ROWS)
    }
}

/// All tiles, zero-initialised (padding rows stay zero), each row group
/// filled by `fill`. (Filling on several threads measured slower: the page
/// faults of the fresh memory serialise in the kernel.)
fn fill_tiles<T: Zeroed + Send>(source: &Source, fill: fn(&Source, usize, &mut [T])) -> ZeroedBuffer<T> {
    let mut tiles = ZeroedBuffer::<T>::new(source.rows.div_ceil(TILE_ROWS) * source.blocks);
    let row_groups = RowGroups::of(&mut tiles, source.blocks);
    // SAFETY: each row group is taken once.
    for_each_row_group(source, |g| fill(source, g, unsafe { row_groups.take(g) }));
    tiles
}

/// As [`fill_tiles`] for K-quants: `fill` also writes the row group's
/// super-block scales.
fn fill_k_tiles<T: Zeroed + Send>(
    source: &Source,
    fill: fn(&Source, usize, &mut [T], &mut [SuperScales]),
) -> KTiles<T> {
    let groups = source.rows.div_ceil(TILE_ROWS);
    let supers_per_row = source.blocks / TILES_PER_SUPER;
    let mut tiles = ZeroedBuffer::<T>::new(groups * source.blocks);
    let mut supers = ZeroedBuffer::<SuperScales>::new(groups * supers_per_row);
    let tile_groups = RowGroups::of(&mut tiles, source.blocks);
    let super_groups = RowGroups::of(&mut supers, supers_per_row);
    // SAFETY: each row group is taken once.
    for_each_row_group(source, |g| fill(source, g, unsafe { tile_groups.take(g) }, unsafe { super_groups.take(g) }));
    KTiles { tiles, supers }
}

/// Tiles handed to `write` at most this many bytes at a time (in tests, so
/// few that every matrix takes several batches).
#[cfg(not(test))]
const STREAM_BYTES: usize = 8 << 20;
#[cfg(test)]
const STREAM_BYTES: usize = 4 << 10;

/// As [`fill_tiles`], handing the tiles to `write` (as part 0) a batch of
/// row groups at a time, filled in one reused buffer.
fn stream_tiles<T: Zeroed + Send>(
    source: &Source,
    fill: fn(&Source, usize, &mut [T]),
    scratch: &mut RepackScratch,
    write: &mut dyn FnMut(usize, &[u8]) -> std::io::Result<()>,
) -> std::io::Result<()> {
    stream_batches(source, scratch, write, &|g, tiles| fill(source, g, tiles))
}

/// As [`fill_k_tiles`], handing the tiles to `write` as [`stream_tiles`]
/// does, then all the super-block scales (part 1).
fn stream_k_tiles<T: Zeroed + Send>(
    source: &Source,
    fill: fn(&Source, usize, &mut [T], &mut [SuperScales]),
    scratch: &mut RepackScratch,
    write: &mut dyn FnMut(usize, &[u8]) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let supers_per_row = source.blocks / TILES_PER_SUPER;
    let mut supers = ZeroedBuffer::<SuperScales>::new(source.rows.div_ceil(TILE_ROWS) * supers_per_row);
    let super_groups = RowGroups::of(&mut supers, supers_per_row);
    // SAFETY: each row group is taken once.
    stream_batches(source, scratch, write, &|g, tiles| fill(source, g, tiles, unsafe { super_groups.take(g) }))?;
    write(1, supers.as_bytes())
}

/// The two buffers a streamed repack fills and hands on, kept from one
/// matrix to the next: fresh pages cost a zeroing fault each, and a first
/// load streams hundreds of matrices (a 1B model's zeroed 1.8 GB).
#[derive(Default)]
pub struct RepackScratch {
    /// Words, for an alignment that suits every tile type.
    buffers: [Vec<u64>; 2],
}

impl RepackScratch {
    /// Both buffers as `len` values of `T` each (contents unspecified).
    fn two<T: Zeroed>(&mut self, len: usize) -> [&mut [T]; 2] {
        const { assert!(std::mem::align_of::<T>() <= std::mem::align_of::<u64>()) };
        let words = (len * std::mem::size_of::<T>()).div_ceil(8);
        self.buffers.each_mut().map(|buffer| {
            if buffer.len() < words {
                buffer.resize(words, 0);
            }
            // SAFETY: the words hold at least `len` values of `T`, aligned
            // for it (checked above); any bytes are a valid `T` (`Zeroed`).
            unsafe { std::slice::from_raw_parts_mut(buffer.as_mut_ptr() as *mut T, len) }
        })
    }
}

/// Fills batches of row groups' tiles (`fill(g, tiles)`) on the kernel
/// pool's threads and hands each batch to `write`. Two buffers take turns:
/// while one batch is written (into fresh page-cache pages, which costs as
/// much as the repack on a first load), the next is filled on another
/// thread.
fn stream_batches<T: Zeroed + Send>(
    source: &Source,
    scratch: &mut RepackScratch,
    write: &mut dyn FnMut(usize, &[u8]) -> std::io::Result<()>,
    fill: &(dyn Fn(usize, &mut [T]) + Sync),
) -> std::io::Result<()> {
    let groups = source.rows.div_ceil(TILE_ROWS);
    if source.blocks == 0 || groups == 0 {
        return Ok(());
    }
    let per_batch = (STREAM_BYTES / (std::mem::size_of::<T>() * source.blocks)).clamp(1, groups);
    let fill_batch = |first: usize, batch: &mut [T]| {
        // The fills write every byte of a whole row group; the padding rows
        // of a short last group must read as zero, as in a fresh buffer.
        let groups_here = batch.len() / source.blocks;
        if source.rows_of_group(first + groups_here - 1) < TILE_ROWS {
            let last = &mut batch[(groups_here - 1) * source.blocks..];
            // SAFETY: all-zero bytes are a valid `T` (`Zeroed`).
            unsafe { std::ptr::write_bytes(last.as_mut_ptr(), 0, last.len()) };
        }
        let row_groups = RowGroups::of(batch, source.blocks);
        // SAFETY: each row group of the batch is taken once.
        super::pool::global()
            .run(batch.len() / source.blocks, &|gs| gs.for_each(|i| fill(first + i, unsafe { row_groups.take(i) })));
    };
    let batch_len = |first: usize| per_batch.min(groups - first) * source.blocks;
    let (fill_batch, batch_len) = (&fill_batch, &batch_len);
    let [a, b] = scratch.two::<T>(per_batch * source.blocks);
    if per_batch == groups {
        fill_batch(0, a);
        return write(0, bytes_of(a));
    }
    let mut free: Vec<&mut [T]> = vec![a, b];
    std::thread::scope(|scope| {
        let mut filled: Option<(usize, &mut [T])> = None;
        for first in (0..groups).step_by(per_batch) {
            let buffer = free.pop().expect("two buffers take turns");
            let filling = scope.spawn(move || {
                fill_batch(first, &mut buffer[..batch_len(first)]);
                buffer
            });
            if let Some((done_first, done)) = filled.take() {
                write(0, bytes_of(&done[..batch_len(done_first)]))?;
                free.push(done);
            }
            let buffer = filling.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            filled = Some((first, buffer));
        }
        match filled {
            Some((first, done)) => write(0, bytes_of(&done[..batch_len(first)])),
            None => Ok(()),
        }
    })
}

/// Calls `fill(g)` for every row group of `source`, on the kernel pool's
/// threads: the repack and the first touch of its fresh pages (which the
/// system zeroes) are most of a large model's load time.
fn for_each_row_group(source: &Source, fill: impl Fn(usize) + Sync) {
    if source.blocks == 0 {
        return;
    }
    super::pool::global().run(source.rows.div_ceil(TILE_ROWS), &|groups| groups.for_each(&fill));
}

/// A buffer cut into row groups of `len` values that threads fill apart.
struct RowGroups<T> {
    start: *mut T,
    len: usize,
    count: usize,
}

// SAFETY: the groups are disjoint; `take` hands each out once.
unsafe impl<T: Send> Sync for RowGroups<T> {}

impl<T> RowGroups<T> {
    fn of(buffer: &mut [T], len: usize) -> Self {
        Self { start: buffer.as_mut_ptr(), len, count: buffer.len().checked_div(len).unwrap_or(0) }
    }

    /// SAFETY: call at most once per `g` while the buffer lives.
    #[allow(clippy::mut_from_ref)]
    unsafe fn take(&self, g: usize) -> &mut [T] {
        assert!(g < self.count, "row group {g} of {}", self.count);
        std::slice::from_raw_parts_mut(self.start.add(g * self.len), self.len)
    }
}

// SAFETY: tiles are arrays of numbers; all-zero bytes are an empty tile.
unsafe impl Zeroed for TileQ40 {}
unsafe impl Zeroed for TileQ4 {}
unsafe impl Zeroed for TileQ5 {}
unsafe impl Zeroed for TileQ8 {}
unsafe impl Zeroed for TileQ4K {}
unsafe impl Zeroed for TileQ5K {}
unsafe impl Zeroed for TileQ6K {}
unsafe impl Zeroed for SuperScales {}
unsafe impl Zeroed for TileIq4Nl {}
unsafe impl Zeroed for TileIq4Xs {}
unsafe impl Zeroed for TileQ3K {}
unsafe impl Zeroed for TileQ2K {}

/// Row `r`'s 32 values `q` (< 16) into the nibbles of `qs`: a tile byte
/// pairs values `v` and `v + 4` (see [`TileQ4`]). (Higher bits are ignored.)
fn pack_nibbles(q: &ValueWords, r: usize, qs: &mut [[u8; 64]; 4]) {
    for (p, plane) in qs.iter_mut().enumerate() {
        put_word(plane, r, (q[2 * p] & LOW_NIBBLES) | ((q[2 * p + 1] & LOW_NIBBLES) << 4));
    }
}

/// Bit `bit` of row `r`'s 32 values into a bit plane: bit `j` of byte `i`
/// holds value `4j + i`.
fn pack_bit(q: &ValueWords, bit: u32, r: usize, qh: &mut [u8; 64]) {
    let word = (0..8).fold(0, |word, j| word | (((q[j] >> bit) & 0x0101_0101) << j));
    put_word(qh, r, word);
}

/// Bits `shift`, `shift + 1` of row `r`'s 32 values into two planes: bits
/// `2j, 2j + 1` of byte `i` of plane `h` hold value `16h + 4j + i`.
fn pack_two_bits(q: &ValueWords, shift: u32, r: usize, qh: &mut [[u8; 64]; 2]) {
    for (half, plane) in qh.iter_mut().enumerate() {
        let word = (0..4).fold(0, |word, j| word | (((q[4 * half + j] >> shift) & 0x0303_0303) << (2 * j)));
        put_word(plane, r, word);
    }
}

/// Stores `word` as row `r`'s 4 bytes of a 16-row plane.
fn put_word(plane: &mut [u8; 64], r: usize, word: u32) {
    plane[4 * r..4 * r + 4].copy_from_slice(&word.to_le_bytes());
}

fn fill_q8(source: &Source, g: usize, tiles: &mut [TileQ8]) {
    for r in 0..source.rows_of_group(g) {
        for (tile, block) in tiles.iter_mut().zip(source.row_blocks(g * TILE_ROWS + r)) {
            let (d, q) = blocks::q8_0_block(block);
            tile.d[r] = d;
            for (v, q) in q.into_iter().enumerate() {
                tile.qs[v / 4][4 * r + v % 4] = q;
            }
        }
    }
}

fn fill_q4_0(source: &Source, g: usize, tiles: &mut [TileQ40]) {
    for r in 0..source.rows_of_group(g) {
        for (tile, block) in tiles.iter_mut().zip(source.row_blocks(g * TILE_ROWS + r)) {
            tile.d[r] = blocks::read_f16(block);
            pack_ggml_nibbles(block[2..18].try_into().expect("16 bytes of nibbles"), r, &mut tile.qs);
        }
    }
}

fn fill_q4(source: &Source, g: usize, tiles: &mut [TileQ4]) {
    for r in 0..source.rows_of_group(g) {
        for (tile, block) in tiles.iter_mut().zip(source.row_blocks(g * TILE_ROWS + r)) {
            let (d, m, nibbles) = blocks::linear_scales(source.format, block);
            (tile.d[r], tile.m[r]) = (d, m);
            pack_ggml_nibbles(nibbles.try_into().expect("16 bytes of nibbles"), r, &mut tile.qs);
        }
    }
}

/// Row `r`'s 16 bytes of GGML nibbles (value `i` in the low nibble of byte
/// `i`, value `i + 16` in its high nibble) as [`pack_nibbles`] would store
/// the 32 values, without unpacking them first: the 4-bit repack was a
/// quarter of a Q4_0 model's load.
fn pack_ggml_nibbles(bytes: &[u8; 16], r: usize, qs: &mut [[u8; 64]; 4]) {
    let w = blocks::le_words::<4>(bytes);
    // Words 0, 1 hold values 0..8 and 16..24 in their low and high
    // nibbles; words 2, 3 values 8..16 and 24..32.
    for (pair, [a, b]) in [[w[0], w[1]], [w[2], w[3]]].into_iter().enumerate() {
        put_word(&mut qs[pair], r, (a & LOW_NIBBLES) | ((b & LOW_NIBBLES) << 4));
        put_word(&mut qs[2 + pair], r, ((a >> 4) & LOW_NIBBLES) | (b & !LOW_NIBBLES));
    }
}

fn fill_q5(source: &Source, g: usize, tiles: &mut [TileQ5]) {
    for r in 0..source.rows_of_group(g) {
        for (tile, block) in tiles.iter_mut().zip(source.row_blocks(g * TILE_ROWS + r)) {
            let block = blocks::linear_block(source.format, block);
            (tile.d[r], tile.m[r]) = (block.d, block.m);
            pack_nibbles(&block.q, r, &mut tile.qs);
            pack_bit(&block.q, 4, r, &mut tile.qh);
        }
    }
}

/// Runs `fill(tile, row, super-block bytes, sub-block j)` for every tile
/// and row of row group `g`, after storing the super-block's scales
/// (`scales` reads them from the block).
fn each_k_sub_block<T>(
    source: &Source,
    g: usize,
    tiles: &mut [T],
    supers: &mut [SuperScales],
    scales: fn(&[u8]) -> (f16, f16),
    mut fill: impl FnMut(&mut T, usize, &[u8], usize),
) {
    for r in 0..source.rows_of_group(g) {
        let row = source.row_blocks(g * TILE_ROWS + r);
        for ((chunk, scales_out), block) in tiles.chunks_exact_mut(TILES_PER_SUPER).zip(supers.iter_mut()).zip(row) {
            (scales_out.d[r], scales_out.dmin[r]) = scales(block);
            for (j, tile) in chunk.iter_mut().enumerate() {
                fill(tile, r, block, j);
            }
        }
    }
}

fn fill_q4k(source: &Source, g: usize, tiles: &mut [TileQ4K], supers: &mut [SuperScales]) {
    each_k_sub_block(source, g, tiles, supers, blocks::k_super_scales, |tile, r, block, j| {
        let sub = blocks::k_block(GgmlFormat::Q4_K, block, j);
        (tile.scale[r], tile.min[r]) = (sub.scale, sub.min);
        pack_nibbles(&sub.q, r, &mut tile.qs);
    });
}

fn fill_q5k(source: &Source, g: usize, tiles: &mut [TileQ5K], supers: &mut [SuperScales]) {
    each_k_sub_block(source, g, tiles, supers, blocks::k_super_scales, |tile, r, block, j| {
        let sub = blocks::k_block(GgmlFormat::Q5_K, block, j);
        (tile.scale[r], tile.min[r]) = (sub.scale, sub.min);
        pack_nibbles(&sub.q, r, &mut tile.qs);
        pack_bit(&sub.q, 4, r, &mut tile.qh);
    });
}

fn fill_q6k(source: &Source, g: usize, tiles: &mut [TileQ6K], supers: &mut [SuperScales]) {
    let scales = |block: &[u8]| (blocks::q6_k_scale(block), f16::ZERO);
    each_k_sub_block(source, g, tiles, supers, scales, |tile, r, block, j| {
        let (scale, q) = blocks::q6_k_block(block, j);
        (tile.scale[0][r], tile.scale[1][r]) = (scale[0], scale[1]);
        pack_nibbles(&q, r, &mut tile.qs);
        pack_two_bits(&q, 4, r, &mut tile.qh);
    });
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use candle_core::quantized::{GgmlDType, QTensor};
    use candle_core::{Device, Tensor};

    /// Xorshift numbers from `seed`.
    fn random_numbers(seed: u64) -> impl FnMut() -> u64 {
        let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        }
    }

    /// A random `rows × cols` matrix of `format` with its GGML bytes and its
    /// values: quantized by candle where candle has the format, else made
    /// of random blocks (see [`random_blocks`]).
    pub(crate) fn random_ggml(format: GgmlFormat, rows: usize, cols: usize, seed: u64) -> (Vec<u8>, Vec<f32>) {
        let dtype = match format {
            GgmlFormat::IQ4_NL | GgmlFormat::IQ4_XS => return random_blocks(format, rows, cols, seed),
            GgmlFormat::Q4_0 => GgmlDType::Q4_0,
            GgmlFormat::Q4_1 => GgmlDType::Q4_1,
            GgmlFormat::Q5_0 => GgmlDType::Q5_0,
            GgmlFormat::Q5_1 => GgmlDType::Q5_1,
            GgmlFormat::Q8_0 => GgmlDType::Q8_0,
            GgmlFormat::Q4_K => GgmlDType::Q4K,
            GgmlFormat::Q5_K => GgmlDType::Q5K,
            GgmlFormat::Q6_K => GgmlDType::Q6K,
            GgmlFormat::Q3_K => GgmlDType::Q3K,
            GgmlFormat::Q2_K => GgmlDType::Q2K,
        };
        let mut random = random_numbers(seed);
        let values: Vec<f32> = (0..rows * cols).map(|_| (random() % 2001) as f32 / 1000.0 - 1.0).collect();
        let tensor = Tensor::from_vec(values, (rows, cols), &Device::Cpu).unwrap();
        let q = QTensor::quantize(&tensor, dtype).unwrap();
        let bytes = q.data().unwrap().into_owned();
        let dequantized = q.dequantize(&Device::Cpu).unwrap().flatten_all().unwrap().to_vec1().unwrap();
        (bytes, dequantized)
    }

    /// A `rows × cols` matrix of random GGML blocks: random bytes but for
    /// the f16 scales, drawn in ±0.05 (as the Python fixtures do), with the
    /// values the block decoder gives them.
    pub(crate) fn random_blocks(format: GgmlFormat, rows: usize, cols: usize, seed: u64) -> (Vec<u8>, Vec<f32>) {
        let mut random = random_numbers(seed);
        let count = rows * cols / format.block_values();
        let mut bytes: Vec<u8> = (0..count * format.block_bytes()).map(|_| random() as u8).collect();
        let mut values = vec![0f32; rows * cols];
        for (block, values) in
            bytes.chunks_exact_mut(format.block_bytes()).zip(values.chunks_exact_mut(format.block_values()))
        {
            for &at in format.f16_offsets() {
                let scale = f16::from_f32((random() % 1001) as f32 / 10_000.0 - 0.05);
                block[at..at + 2].copy_from_slice(&scale.to_le_bytes());
            }
            crate::ggml_blocks::dequantize_block(format, block, values);
        }
        (bytes, values)
    }

    /// Matrix shapes for tests: odd row counts, several blocks per row.
    pub(crate) fn test_shapes(format: GgmlFormat) -> [(usize, usize); 3] {
        let block = format.block_values();
        [(1, block), (16, 2 * block), (37, 3 * block)]
    }

    #[test]
    fn repacked_rows_dequantize_as_candle_and_the_block_decoder_do() {
        for format in GgmlFormat::ALL {
            for (rows, cols) in test_shapes(format) {
                let (bytes, expected) = random_ggml(format, rows, cols, rows as u64);
                let packed = PackedMatrix::from_ggml(format, &bytes, rows, cols).unwrap();
                let ours = packed.dequantize();
                for (i, (a, b)) in ours.iter().zip(&expected).enumerate() {
                    assert!((a - b).abs() <= 1e-6 * b.abs().max(1.0), "{format:?} {rows}×{cols} value {i}: {a} vs {b}");
                }
                let mut decoded = vec![0f32; format.block_values()];
                for (block, expected) in
                    bytes.chunks_exact(format.block_bytes()).zip(ours.chunks_exact(format.block_values()))
                {
                    crate::ggml_blocks::dequantize_block(format, block, &mut decoded);
                    assert_eq!(decoded, expected, "{format:?}: the block decoder and the tiles agree exactly");
                }
                assert_eq!(packed.row_groups(), rows.div_ceil(16));
            }
        }
    }

    /// Parts written to a file and mapped back multiply exactly as the
    /// repacked matrix they came from; parts that do not fit are refused.
    #[test]
    fn matrices_read_back_from_a_file_multiply_as_repacked() {
        use std::io::Write;
        const PAGE: usize = 4096;
        let path = std::env::temp_dir().join(format!("cake-kernels-tiles-{}", std::process::id()));
        // One scratch for all: what a matrix left in it never shows in the next.
        let mut scratch = RepackScratch::default();
        for format in GgmlFormat::ALL {
            let (rows, cols) = test_shapes(format)[2];
            let (bytes, _) = random_ggml(format, rows, cols, 11);
            let packed = PackedMatrix::from_ggml(format, &bytes, rows, cols).unwrap();
            let [tiles, supers] = packed.parts();
            let mut streamed = [Vec::new(), Vec::new()];
            PackedMatrix::repack_into(format, &bytes, rows, cols, &mut scratch, &mut |part, b| {
                streamed[part].extend_from_slice(b);
                Ok(())
            })
            .unwrap();
            assert_eq!([&streamed[0][..], &streamed[1][..]], [tiles, supers], "{format:?}: streamed as repacked");
            assert_eq!(PackedMatrix::part_sizes(format, rows, cols), Some([tiles.len(), supers.len()]));
            let supers_at = PAGE + tiles.len().next_multiple_of(PAGE);
            let mut file = std::fs::File::create(&path).unwrap();
            file.write_all(&vec![0; PAGE]).unwrap();
            file.write_all(tiles).unwrap();
            file.write_all(&vec![0; supers_at - PAGE - tiles.len()]).unwrap();
            file.write_all(supers).unwrap();
            drop(file);
            let mapping = FileMapping::open(&std::fs::File::open(&path).unwrap()).unwrap();
            let read = PackedMatrix::from_file(format, rows, cols, &mapping, [PAGE, supers_at]).unwrap();
            assert_eq!(read.parts(), packed.parts(), "{format:?}");
            let x: Vec<f32> = (0..3 * cols).map(|i| ((i * 7919 % 263) as f32 - 131.0) / 97.0).collect();
            let (mut expected, mut ours) = (vec![0f32; 3 * rows], vec![0f32; 3 * rows]);
            crate::matmul::matmul(&packed, &x, 3, &mut expected);
            crate::matmul::matmul(&read, &x, 3, &mut ours);
            assert_eq!(ours, expected, "{format:?}");
            let past_end = mapping.len() - tiles.len() - supers.len() + 1;
            let beyond = if supers.is_empty() { [past_end, 0] } else { [PAGE, past_end] };
            assert!(PackedMatrix::from_file(format, rows, cols, &mapping, beyond).is_err(), "{format:?}");
            assert!(PackedMatrix::from_file(format, rows, cols + 1, &mapping, [PAGE, supers_at]).is_err());
        }
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn ggml_nibbles_pack_as_their_unpacked_values_do() {
        let mut random = random_numbers(7);
        for r in [0, 5, 15] {
            let block: Vec<u8> = (0..20).map(|_| random() as u8).collect();
            let (mut direct, mut unpacked) = ([[0u8; 64]; 4], [[0u8; 64]; 4]);
            pack_ggml_nibbles(block[4..].try_into().unwrap(), r, &mut direct);
            pack_nibbles(&blocks::linear_block(GgmlFormat::Q4_1, &block).q, r, &mut unpacked);
            assert_eq!(direct, unpacked, "row {r}");
        }
    }

    #[test]
    fn wrong_sizes_are_refused() {
        assert!(PackedMatrix::from_ggml(GgmlFormat::Q4_1, &[0; 20], 1, 16).is_err());
        assert!(PackedMatrix::from_ggml(GgmlFormat::Q4_1, &[0; 19], 1, 32).is_err());
        assert!(PackedMatrix::from_ggml(GgmlFormat::Q8_0, &[0; 34], 2, 32).is_err());
        assert!(
            PackedMatrix::from_ggml(GgmlFormat::Q4_K, &[0; 144 * 2], 1, 288).is_err(),
            "K-quant rows are whole super-blocks"
        );
        assert!(PackedMatrix::from_ggml(GgmlFormat::Q6_K, &[0; 209], 1, 256).is_err());
        assert!(
            PackedMatrix::from_ggml(GgmlFormat::Q4_K, &[], usize::MAX, 256).is_err(),
            "sizes that overflow are refused"
        );
    }
}
