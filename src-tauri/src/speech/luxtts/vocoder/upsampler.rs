//! LinaCodec's upsampler (docs/luxtts-research.md §6): transposed
//! convolutions that raise the frame rate, each followed by a residual
//! block (group norm, Snake, convolution, twice), then a projection back
//! to the backbone's width and a last Snake. It feeds the 48 kHz head.

use crate::models::nn::linear::Linear;
use crate::models::weights::Weights;
use anyhow::Result;
use candle_core::{Tensor, D};

/// Channels per group in the group norms.
const GROUPS: usize = 32;
const NORM_EPS: f64 = 1e-6;

/// `x + sin²(αx) / (α + 1e-9)`, α per channel.
struct Snake {
    /// `(channels, 1)`.
    alpha: Tensor,
}

impl Snake {
    fn load(weights: &Weights, name: &str, channels: usize) -> Result<Self> {
        Ok(Self { alpha: weights.dense(name, &[1, channels, 1])?.reshape((channels, 1))? })
    }

    /// `x (channels, samples)`.
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let wave = x.broadcast_mul(&self.alpha)?.sin()?.sqr()?;
        Ok((x + wave.broadcast_div(&(&self.alpha + 1e-9)?)?)?)
    }
}

/// Group norm over `(channels, samples)`: each group of channels is
/// normalised over all its values, then scaled and shifted per channel.
struct GroupNorm {
    weight: Tensor,
    bias: Tensor,
}

impl GroupNorm {
    fn load(weights: &Weights, prefix: &str, channels: usize) -> Result<Self> {
        let per_channel = |name: &str| -> Result<Tensor> {
            Ok(weights.dense(&format!("{prefix}.{name}"), &[channels])?.reshape((channels, 1))?)
        };
        Ok(Self { weight: per_channel("weight")?, bias: per_channel("bias")? })
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let (channels, samples) = x.dims2()?;
        let grouped = x.reshape((GROUPS, channels / GROUPS * samples))?;
        let centred = grouped.broadcast_sub(&grouped.mean_keepdim(D::Minus1)?)?;
        let variance = centred.sqr()?.mean_keepdim(D::Minus1)?;
        let normalised = centred.broadcast_div(&(variance + NORM_EPS)?.sqrt()?)?.reshape((channels, samples))?;
        Ok(normalised.broadcast_mul(&self.weight)?.broadcast_add(&self.bias)?)
    }
}

/// A 3-tap convolution over time, zero-padded by one sample each side.
struct Conv3 {
    weight: Tensor,
    bias: Tensor,
}

impl Conv3 {
    fn load(weights: &Weights, prefix: &str, channels: usize) -> Result<Self> {
        Ok(Self {
            weight: weights.dense(&format!("{prefix}.weight"), &[channels, channels, 3])?,
            bias: weights.dense(&format!("{prefix}.bias"), &[channels])?.reshape((channels, 1))?,
        })
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        Ok(x.unsqueeze(0)?.conv1d(&self.weight, 1, 1, 1, 1)?.squeeze(0)?.broadcast_add(&self.bias)?)
    }
}

struct ResidualBlock {
    norm1: GroupNorm,
    snake1: Snake,
    conv1: Conv3,
    norm2: GroupNorm,
    snake2: Snake,
    conv2: Conv3,
}

impl ResidualBlock {
    fn load(weights: &Weights, prefix: &str, channels: usize) -> Result<Self> {
        let at = |name: &str| format!("{prefix}.{name}");
        Ok(Self {
            norm1: GroupNorm::load(weights, &at("norm1"), channels)?,
            snake1: Snake::load(weights, &at("snake1.alpha"), channels)?,
            conv1: Conv3::load(weights, &at("conv1"), channels)?,
            norm2: GroupNorm::load(weights, &at("norm2"), channels)?,
            snake2: Snake::load(weights, &at("snake2.alpha"), channels)?,
            conv2: Conv3::load(weights, &at("conv2"), channels)?,
        })
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let h = self.conv1.forward(&self.snake1.forward(&self.norm1.forward(x)?)?)?;
        let h = self.conv2.forward(&self.snake2.forward(&self.norm2.forward(&h)?)?)?;
        Ok((x + h)?)
    }
}

/// A transposed convolution raising the rate `factor` times, halving the channels.
struct UpStage {
    weight: Tensor,
    bias: Tensor,
    factor: usize,
    padding: usize,
    block: ResidualBlock,
}

pub struct Upsampler {
    stages: Vec<UpStage>,
    out_proj: Linear,
    final_snake: Snake,
}

impl Upsampler {
    /// `stages`: `(factor, kernel)` of each transposed convolution.
    pub fn load(weights: &Weights, prefix: &str, dim: usize, stages: &[(usize, usize)]) -> Result<Self> {
        let stages = stages
            .iter()
            .enumerate()
            .map(|(i, &(factor, kernel))| {
                let (inputs, outputs) = (dim >> i, dim >> (i + 1));
                let layer = format!("{prefix}.upsample_layers.{i}");
                Ok(UpStage {
                    weight: weights.dense(&format!("{layer}.weight"), &[inputs, outputs, kernel])?,
                    bias: weights.dense(&format!("{layer}.bias"), &[outputs])?.reshape((outputs, 1))?,
                    factor,
                    padding: (kernel - factor) / 2,
                    block: ResidualBlock::load(weights, &format!("{prefix}.resnet_blocks.{i}"), outputs)?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let narrowest = dim >> stages.len();
        Ok(Self {
            stages,
            out_proj: Linear::load(weights, &format!("{prefix}.out_proj"), narrowest, dim, true)?,
            final_snake: Snake::load(weights, &format!("{prefix}.final_snake.alpha"), dim)?,
        })
    }

    /// `x (frames, dim)` → `(frames · Π factors, dim)`.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let mut x = x.t()?.contiguous()?;
        for stage in &self.stages {
            let raised = x.unsqueeze(0)?.conv_transpose1d(&stage.weight, stage.padding, 0, stage.factor, 1, 1)?;
            x = stage.block.forward(&raised.squeeze(0)?.broadcast_add(&stage.bias)?)?;
        }
        let projected = self.out_proj.forward(&x.t()?.contiguous()?)?;
        Ok(self.final_snake.forward(&projected.t()?.contiguous()?)?.t()?.contiguous()?)
    }
}
