//! Q8_0 matrices multiplied where they lie, in the model file's mapped
//! pages, instead of repacked at load.
//!
//! A [`TileQ8`] holds a Q8_0 block's bytes of 16 rows rearranged, nothing
//! unpacked: byte `4r + i` of `qs[j]` is byte `4j + i` of row `r`'s block.
//! So a row group's tiles can be made as they are used, a transpose of
//! 16 × 8 four-byte words per block: in registers, block by block, when a
//! few activation rows are multiplied ([`Q8Group`]), or once per group into
//! a small buffer of the thread's when many are ([`GgmlRows::fill_group`]).
//! The load then touches no fresh memory and writes no tile files (a first
//! load of a 1B Q8_0 file took 0.8–1.6 s repacking against llama.cpp's
//! 0.2–0.35 s), the file's pages are shared with the system's file cache,
//! and the products are bit for bit those of repacked tiles.

use super::{fill_q8, GgmlFormat, Source, TileQ8, TILE_ROWS};
use anyhow::Result;
use std::sync::Arc;

/// Bytes of a Q8_0 block: an f16 scale, then 32 signed bytes.
const BLOCK_BYTES: usize = 34;

/// A Q8_0 `rows × cols` matrix's GGML bytes, row by row, kept where they
/// lie (a mapped file, or a buffer the matrix owns).
pub struct GgmlRows {
    owner: Arc<dyn AsRef<[u8]> + Send + Sync>,
    start: usize,
    len: usize,
    rows: usize,
    blocks: usize,
}

impl GgmlRows {
    /// The `rows × cols` Q8_0 matrix at byte `start` of `owner`.
    pub(super) fn new(
        owner: Arc<dyn AsRef<[u8]> + Send + Sync>,
        start: usize,
        rows: usize,
        cols: usize,
    ) -> Result<Self> {
        let all = (*owner).as_ref();
        let len = rows
            .checked_mul(cols / GgmlFormat::Q8_0.block_values())
            .and_then(|blocks| blocks.checked_mul(BLOCK_BYTES))
            .filter(|len| start.checked_add(*len).is_some_and(|end| end <= all.len()));
        let len = len.ok_or_else(|| {
            anyhow::anyhow!("a {rows} × {cols} Q8_0 matrix at byte {start} does not lie in {} bytes", all.len())
        })?;
        Source::checked(GgmlFormat::Q8_0, &all[start..start + len], rows, cols)?;
        Ok(Self { owner, start, len, rows, blocks: cols / GgmlFormat::Q8_0.block_values() })
    }

    /// The GGML bytes.
    pub fn bytes(&self) -> &[u8] {
        &(*self.owner).as_ref()[self.start..self.start + self.len]
    }

    /// Row group `g`, a full one (16 rows) as it lies, else `None`.
    pub(crate) fn full_group(&self, g: usize) -> Option<Q8Group<'_>> {
        let row_bytes = self.blocks * BLOCK_BYTES;
        let first = g * TILE_ROWS;
        let bytes = self.bytes().get(first * row_bytes..(first + TILE_ROWS) * row_bytes)?;
        (first + TILE_ROWS <= self.rows).then_some(Q8Group { bytes, row_bytes, blocks: self.blocks })
    }

    /// Row group `g`'s tiles, into `tiles` (one per block of a row).
    pub(crate) fn fill_group(&self, g: usize, tiles: &mut [TileQ8], simd: bool) {
        let source = Source { data: self.bytes(), format: GgmlFormat::Q8_0, rows: self.rows, blocks: self.blocks };
        assert_eq!(tiles.len(), self.blocks, "tiles for {} blocks", self.blocks);
        let full = self.full_group(g);
        #[cfg(target_arch = "x86_64")]
        if let (Some(group), true) = (full, simd) {
            // SAFETY: `simd` is only set where the CPU has AVX2.
            return unsafe { fill_full_group_avx2(group, tiles) };
        }
        let _ = simd;
        if full.is_none() {
            // Padding rows read as zero, as in repacked tiles.
            tiles.fill(TileQ8::ZERO);
        }
        fill_q8(&source, g, tiles);
    }
}

/// A row group of 16 Q8_0 rows where they lie, for the kernels that make
/// each block's tile as they multiply it (few activation rows: a whole
/// group's tiles would not stay in the caches between being made and read).
#[derive(Clone, Copy)]
pub(crate) struct Q8Group<'a> {
    bytes: &'a [u8],
    row_bytes: usize,
    blocks: usize,
}

