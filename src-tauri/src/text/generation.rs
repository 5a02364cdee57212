//! The generation loop: prefill, then one token at a time until a stop.
//!
//! Each new token reaches the caller through a callback together with the
//! text it completed; the callback may stop generation (the UI's Escape).
//! A long prompt is read in chunks of [`PREFILL_CHUNK`] tokens, and the
//! callback hears after each one how far reading is (and may stop it too).
//! Stops: any of the model's end-of-sequence ids (unless ignored), a user
//! stop string, the token budget, or the model's context length.

use super::constraint::Constraint;
use super::detokenizer::Detokenizer;
use super::logprobs::{StepDistribution, TokenLogprob};
use super::model::TextModel;
use super::pictures::{self, PromptPicture};
use super::prompt_cache::PromptCache;
use super::sampling::{Sampler, SamplingParams};
use super::stop_strings::{StopCheck, StopStrings};
use crate::models::context::PREFILL_CHUNK;
use crate::models::decoder::LogitsFor;
use crate::models::pipeline::{PipelinedSteps, Session, SessionGuard};
use anyhow::{bail, Result};
use serde::Serialize;
use std::ops::ControlFlow;
use std::time::Instant;

/// What to generate.
#[derive(Debug, Clone)]
pub struct GenerationRequest {
    pub prompt_tokens: Vec<u32>,
    pub max_new_tokens: usize,
    pub sampling: SamplingParams,
    pub stop_strings: Vec<String>,
    pub ignore_eos: bool,
    /// Hold at most this many tokens (prompt and reply) even where the model
    /// could hold more; `None`: the model's context length.
    pub context_limit: Option<usize>,
    /// Recompute the whole sequence at every step instead of caching keys and
    /// values (slow; exists to check the cache against the plain computation).
    pub no_kv_cache: bool,
    /// Special tokens shown in the reply's text (markers of function
    /// calls, which the reply must spell for them to be read back).
    pub shown_special_tokens: Vec<u32>,
    /// The format the reply must follow (its state moves with the reply).
    pub constraint: Option<Constraint>,
    /// Keep each written token's log-probability and this many likeliest
    /// alternatives (`None`: keep none).
    pub logprobs: Option<usize>,
    /// The pictures in the prompt, in order, each over the image tokens
    /// it replaces.
    pub pictures: Vec<PromptPicture>,
}

impl GenerationRequest {
    pub fn new(prompt_tokens: Vec<u32>) -> Self {
        Self {
            prompt_tokens,
            max_new_tokens: 256,
            sampling: SamplingParams::default(),
            stop_strings: Vec::new(),
            ignore_eos: false,
            context_limit: None,
            no_kv_cache: false,
            shown_special_tokens: Vec::new(),
            constraint: None,
            logprobs: None,
            pictures: Vec::new(),
        }
    }
}

/// What the generation callback hears.
#[derive(Debug, Clone, Copy)]
pub enum GenerationEvent<'a> {
    /// `read` of the `total` prompt tokens not taken from the cache have
    /// been read (sent only for prompts longer than one chunk, first with
    /// `read` 0).
    PromptRead { read: usize, total: usize },
    /// A new token.
    Token(TokenEvent<'a>),
}

