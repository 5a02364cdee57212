//! `POST /v1/audio/speech` in OpenAI's request shape: `{model, input,
//! voice, response_format, stream_format}`, where `voice` names a voice
//! stored in the app (a WAV prompt, or a preset for VibeVoice-Realtime).
//!
//! - Without `stream_format`, the answer is the whole file once it is made.
//! - `stream_format: "audio"`: the file is sent as it is made (a WAV whose
//!   header gives no length, or raw PCM), so playback can start at once.
//! - `stream_format: "sse"`: server-sent events as OpenAI sends them,
//!   `speech.audio.delta` with base64 PCM, then `speech.audio.done`.
//!
//! `response_format` is `wav` (the default) or `pcm` (16-bit little-endian
//! mono, no header) at the model's rate: 24 kHz, LuxTTS 48 kHz; the
//! `x-sample-rate` response header says which.

use super::{channel_sink, parse_body, EventReceiver};
use crate::app::error::ApiError;
use crate::app::events::{Done, EngineEvent};
use crate::app::request::SpeakArgs;
use crate::app::App;
use crate::audio::wav;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::header;
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;
use std::convert::Infallible;
use std::sync::Arc;
use tokio_stream::StreamExt;

#[derive(Deserialize, Clone, Copy, Default, PartialEq)]
#[serde(rename_all = "snake_case")]
enum AudioFormat {
    #[default]
    Wav,
    Pcm,
}

#[derive(Deserialize, Clone, Copy, PartialEq)]
#[serde(rename_all = "snake_case")]
enum StreamFormat {
    /// The audio file itself, sent as it is made.
    Audio,
    /// Server-sent events of base64 PCM.
    Sse,
}

#[derive(Deserialize)]
struct SpeechRequest {
    model: String,
    input: String,
    voice: String,
    #[serde(default)]
    response_format: AudioFormat,
    #[serde(default)]
    stream_format: Option<StreamFormat>,
    /// Cake's extension, as for chat: the sampler's seed (random if absent),
    /// so the same request can be spoken the same way again.
    #[serde(default)]
    seed: Option<u64>,
    /// Accepted for compatibility; speech is always at the model's pace.
    #[serde(default)]
    #[allow(dead_code)]
    speed: Option<f64>,
}

pub async fn speech(State(app): State<Arc<App>>, body: Bytes) -> Response {
    match answer(app, body).await {
        Ok(response) => response,
        Err(e) => e.into_response(),
    }
}

async fn answer(app: Arc<App>, body: Bytes) -> Result<Response, ApiError> {
    let request: SpeechRequest = serde_json::from_value(parse_body(&body)?)
        .map_err(|e| ApiError::BadRequest(format!("invalid speech request: {e}")))?;
    let (format, streaming) = (request.response_format, request.stream_format);
    let mut rx = start(app, request).await?;
    // Hold the answer until the first audio: a request that fails before
    // speaking (bad voice, unusable model) still gets its error status.
    let first = loop {
        match rx.recv().await {
            Some(EngineEvent::Error { message, kind }) => return Err(ApiError::from_kind(kind, message)),
            Some(event @ (EngineEvent::Audio { .. } | EngineEvent::Done(_))) => break event,
            Some(_) => continue,
            None => return Err(ApiError::Server("the engine stopped without an answer".into())),
        }
    };
    match streaming {
        None => whole_file(first, rx, format).await,
        Some(StreamFormat::Audio) => Ok(audio_stream(first, rx, format)),
        Some(StreamFormat::Sse) => Ok(sse_stream(first, rx)),
    }
}

/// Starts speaking `request` (not kept as a clip); its events come on the receiver.
async fn start(app: Arc<App>, request: SpeechRequest) -> Result<EventReceiver, ApiError> {
    let (sink, rx, cancel) = channel_sink();
    tokio::task::spawn_blocking(move || -> Result<(), ApiError> {
        let voice = app.speech.find_voice(&request.voice).map_err(|e| ApiError::NotFound(format!("{e:#}")))?;
        let args = SpeakArgs {
            model_id: request.model,
            script: request.input,
            voice_ids: vec![voice.id],
            cfg_scale: None,
            steps: None,
            seed: request.seed,
            max_seconds: None,
            keep_clip: false,
        };
        let job = app.speak_job(args)?;
        app.engine.speak(job, sink, cancel);
        Ok(())
    })
    .await
    .map_err(|e| ApiError::Server(e.to_string()))??;
    Ok(rx)
}

