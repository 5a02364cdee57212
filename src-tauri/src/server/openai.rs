//! The OpenAI-compatible routes: `GET /v1/models` and
//! `POST /v1/chat/completions` (streaming and not), so existing clients
//! (the `openai` Python package, editors, scripts) can use Cake.
//!
//! Requests become the same chat jobs the UI sends; errors use OpenAI's
//! `{"error": {...}}` shape with a 4xx/5xx status.

use super::parse_body;
use super::pictures::{off_the_async_threads, picture_of_url};
use super::replies::{new_call_id, Reply, ReplyEvent};
use crate::app::error::ApiError;
use crate::app::events::ReplyStats;
use crate::app::request::ChatArgs;
use crate::app::App;
use crate::library::catalog::{Catalog, ModelStatus};
use crate::text::chat_template::{ChatMessage, MessagePart, MessageToolCall};
use crate::text::constraint::OutputFormat;
use crate::text::generation::FinishReason;
use crate::text::logprobs::LogprobEntry;
use crate::text::sampling::SamplingOverrides;
use crate::text::tool_calls::{ToolCall, ToolChoice};
use axum::body::Bytes;
use axum::extract::State;
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use std::convert::Infallible;
use std::sync::Arc;
use tokio_stream::StreamExt;

pub async fn list_models(State(app): State<Arc<App>>) -> Response {
    let listed = tokio::task::spawn_blocking(move || app.catalog.list()).await;
    match listed {
        Ok(Ok(models)) => {
            let data: Vec<Value> = models
                .iter()
                .filter(|m| m.status == ModelStatus::Complete)
                .map(|m| json!({"id": Catalog::api_name(m, &models), "object": "model", "created": 0, "owned_by": "cake"}))
                .collect();
            Json(json!({"object": "list", "data": data})).into_response()
        }
        Ok(Err(e)) => ApiError::Server(format!("{e:#}")).into_response(),
        Err(e) => ApiError::Server(e.to_string()).into_response(),
    }
}

/// A message's `content`: a string, or a list of parts of which the text ones count.
#[derive(Deserialize)]
#[serde(untagged)]
enum Content {
    Text(String),
    Parts(Vec<Value>),
}

#[derive(Deserialize)]
struct RequestMessage {
    role: String,
    /// Absent or null on an assistant turn that only called tools.
    #[serde(default)]
    content: Option<Content>,
    /// An earlier reply's reasoning, as this route gave it.
    reasoning_content: Option<String>,
    tool_calls: Option<Vec<RequestToolCall>>,
    tool_call_id: Option<String>,
}

/// A call an earlier reply made, as this route gave it (arguments as a JSON string).
#[derive(Deserialize)]
struct RequestToolCall {
    id: String,
    function: RequestFunction,
}

#[derive(Deserialize)]
struct RequestFunction {
    name: String,
    arguments: String,
}

impl RequestToolCall {
    fn into_message_call(self) -> Result<MessageToolCall, ApiError> {
        let arguments: Value = serde_json::from_str(&self.function.arguments)
            .map_err(|e| ApiError::BadRequest(format!("the arguments of the call `{}` are not JSON: {e}", self.id)))?;
        Ok(MessageToolCall::new(self.id, ToolCall { name: self.function.name, arguments }))
    }
}

/// The sampling fields both text routes take.
#[derive(Deserialize)]
pub(super) struct SamplingFields {
    temperature: Option<f32>,
    top_p: Option<f32>,
    /// Not in OpenAI's API; accepted as llama.cpp's server does.
    top_k: Option<usize>,
    min_p: Option<f32>,
    repeat_penalty: Option<f32>,
    seed: Option<u64>,
}

impl SamplingFields {
    /// The engine's overrides; a request without a seed gets a random one.
    pub(super) fn overrides(self) -> SamplingOverrides {
        SamplingOverrides {
            temperature: self.temperature,
            top_k: self.top_k,
            top_p: self.top_p,
            min_p: self.min_p,
            repeat_penalty: self.repeat_penalty,
            seed: Some(self.seed.unwrap_or_else(rand::random)),
        }
    }
}

/// `stop`: one string or several.
#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum Stop {
    One(String),
    Many(Vec<String>),
}