/// One generated token as it arrives.
#[derive(Debug, Clone, Copy)]
pub struct TokenEvent<'a> {
    /// The new token; `None` for text released at the very end.
    pub id: Option<u32>,
    /// Text that became final with this token (may be empty).
    pub text: &'a str,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// The model produced an end-of-sequence token.
    Eos,
    /// A user stop string appeared.
    StopString,
    /// `max_new_tokens` reached.
    MaxTokens,
    /// The model's context length reached.
    ContextFull,
    /// The caller asked to stop.
    Cancelled,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Timings {
    /// Start of generation to the first new token (includes prefill).
    pub ttft_s: f64,
    /// Prompt tokens per second during prefill.
    pub prompt_tok_s: f64,
    /// New tokens per second after the first one.
    pub decode_tok_s: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Generation {
    /// Generated ids (an end-of-sequence token that stopped generation is included).
    pub tokens: Vec<u32>,
    /// The text shown to the user (stop strings and special tokens removed).
    pub text: String,
    pub finish_reason: FinishReason,
    pub timings: Timings,
    /// Prompt tokens whose keys and values came from the previous request
    /// instead of being read again (see [`PromptCache`]).
    pub cached_prompt_tokens: usize,
    /// Each written token's log-probability, when the request asked.
    #[serde(skip)]
    pub logprobs: Vec<TokenLogprob>,
}

/// The tokens `request` may hold on `model`: the context it was loaded
/// with, or the request's smaller limit.
pub fn context_length(model: &TextModel, request: &GenerationRequest) -> usize {
    context_within(model.decoder().context_length(), request.context_limit)
}

/// The context a request runs in: the model's own, or less if it asks.
pub fn context_within(model_context: usize, limit: Option<usize>) -> usize {
    limit.map_or(model_context, |limit| limit.min(model_context))
}

/// Checks `request` before any work; returns the context length it runs in.
fn check_request(model: &TextModel, request: &GenerationRequest) -> Result<usize> {
    let prompt = &request.prompt_tokens;
    if prompt.is_empty() {
        bail!("the prompt is empty: give at least one token");
    }
    let context = context_length(model, request);
    if prompt.len() >= context {
        return Err(PromptTooLong::new(prompt.len(), context, false).into());
    }
    request.sampling.validate()?;
    pictures::check_placement(&request.pictures, prompt.len())?;
    let hidden = model.decoder().config.hidden_size;
    if let Some(picture) = request.pictures.iter().find(|p| p.embeddings.dims().get(1) != Some(&hidden)) {
        bail!("a picture's embeddings are {:?} for a model {hidden} wide", picture.embeddings.dims());
    }
    Ok(context)
}

/// The next token's logits: from the session's cache, or, without a KV
/// cache, by reading the whole history again in a fresh session.
fn next_logits(
    model: &TextModel,
    request: &GenerationRequest,
    session: &mut Session,
    history: &[u32],
    next_input: &[u32],
) -> Result<Vec<f32>> {
    let pictures = &request.pictures;
    let logits = if request.no_kv_cache {
        let mut fresh = model.pipeline.guard(model.new_session());
        model.forward_with(history, 0, pictures, &mut fresh, LogitsFor::Last)?
    } else {
        let first = history.len() - next_input.len();
        model.forward_with(next_input, first, pictures, session, LogitsFor::Last)?
    };
    Ok(logits.squeeze(0)?.to_vec1::<f32>()?)
}

/// What `token` adds to the reply's text, and whether a stop string ended it.
fn visible_text(detokenizer: Option<&mut Detokenizer>, stops: &mut StopStrings, token: u32) -> Result<StopCheck> {
    let piece = match detokenizer {
        Some(d) => d.push(token)?,
        None => String::new(),
    };
    Ok(stops.push(&piece))
}

/// The text still held back at the end of a reply: the detokenizer's
/// unfinished characters and what the stop-string matcher kept in case a
/// stop string began there.
fn held_back_text(detokenizer: Option<&mut Detokenizer>, stops: &mut StopStrings) -> Result<String> {
    let tail = match detokenizer {
        Some(d) => d.finish()?,
        None => String::new(),
    };
    let check = stops.push(&tail);
    let mut rest = check.emit;
    if !check.stopped {
        rest.push_str(&stops.finish());
    }
    Ok(rest)
}

/// A prompt that does not fit the model's context length: the request's
/// fault, which callers tell from other failures by downcasting.
#[derive(Debug)]
pub struct PromptTooLong {
    pub tokens: usize,
    pub context: usize,
    /// `tokens` is a lower bound, told from the text's length without
    /// tokenizing all of it.
    pub at_least: bool,
    /// A conversation's system prompt and last turn alone do not fit:
    /// leaving out older turns cannot help.
    pub last_turn_alone: bool,
}

impl PromptTooLong {
    /// A prompt of `tokens` (at least, when `at_least`) over `context`.
    pub fn new(tokens: usize, context: usize, at_least: bool) -> Self {
        Self { tokens, context, at_least, last_turn_alone: false }
    }
}

impl std::fmt::Display for PromptTooLong {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Self { tokens, context, at_least, last_turn_alone } = self;
        let bound = if *at_least { "at least " } else { "" };
        let what = if *last_turn_alone { "the last message alone (with the system prompt)" } else { "the prompt" };
        write!(f, "{what} has {bound}{tokens} tokens but the context length is {context}")
    }
}

