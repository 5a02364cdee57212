//! The context a model runs in: how many tokens a conversation may hold,
//! and so how many positions each layer's cache keeps at most.

use super::config::{LayerAttention, ModelConfig};
use anyhow::{bail, Result};

/// The context length when none is chosen: the model's own, at most this.
pub const DEFAULT_CONTEXT_LENGTH: usize = 8192;
/// The shortest context one may choose: room for a chat template and a reply.
pub const MIN_CONTEXT_LENGTH: usize = 64;
/// Most prompt tokens run through the layers at once (llama.cpp's default
/// batch is the same): it bounds a forward pass's working memory.
pub const PREFILL_CHUNK: usize = 512;

/// The context a model runs in: `chosen`, or the model's own length up to
/// [`DEFAULT_CONTEXT_LENGTH`]. A choice longer than the model's own, or
/// shorter than [`MIN_CONTEXT_LENGTH`], is refused.
pub fn context_length(config: &ModelConfig, chosen: Option<usize>) -> Result<usize> {
    let own = config.max_position_embeddings;
    match chosen {
        None => Ok(own.clamp(1, DEFAULT_CONTEXT_LENGTH)),
        Some(n) if n > own => bail!("a context of {n} tokens is longer than the model's own ({own})"),
        Some(n) if n < MIN_CONTEXT_LENGTH => {
            bail!("a context of {n} tokens is too short: choose at least {MIN_CONTEXT_LENGTH}")
        }
        Some(n) => Ok(n),
    }
}

/// Positions a layer's cache holds at most in `context`: all of them, or
/// for a sliding window its width and one prompt chunk beyond it.
pub fn kv_positions(layer: &LayerAttention, context: usize) -> usize {
    match layer.sliding_window {
        Some(window) => context.min(window + PREFILL_CHUNK),
        None => context,
    }
}
