//! A loaded speech model of either kind behind one interface: what it
//! speaks in, its default settings, and speaking a script of any length
//! (in pieces of whole sentences, joined without clicks, every frame
//! reported as it is made).

use super::noise::NoiseSource;
use super::pieces::{split_script, split_text, PIECE_CHARS};
use super::vibevoice::config::Variant;
use super::vibevoice::generate::{SpeechEnd, SpeechObserver, SpeechOutput, SpeechSettings};
use super::vibevoice::model::VibeVoice;
use super::vibevoice::processor::{as_script, build_prompt, parse_script, SpeechPrompt};
use super::vibevoice::realtime::VibeVoiceRealtime;
use super::vibevoice::voice_preset::VoicePreset;
use super::voice_prompt::SAMPLE_RATE;
use crate::audio::splice::Seams;
use crate::cluster::master::{ClusterSettings, LoadProgress};
use anyhow::{Context, Result};
use candle_core::{DType, Tensor};
use serde::{Deserialize, Serialize};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

/// What a speech model speaks in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VoiceKind {
    /// WAV voice prompts, one per speaker (VibeVoice-1.5B).
    #[default]
    Prompt,
    /// One voice preset: a model state saved after a voice's prompt
    /// (VibeVoice-Realtime-0.5B).
    Preset,
}

impl VoiceKind {
    /// What models of `variant` speak in.
    pub fn of(variant: Variant) -> Self {
        match variant {
            Variant::Standard => Self::Prompt,
            Variant::Realtime => Self::Preset,
        }
    }

    /// The model that speaks in this kind of voice.
    pub fn variant(self) -> Variant {
        match self {
            Self::Prompt => Variant::Standard,
            Self::Preset => Variant::Realtime,
        }
    }
}

/// The voices a request speaks in.
pub enum Voices {
    /// 24 kHz samples of each speaker's prompt, in speaker order.
    Prompts(Vec<Vec<f32>>),
    /// A voice preset file.
    Preset(PathBuf),
}

/// A request the model cannot speak as sent (a bad script, the wrong kind
/// of voice): the requester's fault, not the model's.
#[derive(Debug, thiserror::Error)]
#[error("{0:#}")]
pub struct BadSpeechRequest(pub anyhow::Error);

/// A loaded speech model.
pub enum SpeechModel {
    /// VibeVoice-1.5B: scripts of up to four speakers in WAV-prompted voices.
    Script(VibeVoice),
    /// VibeVoice-Realtime-0.5B: text in the voice of a preset, read as it speaks.
    Realtime(VibeVoiceRealtime),
}

/// What one piece of a script is, ready for its model.
enum Piece<'a> {
    Prompt(SpeechPrompt),
    Text { text: String, preset: &'a VoicePreset },
}

impl SpeechModel {
    /// Loads the VibeVoice checkpoint in `dir`, either kind. With
    /// `cluster`, VibeVoice-1.5B's language model is spread over its
    /// workers; Realtime (0.5 B) always runs here.
    pub fn load(dir: &Path, cluster: Option<&ClusterSettings>, on_progress: LoadProgress) -> Result<Self> {
        let config_path = dir.join("config.json");
        let config = std::fs::read_to_string(&config_path)
            .with_context(|| format!("{}: cannot read it", config_path.display()))?;
        let variant =
            Variant::of_config(&config).with_context(|| format!("{}: not a VibeVoice model", config_path.display()))?;
        let dtype = DType::F32;
        Ok(match (variant, cluster) {
            (Variant::Standard, Some(cluster)) => Self::Script(VibeVoice::load_over(cluster, dir, dtype, on_progress)?),
            (Variant::Standard, None) => Self::Script(VibeVoice::load(dir, dtype)?),
            (Variant::Realtime, cluster) => {
                if cluster.is_some() {
                    on_progress(0.0, "VibeVoice-Realtime loads on this machine alone (it is small)");
                }
                Self::Realtime(VibeVoiceRealtime::load(dir, dtype)?)
            }
        })
    }

    pub fn variant(&self) -> Variant {
        match self {
            Self::Script(_) => Variant::Standard,
            Self::Realtime(_) => Variant::Realtime,
        }
    }

    /// Audio samples per frame.
    pub fn hop(&self) -> usize {
        match self {
            Self::Script(model) => model.hop(),
            Self::Realtime(model) => model.hop(),
        }
    }

