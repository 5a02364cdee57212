//! English text to the phoneme symbols LuxTTS was trained on: what
//! piper-phonemize makes of it with espeak-ng (docs/luxtts.md). espeak-ng
//! (the system's `espeak-ng` program, run as its own process: it is
//! GPL-3.0, Cake is not) reads the normalized text and writes one line of
//! IPA per clause; each clause's punctuation is appended as piper appends
//! it (`.` `?` `!` alone, `,` `:` `;` with a space), and the clauses are
//! joined without separators.

use super::normalize::{map_punctuation, normalize_english};
use super::tokens::TokenTable;
use anyhow::{bail, Context, Result};
use std::io::Write;
use std::process::{Command, Stdio};
use unicode_normalization::UnicodeNormalization;

/// The program, found on the PATH.
const ESPEAK: &str = "espeak-ng";
/// The voice piper-phonemize is called with for LuxTTS.
const VOICE: &str = "en-us";
/// The most text one call phonemizes (a piece of a script is far shorter).
const MAX_TEXT: usize = 64 * 1024;

/// How a clause ends, as far as the symbols are concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    /// `.`, `?` or `!`: the mark, and a new sentence.
    Stop(char),
    /// `,`, `:` or `;`: the mark and a space.
    Pause(char),
    /// `…` or the end of the text: nothing.
    Silent,
}

impl Ending {
    fn symbols(self) -> &'static str {
        match self {
            Self::Stop('.') => ".",
            Self::Stop('?') => "?",
            Self::Stop(_) => "!",
            Self::Pause(',') => ", ",
            Self::Pause(':') => ": ",
            Self::Pause(_) => "; ",
            Self::Silent => "",
        }
    }
}

fn closing(c: char) -> bool {
    matches!(c, '"' | '\'' | ')' | ']' | '}')
}

/// The endings of `text`'s clauses, in order, where espeak-ng ends them:
/// at `. ? ! , : ; …` (with any punctuation and closing quotes right
/// after) followed by a space or the end; a full stop followed by a
/// lower-case word ends nothing (an abbreviation: "a.m. on"). Text after
/// the last one makes a final clause that ends silently.
fn clause_endings(text: &str) -> Vec<Ending> {
    let chars: Vec<char> = text.chars().collect();
    let mut endings = Vec::new();
    let mut pending_words = false;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let ending = match c {
            '.' | '?' | '!' => Some(Ending::Stop(c)),
            ',' | ':' | ';' => Some(Ending::Pause(c)),
            '…' => Some(Ending::Silent),
            _ => None,
        };
        let Some(ending) = ending else {
            pending_words |= c.is_alphanumeric();
            i += 1;
            continue;
        };
        let mut end = i + 1;
        while end < chars.len()
            && (matches!(chars[end], '.' | '?' | '!' | ',' | ':' | ';' | '…') || closing(chars[end]))
        {
            end += 1;
        }
        let followed_by_space = end == chars.len() || chars[end].is_whitespace();
        let next_word = chars[end..].iter().find(|c| !c.is_whitespace());
        let abbreviation = c == '.' && next_word.is_some_and(|w| w.is_lowercase());
        if followed_by_space && !abbreviation && pending_words {
            endings.push(ending);
            pending_words = false;
        }
        i = end;
    }
    if pending_words {
        endings.push(Ending::Silent);
    }
    endings
}

/// espeak-ng's IPA for `text`: one line per clause.
fn espeak_clauses(text: &str) -> Result<Vec<String>> {
    let mut child = Command::new(ESPEAK)
        .args(["-q", "--ipa", "-v", VOICE])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("LuxTTS needs the `{ESPEAK}` program (Debian/Ubuntu: apt install espeak-ng)"))?;
    let mut stdin = child.stdin.take().context("espeak-ng's input")?;
    // Lines would be read as clauses of their own; spaces keep the text whole.
    stdin.write_all(text.replace(['\n', '\r'], " ").as_bytes())?;
    drop(stdin);
    let output = child.wait_with_output()?;
    if !output.status.success() {
        bail!("espeak-ng failed ({}): {}", output.status, String::from_utf8_lossy(&output.stderr).trim());
    }
    let stdout = String::from_utf8(output.stdout).context("espeak-ng wrote something that is not UTF-8")?;
    Ok(stdout.lines().map(|l| l.trim().to_string()).filter(|l| !l.is_empty()).collect())
}

