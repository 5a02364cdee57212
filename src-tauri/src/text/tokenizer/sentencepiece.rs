//! SentencePiece vocabularies (`tokenizer.ggml.model = "llama"`: Llama 2,
//! Mistral v0.1–v0.3, Gemma, Phi-3): spaces become `▁`, a dummy `▁` opens
//! the text, and adjacent pieces merge highest score first into pieces of
//! the vocabulary; characters no piece covers fall back to `<0xXX>` bytes.
//!
//! transformers' converters express this as a BPE whose merges are every
//! split of a piece into two pieces, ranked by the merged piece's score;
//! the same is built here from `tokenizer.ggml.scores`, so ids agree with
//! both transformers and llama.cpp.

use super::gguf_vocab::GgufVocab;
use anyhow::{anyhow, Result};
use std::collections::HashMap;
use tokenizers::decoders::byte_fallback::ByteFallback;
use tokenizers::decoders::fuse::Fuse;
use tokenizers::decoders::sequence::Sequence as DecoderSequence;
use tokenizers::decoders::strip::Strip;
use tokenizers::decoders::DecoderWrapper;
use tokenizers::models::bpe::{Vocab, BPE};
use tokenizers::normalizers::prepend::Prepend;
use tokenizers::normalizers::replace::Replace;
use tokenizers::normalizers::utils::Sequence as NormalizerSequence;
use tokenizers::normalizers::NormalizerWrapper;
use tokenizers::Tokenizer;

/// SentencePiece's visible space.
const SPACE: &str = "▁";

/// The tokenizer, and that SentencePiece adds BOS unless the file says.
pub fn build(vocab: &GgufVocab) -> Result<(Tokenizer, bool)> {
    let origin = &vocab.origin;
    let ids: Vocab = vocab.tokens.iter().enumerate().map(|(id, text)| (text.clone(), id as u32)).collect();
    let mut builder = BPE::builder().vocab_and_merges(ids, merges_by_score(vocab)).byte_fallback(true).fuse_unk(true);
    if let Some(unknown) = vocab.text(vocab.unknown) {
        builder = builder.unk_token(unknown.to_string());
    }
    let bpe = builder.build().map_err(|e| anyhow!("{origin}: invalid SentencePiece vocabulary: {e}"))?;
    let mut tokenizer = Tokenizer::new(bpe);

    let space_prefix = vocab.add_space_prefix.unwrap_or(true);
    let spaces = Replace::new(" ", SPACE).map_err(|e| anyhow!("{e}"))?;
    let mut normalize: Vec<NormalizerWrapper> = Vec::new();
    if space_prefix {
        normalize.push(Prepend::new(SPACE.to_string()).into());
    }
    normalize.push(spaces.into());
    tokenizer.with_normalizer(Some(NormalizerSequence::new(normalize))).map_err(|e| anyhow!("{e}"))?;

    let mut decode: Vec<DecoderWrapper> = vec![
        Replace::new(SPACE, " ").map_err(|e| anyhow!("{e}"))?.into(),
        ByteFallback::new().into(),
        Fuse::new().into(),
    ];
    if space_prefix {
        decode.push(Strip::new(' ', 1, 0).into());
    }
    tokenizer.with_decoder(Some(DecoderSequence::new(decode)));
    Ok((tokenizer, true))
}

/// Every way to make a piece from two pieces, best merged piece first:
/// by score, then longer left part, then longer right part, then the
/// merged piece's id and the parts' ids (transformers' order).
fn merges_by_score(vocab: &GgufVocab) -> Vec<(String, String)> {
    let id_of: HashMap<&str, usize> = vocab.tokens.iter().enumerate().map(|(id, t)| (t.as_str(), id)).collect();
    struct Candidate<'a> {
        left: &'a str,
        right: &'a str,
        score: f32,
        left_chars: usize,
        right_chars: usize,
    }
    let mut candidates = Vec::new();
    for (piece, &score) in vocab.tokens.iter().zip(&vocab.scores) {
        let mut splits: Vec<(usize, usize, Candidate)> = piece
            .char_indices()
            .skip(1)
            .filter_map(|(at, _)| {
                let (left, right) = piece.split_at(at);
                let (&left_id, &right_id) = (id_of.get(left)?, id_of.get(right)?);
                let (left_chars, right_chars) = (left.chars().count(), right.chars().count());
                Some((left_id, right_id, Candidate { left, right, score, left_chars, right_chars }))
            })
            .collect();
        splits.sort_by_key(|&(l, r, _)| (l, r));
        candidates.extend(splits.into_iter().map(|(_, _, c)| c));
    }
    candidates.sort_by(|a, b| {
        b.score.total_cmp(&a.score).then(b.left_chars.cmp(&a.left_chars)).then(b.right_chars.cmp(&a.right_chars))
    });
    candidates.into_iter().map(|c| (c.left.to_string(), c.right.to_string())).collect()
}
