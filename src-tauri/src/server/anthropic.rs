//! Anthropic's Messages API, `POST /v1/messages`, so Anthropic's SDKs and
//! the tools built on them can use Cake: `system`, text turns, `tools` with
//! `tool_use`/`tool_result` blocks, `tool_choice`, `thinking` (the model's
//! reasoning as `thinking` blocks), `stop_sequences`, and streaming as
//! Anthropic streams (`message_start`, `content_block_*`, `message_delta`,
//! `message_stop`). Errors use Anthropic's `{"type": "error", "error":
//! {...}}` shape. Images are refused with a 400 (the models read text).

use super::parse_body;
use super::pictures::{off_the_async_threads, picture_of_base64};
use super::replies::{new_call_id, Reply, ReplyEvent, WholeReply};
use crate::app::error::ApiError;
use crate::app::events::ReplyStats;
use crate::app::request::ChatArgs;
use crate::app::App;
use crate::text::chat_template::{ChatMessage, MessagePart, MessageToolCall};
use crate::text::generation::FinishReason;
use crate::text::pictures::AttachedPicture;
use crate::text::sampling::SamplingOverrides;
use crate::text::tool_calls::{ToolCall, ToolChoice};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use std::convert::Infallible;
use std::sync::Arc;
use tokio_stream::StreamExt;

#[derive(Deserialize)]
#[serde(untagged)]
enum Content {
    Text(String),
    Blocks(Vec<Value>),
}

#[derive(Deserialize)]
struct RequestMessage {
    role: String,
    content: Content,
}

#[derive(Deserialize)]
struct MessagesRequest {
    model: String,
    messages: Vec<RequestMessage>,
    /// Anthropic requires it.
    max_tokens: Option<usize>,
    system: Option<Content>,
    #[serde(default)]
    stream: bool,
    temperature: Option<f32>,
    top_p: Option<f32>,
    top_k: Option<usize>,
    stop_sequences: Option<Vec<String>>,
    tools: Option<Vec<Value>>,
    tool_choice: Option<Value>,
    thinking: Option<Value>,
}

/// Anthropic's error body for `error`.
fn error_response(error: &ApiError) -> Response {
    let kind = match error {
        ApiError::BadRequest(_) => "invalid_request_error",
        ApiError::NotFound(_) => "not_found_error",
        ApiError::Server(_) | ApiError::HubUnreachable(_) => "api_error",
        ApiError::Unavailable(_) => "overloaded_error",
    };
    let status = StatusCode::from_u16(error.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, Json(json!({"type": "error", "error": {"type": kind, "message": error.message()}}))).into_response()
}

/// The text of `content` (a string or text blocks); other blocks are refused.
fn plain_text(content: Content, what: &str) -> Result<String, ApiError> {
    match content {
        Content::Text(text) => Ok(text),
        Content::Blocks(blocks) => blocks
            .iter()
            .map(|block| match (block["type"].as_str(), block["text"].as_str()) {
                (Some("text"), Some(text)) => Ok(text.to_string()),
                _ => Err(ApiError::BadRequest(format!("{what} may hold only text blocks"))),
            })
            .collect(),
    }
}

