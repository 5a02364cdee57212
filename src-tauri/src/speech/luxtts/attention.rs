//! Attention in a Zipformer layer (docs/luxtts-research.md §3): one set of weights
//! per layer, computed from queries, keys and a relative-position term,
//! then shared by two value attentions and the non-linear attention.
//! Tensors are `(frames, channels)`; weights are `(heads, frames, frames)`.

use super::activations::gated_product;
use crate::models::nn::linear::Linear;
use crate::models::weights::Weights;
use anyhow::Result;
use cake_kernels::elementwise::Gate;
use candle_core::{Device, Tensor, D};

/// The score given to padded keys (the reference's, not −∞).
const MASKED_SCORE: f32 = -1000.0;

/// Which frames are padding, as keys of attention and inputs of the
/// convolutions (`true`: padding).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaddingMask(pub Vec<bool>);

impl PaddingMask {
    /// Every `step`-th frame's flag, as a stack at `1/step` of the rate sees them.
    pub fn every(&self, step: usize) -> Self {
        Self(self.0.iter().step_by(step).copied().collect())
    }

    /// `(1, frames)` with 1 at padding, for `where_cond`.
    fn row(&self, device: &Device) -> Result<Tensor> {
        let flags: Vec<u8> = self.0.iter().map(|&p| u8::from(p)).collect();
        Ok(Tensor::from_vec(flags, (1, self.0.len()), device)?)
    }
}

/// The compact relative positional encoding of offsets `−(n−1) … n−1`:
/// `(2n − 1, dim)`, row `n − 1 + offset`. Offsets are squashed by a log
/// and an arctangent so that far ones differ little.
pub fn relative_positions(frames: usize, dim: usize, device: &Device) -> Result<Tensor> {
    let compression = (dim as f32).sqrt();
    let length_scale = dim as f32 / (2.0 * std::f32::consts::PI);
    let rows = 2 * frames - 1;
    let mut table = vec![0f32; rows * dim];
    for (row, values) in table.chunks_mut(dim).enumerate() {
        let x = row as f32 - (frames as f32 - 1.0);
        let squashed = compression * x.signum() * ((x.abs() + compression).ln() - compression.ln());
        let squashed = if x == 0.0 { 0.0 } else { squashed };
        let angle = (squashed / length_scale).atan();
        for (k, pair) in values.chunks_mut(2).enumerate() {
            let a = angle * (k + 1) as f32;
            pair[0] = a.cos();
            pair[1] = a.sin();
        }
        values[dim - 1] = 1.0;
    }
    Ok(Tensor::from_vec(table, (rows, dim), device)?)
}

/// Queries, keys and positional queries, and the positional projection.
pub struct AttentionWeights {
    in_proj: Linear,
    linear_pos: Linear,
    heads: usize,
    query_dim: usize,
    pos_dim: usize,
}

impl AttentionWeights {
    pub fn load(
        weights: &Weights,
        prefix: &str,
        dim: usize,
        heads: usize,
        query_dim: usize,
        pos_head_dim: usize,
        pos_dim: usize,
    ) -> Result<Self> {
        let projected = heads * (2 * query_dim + pos_head_dim);
        Ok(Self {
            in_proj: Linear::load(weights, &format!("{prefix}.in_proj"), dim, projected, true)?,
            linear_pos: Linear::load(weights, &format!("{prefix}.linear_pos"), pos_dim, heads * pos_head_dim, false)?,
            heads,
            query_dim,
            pos_dim: pos_head_dim,
        })
    }

    /// Softmax weights `(heads, n, n)` of `x (n, dim)`, with `positions`
    /// from [`relative_positions`]; scores are not scaled by 1/√d (the
    /// scale is in the weights).
    pub fn forward(&self, x: &Tensor, positions: &Tensor, mask: Option<&PaddingMask>) -> Result<Tensor> {
        let (n, h, dq) = (x.dim(0)?, self.heads, self.query_dim);
        let projected = self.in_proj.forward(x)?;
        let per_head = |start: usize, width: usize| -> Result<Tensor> {
            Ok(projected.narrow(1, start, h * width)?.reshape((n, h, width))?.transpose(0, 1)?.contiguous()?)
        };
        let q = per_head(0, dq)?;
        let k = per_head(h * dq, dq)?;
        let p = per_head(2 * h * dq, self.pos_dim)?;
        let mut scores = q.matmul(&k.transpose(1, 2)?.contiguous()?)?;
        // (heads, pos_dim, 2n−1): every head's projection of every offset.
        let offsets = self.linear_pos.forward(positions)?.reshape((2 * n - 1, h, self.pos_dim))?;
        let offsets = offsets.permute((1, 2, 0))?.contiguous()?;
        let by_offset = p.matmul(&offsets)?; // (heads, n, 2n−1)
        scores = (scores + relative_shift(&by_offset, n)?)?;
        if let Some(mask) = mask {
            let masked = mask.row(x.device())?.unsqueeze(0)?.broadcast_as(scores.shape())?;
            let fill = Tensor::new(MASKED_SCORE, x.device())?.broadcast_as(scores.shape())?;
            scores = masked.where_cond(&fill, &scores)?;
        }
        Ok(candle_nn::ops::softmax_last_dim(&scores)?)
    }
}

