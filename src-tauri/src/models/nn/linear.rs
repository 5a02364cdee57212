//! A linear projection over a dense or GGML-quantized weight, with optional bias.

use super::cpu_values::with_cpu_values;
use crate::models::fp8::{tensor_bytes, Fp8Matrix};
#[cfg(test)]
use crate::models::weights::MappedFloat;
use crate::models::weights::{MappedMatrix, MappedValues, MatrixWeight, Weights};
use anyhow::Context;
use anyhow::Result;
use cake_kernels::dense::{matmul_dense, rows_per_call};
use cake_kernels::packed::PackedMatrix;
use candle_core::quantized::QMatMul;
use candle_core::{DType, Module, Tensor};
use std::sync::Arc;

/// `y = x Wᵀ + b`, with `W` stored `(out, in)` as checkpoints store it.
pub struct Linear {
    weight: Projection,
    bias: Option<Tensor>,
}

enum Projection {
    Dense(Tensor),
    Quantized(QMatMul),
    /// Repacked for Cake's own kernels.
    Packed(Arc<PackedMatrix>),
    /// Dequantized to the activations' dtype for each product.
    Fp8(Arc<Fp8Matrix>),
    /// f32, f16 or bf16 read where it lies in a mapped file.
    Mapped(Arc<MappedMatrix>),
}

impl From<MatrixWeight> for Projection {
    fn from(weight: MatrixWeight) -> Self {
        match weight {
            MatrixWeight::Dense(t) => Self::Dense(t),
            MatrixWeight::Quantized(q) => Self::Quantized(QMatMul::QTensor(q)),
            MatrixWeight::Packed(p) => Self::Packed(p),
            MatrixWeight::Fp8(m) => Self::Fp8(m),
            MatrixWeight::Mapped(m) => Self::Mapped(m),
        }
    }
}

impl Linear {
    /// Loads `{prefix}.weight` of shape `(out, in)` and, if `bias`, `{prefix}.bias`.
    pub fn load(weights: &Weights, prefix: &str, in_dim: usize, out_dim: usize, bias: bool) -> Result<Self> {
        let weight = Self::projection(weights.matrix(&format!("{prefix}.weight"), &[out_dim, in_dim])?)?;
        let bias = if bias { Some(weights.dense(&format!("{prefix}.bias"), &[out_dim])?) } else { None };
        Ok(Self { weight, bias })
    }

    /// A projection sharing an already-loaded matrix (tied LM head).
    pub fn from_matrix(weight: MatrixWeight) -> Result<Self> {
        Ok(Self { weight: Self::projection(weight)?, bias: None })
    }

    fn projection(weight: MatrixWeight) -> Result<Projection> {
        Ok(match weight {
            MatrixWeight::Quantized(q) => Projection::Quantized(QMatMul::from_arc(q)?),
            other => other.into(),
        })
    }

    /// Bytes of weights held (a tied head counts its shared matrix too).
    pub fn weight_bytes(&self) -> usize {
        let matrix = match &self.weight {
            Projection::Dense(w) => tensor_bytes(w),
            Projection::Quantized(QMatMul::QTensor(q)) => q.storage_size_in_bytes(),
            Projection::Quantized(QMatMul::Tensor(w) | QMatMul::TensorF16(w)) => tensor_bytes(w),
            Projection::Packed(p) => p.bytes(),
            Projection::Fp8(m) => m.bytes(),
            Projection::Mapped(m) => m.bytes(),
        };
        matrix + self.bias.as_ref().map_or(0, tensor_bytes)
    }

    /// Applies the projection to `x` of shape `(..., in)`.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let y = match &self.weight {
            Projection::Dense(w) => dense_product(x, w)?,
            Projection::Quantized(q) => q.forward(x)?,
            Projection::Packed(p) => packed_product(x, p)?,
            Projection::Fp8(m) => dense_product(x, &m.dequantize(x.dtype())?)?,
            Projection::Mapped(m) => mapped_product(x, m)?,
        };
        Ok(match &self.bias {
            Some(b) => y.broadcast_add(b)?,
            None => y,
        })
    }
}

/// Applies projections of the same input that are all repacked for Cake's
/// kernels in one stacked product (see [`packed_products`]): each one's
/// `x Wᵀ + b`, in order. `None` when some projection is stored otherwise.
pub fn forward_stacked(parts: &[Linear], x: &Tensor) -> Result<Option<Vec<Tensor>>> {
    let matrices: Option<Vec<&PackedMatrix>> = parts
        .iter()
        .map(|p| match &p.weight {
            Projection::Packed(w) => Some(&**w),
            _ => None,
        })
        .collect();
    let Some(matrices) = matrices else { return Ok(None) };
    let pieces = packed_products(x, &matrices)?;
    let biased = pieces.into_iter().zip(parts).map(|(y, part)| match &part.bias {
        Some(b) => Ok(y.broadcast_add(b)?),
        None => Ok(y),
    });
    Ok(Some(biased.collect::<Result<_>>()?))
}

