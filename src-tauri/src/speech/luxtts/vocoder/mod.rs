//! LuxTTS's vocoder, LinaCodec's 48 kHz Vocos (docs/luxtts-research.md
//! §6): a ConvNeXt backbone over the mel features feeds two heads, one
//! making 24 kHz audio directly, one after an upsampler making 48 kHz
//! audio; the first is doubled in rate and supplies the band below
//! [`CROSSOVER_HZ`], the second the band above.
//!
//! - [`config`]: what `vocoder/config.yaml` says.
//! - [`istft`]: a head (predicted spectra, then an inverse STFT).
//! - [`upsampler`]: the transposed convolutions before the 48 kHz head.
//! - [`band_merge`]: the rate doubling and the crossover.

pub mod band_merge;
pub mod config;
pub mod istft;
pub mod upsampler;

use super::depthwise::DepthwiseConv;
use crate::models::nn::linear::Linear;
use crate::models::weights::Weights;
use anyhow::{bail, Result};
use candle_core::Tensor;
use config::VocoderConfig;
use istft::IstftHead;
use upsampler::Upsampler;

pub const SAMPLE_RATE: u32 = 48_000;
/// Where LuxTTS splits the two heads' bands (its `vocos.freq_range`).
pub const CROSSOVER_HZ: f64 = 12_000.0;
const NORM_EPS: f32 = 1e-6;
/// The width of the backbone's convolutions.
const KERNEL: usize = 7;

struct LayerNorm {
    weight: Tensor,
    bias: Tensor,
}

impl LayerNorm {
    fn load(weights: &Weights, prefix: &str, dim: usize) -> Result<Self> {
        Ok(Self {
            weight: weights.dense(&format!("{prefix}.weight"), &[dim])?,
            bias: weights.dense(&format!("{prefix}.bias"), &[dim])?,
        })
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        Ok(candle_nn::ops::layer_norm(x, &self.weight, &self.bias, NORM_EPS)?)
    }
}

/// `x + γ · pw₂(GELU(pw₁(LN(dw(x)))))`.
struct ConvNeXtBlock {
    depthwise: DepthwiseConv,
    norm: LayerNorm,
    pointwise1: Linear,
    pointwise2: Linear,
    gamma: Tensor,
    dim: usize,
}

impl ConvNeXtBlock {
    fn load(weights: &Weights, prefix: &str, dim: usize, intermediate: usize) -> Result<Self> {
        let at = |name: &str| format!("{prefix}.{name}");
        Ok(Self {
            depthwise: DepthwiseConv::load(weights, &at("dwconv"), dim, KERNEL)?,
            norm: LayerNorm::load(weights, &at("norm"), dim)?,
            pointwise1: Linear::load(weights, &at("pwconv1"), dim, intermediate, true)?,
            pointwise2: Linear::load(weights, &at("pwconv2"), intermediate, dim, true)?,
            gamma: weights.dense(&at("gamma"), &[dim])?,
            dim,
        })
    }

    /// `x (frames, dim)`.
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let frames = x.dim(0)?;
        let filtered = self.depthwise.forward(&x.flatten_all()?.to_vec1::<f32>()?);
        let h = self.norm.forward(&Tensor::from_vec(filtered, (frames, self.dim), x.device())?)?;
        let h = self.pointwise2.forward(&self.pointwise1.forward(&h)?.gelu_erf()?)?;
        Ok((x + h.broadcast_mul(&self.gamma)?)?)
    }
}

/// What the vocoder makes of a mel spectrogram, part by part.
pub struct VocoderParts {
    /// The backbone's features, `(frames, dim)`.
    pub backbone: Tensor,
    /// The 24 kHz head's audio.
    pub low_rate: Vec<f32>,
    /// That audio at 48 kHz.
    pub low_rate_doubled: Vec<f32>,
    /// The 48 kHz head's audio, trimmed to the doubled one's length.
    pub high_rate: Vec<f32>,
    /// The two joined: the vocoder's output.
    pub merged: Vec<f32>,
}

