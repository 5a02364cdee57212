//! `y = x · Wᵀ` for a repacked quantized `W`: the entry point of the kernels.

use super::activations::QuantizedActivations;
use super::cpu::Level;
use super::packed::{GgmlRows, PackedMatrix, TileQ8, Tiles, TILE_ROWS};
use super::{plain, pool};
use std::cell::RefCell;
use std::ops::Range;

/// Where a product's values go: `values[t · stride + row]`, rows past
/// `rows` (a last tile's padding) dropped. Threads write disjoint tiles.
pub(super) struct Output {
    values: *mut f32,
    stride: usize,
    rows: usize,
    tokens: usize,
}

// SAFETY: every (token, row group) is stored by exactly one thread.
unsafe impl Sync for Output {}

impl Output {
    /// Stores row group `g` of token `t`.
    pub(super) fn store(&self, t: usize, g: usize, values: &[f32; TILE_ROWS]) {
        let first = g * TILE_ROWS;
        assert!(t < self.tokens && first < self.rows, "token {t}, row group {g} outside the output");
        let n = TILE_ROWS.min(self.rows - first);
        // SAFETY: in bounds (checked above); no other thread writes these.
        unsafe { std::ptr::copy_nonoverlapping(values.as_ptr(), self.values.add(t * self.stride + first), n) }
    }

    /// The part of the output past its first `g` row groups: group `g` is its group 0.
    fn past_groups(&self, g: usize) -> Output {
        let first = g * TILE_ROWS;
        assert!(first < self.rows, "row group {g} outside the output");
        // SAFETY: `first < rows`, inside each token's part of the output.
        Output {
            values: unsafe { self.values.add(first) },
            stride: self.stride,
            rows: self.rows - first,
            tokens: self.tokens,
        }
    }
}

/// `out (m × rows) = x (m × cols) · Wᵀ`, at the CPU's best [`Level`], on
/// the [`pool::global`] threads.
pub fn matmul(w: &PackedMatrix, x: &[f32], m: usize, out: &mut [f32]) {
    matmul_stacked(&[w], x, m, out)
}

/// `out (m × Σ rows) = x (m × cols) · [W₀; W₁; …]ᵀ`: matrices of the same
/// width applied to the same activations (a layer's q, k and v projections,
/// say), which are quantized once, in one job for the threads. Row `r` of
/// `ws[i]` lands in column `r + Σ_{j<i} rows_j` of each token's output.
pub fn matmul_stacked(ws: &[&PackedMatrix], x: &[f32], m: usize, out: &mut [f32]) {
    thread_local! {
        static ACTIVATIONS: RefCell<QuantizedActivations> = RefCell::default();
    }
    let Some(first) = ws.first() else { return };
    ACTIVATIONS.with(|cell| {
        let mut acts = cell.borrow_mut();
        acts.quantize(x, m, first.cols);
        matmul_quantized_stacked(ws, &acts, out, Level::detected(), pool::global());
    })
}

/// [`matmul`] with activations already quantized, at a given level and on
/// a given pool.
pub fn matmul_quantized(
    w: &PackedMatrix,
    acts: &QuantizedActivations,
    out: &mut [f32],
    level: Level,
    pool: &pool::Pool,
) {
    matmul_quantized_stacked(&[w], acts, out, level, pool)
}

/// [`matmul_stacked`] with activations already quantized, at a given level
/// and on a given pool.
pub fn matmul_quantized_stacked(
    ws: &[&PackedMatrix],
    acts: &QuantizedActivations,
    out: &mut [f32],
    level: Level,
    pool: &pool::Pool,
) {
    let total_rows: usize = ws.iter().map(|w| w.rows).sum();
    assert_eq!(out.len(), acts.rows * total_rows, "output of {} values for {} × {total_rows}", out.len(), acts.rows);
    let mut first_group = 0;
    let mut first_row = 0;
    let parts: Vec<(Range<usize>, Output)> = ws
        .iter()
        .map(|w| {
            assert_eq!(acts.k, w.cols, "activations of {} values for a matrix of {} columns", acts.k, w.cols);
            // SAFETY (of the offset): `first_row < total_rows`, inside each token's output.
            let values = unsafe { out.as_mut_ptr().add(first_row) };
            let output = Output { values, stride: total_rows, rows: w.rows, tokens: acts.rows };
            let groups = first_group..first_group + w.row_groups();
            first_group = groups.end;
            first_row += w.rows;
            (groups, output)
        })
        .collect();
    pool.run(first_group, &|groups| {
        for (w, (own, output)) in ws.iter().zip(&parts) {
            let start = groups.start.max(own.start);
            let end = groups.end.min(own.end);
            if start < end {
                row_groups(w, start - own.start..end - own.start, acts, output, level);
            }
        }
    });
}

