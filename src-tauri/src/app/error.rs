//! Errors as the UI and the OpenAI API see them.

use serde_json::{json, Value};

/// An error with the class of HTTP status it maps to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiError {
    /// The request itself is wrong (400).
    BadRequest(String),
    /// It names something that does not exist (404).
    NotFound(String),
    /// Something failed on our side (500).
    Server(String),
}

impl ApiError {
    /// A failed stream's error, by the kind the engine gave it.
    pub fn from_kind(kind: super::events::ErrorKind, message: String) -> Self {
        match kind {
            super::events::ErrorKind::BadRequest | super::events::ErrorKind::PromptTooLong => Self::BadRequest(message),
            super::events::ErrorKind::Failed => Self::Server(message),
        }
    }

    pub fn message(&self) -> &str {
        match self {
            Self::BadRequest(m) | Self::NotFound(m) | Self::Server(m) => m,
        }
    }

    pub fn status(&self) -> u16 {
        match self {
            Self::BadRequest(_) => 400,
            Self::NotFound(_) => 404,
            Self::Server(_) => 500,
        }
    }

    /// OpenAI's error body: `{"error": {"message", "type", "param", "code"}}`.
    pub fn body(&self) -> Value {
        let kind = match self {
            Self::BadRequest(_) => "invalid_request_error",
            Self::NotFound(_) => "not_found_error",
            Self::Server(_) => "server_error",
        };
        json!({"error": {"message": self.message(), "type": kind, "param": null, "code": null}})
    }

    /// A bad request from any error, keeping its whole context chain.
    /// A failure on the serving side, with its causes.
    pub fn server(error: anyhow::Error) -> Self {
        Self::Server(format!("{error:#}"))
    }

    pub fn bad(error: impl std::fmt::Display) -> Self {
        Self::BadRequest(format!("{error:#}"))
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for ApiError {}
