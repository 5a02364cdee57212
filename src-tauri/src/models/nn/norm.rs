//! Root-mean-square layer normalisation.

use crate::models::config::ModelConfig;
use crate::models::weights::Weights;
use anyhow::Result;
use candle_core::{DType, Tensor};

/// `x / rms(x) * w`, computed in f32 as transformers does, returned in `x`'s dtype.
pub struct RmsNorm {
    weight: Tensor,
    eps: f32,
}

impl RmsNorm {
    pub fn load(weights: &Weights, name: &str, dim: usize, eps: f64) -> Result<Self> {
        let weight = weights.dense(name, &[dim])?.to_dtype(DType::F32)?;
        Ok(Self { weight, eps: eps as f32 })
    }

    /// A decoder norm as `cfg` stores it: weights used as they are, or as
    /// `1 + w` where the family keeps them centred on zero.
    pub fn load_for(weights: &Weights, name: &str, dim: usize, cfg: &ModelConfig) -> Result<Self> {
        let mut norm = Self::load(weights, name, dim, cfg.rms_norm_eps)?;
        if cfg.norm_unit_offset {
            norm.weight = (norm.weight + 1.0)?;
        }
        Ok(norm)
    }

    /// Bytes of weights held.
    pub fn weight_bytes(&self) -> usize {
        crate::models::fp8::tensor_bytes(&self.weight)
    }

    /// The weights as applied (unit offset included), as f32.
    pub fn values(&self) -> Result<Vec<f32>> {
        Ok(self.weight.to_dtype(DType::F32)?.to_vec1()?)
    }

    pub fn eps(&self) -> f32 {
        self.eps
    }

    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let dtype = x.dtype();
        let x32 = x.to_dtype(DType::F32)?.contiguous()?;
        let y = candle_nn::ops::rms_norm(&x32, &self.weight, self.eps)?;
        Ok(y.to_dtype(dtype)?)
    }
}