impl Stop {
    pub(super) fn into_list(stop: Option<Self>) -> Vec<String> {
        match stop {
            None => Vec::new(),
            Some(Self::One(s)) => vec![s],
            Some(Self::Many(v)) => v,
        }
    }
}

#[derive(Deserialize)]
pub(super) struct StreamOptions {
    #[serde(default)]
    pub(super) include_usage: bool,
}

#[derive(Deserialize)]
struct CompletionRequest {
    model: String,
    messages: Vec<RequestMessage>,
    #[serde(default)]
    stream: bool,
    stream_options: Option<StreamOptions>,
    #[serde(flatten)]
    sampling: SamplingFields,
    max_tokens: Option<usize>,
    max_completion_tokens: Option<usize>,
    stop: Option<Stop>,
    /// `none` switches reasoning off where the model's template can.
    reasoning_effort: Option<String>,
    /// Variables for the chat template (llama.cpp's and vLLM's extension):
    /// `enable_thinking` only.
    chat_template_kwargs: Option<serde_json::Map<String, Value>>,
    /// The functions the model may call.
    tools: Option<Vec<Value>>,
    /// `auto` (the default), `none`, `required` or `{"type": "function", "function": {"name"}}`.
    tool_choice: Option<Value>,
    /// `false` keeps only the reply's first call.
    parallel_tool_calls: Option<bool>,
    /// Not served yet: refused when they ask for something.
    response_format: Option<Value>,
    /// Each token's log-probability, and `top_logprobs` alternatives.
    logprobs: Option<bool>,
    top_logprobs: Option<usize>,
    n: Option<usize>,
}

impl CompletionRequest {
    fn into_chat_args(self) -> Result<ChatArgs, ApiError> {
        let (tools, tool_choice) = match self.tool_choice.as_ref() {
            None | Some(Value::Null) => (self.tools, ToolChoice::Auto),
            Some(Value::String(choice)) if choice == "auto" => (self.tools, ToolChoice::Auto),
            Some(Value::String(choice)) if choice == "none" => (None, ToolChoice::Auto),
            Some(Value::String(choice)) if choice == "required" => (self.tools, ToolChoice::Required),
            Some(named) => match named["function"]["name"].as_str() {
                Some(name) if named["type"] == "function" => (self.tools, ToolChoice::Named(name.to_string())),
                _ => {
                    return Err(ApiError::BadRequest(
                        "`tool_choice` must be `auto`, `none`, `required` or {\"type\": \"function\", \
                         \"function\": {\"name\": …}}"
                            .into(),
                    ))
                }
            },
        };
        let format = self.response_format.as_ref().map(output_format).transpose()?.flatten();
        let logprobs = match (self.logprobs, self.top_logprobs) {
            (Some(true), top) => Some(top.unwrap_or(0)),
            (_, Some(_)) => return Err(ApiError::BadRequest("`top_logprobs` needs `logprobs: true`".into())),
            _ => None,
        };
        if self.n.is_some_and(|n| n != 1) {
            return Err(ApiError::BadRequest("`n` must be 1: Cake makes one choice per request".into()));
        }
        let enable_thinking = thinking_asked(self.reasoning_effort.as_deref(), self.chat_template_kwargs.as_ref())?;
        let messages = self
            .messages
            .into_iter()
            .enumerate()
            .map(|(index, m)| {
                let parts = match m.content {
                    None => Vec::new(),
                    Some(Content::Text(t)) => vec![MessagePart::Text(t)],
                    Some(Content::Parts(parts)) => parts_of_message(&parts, index + 1)?,
                };
                // OpenAI's newer "developer" role is a system message.
                let role = if m.role == "developer" { "system" } else { &m.role };
                let mut message = ChatMessage::with_parts(role, parts);
                message.reasoning_content = m.reasoning_content;
                message.tool_call_id = m.tool_call_id;
                if let Some(calls) = m.tool_calls {
                    let calls = calls.into_iter().map(RequestToolCall::into_message_call).collect::<Result<_, _>>()?;
                    message.tool_calls = Some(calls);
                }
                Ok(message)
            })
            .collect::<Result<_, ApiError>>()?;
        Ok(ChatArgs {
            model_id: self.model,
            messages,
            sampling: self.sampling.overrides(),
            max_tokens: self.max_completion_tokens.or(self.max_tokens).unwrap_or(512),
            stop: Stop::into_list(self.stop),
            context_length: None,
            drop_oldest_turns: false,
            enable_thinking,
            tools,
            format,
            tool_choice,
            logprobs,
        })
    }
}