pub struct Vocoder {
    embed_weight: Tensor,
    embed_bias: Tensor,
    norm: LayerNorm,
    blocks: Vec<ConvNeXtBlock>,
    final_norm: LayerNorm,
    head: IstftHead,
    upsampler: Upsampler,
    head_48k: IstftHead,
    mel_bands: usize,
}

impl Vocoder {
    /// From `vocos.bin`'s tensors (`backbone.*`, `head.*`, `upsampler.*`, `head_48k.*`).
    pub fn load(weights: &Weights, config: &VocoderConfig) -> Result<Self> {
        let dim = config.dim;
        let blocks = (0..config.layers)
            .map(|i| ConvNeXtBlock::load(weights, &format!("backbone.convnext.{i}"), dim, config.intermediate))
            .collect::<Result<_>>()?;
        Ok(Self {
            embed_weight: weights.dense("backbone.embed.weight", &[dim, config.mel_bands, KERNEL])?,
            embed_bias: weights.dense("backbone.embed.bias", &[dim])?,
            norm: LayerNorm::load(weights, "backbone.norm", dim)?,
            blocks,
            final_norm: LayerNorm::load(weights, "backbone.final_layer_norm", dim)?,
            head: IstftHead::load(weights, "head", config.head)?,
            upsampler: Upsampler::load(weights, "upsampler", dim, &config.upsampling)?,
            head_48k: IstftHead::load(weights, "head_48k", config.head_48k)?,
            mel_bands: config.mel_bands,
        })
    }

    /// The backbone's features of `mel (frames, bands)` (natural-log magnitudes).
    fn backbone(&self, mel: &Tensor) -> Result<Tensor> {
        if mel.dim(1)? != self.mel_bands || mel.dim(0)? == 0 {
            bail!("the vocoder takes frames of {} mel bands, not {:?}", self.mel_bands, mel.dims());
        }
        let embedded = mel.t()?.unsqueeze(0)?.conv1d(&self.embed_weight, KERNEL / 2, 1, 1, 1)?.squeeze(0)?;
        let mut x = self.norm.forward(&embedded.t()?.broadcast_add(&self.embed_bias)?.contiguous()?)?;
        for block in &self.blocks {
            x = block.forward(&x)?;
        }
        self.final_norm.forward(&x)
    }

    pub fn decode_parts(&self, mel: &Tensor) -> Result<VocoderParts> {
        let backbone = self.backbone(mel)?;
        let low_rate = self.head.forward(&backbone)?;
        let low_rate_doubled = band_merge::double_rate(&low_rate);
        let mut high_rate = self.head_48k.forward(&self.upsampler.forward(&backbone)?)?;
        if high_rate.len() < low_rate_doubled.len() {
            bail!(
                "the 48 kHz head made {} samples, fewer than the {} of the other",
                high_rate.len(),
                low_rate_doubled.len()
            );
        }
        high_rate.truncate(low_rate_doubled.len());
        let merged = band_merge::merge_bands(&high_rate, &low_rate_doubled, CROSSOVER_HZ, SAMPLE_RATE as f64)?;
        Ok(VocoderParts { backbone, low_rate, low_rate_doubled, high_rate, merged })
    }

    /// 48 kHz samples of `mel (frames, bands)`.
    pub fn decode(&self, mel: &Tensor) -> Result<Vec<f32>> {
        Ok(self.decode_parts(mel)?.merged)
    }
}

/// LuxTTS's last touch: samples clamped to ±1, and quiet prompts' speech
/// made as quiet as they were (prompts were raised to `target_rms` first).
pub fn finish(samples: &mut [f32], prompt_rms: f32, target_rms: f32) {
    let gain = if prompt_rms < target_rms { prompt_rms / target_rms } else { 1.0 };
    for sample in samples {
        *sample = sample.clamp(-1.0, 1.0) * gain;
    }
}
