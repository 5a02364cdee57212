//! A loaded VibeVoice checkpoint: the Qwen2 language model, the speech
//! tokenizers, the connectors and the diffusion head, with the two scalars
//! that map acoustic latents to the normalised space the head works in.

use super::config::VibeVoiceConfig;
use super::connector::SpeechConnector;
use super::diffusion_head::DiffusionHead;
use super::processor::SpeechTokens;
use super::speech_tokenizer::{Decoder as AudioDecoder, Encoder};
use super::tokenizer_source::tokenizer_dir;
use crate::cluster::master::{ClusterSettings, LoadProgress};
use crate::models::config::HfConfig;
use crate::models::decoder::Decoder;
use crate::models::loader::{Checkpoint, LoadOptions};
use crate::models::pipeline::{LayerPipeline, RemoteStage};
use crate::models::sources::folder::SafetensorsFolder;
use crate::models::sources::renamed::RenamedStore;
use crate::models::sources::selection::TensorSelection;
use crate::models::weights::{LoadPolicy, WeightStore, Weights};
use crate::speech::noise::NoiseSource;
use crate::text::tokenizer::TextTokenizer;
use anyhow::{bail, Context, Result};
use candle_core::{DType, Device, Tensor};
use std::path::{Path, PathBuf};

pub struct VibeVoice {
    pub dir: PathBuf,
    pub config: VibeVoiceConfig,
    pub tokenizer: TextTokenizer,
    pub tokens: SpeechTokens,
    /// The Qwen2 language model: here, or split over this machine and workers.
    pub language_model: LayerPipeline,
    pub acoustic_encoder: Encoder,
    pub acoustic_decoder: AudioDecoder,
    pub semantic_encoder: Encoder,
    pub acoustic_connector: SpeechConnector,
    pub semantic_connector: SpeechConnector,
    pub head: DiffusionHead,
    /// `feature = (latent + bias) · scale`.
    pub scaling: f64,
    pub bias: f64,
}

impl VibeVoice {
    /// Loads the checkpoint in `dir` (microsoft/VibeVoice-1.5B layout) with
    /// its tokenizer; computes in `dtype`.
    pub fn load(dir: &Path, dtype: DType) -> Result<Self> {
        let checkpoint = Checkpoint::open(dir)?;
        let everything = TensorSelection::all(checkpoint.config().num_hidden_layers());
        Self::load_part(dir, &checkpoint, dtype, everything, Vec::new(), &mut |_, _| {})
    }

    /// Loads the checkpoint in `dir` with only the language model's
    /// `selection` on this machine and its later layers on `remote_stages`
    /// (already loaded there); the speech parts all load here.
    pub fn load_part(
        dir: &Path,
        checkpoint: &Checkpoint,
        dtype: DType,
        selection: TensorSelection,
        remote_stages: Vec<RemoteStage>,
        on_layer: &mut dyn FnMut(usize, usize),
    ) -> Result<Self> {
        let config = VibeVoiceConfig::from_dir(dir)?;
        let tokenizer = TextTokenizer::from_folder(&tokenizer_dir(dir, &crate::files::hf_cache::cache_dir())?)?;
        let options = LoadOptions { dtype: Some(dtype), ..Default::default() };
        let decoder = checkpoint
            .load_decoder_with_progress(Some(selection), &options, on_layer)
            .context("loading the language model")?;
        let layout = checkpoint.layout();
        let speech_parts = SafetensorsFolder::open(dir, |name| layout.decoder_name(name).is_none())?;
        let language_model = LayerPipeline::new(decoder, remote_stages);
        let mut model = Self::assemble(config, tokenizer, Box::new(speech_parts), language_model, dtype)?;
        model.dir = dir.to_path_buf();
        Ok(model)
    }

    /// Loads the checkpoint in `dir` with the language model's layers spread
    /// over this machine and `cluster`'s workers (as a text model's are).
    pub fn load_over(cluster: &ClusterSettings, dir: &Path, dtype: DType, on_progress: LoadProgress) -> Result<Self> {
        let options = LoadOptions { dtype: Some(dtype), ..Default::default() };
        cluster.load_with(dir, &options, &[], on_progress, |part| {
            let model =
                Self::load_part(dir, part.checkpoint, dtype, part.selection, part.remote_stages, part.on_layer)?;
            let local_nanos = model.language_model.local_nanos.clone();
            Ok((model, local_nanos))
        })
    }

    /// Builds the model from `store` (every tensor, checkpoint names) and
    /// `lm_store` (the language model's tensors, which may be the same store).
    pub fn load_from(
        config: VibeVoiceConfig,
        tokenizer: TextTokenizer,
        store: Box<dyn WeightStore>,
        lm_store: Box<dyn WeightStore>,
        dtype: DType,
    ) -> Result<Self> {
        let policy = LoadPolicy { dtype, keep_quantized: false };
        let lm_text = serde_json::to_string(&config.language_model)?;
        let lm_config = crate::models::families::from_hf(&HfConfig::parse(&lm_text)?)
            .context("decoder_config: the language model")?;
        // The language model's tensors are nested under `model.language_model.`.
        let lm_weights = Weights::new(
            Box::new(RenamedStore::new(lm_store, &[("model.", "model.language_model.")])),
            policy,
            Device::Cpu,
        );
        let (layers, context) = (lm_config.num_hidden_layers(), lm_config.max_position_embeddings);
        let decoder = Decoder::load(lm_config, &lm_weights, TensorSelection::all(layers), context, &mut |_, _| {})
            .context("loading the language model")?;
        Self::assemble(config, tokenizer, store, LayerPipeline::local(decoder), dtype)
    }