/// A turn's blocks as the conversation's messages: a user turn's
/// `tool_result`s become `tool` messages before its text; an assistant
/// turn's `tool_use`s its calls, its `thinking` its reasoning.
fn turn_messages(message: RequestMessage, index: usize, into: &mut Vec<ChatMessage>) -> Result<(), ApiError> {
    let role = match message.role.as_str() {
        "user" | "assistant" => message.role.clone(),
        other => {
            let other = other.chars().take(40).collect::<String>();
            return Err(ApiError::BadRequest(format!("a message's role must be `user` or `assistant`, not `{other}`")));
        }
    };
    let blocks = match message.content {
        Content::Text(text) => {
            into.push(ChatMessage::new(&role, &text));
            return Ok(());
        }
        Content::Blocks(blocks) => blocks,
    };
    let (mut parts, mut calls, mut reasoning) = (Vec::new(), Vec::new(), None::<String>);
    for block in blocks {
        match (block["type"].as_str().unwrap_or(""), role.as_str()) {
            ("text", _) => parts.push(MessagePart::Text(block["text"].as_str().unwrap_or("").to_string())),
            ("image", "user") => {
                let name = format!("image {} of message {index}", parts.len() + 1);
                parts.push(MessagePart::Picture(picture_of_source(&name, &block["source"])?));
            }
            ("tool_use", "assistant") => {
                let (Some(id), Some(name)) = (block["id"].as_str(), block["name"].as_str()) else {
                    return Err(ApiError::BadRequest("a `tool_use` block needs its `id` and `name`".into()));
                };
                let call = ToolCall { name: name.to_string(), arguments: block["input"].clone() };
                calls.push(MessageToolCall::new(id.to_string(), call));
            }
            ("thinking", "assistant") => {
                reasoning.get_or_insert_default().push_str(block["thinking"].as_str().unwrap_or(""));
            }
            // Reasoning Cake cannot read back; the template does without it.
            ("redacted_thinking", "assistant") => {}
            ("tool_result", "user") => {
                let id = block["tool_use_id"].as_str().unwrap_or_default();
                let result = match block.get("content") {
                    None | Some(Value::Null) => String::new(),
                    Some(content) => {
                        let content = serde_json::from_value(content.clone())
                            .map_err(|_| ApiError::BadRequest("a `tool_result`'s content must be text".into()))?;
                        plain_text(content, "a `tool_result`'s content")?
                    }
                };
                let mut answer = ChatMessage::new("tool", &result);
                answer.tool_call_id = Some(id.to_string());
                into.push(answer);
            }
            ("document", _) => {
                return Err(ApiError::BadRequest(
                    "a `document` block is not supported: Cake reads text and pictures (`image` blocks)".into(),
                ))
            }
            (kind, role) => {
                let kind = kind.chars().take(40).collect::<String>();
                return Err(ApiError::BadRequest(format!("a `{kind}` block cannot be in a `{role}` turn")));
            }
        }
    }
    if role == "assistant" || !parts.is_empty() {
        let mut turn = ChatMessage::with_parts(&role, parts);
        turn.reasoning_content = reasoning;
        turn.tool_calls = (!calls.is_empty()).then_some(calls);
        into.push(turn);
    }
    Ok(())
}

/// The picture of an `image` block's `source`: `{"type": "base64",
/// "media_type", "data"}` (Cake fetches no `url`).
fn picture_of_source(name: &str, source: &Value) -> Result<AttachedPicture, ApiError> {
    match (source["type"].as_str(), source["data"].as_str()) {
        (Some("base64"), Some(data)) => picture_of_base64(name, data),
        (Some("url"), _) => Err(ApiError::BadRequest(format!(
            "{name}: Cake does not fetch pictures from the web; send the picture itself as a `base64` source"
        ))),
        _ => Err(ApiError::BadRequest(format!("{name}: the source must be {{\"type\": \"base64\", \"data\": …}}"))),
    }
}

/// Anthropic's tools (`name`, `description`, `input_schema`) in OpenAI's shape.
fn openai_tools(tools: Vec<Value>) -> Result<Vec<Value>, ApiError> {
    tools
        .into_iter()
        .map(|tool| match tool["name"].as_str() {
            Some(name) => Ok(json!({"type": "function", "function": {
                "name": name,
                "description": tool.get("description").cloned().unwrap_or(Value::Null),
                "parameters": tool.get("input_schema").cloned().unwrap_or(json!({"type": "object"})),
            }})),
            None => Err(ApiError::BadRequest("every tool needs a `name`".into())),
        })
        .collect()
}