fn row_groups(w: &PackedMatrix, groups: Range<usize>, acts: &QuantizedActivations, out: &Output, level: Level) {
    if let Tiles::Q8InPlace(ggml) = &w.tiles {
        return in_place_q8(ggml, groups, acts, out, level);
    }
    #[cfg(target_arch = "x86_64")]
    {
        use super::{x86_avx2 as avx2, x86_avx512 as avx512};
        // SAFETY: `Level` is only this high when the CPU has the instructions.
        unsafe {
            match (&w.tiles, level) {
                (Tiles::Q40(t), Level::Avx512Vnni) => return avx512::q4_0(t, groups, acts, out),
                (Tiles::Q4(t), Level::Avx512Vnni) => return avx512::q4(t, groups, acts, out),
                (Tiles::Q5(t), Level::Avx512Vnni) => return avx512::q5(t, groups, acts, out),
                (Tiles::Q8(t), Level::Avx512Vnni) => return avx512::q8(t, groups, acts, out),
                (Tiles::Q4K(t), Level::Avx512Vnni) => return avx512::q4k(t.group(), groups, acts, out),
                (Tiles::Q5K(t), Level::Avx512Vnni) => return avx512::q5k(t.group(), groups, acts, out),
                (Tiles::Q6K(t), Level::Avx512Vnni) => return avx512::q6k(t.group(), groups, acts, out),
                (Tiles::Iq4Nl(t), Level::Avx512Vnni) => return avx512::iq4_nl(t, groups, acts, out),
                (Tiles::Iq4Xs(t), Level::Avx512Vnni) => return avx512::iq4_xs(t.group(), groups, acts, out),
                (Tiles::Q3K(t), Level::Avx512Vnni) => return avx512::q3k(t.group(), groups, acts, out),
                (Tiles::Q2K(t), Level::Avx512Vnni) => return avx512::q2k(t.group(), groups, acts, out),
                (Tiles::Q40(t), Level::Avx2) => return avx2::q4_0(t, groups, acts, out),
                (Tiles::Q4(t), Level::Avx2) => return avx2::q4(t, groups, acts, out),
                (Tiles::Q5(t), Level::Avx2) => return avx2::q5(t, groups, acts, out),
                (Tiles::Q8(t), Level::Avx2) => return avx2::q8(t, groups, acts, out),
                (Tiles::Q4K(t), Level::Avx2) => return avx2::q4k(t.group(), groups, acts, out),
                (Tiles::Q5K(t), Level::Avx2) => return avx2::q5k(t.group(), groups, acts, out),
                (Tiles::Q6K(t), Level::Avx2) => return avx2::q6k(t.group(), groups, acts, out),
                (Tiles::Iq4Nl(t), Level::Avx2) => return avx2::iq4_nl(t, groups, acts, out),
                (Tiles::Iq4Xs(t), Level::Avx2) => return avx2::iq4_xs(t.group(), groups, acts, out),
                (Tiles::Q3K(t), Level::Avx2) => return avx2::q3k(t.group(), groups, acts, out),
                (Tiles::Q2K(t), Level::Avx2) => return avx2::q2k(t.group(), groups, acts, out),
                _ => {}
            }
        }
    }
    match &w.tiles {
        Tiles::Q40(t) => plain::q4(t, groups, acts, out),
        Tiles::Q4(t) => plain::q4(t, groups, acts, out),
        Tiles::Q5(t) => plain::q5(t, groups, acts, out),
        Tiles::Q8(t) => plain::q8(t, groups, acts, out),
        Tiles::Q4K(t) => plain::q4k(t.group(), groups, acts, out),
        Tiles::Q5K(t) => plain::q5k(t.group(), groups, acts, out),
        Tiles::Q6K(t) => plain::q6k(t.group(), groups, acts, out),
        Tiles::Iq4Nl(t) => plain::iq4_nl(t, groups, acts, out),
        Tiles::Iq4Xs(t) => plain::iq4_xs(t.group(), groups, acts, out),
        Tiles::Q3K(t) => plain::q3k(t.group(), groups, acts, out),
        Tiles::Q2K(t) => plain::q2k(t.group(), groups, acts, out),
        Tiles::Q8InPlace(_) => unreachable!("handled above"),
    }
}

