//! Text ↔ token ids, from a `tokenizer.json` or from a GGUF file's metadata.
//!
//! GGUF files carry the vocabulary, merges or scores and special ids
//! instead of a `tokenizer.json`; [`TextTokenizer::from_gguf`] rebuilds the
//! pipeline transformers builds from them (byte-level BPE with the split
//! llama.cpp's `tokenizer.ggml.pre` names, or SentencePiece), so token ids
//! agree with transformers and llama.cpp (checked against llama.cpp's own
//! tokenizer test vocabularies in `tests/gguf_vocabularies.rs`).

mod byte_level_bpe;
mod chat_text;
pub use chat_text::SpecialTokenInMessage;
pub mod gguf_vocab;
pub mod pre_split;
mod sentencepiece;
mod token_bytes;
pub use token_bytes::TokenPiece;
mod word_piece;

use crate::formats::gguf::GgufFile;
use anyhow::{anyhow, bail, Context, Result};
use gguf_vocab::{GgufVocab, TokenKind, VocabModel};
use std::path::Path;
use tokenizers::processors::template::TemplateProcessing;
use tokenizers::{AddedToken, Tokenizer};

/// A tokenizer plus the special tokens chat templates refer to.
pub struct TextTokenizer {
    inner: Tokenizer,
    pub bos_token: Option<String>,
    pub eos_token: Option<String>,
    /// See [`Self::end_of_generation_ids`].
    end_of_generation: Vec<u32>,
    /// The special tokens' texts, found on first use (see [`Self::encode_chat`]).
    special_texts: std::sync::OnceLock<Option<chat_text::SpecialTexts>>,
    /// See [`Self::longest_token_bytes`]; found on first use.
    longest_token: std::sync::OnceLock<usize>,
    /// See [`Self::token_piece`]; read on first use.
    pieces: std::sync::OnceLock<Vec<TokenPiece>>,
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
            end_of_generation: Vec::new(),
            special_texts: Default::default(),
            longest_token: Default::default(),
            pieces: Default::default(),
        })
    }

    /// Builds the tokenizer a GGUF file describes; a tokenizer model or
    /// pre-tokenizer Cake does not know is refused with its name.
    pub fn from_gguf(file: &GgufFile) -> Result<Self> {
        let vocab = GgufVocab::read(file)?;
        let (mut inner, adds_bos_by_default) = match vocab.model {
            VocabModel::ByteLevelBpe => byte_level_bpe::build(&vocab)?,
            VocabModel::SentencePiece => sentencepiece::build(&vocab)?,
            VocabModel::WordPiece => word_piece::build(&vocab, file)?,
        };
        add_vocabulary_specials(&mut inner, &vocab)?;
        let add_bos = vocab.add_bos.unwrap_or(adds_bos_by_default);
        let add_eos = vocab.add_eos.unwrap_or(vocab.model == VocabModel::WordPiece);
        let edge = |add: bool, id: Option<u32>, what: &str| -> Result<Option<(String, u32)>> {
            match (add, id) {
                (false, _) => Ok(None),
                (true, Some(id)) => Ok(Some((vocab.tokens[id as usize].clone(), id))),
                (true, None) => bail!("{}: the vocabulary asks to add a {what} token but has none", vocab.origin),
            }
        };
        let added = [edge(add_bos, vocab.bos, "BOS")?, edge(add_eos, vocab.eos, "EOS")?];
        if let Some(processor) = edge_processor(&added)? {
            inner.with_post_processor(Some(processor));
        }
        Ok(Self {
            inner,
            bos_token: vocab.text(vocab.bos).map(str::to_string),
            eos_token: vocab.text(vocab.eos).map(str::to_string),
            end_of_generation: vocab.end_of_generation,
            special_texts: Default::default(),
            longest_token: Default::default(),
            pieces: Default::default(),
        })
    }

    /// Whether Cake can read the vocabulary a GGUF file names, without
    /// building it: the tokenizer model and, for byte-level BPE, its split.
    pub fn check_gguf(file: &GgufFile) -> Result<()> {
        let origin = file.path.display().to_string();
        let model = VocabModel::named(&origin, file.get_str("tokenizer.ggml.model"))?;
        if model == VocabModel::ByteLevelBpe {
            pre_split::PreSplit::named(&origin, file.get_str("tokenizer.ggml.pre"))?;
        }
        Ok(())
    }

    /// Ids that end a reply besides the model's EOS: a GGUF vocabulary's
    /// end-of-turn tokens (`<|im_end|>`, `<end_of_turn>`, `<|eot_id|>` …).
    pub fn end_of_generation_ids(&self) -> &[u32] {
        &self.end_of_generation
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

    fn special_texts(&self) -> Option<&chat_text::SpecialTexts> {
        self.special_texts.get_or_init(|| chat_text::SpecialTexts::of(&self.inner)).as_ref()
    }

    /// What token `id` stands for (its bytes, or its special name); `None`
    /// past the vocabulary or for a vocabulary that does not spell bytes.
    pub fn token_piece(&self, id: u32) -> Option<&TokenPiece> {
        self.pieces.get_or_init(|| self.token_pieces().unwrap_or_default()).get(id as usize)
    }

    /// The id of a token string, if it is in the vocabulary.
    pub fn token_id(&self, token: &str) -> Option<u32> {
        self.inner.token_to_id(token)
    }
}

