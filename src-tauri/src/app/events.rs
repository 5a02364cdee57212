//! What a streaming command tells its requester, as one typed enum.
//!
//! Every event serializes to a JSON object with a `type` field (the shapes
//! are listed in docs/api.md and mirrored by `ui/src/api/types.ts`). A
//! stream is some `loading`/`progress` events, `token` and `notice` events
//! for a chat or `audio` events for speech, then exactly one `done` or
//! `error`.

use super::speech_library::Clip;
use crate::library::catalog::ModelEntry;
use crate::library::download::DownloadProgress;
use crate::text::generation::FinishReason;
use crate::text::logprobs::LogprobEntry;
use crate::text::tool_calls::ToolCall;
use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EngineEvent {
    /// Loading the model a chat or speech job needs.
    Loading { fraction: f64, message: String },
    /// Progress of the command's own work.
    Progress(Progress),
    /// A piece of a reply's answer.
    Token { text: String },
    /// A piece of a reply's reasoning (the model's thinking before it answers).
    Reasoning { text: String },
    /// Something to know mid-reply (a worker was lost and the reply continues).
    Notice { message: String },
    /// A piece of speech as it is made, to be played at once: mono 16-bit
    /// little-endian PCM, following the previous piece without a gap.
    Audio { pcm16_base64: String, sample_rate: u32 },
    /// The command finished.
    Done(Done),
    /// The command failed; `kind` says whose fault it was.
    Error { message: String, kind: ErrorKind },
}

/// What `progress` events carry, by command.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Progress {
    /// `load_model`.
    Load { fraction: f64, message: String },
    /// `chat`, reading a prompt longer than one chunk: tokens read so far
    /// of those not already cached.
    Prompt { read_tokens: usize, prompt_tokens: usize },
    /// `speak`: frames made and the seconds of audio they hold, and which
    /// piece of the script (from 1) of how many is being spoken; for a
    /// model that makes a piece all at once (LuxTTS), the steps of the
    /// piece's sampling done so far, of how many.
    Speech {
        frames: usize,
        seconds: f64,
        piece: usize,
        pieces: usize,
        #[serde(skip_serializing_if = "Option::is_none")]
        step: Option<usize>,
        #[serde(skip_serializing_if = "Option::is_none")]
        steps: Option<usize>,
    },
    /// `download_model`.
    Download(DownloadProgress),
}

/// What `done` events carry, by command.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Done {
    /// `load_model`, `download_model`: the model, as listed.
    Model { model: ModelEntry },
    /// `chat`: the answer, the reasoning before it and the functions it
    /// calls (each absent when none).
    Reply {
        text: String,
        #[serde(skip_serializing_if = "String::is_empty")]
        reasoning: String,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
        /// Each written token's log-probability, when the request asked.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        logprobs: Vec<LogprobEntry>,
        stats: ReplyStats,
    },
    /// An embedding request (the model APIs): one vector per text, and the
    /// tokens read.
    Embeddings { embeddings: Vec<Vec<f32>>, prompt_tokens: usize },
    /// `speak` without keeping the clip (the OpenAI speech endpoint, the
    /// chat's Read aloud).
    Audio { wav_base64: String },
    /// `speak`: the stored clip.
    Clip { clip: Clip },
}

/// How a reply went.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReplyStats {
    pub prompt_tokens: usize,
    /// Messages left out, oldest first, so the rest fit the context.
    #[serde(skip_serializing_if = "is_zero")]
    pub dropped_messages: usize,
    pub cached_prompt_tokens: usize,
    pub completion_tokens: usize,
    pub ttft_s: f64,
    pub decode_tok_s: f64,
    pub finish_reason: FinishReason,
    /// Seconds spent loading the model before this reply (absent when it was loaded already).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub load_s: Option<f64>,
    /// The most replies decoded in one step with this one, itself included
    /// (absent when it was decoded alone).
    #[serde(skip_serializing_if = "is_one")]
    pub decoded_together: usize,
    /// The most groups of replies whose decode steps were in flight across
    /// the cluster's machines at once while this one decoded, each machine
    /// on a different group (absent when steps went one at a time).
    #[serde(skip_serializing_if = "is_one")]
    pub groups_in_flight: usize,
}

/// Whose fault a failure was: HTTP answers 400 for the first, 500 for the second.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The request cannot work as sent (unusable model, bad script).
    BadRequest,
    /// The request's fault too: the conversation does not fit the context
    /// (the UI then offers to leave out its oldest turns).
    PromptTooLong,
    /// The request's fault: even the system prompt and the last turn alone
    /// do not fit, so leaving out older turns cannot help.
    LastTurnTooLong,
    /// Something failed while serving a valid request.
    Failed,
    /// The machines to serve it are not there now (a cluster's workers
    /// cannot be reached); asking again later may work.
    Unavailable,
    /// The model hub cannot be reached: no internet connection.
    HubUnreachable,
}

fn is_zero(count: &usize) -> bool {
    *count == 0
}

fn is_one(count: &usize) -> bool {
    *count == 1
}

impl EngineEvent {
    pub fn error(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self::Error { message: message.into(), kind }
    }

    /// Whether the stream ends with this event.
    pub fn is_last(&self) -> bool {
        matches!(self, Self::Done(_) | Self::Error { .. })
    }
}
