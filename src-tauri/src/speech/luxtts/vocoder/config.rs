//! The vocoder's `vocoder/config.yaml` (LinaCodec's Vocos): each part's
//! class and constructor arguments. Only the classes LuxTTS uses are
//! accepted, and sizes are checked before anything is allocated.

use crate::speech::luxtts::config::in_range;
use anyhow::{bail, Context, Result};
use serde::Deserialize;
use std::path::Path;

const MAX_DIM: usize = 1 << 14;

#[derive(Debug, Clone, Deserialize)]
struct Part<A> {
    class_path: String,
    init_args: A,
}

#[derive(Debug, Clone, Deserialize)]
struct RawBackbone {
    input_channels: usize,
    dim: usize,
    intermediate_dim: usize,
    num_layers: usize,
    #[serde(default)]
    adanorm_num_embeddings: Option<usize>,
}

#[derive(Debug, Clone, Deserialize)]
struct RawHead {
    dim: usize,
    n_fft: usize,
    hop_length: usize,
    #[serde(default = "same")]
    padding: String,
}

fn same() -> String {
    "same".into()
}

#[derive(Debug, Clone, Deserialize)]
struct RawUpsampler {
    in_channels: usize,
    upsample_factors: Vec<usize>,
    #[serde(default)]
    kernel_sizes: Option<Vec<usize>>,
}

#[derive(Debug, Clone, Deserialize)]
struct RawConfig {
    backbone: Part<RawBackbone>,
    head: Part<RawHead>,
    upsampler: Part<RawUpsampler>,
    head_48k: Part<RawHead>,
}

/// How an inverse STFT's frames are aligned with the signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Padding {
    /// Frame `t` is centred on sample `t · hop` (`torch.istft(center=True)`).
    Center,
    /// Half the window's overlap trimmed from each end (Vocos's "same").
    Same,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeadShape {
    pub dim: usize,
    pub n_fft: usize,
    pub hop: usize,
    pub padding: Padding,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VocoderConfig {
    pub mel_bands: usize,
    pub dim: usize,
    pub intermediate: usize,
    pub layers: usize,
    /// The 24 kHz head.
    pub head: HeadShape,
    /// `(factor, kernel)` of each transposed convolution before the 48 kHz head.
    pub upsampling: Vec<(usize, usize)>,
    pub head_48k: HeadShape,
}

impl VocoderConfig {
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
        Self::parse(&text).with_context(|| format!("{}: not a LuxTTS vocoder configuration", path.display()))
    }

    pub fn parse(text: &str) -> Result<Self> {
        let raw: RawConfig = serde_yaml::from_str(text)?;
        let classes = [
            ("backbone", &raw.backbone.class_path, "vocos.models.VocosBackbone"),
            ("head", &raw.head.class_path, "vocos.heads.ISTFTHead"),
            ("upsampler", &raw.upsampler.class_path, "linacodec.vocoder.upsampler_block.UpSamplerBlock"),
            ("head_48k", &raw.head_48k.class_path, "vocos.heads.ISTFTHead"),
        ];
        for (part, found, expected) in classes {
            if found != expected {
                bail!("{part} is a {found}; only {expected} is supported");
            }
        }
        let backbone = &raw.backbone.init_args;
        if backbone.adanorm_num_embeddings.is_some() {
            bail!("a backbone with adaptive layer norms is not supported");
        }
        let upsampler = &raw.upsampler.init_args;
        let kernels = upsampler.kernel_sizes.clone().unwrap_or_else(|| vec![8; upsampler.upsample_factors.len()]);
        if kernels.len() != upsampler.upsample_factors.len() {
            bail!("{} upsampling kernels for {} factors", kernels.len(), upsampler.upsample_factors.len());
        }
        let config = Self {
            mel_bands: backbone.input_channels,
            dim: backbone.dim,
            intermediate: backbone.intermediate_dim,
            layers: backbone.num_layers,
            head: head_shape(&raw.head.init_args)?,
            upsampling: upsampler.upsample_factors.iter().copied().zip(kernels).collect(),
            head_48k: head_shape(&raw.head_48k.init_args)?,
        };
        config.check(upsampler.in_channels)?;
        Ok(config)
    }

    fn check(&self, upsampler_channels: usize) -> Result<()> {
        for (name, value) in
            [("input_channels", self.mel_bands), ("dim", self.dim), ("intermediate_dim", self.intermediate)]
        {
            in_range(name, value, MAX_DIM)?;
        }
        in_range("num_layers", self.layers, 64)?;
        if upsampler_channels != self.dim || self.head.dim != self.dim || self.head_48k.dim != self.dim {
            bail!("the upsampler and both heads must be {} wide, as the backbone is", self.dim);
        }
        if self.upsampling.is_empty() || self.upsampling.len() > 4 {
            bail!("{} upsampling stages; 1 to 4 are supported", self.upsampling.len());
        }
        let narrowest = self.dim >> self.upsampling.len();
        if narrowest == 0 || narrowest << self.upsampling.len() != self.dim || !narrowest.is_multiple_of(32) {
            bail!("dim {} does not halve {} times into multiples of 32 (group norms)", self.dim, self.upsampling.len());
        }
        let mut rate = 1;
        for &(factor, kernel) in &self.upsampling {
            in_range("upsample_factors", factor, 16)?;
            in_range("kernel_sizes", kernel, 64)?;
            if kernel < factor || !(kernel - factor).is_multiple_of(2) {
                bail!("a kernel of {kernel} for a factor of {factor} does not upsample exactly");
            }
            rate *= factor;
        }
        if self.head_48k.hop * rate != 2 * self.head.hop {
            bail!(
                "the 48 kHz head's hop × the upsampling ({} × {rate}) must be twice the 24 kHz head's",
                self.head_48k.hop
            );
        }
        Ok(())
    }
}

fn head_shape(raw: &RawHead) -> Result<HeadShape> {
    in_range("n_fft", raw.n_fft, 1 << 16)?;
    in_range("hop_length", raw.hop_length, raw.n_fft)?;
    if !raw.n_fft.is_multiple_of(2) {
        bail!("n_fft {} must be even", raw.n_fft);
    }
    let padding = match raw.padding.as_str() {
        "center" => Padding::Center,
        "same" => Padding::Same,
        other => bail!("padding `{other}` is neither `center` nor `same`"),
    };
    Ok(HeadShape { dim: raw.dim, n_fft: raw.n_fft, hop: raw.hop_length, padding })
}
