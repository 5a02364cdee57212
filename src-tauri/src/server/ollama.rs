//! Ollama's native API, so Ollama clients (the `ollama` SDKs, Open WebUI,
//! editors set to "Ollama") can use Cake: `GET /api/version`, `GET
//! /api/tags`, `POST /api/show`, `GET /api/ps`, `POST /api/chat` and `POST
//! /api/generate` (streamed as NDJSON, one JSON object per line, unless
//! `"stream": false`), `POST /api/embed` and the older `POST
//! /api/embeddings` (embedding models). Other `/api/` paths get 404 naming
//! what is served.
//!
//! Models are named as on `/v1/models` (a trailing `:latest` is accepted).
//! A conversation longer than the context loses its oldest turns (after
//! the system prompt), as Ollama's do, and the last object counts them in
//! `truncated_messages`. A reply's reasoning comes apart from its answer, in `thinking`; `think:
//! false` switches it off where the model's template can. `tools` go to the
//! model's template and its calls come back in `message.tool_calls`;
//! `images` go to a model that reads pictures, before the turn's text.
//! What Cake cannot honour yet (a custom `template`, penalties and
//! samplers it does not have) is refused with a 400 naming it, never
//! ignored. Errors are Ollama's `{"error": "..."}`.

use super::pictures::{off_the_async_threads, pictures_of_list};
use super::replies::{new_call_id, Reply, ReplyEvent};
use super::{parse_body, refuse_if_used};
use crate::app::engine::Prompt;
use crate::app::error::ApiError;
use crate::app::events::ReplyStats;
use crate::app::request::ReplyArgs;
use crate::app::App;
use crate::library::catalog::{Catalog, ModelEntry, ModelKind, ModelStatus};
use crate::text::chat_template::{ChatMessage, MessagePart, MessageToolCall, RenderOptions};
use crate::text::constraint::OutputFormat;
use crate::text::generation::FinishReason;
use crate::text::sampling::SamplingOverrides;
use crate::text::tool_calls::ToolCall;
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::sync::Arc;
use std::time::Instant;
use tokio_stream::StreamExt;

/// The Ollama API version whose routes and fields these follow; clients
/// read it from `/api/version` to decide what they may ask.
pub const OLLAMA_API_VERSION: &str = "0.12.0";

/// How Ollama writes the expiry of a model kept in memory indefinitely.
const NEVER_EXPIRES: &str = "2318-01-01T00:00:00Z";

/// The routes this module serves, for the 404 of any other `/api/` path.
const SERVED: &str =
    "/api/chat, /api/generate, /api/embed, /api/embeddings, /api/tags, /api/show, /api/ps and /api/version";

/// An Ollama-shaped error response.
/// An error as Ollama sends it: `{"error": "..."}` with the status.
pub struct OllamaError(ApiError);

impl From<ApiError> for OllamaError {
    fn from(error: ApiError) -> Self {
        Self(error)
    }
}

impl IntoResponse for OllamaError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.0.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        (status, Json(json!({"error": self.0.message()}))).into_response()
    }
}

pub type Answer = Result<Response, OllamaError>;

pub async fn version() -> Json<Value> {
    Json(json!({"version": OLLAMA_API_VERSION}))
}

/// Any `/api/` path not served here.
pub async fn not_served(Path(rest): Path<String>) -> Response {
    let path: String = rest.chars().take(100).collect();
    let message = format!("Cake does not serve Ollama's /api/{path}: it serves {SERVED}");
    OllamaError(ApiError::NotFound(message)).into_response()
}

/// The library's complete chat and embedding models, with the name a client types.
async fn listed_models(app: &Arc<App>) -> Result<Vec<(String, ModelEntry)>, ApiError> {
    let app = app.clone();
    let models = tokio::task::spawn_blocking(move || app.catalog.list())
        .await
        .map_err(|e| ApiError::Server(e.to_string()))?
        .map_err(ApiError::server)?;
    Ok(models
        .iter()
        .filter(|m| m.status == ModelStatus::Complete && m.kind != ModelKind::Speech)
        .map(|m| (Catalog::api_name(m, &models), m.clone()))
        .collect())
}