impl MessagesRequest {
    fn into_chat_args(self) -> Result<ChatArgs, ApiError> {
        let max_tokens = self.max_tokens.ok_or_else(|| ApiError::BadRequest("`max_tokens` is required".into()))?;
        let mut messages = Vec::with_capacity(self.messages.len() + 1);
        if let Some(system) = self.system {
            messages.push(ChatMessage::new("system", &plain_text(system, "`system`")?));
        }
        for (index, message) in self.messages.into_iter().enumerate() {
            turn_messages(message, index + 1, &mut messages)?;
        }
        let enable_thinking = match self.thinking.as_ref().map(|t| t["type"].as_str()) {
            None => None,
            Some(Some("enabled")) => Some(true),
            Some(Some("disabled")) => Some(false),
            Some(_) => return Err(ApiError::BadRequest("`thinking.type` must be `enabled` or `disabled`".into())),
        };
        let tools = self.tools.map(openai_tools).transpose()?;
        let (tools, tool_choice) = match self.tool_choice.as_ref().map(|c| (c["type"].as_str(), c["name"].as_str())) {
            None | Some((Some("auto"), _)) => (tools, ToolChoice::Auto),
            Some((Some("none"), _)) => (None, ToolChoice::Auto),
            Some((Some("any"), _)) => (tools, ToolChoice::Required),
            Some((Some("tool"), Some(name))) => (tools, ToolChoice::Named(name.to_string())),
            Some(_) => {
                return Err(ApiError::BadRequest(
                    "`tool_choice.type` must be `auto`, `any`, `tool` (with a `name`) or `none`".into(),
                ))
            }
        };
        Ok(ChatArgs {
            model_id: self.model,
            messages,
            sampling: SamplingOverrides {
                temperature: self.temperature,
                top_k: self.top_k,
                top_p: self.top_p,
                min_p: None,
                repeat_penalty: None,
                seed: Some(rand::random()),
            },
            max_tokens,
            stop: self.stop_sequences.unwrap_or_default(),
            context_length: None,
            drop_oldest_turns: false,
            enable_thinking,
            tools,
            format: None,
            tool_choice,
            logprobs: None,
        })
    }
}

fn stop_reason(stats: &ReplyStats, calls: &[ToolCall]) -> &'static str {
    match stats.finish_reason {
        FinishReason::MaxTokens | FinishReason::ContextFull => "max_tokens",
        _ if !calls.is_empty() => "tool_use",
        FinishReason::StopString => "stop_sequence",
        _ => "end_turn",
    }
}

/// A call as a `tool_use` block (its id of nine letters and digits, as
/// Mistral's templates need when it comes back with the result).
fn tool_use_block(call: &ToolCall) -> Value {
    json!({"type": "tool_use", "id": new_call_id(), "name": call.name, "input": call.arguments})
}

fn usage(stats: &ReplyStats) -> Value {
    json!({"input_tokens": stats.prompt_tokens, "output_tokens": stats.completion_tokens,
           "cache_read_input_tokens": stats.cached_prompt_tokens})
}

fn whole_message(id: String, model: String, whole: WholeReply) -> Value {
    let mut content = Vec::new();
    if !whole.reasoning.is_empty() {
        content.push(json!({"type": "thinking", "thinking": whole.reasoning, "signature": ""}));
    }
    if !whole.answer.is_empty() {
        content.push(json!({"type": "text", "text": whole.answer}));
    }
    content.extend(whole.tool_calls.iter().map(tool_use_block));
    json!({
        "id": id, "type": "message", "role": "assistant", "model": model, "content": content,
        "stop_reason": stop_reason(&whole.stats, &whole.tool_calls), "stop_sequence": null,
        "usage": usage(&whole.stats),
    })
}

/// The content block a stream has open.
#[derive(Clone, Copy, PartialEq, Eq)]
enum OpenBlock {
    None,
    Thinking,
    Text,
}

/// Turns a reply's events into Anthropic's stream events.
struct EventWriter {
    open: OpenBlock,
    /// The index of the open block, or of the next one.
    index: usize,
}

fn sse(name: &str, data: Value) -> Event {
    Event::default().event(name).data(data.to_string())
}

impl EventWriter {
    /// Closes the open block, if any.
    fn close(&mut self, out: &mut Vec<Event>) {
        if self.open != OpenBlock::None {
            out.push(sse("content_block_stop", json!({"type": "content_block_stop", "index": self.index})));
            self.open = OpenBlock::None;
            self.index += 1;
        }
    }