impl crate::models::vision::PictureVocabulary for TextTokenizer {
    fn id(&self, name: &str) -> Option<u32> {
        self.token_id(name)
    }

    fn add_placeholder(&mut self, name: &str) -> Result<u32> {
        self.inner
            .add_special_tokens([AddedToken::from(name, true)])
            .map_err(|e| anyhow!("cannot add the token {name} to the vocabulary: {e}"))?;
        // Found again on first use, with the new token.
        self.special_texts = Default::default();
        self.longest_token = Default::default();
        self.pieces = Default::default();
        self.token_id(name).with_context(|| format!("cannot add the token {name} to the vocabulary"))
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

/// Control and unknown tokens as special tokens (skipped when decoding
/// without specials), user-defined ones as plain added tokens; both are
/// matched in the text as written, before any splitting.
fn add_vocabulary_specials(tokenizer: &mut Tokenizer, vocab: &GgufVocab) -> Result<()> {
    let added = |wanted: &[TokenKind], special: bool| -> Vec<AddedToken> {
        vocab
            .tokens
            .iter()
            .zip(&vocab.kinds)
            .filter(|(_, kind)| wanted.contains(kind))
            .map(|(text, _)| AddedToken::from(text.clone(), special).normalized(false))
            .collect()
    };
    tokenizer.add_special_tokens(added(&[TokenKind::Control, TokenKind::Unknown], true)).map_err(|e| anyhow!("{e}"))?;
    tokenizer.add_tokens(added(&[TokenKind::UserDefined], false)).map_err(|e| anyhow!("{e}"))?;
    Ok(())
}

/// A post-processor adding the given BOS and EOS tokens around each text.
fn edge_processor(added: &[Option<(String, u32)>; 2]) -> Result<Option<TemplateProcessing>> {
    let [bos, eos] = added;
    if bos.is_none() && eos.is_none() {
        return Ok(None);
    }
    let name = |t: &Option<(String, u32)>| t.as_ref().map(|(text, _)| text.clone());
    let single: Vec<String> = [name(bos), Some("$A".to_string()), name(eos)].into_iter().flatten().collect();
    let pair: Vec<String> = [name(bos), Some("$A".into()), name(eos), name(bos), Some("$B:1".into()), name(eos)]
        .into_iter()
        .flatten()
        .collect();
    let mut specials: Vec<(String, u32)> = added.iter().flatten().cloned().collect();
    specials.dedup();
    let processor = TemplateProcessing::builder()
        .try_single(single)
        .and_then(|b| b.try_pair(pair))
        .map_err(|e| anyhow!("{e}"))?
        .special_tokens(specials)
        .build()
        .map_err(|e| anyhow!("{e}"))?;
    Ok(Some(processor))
}
