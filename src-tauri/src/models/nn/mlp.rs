//! The gated SiLU feed-forward block: `down(silu(gate(x)) * up(x))`.

use super::linear::Linear;
use crate::models::config::ModelConfig;
use crate::models::weights::Weights;
use anyhow::Result;
use candle_core::Tensor;

pub struct GatedMlp {
    gate_proj: Linear,
    up_proj: Linear,
    down_proj: Linear,
}

impl GatedMlp {
    pub fn load(weights: &Weights, prefix: &str, cfg: &ModelConfig) -> Result<Self> {
        let (h, i, bias) = (cfg.hidden_size, cfg.intermediate_size, cfg.mlp_bias);
        Ok(Self {
            gate_proj: Linear::load(weights, &format!("{prefix}.gate_proj"), h, i, bias)?,
            up_proj: Linear::load(weights, &format!("{prefix}.up_proj"), h, i, bias)?,
            down_proj: Linear::load(weights, &format!("{prefix}.down_proj"), i, h, bias)?,
        })
    }

    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let gate = candle_nn::ops::silu(&self.gate_proj.forward(x)?)?;
        let up = self.up_proj.forward(x)?;
        self.down_proj.forward(&(gate * up)?)
    }
}
