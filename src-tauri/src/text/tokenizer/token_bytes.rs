//! What each token stands for, byte by byte: constrained decoding matches
//! grammars against these bytes, so a token that ends inside a character
//! (a byte-level or byte-fallback piece) keeps its exact bytes.

use super::TextTokenizer;
use anyhow::{bail, Result};
use tokenizers::decoders::DecoderWrapper;

/// One vocabulary entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenPiece {
    /// Text (or part of a character) the token stands for.
    Bytes(Vec<u8>),
    /// A special token, named by its text (it stands for no text).
    Special(String),
}

/// How a vocabulary spells bytes in its token strings.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Spelling {
    /// GPT-2's byte-to-character map (byte-level BPE).
    ByteLevel,
    /// SentencePiece: `▁` for a space, `<0xAB>` for a byte the pieces lack.
    ByteFallback,
}

const SENTENCEPIECE_SPACE: char = '▁';

impl TextTokenizer {
    /// Every token's piece, by id. Refused for vocabularies whose tokens
    /// cannot be read back as bytes (WordPiece).
    pub fn token_pieces(&self) -> Result<Vec<TokenPiece>> {
        let spelling = match self.inner.get_decoder() {
            Some(decoder) if has_decoder(decoder, &|d| matches!(d, DecoderWrapper::ByteLevel(_))) => {
                Spelling::ByteLevel
            }
            Some(decoder) if has_decoder(decoder, &|d| matches!(d, DecoderWrapper::ByteFallback(_))) => {
                Spelling::ByteFallback
            }
            _ => bail!("the model's vocabulary does not spell bytes (WordPiece): its tokens cannot be constrained"),
        };
        let added = self.inner.get_added_tokens_decoder();
        let unicode_to_byte = unicode_to_byte();
        let size = self.inner.get_vocab_size(true) as u32;
        let piece = |id: u32| -> TokenPiece {
            if let Some(token) = added.get(&id) {
                return match token.special {
                    true => TokenPiece::Special(token.content.clone()),
                    false => TokenPiece::Bytes(token.content.as_bytes().to_vec()),
                };
            }
            let Some(text) = self.inner.id_to_token(id) else { return TokenPiece::Bytes(Vec::new()) };
            match spelling {
                Spelling::ByteLevel => {
                    let bytes: Option<Vec<u8>> = text.chars().map(|c| unicode_to_byte.get(&c).copied()).collect();
                    TokenPiece::Bytes(bytes.unwrap_or_else(|| text.into_bytes()))
                }
                Spelling::ByteFallback => match byte_fallback(&text) {
                    Some(byte) => TokenPiece::Bytes(vec![byte]),
                    None => TokenPiece::Bytes(text.replace(SENTENCEPIECE_SPACE, " ").into_bytes()),
                },
            }
        };
        Ok((0..size).map(piece).collect())
    }
}

/// Whether `decoder` is, or holds in its sequence, one that `is` names.
fn has_decoder(decoder: &DecoderWrapper, is: &dyn Fn(&DecoderWrapper) -> bool) -> bool {
    match decoder {
        DecoderWrapper::Sequence(sequence) => sequence.get_decoders().iter().any(|d| has_decoder(d, is)),
        other => is(other),
    }
}

/// `<0xAB>` as the byte 0xAB.
fn byte_fallback(text: &str) -> Option<u8> {
    let hex = text.strip_prefix("<0x")?.strip_suffix('>')?;
    (hex.len() == 2).then(|| u8::from_str_radix(hex, 16).ok()).flatten()
}

/// GPT-2's map from the characters byte-level tokens are written in back
/// to bytes: printable bytes stand for themselves, the others (controls,
/// space, 127–160, 173) for the characters from U+0100 on, in byte order.
fn unicode_to_byte() -> std::collections::HashMap<char, u8> {
    let printable = |b: u8| matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
    let mut next = 0x100u32;
    (0..=255u8)
        .map(|byte| {
            let c = if printable(byte) {
                char::from(byte)
            } else {
                next += 1;
                char::from_u32(next - 1).expect("below U+0200")
            };
            (c, byte)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_level_characters_map_back_to_their_bytes() {
        let map = unicode_to_byte();
        assert_eq!(map.len(), 256);
        assert_eq!(map[&'Ġ'], b' ');
        assert_eq!(map[&'Ċ'], b'\n');
        assert_eq!(map[&'a'], b'a');
        assert_eq!(map[&'Ã'], 0xC3);
        assert_eq!(byte_fallback("<0x0A>"), Some(b'\n'));
        assert_eq!(byte_fallback("<0x0A"), None);
    }
}
