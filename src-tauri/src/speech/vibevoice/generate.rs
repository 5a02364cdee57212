//! Speaking a prompt (docs/vibevoice.md §11–12). The language model reads
//! the prompt and, step by step, chooses among four tokens: speech start,
//! speech end, "one frame of speech" and end of text. For each frame the
//! diffusion head, guided by a second pass that sees no text (the negative
//! branch), samples a latent; the streaming decoder turns it into audio,
//! and the latent plus the new audio's semantic features become the
//! language model's next input.

use super::model::VibeVoice;
use super::processor::SpeechPrompt;
use super::scheduler::DpmSolver;
use super::speech_tokenizer::StreamState;
use crate::models::pipeline::{Session, SessionGuard};
use crate::speech::noise::NoiseSource;
use anyhow::{bail, Result};
use candle_core::{Tensor, D};
use std::ops::ControlFlow;

/// How to speak.
#[derive(Debug, Clone, PartialEq)]
pub struct SpeechSettings {
    /// Classifier-free guidance scale.
    pub cfg_scale: f64,
    /// Diffusion steps per frame.
    pub steps: usize,
    /// Stop after about this many seconds of audio (whole frames, at least
    /// one); VibeVoice-1.5B's own cap is twice the prompt's length in steps.
    pub max_seconds: Option<f64>,
}

/// What the generation loop reports, and where a caller may steer it.
pub trait SpeechObserver {
    /// The token to take at `step`, given the raw logits and the greedy
    /// choice among the allowed tokens (which it returns by default).
    fn choose(&mut self, _step: usize, _logits: &Tensor, greedy: u32) -> u32 {
        greedy
    }

    /// A frame of audio was made (`frame` counts from 0). Break to stop.
    fn on_frame(&mut self, _frame: usize, _latent: &Tensor, _audio: &[f32]) -> ControlFlow<()> {
        ControlFlow::Continue(())
    }

    /// (Realtime) The positive and negative conditions `[2, hidden]` frame
    /// `frame` is about to be sampled from.
    fn on_conditions(&mut self, _frame: usize, _conditions: &Tensor) {}

    /// (Realtime) The probability that the speech is over, after `frame`.
    fn on_end_probability(&mut self, _frame: usize, _probability: f32) {}

    /// (A long script, spoken in pieces) piece `piece` (from 0) of `pieces`
    /// starts; frames keep counting across pieces.
    fn on_piece(&mut self, _piece: usize, _pieces: usize) {}

    /// (LuxTTS, which makes a piece's frames all at once) step `step` of
    /// the piece's `steps` is done. Break to stop.
    fn on_step(&mut self, _step: usize, _steps: usize) -> ControlFlow<()> {
        ControlFlow::Continue(())
    }
}

/// An observer that takes the defaults.
pub struct Quiet;
impl SpeechObserver for Quiet {}

/// Why generation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SpeechEnd {
    /// The model said it was done.
    EndOfText,
    /// The step or frame limit was reached.
    Length,
    /// The observer asked to stop.
    Stopped,
}

/// The spoken result.
#[derive(Debug, Clone)]
pub struct SpeechOutput {
    /// Mono samples at the model's rate (24 kHz; LuxTTS 48 kHz).
    pub audio: Vec<f32>,
    /// Every token the model chose, in order.
    pub tokens: Vec<u32>,
    pub frames: usize,
    pub end: SpeechEnd,
}

/// The streaming states of the acoustic decoder and semantic encoder,
/// reset when a speech segment ends.
#[derive(Default)]
struct AudioStreams {
    decoder: StreamState,
    semantic: StreamState,
}

/// What one frame of speech gives.
struct Frame {
    latent: Tensor,
    samples: Vec<f32>,
    /// The embedding the language model reads next.
    next_input: Tensor,
}

/// The text-free branch that guidance contrasts with.
struct NegativeBranch<'a> {
    session: SessionGuard<'a>,
    /// Whether it has run at all (its very first input is the speech-start token).
    started: bool,
}