    /// Opens a block of `kind` unless one is open.
    fn open(&mut self, kind: OpenBlock, out: &mut Vec<Event>) {
        if self.open == kind {
            return;
        }
        self.close(out);
        let block = match kind {
            OpenBlock::Thinking => json!({"type": "thinking", "thinking": "", "signature": ""}),
            _ => json!({"type": "text", "text": ""}),
        };
        out.push(sse(
            "content_block_start",
            json!({"type": "content_block_start", "index": self.index, "content_block": block}),
        ));
        self.open = kind;
    }

    fn write(&mut self, event: ReplyEvent) -> Vec<Event> {
        let mut out = Vec::new();
        let delta = |index: usize, delta: Value| {
            sse("content_block_delta", json!({"type": "content_block_delta", "index": index, "delta": delta}))
        };
        match event {
            ReplyEvent::Reasoning(text) => {
                self.open(OpenBlock::Thinking, &mut out);
                out.push(delta(self.index, json!({"type": "thinking_delta", "thinking": text})));
            }
            ReplyEvent::Text(text) => {
                self.open(OpenBlock::Text, &mut out);
                out.push(delta(self.index, json!({"type": "text_delta", "text": text})));
            }
            ReplyEvent::Notice(message) => out.push(Event::default().comment(format!("notice: {message}"))),
            ReplyEvent::Done { stats, tool_calls, .. } => {
                self.close(&mut out);
                for call in &tool_calls {
                    let mut block = tool_use_block(call);
                    block["input"] = json!({});
                    out.push(sse(
                        "content_block_start",
                        json!({"type": "content_block_start", "index": self.index, "content_block": block}),
                    ));
                    let arguments = call.arguments.to_string();
                    out.push(delta(self.index, json!({"type": "input_json_delta", "partial_json": arguments})));
                    out.push(sse("content_block_stop", json!({"type": "content_block_stop", "index": self.index})));
                    self.index += 1;
                }
                let end = json!({"stop_reason": stop_reason(&stats, &tool_calls), "stop_sequence": null});
                out.push(sse("message_delta", json!({"type": "message_delta", "delta": end, "usage": usage(&stats)})));
                out.push(sse("message_stop", json!({"type": "message_stop"})));
            }
            ReplyEvent::Failed(error) => {
                self.close(&mut out);
                let body = json!({"type": "error", "error": {"type": "api_error", "message": error.message()}});
                out.push(sse("error", body));
            }
        }
        out
    }
}

pub async fn messages(State(app): State<Arc<App>>, body: Bytes) -> Response {
    match start_messages(app, body).await {
        Ok(response) => response,
        Err(error) => error_response(&error),
    }
}

async fn start_messages(app: Arc<App>, body: Bytes) -> Result<Response, ApiError> {
    let request: MessagesRequest = serde_json::from_value(parse_body(&body)?)
        .map_err(|e| ApiError::BadRequest(format!("invalid messages request: {e}")))?;
    let stream = request.stream;
    let args = off_the_async_threads(move || request.into_chat_args()).await?;
    let model = args.model_id.clone();
    let reply = Reply::start(app, move |app| app.chat_job(args)).await?;
    let id = format!("msg_{:024x}", rand::random::<u128>() >> 32);
    if !stream {
        return Ok(Json(whole_message(id, model, reply.collect().await?)).into_response());
    }
    let start = json!({"type": "message_start", "message": {
        "id": id, "type": "message", "role": "assistant", "model": model, "content": [],
        "stop_reason": null, "stop_sequence": null, "usage": {"input_tokens": 0, "output_tokens": 0},
    }});
    let mut writer = EventWriter { open: OpenBlock::None, index: 0 };
    let events = reply.into_stream().map(move |event| writer.write(event));
    let lines = futures_util::StreamExt::flat_map(
        tokio_stream::once(vec![sse("message_start", start)]).chain(events),
        tokio_stream::iter,
    )
    .map(Ok::<_, Infallible>);
    Ok(Sse::new(lines).into_response())
}