/// Row groups of a Q8_0 matrix read in place. For a few activation rows
/// (decode), each block's tile is made in registers as it is multiplied;
/// for more, each group's tiles once into a buffer of the thread's, which
/// the tile kernel then reads for every row. A short last group goes the
/// buffer's way.
fn in_place_q8(ggml: &GgmlRows, groups: Range<usize>, acts: &QuantizedActivations, out: &Output, level: Level) {
    thread_local! {
        static TILES: RefCell<Vec<TileQ8>> = const { RefCell::new(Vec::new()) };
    }
    let blocks = acts.blocks_per_row();
    for g in groups {
        let out = out.past_groups(g);
        #[cfg(target_arch = "x86_64")]
        if let (Some(group), true) = (ggml.full_group(g), acts.rows <= IN_REGISTERS_UP_TO) {
            use super::{x86_avx2 as avx2, x86_avx512 as avx512};
            let group = |_| group;
            // SAFETY: `Level` is only this high when the CPU has the instructions.
            match level {
                Level::Avx512Vnni => {
                    unsafe { avx512::q8_in_place(group, 0..1, acts, &out) };
                    continue;
                }
                Level::Avx2 => {
                    unsafe { avx2::q8_in_place(group, 0..1, acts, &out) };
                    continue;
                }
                Level::Plain => {}
            }
        }
        TILES.with(|cell| {
            let mut buffer = cell.borrow_mut();
            if buffer.len() < blocks {
                buffer.resize(blocks, TileQ8::ZERO);
            }
            let tiles = &mut buffer[..blocks];
            ggml.fill_group(g, tiles, level >= Level::Avx2);
            q8_tiles(tiles, acts, &out, level);
        });
    }
}

/// Activation rows up to which [`in_place_q8`] makes tiles in registers.
const IN_REGISTERS_UP_TO: usize = 4;

