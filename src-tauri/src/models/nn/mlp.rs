//! The gated SiLU feed-forward block: `down(silu(gate(x)) * up(x))`.

use super::linear::Linear;
use super::projections::Projections;
use crate::models::config::ModelConfig;
use crate::models::weights::Weights;
use anyhow::Result;
use candle_core::Tensor;

pub struct GatedMlp {
    /// gate and up (separate or fused as `gate_up_proj`).
    gate_up: Projections,
    down_proj: Linear,
}

impl GatedMlp {
    pub fn load(weights: &Weights, prefix: &str, cfg: &ModelConfig) -> Result<Self> {
        let (h, i, bias) = (cfg.hidden_size, cfg.intermediate_size, cfg.mlp_bias);
        Ok(Self {
            gate_up: Projections::load(weights, prefix, "gate_up_proj", &[("gate_proj", i), ("up_proj", i)], h, bias)?,
            down_proj: Linear::load(weights, &format!("{prefix}.down_proj"), i, h, bias)?,
        })
    }

    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let [gate, up]: [Tensor; 2] = self.gate_up.forward(x)?.try_into().expect("two projections");
        self.down_proj.forward(&(candle_nn::ops::silu(&gate)? * up)?)
    }
}