impl std::error::Error for PromptTooLong {}

/// Runs `request` on `model` in a fresh session, calling `on_event` as it
/// reads the prompt and for every new token.
pub fn generate(
    model: &TextModel,
    request: &GenerationRequest,
    on_event: impl FnMut(GenerationEvent) -> ControlFlow<()>,
) -> Result<Generation> {
    let mut cache = PromptCache::new();
    let generation = generate_cached(model, request, &mut cache, on_event);
    cache.clear(model);
    generation
}

/// Runs `request` on `model`, starting from what `cache` kept of the
/// previous request and keeping this one's session in it afterwards.
pub fn generate_cached(
    model: &TextModel,
    request: &GenerationRequest,
    cache: &mut PromptCache,
    mut on_event: impl FnMut(GenerationEvent) -> ControlFlow<()>,
) -> Result<Generation> {
    let mut stream = Stream::start(model, request.clone(), cache)?;
    while stream.phase() != Phase::Finished {
        match stream.phase() {
            Phase::ReadingPrompt => stream.read_prompt_chunk(&mut on_event)?,
            _ => stream.step(&mut on_event)?,
        }
    }
    stream.finish(cache, &mut on_event)
}

/// Where a [`Stream`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// More than one chunk of the prompt is still unread: read a chunk.
    ReadingPrompt,
    /// The next step reads the prompt's last chunk and samples the first token.
    FirstToken,
    /// The next step feeds the last token and samples another (the step
    /// several streams can take together, see [`step_together`]).
    Decoding,
    /// Stopped: call [`Stream::finish`].
    Finished,
}

/// One request being generated, a step at a time: the prompt chunk by
/// chunk, then one token per step, alone or together with other streams.
pub struct Stream<'m> {
    model: &'m TextModel,
    request: GenerationRequest,
    /// Tokens the sequence may hold.
    context: usize,
    sampler: Sampler,
    detokenizer: Option<Detokenizer<'m>>,
    stops: StopStrings,
    /// Ended on drop unless kept by [`Stream::finish`].
    session: SessionGuard<'m>,
    cached_prompt_tokens: usize,
    history: Vec<u32>,
    /// Tokens the next step feeds (the prompt's unread rest, then the last token).
    next_input: Vec<u32>,
    generated: Vec<u32>,
    /// The written tokens' log-probabilities, when the request asked.
    logprobs: Vec<TokenLogprob>,
    text: String,
    timings: Timings,
    start: Instant,
    first_token_at: Option<Instant>,
    finish_reason: Option<FinishReason>,
}

impl<'m> Stream<'m> {
    /// Checks `request` and takes a session for it from `cache` (reusing
    /// the previous request's where the prompts share a start).
    pub fn start(model: &'m TextModel, request: GenerationRequest, cache: &mut PromptCache) -> Result<Self> {
        let context = check_request(model, &request)?;
        let (session, cached_prompt_tokens) = if request.no_kv_cache {
            cache.clear(model);
            (model.new_session(), 0)
        } else {
            cache.session_for(model, &request.prompt_tokens, &request.pictures)
        };
        Ok(Self {
            model,
            context,
            sampler: Sampler::new(request.sampling.clone()),
            detokenizer: model.tokenizer.as_ref().map(|t| Detokenizer::new(t, &request.shown_special_tokens)),
            stops: StopStrings::new(&request.stop_strings),
            session: model.pipeline.guard(session),
            cached_prompt_tokens,
            history: request.prompt_tokens.clone(),
            next_input: request.prompt_tokens[cached_prompt_tokens..].to_vec(),
            generated: Vec::new(),
            logprobs: Vec::new(),
            text: String::new(),
            timings: Timings::default(),
            start: Instant::now(),
            first_token_at: None,
            finish_reason: None,
            request,
        })
    }

