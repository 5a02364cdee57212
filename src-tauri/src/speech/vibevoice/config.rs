//! VibeVoice's `config.json`: the Qwen2 language model under
//! `decoder_config`, the two speech tokenizers and the diffusion head.
//! Values the implementation does not support are refused by name.

use anyhow::{bail, Context, Result};
use serde::Deserialize;
use std::path::Path;

/// Blocks per stage: `"3-3-3-8"` in the released configs, or a list.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum Depths {
    Text(String),
    List(Vec<usize>),
}

impl Depths {
    fn parse(&self) -> Result<Vec<usize>> {
        match self {
            Self::List(list) => Ok(list.clone()),
            Self::Text(text) => text
                .split('-')
                .map(|p| p.trim().parse::<usize>().with_context(|| format!("depths `{text}`: `{p}` is not a number")))
                .collect(),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
struct RawTokenizerConfig {
    #[serde(default = "one")]
    channels: usize,
    vae_dim: usize,
    encoder_n_filters: usize,
    encoder_ratios: Vec<usize>,
    encoder_depths: Depths,
    #[serde(default)]
    decoder_n_filters: Option<usize>,
    #[serde(default)]
    decoder_ratios: Option<Vec<usize>>,
    #[serde(default)]
    decoder_depths: Option<Depths>,
    #[serde(default)]
    fix_std: f64,
    #[serde(default = "gaussian")]
    std_dist_type: String,
    #[serde(default = "yes")]
    causal: bool,
    #[serde(default = "none")]
    conv_norm: String,
    #[serde(default = "depthwise")]
    mixer_layer: String,
    #[serde(default = "rms")]
    layernorm: String,
    #[serde(default = "eps5")]
    layernorm_eps: f64,
    #[serde(default = "yes")]
    disable_last_norm: bool,
    #[serde(default = "yes")]
    conv_bias: bool,
    #[serde(default = "scale")]
    layer_scale_init_value: f64,
}

fn one() -> usize {
    1
}
fn yes() -> bool {
    true
}
fn gaussian() -> String {
    "gaussian".into()
}
fn none() -> String {
    "none".into()
}
fn depthwise() -> String {
    "depthwise_conv".into()
}
fn rms() -> String {
    "RMSNorm".into()
}
fn eps5() -> f64 {
    1e-5
}
fn scale() -> f64 {
    1e-6
}

/// One speech tokenizer (the acoustic VAE or the semantic encoder).
#[derive(Debug, Clone, PartialEq)]
pub struct TokenizerConfig {
    /// Latent size per frame.
    pub vae_dim: usize,
    pub encoder_filters: usize,
    /// Encoder strides in the order the encoder applies them.
    pub encoder_strides: Vec<usize>,
    pub encoder_depths: Vec<usize>,
    pub decoder_filters: usize,
    /// Decoder strides in the order the decoder applies them.
    pub decoder_strides: Vec<usize>,
    pub decoder_depths: Vec<usize>,
    /// Std scale of the acoustic posterior (0 for the semantic encoder).
    pub fix_std: f64,
    /// `gaussian` (sample around the mean) or `none` (the mean itself).
    pub gaussian: bool,
    pub norm_eps: f64,
    /// Blocks scale their branches by learned `gamma` vectors.
    pub layer_scale: bool,
}

impl TokenizerConfig {
    fn from_raw(raw: RawTokenizerConfig, what: &str) -> Result<Self> {
        let unsupported =
            |field: &str, value: &dyn std::fmt::Debug| anyhow::anyhow!("{what}: {field} = {value:?} is not supported");
        if raw.channels != 1 {
            return Err(unsupported("channels", &raw.channels));
        }
        if !raw.causal {
            return Err(unsupported("causal", &raw.causal));
        }
        if raw.conv_norm != "none" {
            return Err(unsupported("conv_norm", &raw.conv_norm));
        }
        if raw.mixer_layer != "depthwise_conv" {
            return Err(unsupported("mixer_layer", &raw.mixer_layer));
        }
        if raw.layernorm != "RMSNorm" {
            return Err(unsupported("layernorm", &raw.layernorm));
        }
        if !raw.disable_last_norm {
            return Err(unsupported("disable_last_norm", &raw.disable_last_norm));
        }
        if !raw.conv_bias {
            return Err(unsupported("conv_bias", &raw.conv_bias));
        }
        let gaussian = match raw.std_dist_type.as_str() {
            "gaussian" => true,
            "none" => false,
            other => return Err(unsupported("std_dist_type", &other)),
        };
        let encoder_depths = raw.encoder_depths.parse()?;
        if encoder_depths.len() != raw.encoder_ratios.len() + 1 {
            bail!("{what}: encoder_depths needs one stage more than encoder_ratios");
        }
        if raw.encoder_ratios.contains(&0) || raw.vae_dim == 0 || raw.encoder_n_filters == 0 {
            bail!("{what}: ratios, vae_dim and filters must be positive");
        }
        let decoder_strides = raw.decoder_ratios.clone().unwrap_or_else(|| raw.encoder_ratios.clone());
        let decoder_depths = match &raw.decoder_depths {
            Some(d) => d.parse()?,
            None => encoder_depths.iter().rev().copied().collect(),
        };
        if decoder_depths.len() != decoder_strides.len() + 1 || decoder_strides.contains(&0) {
            bail!("{what}: decoder depths and ratios do not fit together");
        }
        Ok(Self {
            vae_dim: raw.vae_dim,
            encoder_filters: raw.encoder_n_filters,
            encoder_strides: raw.encoder_ratios.iter().rev().copied().collect(),
            encoder_depths,
            decoder_filters: raw.decoder_n_filters.unwrap_or(raw.encoder_n_filters),
            decoder_strides,
            decoder_depths,
            fix_std: raw.fix_std,
            gaussian,
            norm_eps: raw.layernorm_eps,
            layer_scale: raw.layer_scale_init_value > 0.0,
        })
    }

    /// Audio samples per latent frame (the product of the strides).
    pub fn hop(&self) -> usize {
        self.encoder_strides.iter().product()
    }
}

/// The diffusion head and its sampler.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct DiffusionHeadConfig {
    pub hidden_size: usize,
    pub head_layers: usize,
    pub head_ffn_ratio: f64,
    pub rms_norm_eps: f64,
    pub latent_size: usize,
    #[serde(default = "v_prediction")]
    pub prediction_type: String,
    #[serde(default = "thousand")]
    pub ddpm_num_steps: usize,
    #[serde(default = "cosine")]
    pub ddpm_beta_schedule: String,
    #[serde(default = "twenty")]
    pub ddpm_num_inference_steps: usize,
}

fn v_prediction() -> String {
    "v_prediction".into()
}
fn thousand() -> usize {
    1000
}
fn cosine() -> String {
    "cosine".into()
}
fn twenty() -> usize {
    20
}

impl DiffusionHeadConfig {
    /// The FFN width of a head layer.
    pub fn ffn_size(&self) -> usize {
        (self.hidden_size as f64 * self.head_ffn_ratio) as usize
    }
}

#[derive(Deserialize)]
struct RawConfig {
    decoder_config: serde_json::Value,
    acoustic_tokenizer_config: RawTokenizerConfig,
    semantic_tokenizer_config: RawTokenizerConfig,
    diffusion_head_config: DiffusionHeadConfig,
    #[serde(default)]
    acoustic_vae_dim: Option<usize>,
    #[serde(default)]
    semantic_vae_dim: Option<usize>,
}

/// Refuses a diffusion head the implementation does not support or whose
/// latent does not match the acoustic tokenizer's.
fn check_head(head: &DiffusionHeadConfig, acoustic: &TokenizerConfig) -> Result<()> {
    if head.prediction_type != "v_prediction" {
        bail!("diffusion_head_config: prediction_type {:?} is not supported", head.prediction_type);
    }
    if head.ddpm_beta_schedule != "cosine" {
        bail!("diffusion_head_config: ddpm_beta_schedule {:?} is not supported", head.ddpm_beta_schedule);
    }
    if head.latent_size != acoustic.vae_dim {
        bail!(
            "the diffusion head's latent_size {} differs from the acoustic vae_dim {}",
            head.latent_size,
            acoustic.vae_dim
        );
    }
    Ok(())
}

/// A VibeVoice checkpoint's configuration.
#[derive(Debug, Clone)]
pub struct VibeVoiceConfig {
    /// The Qwen2 language model's config (a transformers config object).
    pub language_model: serde_json::Value,
    pub acoustic: TokenizerConfig,
    pub semantic: TokenizerConfig,
    pub diffusion_head: DiffusionHeadConfig,
}

impl VibeVoiceConfig {
    /// Reads and checks `config.json` in `dir`.
    pub fn from_dir(dir: &Path) -> Result<Self> {
        let path = dir.join("config.json");
        let text = std::fs::read_to_string(&path).with_context(|| format!("{}: cannot read", path.display()))?;
        Self::parse(&text).with_context(|| format!("{}: not a usable VibeVoice config", path.display()))
    }

    pub fn parse(text: &str) -> Result<Self> {
        let raw: RawConfig = serde_json::from_str(text)?;
        let mut acoustic = TokenizerConfig::from_raw(raw.acoustic_tokenizer_config, "acoustic_tokenizer_config")?;
        let mut semantic = TokenizerConfig::from_raw(raw.semantic_tokenizer_config, "semantic_tokenizer_config")?;
        // A top-level size wins over the sub-config's (as in the reference).
        if let Some(d) = raw.acoustic_vae_dim {
            acoustic.vae_dim = d;
        }
        if let Some(d) = raw.semantic_vae_dim {
            semantic.vae_dim = d;
        }
        let head = raw.diffusion_head_config;
        check_head(&head, &acoustic)?;
        if acoustic.hop() != semantic.hop() {
            bail!(
                "the acoustic and semantic tokenizers have different hops ({} and {})",
                acoustic.hop(),
                semantic.hop()
            );
        }
        Ok(Self { language_model: raw.decoder_config, acoustic, semantic, diffusion_head: head })
    }
}

/// Which VibeVoice a checkpoint folder holds, from its `config.json`'s
/// `model_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// VibeVoice-1.5B (`vibevoice`): voices from WAV prompts.
    Standard,
    /// VibeVoice-Realtime-0.5B (`vibevoice_streaming`): voices from presets,
    /// text read in windows while speech comes out.
    Realtime,
}

impl Variant {
    /// The variant `config_text` describes, if it is a VibeVoice config.
    pub fn of_config(config_text: &str) -> Option<Self> {
        let value: serde_json::Value = serde_json::from_str(config_text).ok()?;
        match value["model_type"].as_str()? {
            "vibevoice" => Some(Self::Standard),
            "vibevoice_streaming" => Some(Self::Realtime),
            _ => None,
        }
    }
}

#[derive(Deserialize)]
struct RawRealtimeConfig {
    decoder_config: serde_json::Value,
    acoustic_tokenizer_config: RawTokenizerConfig,
    diffusion_head_config: DiffusionHeadConfig,
    #[serde(default = "twenty_layers")]
    tts_backbone_num_hidden_layers: usize,
    #[serde(default)]
    acoustic_vae_dim: Option<usize>,
}

fn twenty_layers() -> usize {
    20
}

/// VibeVoice-Realtime's configuration: one Qwen2 config split into lower
/// layers that read text and upper layers that read text and speech.
#[derive(Debug, Clone)]
pub struct RealtimeConfig {
    /// The whole Qwen2 model's config (a transformers config object).
    pub language_model: serde_json::Value,
    /// Layers of the upper (speech) stack; the rest are the text stack's.
    pub speech_layers: usize,
    pub acoustic: TokenizerConfig,
    pub diffusion_head: DiffusionHeadConfig,
}

impl RealtimeConfig {
    /// Reads and checks `config.json` in `dir`.
    pub fn from_dir(dir: &Path) -> Result<Self> {
        let path = dir.join("config.json");
        let text = std::fs::read_to_string(&path).with_context(|| format!("{}: cannot read", path.display()))?;
        Self::parse(&text).with_context(|| format!("{}: not a usable VibeVoice-Realtime config", path.display()))
    }

