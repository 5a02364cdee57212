//! Weight matrices in VRAM, stored as the file stores them, and their
//! products with activations.

use crate::batch::Batch;
use crate::buffer::GpuTensor;
use crate::device::Gpu;
use crate::shader::Kernel;
use anyhow::{bail, Result};
use cake_kernels::ggml_blocks::GgmlFormat;

/// How a matrix's values are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WeightFormat {
    F32,
    F16,
    Bf16,
    /// A GGML block format (Q4_0 … Q6_K, IQ4_NL, IQ4_XS).
    Ggml(GgmlFormat),
}

impl WeightFormat {
    pub fn name(self) -> &'static str {
        match self {
            Self::F32 => "F32",
            Self::F16 => "F16",
            Self::Bf16 => "BF16",
            Self::Ggml(format) => format.name(),
        }
    }

    /// Bytes of one stored row of `cols` values, or why such rows cannot be.
    pub fn row_bytes(self, cols: usize) -> Result<usize> {
        Ok(match self {
            Self::F32 => 4 * cols,
            Self::F16 | Self::Bf16 => 2 * cols,
            Self::Ggml(format) => {
                let values = format.block_values();
                if !cols.is_multiple_of(values) {
                    bail!("{} rows hold whole blocks of {values} values, not {cols}", format.name());
                }
                cols / values * format.block_bytes()
            }
        })
    }
}

/// A part of a matrix's rows in one buffer (a buffer's size is capped).
#[derive(Debug)]
struct RowSpan {
    buffer: wgpu::Buffer,
    first_row: usize,
    rows: usize,
}

/// A weight matrix `(rows, cols)` in VRAM: `y = W x` for each activation row.
#[derive(Debug)]
pub struct GpuMatrix {
    pub format: WeightFormat,
    pub rows: usize,
    pub cols: usize,
    spans: Vec<RowSpan>,
}

impl GpuMatrix {
    /// Bytes of VRAM it holds.
    pub fn bytes(&self) -> u64 {
        self.spans.iter().map(|s| s.buffer.size()).sum()
    }
}

impl Gpu {
    /// Copies a matrix's stored bytes (row-major, as in the file) into VRAM.
    pub fn upload_matrix(
        &self,
        name: &str,
        format: WeightFormat,
        rows: usize,
        cols: usize,
        data: &[u8],
    ) -> Result<GpuMatrix> {
        let row_bytes = format.row_bytes(cols)?;
        if rows.checked_mul(row_bytes) != Some(data.len()) {
            bail!("{name}: {} bytes for {rows} rows of {cols} {} values", data.len(), format.name());
        }
        if row_bytes as u64 > self.info().max_binding_bytes.min(u32::MAX as u64 / 2) {
            bail!("{name}: one row of {row_bytes} bytes is more than a GPU buffer may hold");
        }
        // Whole words per span (two half-precision rows make one when the
        // width is odd); offsets inside a span fit in 32 bits.
        let limit = self.info().max_binding_bytes.min(1 << 31) as usize;
        let per_span = (limit / row_bytes / 2 * 2).max(1);
        let mut spans = Vec::new();
        let mut first_row = 0;
        while first_row < rows {
            let count = per_span.min(rows - first_row);
            let bytes = &data[first_row * row_bytes..(first_row + count) * row_bytes];
            spans.push(RowSpan { buffer: self.storage_with(name, bytes)?, first_row, rows: count });
            first_row += count;
        }
        Ok(GpuMatrix { format, rows, cols, spans })
    }
}

impl Batch<'_> {
    /// `y = x Wᵀ` for `tokens` rows of `x` `(tokens, cols)`: `y` is
    /// `(tokens, rows)`.
    pub fn matmul(&mut self, w: &GpuMatrix, x: &GpuTensor, tokens: usize, y: &GpuTensor) -> Result<()> {
        if x.len() < tokens * w.cols || y.len() < tokens * w.rows {
            bail!(
                "a product of a {}×{} matrix with {tokens} rows got {} inputs and room for {} outputs",
                w.rows,
                w.cols,
                x.len(),
                y.len()
            );
        }
        let row_bytes = w.format.row_bytes(w.cols)? as u32;
        let token_tiles = tokens.div_ceil(4) as u32;
        for span in &w.spans {
            let params =
                [span.rows as u32, w.cols as u32, tokens as u32, row_bytes, w.rows as u32, span.first_row as u32];
            self.dispatch(
                Kernel::Matmul(w.format),
                &[&span.buffer, &x.buffer, &y.buffer],
                &params,
                span.rows as u32,
                token_tiles,
            );
        }
        Ok(())
    }
}
