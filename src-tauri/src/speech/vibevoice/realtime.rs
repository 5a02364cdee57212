//! VibeVoice-Realtime-0.5B (docs/vibevoice.md, "Realtime"): Qwen2.5-0.5B
//! split in two stacks. The lower layers read the text, five tokens at a
//! time; the upper layers read those layers' output, marked as text, and
//! after each window six frames of speech, each one made by the diffusion
//! head from the upper stack's last state (guided by a text-free twin of
//! that stack), decoded to audio at once, and read back as the next input
//! marked as speech. A small classifier on the upper stack's state says
//! when the speech is over. The voice is a preset: both stacks' caches
//! after the voice's prompt.

use super::config::RealtimeConfig;
use super::connector::SpeechConnector;
use super::diffusion_head::DiffusionHead;
use super::generate::{SpeechEnd, SpeechObserver, SpeechOutput, SpeechSettings};
use super::model::finite_scalar;
use super::scheduler::DpmSolver;
use super::speech_tokenizer::{Decoder as AudioDecoder, StreamState};
use super::tokenizer_source::tokenizer_dir;
use super::voice_preset::{PresetShape, VoicePreset};
use crate::models::config::HfConfig;
use crate::models::decoder::Decoder;
use crate::models::nn::kv_cache::KvCache;
use crate::models::nn::linear::Linear;
use crate::models::nn::norm::RmsNorm;
use crate::models::sources::folder::SafetensorsFolder;
use crate::models::sources::renamed::RenamedStore;
use crate::models::sources::selection::TensorSelection;
use crate::models::weights::{LoadPolicy, WeightStore, Weights};
use crate::speech::noise::NoiseSource;
use crate::text::tokenizer::TextTokenizer;
use anyhow::{bail, Context, Result};
use candle_core::{DType, Device, Tensor};
use std::path::Path;

/// Text tokens read before each run of speech frames.
pub const TEXT_WINDOW: usize = 5;
/// Speech frames made after each text window.
pub const SPEECH_WINDOW: usize = 6;
/// Above this probability the speech is over.
const END_PROBABILITY: f32 = 0.5;

/// `fc2(relu(fc1(h)))`: the logit that the speech is over.
struct EndClassifier {
    fc1: Linear,
    fc2: Linear,
}

impl EndClassifier {
    fn load(weights: &Weights, hidden: usize) -> Result<Self> {
        Ok(Self {
            fc1: Linear::load(weights, "tts_eos_classifier.fc1", hidden, hidden, true)?,
            fc2: Linear::load(weights, "tts_eos_classifier.fc2", hidden, 1, true)?,
        })
    }

    /// The probability, for each row of `h [n, hidden]`, that speech is over.
    fn probability(&self, h: &Tensor) -> Result<Tensor> {
        let logit = self.fc2.forward(&self.fc1.forward(h)?.relu()?)?;
        Ok(candle_nn::ops::sigmoid(&logit.to_dtype(DType::F32)?)?.flatten_all()?)
    }
}

/// A loaded VibeVoice-Realtime checkpoint.
pub struct VibeVoiceRealtime {
    pub config: RealtimeConfig,
    pub tokenizer: TextTokenizer,
    /// The lower layers, with the token embedding; no final norm.
    text_stack: Decoder,
    /// The upper layers (their own final norm is `speech_norm`).
    speech_stack: Decoder,
    speech_norm: RmsNorm,
    /// Added to every input of the upper stack: row 1 for text, 0 for speech.
    input_types: Tensor,
    pub acoustic_decoder: AudioDecoder,
    pub acoustic_connector: SpeechConnector,
    pub head: DiffusionHead,
    end_classifier: EndClassifier,
    /// `feature = (latent + bias) · scale`.
    scaling: f64,
    bias: f64,
}

/// Where each stack is in a generation.
struct Branches {
    text: KvCache,
    speech: KvCache,
    /// The text-free twin of the upper stack (guidance's negative side).
    negative: KvCache,
    /// The upper stack's last output, normed: the next frame's condition.
    speech_last: Tensor,
    negative_last: Tensor,
}

impl VibeVoiceRealtime {
    /// Loads the checkpoint in `dir` (microsoft/VibeVoice-Realtime-0.5B
    /// layout) with its tokenizer; computes in `dtype`.
    pub fn load(dir: &Path, dtype: DType) -> Result<Self> {
        let config = RealtimeConfig::from_dir(dir)?;
        let tokenizer = TextTokenizer::from_folder(&tokenizer_dir(dir, &crate::files::hf_cache::cache_dir())?)?;
        let open = || -> Result<Box<dyn WeightStore>> { Ok(Box::new(SafetensorsFolder::open(dir, |_| true)?)) };
        Self::load_from(config, tokenizer, &open, dtype).with_context(|| format!("{}", dir.display()))
    }