/// Drops espeak-ng's language-switch marks (`(fr)` before a French word,
/// `(en)` after it), keeping the words, as piper-phonemize does.
fn without_language_flags(ipa: &str) -> String {
    let mut inside = false;
    ipa.chars()
        .filter(|&c| match c {
            '(' => {
                inside = true;
                false
            }
            ')' => {
                inside = false;
                false
            }
            _ => !inside,
        })
        .collect()
}

/// The phoneme string of English `text` (one symbol per codepoint).
pub fn phonemize_english(text: &str) -> Result<String> {
    if text.len() > MAX_TEXT {
        bail!("{} bytes of text is more than one piece may hold ({MAX_TEXT})", text.len());
    }
    let normalized = normalize_english(&map_punctuation(text));
    let endings = clause_endings(&normalized);
    if endings.is_empty() {
        return Ok(String::new());
    }
    let clauses = espeak_clauses(&normalized)?;
    let mut phonemes = String::new();
    if clauses.len() == endings.len() {
        for (clause, ending) in clauses.iter().zip(&endings) {
            phonemes.extend(without_language_flags(clause).nfd());
            phonemes.push_str(ending.symbols());
        }
    } else {
        // espeak-ng cut the text elsewhere than expected: keep its words,
        // clause by clause, and the text's last mark.
        tracing::debug!(
            "espeak-ng made {} clauses of {:?}, {} were expected",
            clauses.len(),
            normalized,
            endings.len()
        );
        let words: Vec<String> = clauses.iter().map(|c| without_language_flags(c).nfd().collect()).collect();
        phonemes.push_str(&words.join(" "));
        phonemes.push_str(endings.last().map_or("", |e| e.symbols()));
    }
    Ok(phonemes)
}

/// The model's tokens for English `text`: its phonemes' ids, symbols the
/// table lacks left out (as the reference does).
pub fn english_tokens(text: &str, table: &TokenTable) -> Result<Vec<u32>> {
    if text.chars().any(|c| ('\u{4e00}'..='\u{9fa5}').contains(&c)) {
        bail!("LuxTTS in Cake reads English only; this text has Chinese characters");
    }
    if !text.chars().any(|c| c.is_ascii_alphabetic()) {
        // The reference skips text without a Latin letter.
        return Ok(Vec::new());
    }
    let phonemes = phonemize_english(text)?;
    Ok(phonemes.chars().filter_map(|c| table.id(c.encode_utf8(&mut [0; 4]))).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clauses_end_where_espeak_ends_them() {
        use Ending::*;
        assert_eq!(clause_endings("Hello there, this is a test."), vec![Pause(','), Stop('.')]);
        assert_eq!(clause_endings("at ten a.m. on saint. Patrick's Day"), vec![Stop('.'), Silent]);
        assert_eq!(clause_endings("Wait… what happened?!"), vec![Silent, Stop('?')]);
        assert_eq!(clause_endings("'Quoted,' she said: 'no.'"), vec![Pause(','), Pause(':'), Stop('.')]);
        assert_eq!(clause_endings("three : forty-five"), vec![Pause(':'), Silent]);
        assert_eq!(clause_endings("..."), vec![]);
    }

    #[test]
    fn language_switches_are_dropped() {
        assert_eq!(without_language_flags("ɐ (fr)ʃɑ̃pɑ̃(en) kˈʌp"), "ɐ ʃɑ̃pɑ̃ kˈʌp");
    }
}
