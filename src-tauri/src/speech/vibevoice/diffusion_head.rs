//! The diffusion head (docs/vibevoice.md §9): given a noisy latent, a
//! timestep and the language model's hidden state, it predicts the velocity
//! the sampler needs. Its layers are feed-forward blocks modulated
//! (adaLN: shift, scale, gate) by the condition plus a timestep embedding.

use super::config::DiffusionHeadConfig;
use super::scheduler::DpmSolver;
use crate::models::nn::linear::Linear;
use crate::models::nn::norm::RmsNorm;
use crate::models::weights::Weights;
use crate::speech::noise::NoiseSource;
use crate::speech::time_features::sinusoidal_features;
use anyhow::Result;
use candle_core::{DType, Tensor, D};

/// Size of the sinusoidal timestep features.
const TIME_FEATURES: usize = 256;

struct HeadLayer {
    norm: RmsNorm,
    gate_proj: Linear,
    up_proj: Linear,
    down_proj: Linear,
    modulation: Linear,
}

pub struct DiffusionHead {
    noisy_proj: Linear,
    cond_proj: Linear,
    time_in: Linear,
    time_out: Linear,
    layers: Vec<HeadLayer>,
    final_modulation: Linear,
    final_linear: Linear,
    eps: f32,
    latent_size: usize,
}

/// `x / rms(x)` over the last dimension, in f32, without a weight.
fn rms_normalize(x: &Tensor, eps: f32) -> Result<Tensor> {
    let dtype = x.dtype();
    let x = x.to_dtype(DType::F32)?;
    let mean_square = x.sqr()?.mean_keepdim(D::Minus1)?;
    Ok(x.broadcast_div(&(mean_square + eps as f64)?.sqrt()?)?.to_dtype(dtype)?)
}

impl DiffusionHead {
    /// Loads the head under `prefix` (`model.prediction_head`).
    pub fn load(weights: &Weights, prefix: &str, config: &DiffusionHeadConfig) -> Result<Self> {
        let (h, ffn, latent) = (config.hidden_size, config.ffn_size(), config.latent_size);
        let linear = |name: &str, i: usize, o: usize| Linear::load(weights, &format!("{prefix}.{name}"), i, o, false);
        let layers = (0..config.head_layers)
            .map(|n| {
                Ok(HeadLayer {
                    norm: RmsNorm::load(weights, &format!("{prefix}.layers.{n}.norm.weight"), h, config.rms_norm_eps)?,
                    gate_proj: linear(&format!("layers.{n}.ffn.gate_proj"), h, ffn)?,
                    up_proj: linear(&format!("layers.{n}.ffn.up_proj"), h, ffn)?,
                    down_proj: linear(&format!("layers.{n}.ffn.down_proj"), ffn, h)?,
                    modulation: linear(&format!("layers.{n}.adaLN_modulation.1"), h, 3 * h)?,
                })
            })
            .collect::<Result<_>>()?;
        Ok(Self {
            noisy_proj: linear("noisy_images_proj", latent, h)?,
            cond_proj: linear("cond_proj", h, h)?,
            time_in: linear("t_embedder.mlp.0", TIME_FEATURES, h)?,
            time_out: linear("t_embedder.mlp.2", h, h)?,
            layers,
            final_modulation: linear("final_layer.adaLN_modulation.1", h, 2 * h)?,
            final_linear: linear("final_layer.linear", h, latent)?,
            eps: config.rms_norm_eps as f32,
            latent_size: latent,
        })
    }

    /// Sinusoidal features of timestep `t` for `rows` rows: cosines, then sines.
    fn time_features(t: f32, rows: usize, dtype: DType, device: &candle_core::Device) -> Result<Tensor> {
        let row =
            Tensor::from_vec(sinusoidal_features(t, TIME_FEATURES), (1, TIME_FEATURES), device)?.to_dtype(dtype)?;
        Ok(row.repeat((rows, 1))?)
    }

    /// The velocity for noisy latents `x [N, latent]` at timestep `t`
    /// under conditions `condition [N, hidden]`.
    pub fn forward(&self, x: &Tensor, t: f32, condition: &Tensor) -> Result<Tensor> {
        let rows = x.dim(0)?;
        let time = Self::time_features(t, rows, x.dtype(), x.device())?;
        let time = self.time_out.forward(&candle_nn::ops::silu(&self.time_in.forward(&time)?)?)?;
        let c = (self.cond_proj.forward(condition)? + time)?;
        let c_act = candle_nn::ops::silu(&c)?;
        let mut h = self.noisy_proj.forward(x)?;
        for layer in &self.layers {
            let modulation = layer.modulation.forward(&c_act)?.chunk(3, D::Minus1)?;
            let (shift, scale, gate) = (&modulation[0], &modulation[1], &modulation[2]);
            let y = (layer.norm.forward(&h)?.mul(&(scale + 1.0)?)? + shift)?;
            let ffn = layer
                .down_proj
                .forward(&(candle_nn::ops::silu(&layer.gate_proj.forward(&y)?)? * layer.up_proj.forward(&y)?)?)?;
            h = (h + gate.mul(&ffn)?)?;
        }
        let modulation = self.final_modulation.forward(&c_act)?.chunk(2, D::Minus1)?;
        let y = (rms_normalize(&h, self.eps)?.mul(&(&modulation[1] + 1.0)?)? + &modulation[0])?;
        self.final_linear.forward(&y)
    }

    /// One frame's latent `[1, latent]` (the head's normalised space) from
    /// the positive and negative conditions `[2, hidden]` under guidance of
    /// `cfg_scale`, starting from noise drawn from `noise`.
    pub fn sample_guided(
        &self,
        solver: &DpmSolver,
        conditions: &Tensor,
        cfg_scale: f64,
        noise: &mut dyn NoiseSource,
    ) -> Result<Tensor> {
        // The reference draws noise for both rows but only the first one matters.
        let start =
            noise.normal(&[2, self.latent_size], conditions.device())?.to_dtype(conditions.dtype())?.narrow(0, 0, 1)?;
        solver.sample(
            &start,
            |x, t| {
                let v = self.forward(&Tensor::cat(&[x, x], 0)?, t as f32, conditions)?;
                let (positive, negative) = (v.narrow(0, 0, 1)?, v.narrow(0, 1, 1)?);
                Ok((&negative + ((positive - &negative)? * cfg_scale)?)?)
            },
            |_, _, _| {},
        )
    }
}