    /// The request as it was started.
    pub fn request(&self) -> &GenerationRequest {
        &self.request
    }

    /// The tokens generated so far.
    pub fn generated(&self) -> &[u32] {
        &self.generated
    }

    /// The reply's text so far (what was reported).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Stops the stream where it is (its listener went away between events).
    pub fn cancel(&mut self) {
        self.finish_reason.get_or_insert(FinishReason::Cancelled);
    }

    pub fn phase(&self) -> Phase {
        if self.finish_reason.is_some() {
            Phase::Finished
        } else if self.first_token_at.is_some() {
            Phase::Decoding
        } else if !self.request.no_kv_cache && self.next_input.len() > PREFILL_CHUNK {
            Phase::ReadingPrompt
        } else {
            Phase::FirstToken
        }
    }

    /// Reads one [`PREFILL_CHUNK`] of the prompt into the session, telling
    /// `on_event` how far reading is (which may stop the stream).
    pub fn read_prompt_chunk(&mut self, on_event: &mut impl FnMut(GenerationEvent) -> ControlFlow<()>) -> Result<()> {
        let total = self.request.prompt_tokens.len() - self.cached_prompt_tokens;
        // Before the first token, the next input is the prompt's unread rest.
        let read = total - self.next_input.len();
        if read == 0 && on_event(GenerationEvent::PromptRead { read: 0, total }).is_break() {
            self.finish_reason = Some(FinishReason::Cancelled);
            return Ok(());
        }
        let first = self.history.len() - self.next_input.len();
        let length = pictures::piece_length(first, PREFILL_CHUNK, &self.request.pictures)?;
        let chunk: Vec<u32> = self.next_input.drain(..length).collect();
        // Only the keys and values matter here: no logits are computed.
        self.model.hidden_states_with(&chunk, first, &self.request.pictures, &mut self.session)?;
        if on_event(GenerationEvent::PromptRead { read: read + chunk.len(), total }).is_break() {
            self.finish_reason = Some(FinishReason::Cancelled);
        }
        Ok(())
    }

    /// The tokens the next step feeds, or `None` when the stream cannot
    /// take another step (stopped, out of budget or of context; the
    /// reason is then recorded).
    fn next_step_input(&mut self) -> Option<&[u32]> {
        if self.finish_reason.is_none() && self.generated.len() >= self.request.max_new_tokens {
            self.finish_reason = Some(FinishReason::MaxTokens);
        }
        if self.finish_reason.is_none() && self.history.len() >= self.context {
            self.finish_reason = Some(FinishReason::ContextFull);
        }
        self.finish_reason.is_none().then_some(self.next_input.as_slice())
    }

    /// Feeds the next input alone and samples the next token.
    pub fn step(&mut self, on_event: &mut impl FnMut(GenerationEvent) -> ControlFlow<()>) -> Result<()> {
        if self.next_step_input().is_none() {
            return Ok(());
        }
        let logits = next_logits(self.model, &self.request, &mut self.session, &self.history, &self.next_input)?;
        self.accept(logits, on_event)
    }

