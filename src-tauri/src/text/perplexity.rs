//! Per-token negative log-likelihood of a text under a model, in one causal pass.

use super::model::TextModel;
use super::pictures::PromptPicture;
use crate::models::decoder::LogitsFor;
use anyhow::{bail, Result};
use candle_core::{DType, Tensor, D};
use serde::Serialize;

/// Positions whose logits are computed at once (bounds memory to
/// `CHUNK × vocab` floats however long the text).
const CHUNK: usize = 128;

#[derive(Debug, Clone, Serialize)]
pub struct Perplexity {
    pub tokens: Vec<u32>,
    /// `nll[i]` is −ln p(tokens[i+1] | tokens[..=i]).
    pub nll: Vec<f32>,
    pub perplexity: f64,
}

/// Scores `tokens` (at least two) with one forward pass over all of them.
pub fn perplexity(model: &TextModel, tokens: &[u32]) -> Result<Perplexity> {
    perplexity_with(model, tokens, &[])
}

/// Like [`perplexity`] for tokens holding `pictures`.
pub fn perplexity_with(model: &TextModel, tokens: &[u32], pictures: &[PromptPicture]) -> Result<Perplexity> {
    if tokens.len() < 2 {
        bail!("perplexity needs at least two tokens, got {}", tokens.len());
    }
    let context = model.decoder().context_length();
    if tokens.len() > context {
        bail!("the text has {} tokens but the model's context length is {context}", tokens.len());
    }
    let decoder = model.decoder();
    let mut session = model.new_session();
    let hidden = model.hidden_states_with(tokens, 0, pictures, &mut session);
    model.end_session(session);
    let hidden = hidden?;
    let scored = tokens.len() - 1;
    let mut nll = Vec::with_capacity(scored);
    let mut start = 0;
    while start < scored {
        let len = CHUNK.min(scored - start);
        let logits = decoder.logits(&hidden.narrow(1, start, len)?, LogitsFor::All)?;
        let log_probs = candle_nn::ops::log_softmax(&logits.to_dtype(DType::F32)?, D::Minus1)?;
        let targets = Tensor::new(&tokens[start + 1..start + 1 + len], log_probs.device())?.unsqueeze(1)?;
        let picked = log_probs.gather(&targets, 1)?.squeeze(1)?.to_vec1::<f32>()?;
        nll.extend(picked.into_iter().map(|lp| -lp));
        start += len;
    }
    let mean = nll.iter().map(|&v| v as f64).sum::<f64>() / nll.len() as f64;
    Ok(Perplexity { tokens: tokens.to_vec(), nll, perplexity: mean.exp() })
}