    /// Builds the model from the stores `open` gives (every tensor,
    /// checkpoint names; called once per part).
    pub fn load_from(
        config: RealtimeConfig,
        tokenizer: TextTokenizer,
        open: &dyn Fn() -> Result<Box<dyn WeightStore>>,
        dtype: DType,
    ) -> Result<Self> {
        let policy = LoadPolicy { dtype, keep_quantized: false };
        let stack = |prefix: &str, layers: usize, embedding: bool| -> Result<Decoder> {
            let text = serde_json::to_string(&config.stack_config(layers))?;
            let stack_config = crate::models::families::from_hf(&HfConfig::parse(&text)?)
                .context("decoder_config: the language model")?;
            let renamed = RenamedStore::new(open()?, &[("model.", prefix)]);
            let weights = Weights::new(Box::new(renamed), policy, Device::Cpu);
            let context = stack_config.max_position_embeddings;
            let selection = TensorSelection { layers: 0..layers, embedding, head: false };
            Decoder::load(stack_config, &weights, selection, context, &mut |_, _| {})
                .with_context(|| format!("loading {prefix}"))
        };
        let text_stack = stack("model.language_model.", config.text_layers(), true)?;
        let speech_stack = stack("model.tts_language_model.", config.speech_layers, false)?;
        let store = open()?;
        let origin = store.origin();
        let weights = Weights::new(store, policy, Device::Cpu);
        let hidden = text_stack.config.hidden_size;
        if config.diffusion_head.hidden_size != hidden {
            bail!("the diffusion head's hidden_size differs from the language model's ({hidden})");
        }
        let scalar = |name: &str| finite_scalar(&weights, &origin, name);
        Ok(Self {
            speech_norm: RmsNorm::load_for(
                &weights,
                "model.tts_language_model.norm.weight",
                hidden,
                &speech_stack.config,
            )?,
            input_types: weights.dense("model.tts_input_types.weight", &[2, hidden])?,
            acoustic_decoder: AudioDecoder::load(&weights, "model.acoustic_tokenizer.decoder", &config.acoustic)?,
            acoustic_connector: SpeechConnector::load(
                &weights,
                "model.acoustic_connector",
                config.acoustic.vae_dim,
                hidden,
            )?,
            head: DiffusionHead::load(&weights, "model.prediction_head", &config.diffusion_head)?,
            end_classifier: EndClassifier::load(&weights, hidden)?,
            scaling: scalar("model.speech_scaling_factor")?,
            bias: scalar("model.speech_bias_factor")?,
            text_stack,
            speech_stack,
            config,
            tokenizer,
        })
    }

    /// What a voice preset for this model must hold.
    pub fn preset_shape(&self) -> PresetShape {
        let c = &self.speech_stack.config;
        PresetShape {
            hidden: c.hidden_size,
            kv_heads: c.num_key_value_heads,
            head_dim: c.head_dim,
            text_layers: self.config.text_layers(),
            speech_layers: self.config.speech_layers,
            max_positions: self.speech_stack.context_length(),
        }
    }

    /// Audio samples per frame.
    pub fn hop(&self) -> usize {
        self.config.acoustic.hop()
    }

    /// A frame's latent `[1, latent]` (the head's normalised space) as the
    /// acoustic decoder reads it: `[1, latent, 1]`, raw.
    pub fn to_decoder_input(&self, latent: &Tensor) -> Result<Tensor> {
        Ok(((latent / self.scaling)? - self.bias)?.unsqueeze(2)?)
    }

    /// The text as the model reads it: its tokens, then a newline's.
    pub fn text_tokens(&self, text: &str) -> Result<Vec<u32>> {
        self.tokenizer.encode(&format!("{}\n", text.trim()), false)
    }

    /// The probability, for each row of `hidden [n, hidden]` (the upper
    /// stack's normed output), that the speech is over.
    pub fn end_probability(&self, hidden: &Tensor) -> Result<Tensor> {
        self.end_classifier.probability(hidden)
    }

