//! `POST /v1/audio/speech` in OpenAI's request shape: `{model, input,
//! voice, response_format}`, where `voice` names a voice prompt stored in
//! the app. The answer is the speech as a WAV file.

use super::{channel_sink, parse_body};
use crate::app::error::ApiError;
use crate::app::events::{Done, EngineEvent};
use crate::app::request::SpeakArgs;
use crate::app::App;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

#[derive(Deserialize)]
struct SpeechRequest {
    model: String,
    input: String,
    voice: String,
    #[serde(default)]
    response_format: Option<String>,
    /// Accepted for compatibility; speech is always at the model's pace.
    #[serde(default)]
    #[allow(dead_code)]
    speed: Option<f64>,
}

pub async fn speech(State(app): State<Arc<App>>, body: Bytes) -> Response {
    match synthesize(app, body).await {
        Ok(wav) => ([(header::CONTENT_TYPE, "audio/wav")], wav).into_response(),
        Err(e) => e.into_response(),
    }
}

async fn synthesize(app: Arc<App>, body: Bytes) -> Result<Vec<u8>, ApiError> {
    let request: SpeechRequest = serde_json::from_value(parse_body(&body)?)
        .map_err(|e| ApiError::BadRequest(format!("invalid speech request: {e}")))?;
    if let Some(format) = request.response_format.as_deref().filter(|f| *f != "wav") {
        return Err(ApiError::BadRequest(format!("response_format `{format}` is not supported: only `wav`")));
    }
    let (sink, mut rx) = channel_sink();
    tokio::task::spawn_blocking(move || -> Result<(), ApiError> {
        let voice = app.speech.find_voice(&request.voice).map_err(|e| ApiError::NotFound(format!("{e:#}")))?;
        let args = SpeakArgs {
            model_id: request.model,
            script: request.input,
            voice_ids: vec![voice.id],
            cfg_scale: None,
            steps: None,
            seed: None,
            max_seconds: None,
        };
        let job = app.speak_job(args, false)?;
        app.engine.speak(job, sink, Arc::new(AtomicBool::new(false)));
        Ok(())
    })
    .await
    .map_err(|e| ApiError::Server(e.to_string()))??;
    while let Some(event) = rx.recv().await {
        match event {
            EngineEvent::Done(Done::Audio { wav_base64 }) => {
                use base64::Engine as _;
                return base64::engine::general_purpose::STANDARD
                    .decode(wav_base64)
                    .map_err(|e| ApiError::Server(format!("speech came back garbled: {e}")));
            }
            EngineEvent::Error { message, kind } => return Err(ApiError::from_kind(kind, message)),
            _ => {}
        }
    }
    Err(ApiError::Server("the engine stopped without an answer".into()))
}