/// `out[h, i, j] = by_offset[h, i, n − 1 − i + j]`: the term of query `i`
/// and key `j` is the one of offset `j − i`.
fn relative_shift(by_offset: &Tensor, n: usize) -> Result<Tensor> {
    if n == 1 {
        return Ok(by_offset.clone());
    }
    let heads = by_offset.dim(0)?;
    // Row i of the flattened table starts at i·(2n−1); reading rows of
    // 2n−2 values from offset n−1 lands column j of row i on
    // i·(2n−1) + n−1−i+j.
    let flat = by_offset.reshape((heads, n * (2 * n - 1)))?;
    let shifted = flat.narrow(1, n - 1, n * (2 * n - 2))?.reshape((heads, n, 2 * n - 2))?;
    Ok(shifted.narrow(2, 0, n)?.contiguous()?)
}

/// Values weighted by the shared attention weights, per head.
pub struct SelfAttention {
    in_proj: Linear,
    out_proj: Linear,
    heads: usize,
    value_dim: usize,
}

impl SelfAttention {
    pub fn load(weights: &Weights, prefix: &str, dim: usize, heads: usize, value_dim: usize) -> Result<Self> {
        Ok(Self {
            in_proj: Linear::load(weights, &format!("{prefix}.in_proj"), dim, heads * value_dim, true)?,
            out_proj: Linear::load(weights, &format!("{prefix}.out_proj"), heads * value_dim, dim, true)?,
            heads,
            value_dim,
        })
    }

    pub fn forward(&self, x: &Tensor, attention: &Tensor) -> Result<Tensor> {
        let n = x.dim(0)?;
        let values =
            self.in_proj.forward(x)?.reshape((n, self.heads, self.value_dim))?.transpose(0, 1)?.contiguous()?;
        let mixed = attention.matmul(&values)?.transpose(0, 1)?.reshape((n, self.heads * self.value_dim))?;
        self.out_proj.forward(&mixed)
    }
}

/// The convolution module's gate, with the first head's attention weights
/// in place of a convolution: `out(W₀ · (x·tanh s) · y)`.
pub struct NonlinAttention {
    in_proj: Linear,
    out_proj: Linear,
    hidden: usize,
}

impl NonlinAttention {
    pub fn load(weights: &Weights, prefix: &str, dim: usize) -> Result<Self> {
        let hidden = 3 * dim / 4;
        Ok(Self {
            in_proj: Linear::load(weights, &format!("{prefix}.in_proj"), dim, 3 * hidden, true)?,
            out_proj: Linear::load(weights, &format!("{prefix}.out_proj"), hidden, dim, true)?,
            hidden,
        })
    }

    /// `first_head`: the layer's attention weights of head 0, `(n, n)`.
    pub fn forward(&self, x: &Tensor, first_head: &Tensor) -> Result<Tensor> {
        let projected = self.in_proj.forward(x)?;
        let part = |i: usize| projected.narrow(D::Minus1, i * self.hidden, self.hidden);
        let (s, values, y) = (part(0)?, part(1)?, part(2)?);
        let gated = gated_product(&values, &s, Gate::Tanh)?;
        let mixed = (first_head.matmul(&gated.contiguous()?)? * y)?;
        self.out_proj.forward(&mixed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_relative_shift_reads_the_offset_of_key_minus_query() {
        let n = 4;
        // Entry (h, i, c) holds 100·h + 10·i + (c − (n−1)): its offset.
        let values: Vec<f32> = (0..2)
            .flat_map(|h| {
                (0..n).flat_map(move |i| (0..2 * n - 1).map(move |c| (100 * h + 10 * i) as f32 + c as f32 - 3.0))
            })
            .collect();
        let table = Tensor::from_vec(values, (2, n, 2 * n - 1), &Device::Cpu).unwrap();
        let shifted = relative_shift(&table, n).unwrap().to_vec3::<f32>().unwrap();
        for (h, rows) in shifted.iter().enumerate() {
            for (i, row) in rows.iter().enumerate() {
                for (j, &v) in row.iter().enumerate() {
                    assert_eq!(v, (100 * h + 10 * i) as f32 + j as f32 - i as f32, "head {h}, query {i}, key {j}");
                }
            }
        }
    }

    #[test]
    fn position_zero_is_all_cosines_one() {
        let table = relative_positions(3, 8, &Device::Cpu).unwrap().to_vec2::<f32>().unwrap();
        assert_eq!(table.len(), 5);
        assert_eq!(table[2], vec![1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 1.0]);
        // Offsets ±1 differ only in the sines' signs (the last value is 1).
        for k in 0..3 {
            assert_eq!(table[1][2 * k], table[3][2 * k]);
            assert_eq!(table[1][2 * k + 1], -table[3][2 * k + 1]);
        }
    }
}