    pub fn parse(text: &str) -> Result<Self> {
        let raw: RawRealtimeConfig = serde_json::from_str(text)?;
        let mut acoustic = TokenizerConfig::from_raw(raw.acoustic_tokenizer_config, "acoustic_tokenizer_config")?;
        if let Some(d) = raw.acoustic_vae_dim {
            acoustic.vae_dim = d;
        }
        check_head(&raw.diffusion_head_config, &acoustic)?;
        let total = raw.decoder_config["num_hidden_layers"]
            .as_u64()
            .context("decoder_config: num_hidden_layers is missing")? as usize;
        let speech_layers = raw.tts_backbone_num_hidden_layers;
        if speech_layers == 0 || speech_layers >= total {
            bail!("tts_backbone_num_hidden_layers {speech_layers} leaves no text or no speech layers of {total}");
        }
        Ok(Self {
            language_model: raw.decoder_config,
            speech_layers,
            acoustic,
            diffusion_head: raw.diffusion_head_config,
        })
    }

    /// Layers of the lower (text) stack.
    pub fn text_layers(&self) -> usize {
        self.language_model["num_hidden_layers"].as_u64().unwrap_or(0) as usize - self.speech_layers
    }

    /// The Qwen2 config of a stack of `layers` layers.
    pub fn stack_config(&self, layers: usize) -> serde_json::Value {
        let mut config = self.language_model.clone();
        config["num_hidden_layers"] = layers.into();
        if config.get("max_window_layers").is_some() {
            config["max_window_layers"] = layers.into();
        }
        config
    }
}