fn content_type(format: AudioFormat) -> &'static str {
    match format {
        AudioFormat::Wav => "audio/wav",
        AudioFormat::Pcm => "audio/pcm",
    }
}

fn unbase64(text: &str) -> Result<Vec<u8>, ApiError> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|e| ApiError::Server(format!("speech came back garbled: {e}")))
}

/// The whole file, once the speech is made.
async fn whole_file(first: EngineEvent, mut rx: EventReceiver, format: AudioFormat) -> Result<Response, ApiError> {
    let mut event = Some(first);
    while let Some(current) = event.take().or(rx.recv().await) {
        match current {
            EngineEvent::Done(Done::Audio { wav_base64 }) => {
                let file = unbase64(&wav_base64)?;
                let rate = wav_rate(&file).to_string();
                let bytes = match format {
                    AudioFormat::Wav => file,
                    // A 16-bit mono WAV written by Cake: its PCM follows the 44-byte header.
                    AudioFormat::Pcm => file.get(44..).unwrap_or_default().to_vec(),
                };
                let headers = [(header::CONTENT_TYPE, content_type(format).to_string()), (SAMPLE_RATE_HEADER, rate)];
                return Ok((headers, bytes).into_response());
            }
            EngineEvent::Error { message, kind } => return Err(ApiError::from_kind(kind, message)),
            _ => {}
        }
    }
    Err(ApiError::Server("the engine stopped without an answer".into()))
}

/// The speech's events from `first` on, as a stream.
fn events(first: EngineEvent, rx: EventReceiver) -> impl tokio_stream::Stream<Item = EngineEvent> {
    tokio_stream::once(first).chain(rx)
}

/// The file sent as it is made. A failure after the first audio can only
/// end the stream early: the status has been sent.
fn audio_stream(first: EngineEvent, rx: EventReceiver, format: AudioFormat) -> Response {
    let sample_rate = sample_rate_of(&first);
    let header = match format {
        AudioFormat::Wav => wav::streaming_header(sample_rate),
        AudioFormat::Pcm => Vec::new(),
    };
    let chunks = events(first, rx).map_while(|event| match event {
        EngineEvent::Audio { pcm16_base64, .. } => Some(unbase64(&pcm16_base64).map(Bytes::from)),
        EngineEvent::Done(_) => None,
        EngineEvent::Error { message, .. } => Some(Err(ApiError::Server(message))),
        _ => Some(Ok(Bytes::new())),
    });
    let body = tokio_stream::once(Ok(Bytes::from(header)))
        .chain(chunks)
        .map(|chunk| chunk.map_err(|e| std::io::Error::other(e.message())));
    let headers =
        [(header::CONTENT_TYPE, content_type(format).to_string()), (SAMPLE_RATE_HEADER, sample_rate.to_string())];
    (headers, Body::from_stream(body)).into_response()
}

/// The response header that gives the audio's sample rate.
const SAMPLE_RATE_HEADER: header::HeaderName = header::HeaderName::from_static("x-sample-rate");

/// The rate of the speech whose first event is `first` (its first audio,
/// or the whole file).
fn sample_rate_of(first: &EngineEvent) -> u32 {
    match first {
        EngineEvent::Audio { sample_rate, .. } => *sample_rate,
        EngineEvent::Done(Done::Audio { wav_base64 }) => wav_rate(&unbase64(wav_base64).unwrap_or_default()),
        _ => 0,
    }
}

/// The sample rate in a WAV file written by Cake (bytes 24–27 of its header).
fn wav_rate(file: &[u8]) -> u32 {
    file.get(24..28).map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

/// OpenAI's speech events: a `speech.audio.delta` per piece of audio, then
/// `speech.audio.done` (or an error object).
fn sse_stream(first: EngineEvent, rx: EventReceiver) -> Response {
    let data = events(first, rx).filter_map(|event| match event {
        EngineEvent::Audio { pcm16_base64, .. } => {
            Some(json!({"type": "speech.audio.delta", "audio": pcm16_base64}).to_string())
        }
        EngineEvent::Done(_) => Some(json!({"type": "speech.audio.done"}).to_string()),
        EngineEvent::Error { message, kind } => Some(ApiError::from_kind(kind, message).body().to_string()),
        _ => None,
    });
    Sse::new(data.map(|data| Ok::<_, Infallible>(Event::default().data(data)))).into_response()
}
