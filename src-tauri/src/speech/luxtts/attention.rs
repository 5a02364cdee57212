//! Attention in a Zipformer layer (docs/luxtts-research.md §3): one set of weights
//! per layer, computed from queries, keys and a relative-position term,
//! then shared by two value attentions and the non-linear attention.
//! Tensors are `(frames, channels)`; weights are `(heads, frames, frames)`.

use super::activations::gated_product;
use crate::models::nn::linear::Linear;
use crate::models::weights::Weights;
use anyhow::Result;
use cake_kernels::cpu::Level;
use cake_kernels::elementwise::{softmax, Gate};
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
        let scores = q.matmul(&k.transpose(1, 2)?.contiguous()?)?;
        // (heads, pos_dim, 2n−1): every head's projection of every offset.
        let offsets = self.linear_pos.forward(positions)?.reshape((2 * n - 1, h, self.pos_dim))?;
        let offsets = offsets.permute((1, 2, 0))?.contiguous()?;
        softmax_of_scores(&scores, &p, &offsets, mask)
    }
}

/// Rows of `scores (heads, n, n)` plus their relative-position terms, padded
/// keys given [`MASKED_SCORE`], through a softmax: one pass per row, the
/// rows spread over the kernel pool. The term of query `i` and key `j` is
/// that of offset `j − i`: `p[h, i] · offsets[h, :, n − 1 − i + j]`, with
/// `p (heads, n, pos_dim)` and `offsets (heads, pos_dim, 2n−1)`.
fn softmax_of_scores(scores: &Tensor, p: &Tensor, offsets: &Tensor, mask: Option<&PaddingMask>) -> Result<Tensor> {
    let (heads, n, _) = scores.dims3()?;
    let pos_dim = p.dim(2)?;
    let mut rows = scores.flatten_all()?.to_vec1::<f32>()?;
    let p = p.flatten_all()?.to_vec1::<f32>()?;
    let offsets = offsets.flatten_all()?.to_vec1::<f32>()?;
    let level = Level::detected();
    cake_kernels::pool::global().for_each_chunk(&mut rows, n, &|index, row| {
        let (head, query) = (index / n, index % n);
        for (d, &weight) in p[index * pos_dim..][..pos_dim].iter().enumerate() {
            let terms = &offsets[(head * pos_dim + d) * (2 * n - 1) + (n - 1 - query)..][..n];
            row.iter_mut().zip(terms).for_each(|(score, term)| *score += weight * term);
        }
        if let Some(mask) = mask {
            row.iter_mut().zip(&mask.0).filter(|(_, &padded)| padded).for_each(|(score, _)| *score = MASKED_SCORE);
        }
        softmax(row, level);
    });
    Ok(Tensor::from_vec(rows, (heads, n, n), scores.device())?)
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
    fn scores_take_the_term_of_key_minus_query_and_padded_keys_get_nothing() {
        let (heads, n, pos_dim) = (2, 4, 2);
        // Offset c − (n−1) of head h: (0.1·(10h + offset), 0.05); query i's weights (1 + i, 2).
        let offset = |h: usize, d: usize, c: usize| {
            if d == 0 {
                0.1 * (10.0 * h as f32 + c as f32 - (n - 1) as f32)
            } else {
                0.05
            }
        };
        let table: Vec<f32> = (0..heads)
            .flat_map(|h| (0..pos_dim).flat_map(move |d| (0..2 * n - 1).map(move |c| offset(h, d, c))))
            .collect();
        let offsets = Tensor::from_vec(table, (heads, pos_dim, 2 * n - 1), &Device::Cpu).unwrap();
        let weights: Vec<f32> = (0..heads).flat_map(|_| (0..n).flat_map(|i| [1.0 + i as f32, 2.0])).collect();
        let p = Tensor::from_vec(weights, (heads, n, pos_dim), &Device::Cpu).unwrap();
        let scores = Tensor::ones((heads, n, n), candle_core::DType::F32, &Device::Cpu).unwrap();
        let mask = PaddingMask(vec![false, false, false, true]);
        let got = softmax_of_scores(&scores, &p, &offsets, Some(&mask)).unwrap().to_vec3::<f32>().unwrap();
        for (h, head) in got.iter().enumerate() {
            for (i, row) in head.iter().enumerate() {
                let term = |j: usize| {
                    let c = n - 1 - i + j;
                    (1.0 + i as f64) * offset(h, 0, c) as f64 + 2.0 * offset(h, 1, c) as f64
                };
                let logits: Vec<f64> = (0..n).map(|j| 1.0 + term(j)).collect();
                let total: f64 = logits[..3].iter().map(|l| l.exp()).sum();
                for (j, &logit) in logits.iter().enumerate() {
                    let expected = if j == 3 { 0.0 } else { logit.exp() / total };
                    assert!((row[j] as f64 - expected).abs() < 1e-6, "head {h}, query {i}, key {j}");
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
