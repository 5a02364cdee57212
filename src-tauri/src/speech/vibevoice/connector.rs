//! The speech connectors (docs/vibevoice.md §7): a latent frame (acoustic
//! or semantic) mapped into the language model's embedding space by
//! `fc2(rmsnorm(fc1(x)))`.

use crate::models::nn::linear::Linear;
use crate::models::nn::norm::RmsNorm;
use crate::models::weights::Weights;
use anyhow::Result;
use candle_core::Tensor;

/// The connectors' RMSNorm epsilon (fixed in the reference, not configured).
const NORM_EPS: f64 = 1e-6;

pub struct SpeechConnector {
    fc1: Linear,
    norm: RmsNorm,
    fc2: Linear,
}

impl SpeechConnector {
    /// Loads the connector under `prefix` mapping `input` features to `hidden`.
    pub fn load(weights: &Weights, prefix: &str, input: usize, hidden: usize) -> Result<Self> {
        Ok(Self {
            fc1: Linear::load(weights, &format!("{prefix}.fc1"), input, hidden, true)?,
            norm: RmsNorm::load(weights, &format!("{prefix}.norm.weight"), hidden, NORM_EPS)?,
            fc2: Linear::load(weights, &format!("{prefix}.fc2"), hidden, hidden, true)?,
        })
    }

    /// `x [..., input]` → `[..., hidden]`.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.fc2.forward(&self.norm.forward(&self.fc1.forward(x)?)?)
    }
}