/// The model a client named (of `kind`, or of any kind when `None`):
/// `name`, or `name` without Ollama's default tag `:latest` (only the named
/// model's files are inspected).
async fn named_model(app: &Arc<App>, name: &str, kind: Option<ModelKind>) -> Result<ModelEntry, ApiError> {
    let (app, name) = (app.clone(), name.to_string());
    tokio::task::spawn_blocking(move || {
        let usable = |id: &str| match kind {
            Some(kind) => app.usable_model_of_kind(id, kind),
            None => app.usable_model(id),
        };
        match (usable(&name), name.strip_suffix(":latest")) {
            (Err(ApiError::NotFound(_)), Some(bare)) => usable(bare),
            (found, _) => found,
        }
        .map_err(|e| match e {
            ApiError::NotFound(_) => {
                ApiError::NotFound(format!("model '{name}' not found: GET /api/tags lists the models Cake has"))
            }
            other => other,
        })
    })
    .await
    .map_err(|e| ApiError::Server(e.to_string()))?
}

/// Ollama's `details` of a model.
fn details(entry: &ModelEntry) -> Value {
    let family = entry.architecture.clone().unwrap_or_default();
    json!({
        "parent_model": "",
        "format": if entry.path.extension().is_some_and(|e| e == "gguf") { "gguf" } else { "safetensors" },
        "family": family,
        "families": [family],
        "parameter_size": entry.parameters.map(parameter_size).unwrap_or_default(),
        "quantization_level": entry.quantization.clone().or_else(|| entry.dtype.clone()).unwrap_or_default(),
    })
}

/// "135M", "1.7B": how Ollama writes a parameter count.
fn parameter_size(count: u64) -> String {
    let count = count as f64;
    if count >= 1e9 {
        format!("{:.1}B", count / 1e9)
    } else {
        format!("{:.0}M", count / 1e6)
    }
}

/// A stable digest standing for the model's identity (Ollama lists the
/// SHA-256 of a model's manifest; Cake hashes the library id and size
/// rather than reading gigabytes).
fn digest(entry: &ModelEntry) -> String {
    use sha2::Digest;
    let mut hasher = sha2::Sha256::new();
    hasher.update(entry.id.as_bytes());
    hasher.update(entry.size_bytes.to_le_bytes());
    hasher.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

fn modified_at(entry: &ModelEntry) -> String {
    let modified = std::fs::metadata(&entry.path).and_then(|m| m.modified()).ok();
    let time: chrono::DateTime<chrono::Utc> = modified.map_or_else(chrono::Utc::now, Into::into);
    time.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Nanos, true)
}

fn listing(name: &str, entry: &ModelEntry) -> Value {
    json!({
        "name": name, "model": name, "modified_at": modified_at(entry), "size": entry.size_bytes,
        "digest": digest(entry), "details": details(entry),
    })
}

pub async fn tags(State(app): State<Arc<App>>) -> Answer {
    let models = listed_models(&app).await?;
    let listed: Vec<Value> = models.iter().map(|(name, entry)| listing(name, entry)).collect();
    Ok(Json(json!({"models": listed})).into_response())
}

/// The model in memory, as `ollama ps` shows it.
pub async fn running(State(app): State<Arc<App>>) -> Answer {
    let loaded = app.engine.loaded();
    let models = listed_models(&app).await?;
    let running: Vec<Value> = models
        .iter()
        .filter(|(_, entry)| loaded.as_ref().is_some_and(|l| l.id == entry.id))
        .map(|(name, entry)| {
            let mut value = listing(name, entry);
            // Cake computes on the CPU, and keeps a model in memory until
            // another replaces it: Ollama's "never expires" (keep_alive -1).
            value["size_vram"] = json!(0);
            value["expires_at"] = json!(NEVER_EXPIRES);
            value
        })
        .collect();
    Ok(Json(json!({"models": running})).into_response())
}

