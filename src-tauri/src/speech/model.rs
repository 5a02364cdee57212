//! A loaded speech model of any family behind one interface: what it
//! speaks in, and speaking a script of any length (in pieces of whole
//! sentences, joined without clicks, every frame reported as it is made).

use super::family::SpeechFamily;
use super::luxtts::model::{LuxTts, Settings as LuxSettings, VoicePrompt as LuxPrompt, OUTPUT_SAMPLES_PER_FRAME};
use super::luxtts::phonemize::english_tokens;
use super::noise::NoiseSource;
use super::pieces::{split_script, split_text, split_text_first_short, PIECE_CHARS};
use super::vibevoice::generate::{SpeechEnd, SpeechObserver, SpeechOutput, SpeechSettings};
use super::vibevoice::model::VibeVoice;
use super::vibevoice::processor::{as_script, build_prompt, parse_script, SpeechPrompt};
use super::vibevoice::realtime::VibeVoiceRealtime;
use super::vibevoice::voice_preset::VoicePreset;
use crate::audio::splice::Seams;
use crate::cluster::master::{ClusterSettings, LoadProgress};
use anyhow::{Context, Result};
use candle_core::{DType, Tensor};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

/// The voices a request speaks in.
pub enum Voices {
    /// 24 kHz samples of each speaker's prompt, in speaker order.
    Prompts(Vec<Vec<f32>>),
    /// A voice preset file.
    Preset(PathBuf),
    /// One voice prompt's 24 kHz samples and the words it says.
    Transcribed { samples: Vec<f32>, transcript: String },
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
    /// LuxTTS: text in the voice of a transcribed prompt, 48 kHz.
    Lux(LuxTts),
}

