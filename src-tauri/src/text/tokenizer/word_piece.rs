//! WordPiece vocabularies (`tokenizer.ggml.model = "bert"`, BERT-style
//! embedding models): text is cleaned, lowercased and stripped of accents,
//! cut at whitespace and punctuation, and each word matched greedily
//! longest-first.
//!
//! llama.cpp's converter stores a word-opening piece as `▁piece` and a
//! continuation (`##piece` in the model's vocab.txt) as bare `piece`; the
//! vocab.txt spelling is restored here so the `tokenizers` crate's
//! WordPiece, the one transformers uses, runs on it.

use super::gguf_vocab::{GgufVocab, TokenKind};
use crate::formats::gguf::{GgufFile, Value};
use anyhow::{anyhow, Result};
use tokenizers::decoders::wordpiece::WordPiece as WordPieceDecoder;
use tokenizers::models::wordpiece::WordPiece;
use tokenizers::normalizers::bert::BertNormalizer;
use tokenizers::pre_tokenizers::bert::BertPreTokenizer;
use tokenizers::Tokenizer;

const CONTINUATION: &str = "##";

/// The tokenizer, and that BERT's `[CLS]` (and `[SEP]`) open and close each
/// text unless the file says otherwise.
pub fn build(vocab: &GgufVocab, file: &GgufFile) -> Result<(Tokenizer, bool)> {
    let origin = &vocab.origin;
    // The map type WordPiece takes (its own alias of it is private).
    let ids: tokenizers::models::bpe::Vocab = vocab
        .tokens
        .iter()
        .zip(&vocab.kinds)
        .enumerate()
        .map(|(id, (text, kind))| (vocab_txt_spelling(text, *kind), id as u32))
        .collect();
    let mut builder = WordPiece::builder().vocab(ids).continuing_subword_prefix(CONTINUATION.to_string());
    if let Some(unknown) = vocab.text(vocab.unknown) {
        builder = builder.unk_token(unknown.to_string());
    }
    let model = builder.build().map_err(|e| anyhow!("{origin}: invalid WordPiece vocabulary: {e}"))?;
    let mut tokenizer = Tokenizer::new(model);
    let flag = |key: &str| match file.get(key) {
        Some(Value::Bool(b)) => Some(*b),
        _ => None,
    };
    let lowercase = flag("tokenizer.ggml.normalizer.lowercase").unwrap_or(true);
    let strip_accents = flag("tokenizer.ggml.normalizer.strip_accents").unwrap_or(lowercase);
    tokenizer
        .with_normalizer(Some(BertNormalizer::new(true, true, Some(strip_accents), lowercase)))
        .map_err(|e| anyhow!("{e}"))?;
    tokenizer.with_pre_tokenizer(Some(BertPreTokenizer));
    tokenizer.with_decoder(Some(WordPieceDecoder::new(CONTINUATION.to_string(), true)));
    Ok((tokenizer, true))
}

/// A piece as BERT's vocab.txt spells it.
fn vocab_txt_spelling(stored: &str, kind: TokenKind) -> String {
    if kind == TokenKind::Control {
        return stored.to_string();
    }
    match stored.strip_prefix('▁') {
        Some(word_opening) => word_opening.to_string(),
        None => format!("{CONTINUATION}{stored}"),
    }
}
