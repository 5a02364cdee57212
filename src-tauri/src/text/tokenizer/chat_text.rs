//! Tokenizing a rendered chat so that special tokens come only from the
//! template. Someone who writes `<|im_end|>` in a message (to ask about it,
//! or to forge a turn) gets those characters tokenized as plain text, not
//! the control token that would end their turn early.
//!
//! Without such text the ids are exactly what encoding the whole rendered
//! prompt gives (transformers and llama.cpp split at special tokens and
//! encode the pieces between them, as here).

use super::TextTokenizer;
use aho_corasick::{AhoCorasick, MatchKind};
use anyhow::{anyhow, Result};
use std::ops::Range;
use tokenizers::Tokenizer;

/// The special tokens' texts, found leftmost-longest as the tokenizer does.
pub(super) struct SpecialTexts {
    matcher: AhoCorasick,
    ids: Vec<u32>,
    /// The tokenizer with special-token parsing off, made on first need.
    plain: std::sync::OnceLock<Tokenizer>,
}

impl SpecialTexts {
    pub(super) fn of(tokenizer: &Tokenizer) -> Option<Self> {
        let (ids, texts): (Vec<u32>, Vec<String>) = tokenizer
            .get_added_tokens_decoder()
            .into_iter()
            .filter(|(_, token)| token.special && !token.content.is_empty())
            .map(|(id, token)| (id, token.content))
            .unzip();
        let matcher = AhoCorasick::builder().match_kind(MatchKind::LeftmostLongest).build(&texts).ok()?;
        (!ids.is_empty()).then(|| Self { matcher, ids, plain: Default::default() })
    }
}

impl TextTokenizer {
    /// Ids of `rendered`, a chat template's output for messages whose texts
    /// are `written`: special tokens spelled inside those texts stay text.
    pub fn encode_chat(&self, rendered: &str, written: &[&str]) -> Result<Vec<u32>> {
        let Some(specials) = self.special_texts() else { return self.encode(rendered, false) };
        let protected = written_spans(rendered, written, specials)?;
        if protected.is_empty() {
            return self.encode(rendered, false);
        }
        let plain = specials.plain.get_or_init(|| {
            let mut plain = self.inner.clone();
            plain.set_encode_special_tokens(true);
            plain
        });
        let encode_plain = |text: &str| -> Result<Vec<u32>> {
            let encoding = plain.encode(text, false).map_err(|e| anyhow!("cannot tokenize: {e}"))?;
            Ok(encoding.get_ids().to_vec())
        };
        let mut ids = Vec::new();
        let mut start = 0;
        for found in specials.matcher.find_iter(rendered) {
            if protected.iter().any(|span| span.start < found.end() && found.start() < span.end) {
                continue;
            }
            ids.extend(encode_plain(&rendered[start..found.start()])?);
            ids.push(specials.ids[found.pattern().as_usize()]);
            start = found.end();
        }
        ids.extend(encode_plain(&rendered[start..])?);
        Ok(ids)
    }
}

/// A message spells a special token, and the template changed that
/// message's text, so the token cannot be told apart from the template's
/// own: the request's fault, refused rather than parsed as a control token.
#[derive(Debug)]
pub struct SpecialTokenInMessage {
    pub token: String,
}

impl std::fmt::Display for SpecialTokenInMessage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "a message contains the special token `{}`, and the chat template changes that message's text, so Cake \
             cannot keep it as plain text: leave the token out of the message",
            self.token
        )
    }
}

impl std::error::Error for SpecialTokenInMessage {}

/// Where each written text that spells a special token sits in `rendered`
/// (as written or trimmed, as templates often trim), in order.
fn written_spans(rendered: &str, written: &[&str], specials: &SpecialTexts) -> Result<Vec<Range<usize>>> {
    let mut spans = Vec::new();
    let mut cursor = 0;
    for text in written {
        let Some(special) = specials.matcher.find(text) else { continue };
        let found = [*text, text.trim()]
            .into_iter()
            .find_map(|candidate| rendered[cursor..].find(candidate).map(|at| (cursor + at, candidate.len())));
        let Some((at, len)) = found else {
            return Err(SpecialTokenInMessage { token: text[special.range()].to_string() }.into());
        };
        spans.push(at..at + len);
        cursor = at + len;
    }
    Ok(spans)
}
