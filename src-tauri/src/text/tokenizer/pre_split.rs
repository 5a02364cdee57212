//! How byte-level BPE vocabularies cut text into words before merging,
//! one entry per `tokenizer.ggml.pre` name llama.cpp knows for the
//! families Cake serves (its `llama-vocab.cpp` is the source of truth).
//!
//! Each name maps to regexes applied in order, each cutting the pieces the
//! previous one left (text a regex does not match stays a piece of its
//! own), which is what transformers' `Split(..., "isolated")` does. Where
//! llama.cpp rewrote a Hugging Face regex for its own engine (Tekken,
//! GPT-4o), the original with Unicode case classes is used: both mean the
//! same split. Non-ASCII characters are written as `\x{..}` escapes so no
//! editor's Unicode normalization can change a range. A name not listed is
//! refused, never guessed.

use anyhow::{bail, Result};

/// GPT-2's split (and the one llama.cpp uses for `gpt-2`-like names).
const GPT2: &str = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";
/// Llama 3's split: contractions in any case, up to three digits together.
const LLAMA3: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Qwen2's split: Llama 3's with every digit alone.
const QWEN2: &str =
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Qwen3.5's split: Qwen2's with combining marks kept inside words.
const QWEN35: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Mistral's Tekken: words split at case changes, digits alone.
const TEKKEN: &str = r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// OpenAI's o200k (Phi-4, Llama 4): Tekken's words with contractions attached.
const GPT4O: &str = r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Every digit alone (used before GPT-2's split by StarCoder-like names).
const EACH_DIGIT: &str = r"\p{N}";
/// Runs of punctuation first (llama.cpp's default and Falcon).
const PUNCTUATION: &str = r"[\p{P}\$\+<=>\^~\|`]+";
const THREE_DIGITS: &str = r"[0-9][0-9][0-9]";
/// BLOOM's split: anything but whitespace and a few punctuation marks.
const BLOOM: &str = r" ?[^(\s|.,!?\x{2026}\x{3002}\x{FF0C}\x{3001}\x{964}\x{6D4}\x{60C})]+";
/// CJK runs kept whole by DeepSeek's splits.
const CJK: &str = r"[\x{4E00}-\x{9FA5}\x{800}-\x{4E00}\x{AC00}-\x{D7FF}]+";
const DEEPSEEK_LLM_LETTERS: &str = r"\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293}\x{295}-\x{2AF}\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A}\x{38C}\x{38E}-\x{3A1}\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556}\x{10A0}-\x{10C5}\x{13A0}-\x{13F5}\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF}\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D}\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B}\x{1F5D}\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4}\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4}\x{1FF6}-\x{1FFC}\x{2102}\x{2107}\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124}\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F}\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4}\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F}\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17}\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F}\x{104B0}-\x{104D3}\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2}\x{118A0}-\x{118DF}\x{1E900}-\x{1E943}]+";
const DEEPSEEK_LLM_PUNCTUATION: &str =
    r"\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+";
/// CJK ideographs and kana runs kept whole by DeepSeek V3.
const KANJI_KANA: &str = r"[\x{4E00}-\x{9FA5}\x{3040}-\x{309F}\x{30A0}-\x{30FF}]+";
const DEEPSEEK3_WORDS: &str =
    r"[!-/:-@\[-`{-~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// How a vocabulary's words are cut: the regexes in order, and whether a
/// word that is already a token skips merging (Llama 3, Tekken).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreSplit {
    pub regexes: &'static [&'static str],
    pub ignore_merges: bool,
    /// Whether BOS is added unless the file says otherwise.
    pub adds_bos: bool,
}

const fn plain(regexes: &'static [&'static str]) -> PreSplit {
    PreSplit { regexes, ignore_merges: false, adds_bos: false }
}

/// Llama 3's flags: whole-word tokens skip merging, BOS is added.
const fn whole_words(regexes: &'static [&'static str]) -> PreSplit {
    PreSplit { regexes, ignore_merges: true, adds_bos: true }
}

/// Each `tokenizer.ggml.pre` name llama.cpp maps for Cake's families, with its split.
pub const SPLITS: &[(&[&str], PreSplit)] = &[
    (&["default"], plain(&[PUNCTUATION, GPT2, r"\p{N}+", THREE_DIGITS])),
    (
        &["llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2"],
        whole_words(&[LLAMA3]),
    ),
    (&["dbrx", "smaug-bpe", "glm4", "chatglm-bpe"], plain(&[LLAMA3])),
    (&["tekken"], whole_words(&[TEKKEN])),
    (&["qwen2", "deepseek-r1-qwen", "megrez", "stablelm2", "kormo"], plain(&[QWEN2])),
    (&["qwen35"], plain(&[QWEN35])),
    (
        &[
            "gpt-2",
            "phi-2",
            "mpt",
            "olmo",
            "jais",
            "exaone4",
            "gigachat",
            "a.x-4.0",
            "mellum",
            "modern-bert",
            "roberta-bpe",
        ],
        plain(&[GPT2]),
    ),
    (&["starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"], plain(&[EACH_DIGIT, GPT2])),
    (&["falcon"], plain(&[PUNCTUATION, GPT2, THREE_DIGITS])),
    (&["gpt-4o", "llama4", "minimax-m2"], plain(&[GPT4O])),
    (&["bloom", "poro-chat", "gpt3-finnish"], plain(&[BLOOM])),
    (&["viking"], plain(&[BLOOM, EACH_DIGIT])),
    (&["deepseek-llm"], plain(&[r"[\r\n]", DEEPSEEK_LLM_LETTERS, DEEPSEEK_LLM_PUNCTUATION, r"\s+$", CJK, r"\p{N}+"])),
    (&["deepseek-coder"], plain(&[r"[\r\n]", r"\s?\p{L}+", r"\s?\p{P}+", CJK, EACH_DIGIT])),
    (&["deepseek-v3"], plain(&[r"\p{N}{1,3}", KANJI_KANA, DEEPSEEK3_WORDS])),
];

impl PreSplit {
    /// The split `tokenizer.ggml.pre` names; a missing name gets llama.cpp's
    /// default split (as llama.cpp does, with its warning). Other names are refused.
    pub fn named(origin: &str, name: Option<&str>) -> Result<&'static Self> {
        let name = name.unwrap_or("default");
        if let Some((_, split)) = SPLITS.iter().find(|(names, _)| names.contains(&name)) {
            return Ok(split);
        }
        let known: Vec<&str> = SPLITS.iter().flat_map(|(names, _)| names.iter().copied()).collect();
        bail!(
            "{origin}: pre-tokenizer `{name}` (tokenizer.ggml.pre) is not one Cake knows, so it cannot split \
             text the way the model was trained; known: {}",
            known.join(", ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
    use tokenizers::SplitDelimiterBehavior;

    #[test]
    fn every_known_name_has_a_split_and_the_rest_are_refused() {
        for (names, _) in SPLITS {
            for name in *names {
                for regex in PreSplit::named("f.gguf", Some(name)).unwrap().regexes {
                    Split::new(SplitPattern::Regex(regex.to_string()), SplitDelimiterBehavior::Isolated, false)
                        .unwrap_or_else(|e| panic!("{name}: {e}"));
                }
            }
        }
        let err = PreSplit::named("f.gguf", Some("jina-v9")).unwrap_err().to_string();
        assert!(err.contains("f.gguf") && err.contains("`jina-v9`"), "{err}");
    }
}
