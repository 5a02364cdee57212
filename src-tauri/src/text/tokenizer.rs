//! Text ↔ token ids, from a `tokenizer.json` or from a GGUF file's metadata.
//!
//! GGUF files carry the vocabulary, merges and special ids instead of a
//! `tokenizer.json`; [`TextTokenizer::from_gguf`] rebuilds the same pipeline
//! transformers builds from them (byte-level BPE, control tokens as special
//! tokens, the split regex llama.cpp's `tokenizer.ggml.pre` names), so token
//! ids agree with the reference.

use crate::formats::gguf::Value;
use crate::formats::gguf::{value_to_u64, GgufFile};
use anyhow::{bail, Context, Result};
use std::collections::HashSet;
use std::path::Path;
use tokenizers::decoders::byte_level::ByteLevel as ByteLevelDecoder;
use tokenizers::models::bpe::BPE;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::processors::template::TemplateProcessing;
use tokenizers::{AddedToken, SplitDelimiterBehavior, Tokenizer};

/// A tokenizer plus the special tokens chat templates refer to.
pub struct TextTokenizer {
    inner: Tokenizer,
    pub bos_token: Option<String>,
    pub eos_token: Option<String>,
    /// See [`Self::longest_token_bytes`]; found on first use.
    longest_token: std::sync::OnceLock<usize>,
}

impl TextTokenizer {
    /// Loads `tokenizer.json`; special token names come from `tokenizer_config.json` when present.
    pub fn from_folder(dir: &Path) -> Result<Self> {
        let path = dir.join("tokenizer.json");
        if !path.exists() {
            bail!("{}: the model folder has no tokenizer.json", dir.display());
        }
        let inner = Tokenizer::from_file(&path)
            .map_err(|e| anyhow::anyhow!("{}: cannot load tokenizer: {e}", path.display()))?;
        let config = read_tokenizer_config(dir)?;
        let name = |key: &str| config.as_ref().and_then(|c| special_token_name(c.get(key)?));
        Ok(Self {
            inner,
            bos_token: name("bos_token"),
            eos_token: name("eos_token"),
            longest_token: Default::default(),
        })
    }

    /// Builds the tokenizer a GGUF file describes.
    pub fn from_gguf(file: &GgufFile) -> Result<Self> {
        let origin = file.path.display().to_string();
        let model = file.get_str("tokenizer.ggml.model").unwrap_or("(none)");
        if model != "gpt2" {
            bail!("{origin}: tokenizer type `{model}` is not supported yet (supported: gpt2 byte-level BPE)");
        }
        let tokens = string_array(file, "tokenizer.ggml.tokens")?;
        let merges = string_array(file, "tokenizer.ggml.merges")?;
        let token_types = match file.get("tokenizer.ggml.token_type") {
            Some(Value::Array(items)) => items.iter().map(|v| value_to_u64(v).unwrap_or(1)).collect(),
            _ => vec![1; tokens.len()],
        };
        let alphabet = byte_alphabet();
        let alphabet_chars: HashSet<char> = alphabet.iter().copied().collect();
        let in_alphabet = |t: &str| t.chars().all(|c| alphabet_chars.contains(&c));
        let vocab: tokenizers::models::bpe::Vocab = tokens
            .iter()
            .enumerate()
            .map(|(id, t)| {
                let spelled =
                    if in_alphabet(t) { t.clone() } else { t.bytes().map(|b| alphabet[b as usize]).collect() };
                (spelled, id as u32)
            })
            .collect();
        let merges = merges
            .iter()
            .map(|m| {
                m.split_once(' ')
                    .map(|(a, b)| (a.to_string(), b.to_string()))
                    .with_context(|| format!("{origin}: malformed merge `{m}`"))
            })
            .collect::<Result<Vec<_>>>()?;
        let bpe = BPE::builder()
            .vocab_and_merges(vocab, merges)
            .build()
            .map_err(|e| anyhow::anyhow!("{origin}: invalid BPE vocabulary: {e}"))?;
        let mut inner = Tokenizer::new(bpe);
        let byte_level = ByteLevel::new(false, true, true);
        match file.get_str("tokenizer.ggml.pre").and_then(split_regex) {
            Some(regex) => {
                let split = Split::new(SplitPattern::Regex(regex.into()), SplitDelimiterBehavior::Isolated, false)
                    .map_err(|e| anyhow::anyhow!("split regex: {e}"))?;
                inner.with_pre_tokenizer(Some(Sequence::new(vec![
                    split.into(),
                    ByteLevel::new(false, true, false).into(),
                ])));
            }
            None => {
                inner.with_pre_tokenizer(Some(byte_level));
            }
        }
        inner.with_decoder(Some(ByteLevelDecoder::default()));

        const CONTROL: u64 = 3;
        const USER_DEFINED: u64 = 4;
        let special: Vec<AddedToken> = tokens
            .iter()
            .zip(&token_types)
            .filter(|(t, &ty)| ty == CONTROL && in_alphabet(t))
            .map(|(t, _)| AddedToken::from(t.clone(), true).normalized(false))
            .collect();
        inner.add_special_tokens(special).map_err(|e| anyhow::anyhow!("{e}"))?;
        let user: Vec<AddedToken> = tokens
            .iter()
            .zip(&token_types)
            .filter(|(t, &ty)| ty == USER_DEFINED && in_alphabet(t))
            .map(|(t, _)| AddedToken::from(t.clone(), false).normalized(false))
            .collect();
        inner.add_tokens(user).map_err(|e| anyhow::anyhow!("{e}"))?;

        let token_at = |key: &str| file.get(key).and_then(value_to_u64).and_then(|id| tokens.get(id as usize).cloned());
        let bos_token = token_at("tokenizer.ggml.bos_token_id");
        let eos_token = token_at("tokenizer.ggml.eos_token_id");
        let add_bos = matches!(file.get("tokenizer.ggml.add_bos_token"), Some(Value::Bool(true)));
        if let (true, Some(bos)) = (add_bos, &bos_token) {
            let bos_id = inner.token_to_id(bos).context("BOS token not in vocabulary")?;
            let processor = TemplateProcessing::builder()
                .try_single(format!("{bos} $A"))
                .and_then(|b| b.try_pair(format!("{bos} $A {bos} $B:1")))
                .map_err(|e| anyhow::anyhow!("{e}"))?
                .special_tokens(vec![(bos.clone(), bos_id)])
                .build()
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            inner.with_post_processor(Some(processor));
        }
        Ok(Self { inner, bos_token, eos_token, longest_token: Default::default() })
    }

