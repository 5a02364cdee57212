//! A sparse mixture-of-experts feed-forward block (Qwen3-MoE): a router
//! scores every expert for each token, the token goes through its
//! `experts_per_token` best experts, and their outputs are summed with the
//! router's probabilities as weights; a shared expert, where the model has
//! one (Qwen3.5-MoE), adds its output weighted by a sigmoid gate.

use super::linear::Linear;
use super::mlp::GatedMlp;
use crate::models::config::{ModelConfig, MoeConfig};
use crate::models::weights::Weights;
use anyhow::Result;
use candle_core::{DType, Tensor};

pub struct SparseMoe {
    /// `(num_experts, hidden)`: one score per expert.
    router: Linear,
    experts: Vec<GatedMlp>,
    experts_per_token: usize,
    normalize_top_k: bool,
    /// The shared expert and its gate `(1, hidden)`, if any.
    shared: Option<(GatedMlp, Linear)>,
}

impl SparseMoe {
    /// Loads `{prefix}.gate` (the router) and `{prefix}.experts.{e}.…`.
    pub fn load(weights: &Weights, prefix: &str, cfg: &ModelConfig, moe: &MoeConfig) -> Result<Self> {
        let experts = (0..moe.num_experts)
            .map(|e| {
                GatedMlp::load_with_width(weights, &format!("{prefix}.experts.{e}"), cfg, moe.expert_intermediate_size)
            })
            .collect::<Result<_>>()?;
        Ok(Self {
            router: Linear::load(weights, &format!("{prefix}.gate"), cfg.hidden_size, moe.num_experts, false)?,
            experts,
            experts_per_token: moe.experts_per_token,
            normalize_top_k: moe.normalize_top_k,
            shared: match moe.shared_expert_intermediate_size {
                Some(width) => Some((
                    GatedMlp::load_with_width(weights, &format!("{prefix}.shared_expert"), cfg, width)?,
                    Linear::load(weights, &format!("{prefix}.shared_expert_gate"), cfg.hidden_size, 1, false)?,
                )),
                None => None,
            },
        })
    }

    /// Bytes of weights held (router and every expert).
    pub fn weight_bytes(&self) -> usize {
        let shared = self.shared.as_ref().map_or(0, |(mlp, gate)| mlp.weight_bytes() + gate.weight_bytes());
        self.router.weight_bytes() + self.experts.iter().map(GatedMlp::weight_bytes).sum::<usize>() + shared
    }

    /// `x` of shape `(b, t, hidden)`.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let (b, t, h) = x.dims3()?;
        let rows = x.reshape((b * t, h))?;
        // Router probabilities in f32, as transformers computes them.
        let logits = self.router.forward(&rows)?.to_dtype(DType::F32)?;
        let probs: Vec<Vec<f32>> = candle_nn::ops::softmax_last_dim(&logits)?.to_vec2()?;
        // Which rows each expert takes, with their weights.
        let mut assigned: Vec<(Vec<u32>, Vec<f32>)> = vec![(Vec::new(), Vec::new()); self.experts.len()];
        for (row, p) in probs.iter().enumerate() {
            for (expert, weight) in top_k(p, self.experts_per_token, self.normalize_top_k) {
                assigned[expert].0.push(row as u32);
                assigned[expert].1.push(weight);
            }
        }
        let mut out = rows.zeros_like()?;
        // Expert by expert in index order, as the reference accumulates.
        for (expert, (row_ids, weights)) in self.experts.iter().zip(assigned) {
            if row_ids.is_empty() {
                continue;
            }
            let n = row_ids.len();
            let index = Tensor::from_vec(row_ids, n, x.device())?;
            let y = expert.forward(&rows.index_select(&index, 0)?)?;
            let weights = Tensor::from_vec(weights, (n, 1), x.device())?.to_dtype(y.dtype())?;
            out = out.index_add(&index, &y.broadcast_mul(&weights)?, 0)?;
        }
        if let Some((mlp, gate)) = &self.shared {
            let weight = candle_nn::ops::sigmoid(&gate.forward(&rows)?)?;
            out = (out + mlp.forward(&rows)?.broadcast_mul(&weight)?)?;
        }
        Ok(out.reshape((b, t, h))?)
    }
}

/// The `k` most probable experts of one token and their weights (the
/// probabilities, renormalised to sum to one if asked), best first. Finds
/// them by selection, without sorting all the experts.
fn top_k(probs: &[f32], k: usize, normalize: bool) -> Vec<(usize, f32)> {
    let mut order: Vec<usize> = (0..probs.len()).collect();
    let k = k.min(order.len());
    let descending = |a: &usize, b: &usize| probs[*b].total_cmp(&probs[*a]).then(a.cmp(b));
    if k < order.len() {
        order.select_nth_unstable_by(k - 1, descending);
    }
    let mut chosen: Vec<(usize, f32)> = order[..k].iter().map(|&e| (e, probs[e])).collect();
    chosen.sort_by(|a, b| descending(&a.0, &b.0));
    if normalize {
        let sum: f32 = chosen.iter().map(|&(_, w)| w).sum();
        for (_, w) in &mut chosen {
            *w /= sum;
        }
    }
    chosen
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_k_picks_the_most_probable_and_renormalises() {
        let probs = [0.05, 0.4, 0.1, 0.3, 0.15];
        assert_eq!(top_k(&probs, 2, false), vec![(1, 0.4), (3, 0.3)]);
        let normalized = top_k(&probs, 2, true);
        assert_eq!(normalized.iter().map(|&(e, _)| e).collect::<Vec<_>>(), vec![1, 3]);
        assert!((normalized[0].1 - 0.4 / 0.7).abs() < 1e-6 && (normalized[1].1 - 0.3 / 0.7).abs() < 1e-6);
        assert_eq!(top_k(&probs, 9, false).len(), 5);
        // Equal probabilities: the lower expert index first.
        assert_eq!(top_k(&[0.25; 4], 2, false), vec![(0, 0.25), (1, 0.25)]);
    }
}
