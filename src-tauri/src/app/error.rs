//! Errors as the UI and the OpenAI API see them.

use super::events::ErrorKind;
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
    /// What would serve it is not there now; retrying later may work (503).
    Unavailable(String),
    /// The model hub cannot be reached (no internet connection) (503,
    /// code `hub_unreachable`, which the app explains in plain words).
    HubUnreachable(String),
}

/// Seconds a client is asked to wait before retrying an `Unavailable` request.
pub const RETRY_AFTER_S: u32 = 5;

impl ApiError {
    /// A failed stream's error, by the kind the engine gave it.
    pub fn from_kind(kind: ErrorKind, message: String) -> Self {
        match kind {
            ErrorKind::BadRequest | ErrorKind::PromptTooLong | ErrorKind::LastTurnTooLong => Self::BadRequest(message),
            ErrorKind::Failed => Self::Server(message),
            ErrorKind::Unavailable => Self::Unavailable(message),
            ErrorKind::HubUnreachable => Self::HubUnreachable(message),
        }
    }

    pub fn message(&self) -> &str {
        match self {
            Self::BadRequest(m)
            | Self::NotFound(m)
            | Self::Server(m)
            | Self::Unavailable(m)
            | Self::HubUnreachable(m) => m,
        }
    }

    pub fn status(&self) -> u16 {
        match self {
            Self::BadRequest(_) => 400,
            Self::NotFound(_) => 404,
            Self::Server(_) => 500,
            Self::Unavailable(_) | Self::HubUnreachable(_) => 503,
        }
    }

    /// OpenAI's error body: `{"error": {"message", "type", "param", "code"}}`.
    pub fn body(&self) -> Value {
        let kind = match self {
            Self::BadRequest(_) => "invalid_request_error",
            Self::NotFound(_) => "not_found_error",
            Self::Server(_) | Self::Unavailable(_) | Self::HubUnreachable(_) => "server_error",
        };
        let code = match self {
            Self::HubUnreachable(_) => json!(ErrorKind::HubUnreachable),
            _ => Value::Null,
        };
        json!({"error": {"message": self.message(), "type": kind, "param": null, "code": code}})
    }

    /// A failure asking the model hub: [`Self::HubUnreachable`] where it
    /// could not be reached, else the machine's (500).
    pub fn of_hub(error: anyhow::Error) -> Self {
        if crate::library::hub::HubUnreachable::is_in(&error) {
            Self::HubUnreachable(format!("{error:#}"))
        } else {
            Self::server(error)
        }
    }

    /// A failure on the serving side, with its causes.
    pub fn server(error: anyhow::Error) -> Self {
        Self::Server(format!("{error:#}"))
    }

    pub fn bad(error: impl std::fmt::Display) -> Self {
        Self::BadRequest(format!("{error:#}"))
    }

    /// A failure of a command that checks the request and then stores
    /// something: the machine's (500) where a file could not be read or
    /// written, else the request's (400).
    pub fn of(error: anyhow::Error) -> Self {
        if crate::files::storage::StorageError::is_in(&error) {
            Self::server(error)
        } else {
            Self::BadRequest(format!("{error:#}"))
        }
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for ApiError {}
