//! Fitting a conversation into a context that cannot hold it all: leave out
//! its oldest turns (a user message and the replies after it), keeping the
//! system messages it opens with and its last turn, until the prompt and
//! room for a reply fit.

use super::chat_template::ChatMessage;
use super::generation::PromptTooLong;
use anyhow::Result;

/// A conversation as the model will read it.
#[derive(Debug)]
pub struct FittedPrompt {
    pub tokens: Vec<u32>,
    /// Messages left out, counted from the oldest.
    pub dropped_messages: usize,
}

/// The prompt for `messages` with as few of the oldest turns left out as
/// needed for `reserve` more tokens to fit in `context`. `tokenize` renders
/// and encodes a list of messages. Fails with [`PromptTooLong`] when even
/// the system messages and the last turn alone do not fit.
pub fn drop_oldest_turns(
    messages: &[ChatMessage],
    context: usize,
    reserve: usize,
    tokenize: impl Fn(&[ChatMessage]) -> Result<Vec<u32>>,
) -> Result<FittedPrompt> {
    let system = messages.iter().take_while(|m| m.role == "system").count();
    let (head, turns) = messages.split_at(system);
    // Where each turn after the first begins: the places the kept part may start.
    let cuts: Vec<usize> = (1..turns.len()).filter(|&i| turns[i].role == "user").collect();
    let fits = |tokens: &[u32]| tokens.len().saturating_add(reserve) <= context;
    let prompt_from = |cut: usize| tokenize(&[head, &turns[cut..]].concat());

    let whole = prompt_from(0)?;
    if fits(&whole) {
        return Ok(FittedPrompt { tokens: whole, dropped_messages: 0 });
    }
    let Some(&last_cut) = cuts.last() else {
        return Err(PromptTooLong { last_turn_alone: true, ..PromptTooLong::new(whole.len(), context, false) }.into());
    };
    let shortest = prompt_from(last_cut)?;
    if !fits(&shortest) {
        return Err(
            PromptTooLong { last_turn_alone: true, ..PromptTooLong::new(shortest.len(), context, false) }.into()
        );
    }
    // Leaving out more turns never makes the prompt longer: the first cut
    // that fits is found by bisection, in a few renders however long the
    // conversation is. `cuts[fitting]` fits; no cut before `first_open` does.
    let (mut first_open, mut fitting) = (0, cuts.len() - 1);
    let mut best = shortest;
    while first_open < fitting {
        let middle = (first_open + fitting) / 2;
        let tokens = prompt_from(cuts[middle])?;
        if fits(&tokens) {
            fitting = middle;
            best = tokens;
        } else {
            first_open = middle + 1;
        }
    }
    Ok(FittedPrompt { tokens: best, dropped_messages: cuts[fitting] })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One token per character of each message, plus one per message.
    fn tokenize(messages: &[ChatMessage]) -> Result<Vec<u32>> {
        Ok(messages.iter().flat_map(|m| std::iter::once(0).chain(m.content.bytes().map(u32::from))).collect())
    }

    fn conversation() -> Vec<ChatMessage> {
        vec![
            ChatMessage::new("system", "be brief"), // 9 tokens
            ChatMessage::new("user", "aaaaaaaaa"),  // 10
            ChatMessage::new("assistant", "bbbbbbbbb"),
            ChatMessage::new("user", "ccccccccc"),
            ChatMessage::new("assistant", "ddddddddd"),
            ChatMessage::new("user", "eeeeeeeee"),
        ]
    }

    #[test]
    fn a_conversation_that_fits_is_kept_whole() {
        let fitted = drop_oldest_turns(&conversation(), 100, 10, tokenize).unwrap();
        assert_eq!((fitted.tokens.len(), fitted.dropped_messages), (59, 0));
    }

    #[test]
    fn the_oldest_turns_go_first_and_the_system_prompt_stays() {
        // 59 tokens; without the first turn 39, without two 19.
        let fitted = drop_oldest_turns(&conversation(), 50, 10, tokenize).unwrap();
        assert_eq!((fitted.tokens.len(), fitted.dropped_messages), (39, 2));
        let fitted = drop_oldest_turns(&conversation(), 30, 10, tokenize).unwrap();
        assert_eq!((fitted.tokens.len(), fitted.dropped_messages), (19, 4));
        assert_eq!(&fitted.tokens[..9], &tokenize(&conversation()[..1]).unwrap()[..]);
    }

    #[test]
    fn a_last_turn_too_long_alone_is_refused_with_its_length() {
        let error = drop_oldest_turns(&conversation(), 25, 10, tokenize).unwrap_err();
        let too_long = error.downcast_ref::<PromptTooLong>().expect("a PromptTooLong");
        assert_eq!((too_long.tokens, too_long.context, too_long.last_turn_alone), (19, 25, true));
        let single = [ChatMessage::new("user", "zzzz")];
        assert!(drop_oldest_turns(&single, 4, 0, tokenize).is_err());
    }

    #[test]
    fn long_conversations_take_few_renders() {
        let mut messages = vec![ChatMessage::new("system", "s")];
        for _ in 0..500 {
            messages.push(ChatMessage::new("user", "uuuu"));
            messages.push(ChatMessage::new("assistant", "aaaa"));
        }
        messages.push(ChatMessage::new("user", "last"));
        let renders = std::cell::Cell::new(0);
        let counted = |m: &[ChatMessage]| {
            renders.set(renders.get() + 1);
            tokenize(m)
        };
        let fitted = drop_oldest_turns(&messages, 100, 20, counted).unwrap();
        // 2 + 5 for the last message, 10 per kept turn: 7 turns fit in 80.
        assert_eq!((fitted.tokens.len(), fitted.dropped_messages), (77, 986));
        assert!(renders.get() <= 14, "{} renders", renders.get());
    }
}
