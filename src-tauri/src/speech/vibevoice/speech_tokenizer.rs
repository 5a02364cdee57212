//! The speech tokenizers (docs/vibevoice.md §6): a causal convolutional
//! encoder from 24 kHz audio to one latent frame per `hop` samples, and (for
//! the acoustic tokenizer) the decoder back to audio. Both run on a whole
//! sequence or frame by frame with a [`StreamState`]; the results agree.

use super::causal_conv::{CausalConv1d, CausalConvTranspose1d, ConvState};
use super::config::TokenizerConfig;
use crate::models::nn::linear::Linear;
use crate::models::nn::norm::RmsNorm;
use crate::models::weights::Weights;
use anyhow::Result;
use candle_core::{DType, Tensor, D};

/// Kernel of the stem, the head and the blocks' depthwise mixer.
const KERNEL: usize = 7;

/// The per-convolution caches of one tokenizer while streaming.
#[derive(Default)]
pub struct StreamState {
    slots: Vec<ConvState>,
}

impl StreamState {
    /// Forgets everything (a new audio segment starts).
    pub fn reset(&mut self) {
        self.slots.clear();
    }

    fn slot(&mut self, index: usize) -> &mut ConvState {
        if self.slots.len() <= index {
            self.slots.resize_with(index + 1, || None);
        }
        &mut self.slots[index]
    }
}

/// A causal convolution and the slot of its cache in a [`StreamState`].
enum Conv {
    Plain(CausalConv1d, usize),
    Transposed(CausalConvTranspose1d, usize),
}

impl Conv {
    fn run(&self, x: &Tensor, state: Option<&mut StreamState>) -> Result<Tensor> {
        match (self, state) {
            (Self::Plain(conv, _), None) => conv.forward(x),
            (Self::Plain(conv, slot), Some(state)) => conv.forward_stream(x, state.slot(*slot)),
            (Self::Transposed(conv, _), None) => conv.forward(x),
            (Self::Transposed(conv, slot), Some(state)) => conv.forward_stream(x, state.slot(*slot)),
        }
    }
}

/// Numbers the convolutions of one tokenizer as they are built.
struct SlotCounter(usize);

impl SlotCounter {
    fn next(&mut self) -> usize {
        self.0 += 1;
        self.0 - 1
    }
}

/// Normalises over channels at each time step (`[B, C, T]` in and out).
fn channel_norm(norm: &RmsNorm, x: &Tensor) -> Result<Tensor> {
    Ok(norm.forward(&x.transpose(1, 2)?)?.transpose(1, 2)?)
}

/// A residual block: depthwise convolution, then a channel MLP, each
/// normalised first and scaled by a learned per-channel gain.
struct Block {
    norm: RmsNorm,
    mixer: Conv,
    gamma: Option<Tensor>,
    ffn_norm: RmsNorm,
    linear1: Linear,
    linear2: Linear,
    ffn_gamma: Option<Tensor>,
}

impl Block {
    fn load(
        weights: &Weights,
        prefix: &str,
        channels: usize,
        config: &TokenizerConfig,
        slots: &mut SlotCounter,
    ) -> Result<Self> {
        let gain = |name: &str| -> Result<Option<Tensor>> {
            if config.layer_scale {
                Ok(Some(weights.dense(&format!("{prefix}.{name}"), &[channels])?.reshape((1, channels, 1))?))
            } else {
                Ok(None)
            }
        };
        let mixer = CausalConv1d::load(
            weights,
            &format!("{prefix}.mixer.conv.conv.conv"),
            (channels, channels),
            KERNEL,
            1,
            channels,
        )?;
        Ok(Self {
            norm: RmsNorm::load(weights, &format!("{prefix}.norm.weight"), channels, config.norm_eps)?,
            mixer: Conv::Plain(mixer, slots.next()),
            gamma: gain("gamma")?,
            ffn_norm: RmsNorm::load(weights, &format!("{prefix}.ffn_norm.weight"), channels, config.norm_eps)?,
            linear1: Linear::load(weights, &format!("{prefix}.ffn.linear1"), channels, 4 * channels, true)?,
            linear2: Linear::load(weights, &format!("{prefix}.ffn.linear2"), 4 * channels, channels, true)?,
            ffn_gamma: gain("ffn_gamma")?,
        })
    }

