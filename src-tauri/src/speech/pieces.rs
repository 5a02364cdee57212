//! Long scripts, spoken in pieces: the text is cut at sentence ends and
//! the sentences grouped into pieces of a few hundred characters. Each
//! piece is short enough for a model to speak well, and the first one
//! starts sounding soon; every piece is spoken in the same voices.

use super::vibevoice::processor::ScriptLine;

/// The most characters a piece holds, unless one sentence alone is longer.
pub const PIECE_CHARS: usize = 300;

/// Whether `c` ends a sentence.
fn ends_sentence(c: char) -> bool {
    matches!(c, '.' | '!' | '?' | '…' | '。' | '！' | '？')
}

/// Whether `c` may follow a sentence's end before the space (a closing quote or bracket).
fn closes(c: char) -> bool {
    matches!(c, '"' | '\'' | '”' | '’' | ')' | ']' | '»')
}

/// The sentences of `text`, trimmed. A sentence ends at `.`, `!`, `?` or
/// `…` (with any closing quotes) followed by a space and then not by a
/// lowercase letter ("e.g. this" stays whole), or at a full-width `。！？`.
pub fn sentences(text: &str) -> Vec<&str> {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let mut found = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < chars.len() {
        let (_, c) = chars[i];
        if ends_sentence(c) {
            let mut end = i + 1;
            while end < chars.len() && (ends_sentence(chars[end].1) || closes(chars[end].1)) {
                end += 1;
            }
            let full_width = matches!(c, '。' | '！' | '？');
            let next_word = chars[end..].iter().find(|(_, c)| !c.is_whitespace()).map(|&(_, c)| c);
            let spaced = end < chars.len() && chars[end].1.is_whitespace();
            if full_width || (spaced && !next_word.is_some_and(char::is_lowercase)) {
                let end_byte = chars.get(end).map_or(text.len(), |&(b, _)| b);
                found.push(text[start..end_byte].trim());
                start = end_byte;
            }
            i = end;
        } else {
            i += 1;
        }
    }
    found.push(text[start..].trim());
    found.retain(|s| !s.is_empty());
    found
}

/// Groups `units` in order into runs of at most `max_chars` characters
/// (counting a space between units); a unit longer than that is a run alone.
fn group<T>(units: Vec<T>, chars: impl Fn(&T) -> usize, max_chars: usize) -> Vec<Vec<T>> {
    let mut runs: Vec<Vec<T>> = Vec::new();
    let mut run_chars = 0;
    for unit in units {
        let n = chars(&unit);
        match runs.last_mut() {
            Some(run) if run_chars + 1 + n <= max_chars => {
                run_chars += 1 + n;
                run.push(unit);
            }
            _ => {
                run_chars = n;
                runs.push(vec![unit]);
            }
        }
    }
    runs
}

/// Plain text in pieces of whole sentences.
pub fn split_text(text: &str, max_chars: usize) -> Vec<String> {
    group(sentences(text), |s| s.chars().count(), max_chars).into_iter().map(|run| run.join(" ")).collect()
}

/// Plain text in pieces of whole sentences, the first of at most
/// `first_chars` (unless its first sentence is longer), so that the first
/// audio comes soon, and the rest of at most `max_chars`.
pub fn split_text_first_short(text: &str, first_chars: usize, max_chars: usize) -> Vec<String> {
    let all = sentences(text);
    let mut first_len = 0;
    let mut chars = 0;
    for sentence in &all {
        let n = sentence.chars().count() + usize::from(first_len > 0);
        if first_len > 0 && chars + n > first_chars {
            break;
        }
        chars += n;
        first_len += 1;
    }
    let (first, rest) = all.split_at(first_len);
    let mut pieces = vec![first.join(" ")];
    pieces.extend(group(rest.to_vec(), |s| s.chars().count(), max_chars).into_iter().map(|run| run.join(" ")));
    pieces.retain(|piece| !piece.is_empty());
    pieces
}

/// A piece of a script, its speakers numbered from 0 in order of their
/// numbers in the whole script.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptPiece {
    pub lines: Vec<ScriptLine>,
    /// For each speaker number in `lines`, the speaker's number in the script.
    pub speakers: Vec<usize>,
}

impl ScriptPiece {
    /// The voices of this piece's speakers, from the script's `voices`.
    pub fn voices<'a, V>(&self, voices: &'a [V]) -> Vec<&'a V> {
        self.speakers.iter().filter_map(|&s| voices.get(s)).collect()
    }
}