    /// Samples the next token from `logits` (the next input's, computed
    /// alone or in a batch), reports it and checks the stops.
    fn accept(
        &mut self,
        mut logits: Vec<f32>,
        on_event: &mut impl FnMut(GenerationEvent) -> ControlFlow<()>,
    ) -> Result<()> {
        // The model's own distribution, before any mask or sampling setting.
        let distribution = self.request.logprobs.map(|top| (StepDistribution::of(&logits, top), logits.clone()));
        if let Some(constraint) = &mut self.request.constraint {
            constraint.mask(&mut logits, &self.model.eos_token_ids)?;
        }
        let token = self.sampler.sample(&mut logits, &self.history);
        if self.first_token_at.is_none() {
            let elapsed = self.start.elapsed().as_secs_f64();
            self.timings.ttft_s = elapsed;
            let read = self.request.prompt_tokens.len() - self.cached_prompt_tokens;
            self.timings.prompt_tok_s = read as f64 / elapsed.max(1e-9);
            self.first_token_at = Some(Instant::now());
        }
        self.generated.push(token);
        self.history.push(token);
        self.next_input = vec![token];
        if !self.request.ignore_eos && self.model.eos_token_ids.contains(&token) {
            self.finish_reason = Some(FinishReason::Eos);
            return Ok(());
        }
        if let Some((step, raw)) = distribution {
            self.logprobs.push(step.entry(&raw, token));
        }
        let mut format_complete = false;
        if let Some(constraint) = &mut self.request.constraint {
            constraint.accept(token)?;
            format_complete = constraint.is_finished();
        }
        let check = visible_text(self.detokenizer.as_mut(), &mut self.stops, token)?;
        self.text.push_str(&check.emit);
        let flow = on_event(GenerationEvent::Token(TokenEvent { id: Some(token), text: &check.emit }));
        if check.stopped {
            self.finish_reason = Some(FinishReason::StopString);
        } else if format_complete {
            // The format allows nothing more: the reply ends as at an end token.
            self.finish_reason = Some(FinishReason::Eos);
        } else if flow.is_break() {
            self.finish_reason = Some(FinishReason::Cancelled);
        }
        Ok(())
    }

    /// Ends the stream: releases text held back for stop strings, keeps
    /// the session in `cache` for the next request, and sums up.
    pub fn finish(
        mut self,
        cache: &mut PromptCache,
        on_event: &mut impl FnMut(GenerationEvent) -> ControlFlow<()>,
    ) -> Result<Generation> {
        let finish_reason = self.finish_reason.unwrap_or(FinishReason::MaxTokens);
        if finish_reason != FinishReason::StopString {
            let rest = held_back_text(self.detokenizer.as_mut(), &mut self.stops)?;
            if !rest.is_empty() {
                self.text.push_str(&rest);
                let _ = on_event(GenerationEvent::Token(TokenEvent { id: None, text: &rest }));
            }
        }
        if !self.request.no_kv_cache {
            // The session holds every token fed to the model: all but the unfed last input.
            let held = self.history.len() - self.next_input.len();
            cache.keep(self.model, self.session.keep(), self.history[..held].to_vec(), &self.request.pictures);
        }
        if let Some(t) = self.first_token_at {
            let decoded_after_first = self.generated.len().saturating_sub(1);
            self.timings.decode_tok_s = decoded_after_first as f64 / t.elapsed().as_secs_f64().max(1e-9);
        }
        Ok(Generation {
            tokens: self.generated,
            text: self.text,
            finish_reason,
            timings: self.timings,
            cached_prompt_tokens: self.cached_prompt_tokens,
            logprobs: self.logprobs,
        })
    }

    /// The model the stream runs on.
    pub fn model(&self) -> &'m TextModel {
        self.model
    }

    /// The written tokens' log-probabilities so far (when the request asked).
    pub fn logprobs(&self) -> &[TokenLogprob] {
        &self.logprobs
    }
}

/// The streams in [`Phase::Decoding`] that can take another step, by index
/// in `streams`, with the token each feeds.
fn decoding_inputs(streams: &mut [&mut Stream]) -> Result<(Vec<usize>, Vec<u32>)> {
    let mut stepping = Vec::new();
    let mut tokens = Vec::new();
    for (index, stream) in streams.iter_mut().enumerate() {
        if stream.request.no_kv_cache {
            bail!("a stream without a KV cache cannot step together with others");
        }
        if stream.phase() != Phase::Decoding {
            continue;
        }
        if let Some(input) = stream.next_step_input() {
            let &[token] = input else { bail!("stream {index} is not decoding one token at a time") };
            tokens.push(token);
            stepping.push(index);
        }
    }
    Ok((stepping, tokens))
}

/// The sessions of `streams[i]` for each `i` of `indices` (ascending).
fn sessions_of<'s>(streams: &'s mut [&mut Stream], indices: &[usize]) -> Vec<&'s mut Session> {
    let chosen = streams.iter_mut().enumerate().filter(|(index, _)| indices.contains(index));
    chosen.map(|(_, stream)| &mut *stream.session).collect()
}