#[derive(Deserialize)]
struct ShowRequest {
    #[serde(alias = "name")]
    model: String,
}

pub async fn show(State(app): State<Arc<App>>, body: Bytes) -> Answer {
    let request: ShowRequest = parse(&body, "show")?;
    let entry = named_model(&app, &request.model, None).await?;
    let capabilities = match entry.kind {
        ModelKind::Embedding => json!(["embedding"]),
        ModelKind::Text if entry.reads_pictures => json!(["completion", "tools", "vision"]),
        ModelKind::Text => json!(["completion", "tools"]),
        ModelKind::Speech => json!([]),
    };
    let architecture = entry.architecture.clone().unwrap_or_default();
    Ok(Json(json!({
        "modelfile": "", "parameters": "", "template": "",
        "details": details(&entry),
        "model_info": {"general.architecture": architecture, "general.parameter_count": entry.parameters},
        "capabilities": capabilities,
        "modified_at": modified_at(&entry),
    }))
    .into_response())
}

fn parse<T: serde::de::DeserializeOwned>(body: &Bytes, route: &str) -> Result<T, ApiError> {
    serde_json::from_value(parse_body(body)?)
        .map_err(|e| ApiError::BadRequest(format!("invalid /api/{route} request: {e}")))
}

/// Ollama's `options`: the ones Cake honours, and the rest to check.
#[derive(Deserialize, Default)]
struct Options {
    temperature: Option<f32>,
    top_k: Option<usize>,
    top_p: Option<f32>,
    min_p: Option<f32>,
    repeat_penalty: Option<f32>,
    seed: Option<i64>,
    /// Tokens to generate; -1 (the default) and -2 mean until the context is full.
    num_predict: Option<i64>,
    stop: Option<Vec<String>>,
    num_ctx: Option<usize>,
    #[serde(flatten)]
    rest: Map<String, Value>,
}

/// Options that change what is sampled, which Cake does not have, with the
/// value that leaves sampling as it is.
const UNSUPPORTED_SAMPLING: &[(&str, f64)] =
    &[("presence_penalty", 0.0), ("frequency_penalty", 0.0), ("typical_p", 1.0), ("tfs_z", 1.0), ("mirostat", 0.0)];

impl Options {
    fn into_reply_args(self, model_id: String) -> Result<ReplyArgs, ApiError> {
        for (name, neutral) in UNSUPPORTED_SAMPLING {
            if let Some(value) = self.rest.get(*name).and_then(Value::as_f64) {
                if value != *neutral {
                    return Err(ApiError::BadRequest(format!(
                        "option `{name}` is not supported by Cake (only {neutral} is accepted)"
                    )));
                }
            }
        }
        let max_tokens = match self.num_predict {
            None | Some(-1) | Some(-2) => usize::MAX,
            Some(n) if n > 0 => n as usize,
            Some(n) => {
                return Err(ApiError::BadRequest(format!("option `num_predict` is {n}: give a positive count, or -1")))
            }
        };
        Ok(ReplyArgs {
            model_id,
            sampling: SamplingOverrides {
                temperature: self.temperature,
                top_k: self.top_k,
                top_p: self.top_p,
                min_p: self.min_p,
                repeat_penalty: self.repeat_penalty,
                seed: Some(self.seed.filter(|s| *s >= 0).map_or_else(rand::random, |s| s as u64)),
            },
            max_tokens,
            stop: self.stop.unwrap_or_default(),
            context_length: self.num_ctx,
            format: None,
            logprobs: None,
        })
    }
}

fn default_stream() -> bool {
    true
}

#[derive(Deserialize)]
struct ChatRequestMessage {
    role: String,
    #[serde(default)]
    content: String,
    images: Option<Value>,
    /// The calls an earlier reply made, as this route gave them.
    tool_calls: Option<Vec<OllamaToolCall>>,
    /// An earlier reply's reasoning, as this route gave it.
    thinking: Option<String>,
}

