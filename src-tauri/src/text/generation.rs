//! The generation loop: prefill, then one token at a time until a stop.
//!
//! Each new token reaches the caller through a callback together with the
//! text it completed; the callback may stop generation (the UI's Escape).
//! A long prompt is read in chunks of [`PREFILL_CHUNK`] tokens, and the
//! callback hears after each one how far reading is (and may stop it too).
//! Stops: any of the model's end-of-sequence ids (unless ignored), a user
//! stop string, the token budget, or the model's context length.

use super::detokenizer::Detokenizer;
use super::model::TextModel;
use super::prompt_cache::PromptCache;
use super::sampling::{Sampler, SamplingParams};
use super::stop_strings::{StopCheck, StopStrings};
use crate::models::context::PREFILL_CHUNK;
use crate::models::decoder::LogitsFor;
use crate::models::pipeline::Session;
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
}

/// The tokens `request` may hold on `model`: the context it was loaded
/// with, or the request's smaller limit.
pub fn context_length(model: &TextModel, request: &GenerationRequest) -> usize {
    let own = model.decoder().context_length();
    request.context_limit.map_or(own, |limit| limit.min(own))
}

/// Checks `request` before any work; returns the context length it runs in.
fn check_request(model: &TextModel, request: &GenerationRequest) -> Result<usize> {
    let prompt = &request.prompt_tokens;
    if prompt.is_empty() {
        bail!("the prompt is empty: give at least one token");
    }
    let context = context_length(model, request);
    if prompt.len() >= context {
        return Err(PromptTooLong { tokens: prompt.len(), context }.into());
    }
    request.sampling.validate()?;
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
    let logits = if request.no_kv_cache {
        let mut fresh = model.pipeline.guard(model.new_session());
        model.forward(history, &mut fresh, LogitsFor::Last)?
    } else {
        model.forward(next_input, session, LogitsFor::Last)?
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

/// Reads all but the last [`PREFILL_CHUNK`] of the prompt's unread tokens
/// (those after `cached`) into `session`, a chunk at a time, telling
/// `on_event` after each; the last chunk is left to the first generation
/// step, which samples from it. Returns how many tokens were read, as
/// `Break` when `on_event` asked to stop.
fn read_prompt_chunks(
    model: &TextModel,
    request: &GenerationRequest,
    session: &mut Session,
    cached: usize,
    on_event: &mut impl FnMut(GenerationEvent) -> ControlFlow<()>,
) -> Result<ControlFlow<usize, usize>> {
    let unread = &request.prompt_tokens[cached..];
    let total = unread.len();
    if request.no_kv_cache || total <= PREFILL_CHUNK {
        return Ok(ControlFlow::Continue(0));
    }
    if on_event(GenerationEvent::PromptRead { read: 0, total }).is_break() {
        return Ok(ControlFlow::Break(0));
    }
    let mut read = 0;
    while total - read > PREFILL_CHUNK {
        // Only the keys and values matter here: no logits are computed.
        model.hidden_states(&unread[read..read + PREFILL_CHUNK], session)?;
        read += PREFILL_CHUNK;
        if on_event(GenerationEvent::PromptRead { read, total }).is_break() {
            return Ok(ControlFlow::Break(read));
        }
    }
    Ok(ControlFlow::Continue(read))
}

/// A prompt that does not fit the model's context length: the request's
/// fault, which callers tell from other failures by downcasting.
#[derive(Debug, thiserror::Error)]
#[error("the prompt has {tokens} tokens but the context length is {context}")]
pub struct PromptTooLong {
    pub tokens: usize,
    pub context: usize,
}

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
    let prompt = &request.prompt_tokens;
    let context = check_request(model, request)?;
    let mut sampler = Sampler::new(request.sampling.clone());
    let mut detokenizer = model.tokenizer.as_ref().map(Detokenizer::new);
    let mut stops = StopStrings::new(&request.stop_strings);
    let (session, cached_prompt_tokens) = if request.no_kv_cache {
        cache.clear(model);
        (model.new_session(), 0)
    } else {
        cache.session_for(model, prompt)
    };
    // Ended on any early return; kept for the next request at the end.
    let mut session = model.pipeline.guard(session);
    let mut history = prompt.clone();
    let mut generated = Vec::new();
    let mut text = String::new();
    let mut timings = Timings::default();
    let start = Instant::now();
    let mut first_token_at = None;
    let mut finish_reason = FinishReason::MaxTokens;

    let read = match read_prompt_chunks(model, request, &mut session, cached_prompt_tokens, &mut on_event)? {
        ControlFlow::Continue(read) => read,
        ControlFlow::Break(read) => {
            finish_reason = FinishReason::Cancelled;
            read
        }
    };
    let mut next_input: Vec<u32> = prompt[cached_prompt_tokens + read..].to_vec();
    while finish_reason != FinishReason::Cancelled && generated.len() < request.max_new_tokens {
        if history.len() >= context {
            finish_reason = FinishReason::ContextFull;
            break;
        }
        let mut logits = next_logits(model, request, &mut session, &history, &next_input)?;
        let token = sampler.sample(&mut logits, &history);
        if first_token_at.is_none() {
            let elapsed = start.elapsed().as_secs_f64();
            timings.ttft_s = elapsed;
            timings.prompt_tok_s = (prompt.len() - cached_prompt_tokens) as f64 / elapsed.max(1e-9);
            first_token_at = Some(Instant::now());
        }
        generated.push(token);
        history.push(token);
        next_input = vec![token];

        if !request.ignore_eos && model.eos_token_ids.contains(&token) {
            finish_reason = FinishReason::Eos;
            break;
        }
        let check = visible_text(detokenizer.as_mut(), &mut stops, token)?;
        text.push_str(&check.emit);
        let flow = on_event(GenerationEvent::Token(TokenEvent { id: Some(token), text: &check.emit }));
        if check.stopped {
            finish_reason = FinishReason::StopString;
            break;
        }
        if flow.is_break() {
            finish_reason = FinishReason::Cancelled;
            break;
        }
    }
    if finish_reason != FinishReason::StopString {
        let rest = held_back_text(detokenizer.as_mut(), &mut stops)?;
        if !rest.is_empty() {
            text.push_str(&rest);
            let _ = on_event(GenerationEvent::Token(TokenEvent { id: None, text: &rest }));
        }
    }
    if !request.no_kv_cache {
        // The session holds every token fed to the model: all but the unfed last input.
        let held = history.len() - next_input.len();
        cache.keep(model, session.keep(), history[..held].to_vec());
    }
    if let Some(t) = first_token_at {
        let decoded_after_first = generated.len().saturating_sub(1);
        timings.decode_tok_s = decoded_after_first as f64 / t.elapsed().as_secs_f64().max(1e-9);
    }
    Ok(Generation { tokens: generated, text, finish_reason, timings, cached_prompt_tokens })
}