/// One decode step for the streams in [`Phase::Decoding`] together
/// (weights read once for all): samples each one's next token and reports
/// it through `on_event(index in streams, event)`. Streams in other phases
/// are left as they are.
pub fn step_together(
    model: &TextModel,
    streams: &mut [&mut Stream],
    mut on_event: impl FnMut(usize, GenerationEvent) -> ControlFlow<()>,
) -> Result<()> {
    let (stepping, tokens) = decoding_inputs(streams)?;
    step_rows(model, streams, stepping, &tokens, &mut on_event)
}

/// One decode step of `streams[i]` for each `i` of `stepping`, fed
/// `tokens` (row for row), as [`step_together`] describes.
fn step_rows(
    model: &TextModel,
    streams: &mut [&mut Stream],
    stepping: Vec<usize>,
    tokens: &[u32],
    on_event: &mut impl FnMut(usize, GenerationEvent) -> ControlFlow<()>,
) -> Result<()> {
    if tokens.is_empty() {
        return Ok(());
    }
    let logits = model.forward_streams(tokens, &mut sessions_of(streams, &stepping))?.to_vec2::<f32>()?;
    for (index, logits) in stepping.into_iter().zip(logits) {
        streams[index].accept(logits, &mut |event| on_event(index, event))?;
    }
    Ok(())
}

/// Decode steps each stream takes at most in one call of
/// [`step_pipelined`] while no prompt waits to be read: it then hands
/// back so that new chats can join.
pub const PIPELINED_STEPS: usize = 8;

/// Decode steps of the streams in [`Phase::Decoding`], up to `most_steps`
/// each (see [`PIPELINED_STEPS`]), pipelined over the cluster's machines: the
/// streams split into as many groups as a step passes machines (at most),
/// and while the workers run one group's step, this machine samples
/// another's and runs its own layers of the next step, so every machine
/// works on a different group at once. Each stream gets the tokens
/// [`step_together`] gives it. Where steps cannot be in flight together
/// (one machine, workers that do not form one route, a single stream) it
/// is one [`step_together`]. Returns how many groups were in flight.
pub fn step_pipelined(
    model: &TextModel,
    streams: &mut [&mut Stream],
    most_steps: usize,
    mut on_event: impl FnMut(usize, GenerationEvent) -> ControlFlow<()>,
) -> Result<usize> {
    let (stepping, tokens) = decoding_inputs(streams)?;
    let pipelined = if stepping.len() >= 2 { model.pipeline.pipelined_steps() } else { None };
    let Some(mut steps) = pipelined else {
        return step_rows(model, streams, stepping, &tokens, &mut on_event).map(|()| 1);
    };
    let groups = steps.groups().min(stepping.len());
    let mut in_flight = std::collections::VecDeque::new();
    for g in 0..groups {
        let group = stepping[g * stepping.len() / groups..(g + 1) * stepping.len() / groups].to_vec();
        send_group(model, &mut steps, streams, &group)?;
        in_flight.push_back((group, 1));
    }
    while let Some((group, taken)) = in_flight.pop_front() {
        let logits = model.decoder().logits(&steps.receive()?, LogitsFor::All)?.to_vec2::<f32>()?;
        for (&index, logits) in group.iter().zip(logits) {
            streams[index].accept(logits, &mut |event| on_event(index, event))?;
        }
        if taken < most_steps {
            let going: Vec<usize> = group.into_iter().filter(|&i| streams[i].next_step_input().is_some()).collect();
            if !going.is_empty() {
                send_group(model, &mut steps, streams, &going)?;
                in_flight.push_back((going, taken + 1));
            }
        }
    }
    Ok(groups)
}

/// Sends the next step of `streams[i]` for each `i` of `group` (ascending,
/// each decoding one token at a time) into `steps`.
fn send_group(
    model: &TextModel,
    steps: &mut PipelinedSteps,
    streams: &mut [&mut Stream],
    group: &[usize],
) -> Result<()> {
    let tokens: Vec<u32> = group.iter().map(|&i| streams[i].next_input[0]).collect();
    steps.send(&model.decoder().embed(&tokens)?, &mut sessions_of(streams, group))
}