/// A call as Ollama writes it: `{"function": {"name", "arguments": {…}}}`.
#[derive(Deserialize)]
struct OllamaToolCall {
    function: ToolCall,
}

#[derive(Deserialize)]
struct ChatRequest {
    model: String,
    #[serde(default)]
    messages: Vec<ChatRequestMessage>,
    #[serde(default = "default_stream")]
    stream: bool,
    #[serde(default)]
    options: Options,
    format: Option<Value>,
    /// The functions the model may call (OpenAI's `tools` shape).
    tools: Option<Vec<Value>>,
    think: Option<Value>,
}

#[derive(Deserialize)]
struct GenerateRequest {
    model: String,
    #[serde(default)]
    prompt: String,
    system: Option<String>,
    #[serde(default)]
    raw: bool,
    #[serde(default = "default_stream")]
    stream: bool,
    #[serde(default)]
    options: Options,
    format: Option<Value>,
    images: Option<Value>,
    suffix: Option<Value>,
    template: Option<Value>,
    think: Option<Value>,
}

/// How a reply's timings read in Ollama's final object (nanoseconds).
fn timings(stats: &ReplyStats, started: Instant) -> Value {
    let ns = |seconds: f64| (seconds.max(0.0) * 1e9) as u64;
    let eval_s = if stats.decode_tok_s > 0.0 { stats.completion_tokens as f64 / stats.decode_tok_s } else { 0.0 };
    let mut end = json!({
        "done_reason": if matches!(stats.finish_reason, FinishReason::MaxTokens | FinishReason::ContextFull) { "length" } else { "stop" },
        "total_duration": ns(started.elapsed().as_secs_f64()),
        "load_duration": ns(stats.load_s.unwrap_or(0.0)),
        "prompt_eval_count": stats.prompt_tokens,
        "prompt_eval_duration": ns(stats.ttft_s),
        "eval_count": stats.completion_tokens,
        "eval_duration": ns(eval_s),
    });
    if stats.dropped_messages > 0 {
        // Not Ollama's (it says nothing); Cake says what it left out.
        end["truncated_messages"] = json!(stats.dropped_messages);
    }
    end
}

/// Merges `extra`'s keys into the object `base`.
fn merged(mut base: Value, extra: Value) -> Value {
    if let (Some(base), Value::Object(extra)) = (base.as_object_mut(), extra) {
        base.extend(extra);
    }
    base
}

/// Part of a reply, as [`answer`] hands it to a route to wrap.
#[derive(Default)]
struct Piece<'a> {
    answer: &'a str,
    thinking: &'a str,
    tool_calls: &'a [ToolCall],
}

/// A reply as Ollama sends it: one object with the whole text, or NDJSON
/// lines of pieces and a last one with the timings (and the calls).
/// `wrap` puts a piece as the route's objects carry it (`message` or
/// `response`, `thinking`, `tool_calls`).
async fn answer(reply: Reply, stream: bool, model: String, started: Instant, wrap: fn(Piece) -> Value) -> Answer {
    if !stream {
        let whole = reply.collect().await?;
        let head = json!({"model": model, "created_at": now(), "done": true});
        let piece = Piece { answer: &whole.answer, thinking: &whole.reasoning, tool_calls: &whole.tool_calls };
        let body = merged(merged(head, wrap(piece)), timings(&whole.stats, started));
        return Ok(Json(body).into_response());
    }
    let line = |value: Value| Ok::<_, std::convert::Infallible>(Bytes::from(format!("{value}\n")));
    let lines = reply.into_stream().filter_map(move |event| match event {
        ReplyEvent::Text(text) => {
            let piece = Piece { answer: &text, ..Piece::default() };
            Some(line(merged(json!({"model": model, "created_at": now(), "done": false}), wrap(piece))))
        }
        ReplyEvent::Reasoning(text) => {
            let piece = Piece { thinking: &text, ..Piece::default() };
            Some(line(merged(json!({"model": model, "created_at": now(), "done": false}), wrap(piece))))
        }
        ReplyEvent::Notice(_) => None,
        ReplyEvent::Done { stats, tool_calls, .. } => {
            let head = json!({"model": model, "created_at": now(), "done": true});
            let piece = Piece { tool_calls: &tool_calls, ..Piece::default() };
            Some(line(merged(merged(head, wrap(piece)), timings(&stats, started))))
        }
        ReplyEvent::Failed(error) => Some(line(json!({"error": error.message()}))),
    });
    Ok(([(header::CONTENT_TYPE, "application/x-ndjson")], Body::from_stream(lines)).into_response())
}