    /// The model around a loaded language model; the speech parts come from
    /// `store` (checkpoint names).
    fn assemble(
        config: VibeVoiceConfig,
        tokenizer: TextTokenizer,
        store: Box<dyn WeightStore>,
        language_model: LayerPipeline,
        dtype: DType,
    ) -> Result<Self> {
        let origin = store.origin();
        let tokens = SpeechTokens::from_tokenizer(&tokenizer)?;
        let policy = LoadPolicy { dtype, keep_quantized: false };
        let weights = Weights::new(store, policy, Device::Cpu);
        let hidden = language_model.decoder.config.hidden_size;
        if config.diffusion_head.hidden_size != hidden {
            bail!("the diffusion head's hidden_size differs from the language model's ({hidden})");
        }
        let scalar = |name: &str| finite_scalar(&weights, &origin, name);
        Ok(Self {
            acoustic_encoder: Encoder::load(&weights, "model.acoustic_tokenizer.encoder", &config.acoustic)?,
            acoustic_decoder: AudioDecoder::load(&weights, "model.acoustic_tokenizer.decoder", &config.acoustic)?,
            semantic_encoder: Encoder::load(&weights, "model.semantic_tokenizer.encoder", &config.semantic)?,
            acoustic_connector: SpeechConnector::load(
                &weights,
                "model.acoustic_connector",
                config.acoustic.vae_dim,
                hidden,
            )?,
            semantic_connector: SpeechConnector::load(
                &weights,
                "model.semantic_connector",
                config.semantic.vae_dim,
                hidden,
            )?,
            head: DiffusionHead::load(&weights, "model.prediction_head", &config.diffusion_head)?,
            scaling: scalar("model.speech_scaling_factor")?,
            bias: scalar("model.speech_bias_factor")?,
            dir: PathBuf::from(origin),
            config,
            tokenizer,
            tokens,
            language_model,
        })
    }

    /// Audio samples per latent frame.
    pub fn hop(&self) -> usize {
        self.config.acoustic.hop()
    }

    pub fn device(&self) -> &Device {
        self.language_model.decoder.device()
    }

    /// Embeddings of the voice prompts' frames, voice after voice:
    /// `[Σ frames, hidden]`. Draws the acoustic posterior's noise (two draws).
    pub fn voice_embeddings(
        &self,
        voices: &[Vec<f32>],
        frames: &[usize],
        noise: &mut dyn NoiseSource,
    ) -> Result<Tensor> {
        let longest = voices.iter().map(Vec::len).max().unwrap_or(0);
        let padded: Vec<f32> =
            voices.iter().flat_map(|v| v.iter().copied().chain(std::iter::repeat_n(0.0, longest - v.len()))).collect();
        let dtype = self.language_model.decoder.dtype();
        let audio = Tensor::from_vec(padded, (voices.len(), 1, longest), self.device())?.to_dtype(dtype)?;
        let mean = self.acoustic_encoder.encode(&audio)?;
        // The acoustic posterior: one std scale per voice, then per-element noise.
        let spread =
            noise.normal(&[voices.len()], self.device())?.to_dtype(dtype)? * (self.config.acoustic.fix_std / 0.8);
        let per_element = noise.normal(mean.dims(), self.device())?.to_dtype(dtype)?;
        let latent = if self.config.acoustic.gaussian {
            (&mean + per_element.broadcast_mul(&spread?.reshape((voices.len(), 1, 1))?)?)?
        } else {
            mean
        };
        let features = self.to_features(&latent)?;
        let embedded = self.acoustic_connector.forward(&features)?;
        let rows: Vec<Tensor> = frames
            .iter()
            .enumerate()
            .map(|(k, &n)| embedded.get(k)?.narrow(0, 0, n))
            .collect::<candle_core::Result<_>>()?;
        Ok(Tensor::cat(&rows, 0)?)
    }

    /// Raw acoustic latents → the normalised space.
    pub fn to_features(&self, latent: &Tensor) -> Result<Tensor> {
        Ok(((latent + self.bias)? * self.scaling)?)
    }

    /// Normalised features → raw acoustic latents.
    pub fn to_latents(&self, features: &Tensor) -> Result<Tensor> {
        Ok(((features / self.scaling)? - self.bias)?)
    }
}

/// The scalar tensor `name` (a speech scaling factor), which must be a
/// finite number; `origin` names the checkpoint in the error.
pub(super) fn finite_scalar(weights: &Weights, origin: &str, name: &str) -> Result<f64> {
    let value = weights.dense(name, &[])?.to_dtype(DType::F32)?.to_scalar::<f32>()? as f64;
    if !value.is_finite() {
        bail!("{origin}: `{name}` is not a finite number (an untrained checkpoint?)");
    }
    Ok(value)
}