impl VibeVoice {
    /// Speaks `prompt`, drawing noise from `noise`.
    pub fn generate(
        &self,
        prompt: &SpeechPrompt,
        settings: &SpeechSettings,
        noise: &mut dyn NoiseSource,
        observer: &mut dyn SpeechObserver,
    ) -> Result<SpeechOutput> {
        let pipeline = &self.language_model;
        // Workers free both branches' caches when the guards drop, whatever happened.
        let mut positive = pipeline.guard(pipeline.new_session());
        let mut negative = NegativeBranch { session: pipeline.guard(pipeline.new_session()), started: false };
        self.generate_with(prompt, settings, noise, observer, &mut positive, &mut negative)
    }

    fn generate_with<'a>(
        &'a self,
        prompt: &SpeechPrompt,
        settings: &SpeechSettings,
        noise: &mut dyn NoiseSource,
        observer: &mut dyn SpeechObserver,
        positive: &mut Session,
        negative: &mut NegativeBranch<'a>,
    ) -> Result<SpeechOutput> {
        let pipeline = &self.language_model;
        let lm = &pipeline.decoder;
        let tokens = self.tokens;
        let allowed = [tokens.start, tokens.end, tokens.diffusion, tokens.eos];
        let solver = DpmSolver::new(settings.steps)?;
        let prompt_len = prompt.input_ids.len();
        let context = lm.context_length();
        if prompt_len >= context {
            bail!("the prompt has {prompt_len} tokens but the model's context length is {context}");
        }
        let max_steps = (context - prompt_len).min(2 * prompt_len);
        let max_frames = settings.max_seconds.map(|s| {
            (s * crate::speech::voice_prompt::SAMPLE_RATE as f64 / self.hop() as f64).ceil().max(1.0) as usize
        });

        // Prefill: the prompt's embeddings with the voice frames put in their slots.
        let mut embeds = lm.embed(&prompt.input_ids)?.squeeze(0)?;
        if !prompt.voices.is_empty() {
            let voice = self.voice_embeddings(&prompt.voices, &prompt.voice_frames, noise)?.to_dtype(embeds.dtype())?;
            embeds = put_rows(&embeds, &prompt.speech_positions, &voice)?;
        }
        let mut input = embeds.unsqueeze(0)?;
        let mut streams = AudioStreams::default();
        let mut audio = Vec::new();
        let mut chosen = Vec::new();
        let mut frames = 0;
        let mut end = SpeechEnd::Length;

        for step in 0..max_steps {
            let hidden = lm.final_norm(&pipeline.run_layers(&input, positive)?)?;
            let last = hidden.narrow(1, hidden.dim(1)? - 1, 1)?;
            let logits = lm.head_logits(&last)?.squeeze(0)?;
            let greedy = greedy_among(&logits, &allowed)?;
            let token = observer.choose(step, &logits, greedy);
            if !allowed.contains(&token) {
                bail!("token {token} is not one VibeVoice can produce");
            }
            chosen.push(token);
            if token == tokens.eos {
                end = SpeechEnd::EndOfText;
                break;
            }
            if token == tokens.end {
                streams.decoder.reset();
                streams.semantic.reset();
            }
            if token == tokens.start {
                // The negative branch forgets its history (and restarts at position 0).
                negative.session = pipeline.guard(pipeline.new_session());
            }
            let mut next = lm.embed(&[token])?;
            if token == tokens.diffusion {
                let frame = self.speech_frame(&solver, settings, noise, &last, &input, negative, &mut streams)?;
                let (latent, samples) = (frame.latent, frame.samples);
                next = frame.next_input;
                let flow = observer.on_frame(frames, &latent, &samples);
                audio.extend_from_slice(&samples);
                frames += 1;
                if flow.is_break() {
                    end = SpeechEnd::Stopped;
                    break;
                }
                if max_frames.is_some_and(|m| frames >= m) {
                    break;
                }
            }
            input = next;
        }
        Ok(SpeechOutput { audio, tokens: chosen, frames, end })
    }

    /// One frame of speech after the positive pass chose the diffusion token:
    /// the negative branch's pass, the guided latent, its audio, and the
    /// embedding the next step reads. `last` is the positive pass's final
    /// hidden state, `input` what it read this step.
    fn speech_frame(
        &self,
        solver: &DpmSolver,
        settings: &SpeechSettings,
        noise: &mut dyn NoiseSource,
        last: &Tensor,
        input: &Tensor,
        negative: &mut NegativeBranch<'_>,
        streams: &mut AudioStreams,
    ) -> Result<Frame> {
        let pipeline = &self.language_model;
        let lm = &pipeline.decoder;
        // It sees what the positive pass saw this step, without the text before.
        let negative_input = if negative.started { last_row(input)? } else { lm.embed(&[self.tokens.start])? };
        let negative_hidden = lm.final_norm(&pipeline.run_layers(&negative_input, &mut negative.session)?)?;
        negative.started = true;
        let conditions = Tensor::cat(&[last.squeeze(0)?, last_row(&negative_hidden)?.squeeze(0)?], 0)?;
        let latent = self.head.sample_guided(solver, &conditions, settings.cfg_scale, noise)?;
        // Audio for the frame, then its semantic features.
        let raw = self.to_latents(&latent)?.unsqueeze(2)?;
        let chunk = self.acoustic_decoder.decode_stream(&raw, &mut streams.decoder)?;
        let semantic = self.semantic_encoder.encode_stream(&chunk, &mut streams.semantic)?;
        let samples: Vec<f32> = chunk.flatten_all()?.to_dtype(candle_core::DType::F32)?.to_vec1()?;
        let acoustic_in = latent.unsqueeze(0)?;
        let next_input =
            (self.acoustic_connector.forward(&acoustic_in)? + self.semantic_connector.forward(&semantic)?)?;
        Ok(Frame { latent, samples, next_input })
    }
}

