//! Finishing a reply when a worker is lost half-way: say which machine was
//! lost, re-plan over the machines left (or this one alone), re-run the
//! prompt plus what was generated so far, and continue from there.

use super::remote::WorkerLost;
use crate::text::generation::{generate_cached, Generation, GenerationEvent, GenerationRequest};
use crate::text::model::TextModel;
use crate::text::prompt_cache::PromptCache;
use anyhow::Result;
use std::ops::ControlFlow;

/// A reply that may have survived lost workers.
pub struct RecoveredReply {
    /// The last attempt (its timings and finish reason).
    pub last: Generation,
    /// Every generated token and the whole text, across attempts.
    pub tokens: Vec<u32>,
    pub text: String,
    /// Addresses of the workers lost on the way.
    pub lost: Vec<String>,
}

/// Generates `request` with the model in `slot`, starting from what
/// `cache` kept of the previous request on it; when a worker is lost,
/// calls `on_lost`, frees the model, loads `reload(lost addresses so far)`
/// into the slot and continues. Gives up when a model without workers
/// fails, or after as many losses as the model had workers; the slot is
/// empty if reloading failed.
pub fn generate_recovering(
    slot: &mut Option<TextModel>,
    request: &GenerationRequest,
    cache: &mut PromptCache,
    reload: &mut dyn FnMut(&[String]) -> Result<TextModel>,
    on_lost: &mut dyn FnMut(&WorkerLost),
    mut on_event: impl FnMut(GenerationEvent) -> ControlFlow<()>,
) -> Result<RecoveredReply> {
    let mut tokens: Vec<u32> = Vec::new();
    let mut text = String::new();
    let mut lost: Vec<String> = Vec::new();
    let mut recoveries_left = slot.as_ref().map_or(0, |m| m.pipeline.remote_stages.len());
    loop {
        let Some(model) = slot.as_ref() else {
            anyhow::bail!("no model loaded");
        };
        let mut attempt = request.clone();
        attempt.prompt_tokens = [request.prompt_tokens.as_slice(), &tokens].concat();
        attempt.max_new_tokens = request.max_new_tokens - tokens.len();
        let mut attempt_tokens = Vec::new();
        let mut attempt_text = String::new();
        let result = generate_cached(model, &attempt, cache, |event| {
            if let GenerationEvent::Token(token) = event {
                attempt_tokens.extend(token.id);
                attempt_text.push_str(token.text);
            }
            on_event(event)
        });
        tokens.extend(attempt_tokens);
        text.push_str(&attempt_text);
        match result {
            Ok(last) => return Ok(RecoveredReply { last, tokens, text, lost }),
            Err(error) => {
                let Some(worker) = error.downcast_ref::<WorkerLost>() else {
                    return Err(error);
                };
                if recoveries_left == 0 || tokens.len() >= request.max_new_tokens {
                    return Err(error);
                }
                recoveries_left -= 1;
                on_lost(worker);
                lost.push(worker.address.clone());
                cache.clear(model);
                // Free the old model first: two at once may not fit.
                *slot = None;
                *slot = Some(reload(&lost)?);
            }
        }
    }
}
