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
//! fresh session starts.

use super::model::TextModel;
use crate::models::pipeline::Session;

/// A session and the tokens whose keys and values it holds.
struct Kept {
    session: Session,
    tokens: Vec<u32>,
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
    pub fn session_for(&mut self, model: &TextModel, prompt: &[u32]) -> (Session, usize) {
        let Some(Kept { mut session, tokens }) = self.kept.take() else {
            return (model.new_session(), 0);
        };
        let common = tokens.iter().zip(prompt).take_while(|(a, b)| a == b).count();
        let reuse = common.min(prompt.len().saturating_sub(1));
        let cut_needed = reuse < tokens.len();
        if reuse > 0 && cut_needed && reuse <= tokens.len() / 2 {
            match model.pipeline.copy_prefix(&session, reuse) {
                Ok(Some(copy)) => {
                    self.kept = Some(Kept { session, tokens });
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

    /// Keeps `session`, which holds the keys and values of `tokens`, for
    /// the next request.
    pub fn keep(&mut self, model: &TextModel, session: Session, tokens: Vec<u32>) {
        self.clear(model);
        self.kept = Some(Kept { session, tokens });
    }

    /// Ends the kept session (frees the workers' caches too).
    pub fn clear(&mut self, model: &TextModel) {
        if let Some(kept) = self.kept.take() {
            model.end_session(kept.session);
        }
    }
}
