//! LuxTTS end to end, as its `generate` runs on the PyTorch route: a voice
//! prompt (24 kHz audio and its transcript's tokens) and the text's tokens
//! become features by the sampler, and 48 kHz speech by the vocoder.

use super::acoustic::AcousticModel;
use super::config::LuxConfig;
use super::mel::{log_mel, raise_to_rms, MEL_BANDS, SAMPLE_RATE};
use super::sampler::{sample, FlowSchedule};
use super::tokens::TokenTable;
use super::vocoder::config::VocoderConfig;
use super::vocoder::{finish, Vocoder};
use super::zipformer::FlowTime;
use crate::models::sources::torch_checkpoint::TorchCheckpoint;
use crate::models::weights::{LoadPolicy, Weights};
use crate::speech::noise::NoiseSource;
use anyhow::{bail, Context, Result};
use candle_core::{DType, Device, Tensor};
use std::ops::ControlFlow;
use std::path::Path;

/// LuxTTS reads only the start of the prompt: this many seconds.
pub const PROMPT_SECONDS: usize = 5;
/// Prompts quieter than this are raised to it before their features are taken.
const PROMPT_RMS: f32 = 0.001;
/// Speech is made as loud as a prompt of this level; quieter prompts' speech is lowered to theirs.
const OUTPUT_RMS: f32 = 0.1;
/// The features are the log-mel values times this.
const FEATURE_SCALE: f64 = 0.1;
/// LuxTTS speaks 1.3 times faster than the rate the prompt implies.
const SPEED_FACTOR: f32 = 1.3;

/// How the sampler runs (LuxTTS's defaults).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settings {
    pub steps: usize,
    pub guidance: f32,
    pub t_shift: f32,
    /// 1 is the prompt's own pace (times LuxTTS's 1.3).
    pub speed: f32,
}

impl Default for Settings {
    fn default() -> Self {
        Self { steps: 4, guidance: 3.0, t_shift: 0.5, speed: 1.0 }
    }
}

/// A voice to imitate, ready for the model.
pub struct VoicePrompt {
    /// `(frames, 100)`, scaled.
    features: Tensor,
    rms: f32,
    tokens: Vec<u32>,
}

/// Speech made from a text.
pub struct Spoken {
    /// The log-mel features spoken, `(frames, 100)`.
    pub mel: Tensor,
    /// 48 kHz samples: [`OUTPUT_SAMPLES_PER_FRAME`] per feature frame after the first.
    pub samples: Vec<f32>,
}

/// Output samples per feature frame (256 at 24 kHz, twice that at 48 kHz).
pub const OUTPUT_SAMPLES_PER_FRAME: usize = 512;

pub struct LuxTts {
    acoustic: AcousticModel,
    vocoder: Vocoder,
    pub tokens: TokenTable,
}

impl LuxTts {
    /// A folder in LuxTTS's Hub layout: `config.json`, `tokens.txt`,
    /// `model.pt`, `vocoder/config.yaml`, `vocoder/vocos.bin`.
    pub fn load(dir: &Path) -> Result<Self> {
        let config = LuxConfig::load(&dir.join("config.json"))?;
        let tokens = TokenTable::load(&dir.join("tokens.txt"))?;
        let vocoder_config = VocoderConfig::load(&dir.join("vocoder/config.yaml"))?;
        if config.feat_dim != MEL_BANDS || vocoder_config.mel_bands != MEL_BANDS {
            bail!(
                "{}: the model works on {} and the vocoder on {} mel bands; LuxTTS's features have {MEL_BANDS}",
                dir.display(),
                config.feat_dim,
                vocoder_config.mel_bands
            );
        }
        let policy = LoadPolicy { dtype: DType::F32, keep_quantized: false };
        let weights = |file: &str, key: Option<&str>| -> Result<Weights> {
            let store = TorchCheckpoint::open(&dir.join(file), key)?;
            Ok(Weights::new(Box::new(store), policy, Device::Cpu))
        };
        let acoustic = AcousticModel::load(&weights("model.pt", Some("model"))?, &config, &tokens)?;
        let vocoder = Vocoder::load(&weights("vocoder/vocos.bin", None)?, &vocoder_config)?;
        Ok(Self { acoustic, vocoder, tokens })
    }

    /// A prompt from 24 kHz `samples` (only the first [`PROMPT_SECONDS`]
    /// are used) and its transcript's `tokens`.
    pub fn prompt(&self, samples: &[f32], tokens: Vec<u32>) -> Result<VoicePrompt> {
        if tokens.is_empty() {
            bail!("the voice prompt needs its transcript");
        }
        let samples = &samples[..samples.len().min(PROMPT_SECONDS * SAMPLE_RATE as usize)];
        let loudness = raise_to_rms(samples, PROMPT_RMS);
        let features = (log_mel(&loudness.samples, &Device::Cpu).context("the voice prompt")? * FEATURE_SCALE)?;
        Ok(VoicePrompt { features, rms: loudness.prompt_rms, tokens })
    }

    /// 48 kHz speech of `text` (tokens) in `prompt`'s voice. The sampler's
    /// noise comes from `noise`; `progress(done, of)` follows its steps
    /// and may break to stop them (then there is no speech: `None`).
    pub fn speak(
        &self,
        prompt: &VoicePrompt,
        text: &[u32],
        settings: &Settings,
        noise: &mut dyn NoiseSource,
        progress: &mut dyn FnMut(usize, usize) -> ControlFlow<()>,
    ) -> Result<Option<Spoken>> {
        let prompt_frames = prompt.features.dim(0)?;
        let condition =
            self.acoustic.text_condition(&prompt.tokens, text, prompt_frames, settings.speed * SPEED_FACTOR)?;
        let frames = condition.features.dim(0)?;
        let speech = self.acoustic.speech_condition(&prompt.features, frames)?;
        let schedule = FlowSchedule::new(settings.steps, settings.t_shift);
        let start = noise.normal(&[frames, self.acoustic.feat_dim()], &Device::Cpu)?;
        let steps = schedule.steps();
        let Some(features) = sample(
            &schedule,
            &start,
            |x, t| self.acoustic.velocity(x, &condition.features, &speech, FlowTime { t, guidance: settings.guidance }),
            |done| progress(done, steps),
        )?
        else {
            return Ok(None);
        };
        let mel = (features.narrow(0, prompt_frames, frames - prompt_frames)? / FEATURE_SCALE)?;
        let mut samples = self.vocoder.decode(&mel)?;
        finish(&mut samples, prompt.rms, OUTPUT_RMS);
        Ok(Some(Spoken { mel, samples }))
    }
}
