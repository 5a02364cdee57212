//! Log-probabilities of a reply's tokens: how likely the model found each
//! token it wrote and its most likely alternatives (OpenAI's `logprobs`).
//! They are the model's own distribution (before temperature, penalties
//! and any format's mask), one entry per token written (the end token not).

use super::tokenizer::{TextTokenizer, TokenPiece};
use serde::Serialize;

/// The most alternatives a request may ask for per token.
pub const MAX_TOP_LOGPROBS: usize = 20;

/// A written token, by id, with its log-probability and the `top` most likely tokens.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenLogprob {
    pub token: u32,
    pub logprob: f32,
    pub top: Vec<(u32, f32)>,
}

/// Log-probabilities from one step's logits: the normalizer, and the
/// `top` most likely tokens with theirs.
pub struct StepDistribution {
    log_normalizer: f32,
    top: Vec<(u32, f32)>,
}

impl StepDistribution {
    pub fn of(logits: &[f32], top: usize) -> Self {
        let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let sum: f32 = logits.iter().map(|&l| (l - max).exp()).sum();
        let log_normalizer = max + sum.ln();
        let mut best: Vec<(u32, f32)> = Vec::with_capacity(top + 1);
        for (id, &logit) in logits.iter().enumerate() {
            if best.len() < top || best.last().is_some_and(|&(_, l)| logit > l) {
                let at = best.partition_point(|&(_, l)| l >= logit);
                best.insert(at, (id as u32, logit));
                best.truncate(top);
            }
        }
        let top = best.into_iter().map(|(id, logit)| (id, logit - log_normalizer)).collect();
        Self { log_normalizer, top }
    }

    /// The entry for `token`, written after this step.
    pub fn entry(&self, logits: &[f32], token: u32) -> TokenLogprob {
        let logprob = logits.get(token as usize).map_or(f32::NEG_INFINITY, |&l| l - self.log_normalizer);
        TokenLogprob { token, logprob, top: self.top.clone() }
    }
}

/// A token as a client reads it: its text and exact bytes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TokenText {
    pub token: String,
    pub bytes: Vec<u8>,
    pub logprob: f32,
}

/// A written token's entry as clients read it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LogprobEntry {
    #[serde(flatten)]
    pub chosen: TokenText,
    pub top_logprobs: Vec<TokenText>,
}

/// `entries` with each token's text and bytes from `tokenizer`.
pub fn readable(tokenizer: &TextTokenizer, entries: &[TokenLogprob]) -> Vec<LogprobEntry> {
    let text = |id: u32, logprob: f32| {
        let bytes = match tokenizer.token_piece(id) {
            Some(TokenPiece::Bytes(bytes)) => bytes.clone(),
            Some(TokenPiece::Special(name)) => name.as_bytes().to_vec(),
            None => Vec::new(),
        };
        // A finite number for JSON: a token the model ruled out is as unlikely as f32 says.
        let logprob = if logprob.is_finite() { logprob } else { f32::MIN };
        TokenText { token: String::from_utf8_lossy(&bytes).into_owned(), bytes, logprob }
    };
    entries
        .iter()
        .map(|e| LogprobEntry {
            chosen: text(e.token, e.logprob),
            top_logprobs: e.top.iter().map(|&(id, logprob)| text(id, logprob)).collect(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_probabilities_normalize_and_the_top_come_in_order() {
        let logits = [1.0, 3.0, 2.0, f32::NEG_INFINITY];
        let step = StepDistribution::of(&logits, 2);
        let total: f32 = logits.iter().map(|&l| (l - step.log_normalizer).exp()).sum();
        assert!((total - 1.0).abs() < 1e-6);
        let entry = step.entry(&logits, 2);
        assert_eq!(entry.top.iter().map(|t| t.0).collect::<Vec<_>>(), [1, 2]);
        assert!((entry.logprob - entry.top[1].1).abs() < 1e-7);
        assert!(entry.top[0].1 > entry.top[1].1);
        assert_eq!(StepDistribution::of(&logits, 0).entry(&logits, 3).logprob, f32::NEG_INFINITY);
    }
}
