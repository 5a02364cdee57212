//! A linear projection over a dense or GGML-quantized weight, with optional bias.

use crate::models::weights::{MatrixWeight, Weights};
use anyhow::Result;
use candle_core::quantized::QMatMul;
use candle_core::{Module, Tensor};

/// `y = x Wᵀ + b`, with `W` stored `(out, in)` as checkpoints store it.
pub struct Linear {
    weight: Projection,
    bias: Option<Tensor>,
}

enum Projection {
    Dense(Tensor),
    Quantized(QMatMul),
}

impl Linear {
    /// Loads `{prefix}.weight` of shape `(out, in)` and, if `bias`, `{prefix}.bias`.
    pub fn load(weights: &Weights, prefix: &str, in_dim: usize, out_dim: usize, bias: bool) -> Result<Self> {
        let weight = match weights.matrix(&format!("{prefix}.weight"), &[out_dim, in_dim])? {
            MatrixWeight::Dense(t) => Projection::Dense(t),
            MatrixWeight::Quantized(q) => Projection::Quantized(QMatMul::from_arc(q)?),
        };
        let bias = if bias {
            Some(weights.dense(&format!("{prefix}.bias"), &[out_dim])?)
        } else {
            None
        };
        Ok(Self { weight, bias })
    }

    /// A projection sharing an already-loaded matrix (tied LM head).
    pub fn from_matrix(weight: MatrixWeight) -> Result<Self> {
        let weight = match weight {
            MatrixWeight::Dense(t) => Projection::Dense(t),
            MatrixWeight::Quantized(q) => Projection::Quantized(QMatMul::from_arc(q)?),
        };
        Ok(Self { weight, bias: None })
    }

    /// Applies the projection to `x` of shape `(..., in)`.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let y = match &self.weight {
            Projection::Dense(w) => {
                let dims = x.dims().to_vec();
                let (last, lead) = dims.split_last().expect("activations have a last dim");
                let rows: usize = lead.iter().product();
                let y = x.reshape((rows, *last))?.matmul(&w.t()?)?;
                let mut out_dims = lead.to_vec();
                out_dims.push(w.dim(0)?);
                y.reshape(out_dims)?
            }
            Projection::Quantized(q) => q.forward(x)?,
        };
        Ok(match &self.bias {
            Some(b) => y.broadcast_add(b)?,
            None => y,
        })
    }
}