/// `x Wᵀ` for a dense `W (out, in)` and `x (..., in)`. A few rows of f32
/// activations (decoding) against f32 weights take Cake's streaming kernel,
/// the rest candle's GEMM.
fn dense_product(x: &Tensor, w: &Tensor) -> Result<Tensor> {
    let dims = x.dims().to_vec();
    let (last, lead) = dims.split_last().expect("activations have a last dim");
    let rows: usize = lead.iter().product();
    let mut out_dims = lead.to_vec();
    out_dims.push(w.dim(0)?);
    let (out_width, width) = w.dims2()?;
    if rows <= cake_kernels::dense::MAX_ROWS && x.dtype() == DType::F32 {
        let x = x.contiguous()?;
        let mut out = vec![0f32; rows * out_width];
        let streamed = with_cpu_values(w, |w_values: &[f32]| {
            with_cpu_values(&x, |x_values| {
                let (level, pool) = (cake_kernels::cpu::Level::detected(), cake_kernels::pool::global());
                matmul_dense(w_values, out_width, width, x_values, rows, &mut out, level, pool);
            })
        });
        if streamed.flatten().is_some() {
            return Ok(Tensor::from_vec(out, out_dims, x.device())?);
        }
    }
    let y = x.reshape((rows, *last))?.matmul(&w.t()?)?;
    Ok(y.reshape(out_dims)?)
}

/// `x Wᵀ` for an f32, f16 or bf16 `W (out, in)` in a mapped file and `x (..., in)`, in
/// f32, on Cake's streaming kernel, [`rows_per_call`] rows
/// of `x` at a time.
fn mapped_product(x: &Tensor, w: &MappedMatrix) -> Result<Tensor> {
    let dims = x.dims().to_vec();
    let (last, lead) = dims.split_last().expect("activations have a last dim");
    anyhow::ensure!(*last == w.cols, "activations of width {last} for a matrix of {} columns", w.cols);
    let rows: usize = lead.iter().product();
    let x = x.to_dtype(DType::F32)?.contiguous()?;
    let mut out = vec![0f32; rows * w.rows];
    let (level, pool) = (cake_kernels::cpu::Level::detected(), cake_kernels::pool::global());
    let max = match w.values() {
        MappedValues::F32(_) => rows_per_call::<f32>(level),
        MappedValues::F16(_) => rows_per_call::<half::f16>(level),
        MappedValues::BF16(_) => rows_per_call::<half::bf16>(level),
    };
    with_cpu_values(&x, |values| {
        for (chunk, out) in values.chunks(max * w.cols).zip(out.chunks_mut(max * w.rows)) {
            let m = chunk.len() / w.cols;
            match w.values() {
                MappedValues::F32(weights) => matmul_dense(weights, w.rows, w.cols, chunk, m, out, level, pool),
                MappedValues::F16(weights) => matmul_dense(weights, w.rows, w.cols, chunk, m, out, level, pool),
                MappedValues::BF16(weights) => matmul_dense(weights, w.rows, w.cols, chunk, m, out, level, pool),
            }
        }
    })
    .context("mapped f32 weights multiply CPU activations only")?;
    let mut out_dims = lead.to_vec();
    out_dims.push(w.rows);
    Ok(Tensor::from_vec(out, out_dims, x.device())?)
}

/// `x Wᵀ` for a repacked quantized `W (out, in)` and `x (..., in)`, in f32.
fn packed_product(x: &Tensor, w: &PackedMatrix) -> Result<Tensor> {
    Ok(packed_products(x, &[w])?.pop().expect("one product"))
}