/// OpenAI's `response_format`: `text` (free), `json_object`, or
/// `json_schema` with its `schema`.
fn output_format(asked: &Value) -> Result<Option<OutputFormat>, ApiError> {
    match asked["type"].as_str() {
        Some("text") => Ok(None),
        Some("json_object") => Ok(Some(OutputFormat::JsonObject)),
        Some("json_schema") => match asked["json_schema"].get("schema") {
            Some(schema) => Ok(Some(OutputFormat::JsonSchema(schema.clone()))),
            None => Err(ApiError::BadRequest("`response_format.json_schema.schema` is missing".into())),
        },
        _ => Err(ApiError::BadRequest("`response_format.type` must be `text`, `json_object` or `json_schema`".into())),
    }
}

/// Whether the request switched reasoning off (`Some(false)`) or on.
fn thinking_asked(
    effort: Option<&str>,
    template_kwargs: Option<&serde_json::Map<String, Value>>,
) -> Result<Option<bool>, ApiError> {
    let mut enable = match effort {
        None => None,
        Some("none") => Some(false),
        Some("minimal" | "low" | "medium" | "high") => Some(true),
        Some(other) => {
            let other = other.chars().take(40).collect::<String>();
            return Err(ApiError::BadRequest(format!(
                "`reasoning_effort` `{other}` is not one of none, minimal, low, medium, high"
            )));
        }
    };
    for (key, value) in template_kwargs.into_iter().flatten() {
        match (key.as_str(), value) {
            ("enable_thinking", Value::Bool(on)) => enable = Some(*on),
            ("enable_thinking", _) => {
                return Err(ApiError::BadRequest("`chat_template_kwargs.enable_thinking` must be true or false".into()))
            }
            (other, _) => {
                let other = other.chars().take(40).collect::<String>();
                return Err(ApiError::BadRequest(format!(
                    "`chat_template_kwargs.{other}` is not supported: only `enable_thinking` is passed to templates"
                )));
            }
        }
    }
    Ok(enable)
}

/// A message's content parts: text, and pictures as `data:` URLs (the
/// `n`th message's called "the image_url of message n" in errors); a part
/// of another kind (audio, a file) is refused, not dropped unseen.
fn parts_of_message(parts: &[Value], message: usize) -> Result<Vec<MessagePart>, ApiError> {
    let mut read = Vec::with_capacity(parts.len());
    for part in parts {
        let url = match &part["image_url"] {
            Value::String(url) => Some(url.as_str()),
            object => object["url"].as_str(),
        };
        match (part["type"].as_str(), part["text"].as_str(), url) {
            (Some("text"), Some(piece), _) => read.push(MessagePart::Text(piece.to_string())),
            (Some("image_url"), _, Some(url)) => {
                let name = format!("the image_url of message {message}");
                read.push(MessagePart::Picture(picture_of_url(&name, url)?));
            }
            (kind, _, _) => {
                let kind = kind.unwrap_or("(no type)").chars().take(40).collect::<String>();
                return Err(ApiError::BadRequest(format!(
                    "a `{kind}` content part is not supported: Cake reads text and pictures (`image_url`)"
                )));
            }
        }
    }
    Ok(read)
}

pub(super) fn openai_finish_reason(ours: FinishReason, tool_calls: &[ToolCall]) -> &'static str {
    match ours {
        FinishReason::MaxTokens | FinishReason::ContextFull => "length",
        _ if !tool_calls.is_empty() => "tool_calls",
        _ => "stop",
    }
}

/// Calls as this route gives them, arguments as JSON strings; `index`es
/// them for a stream's delta.
fn openai_tool_calls(calls: &[ToolCall], indexed: bool) -> Value {
    let listed = calls.iter().enumerate().map(|(index, call)| {
        let mut item = json!({
            "id": new_call_id(), "type": "function",
            "function": {"name": call.name, "arguments": call.arguments.to_string()},
        });
        if indexed {
            item["index"] = json!(index);
        }
        item
    });
    Value::Array(listed.collect())
}

/// A choice's `logprobs`: `{"content": [...]}`, or null when none were asked.
fn logprobs_of(entries: &[LogprobEntry]) -> Value {
    if entries.is_empty() {
        return Value::Null;
    }
    json!({"content": entries, "refusal": null})
}