pub async fn chat(State(app): State<Arc<App>>, body: Bytes) -> Answer {
    let started = Instant::now();
    let request: ChatRequest = parse(&body, "chat")?;
    let format = output_format(request.format.as_ref())?;
    let tools = request.tools.filter(|tools| !tools.is_empty());
    let options = RenderOptions { enable_thinking: thinking_asked(request.think.as_ref())?, tools };
    let messages = off_the_async_threads(move || {
        let mut messages = Vec::with_capacity(request.messages.len());
        for (index, message) in request.messages.into_iter().enumerate() {
            // As Ollama gives them to its templates: the pictures before the text.
            let pictures = pictures_of_list(message.images, Some(index + 1))?;
            let mut parts: Vec<MessagePart> = pictures.into_iter().map(MessagePart::Picture).collect();
            parts.push(MessagePart::Text(message.content));
            let mut turn = ChatMessage::with_parts(&message.role, parts);
            turn.reasoning_content = message.thinking;
            if let Some(calls) = message.tool_calls {
                let calls = calls.into_iter().map(|call| MessageToolCall::new(new_call_id(), call.function));
                turn.tool_calls = Some(calls.collect());
            }
            messages.push(turn);
        }
        Ok(messages)
    })
    .await?;
    let id = named_model(&app, &request.model, Some(ModelKind::Text)).await?.id;
    let mut args = request.options.into_reply_args(id)?;
    args.format = format;
    // As Ollama does, a conversation longer than the context loses its
    // oldest turns (after the system prompt) rather than failing.
    let make_job = move |app: &App| {
        let mut job = app.reply_job(args, Prompt::Conversation { messages, options })?;
        job.drop_oldest_turns = true;
        Ok(job)
    };
    let reply = Reply::start(app, make_job).await?;
    answer(reply, request.stream, request.model, started, |piece| {
        let mut message = json!({"role": "assistant", "content": piece.answer});
        if !piece.thinking.is_empty() {
            message["thinking"] = json!(piece.thinking);
        }
        if !piece.tool_calls.is_empty() {
            let calls = piece.tool_calls.iter().map(|call| json!({"function": call}));
            message["tool_calls"] = Value::Array(calls.collect());
        }
        json!({ "message": message })
    })
    .await
}

/// Ollama's `format`: `"json"` (any JSON object) or a JSON schema.
fn output_format(format: Option<&Value>) -> Result<Option<OutputFormat>, ApiError> {
    match format {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(kind)) if kind.is_empty() => Ok(None),
        Some(Value::String(kind)) if kind == "json" => Ok(Some(OutputFormat::JsonObject)),
        Some(schema @ (Value::Object(_) | Value::Bool(_))) => Ok(Some(OutputFormat::JsonSchema(schema.clone()))),
        Some(_) => Err(ApiError::BadRequest("`format` must be \"json\" or a JSON schema".into())),
    }
}

/// Ollama's `think`: `false` switches reasoning off where the template
/// can; `true` or a level (`high`, `medium`, `low`) leaves it on. Either
/// way the reasoning comes apart from the answer, in `thinking`.
fn thinking_asked(think: Option<&Value>) -> Result<Option<bool>, ApiError> {
    match think {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(on)) => Ok(Some(*on)),
        Some(Value::String(level)) if matches!(level.as_str(), "high" | "medium" | "low") => Ok(Some(true)),
        Some(_) => Err(ApiError::BadRequest("`think` must be true, false, \"high\", \"medium\" or \"low\"".into())),
    }
}