    fn forward(&self, x: &Tensor, state: Option<&mut StreamState>) -> Result<Tensor> {
        let scaled = |y: Tensor, gain: &Option<Tensor>| -> Result<Tensor> {
            Ok(match gain {
                Some(g) => y.broadcast_mul(g)?,
                None => y,
            })
        };
        let mixed = self.mixer.run(&channel_norm(&self.norm, x)?, state)?;
        let x = (x + scaled(mixed, &self.gamma)?)?;
        let h = channel_norm(&self.ffn_norm, &x)?.transpose(1, 2)?;
        let h = self.linear2.forward(&gelu_erf(&self.linear1.forward(&h)?)?)?.transpose(1, 2)?;
        Ok((&x + scaled(h, &self.ffn_gamma)?)?)
    }
}

/// GELU with the exact (erf) form, as the reference's `nn.GELU()`. For f32
/// it uses Abramowitz and Stegun's 7.1.28, `erf(z) ≈ 1 − (1 + a₁z + … +
/// a₆z⁶)^−16` for z ≥ 0 (error below 3e-7), which vectorises: candle's
/// element-by-element `erf` was a fifth of the decoder's time per frame.
fn gelu_erf(x: &Tensor) -> Result<Tensor> {
    if x.dtype() != DType::F32 {
        return Ok(x.gelu_erf()?);
    }
    const A: [f32; 6] = [0.070_523_08, 0.042_282_01, 0.009_270_527, 0.000_152_014_3, 0.000_276_567_2, 0.000_043_063_8];
    let mut values = x.flatten_all()?.to_vec1::<f32>()?;
    for v in values.iter_mut() {
        let z = (*v * std::f32::consts::FRAC_1_SQRT_2).abs();
        let p = 1.0 + z * (A[0] + z * (A[1] + z * (A[2] + z * (A[3] + z * (A[4] + z * A[5])))));
        let p2 = p * p;
        let p4 = p2 * p2;
        let p8 = p4 * p4;
        let erf = (1.0 - 1.0 / (p8 * p8)).copysign(*v);
        *v = 0.5 * *v * (1.0 + erf);
    }
    Ok(Tensor::from_vec(values, x.shape(), x.device())?)
}

/// A resampling convolution followed by blocks.
struct Stage {
    resample: Conv,
    blocks: Vec<Block>,
}

fn run_stages(stages: &[Stage], x: &Tensor, mut state: Option<&mut StreamState>) -> Result<Tensor> {
    let mut x = x.clone();
    for stage in stages {
        x = stage.resample.run(&x, state.as_deref_mut())?;
        for block in &stage.blocks {
            x = block.forward(&x, state.as_deref_mut())?;
        }
    }
    Ok(x)
}

/// Audio `[B, 1, T]` → latent means `[B, ceil(T / hop), vae_dim]`.
pub struct Encoder {
    stages: Vec<Stage>,
    head: Conv,
}

impl Encoder {
    /// Loads the encoder under `prefix` (e.g. `model.acoustic_tokenizer.encoder`).
    pub fn load(weights: &Weights, prefix: &str, config: &TokenizerConfig) -> Result<Self> {
        let mut slots = SlotCounter(0);
        let width = |stage: usize| config.encoder_filters << stage;
        let mut stages = Vec::new();
        for (i, &depth) in config.encoder_depths.iter().enumerate() {
            let name = format!("{prefix}.downsample_layers.{i}.0.conv.conv");
            let resample = if i == 0 {
                CausalConv1d::load(weights, &name, (1, width(0)), KERNEL, 1, 1)?
            } else {
                let stride = config.encoder_strides[i - 1];
                CausalConv1d::load(weights, &name, (width(i - 1), width(i)), 2 * stride, stride, 1)?
            };
            let resample = Conv::Plain(resample, slots.next());
            let blocks = (0..depth)
                .map(|j| Block::load(weights, &format!("{prefix}.stages.{i}.{j}"), width(i), config, &mut slots))
                .collect::<Result<_>>()?;
            stages.push(Stage { resample, blocks });
        }
        let last = width(config.encoder_depths.len() - 1);
        let head =
            CausalConv1d::load(weights, &format!("{prefix}.head.conv.conv"), (last, config.vae_dim), KERNEL, 1, 1)?;
        Ok(Self { stages, head: Conv::Plain(head, slots.next()) })
    }

