//! The gated feed-forward block: `down(act(gate(x)) * up(x))`, with SiLU
//! or GELU-tanh as `act`.

use super::cpu_values::with_cpu_values;
use super::linear::Linear;
use super::projections::Projections;
use crate::models::config::{Activation, ModelConfig};
use crate::models::weights::Weights;
use anyhow::Result;
use candle_core::Tensor;

pub struct GatedMlp {
    /// gate and up (separate or fused as `gate_up_proj`).
    gate_up: Projections,
    down_proj: Linear,
    activation: Activation,
}

impl GatedMlp {
    /// The dense MLP of `cfg` (width `intermediate_size`).
    pub fn load(weights: &Weights, prefix: &str, cfg: &ModelConfig) -> Result<Self> {
        Self::load_with_width(weights, prefix, cfg, cfg.intermediate_size)
    }

    /// A gated MLP of `intermediate` width (an expert of a MoE block).
    pub fn load_with_width(weights: &Weights, prefix: &str, cfg: &ModelConfig, intermediate: usize) -> Result<Self> {
        let (h, i, bias) = (cfg.hidden_size, intermediate, cfg.mlp_bias);
        Ok(Self {
            gate_up: Projections::load(weights, prefix, "gate_up_proj", &[("gate_proj", i), ("up_proj", i)], h, bias)?,
            down_proj: Linear::load(weights, &format!("{prefix}.down_proj"), i, h, bias)?,
            activation: cfg.activation,
        })
    }

    /// Bytes of weights held.
    pub fn weight_bytes(&self) -> usize {
        self.gate_up.weight_bytes() + self.down_proj.weight_bytes()
    }

    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let [gate, up]: [Tensor; 2] = self.gate_up.forward(x)?.try_into().expect("two projections");
        let gated = match self.activation {
            Activation::Silu => silu_mul(&gate, &up)?,
            Activation::GeluTanh => (gate.gelu()? * up)?,
        };
        self.down_proj.forward(&gated)
    }
}

/// `silu(gate) · up`: one pass of Cake's kernel when both are f32 on the
/// CPU, else candle's ops.
fn silu_mul(gate: &Tensor, up: &Tensor) -> Result<Tensor> {
    if gate.shape() == up.shape() {
        let mut out = vec![0f32; gate.elem_count()];
        let level = cake_kernels::cpu::Level::detected();
        let fused = with_cpu_values(gate, |g| {
            with_cpu_values(up, |u| cake_kernels::elementwise::silu_mul(g, u, &mut out, level))
        });
        if fused.flatten().is_some() {
            return Ok(Tensor::from_vec(out, gate.shape(), gate.device())?);
        }
    }
    Ok((candle_nn::ops::silu(gate)? * up)?)
}