/// Row group 0 of Q8_0 `tiles` at `level`.
fn q8_tiles(tiles: &[TileQ8], acts: &QuantizedActivations, out: &Output, level: Level) {
    #[cfg(target_arch = "x86_64")]
    {
        use super::{x86_avx2 as avx2, x86_avx512 as avx512};
        // SAFETY: `Level` is only this high when the CPU has the instructions.
        match level {
            Level::Avx512Vnni => return unsafe { avx512::q8(tiles, 0..1, acts, out) },
            Level::Avx2 => return unsafe { avx2::q8(tiles, 0..1, acts, out) },
            Level::Plain => {}
        }
    }
    plain::q8(tiles, 0..1, acts, out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packed::tests::random_ggml;
    use crate::packed::GgmlFormat;

    fn random_activations(m: usize, k: usize, seed: u32) -> Vec<f32> {
        let mut state = seed | 1;
        (0..m * k)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 17;
                state ^= state << 5;
                (state % 4001) as f32 / 1000.0 - 2.0
            })
            .collect()
    }

    /// Every level gives bit-identical results, and they agree with a
    /// float product of the dequantized matrices to quantization accuracy.
    #[test]
    fn every_level_equals_the_plain_kernel_and_the_float_product() {
        let pools = [pool::Pool::new(1), pool::Pool::new(3)];
        for dtype in GgmlFormat::ALL {
            let block = dtype.block_values();
            for (rows, blocks, m) in [(16, 1, 1), (1, 2, 3), (37, 3, 5), (70, 18 * 32 / block, 2), (33, 5, 9)] {
                let cols = blocks * block;
                let (bytes, dense) = random_ggml(dtype, rows, cols, (rows * cols) as u64);
                let w = PackedMatrix::from_ggml(dtype, &bytes, rows, cols).unwrap();
                let x = random_activations(m, cols, (rows + m) as u32);
                let mut acts = QuantizedActivations::default();
                acts.quantize(&x, m, cols);
                let mut reference = vec![0f32; m * rows];
                matmul_quantized(&w, &acts, &mut reference, Level::Plain, &pools[0]);
                for level in Level::all_supported() {
                    for pool in &pools {
                        let mut out = vec![f32::NAN; m * rows];
                        matmul_quantized(&w, &acts, &mut out, level, pool);
                        assert_eq!(
                            out,
                            reference,
                            "{dtype:?} {rows}×{cols}, {m} rows, {level:?}, {} threads",
                            pool.threads()
                        );
                    }
                }
                for t in 0..m {
                    for r in 0..rows {
                        let exact: f32 = (0..cols).map(|c| x[t * cols + c] * dense[r * cols + c]).sum();
                        let scale: f32 = (0..cols).map(|c| (x[t * cols + c] * dense[r * cols + c]).abs()).sum();
                        let got = reference[t * rows + r];
                        assert!(
                            (got - exact).abs() <= 0.02 * scale + 1e-4,
                            "{dtype:?} token {t} row {r}: {got} vs {exact}"
                        );
                    }
                }
            }
        }
    }

    /// A Q8_0 matrix read where it lies multiplies and dequantizes as its
    /// repacked tiles do, to the bit, at every level, with few activation
    /// rows (tiles made in registers) and many (in a buffer); one that does
    /// not lie in its buffer is refused.
    #[test]
    fn q8_read_in_place_equals_its_repacked_tiles() {
        use std::sync::Arc;
        let pools = [pool::Pool::new(1), pool::Pool::new(3)];
        let q8 = GgmlFormat::Q8_0;
        for (rows, blocks, m) in [(16, 1, 1), (1, 2, 3), (37, 3, 5), (70, 18, 2), (33, 5, 9), (48, 7, 4), (64, 4, 1)] {
            let cols = blocks * 32;
            let (bytes, _) = random_ggml(q8, rows, cols, (rows * cols + 1) as u64);
            let tiles = PackedMatrix::from_ggml(q8, &bytes, rows, cols).unwrap();
            // After a few odd bytes, as a tensor lies in its file.
            let mut file = vec![7u8; 101];
            file.extend_from_slice(&bytes);
            let file: Arc<dyn AsRef<[u8]> + Send + Sync> = Arc::new(file);
            let in_place = PackedMatrix::in_place(q8, file.clone(), 101, rows, cols).unwrap();
            assert!(in_place.is_in_place() && !tiles.is_in_place());
            assert_eq!(in_place.dequantize(), tiles.dequantize(), "{rows}×{cols}");
            assert!(PackedMatrix::in_place(q8, file.clone(), 102, rows, cols).is_err(), "past the end");
            let x = random_activations(m, cols, (rows * m) as u32);
            let mut acts = QuantizedActivations::default();
            acts.quantize(&x, m, cols);
            for level in Level::all_supported() {
                for pool in &pools {
                    let mut expected = vec![f32::NAN; m * rows];
                    matmul_quantized(&tiles, &acts, &mut expected, level, pool);
                    let mut got = vec![f32::NAN; m * rows];
                    matmul_quantized(&in_place, &acts, &mut got, level, pool);
                    assert_eq!(got, expected, "{rows}×{cols}, {m} rows, {level:?}, {} threads", pool.threads());
                }
            }
        }
        let (bytes, _) = random_ggml(GgmlFormat::Q4_0, 16, 32, 1);
        assert!(PackedMatrix::in_place(GgmlFormat::Q4_0, Arc::new(bytes), 0, 16, 32).is_err(), "Q4_0 is repacked");
    }

    /// A row's product does not depend on the other rows it is multiplied with.
    #[test]
    fn each_row_is_the_same_whatever_rows_come_with_it() {
        for format in [GgmlFormat::Q4_1, GgmlFormat::Q4_K, GgmlFormat::Q6_K, GgmlFormat::Q5_0] {
            let (rows, cols) = (40, 512);
            let w = PackedMatrix::from_ggml(format, &random_ggml(format, rows, cols, 5).0, rows, cols).unwrap();
            let x = random_activations(53, cols, 3);
            let mut all = vec![0f32; 53 * rows];
            matmul(&w, &x, 53, &mut all);
            for m in [1, 2, 3, 20, 33] {
                let mut some = vec![0f32; m * rows];
                matmul(&w, &x[..m * cols], m, &mut some);
                assert_eq!(&some[..], &all[..m * rows], "{format:?}, the first {m} rows alone");
            }
        }
    }

    /// Stacked matrices give each matrix's own product, side by side.
    #[test]
    fn stacked_products_equal_the_separate_ones_side_by_side() {
        let pools = [pool::Pool::new(1), pool::Pool::new(2)];
        let shapes = [
            (GgmlFormat::Q4_1, 37),
            (GgmlFormat::Q8_0, 16),
            (GgmlFormat::Q4_K, 5),
            (GgmlFormat::Q6_K, 17),
            (GgmlFormat::Q5_0, 3),
        ];
        let (cols, m) = (256, 3);
        let ws: Vec<PackedMatrix> = shapes
            .iter()
            .map(|&(dtype, rows)| {
                PackedMatrix::from_ggml(dtype, &random_ggml(dtype, rows, cols, rows as u64).0, rows, cols).unwrap()
            })
            .collect();
        let x = random_activations(m, cols, 11);
        let mut acts = QuantizedActivations::default();
        acts.quantize(&x, m, cols);
        let total: usize = ws.iter().map(|w| w.rows).sum();
        for level in Level::all_supported() {
            for pool in &pools {
                let mut stacked = vec![f32::NAN; m * total];
                matmul_quantized_stacked(&ws.iter().collect::<Vec<_>>(), &acts, &mut stacked, level, pool);
                let mut column = 0;
                for w in &ws {
                    let mut own = vec![0f32; m * w.rows];
                    matmul_quantized(w, &acts, &mut own, level, pool);
                    for t in 0..m {
                        assert_eq!(
                            &stacked[t * total + column..][..w.rows],
                            &own[t * w.rows..][..w.rows],
                            "{level:?}, token {t}, matrix at column {column}"
                        );
                    }
                    column += w.rows;
                }
            }
        }
    }
}
