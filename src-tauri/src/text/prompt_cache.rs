//! The session of the last request, kept so that the next one can start
//! where it left off: a chat resends its whole history every turn, and only
//! the tokens after the part already computed need to be read again.
//!
//! The kept session holds the keys and values of `tokens`. A new prompt
//! reuses the longest common prefix of the two (never all of the prompt:
//! its last token must run to give the next token's logits). A prompt that
//! continues the kept tokens takes the session, and so does one that
//! shares most of them (the same conversation with its last turn edited
//! or regenerated), cut back. One that shares at most half (another
//! conversation with the same system prompt) gets a copy of the shared
//! positions and leaves the session kept for the next, so that
//! conversations started together or one after another all skip their
//! common start, for a copy no larger than that start. On a cluster each
//! worker copies or cuts back its own layers' positions. Both need every
//! layer to allow it (see
//! [`crate::models::nn::kv_cache::KvCache::copy_prefix`]); otherwise a
//! fresh session starts. Positions holding a picture count as shared only
//! where the same picture (by the digest of its file) lies at the same
//! place: a follow-up question about a picture does not read it again.

use super::model::TextModel;
use super::pictures::{PictureDigest, PromptPicture};
use crate::models::pipeline::Session;
use std::ops::Range;

/// A session and the tokens whose keys and values it holds.
struct Kept {
    session: Session,
    tokens: Vec<u32>,
    /// Where its pictures lie, and which they are.
    pictures: Vec<(Range<usize>, PictureDigest)>,
}

/// Where `pictures` lie, and which they are.
fn placements(pictures: &[PromptPicture]) -> Vec<(Range<usize>, PictureDigest)> {
    pictures.iter().map(|p| (p.positions(), p.digest)).collect()
}

/// How many first positions `kept` and a prompt of `tokens` holding
/// `pictures` share: equal tokens, and wherever either holds a picture,
/// the same picture in the same place on both.
fn shared_start(
    kept: &[u32],
    kept_pictures: &[(Range<usize>, PictureDigest)],
    tokens: &[u32],
    pictures: &[(Range<usize>, PictureDigest)],
) -> usize {
    let mut common = kept.iter().zip(tokens).take_while(|(a, b)| a == b).count();
    for (one, other) in [(kept_pictures, pictures), (pictures, kept_pictures)] {
        for (span, _) in one.iter().filter(|placed| !other.contains(placed)) {
            common = common.min(span.start);
        }
    }
    common
}

/// The session kept from the last request on one loaded model.
#[derive(Default)]
pub struct PromptCache {
    kept: Option<Kept>,
}

impl PromptCache {
    pub fn new() -> Self {
        Self::default()
    }

    /// A session for `prompt` and how many of its first tokens the session
    /// already holds.
    pub fn session_for(&mut self, model: &TextModel, prompt: &[u32], with: &[PromptPicture]) -> (Session, usize) {
        let Some(Kept { mut session, tokens, pictures }) = self.kept.take() else {
            return (model.new_session(), 0);
        };
        let common = shared_start(&tokens, &pictures, prompt, &placements(with));
        let mut reuse = common.min(prompt.len().saturating_sub(1));
        // A picture whose tokens see each other is read whole or not at all.
        if let Some(cut) = with.iter().map(PromptPicture::positions).find(|s| s.start < reuse && reuse < s.end) {
            reuse = cut.start;
        }
        let cut_needed = reuse < tokens.len();
        if reuse > 0 && cut_needed && reuse <= tokens.len() / 2 {
            match model.pipeline.copy_prefix(&session, reuse) {
                Ok(Some(copy)) => {
                    self.kept = Some(Kept { session, tokens, pictures });
                    return (copy, reuse);
                }
                Ok(None) => {}
                Err(error) => tracing::warn!("cannot copy {reuse} cached positions: {error:#}"),
            }
        }
        let cut_back = |session: &mut Session| {
            model.pipeline.truncate(session, reuse).unwrap_or_else(|error| {
                tracing::warn!("cannot cut the cached positions back: {error:#}");
                false
            })
        };
        let reusable = reuse > 0 && (!cut_needed || cut_back(&mut session));
        if reusable {
            (session, reuse)
        } else {
            model.end_session(session);
            (model.new_session(), 0)
        }
    }

    /// Keeps `session`, which holds the keys and values of `tokens` (and
    /// of `pictures` among them), for the next request.
    pub fn keep(&mut self, model: &TextModel, session: Session, tokens: Vec<u32>, pictures: &[PromptPicture]) {
        self.clear(model);
        let pictures = placements(pictures).into_iter().filter(|(span, _)| span.end <= tokens.len()).collect();
        self.kept = Some(Kept { session, tokens, pictures });
    }

    /// Ends the kept session (frees the workers' caches too).
    pub fn clear(&mut self, model: &TextModel) {
        if let Some(kept) = self.kept.take() {
            model.end_session(kept.session);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pictures_are_shared_only_where_the_same_one_lies_in_the_same_place() {
        let tokens = [1, 9, 9, 9, 2, 5, 6];
        let cat = [(1..4, [1; 32])];
        let dog = [(1..4, [2; 32])];
        assert_eq!(shared_start(&tokens, &cat, &tokens, &cat), 7);
        assert_eq!(shared_start(&tokens, &cat, &tokens, &dog), 1);
        assert_eq!(shared_start(&tokens, &cat, &tokens, &[]), 1);
        assert_eq!(shared_start(&tokens, &[], &tokens, &cat), 1);
        assert_eq!(shared_start(&tokens, &[], &[1, 9, 8], &[]), 2);
    }
}
