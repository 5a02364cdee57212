//! Streaming token ids to text without ever emitting half a character.
//!
//! Byte-level tokens can split a UTF-8 character (or a word's leading space)
//! across tokens. [`Detokenizer`] re-decodes a short window of recent tokens
//! and emits only the text that has become stable, so the concatenation of
//! everything it emits equals decoding all tokens at once. Special tokens
//! are left out, but for those it is told to show.

use super::tokenizer::TextTokenizer;
use anyhow::Result;

pub struct Detokenizer<'a> {
    tokenizer: &'a TextTokenizer,
    ids: Vec<u32>,
    /// Start of the window re-decoded for context.
    prefix_offset: usize,
    /// Tokens before this index have been emitted.
    read_offset: usize,
    /// Special tokens decoded as their text.
    shown: Vec<u32>,
}

impl<'a> Detokenizer<'a> {
    pub fn new(tokenizer: &'a TextTokenizer, shown_special_tokens: &[u32]) -> Self {
        Self { tokenizer, ids: Vec::new(), prefix_offset: 0, read_offset: 0, shown: shown_special_tokens.to_vec() }
    }

    fn window_text(&self, end: usize) -> Result<String> {
        let window = &self.ids[self.prefix_offset..end];
        if self.shown.is_empty() {
            return self.tokenizer.decode(window, true);
        }
        // Runs between shown tokens decode as usual; shown ones as themselves.
        let mut text = String::new();
        for run in window.split_inclusive(|id| self.shown.contains(id)) {
            match run.split_last() {
                Some((last, before)) if self.shown.contains(last) => {
                    text.push_str(&self.tokenizer.decode(before, true)?);
                    text.push_str(&self.tokenizer.decode(&[*last], false)?);
                }
                _ => text.push_str(&self.tokenizer.decode(run, true)?),
            }
        }
        Ok(text)
    }

    /// Adds one token; returns the text that became final (possibly empty).
    pub fn push(&mut self, id: u32) -> Result<String> {
        self.ids.push(id);
        let before = self.window_text(self.read_offset)?;
        let now = self.window_text(self.ids.len())?;
        if now.len() <= before.len() || now.ends_with('\u{FFFD}') || !now.starts_with(&before) {
            return Ok(String::new());
        }
        self.prefix_offset = self.read_offset;
        self.read_offset = self.ids.len();
        Ok(now[before.len()..].to_string())
    }

    /// Whatever is still held back, less a character cut off at the very
    /// end (a reply stopped by its token budget mid-character): its bytes
    /// are dropped rather than shown as U+FFFD.
    pub fn finish(&mut self) -> Result<String> {
        let before = self.window_text(self.read_offset)?;
        let now = self.window_text(self.ids.len())?;
        self.prefix_offset = self.ids.len();
        self.read_offset = self.ids.len();
        Ok(match now.strip_prefix(&before) {
            Some(rest) => rest.trim_end_matches('\u{FFFD}').to_string(),
            None => String::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_character_cut_off_at_the_end_is_dropped_not_shown_as_a_replacement() {
        let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/tiny/qwen3_scripted");
        let tokenizer = TextTokenizer::from_folder(&fixture).unwrap();
        let ids = tokenizer.encode("ok 🍰", false).unwrap();
        assert!(ids.len() >= 3, "the emoji takes several byte tokens: {ids:?}");
        let mut whole = Detokenizer::new(&tokenizer, &[]);
        let mut text: String = ids.iter().map(|&id| whole.push(id).unwrap()).collect();
        text.push_str(&whole.finish().unwrap());
        assert_eq!(text, "ok 🍰");
        // The budget ran out inside the emoji.
        let mut cut = Detokenizer::new(&tokenizer, &[]);
        let mut text: String = ids[..ids.len() - 1].iter().map(|&id| cut.push(id).unwrap()).collect();
        text.push_str(&cut.finish().unwrap());
        assert_eq!(text, "ok ");
    }
}
