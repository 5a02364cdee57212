//! Byte-level BPE vocabularies (`tokenizer.ggml.model = "gpt2"`): the words
//! [`PreSplit`] cuts are spelled in GPT-2's byte alphabet and merged in the
//! order of `tokenizer.ggml.merges`, the pipeline transformers builds from
//! the same vocabulary.

use super::gguf_vocab::GgufVocab;
use super::pre_split::PreSplit;
use anyhow::{anyhow, Result};
use tokenizers::decoders::byte_level::ByteLevel as ByteLevelDecoder;
use tokenizers::models::bpe::{Vocab, BPE};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::{SplitDelimiterBehavior, Tokenizer};

/// The tokenizer, and whether its vocabulary adds BOS unless the file says.
pub fn build(vocab: &GgufVocab) -> Result<(Tokenizer, bool)> {
    let origin = &vocab.origin;
    let split = PreSplit::named(origin, vocab.pre.as_deref())?;
    if vocab.pre.is_none() {
        tracing::warn!(file = %origin, "no tokenizer.ggml.pre: splitting text with llama.cpp's default");
    }
    let ids: Vocab = vocab.tokens.iter().enumerate().map(|(id, text)| (text.clone(), id as u32)).collect();
    let bpe = BPE::builder()
        .vocab_and_merges(ids, vocab.merges.clone())
        .ignore_merges(split.ignore_merges)
        .build()
        .map_err(|e| anyhow!("{origin}: invalid BPE vocabulary: {e}"))?;
    let mut tokenizer = Tokenizer::new(bpe);
    let mut steps = split
        .regexes
        .iter()
        .map(|regex| {
            Split::new(SplitPattern::Regex(regex.to_string()), SplitDelimiterBehavior::Isolated, false)
                .map(PreTokenizerWrapper::from)
                .map_err(|e| anyhow!("split regex `{regex}`: {e}"))
        })
        .collect::<Result<Vec<_>>>()?;
    steps.push(ByteLevel::new(false, true, false).into());
    tokenizer.with_pre_tokenizer(Some(Sequence::new(steps)));
    tokenizer.with_decoder(Some(ByteLevelDecoder::default()));
    Ok((tokenizer, split.adds_bos))
}