    /// Speaks `script` in `voices`: a text longer than a piece is spoken
    /// piece by piece ([`super::pieces`]), frames counted across pieces,
    /// and `settings.max_seconds` limits the whole. The observer sees each
    /// frame's audio as it ends up in the result (seams smoothed).
    pub fn speak(
        &self,
        script: &str,
        voices: &Voices,
        settings: &SpeechSettings,
        noise: &mut dyn NoiseSource,
        observer: &mut dyn SpeechObserver,
    ) -> Result<SpeechOutput> {
        let preset;
        let pieces = match (self, voices) {
            (Self::Script(model), Voices::Prompts(prompts)) => script_pieces(model, script, prompts)?,
            (Self::Realtime(model), Voices::Preset(path)) => {
                preset = VoicePreset::load(path, &model.preset_shape()).map_err(BadSpeechRequest)?;
                let text = script.split_whitespace().collect::<Vec<_>>().join(" ");
                let texts = split_text(&text, PIECE_CHARS);
                let texts = if texts.len() <= 1 { vec![script.to_string()] } else { texts };
                texts.into_iter().map(|text| Piece::Text { text, preset: &preset }).collect()
            }
            (Self::Script(_), Voices::Preset(_)) => {
                return Err(refuse("VibeVoice-1.5B speaks in WAV voice prompts, one per speaker, not in a preset"))
            }
            (Self::Realtime(_), Voices::Prompts(_)) => {
                return Err(refuse(
                    "VibeVoice-Realtime speaks in one voice preset; a WAV voice prompt cannot be used \
                     (Microsoft has not released how presets are made from one)",
                ))
            }
        };
        let mut joined = Joined { inner: observer, frames_before: 0, seams: Seams::default(), audio: Vec::new() };
        let mut output = SpeechOutput { audio: Vec::new(), tokens: Vec::new(), frames: 0, end: SpeechEnd::EndOfText };
        let count = pieces.len();
        for (index, piece) in pieces.iter().enumerate() {
            let mut piece_settings = settings.clone();
            if let Some(limit) = settings.max_seconds {
                let left = limit - joined.audio.len() as f64 / SAMPLE_RATE as f64;
                if left <= 0.0 {
                    output.end = SpeechEnd::Length;
                    break;
                }
                piece_settings.max_seconds = Some(left);
            }
            joined.inner.on_piece(index, count);
            joined.seams.next_piece();
            let spoken = match (self, piece) {
                (Self::Script(model), Piece::Prompt(prompt)) => {
                    model.generate(prompt, &piece_settings, noise, &mut joined)?
                }
                (Self::Realtime(model), Piece::Text { text, preset }) => {
                    model.generate(text, preset, &piece_settings, noise, &mut joined)?
                }
                _ => unreachable!("pieces are made for their model above"),
            };
            joined.frames_before += spoken.frames;
            output.tokens.extend(spoken.tokens);
            output.frames += spoken.frames;
            output.end = spoken.end;
            if spoken.end == SpeechEnd::Stopped {
                break;
            }
        }
        output.audio = joined.audio;
        Ok(output)
    }
}

fn refuse(message: &str) -> anyhow::Error {
    BadSpeechRequest(anyhow::anyhow!("{message}")).into()
}

/// A VibeVoice-1.5B script as prompts, piece by piece (the whole script
/// unchanged when it fits one piece). Every prompt is built before any
/// speech, so a bad script or voice fails at once.
fn script_pieces<'a>(model: &VibeVoice, script: &str, prompts: &[Vec<f32>]) -> Result<Vec<Piece<'a>>> {
    let lines = parse_script(&as_script(script)).map_err(BadSpeechRequest)?;
    let build = |lines: &[_], voices: &[Vec<f32>]| {
        build_prompt(&model.tokenizer, model.tokens, lines, voices, model.hop()).map_err(BadSpeechRequest)
    };
    // The whole script's voices are checked even when it is spoken in pieces.
    let whole = build(&lines, prompts)?;
    let pieces = split_script(&lines, PIECE_CHARS);
    if pieces.len() <= 1 {
        return Ok(vec![Piece::Prompt(whole)]);
    }
    pieces
        .iter()
        .map(|piece| {
            let voices: Vec<Vec<f32>> = piece.voices(prompts).into_iter().cloned().collect();
            Ok(Piece::Prompt(build(&piece.lines, &voices)?))
        })
        .collect()
}

/// Passes a piece's events on as the whole script's: frames numbered
/// across pieces, audio with its seams smoothed and kept.
struct Joined<'a> {
    inner: &'a mut dyn SpeechObserver,
    frames_before: usize,
    seams: Seams,
    audio: Vec<f32>,
}

impl SpeechObserver for Joined<'_> {
    fn choose(&mut self, step: usize, logits: &Tensor, greedy: u32) -> u32 {
        self.inner.choose(step, logits, greedy)
    }

    fn on_frame(&mut self, frame: usize, latent: &Tensor, audio: &[f32]) -> ControlFlow<()> {
        let mut audio = audio.to_vec();
        self.seams.apply(&mut audio);
        self.audio.extend_from_slice(&audio);
        self.inner.on_frame(self.frames_before + frame, latent, &audio)
    }

    fn on_conditions(&mut self, frame: usize, conditions: &Tensor) {
        self.inner.on_conditions(self.frames_before + frame, conditions);
    }

    fn on_end_probability(&mut self, frame: usize, probability: f32) {
        self.inner.on_end_probability(self.frames_before + frame, probability);
    }
}
