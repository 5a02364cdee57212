//! The vocabulary a GGUF file carries under `tokenizer.ggml.*`, read once
//! into types: token texts, scores and kinds, the special ids and the
//! flags that say what encoding adds. Both tokenizer builders
//! ([`super::byte_level_bpe`], [`super::sentencepiece`]) start from it.

use crate::formats::gguf::{value_to_f64, value_to_u64, GgufFile, Value};
use anyhow::{bail, Result};
use std::collections::HashMap;

/// What llama.cpp's `tokenizer.ggml.model` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VocabModel {
    /// `gpt2`: byte-level BPE with merges.
    ByteLevelBpe,
    /// `llama`: SentencePiece pieces merged by score, with byte fallback.
    SentencePiece,
    /// `bert`: WordPiece, longest piece first (BERT-style embedding models).
    WordPiece,
}

impl VocabModel {
    /// The model a GGUF names, or an error naming what it names instead.
    pub fn named(origin: &str, name: Option<&str>) -> Result<Self> {
        match name {
            Some("gpt2") => Ok(Self::ByteLevelBpe),
            Some("llama") => Ok(Self::SentencePiece),
            Some("bert") => Ok(Self::WordPiece),
            Some(other) => bail!(
                "{origin}: tokenizer model `{other}` is not supported (supported: `gpt2` byte-level BPE, \
                 `llama` SentencePiece, `bert` WordPiece)"
            ),
            None => bail!("{origin}: the file has no `tokenizer.ggml.model`, so its vocabulary cannot be read"),
        }
    }
}

/// A token's kind, as gguf-py numbers `tokenizer.ggml.token_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenKind {
    Normal,
    Unknown,
    /// Inserted by templates and the tokenizer itself (`<s>`, `<|im_end|>`).
    Control,
    /// Added by the model's authors and matched in plain text.
    UserDefined,
    Unused,
    /// SentencePiece's `<0xXX>` byte-fallback pieces.
    Byte,
}

impl TokenKind {
    fn from_code(code: u64) -> Self {
        match code {
            2 => Self::Unknown,
            3 => Self::Control,
            4 => Self::UserDefined,
            5 => Self::Unused,
            6 => Self::Byte,
            _ => Self::Normal,
        }
    }
}

/// Token texts llama.cpp treats as ends of generation wherever they are
/// control tokens, besides the file's own EOS/EOT/EOM ids.
const END_OF_GENERATION_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<｜end▁of▁sentence｜>",
    "<|end▁of▁sentence|>",
];

/// The vocabulary of one GGUF file.
pub struct GgufVocab {
    /// The file, for error messages.
    pub origin: String,
    pub model: VocabModel,
    /// `tokenizer.ggml.pre`, where the file names one.
    pub pre: Option<String>,
    pub tokens: Vec<String>,
    pub kinds: Vec<TokenKind>,
    /// SentencePiece scores (0 where the file has none).
    pub scores: Vec<f32>,
    /// `tokenizer.ggml.merges` (byte-level BPE only).
    pub merges: Vec<(String, String)>,
    pub bos: Option<u32>,
    pub eos: Option<u32>,
    pub unknown: Option<u32>,
    /// `add_bos_token`/`add_eos_token` where the file says; the builders
    /// apply each model's default otherwise.
    pub add_bos: Option<bool>,
    pub add_eos: Option<bool>,
    /// `add_space_prefix` where the file says (SentencePiece's dummy prefix).
    pub add_space_prefix: Option<bool>,
    /// Ids whose sampling ends a reply.
    pub end_of_generation: Vec<u32>,
}