    /// Speaks `text` in the voice of `preset`, drawing noise from `noise`;
    /// `observer` sees each frame as it is made (and may stop), then the
    /// probability that the speech is over after it.
    pub fn generate(
        &self,
        text: &str,
        preset: &VoicePreset,
        settings: &SpeechSettings,
        noise: &mut dyn NoiseSource,
        observer: &mut dyn SpeechObserver,
    ) -> Result<SpeechOutput> {
        let tokens = self.text_tokens(text)?;
        let solver = DpmSolver::new(settings.steps)?;
        let dtype = self.speech_stack.dtype();
        let mut branches = Branches {
            text: preset.lm.cache(&self.text_stack)?,
            speech: preset.tts_lm.cache(&self.speech_stack)?,
            negative: preset.neg_tts_lm.cache(&self.speech_stack)?,
            speech_last: preset.tts_lm.last_hidden.to_dtype(dtype)?.unsqueeze(0)?,
            negative_last: preset.neg_tts_lm.last_hidden.to_dtype(dtype)?.unsqueeze(0)?,
        };
        let context = self.speech_stack.context_length();
        let max_frames = settings.max_seconds.map(|s| {
            (s * crate::speech::voice_prompt::SAMPLE_RATE as f64 / self.hop() as f64).ceil().max(1.0) as usize
        });
        let mut stream = StreamState::default();
        let (mut audio, mut frames, mut end) = (Vec::new(), 0, SpeechEnd::Length);
        let mut windows = tokens.chunks(TEXT_WINDOW);
        'speaking: loop {
            if let Some(window) = windows.next() {
                if branches.speech.position() + window.len() > context {
                    break;
                }
                self.read_text(window, &mut branches)?;
            }
            for _ in 0..SPEECH_WINDOW {
                if branches.speech.position() + 1 > context {
                    break 'speaking;
                }
                let conditions = Tensor::cat(&[&branches.speech_last, &branches.negative_last], 0)?;
                observer.on_conditions(frames, &conditions);
                let latent = self.head.sample_guided(&solver, &conditions, settings.cfg_scale, noise)?;
                let raw = self.to_decoder_input(&latent)?;
                let chunk = self.acoustic_decoder.decode_stream(&raw, &mut stream)?;
                let samples: Vec<f32> = chunk.flatten_all()?.to_dtype(DType::F32)?.to_vec1()?;
                let flow = observer.on_frame(frames, &latent, &samples);
                audio.extend_from_slice(&samples);
                frames += 1;
                self.read_frame(&latent, &mut branches)?;
                let over = self.end_probability(&branches.speech_last)?.to_vec1::<f32>()?[0];
                observer.on_end_probability(frames - 1, over);
                if flow.is_break() {
                    end = SpeechEnd::Stopped;
                    break 'speaking;
                }
                if over > END_PROBABILITY {
                    end = SpeechEnd::EndOfText;
                    break 'speaking;
                }
                if max_frames.is_some_and(|m| frames >= m) {
                    break 'speaking;
                }
            }
        }
        Ok(SpeechOutput { audio, tokens, frames, end })
    }

    /// Reads a window of text: through the lower layers, then their output
    /// (marked as text) through the upper ones.
    fn read_text(&self, window: &[u32], branches: &mut Branches) -> Result<()> {
        let hidden = self.text_stack.forward_layers(&self.text_stack.embed(window)?, &mut branches.text)?;
        let marked = hidden.broadcast_add(&self.input_types.get(1)?)?;
        branches.speech_last = self.speech_step(&marked, &mut branches.speech)?;
        Ok(())
    }

    /// Reads a frame's latent back (marked as speech) into both upper
    /// branches at once: one row per branch through the upper stack, so
    /// its weights are read once for the two (each row attends to its own
    /// branch's cache).
    fn read_frame(&self, latent: &Tensor, branches: &mut Branches) -> Result<()> {
        let embedded = self.acoustic_connector.forward(&latent.unsqueeze(0)?)?;
        let marked = embedded.broadcast_add(&self.input_types.get(0)?)?;
        let rows = Tensor::cat(&[&marked, &marked], 1)?;
        let out =
            self.speech_stack.forward_layers_streams(&rows, &mut [&mut branches.speech, &mut branches.negative])?;
        let normed = self.speech_norm.forward(&out.squeeze(0)?)?;
        branches.speech_last = normed.narrow(0, 0, 1)?;
        branches.negative_last = normed.narrow(0, 1, 1)?;
        Ok(())
    }

    /// The upper stack over `input [1, t, hidden]` continuing `cache`: the
    /// last position's normed output `[1, hidden]`.
    fn speech_step(&self, input: &Tensor, cache: &mut KvCache) -> Result<Tensor> {
        let out = self.speech_stack.forward_layers(input, cache)?;
        let last = out.narrow(1, out.dim(1)? - 1, 1)?.squeeze(1)?;
        self.speech_norm.forward(&last)
    }
}