pub async fn generate(State(app): State<Arc<App>>, body: Bytes) -> Answer {
    let started = Instant::now();
    let mut request: GenerateRequest = parse(&body, "generate")?;
    if request.raw {
        refuse_if_used("images", &request.images, "a `raw` prompt takes no pictures: leave `raw` off")?;
    }
    let images = request.images.take();
    let pictures = off_the_async_threads(move || pictures_of_list(images, None)).await?;
    let format = output_format(request.format.as_ref())?;
    refuse_if_used("suffix", &request.suffix, "fill-in-the-middle is not served")?;
    refuse_if_used("template", &request.template, "Cake renders with the model's own chat template")?;
    let options = RenderOptions { enable_thinking: thinking_asked(request.think.as_ref())?, tools: None };
    let entry = named_model(&app, &request.model, Some(ModelKind::Text)).await?;
    if request.prompt.is_empty() {
        // Ollama's way to load a model without generating.
        super::replies::load(app, entry).await?;
        let done =
            json!({"model": request.model, "created_at": now(), "response": "", "done": true, "done_reason": "load"});
        return Ok(Json(done).into_response());
    }
    let prompt = if request.raw {
        Prompt::Text(request.prompt)
    } else {
        let mut messages: Vec<ChatMessage> = request.system.iter().map(|s| ChatMessage::new("system", s)).collect();
        let mut parts: Vec<MessagePart> = pictures.into_iter().map(MessagePart::Picture).collect();
        parts.push(MessagePart::Text(request.prompt));
        messages.push(ChatMessage::with_parts("user", parts));
        Prompt::Conversation { messages, options }
    };
    let mut args = request.options.into_reply_args(entry.id)?;
    args.format = format;
    let reply = Reply::start(app, move |app| app.reply_job(args, prompt)).await?;
    answer(reply, request.stream, request.model, started, |piece| {
        let mut wrapped = json!({ "response": piece.answer });
        if !piece.thinking.is_empty() {
            wrapped["thinking"] = json!(piece.thinking);
        }
        wrapped
    })
    .await
}

#[derive(Deserialize)]
struct EmbedRequest {
    model: String,
    /// `/api/embed`: a text or a list of texts.
    #[serde(default)]
    input: Option<Value>,
    /// `/api/embeddings` (the older route): one text.
    #[serde(default)]
    prompt: Option<String>,
    /// Cut a text longer than the context (Ollama's default) rather than refuse it.
    truncate: Option<bool>,
}

/// `/api/embed`: one vector per input text.
pub async fn embed(State(app): State<Arc<App>>, body: Bytes) -> Answer {
    let started = Instant::now();
    let request: EmbedRequest = parse(&body, "embed")?;
    let input = request.input.ok_or_else(|| ApiError::BadRequest("embed: `input` is missing".into()))?;
    let texts = super::openai_embeddings::input_texts(input)?;
    let entry = named_model(&app, &request.model, Some(ModelKind::Embedding)).await?;
    let (embeddings, tokens) = super::replies::embed(app, entry, texts, request.truncate != Some(false)).await?;
    let ns = started.elapsed().as_nanos() as u64;
    let answer = json!({"model": request.model, "embeddings": embeddings, "total_duration": ns,
                        "load_duration": 0, "prompt_eval_count": tokens});
    Ok(Json(answer).into_response())
}

/// `/api/embeddings`, Ollama's older route: `{"embedding": [...]}` for `prompt`.
pub async fn embeddings(State(app): State<Arc<App>>, body: Bytes) -> Answer {
    let request: EmbedRequest = parse(&body, "embeddings")?;
    let prompt = request.prompt.ok_or_else(|| ApiError::BadRequest("embeddings: `prompt` is missing".into()))?;
    let entry = named_model(&app, &request.model, Some(ModelKind::Embedding)).await?;
    let (mut embeddings, _) = super::replies::embed(app, entry, vec![prompt], true).await?;
    Ok(Json(json!({"embedding": embeddings.pop().unwrap_or_default()})).into_response())
}