/// What one piece of a script is, ready for its model.
enum Piece<'a> {
    Prompt(SpeechPrompt),
    Text { text: String, preset: &'a VoicePreset },
    Tokens { tokens: Vec<u32>, prompt: &'a LuxPrompt },
}

/// LuxTTS's audio is reported in frames of this many feature frames (85 ms).
const LUX_FEATURES_PER_FRAME: usize = 8;
/// Samples in one of those frames.
const LUX_FRAME_SAMPLES: usize = LUX_FEATURES_PER_FRAME * OUTPUT_SAMPLES_PER_FRAME;
/// LuxTTS speaks a whole piece at once: its first piece is short, so the
/// first audio comes soon.
const LUX_FIRST_PIECE_CHARS: usize = 120;

impl SpeechModel {
    /// Loads the speech model in `dir`, any family. With `cluster`,
    /// VibeVoice-1.5B's language model is spread over its workers; the
    /// small models always run here.
    pub fn load(dir: &Path, cluster: Option<&ClusterSettings>, on_progress: LoadProgress) -> Result<Self> {
        let config_path = dir.join("config.json");
        let config = std::fs::read_to_string(&config_path)
            .with_context(|| format!("{}: cannot read it", config_path.display()))?;
        let family = SpeechFamily::of_config(&config)
            .with_context(|| format!("{}: not a speech model's config (VibeVoice or LuxTTS)", config_path.display()))?;
        let dtype = DType::F32;
        if cluster.is_some() && family != SpeechFamily::VibeVoice {
            on_progress(0.0, &format!("{} loads on this machine alone (it is small)", family.name()));
        }
        Ok(match (family, cluster) {
            (SpeechFamily::VibeVoice, Some(cluster)) => {
                Self::Script(VibeVoice::load_over(cluster, dir, dtype, on_progress)?)
            }
            (SpeechFamily::VibeVoice, None) => Self::Script(VibeVoice::load(dir, dtype)?),
            (SpeechFamily::VibeVoiceRealtime, _) => Self::Realtime(VibeVoiceRealtime::load(dir, dtype)?),
            (SpeechFamily::LuxTts, _) => Self::Lux(LuxTts::load(dir)?),
        })
    }

    pub fn family(&self) -> SpeechFamily {
        match self {
            Self::Script(_) => SpeechFamily::VibeVoice,
            Self::Realtime(_) => SpeechFamily::VibeVoiceRealtime,
            Self::Lux(_) => SpeechFamily::LuxTts,
        }
    }

    /// The rate of the audio the model makes.
    pub fn sample_rate(&self) -> u32 {
        self.family().sample_rate()
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
        let lux_prompt;
        let pieces = match (self, voices) {
            (Self::Script(model), Voices::Prompts(prompts)) => script_pieces(model, script, prompts)?,
            (Self::Realtime(model), Voices::Preset(path)) => {
                preset = VoicePreset::load(path, &model.preset_shape()).map_err(BadSpeechRequest)?;
                let text = script.split_whitespace().collect::<Vec<_>>().join(" ");
                let texts = split_text(&text, PIECE_CHARS);
                let texts = if texts.len() <= 1 { vec![script.to_string()] } else { texts };
                texts.into_iter().map(|text| Piece::Text { text, preset: &preset }).collect()
            }
            (Self::Lux(model), Voices::Transcribed { samples, transcript }) => {
                let tokens = english_tokens(transcript, &model.tokens).map_err(BadSpeechRequest)?;
                if tokens.is_empty() {
                    return Err(refuse("the voice's transcript has no English words for LuxTTS to read"));
                }
                lux_prompt = model.prompt(samples, tokens).map_err(BadSpeechRequest)?;
                lux_pieces(model, script, &lux_prompt)?
            }
            (model, _) => return Err(refuse(wrong_voices(model.family()))),
        };
        let mut joined = Joined { inner: observer, frames_before: 0, seams: Seams::default(), audio: Vec::new() };
        let mut output = SpeechOutput { audio: Vec::new(), tokens: Vec::new(), frames: 0, end: SpeechEnd::EndOfText };
        let count = pieces.len();
        for (index, piece) in pieces.iter().enumerate() {
            let mut piece_settings = settings.clone();
            if let Some(limit) = settings.max_seconds {
                let left = limit - joined.audio.len() as f64 / self.sample_rate() as f64;
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
                (Self::Lux(model), Piece::Tokens { tokens, prompt }) => {
                    lux_piece(model, prompt, tokens, &piece_settings, noise, &mut joined)?
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

/// Why voices of another kind cannot be used by `family`.
fn wrong_voices(family: SpeechFamily) -> &'static str {
    match family {
        SpeechFamily::VibeVoice => "VibeVoice-1.5B speaks in WAV voice prompts, one per speaker, not in a preset",
        SpeechFamily::VibeVoiceRealtime => {
            "VibeVoice-Realtime speaks in one voice preset; a WAV voice prompt cannot be used \
             (Microsoft has not released how presets are made from one)"
        }
        SpeechFamily::LuxTts => "LuxTTS speaks in one WAV voice prompt with its transcript",
    }
}

/// A text as LuxTTS's pieces: whole sentences, the first one short, each
/// as tokens (pieces with nothing to read left out). Every piece is
/// phonemized before any speech, so a text that cannot be read fails at once.
fn lux_pieces<'a>(model: &LuxTts, script: &str, prompt: &'a LuxPrompt) -> Result<Vec<Piece<'a>>> {
    let text = script.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut pieces = Vec::new();
    for text in split_text_first_short(&text, LUX_FIRST_PIECE_CHARS, PIECE_CHARS) {
        let tokens = english_tokens(&text, &model.tokens).map_err(BadSpeechRequest)?;
        if !tokens.is_empty() {
            pieces.push(Piece::Tokens { tokens, prompt });
        }
    }
    if pieces.is_empty() {
        return Err(refuse("LuxTTS found nothing to read: it speaks English text"));
    }
    Ok(pieces)
}

/// Speaks one LuxTTS piece (all at once) and reports it frame by frame;
/// `settings.max_seconds` cuts it.
fn lux_piece(
    model: &LuxTts,
    prompt: &LuxPrompt,
    tokens: &[u32],
    settings: &SpeechSettings,
    noise: &mut dyn NoiseSource,
    observer: &mut dyn SpeechObserver,
) -> Result<SpeechOutput> {
    let defaults = LuxSettings::default();
    let lux_settings = LuxSettings { steps: settings.steps, guidance: settings.cfg_scale as f32, ..defaults };
    let spoken = model.speak(prompt, tokens, &lux_settings, noise, &mut |step, steps| observer.on_step(step, steps))?;
    let Some(spoken) = spoken else {
        return Ok(SpeechOutput { audio: Vec::new(), tokens: Vec::new(), frames: 0, end: SpeechEnd::Stopped });
    };
    let rate = SpeechFamily::LuxTts.sample_rate() as f64;
    let limit = settings.max_seconds.map_or(usize::MAX, |seconds| (seconds * rate).ceil() as usize);
    let samples = &spoken.samples[..spoken.samples.len().min(limit)];
    let mut end = if samples.len() < spoken.samples.len() { SpeechEnd::Length } else { SpeechEnd::EndOfText };
    let mut frames = 0;
    for (frame, audio) in samples.chunks(LUX_FRAME_SAMPLES).enumerate() {
        let first = frame * LUX_FEATURES_PER_FRAME;
        let features = spoken.mel.narrow(0, first, LUX_FEATURES_PER_FRAME.min(spoken.mel.dim(0)? - first))?;
        frames += 1;
        if observer.on_frame(frame, &features, audio).is_break() {
            end = SpeechEnd::Stopped;
            break;
        }
    }
    Ok(SpeechOutput { audio: Vec::new(), tokens: Vec::new(), frames, end })
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

    fn on_step(&mut self, step: usize, steps: usize) -> ControlFlow<()> {
        self.inner.on_step(step, steps)
    }
}