    /// Token ids of `text`; `add_special_tokens` adds what the tokenizer itself adds (e.g. BOS).
    pub fn encode(&self, text: &str, add_special_tokens: bool) -> Result<Vec<u32>> {
        let encoding =
            self.inner.encode(text, add_special_tokens).map_err(|e| anyhow::anyhow!("cannot tokenize: {e}"))?;
        Ok(encoding.get_ids().to_vec())
    }

    /// Text of `ids`, optionally leaving out special tokens.
    pub fn decode(&self, ids: &[u32], skip_special_tokens: bool) -> Result<String> {
        self.inner.decode(ids, skip_special_tokens).map_err(|e| anyhow::anyhow!("cannot decode tokens: {e}"))
    }

    /// The most bytes of text one token stands for, at most: the longest
    /// vocabulary entry as stored (the markers vocabularies store for a
    /// space or a byte take at least as many bytes as what they stand for).
    pub fn longest_token_bytes(&self) -> usize {
        *self.longest_token.get_or_init(|| self.inner.get_vocab(true).keys().map(String::len).max().unwrap_or(1))
    }

    /// The id of a token string, if it is in the vocabulary.
    pub fn token_id(&self, token: &str) -> Option<u32> {
        self.inner.token_to_id(token)
    }
}

fn read_tokenizer_config(dir: &Path) -> Result<Option<serde_json::Value>> {
    let path = dir.join("tokenizer_config.json");
    if !path.exists() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
    let value = serde_json::from_str(&text).with_context(|| format!("{}: not valid JSON", path.display()))?;
    Ok(Some(value))
}

/// A special token given as a string or as `{"content": ...}`.
pub fn special_token_name(value: &serde_json::Value) -> Option<String> {
    match value {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Object(o) => o.get("content")?.as_str().map(str::to_string),
        _ => None,
    }
}

fn string_array(file: &GgufFile, key: &str) -> Result<Vec<String>> {
    let origin = file.path.display();
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

/// GPT-2's printable spelling of each byte value, indexed by byte.
fn byte_alphabet() -> Vec<char> {
    let printable = |b: u32| (33..=126).contains(&b) || (161..=172).contains(&b) || (174..=255).contains(&b);
    let mut next_unused = 256;
    (0..256u32)
        .map(|b| {
            if printable(b) {
                char::from_u32(b).expect("latin-1 is valid")
            } else {
                let c = char::from_u32(next_unused).expect("below the surrogate range");
                next_unused += 1;
                c
            }
        })
        .collect()
}

/// The pre-split regex for llama.cpp's `tokenizer.ggml.pre` names, where the
/// plain GPT-2 byte-level split is not what the vocabulary was trained with.
fn split_regex(pre: &str) -> Option<&'static str> {
    const LLAMA3: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
    const QWEN2: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
    match pre {
        "llama3" | "llama-v3" | "llama-bpe" | "falcon3" | "smaug-bpe" | "dbrx" => Some(LLAMA3),
        "qwen2" | "deepseek-r1-qwen" => Some(QWEN2),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_alphabet_is_gpt2s() {
        let a = byte_alphabet();
        assert_eq!(a[b'A' as usize], 'A');
        assert_eq!(a[b' ' as usize], 'Ġ');
        assert_eq!(a[b'\n' as usize], 'Ċ');
        assert_eq!(a.iter().collect::<HashSet<_>>().len(), 256);
    }
}
