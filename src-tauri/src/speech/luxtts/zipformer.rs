//! ZipVoice's Zipformer (`TTSZipformer`, docs/luxtts-research.md §3): an input
//! projection, stacks of [`EncoderLayer`]s of which the middle ones run at a
//! lower frame rate (U-net style), and an output projection. The decoder's
//! variant also embeds the flow's time and the guidance scale.

use super::activations::swoosh_r;
use super::attention::{relative_positions, PaddingMask};
use super::config::{StackShape, ZipformerShape};
use super::layer::{Bypass, EncoderLayer};
use crate::models::nn::linear::Linear;
use crate::models::weights::Weights;
use crate::speech::time_features::sinusoidal_features;
use anyhow::Result;
use candle_core::{Device, Tensor};

/// The width of the guidance scale's sinusoidal features: ZipVoice-Distill
/// leaves it at the constructor's default whatever `time_embed_dim` is.
const GUIDANCE_FEATURES: usize = 192;

/// The decoder's time conditioning.
struct TimeEmbedding {
    dim: usize,
    guidance: Option<Linear>,
    first: Linear,
    second: Linear,
}

impl TimeEmbedding {
    fn load(weights: &Weights, prefix: &str, dim: usize, guidance: bool) -> Result<Self> {
        let guidance = match guidance {
            true => {
                Some(Linear::load(weights, &format!("{prefix}.guidance_scale_embed"), GUIDANCE_FEATURES, dim, false)?)
            }
            false => None,
        };
        Ok(Self {
            dim,
            guidance,
            first: Linear::load(weights, &format!("{prefix}.time_embed.0"), dim, 2 * dim, true)?,
            second: Linear::load(weights, &format!("{prefix}.time_embed.2"), 2 * dim, dim, true)?,
        })
    }

    /// `(1, dim)` for flow time `t` and guidance scale `guidance`.
    fn forward(&self, t: f32, guidance: f32, device: &Device) -> Result<Tensor> {
        let mut features = Tensor::from_vec(sinusoidal_features(t, self.dim), (1, self.dim), device)?;
        if let Some(embed) = &self.guidance {
            let scale =
                Tensor::from_vec(sinusoidal_features(guidance, GUIDANCE_FEATURES), (1, GUIDANCE_FEATURES), device)?;
            features = (features + embed.forward(&scale)?)?;
        }
        self.second.forward(&swoosh_r(&self.first.forward(&features)?)?)
    }
}

/// Frames `ds` at a time, combined by softmax weights (the last frame
/// repeated to fill the final group), and back by repetition.
struct Resampling {
    factor: usize,
    weights: Vec<f32>,
    combiner: Bypass,
}

impl Resampling {
    fn down(&self, x: &Tensor) -> Result<Tensor> {
        let (frames, dim) = x.dims2()?;
        let groups = frames.div_ceil(self.factor);
        let mut padded = vec![x.clone()];
        let missing = groups * self.factor - frames;
        if missing > 0 {
            padded.push(x.narrow(0, frames - 1, 1)?.repeat((missing, 1))?);
        }
        let grouped = Tensor::cat(&padded, 0)?.reshape((groups, self.factor, dim))?;
        let weights = Tensor::from_vec(self.weights.clone(), (1, self.factor, 1), x.device())?;
        Ok(grouped.broadcast_mul(&weights)?.sum(1)?)
    }

    fn up(&self, x: &Tensor, frames: usize) -> Result<Tensor> {
        let (groups, dim) = x.dims2()?;
        let repeated =
            x.unsqueeze(1)?.broadcast_as((groups, self.factor, dim))?.reshape((groups * self.factor, dim))?;
        Ok(repeated.narrow(0, 0, frames)?)
    }
}

/// Layers sharing a frame rate, a positional table and a time projection.
struct Stack {
    resampling: Option<Resampling>,
    /// SwooshR then this, applied to the time embedding.
    time_projection: Option<Linear>,
    layers: Vec<EncoderLayer>,
    pos_dim: usize,
}

impl Stack {
    fn load(weights: &Weights, prefix: &str, shape: &ZipformerShape, stack: &StackShape) -> Result<Self> {
        let (encoder, resampling) = if stack.downsample == 1 {
            (prefix.to_string(), None)
        } else {
            let bias = weights.dense(&format!("{prefix}.downsample.bias"), &[stack.downsample])?;
            let resampling = Resampling {
                factor: stack.downsample,
                weights: candle_nn::ops::softmax_last_dim(&bias)?.to_vec1()?,
                combiner: Bypass::load(weights, &format!("{prefix}.out_combiner.bypass_scale"), shape.dim)?,
            };
            (format!("{prefix}.encoder"), Some(resampling))
        };
        let time_projection = match shape.time_embed_dim {
            Some(time_dim) => Some(Linear::load(weights, &format!("{encoder}.time_emb.1"), time_dim, shape.dim, true)?),
            None => None,
        };
        let layers = (0..stack.layers)
            .map(|n| EncoderLayer::load(weights, &format!("{encoder}.layers.{n}"), shape, stack.kernel))
            .collect::<Result<_>>()?;
        Ok(Self { resampling, time_projection, layers, pos_dim: shape.pos_dim })
    }

