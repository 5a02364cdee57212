//! A reply as the model APIs see it, whatever their wire format: started on
//! the engine, held until its first token (so a request that cannot run
//! still gets a 4xx/5xx status), then a stream of [`ReplyEvent`]s.

use super::{channel_sink, EventReceiver};
use crate::app::engine::ChatJob;
use crate::app::error::ApiError;
use crate::app::events::{Done, EngineEvent, ReplyStats};
use crate::app::App;
use crate::library::catalog::ModelEntry;
use crate::text::logprobs::LogprobEntry;
use crate::text::tool_calls::ToolCall;
use std::sync::Arc;

/// What a reply under way tells its route.
pub enum ReplyEvent {
    /// More of the reply's answer.
    Text(String),
    /// More of the reply's reasoning.
    Reasoning(String),
    /// Why the reply paused (a lost worker, say), for people watching.
    Notice(String),
    /// The reply ended, with these calls (none when it did not call a
    /// tool) and its tokens' log-probabilities (when asked).
    Done { stats: ReplyStats, tool_calls: Vec<ToolCall>, logprobs: Vec<LogprobEntry> },
    /// The reply failed after it started.
    Failed(ApiError),
}

/// A reply once it ended.
pub struct WholeReply {
    pub answer: String,
    /// The model's reasoning before its answer (empty when none).
    pub reasoning: String,
    /// The functions it calls (none when it answered).
    pub tool_calls: Vec<ToolCall>,
    /// Its tokens' log-probabilities (when asked).
    pub logprobs: Vec<LogprobEntry>,
    pub stats: ReplyStats,
}

/// A reply started on the engine.
pub struct Reply {
    /// Events that arrived while waiting for the first token.
    early: std::vec::IntoIter<EngineEvent>,
    rx: EventReceiver,
}

impl Reply {
    /// Checks the request with `make_job` and queues the reply; returns once
    /// it produced its first token or ended, or with the error that stopped
    /// it before that.
    pub async fn start(
        app: Arc<App>,
        make_job: impl FnOnce(&App) -> Result<ChatJob, ApiError> + Send + 'static,
    ) -> Result<Self, ApiError> {
        let (sink, mut rx, cancel) = channel_sink();
        tokio::task::spawn_blocking(move || -> Result<(), ApiError> {
            let job = make_job(&app)?;
            app.engine.chat(job, sink, cancel);
            Ok(())
        })
        .await
        .map_err(|e| ApiError::Server(e.to_string()))??;
        loop {
            match rx.recv().await {
                Some(EngineEvent::Error { message, kind }) => return Err(ApiError::from_kind(kind, message)),
                Some(EngineEvent::Loading { .. } | EngineEvent::Progress(_)) => continue,
                Some(event) => return Ok(Self { early: vec![event].into_iter(), rx }),
                None => return Err(stopped()),
            }
        }
    }

    /// The next event; `None` after the last.
    pub async fn next(&mut self) -> Option<ReplyEvent> {
        loop {
            let event = match self.early.next() {
                Some(event) => event,
                None => self.rx.recv().await?,
            };
            if let Some(event) = Self::translate(event) {
                return Some(event);
            }
        }
    }

    fn translate(event: EngineEvent) -> Option<ReplyEvent> {
        match event {
            EngineEvent::Token { text } => Some(ReplyEvent::Text(text)),
            EngineEvent::Reasoning { text } => Some(ReplyEvent::Reasoning(text)),
            EngineEvent::Notice { message } => Some(ReplyEvent::Notice(message)),
            EngineEvent::Done(Done::Reply { stats, tool_calls, logprobs, .. }) => {
                Some(ReplyEvent::Done { stats, tool_calls, logprobs })
            }
            EngineEvent::Error { message, kind } => Some(ReplyEvent::Failed(ApiError::from_kind(kind, message))),
            _ => None,
        }
    }

    /// The whole reply.
    pub async fn collect(mut self) -> Result<WholeReply, ApiError> {
        let (mut answer, mut reasoning) = (String::new(), String::new());
        while let Some(event) = self.next().await {
            match event {
                ReplyEvent::Text(piece) => answer.push_str(&piece),
                ReplyEvent::Reasoning(piece) => reasoning.push_str(&piece),
                ReplyEvent::Notice(_) => {}
                ReplyEvent::Done { stats, tool_calls, logprobs } => {
                    return Ok(WholeReply { answer, reasoning, tool_calls, logprobs, stats })
                }
                ReplyEvent::Failed(error) => return Err(error),
            }
        }
        Err(stopped())
    }

    /// The events as a stream, ending after `Done` or `Failed`.
    pub fn into_stream(self) -> impl tokio_stream::Stream<Item = ReplyEvent> + Send {
        futures_util::stream::unfold(self, |mut reply| async move { reply.next().await.map(|event| (event, reply)) })
    }
}

/// Loads `model` into memory (if it is not there already) and waits for it.
pub async fn load(app: Arc<App>, model: ModelEntry) -> Result<(), ApiError> {
    let (sink, mut rx, cancel) = channel_sink();
    app.engine.load(model, sink, cancel);
    while let Some(event) = rx.recv().await {
        match event {
            EngineEvent::Done(_) => return Ok(()),
            EngineEvent::Error { message, kind } => return Err(ApiError::from_kind(kind, message)),
            _ => {}
        }
    }
    Err(stopped())
}

/// The most texts one embedding request may hold.
pub const MAX_EMBEDDING_INPUTS: usize = 2048;

/// The vectors of `texts` on the embedding model `model` (loaded if it is
/// not), and the tokens read; `truncate` cuts a text longer than the
/// context to fit rather than refusing it.
pub async fn embed(
    app: Arc<App>,
    model: ModelEntry,
    texts: Vec<String>,
    truncate: bool,
) -> Result<(Vec<Vec<f32>>, usize), ApiError> {
    if texts.is_empty() || texts.len() > MAX_EMBEDDING_INPUTS {
        return Err(ApiError::BadRequest(format!(
            "the input must hold 1 to {MAX_EMBEDDING_INPUTS} texts, not {}",
            texts.len()
        )));
    }
    let (sink, mut rx, cancel) = channel_sink();
    app.engine.embed(model, texts, truncate, sink, cancel);
    while let Some(event) = rx.recv().await {
        match event {
            EngineEvent::Done(Done::Embeddings { embeddings, prompt_tokens }) => {
                return Ok((embeddings, prompt_tokens))
            }
            EngineEvent::Error { message, kind } => return Err(ApiError::from_kind(kind, message)),
            _ => {}
        }
    }
    Err(stopped())
}

/// A new id for a call the model made: nine letters and digits (Mistral's
/// templates refuse other lengths; other clients take any string).
pub fn new_call_id() -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    (0..9).map(|_| ALPHABET[rand::random_range(0..ALPHABET.len())] as char).collect()
}

fn stopped() -> ApiError {
    ApiError::Server("the engine stopped without a reply".into())
}
