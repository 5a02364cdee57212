//! FP8 weights (`quant_method: fp8`): matrices stored as F8E4M3 with
//! `weight_scale_inv`, one scale per tensor or per block of
//! `weight_block_size` (rows × columns, the last blocks possibly partial).
//! They stay F8E4M3 in memory, a byte per weight, and are dequantized to
//! the compute dtype for each matmul.

use anyhow::{bail, Result};
use candle_core::{DType, Tensor};

pub struct Fp8Matrix {
    /// `(out, in)`, F8E4M3.
    values: Tensor,
    /// f32: a scalar, or `(⌈out / rows⌉, ⌈in / cols⌉)` for blocks.
    scale_inv: Tensor,
    /// Block rows and columns, for block scales.
    block: Option<(usize, usize)>,
}

impl Fp8Matrix {
    /// Checks that `scale_inv` fits `values` (named `name` in errors) with
    /// blocks of `block_size` (from config.json) where the scales are a matrix.
    pub fn new(name: &str, values: Tensor, scale_inv: Tensor, block_size: Option<(usize, usize)>) -> Result<Self> {
        let (out, inp) = values.dims2()?;
        let scale_inv = scale_inv.to_dtype(DType::F32)?;
        let block = match scale_inv.dims() {
            [] | [1] => None,
            &[rows, cols] => {
                let Some((br, bc)) = block_size.filter(|&(r, c)| r > 0 && c > 0) else {
                    bail!("`{name}` has block scales but config.json gives no `quantization_config.weight_block_size`");
                };
                if rows != out.div_ceil(br) || cols != inp.div_ceil(bc) {
                    bail!("`{name}`: {rows}×{cols} scales do not cover a {out}×{inp} matrix in {br}×{bc} blocks");
                }
                Some((br, bc))
            }
            other => bail!("`{name}`: scales of shape {other:?} are neither per tensor nor per block"),
        };
        Ok(Self { values, scale_inv, block })
    }

    /// The matrix in `dtype`: each value times its block's scale.
    pub fn dequantize(&self, dtype: DType) -> Result<Tensor> {
        let values = self.values.to_dtype(DType::F32)?;
        let scaled = match self.block {
            None => values.broadcast_mul(&self.scale_inv.reshape(())?)?,
            Some((br, bc)) => {
                let (out, inp) = values.dims2()?;
                let device = values.device();
                let rows = Tensor::from_vec((0..out).map(|r| (r / br) as u32).collect::<Vec<_>>(), out, device)?;
                let cols = Tensor::from_vec((0..inp).map(|c| (c / bc) as u32).collect::<Vec<_>>(), inp, device)?;
                let scales = self.scale_inv.index_select(&rows, 0)?.index_select(&cols, 1)?;
                (values * scales)?
            }
        };
        Ok(scaled.to_dtype(dtype)?)
    }

    /// Bytes held in memory (values and scales).
    pub fn bytes(&self) -> usize {
        tensor_bytes(&self.values) + tensor_bytes(&self.scale_inv)
    }
}

/// Bytes a dense tensor holds.
pub fn tensor_bytes(t: &Tensor) -> usize {
    t.elem_count() * t.dtype().size_in_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    fn values(rows: usize, cols: usize) -> Tensor {
        Tensor::ones((rows, cols), DType::F32, &Device::Cpu).unwrap().to_dtype(DType::F8E4M3).unwrap()
    }

    #[test]
    fn block_scales_cover_partial_blocks_and_multiply_their_block() {
        // A 3×5 matrix in 2×2 blocks: 2×3 scales, the last row and column partial.
        let scales = Tensor::new(&[[1f32, 2., 3.], [4., 5., 6.]], &Device::Cpu).unwrap();
        let m = Fp8Matrix::new("w", values(3, 5), scales, Some((2, 2))).unwrap();
        let dense: Vec<Vec<f32>> = m.dequantize(DType::F32).unwrap().to_vec2().unwrap();
        assert_eq!(dense, vec![vec![1., 1., 2., 2., 3.], vec![1., 1., 2., 2., 3.], vec![4., 4., 5., 5., 6.]]);
        assert_eq!(m.bytes(), 15 + 6 * 4);
    }

    #[test]
    fn scales_that_do_not_fit_are_refused_with_the_tensor_name() {
        let scales = Tensor::ones((2, 2), DType::F32, &Device::Cpu).unwrap();
        let err = Fp8Matrix::new("q_proj.weight", values(3, 5), scales.clone(), Some((2, 2))).err().unwrap();
        assert!(format!("{err:#}").contains("q_proj.weight"), "{err:#}");
        let err = Fp8Matrix::new("q_proj.weight", values(4, 4), scales, None).err().unwrap();
        assert!(format!("{err:#}").contains("weight_block_size"), "{err:#}");
        let per_tensor = Tensor::new(0.5f32, &Device::Cpu).unwrap();
        let m = Fp8Matrix::new("w", values(2, 2), per_tensor, None).unwrap();
        assert_eq!(m.dequantize(DType::F32).unwrap().to_vec2::<f32>().unwrap(), vec![vec![0.5, 0.5], vec![0.5, 0.5]]);
    }
}