/// A script in pieces of whole sentences: a line may be cut between its
/// sentences, each part keeping its speaker.
pub fn split_script(lines: &[ScriptLine], max_chars: usize) -> Vec<ScriptPiece> {
    let units: Vec<(usize, &str)> =
        lines.iter().flat_map(|line| sentences(&line.text).into_iter().map(move |s| (line.speaker, s))).collect();
    group(units, |(_, s)| s.chars().count(), max_chars).into_iter().map(|run| as_piece(&run)).collect()
}

/// A run of sentences as a piece: consecutive sentences of one speaker
/// make one line; speakers are renumbered from 0.
fn as_piece(run: &[(usize, &str)]) -> ScriptPiece {
    let mut speakers: Vec<usize> = run.iter().map(|&(speaker, _)| speaker).collect();
    speakers.sort_unstable();
    speakers.dedup();
    let mut lines: Vec<ScriptLine> = Vec::new();
    for &(speaker, sentence) in run {
        let local = speakers.binary_search(&speaker).expect("listed above");
        match lines.last_mut() {
            Some(line) if line.speaker == local => {
                line.text.push(' ');
                line.text.push_str(sentence);
            }
            _ => lines.push(ScriptLine { speaker: local, text: format!(" {sentence}") }),
        }
    }
    ScriptPiece { lines, speakers }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sentences_end_at_their_punctuation_and_not_at_abbreviations() {
        assert_eq!(
            sentences("Hello there! How are you?  I'm fine, e.g. well.\"Quoted.\" Done… Next 3.5 km. 你好。再见"),
            [
                "Hello there!",
                "How are you?",
                "I'm fine, e.g. well.\"Quoted.\"",
                "Done…",
                "Next 3.5 km.",
                "你好。",
                "再见"
            ]
        );
        assert_eq!(sentences("  no end at all "), ["no end at all"]);
        assert!(sentences(" \n ").is_empty());
    }

    #[test]
    fn text_is_grouped_into_pieces_of_whole_sentences() {
        let text = "One two. Three four. Five six seven. Eight.";
        assert_eq!(split_text(text, 20), ["One two. Three four.", "Five six seven.", "Eight."]);
        assert_eq!(split_text(text, 1000), [text]);
        // A sentence longer than a piece is a piece alone, never cut.
        assert_eq!(split_text("A very long sentence indeed. Short.", 10), ["A very long sentence indeed.", "Short."]);
        // Nothing is lost: the pieces hold every word in order.
        let long = "Sentence number one is here. ".repeat(40);
        let pieces = split_text(&long, PIECE_CHARS);
        assert!(pieces.len() > 3 && pieces.iter().all(|p| p.chars().count() <= PIECE_CHARS));
        assert_eq!(pieces.join(" "), long.trim());
    }

    #[test]
    fn the_first_piece_can_be_shorter_than_the_rest() {
        let text = "One two. Three four. Five six seven. Eight.";
        assert_eq!(split_text_first_short(text, 10, 40), ["One two.", "Three four. Five six seven. Eight."]);
        assert_eq!(split_text_first_short(text, 20, 16), ["One two. Three four.", "Five six seven.", "Eight."]);
        // A first sentence longer than the first piece still comes whole.
        assert_eq!(split_text_first_short(text, 3, 1000), ["One two.", "Three four. Five six seven. Eight."]);
        assert_eq!(split_text_first_short("Just one", 3, 5), ["Just one"]);
        assert!(split_text_first_short("  ", 3, 5).is_empty());
    }

    #[test]
    fn script_pieces_keep_speakers_and_number_them_from_zero() {
        let line = |speaker, text: &str| ScriptLine { speaker, text: format!(" {text}") };
        let script = [line(0, "Hi. How are you?"), line(1, "Fine. Thanks."), line(2, "Me too.")];
        let pieces = split_script(&script, 16);
        assert_eq!(
            pieces,
            [
                ScriptPiece { lines: vec![line(0, "Hi. How are you?")], speakers: vec![0] },
                ScriptPiece { lines: vec![line(0, "Fine. Thanks.")], speakers: vec![1] },
                ScriptPiece { lines: vec![line(0, "Me too.")], speakers: vec![2] },
            ]
        );
        let voices = ["alice", "bob", "carol"];
        assert_eq!(pieces[2].voices(&voices), [&"carol"]);
        let whole = split_script(&script, 1000);
        assert_eq!(whole.len(), 1);
        assert_eq!(whole[0].lines, script);
        assert_eq!(whole[0].speakers, [0, 1, 2]);
    }
}