impl GgufVocab {
    /// Reads and checks the vocabulary of `file`.
    pub fn read(file: &GgufFile) -> Result<Self> {
        let origin = file.path.display().to_string();
        let model = VocabModel::named(&origin, file.get_str("tokenizer.ggml.model"))?;
        let tokens = string_array(file, &origin, "tokenizer.ggml.tokens")?;
        if tokens.is_empty() {
            bail!("{origin}: `tokenizer.ggml.tokens` is empty");
        }
        let count = tokens.len();
        let kinds = match numbers(file, &origin, "tokenizer.ggml.token_type", count)? {
            Some(codes) => codes.iter().map(|&c| TokenKind::from_code(c as u64)).collect(),
            None => vec![TokenKind::Normal; count],
        };
        let scores = numbers(file, &origin, "tokenizer.ggml.scores", count)?
            .map(|s| s.into_iter().map(|v| v as f32).collect())
            .unwrap_or_else(|| vec![0.0; count]);
        let merges = match model {
            VocabModel::ByteLevelBpe => string_array(file, &origin, "tokenizer.ggml.merges")?
                .into_iter()
                .map(|m| match m.split_once(' ') {
                    Some((a, b)) if !a.is_empty() => Ok((a.to_string(), b.to_string())),
                    _ => bail!("{origin}: malformed merge `{m}` in `tokenizer.ggml.merges`"),
                })
                .collect::<Result<_>>()?,
            VocabModel::SentencePiece | VocabModel::WordPiece => Vec::new(),
        };
        check_unique(&origin, &tokens)?;
        let id = |key: &str| -> Result<Option<u32>> {
            match file.get(key).map(value_to_u64) {
                None => Ok(None),
                Some(Some(id)) if (id as usize) < count => Ok(Some(id as u32)),
                Some(_) => bail!("{origin}: `{key}` is not a token id below the vocabulary's {count}"),
            }
        };
        let (default_bos, default_eos, default_unknown) = match model {
            VocabModel::SentencePiece => (Some(1), Some(2), Some(0)),
            // BERT's [CLS] and [SEP] open and close each text.
            VocabModel::WordPiece => {
                (id("tokenizer.ggml.cls_token_id")?, id("tokenizer.ggml.seperator_token_id")?, None)
            }
            VocabModel::ByteLevelBpe => (None, None, None),
        };
        let bos = id("tokenizer.ggml.bos_token_id")?.or(default_bos.filter(|&i| i < count as u32));
        let eos = id("tokenizer.ggml.eos_token_id")?.or(default_eos.filter(|&i| i < count as u32));
        let unknown = id("tokenizer.ggml.unknown_token_id")?.or(default_unknown);
        let flag = |key: &str| match file.get(key) {
            Some(Value::Bool(b)) => Some(*b),
            _ => None,
        };
        let mut end_of_generation: Vec<u32> =
            [eos, id("tokenizer.ggml.eot_token_id")?, id("tokenizer.ggml.eom_token_id")?]
                .into_iter()
                .flatten()
                .collect();
        end_of_generation.extend(tokens.iter().zip(&kinds).enumerate().filter_map(|(i, (text, kind))| {
            let marks_end = matches!(kind, TokenKind::Control | TokenKind::UserDefined)
                && END_OF_GENERATION_TEXTS.contains(&text.as_str());
            marks_end.then_some(i as u32)
        }));
        end_of_generation.sort_unstable();
        end_of_generation.dedup();
        Ok(Self {
            pre: file.get_str("tokenizer.ggml.pre").map(str::to_string),
            add_bos: flag("tokenizer.ggml.add_bos_token"),
            add_eos: flag("tokenizer.ggml.add_eos_token"),
            add_space_prefix: flag("tokenizer.ggml.add_space_prefix"),
            origin,
            model,
            tokens,
            kinds,
            scores,
            merges,
            bos,
            eos,
            unknown,
            end_of_generation,
        })
    }

    /// The text of token `id`, if there is one.
    pub fn text(&self, id: Option<u32>) -> Option<&str> {
        id.and_then(|i| self.tokens.get(i as usize)).map(String::as_str)
    }
}

/// Two ids with one text would make one of them unreachable (llama.cpp
/// refuses such files too).
fn check_unique(origin: &str, tokens: &[String]) -> Result<()> {
    let mut seen: HashMap<&str, usize> = HashMap::with_capacity(tokens.len());
    for (id, text) in tokens.iter().enumerate() {
        if let Some(first) = seen.insert(text, id) {
            bail!("{origin}: tokens {first} and {id} are both `{text}`");
        }
    }
    Ok(())
}

fn string_array(file: &GgufFile, origin: &str, key: &str) -> Result<Vec<String>> {
    match file.require(key)? {
        Value::Array(items) => items
            .iter()
            .map(|v| match v {
                Value::String(s) => Ok(s.clone()),
                other => bail!("{origin}: `{key}` holds a non-string {other:?}"),
            })
            .collect(),
        _ => bail!("{origin}: `{key}` is not an array"),
    }
}

/// A numeric array of exactly `count` entries, if the file has the key.
fn numbers(file: &GgufFile, origin: &str, key: &str, count: usize) -> Result<Option<Vec<f64>>> {
    let Some(value) = file.get(key) else { return Ok(None) };
    let Value::Array(items) = value else { bail!("{origin}: `{key}` is not an array") };
    if items.len() != count {
        bail!("{origin}: `{key}` has {} entries for {count} tokens", items.len());
    }
    let values = items
        .iter()
        .map(|v| value_to_f64(v).ok_or_else(|| anyhow::anyhow!("{origin}: `{key}` holds a non-number {v:?}")))
        .collect::<Result<_>>()?;
    Ok(Some(values))
}