impl Q8Group<'_> {
    pub(crate) fn blocks(&self) -> usize {
        self.blocks
    }

    /// Block `b` of row `r`: its scale, then 32 bytes.
    #[inline(always)]
    pub(crate) fn block(&self, r: usize, b: usize) -> *const u8 {
        debug_assert!(r < TILE_ROWS && b < self.blocks);
        // SAFETY: inside the group's bytes (16 rows of `blocks` blocks).
        unsafe { self.bytes.as_ptr().add(r * self.row_bytes + b * BLOCK_BYTES) }
    }

    /// Asks for the next row group's bytes to be brought into the caches,
    /// the share of them that goes with block `b` of this one: the 16 rows
    /// a tile is made of are 16 streams at once, which the hardware's
    /// prefetchers do not follow well (decode products ran 2× slower than
    /// from tiles without this). Past the matrix's end it asks for nothing
    /// that matters: a prefetch never faults.
    #[inline(always)]
    pub(crate) fn prefetch_next(&self, b: usize) {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T1};
            const SHARE: usize = TILE_ROWS * BLOCK_BYTES;
            let next = self.bytes.as_ptr().wrapping_add(TILE_ROWS * self.row_bytes);
            // The lines that start in this block's share: 8 or 9 of them.
            let start = (next as usize + b * SHARE).next_multiple_of(64) - next as usize;
            for line in (start..(b + 1) * SHARE).step_by(64) {
                // SAFETY: a hint; no memory is read.
                unsafe { _mm_prefetch::<_MM_HINT_T1>(next.wrapping_add(line) as *const i8) };
            }
        }
        let _ = b;
    }

    /// The scales of block `b` of the 16 rows.
    #[inline(always)]
    pub(crate) fn scales(&self, b: usize) -> [half::f16; TILE_ROWS] {
        // SAFETY: the first two bytes of a block inside the group.
        std::array::from_fn(|r| half::f16::from_bits(unsafe { (self.block(r, b) as *const u16).read_unaligned() }))
    }

    /// The 32 bytes of block `b` of rows `8h..8h + 8`, as 8 words of each
    /// row transposed: `out[j]` holds word `j` of the 8 rows (the layout of
    /// half a [`TileQ8`]).
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    pub(crate) unsafe fn half_words(&self, b: usize, h: usize) -> [std::arch::x86_64::__m256i; 8] {
        use std::arch::x86_64::*;
        transpose_words(std::array::from_fn(|i| _mm256_loadu_si256(self.block(8 * h + i, b).add(2) as *const _)))
    }
}

/// [`fill_q8`] for a group of 16 rows, with AVX2: per block, the two halves
/// of 8 rows each loaded as 8 × 8 words and transposed.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn fill_full_group_avx2(group: Q8Group, tiles: &mut [TileQ8]) {
    use std::arch::x86_64::*;
    for (b, tile) in tiles.iter_mut().enumerate() {
        group.prefetch_next(b);
        for h in 0..2 {
            for (j, words) in group.half_words(b, h).into_iter().enumerate() {
                _mm256_storeu_si256(tile.qs[j].as_mut_ptr().add(32 * h) as *mut _, words);
            }
        }
        tile.d = group.scales(b);
    }
}

/// Rows `a[r]` of 8 four-byte words in, words `j` of every row out
/// (`out[j]` holds word `j` of rows 0..8).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn transpose_words(a: [std::arch::x86_64::__m256i; 8]) -> [std::arch::x86_64::__m256i; 8] {
    use std::arch::x86_64::*;
    // Pairs of rows interleaved: words 0,1 | 4,5 and 2,3 | 6,7 of each pair.
    let pair = |x, y| (_mm256_unpacklo_epi32(x, y), _mm256_unpackhi_epi32(x, y));
    let (t0, t1) = pair(a[0], a[1]);
    let (t2, t3) = pair(a[2], a[3]);
    let (t4, t5) = pair(a[4], a[5]);
    let (t6, t7) = pair(a[6], a[7]);
    // Four rows: u0 holds word 0 of rows 0..4 | word 4, u1 words 1 | 5, …
    let u = [
        _mm256_unpacklo_epi64(t0, t2),
        _mm256_unpackhi_epi64(t0, t2),
        _mm256_unpacklo_epi64(t1, t3),
        _mm256_unpackhi_epi64(t1, t3),
    ];
    let v = [
        _mm256_unpacklo_epi64(t4, t6),
        _mm256_unpackhi_epi64(t4, t6),
        _mm256_unpacklo_epi64(t5, t7),
        _mm256_unpackhi_epi64(t5, t7),
    ];
    [
        _mm256_permute2x128_si256(u[0], v[0], 0x20),
        _mm256_permute2x128_si256(u[1], v[1], 0x20),
        _mm256_permute2x128_si256(u[2], v[2], 0x20),
        _mm256_permute2x128_si256(u[3], v[3], 0x20),
        _mm256_permute2x128_si256(u[0], v[0], 0x31),
        _mm256_permute2x128_si256(u[1], v[1], 0x31),
        _mm256_permute2x128_si256(u[2], v[2], 0x31),
        _mm256_permute2x128_si256(u[3], v[3], 0x31),
    ]
}