pub(super) fn usage(stats: &ReplyStats) -> Value {
    let (prompt, completion, cached) = (stats.prompt_tokens, stats.completion_tokens, stats.cached_prompt_tokens);
    json!({
        "prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached},
    })
}

pub async fn chat_completions(State(app): State<Arc<App>>, body: Bytes) -> Result<Response, ApiError> {
    let request: CompletionRequest = serde_json::from_value(parse_body(&body)?)
        .map_err(|e| ApiError::BadRequest(format!("invalid chat completion request: {e}")))?;
    let stream = request.stream;
    let include_usage = request.stream_options.as_ref().is_some_and(|o| o.include_usage);
    let first_call_only = request.parallel_tool_calls == Some(false);
    let keep_calls = move |mut calls: Vec<ToolCall>| {
        if first_call_only {
            calls.truncate(1);
        }
        calls
    };
    let args = off_the_async_threads(move || request.into_chat_args()).await?;
    let model_id = args.model_id.clone();
    let reply = Reply::start(app, move |app| app.chat_job(args)).await?;

    let id = format!("chatcmpl-{:016x}", rand::random::<u64>());
    let created = chrono::Utc::now().timestamp();
    if !stream {
        let whole = reply.collect().await?;
        let calls = keep_calls(whole.tool_calls);
        let content = if whole.answer.is_empty() && !calls.is_empty() { Value::Null } else { json!(whole.answer) };
        let mut message = json!({"role": "assistant", "content": content});
        if !whole.reasoning.is_empty() {
            message["reasoning_content"] = json!(whole.reasoning);
        }
        if !calls.is_empty() {
            message["tool_calls"] = openai_tool_calls(&calls, false);
        }
        return Ok(Json(json!({
            "id": id, "object": "chat.completion", "created": created, "model": model_id,
            "choices": [{
                "index": 0,
                "message": message,
                "logprobs": logprobs_of(&whole.logprobs),
                "finish_reason": openai_finish_reason(whole.stats.finish_reason, &calls),
            }],
            "usage": usage(&whole.stats),
        }))
        .into_response());
    }

    let chunk = move |delta: Value, finish: Value| {
        json!({"id": id, "object": "chat.completion.chunk", "created": created, "model": model_id,
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let first = chunk(json!({"role": "assistant", "content": ""}), Value::Null);
    let data = |value: Value| Event::default().data(value.to_string());
    let events = reply.into_stream().map(move |event| -> Vec<Event> {
        match event {
            ReplyEvent::Text(text) => vec![data(chunk(json!({"content": text}), Value::Null))],
            ReplyEvent::Reasoning(text) => vec![data(chunk(json!({"reasoning_content": text}), Value::Null))],
            // Clients skip comment lines; people watching the stream see why it paused.
            ReplyEvent::Notice(message) => vec![Event::default().comment(format!("notice: {message}"))],
            ReplyEvent::Done { stats, tool_calls, logprobs } => {
                let calls = keep_calls(tool_calls);
                let mut out = Vec::new();
                if !calls.is_empty() {
                    out.push(data(chunk(json!({"tool_calls": openai_tool_calls(&calls, true)}), Value::Null)));
                }
                let mut finish = chunk(json!({}), json!(openai_finish_reason(stats.finish_reason, &calls)));
                // The tokens' log-probabilities come whole with the last chunk.
                finish["choices"][0]["logprobs"] = logprobs_of(&logprobs);
                out.push(data(finish));
                if include_usage {
                    let mut last = chunk(json!({}), Value::Null);
                    last["choices"] = json!([]);
                    last["usage"] = usage(&stats);
                    out.push(data(last));
                }
                out.push(Event::default().data("[DONE]"));
                out
            }
            // A failure after the 200 status: OpenAI's error object (the
            // SDKs raise it), then an end a plain reader recognizes too.
            ReplyEvent::Failed(error) => {
                vec![data(error.body()), data(chunk(json!({}), json!("error"))), Event::default().data("[DONE]")]
            }
        }
    });
    let lines =
        futures_util::StreamExt::flat_map(tokio_stream::once(vec![data(first)]).chain(events), tokio_stream::iter)
            .map(Ok::<_, Infallible>);
    Ok(Sse::new(lines).into_response())
}
