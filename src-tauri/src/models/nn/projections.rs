//! Several projections of the same input, stored either as separate
//! matrices (Llama's `q_proj`, `k_proj`, `v_proj`) or as one fused matrix
//! whose output is their concatenation (Phi-3's `qkv_proj`).

use super::linear::{forward_stacked, Linear};
use crate::models::weights::Weights;
use anyhow::Result;
use candle_core::{Tensor, D};

pub enum Projections {
    Separate(Vec<Linear>),
    /// One matrix; its output splits into pieces of these widths.
    Fused(Linear, Vec<usize>),
}

impl Projections {
    /// Loads `{prefix}.{fused}` when the checkpoint has it (outputs in the
    /// order of `parts`), else each `{prefix}.{name}` of `parts`, given as
    /// `(name, output width)`.
    pub fn load(
        weights: &Weights,
        prefix: &str,
        fused: &str,
        parts: &[(&str, usize)],
        in_dim: usize,
        bias: bool,
    ) -> Result<Self> {
        if weights.contains(&format!("{prefix}.{fused}.weight")) {
            let widths: Vec<usize> = parts.iter().map(|&(_, w)| w).collect();
            let linear = Linear::load(weights, &format!("{prefix}.{fused}"), in_dim, widths.iter().sum(), bias)?;
            return Ok(Self::Fused(linear, widths));
        }
        let separate = parts
            .iter()
            .map(|&(name, width)| Linear::load(weights, &format!("{prefix}.{name}"), in_dim, width, bias))
            .collect::<Result<_>>()?;
        Ok(Self::Separate(separate))
    }

    /// Bytes of weights held.
    pub fn weight_bytes(&self) -> usize {
        match self {
            Self::Separate(parts) => parts.iter().map(Linear::weight_bytes).sum(),
            Self::Fused(linear, _) => linear.weight_bytes(),
        }
    }

    /// Each projection of `x`, in the order they were named.
    pub fn forward(&self, x: &Tensor) -> Result<Vec<Tensor>> {
        match self {
            Self::Separate(parts) => match forward_stacked(parts, x)? {
                Some(pieces) => Ok(pieces),
                None => parts.iter().map(|p| p.forward(x)).collect(),
            },
            Self::Fused(linear, widths) => {
                let y = linear.forward(x)?;
                let mut start = 0;
                widths
                    .iter()
                    .map(|&w| {
                        let piece = y.narrow(D::Minus1, start, w)?.contiguous()?;
                        start += w;
                        Ok(piece)
                    })
                    .collect()
            }
        }
    }
}
