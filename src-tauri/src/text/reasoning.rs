//! Reasoning kept apart from the answer. Models whose chat template opens a
//! thinking block (Qwen3, Qwen3.5, the DeepSeek-R1 distills, EXAONE 4) write
//! their reasoning between `<think>` and `</think>`, then the answer; some
//! templates write the opening tag into the prompt themselves. A
//! [`ReasoningSplitter`] takes a reply's text as it streams and tells the
//! two apart, holding back only what could still be the start of a tag.

/// What opens a thinking block.
pub const THINK_OPEN: &str = "<think>";
/// What closes it.
pub const THINK_CLOSE: &str = "</think>";

/// A part of a reply's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplyPart {
    Reasoning(String),
    Answer(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Nothing but whitespace yet: the reply may still open a block.
    Start,
    Thinking,
    /// After `</think>`: the blank lines before the answer are dropped.
    AnswerStart,
    Answering,
}

/// Splits a streamed reply into reasoning and answer.
#[derive(Debug, Clone)]
pub struct ReasoningSplitter {
    phase: Phase,
    /// Text not yet given out (a possible tag, or leading whitespace).
    held: String,
}

impl ReasoningSplitter {
    /// A splitter for a reply whose prompt already opened a thinking block
    /// (`prompt_opened`), or that may open one itself.
    pub fn new(prompt_opened: bool) -> Self {
        Self { phase: if prompt_opened { Phase::Thinking } else { Phase::Start }, held: String::new() }
    }

    /// The parts `piece` completes, in order.
    pub fn push(&mut self, piece: &str) -> Vec<ReplyPart> {
        self.held.push_str(piece);
        let mut parts = Vec::new();
        loop {
            match self.phase {
                Phase::Start => {
                    let trimmed = self.held.trim_start();
                    if let Some(rest) = trimmed.strip_prefix(THINK_OPEN) {
                        self.held = rest.to_string();
                        self.phase = Phase::Thinking;
                    } else if THINK_OPEN.starts_with(trimmed) {
                        return parts; // whitespace, or the tag's first characters
                    } else {
                        self.phase = Phase::Answering;
                    }
                }
                Phase::Thinking => match self.held.find(THINK_CLOSE) {
                    Some(at) => {
                        push_part(&mut parts, ReplyPart::Reasoning(self.held[..at].to_string()));
                        self.held.drain(..at + THINK_CLOSE.len());
                        self.phase = Phase::AnswerStart;
                    }
                    None => {
                        let keep = tag_prefix_len(&self.held, THINK_CLOSE);
                        let done = self.held.len() - keep;
                        push_part(&mut parts, ReplyPart::Reasoning(self.held[..done].to_string()));
                        self.held.drain(..done);
                        return parts;
                    }
                },
                Phase::AnswerStart => {
                    let trimmed = self.held.trim_start();
                    if trimmed.is_empty() {
                        self.held.clear();
                        return parts;
                    }
                    self.held = trimmed.to_string();
                    self.phase = Phase::Answering;
                }
                Phase::Answering => {
                    push_part(&mut parts, ReplyPart::Answer(std::mem::take(&mut self.held)));
                    return parts;
                }
            }
        }
    }

    /// What is still held when the reply ends: a cut-off thought stays
    /// reasoning, anything else is answer.
    pub fn finish(&mut self) -> Vec<ReplyPart> {
        let held = std::mem::take(&mut self.held);
        let part = match self.phase {
            Phase::Thinking => ReplyPart::Reasoning(held),
            Phase::AnswerStart => return Vec::new(),
            Phase::Start | Phase::Answering => ReplyPart::Answer(held),
        };
        let mut parts = Vec::new();
        push_part(&mut parts, part);
        parts
    }
}

/// Adds `part` unless it is empty.
fn push_part(parts: &mut Vec<ReplyPart>, part: ReplyPart) {
    let (ReplyPart::Reasoning(text) | ReplyPart::Answer(text)) = &part;
    if !text.is_empty() {
        parts.push(part);
    }
}

/// The length of the longest end of `text` that begins `tag` (a tag that
/// may be completed by the next piece).
pub(super) fn tag_prefix_len(text: &str, tag: &str) -> usize {
    (1..tag.len().min(text.len() + 1))
        .rev()
        .find(|&n| text.is_char_boundary(text.len() - n) && tag.starts_with(&text[text.len() - n..]))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ReplyPart::{Answer, Reasoning};

    /// Feeds `pieces` and joins consecutive parts of one kind.
    fn split(prompt_opened: bool, pieces: &[&str]) -> Vec<ReplyPart> {
        let mut splitter = ReasoningSplitter::new(prompt_opened);
        let mut parts: Vec<ReplyPart> = pieces.iter().flat_map(|p| splitter.push(p)).collect();
        parts.extend(splitter.finish());
        let mut joined: Vec<ReplyPart> = Vec::new();
        for part in parts {
            match (joined.last_mut(), part) {
                (Some(Reasoning(a)), Reasoning(b)) | (Some(Answer(a)), Answer(b)) => a.push_str(&b),
                (_, part) => joined.push(part),
            }
        }
        joined
    }

    #[test]
    fn a_block_the_model_opens_is_reasoning_and_the_blank_lines_after_it_go() {
        let parts = split(false, &["<th", "ink>\nLet me", " see.</th", "ink>\n\n", "It is 4."]);
        assert_eq!(parts, [Reasoning("\nLet me see.".into()), Answer("It is 4.".into())]);
    }

    #[test]
    fn a_block_the_prompt_opened_is_reasoning_from_the_first_token() {
        let parts = split(true, &["Two and two", "</think>", "\n\nFour."]);
        assert_eq!(parts, [Reasoning("Two and two".into()), Answer("Four.".into())]);
    }

    #[test]
    fn a_reply_without_a_block_is_all_answer_even_if_it_mentions_the_tag_later() {
        assert_eq!(split(false, &["  Hello", " <think> is a tag"]), [Answer("  Hello <think> is a tag".into())]);
        assert_eq!(split(false, &["<t", "able>"]), [Answer("<table>".into())]);
    }

    #[test]
    fn a_thought_cut_off_by_the_token_limit_stays_reasoning() {
        assert_eq!(split(true, &["Still thinking </thi"]), [Reasoning("Still thinking </thi".into())]);
        assert_eq!(split(false, &["<think>", "</think>", "\n"]), []);
    }

    #[test]
    fn held_text_is_only_what_could_still_be_a_tag() {
        let mut splitter = ReasoningSplitter::new(true);
        assert_eq!(splitter.push("abc</"), [Reasoning("abc".into())]);
        assert_eq!(splitter.push("b>é"), [Reasoning("</b>é".into())]);
        assert_eq!(tag_prefix_len("x</thi", THINK_CLOSE), 5);
        assert_eq!(tag_prefix_len("é", THINK_CLOSE), 0);
    }
}