    fn forward(&self, x: &Tensor, time: Option<&Tensor>, mask: Option<&PaddingMask>) -> Result<Tensor> {
        let time = match (&self.time_projection, time) {
            (Some(projection), Some(time)) => Some(projection.forward(&swoosh_r(time)?)?.squeeze(0)?),
            _ => None,
        };
        let Some(resampling) = &self.resampling else {
            return self.layers_forward(x.clone(), time.as_ref(), mask);
        };
        let slower_mask = mask.map(|m| m.every(resampling.factor));
        let slower = self.layers_forward(resampling.down(x)?, time.as_ref(), slower_mask.as_ref())?;
        resampling.combiner.forward(x, &resampling.up(&slower, x.dim(0)?)?)
    }

    fn layers_forward(&self, mut x: Tensor, time: Option<&Tensor>, mask: Option<&PaddingMask>) -> Result<Tensor> {
        let positions = relative_positions(x.dim(0)?, self.pos_dim, x.device())?;
        for layer in &self.layers {
            x = layer.forward(&x, &positions, time, mask)?;
        }
        Ok(x)
    }
}

/// The flow's time and guidance scale, for the decoder.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FlowTime {
    pub t: f32,
    pub guidance: f32,
}

pub struct Zipformer {
    in_proj: Linear,
    out_proj: Linear,
    time: Option<TimeEmbedding>,
    stacks: Vec<Stack>,
}

impl Zipformer {
    pub fn load(weights: &Weights, prefix: &str, shape: &ZipformerShape) -> Result<Self> {
        let time = match shape.time_embed_dim {
            Some(dim) => Some(TimeEmbedding::load(weights, prefix, dim, shape.guidance_embed)?),
            None => None,
        };
        let stacks = shape
            .stacks
            .iter()
            .enumerate()
            .map(|(i, stack)| Stack::load(weights, &format!("{prefix}.encoders.{i}"), shape, stack))
            .collect::<Result<_>>()?;
        Ok(Self {
            in_proj: Linear::load(weights, &format!("{prefix}.in_proj"), shape.in_dim, shape.dim, true)?,
            out_proj: Linear::load(weights, &format!("{prefix}.out_proj"), shape.dim, shape.out_dim, true)?,
            time,
            stacks,
        })
    }

    /// `x (frames, in_dim)` → `(frames, out_dim)`. `flow` is required by
    /// (and only by) a Zipformer with a time embedding.
    pub fn forward(&self, x: &Tensor, flow: Option<FlowTime>, mask: Option<&PaddingMask>) -> Result<Tensor> {
        self.forward_observed(x, flow, mask, &mut |_, _| Ok(()))
    }

    /// [`Self::forward`], handing each stack's output to `observe` (index, `(frames, dim)`).
    pub fn forward_observed(
        &self,
        x: &Tensor,
        flow: Option<FlowTime>,
        mask: Option<&PaddingMask>,
        observe: &mut dyn FnMut(usize, &Tensor) -> Result<()>,
    ) -> Result<Tensor> {
        let time = match (&self.time, flow) {
            (Some(embedding), Some(flow)) => Some(embedding.forward(flow.t, flow.guidance, x.device())?),
            (None, None) => None,
            (Some(_), None) => anyhow::bail!("this Zipformer needs the flow's time"),
            (None, Some(_)) => anyhow::bail!("this Zipformer has no time embedding"),
        };
        let mut x = self.in_proj.forward(x)?;
        for (i, stack) in self.stacks.iter().enumerate() {
            x = stack.forward(&x, time.as_ref(), mask)?;
            observe(i, &x)?;
        }
        self.out_proj.forward(&x)
    }

    /// The time embedding the stacks project, `(time_embed_dim)`.
    pub fn time_embedding(&self, flow: FlowTime, device: &Device) -> Result<Option<Tensor>> {
        match &self.time {
            Some(embedding) => Ok(Some(embedding.forward(flow.t, flow.guidance, device)?.squeeze(0)?)),
            None => Ok(None),
        }
    }
}