/// `x Wᵢᵀ` for each repacked `Wᵢ (outᵢ, in)` and `x (..., in)`, in f32, as
/// one stacked product: the activations are quantized once and the threads
/// take one job.
fn packed_products(x: &Tensor, matrices: &[&PackedMatrix]) -> Result<Vec<Tensor>> {
    let dims = x.dims().to_vec();
    let (last, lead) = dims.split_last().expect("activations have a last dim");
    if let Some(w) = matrices.iter().find(|w| w.cols != *last) {
        anyhow::bail!("activations of width {last} for a matrix of {} columns", w.cols);
    }
    let rows: usize = lead.iter().product();
    let total: usize = matrices.iter().map(|w| w.rows).sum();
    let x = x.to_dtype(DType::F32)?.contiguous()?;
    let mut out = vec![0f32; rows * total];
    with_cpu_values(&x, |values| cake_kernels::matmul::matmul_stacked(matrices, values, rows, &mut out))
        .context("repacked quantized weights multiply CPU activations only")?;
    let piece = |values: Vec<f32>, width: usize| {
        let mut piece_dims = lead.to_vec();
        piece_dims.push(width);
        Tensor::from_vec(values, piece_dims, x.device())
    };
    if let [w] = matrices {
        return Ok(vec![piece(out, w.rows)?]);
    }
    let mut column = 0;
    let mut pieces = Vec::with_capacity(matrices.len());
    for w in matrices {
        let mut values = Vec::with_capacity(rows * w.rows);
        for token in out.chunks_exact(total) {
            values.extend_from_slice(&token[column..column + w.rows]);
        }
        column += w.rows;
        pieces.push(piece(values, w.rows)?);
    }
    Ok(pieces)
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;
    use std::io::Write;

    /// A mapped f32, f16 or bf16 matrix gives candle's product of its values, for
    /// a decode row and for prompts longer than one chunk of the streaming
    /// kernel.
    #[test]
    fn mapped_weights_multiply_like_candle_at_any_prompt_length() {
        let (rows, cols) = (37, 64);
        for float in [MappedFloat::F32, MappedFloat::F16, MappedFloat::BF16] {
            let exact: Vec<f32> = (0..rows * cols).map(|i| ((i * 7919 % 263) as f32 - 131.0) / 97.0).collect();
            let mut file = tempfile::tempfile().unwrap();
            file.write_all(&[0u8; 32]).unwrap();
            let mut values = Vec::new();
            for &v in &exact {
                let (bytes, stored) = match float {
                    MappedFloat::F32 => (v.to_le_bytes().to_vec(), v),
                    MappedFloat::F16 => {
                        (half::f16::from_f32(v).to_le_bytes().to_vec(), half::f16::from_f32(v).to_f32())
                    }
                    MappedFloat::BF16 => {
                        (half::bf16::from_f32(v).to_le_bytes().to_vec(), half::bf16::from_f32(v).to_f32())
                    }
                };
                file.write_all(&bytes).unwrap();
                values.push(stored);
            }
            let map = Arc::new(unsafe { memmap2::Mmap::map(&file) }.unwrap());
            assert!(MappedMatrix::new(map.clone(), 1, rows, cols, float).is_none(), "misaligned data is refused");
            assert!(
                MappedMatrix::new(map.clone(), 32, rows + 1, cols, float).is_none(),
                "data past the end is refused"
            );
            let matrix = MappedMatrix::new(map, 32, rows, cols, float).unwrap();
            let mapped = Linear::from_matrix(MatrixWeight::Mapped(Arc::new(matrix))).unwrap();
            let dense = Tensor::from_vec(values, (rows, cols), &Device::Cpu).unwrap();
            for tokens in [1, 5, cake_kernels::dense::MAX_ROWS + 7, 2 * cake_kernels::dense::MAX_ROWS] {
                let x: Vec<f32> = (0..tokens * cols).map(|i| ((i * 104_729 % 311) as f32 - 155.0) / 201.0).collect();
                // Prompts against bf16 weights may be multiplied in bf16
                // (all these tokens in one call: `rows_per_call`).
                let level = cake_kernels::cpu::Level::detected();
                let in_bf16 = float == MappedFloat::BF16 && cake_kernels::dense::rounds_bf16_prompts(level, tokens);
                let x_used: Vec<f32> =
                    if in_bf16 { x.iter().map(|&v| half::bf16::from_f32(v).to_f32()).collect() } else { x.clone() };
                let x = Tensor::from_vec(x, (1, tokens, cols), &Device::Cpu).unwrap();
                let x_used = Tensor::from_vec(x_used, (1, tokens, cols), &Device::Cpu).unwrap();
                let ours = mapped.forward(&x).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap();
                let theirs = x_used
                    .broadcast_matmul(&dense.t().unwrap())
                    .unwrap()
                    .flatten_all()
                    .unwrap()
                    .to_vec1::<f32>()
                    .unwrap();
                assert_eq!(ours.len(), theirs.len());
                for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
                    assert!(
                        (a - b).abs() <= 1e-4 * b.abs().max(1.0),
                        "{float:?}, {tokens} tokens, value {i}: {a} vs {b}"
                    );
                }
            }
        }
    }
}