    /// The latent means of `audio [B, 1, T]`, channels-last.
    pub fn encode(&self, audio: &Tensor) -> Result<Tensor> {
        let x = run_stages(&self.stages, audio, None)?;
        Ok(self.head.run(&x, None)?.transpose(1, 2)?)
    }

    /// Like [`Self::encode`] for the next chunk of a stream (a multiple of the hop).
    pub fn encode_stream(&self, audio: &Tensor, state: &mut StreamState) -> Result<Tensor> {
        let x = run_stages(&self.stages, audio, Some(&mut *state))?;
        Ok(self.head.run(&x, Some(state))?.transpose(1, 2)?)
    }
}

/// Latents `[B, vae_dim, frames]` → audio `[B, 1, frames · hop]`.
pub struct Decoder {
    stages: Vec<Stage>,
    head: Conv,
}

impl Decoder {
    /// Loads the decoder under `prefix` (`model.acoustic_tokenizer.decoder`).
    pub fn load(weights: &Weights, prefix: &str, config: &TokenizerConfig) -> Result<Self> {
        let mut slots = SlotCounter(0);
        let count = config.decoder_depths.len();
        let width = |stage: usize| config.decoder_filters << (count - 1 - stage);
        let mut stages = Vec::new();
        for (i, &depth) in config.decoder_depths.iter().enumerate() {
            let resample = if i == 0 {
                let name = format!("{prefix}.upsample_layers.0.0.conv.conv");
                Conv::Plain(CausalConv1d::load(weights, &name, (config.vae_dim, width(0)), KERNEL, 1, 1)?, slots.next())
            } else {
                let stride = config.decoder_strides[i - 1];
                let name = format!("{prefix}.upsample_layers.{i}.0.convtr.convtr");
                let conv = CausalConvTranspose1d::load(weights, &name, (width(i - 1), width(i)), 2 * stride, stride)?;
                Conv::Transposed(conv, slots.next())
            };
            let blocks = (0..depth)
                .map(|j| Block::load(weights, &format!("{prefix}.stages.{i}.{j}"), width(i), config, &mut slots))
                .collect::<Result<_>>()?;
            stages.push(Stage { resample, blocks });
        }
        let head =
            CausalConv1d::load(weights, &format!("{prefix}.head.conv.conv"), (width(count - 1), 1), KERNEL, 1, 1)?;
        Ok(Self { stages, head: Conv::Plain(head, slots.next()) })
    }

    /// The audio of `latents [B, vae_dim, frames]` (raw latent space).
    pub fn decode(&self, latents: &Tensor) -> Result<Tensor> {
        let x = run_stages(&self.stages, latents, None)?;
        self.head.run(&x, None)
    }

    /// Like [`Self::decode`] for the next frames of a stream.
    pub fn decode_stream(&self, latents: &Tensor, state: &mut StreamState) -> Result<Tensor> {
        let x = run_stages(&self.stages, latents, Some(&mut *state))?;
        self.head.run(&x, Some(state))
    }
}

/// `[B, T, C]` channels-last latents as the decoder wants them.
pub fn channels_first(latents: &Tensor) -> Result<Tensor> {
    Ok(latents.transpose(D::Minus1, D::Minus2)?.contiguous()?)
}

#[cfg(test)]
mod tests {
    use super::gelu_erf;
    use candle_core::{Device, Tensor};

    #[test]
    fn the_fast_gelu_matches_the_exact_one() {
        let values: Vec<f32> = (-4000..=4000).map(|i| i as f32 / 400.0).chain([1e-8, -1e-8, 30.0, -30.0]).collect();
        let x = Tensor::new(values.as_slice(), &Device::Cpu).unwrap();
        let fast = gelu_erf(&x).unwrap().to_vec1::<f32>().unwrap();
        let exact = x.gelu_erf().unwrap().to_vec1::<f32>().unwrap();
        for ((v, f), e) in values.iter().zip(&fast).zip(&exact) {
            assert!((f - e).abs() <= 2e-6 * (1.0 + v.abs()), "gelu({v}): {f} against {e}");
        }
    }
}