/// The allowed token with the highest logit; on a tie the lowest id (as
/// the reference's argmax over the masked vocabulary picks).
fn greedy_among(logits: &Tensor, allowed: &[u32]) -> Result<u32> {
    let values: Vec<f32> = logits.to_vec1()?;
    let mut candidates: Vec<u32> = allowed.iter().copied().filter(|&t| (t as usize) < values.len()).collect();
    candidates.sort_unstable();
    let mut best: Option<u32> = None;
    for t in candidates {
        if best.is_none_or(|b| values[t as usize] > values[b as usize]) {
            best = Some(t);
        }
    }
    best.ok_or_else(|| anyhow::anyhow!("the model's vocabulary lacks the speech tokens"))
}

/// The last position of `[1, t, hidden]` as `[1, 1, hidden]`.
fn last_row(x: &Tensor) -> Result<Tensor> {
    let t = x.dim(1)?;
    Ok(x.narrow(1, t - 1, 1)?)
}

/// `base [n, h]` with `rows [k, h]` written at `positions` (k of them).
fn put_rows(base: &Tensor, positions: &[usize], rows: &Tensor) -> Result<Tensor> {
    if positions.len() != rows.dim(0)? {
        bail!("{} voice frames for {} slots in the prompt", rows.dim(0)?, positions.len());
    }
    let mut pieces = Vec::new();
    let mut at = 0;
    for (i, &p) in positions.iter().enumerate() {
        if p < at || p >= base.dim(0)? {
            bail!("voice slot {p} is out of order or outside the prompt");
        }
        if p > at {
            pieces.push(base.narrow(0, at, p - at)?);
        }
        pieces.push(rows.narrow(0, i, 1)?);
        at = p + 1;
    }
    if at < base.dim(0)? {
        pieces.push(base.narrow(0, at, base.dim(0)? - at)?);
    }
    Ok(Tensor::cat(&pieces, D::Minus2)?)
}
