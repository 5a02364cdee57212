//! OpenAI's Responses API, `POST /v1/responses` (stateless): `input` as a
//! text or as items (messages, earlier `function_call`s and their
//! `function_call_output`s), `instructions`, function `tools` with
//! `tool_choice`, `text.format` (JSON object or schema, by constrained
//! decoding), `reasoning.effort` (`none` switches reasoning off where the
//! template can), `truncation: "auto"` (the oldest turns left out when the
//! conversation does not fit, counted in the response), streamed as
//! `response.*` events or whole. Nothing is stored: `previous_response_id`
//! and `store: true` are refused with a 400, as are non-text inputs.

use super::openai::usage as chat_usage;
use super::parse_body;
use super::replies::{new_call_id, Reply, ReplyEvent, WholeReply};
use crate::app::error::ApiError;
use crate::app::events::ReplyStats;
use crate::app::request::ChatArgs;
use crate::app::App;
use crate::text::chat_template::{ChatMessage, MessageToolCall};
use crate::text::constraint::OutputFormat;
use crate::text::generation::FinishReason;
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

#[derive(Deserialize)]
struct ResponsesRequest {
    model: String,
    input: Value,
    instructions: Option<String>,
    max_output_tokens: Option<usize>,
    temperature: Option<f32>,
    top_p: Option<f32>,
    #[serde(default)]
    stream: bool,
    tools: Option<Vec<Value>>,
    tool_choice: Option<Value>,
    parallel_tool_calls: Option<bool>,
    text: Option<Value>,
    reasoning: Option<Value>,
    truncation: Option<String>,
    store: Option<bool>,
    previous_response_id: Option<String>,
}

/// The text of a message item's `content`: a string or `input_text`/`output_text` parts.
fn content_text(content: &Value) -> Result<String, ApiError> {
    match content {
        Value::String(text) => Ok(text.clone()),
        Value::Array(parts) => parts
            .iter()
            .map(|part| match (part["type"].as_str(), part["text"].as_str()) {
                (Some("input_text" | "output_text" | "text"), Some(text)) => Ok(text.to_string()),
                (kind, _) => {
                    let kind = kind.unwrap_or("(no type)").chars().take(40).collect::<String>();
                    Err(ApiError::BadRequest(format!(
                        "an `{kind}` input is not supported: the models Cake serves here read text only"
                    )))
                }
            })
            .collect(),
        _ => Err(ApiError::BadRequest("a message's `content` must be a text or a list of text parts".into())),
    }
}

/// The conversation `input` holds.
fn input_messages(input: &Value, into: &mut Vec<ChatMessage>) -> Result<(), ApiError> {
    let items = match input {
        Value::String(text) => {
            into.push(ChatMessage::new("user", text));
            return Ok(());
        }
        Value::Array(items) => items,
        _ => return Err(ApiError::BadRequest("`input` must be a text or a list of items".into())),
    };
    for item in items {
        match item["type"].as_str().unwrap_or("message") {
            "message" => {
                let role = match item["role"].as_str() {
                    Some("developer") => "system",
                    Some(role @ ("system" | "user" | "assistant")) => role,
                    _ => {
                        return Err(ApiError::BadRequest(
                            "a message's `role` must be user, assistant, system or developer".into(),
                        ))
                    }
                };
                into.push(ChatMessage::new(role, &content_text(&item["content"])?));
            }
            "function_call" => {
                let (Some(id), Some(name), Some(arguments)) =
                    (item["call_id"].as_str(), item["name"].as_str(), item["arguments"].as_str())
                else {
                    return Err(ApiError::BadRequest(
                        "a `function_call` needs `call_id`, `name` and `arguments`".into(),
                    ));
                };
                let arguments: Value = serde_json::from_str(arguments)
                    .map_err(|e| ApiError::BadRequest(format!("the arguments of the call `{id}` are not JSON: {e}")))?;
                let call = MessageToolCall::new(id.to_string(), ToolCall { name: name.to_string(), arguments });
                // Consecutive calls are one assistant turn.
                match into.last_mut() {
                    Some(turn) if turn.role == "assistant" && turn.tool_calls.is_some() => {
                        turn.tool_calls.get_or_insert_default().push(call)
                    }
                    _ => {
                        let mut turn = ChatMessage::new("assistant", "");
                        turn.tool_calls = Some(vec![call]);
                        into.push(turn);
                    }
                }
            }
            "function_call_output" => {
                let output = match &item["output"] {
                    Value::String(text) => text.clone(),
                    other => content_text(other)?,
                };
                let mut answer = ChatMessage::new("tool", &output);
                answer.tool_call_id = item["call_id"].as_str().map(str::to_string);
                into.push(answer);
            }
            // Earlier reasoning goes back to the template with its turn.
            "reasoning" => {}
            other => {
                let other = other.chars().take(40).collect::<String>();
                return Err(ApiError::BadRequest(format!("an `{other}` input item is not supported")));
            }
        }
    }
    Ok(())
}

impl ResponsesRequest {
    fn into_chat_args(self) -> Result<ChatArgs, ApiError> {
        if self.previous_response_id.is_some() || self.store == Some(true) {
            return Err(ApiError::BadRequest(
                "Cake stores no responses: send the whole conversation in `input` (no `previous_response_id`, \
                 `store` false)"
                    .into(),
            ));
        }
        let mut messages = Vec::new();
        if let Some(instructions) = &self.instructions {
            messages.push(ChatMessage::new("system", instructions));
        }
        input_messages(&self.input, &mut messages)?;
        let tools = self
            .tools
            .map(|tools| {
                tools
                    .into_iter()
                    .map(|tool| match (tool["type"].as_str(), tool["name"].as_str()) {
                        (Some("function"), Some(name)) => Ok(json!({"type": "function", "function": {
                            "name": name,
                            "description": tool.get("description").cloned().unwrap_or(Value::Null),
                            "parameters": tool.get("parameters").cloned().unwrap_or(json!({"type": "object"})),
                        }})),
                        _ => Err(ApiError::BadRequest("only `function` tools with a `name` are supported".into())),
                    })
                    .collect::<Result<Vec<_>, _>>()
            })
            .transpose()?;
        let (tools, tool_choice) = match self.tool_choice.as_ref() {
            None | Some(Value::Null) => (tools, ToolChoice::Auto),
            Some(Value::String(choice)) if choice == "auto" => (tools, ToolChoice::Auto),
            Some(Value::String(choice)) if choice == "none" => (None, ToolChoice::Auto),
            Some(Value::String(choice)) if choice == "required" => (tools, ToolChoice::Required),
            Some(named) if named["type"] == "function" && named["name"].is_string() => {
                (tools, ToolChoice::Named(named["name"].as_str().unwrap_or_default().to_string()))
            }
            Some(_) => {
                return Err(ApiError::BadRequest(
                    "`tool_choice` must be `auto`, `none`, `required` or {\"type\": \"function\", \"name\": …}".into(),
                ))
            }
        };
        let format = match self.text.as_ref().map(|text| &text["format"]) {
            None | Some(Value::Null) => None,
            Some(format) => match format["type"].as_str() {
                Some("text") => None,
                Some("json_object") => Some(OutputFormat::JsonObject),
                Some("json_schema") => match format.get("schema") {
                    Some(schema) => Some(OutputFormat::JsonSchema(schema.clone())),
                    None => return Err(ApiError::BadRequest("`text.format.schema` is missing".into())),
                },
                _ => {
                    return Err(ApiError::BadRequest(
                        "`text.format.type` must be `text`, `json_object` or `json_schema`".into(),
                    ))
                }
            },
        };
        let enable_thinking = match self.reasoning.as_ref().and_then(|r| r["effort"].as_str()) {
            None => None,
            Some("none") => Some(false),
            Some(_) => Some(true),
        };
        let drop_oldest_turns = match self.truncation.as_deref() {
            None | Some("disabled") => false,
            Some("auto") => true,
            Some(_) => return Err(ApiError::BadRequest("`truncation` must be `auto` or `disabled`".into())),
        };
        Ok(ChatArgs {
            model_id: self.model,
            messages,
            sampling: SamplingOverrides {
                temperature: self.temperature,
                top_p: self.top_p,
                seed: Some(rand::random()),
                ..Default::default()
            },
            max_tokens: self.max_output_tokens.unwrap_or(4096),
            stop: Vec::new(),
            context_length: None,
            drop_oldest_turns,
            enable_thinking,
            tools,
            format,
            tool_choice,
            logprobs: None,
        })
    }
}

fn item_id(prefix: &str) -> String {
    format!("{prefix}_{:016x}", rand::random::<u64>())
}

fn usage(stats: &ReplyStats) -> Value {
    let chat = chat_usage(stats);
    json!({
        "input_tokens": chat["prompt_tokens"], "output_tokens": chat["completion_tokens"],
        "total_tokens": chat["total_tokens"], "input_tokens_details": {"cached_tokens": stats.cached_prompt_tokens},
        "output_tokens_details": {"reasoning_tokens": 0},
    })
}

/// The output items of a finished reply: reasoning, the message, the calls.
fn output_items(whole: &WholeReply, ids: &ItemIds, calls: &[ToolCall]) -> Vec<Value> {
    let mut items = Vec::new();
    if !whole.reasoning.is_empty() {
        items.push(reasoning_item(&ids.reasoning, &whole.reasoning));
    }
    if !whole.answer.is_empty() || calls.is_empty() {
        items.push(message_item(&ids.message, &whole.answer, "completed"));
    }
    items.extend(calls.iter().map(function_call_item));
    items
}

fn reasoning_item(id: &str, text: &str) -> Value {
    json!({"type": "reasoning", "id": id, "summary": [], "content": [{"type": "reasoning_text", "text": text}]})
}

fn message_item(id: &str, text: &str, status: &str) -> Value {
    json!({"type": "message", "id": id, "status": status, "role": "assistant",
           "content": [{"type": "output_text", "text": text, "annotations": []}]})
}

fn function_call_item(call: &ToolCall) -> Value {
    json!({"type": "function_call", "id": item_id("fc"), "call_id": new_call_id(), "name": call.name,
           "arguments": call.arguments.to_string(), "status": "completed"})
}

/// The ids a response's items get.
struct ItemIds {
    reasoning: String,
    message: String,
}

/// The response object around `output`.
fn response_object(id: &str, model: &str, created: i64, end: Option<(&ReplyStats, Vec<Value>)>) -> Value {
    let (status, incomplete, output, usage_value, truncated) = match end {
        None => ("in_progress", Value::Null, Vec::new(), Value::Null, 0),
        Some((stats, output)) => {
            let cut = matches!(stats.finish_reason, FinishReason::MaxTokens | FinishReason::ContextFull);
            let incomplete = if cut { json!({"reason": "max_output_tokens"}) } else { Value::Null };
            (if cut { "incomplete" } else { "completed" }, incomplete, output, usage(stats), stats.dropped_messages)
        }
    };
    let mut response = json!({
        "id": id, "object": "response", "created_at": created, "status": status, "model": model,
        "output": output, "incomplete_details": incomplete, "error": null, "usage": usage_value,
        "parallel_tool_calls": true, "tool_choice": "auto", "tools": [],
    });
    if truncated > 0 {
        // Said in the response: what `truncation: "auto"` left out.
        response["truncated_input_messages"] = json!(truncated);
    }
    response
}

pub async fn responses(State(app): State<Arc<App>>, body: Bytes) -> Result<Response, ApiError> {
    let request: ResponsesRequest = serde_json::from_value(parse_body(&body)?)
        .map_err(|e| ApiError::BadRequest(format!("invalid responses request: {e}")))?;
    let stream = request.stream;
    let first_call_only = request.parallel_tool_calls == Some(false);
    let args = request.into_chat_args()?;
    let model = args.model_id.clone();
    let reply = Reply::start(app, move |app| app.chat_job(args)).await?;
    let id = item_id("resp");
    let created = chrono::Utc::now().timestamp();
    let ids = ItemIds { reasoning: item_id("rs"), message: item_id("msg") };
    let keep_calls = move |mut calls: Vec<ToolCall>| {
        if first_call_only {
            calls.truncate(1);
        }
        calls
    };
    if !stream {
        let whole = reply.collect().await?;
        let calls = keep_calls(whole.tool_calls.clone());
        let output = output_items(&whole, &ids, &calls);
        return Ok(Json(response_object(&id, &model, created, Some((&whole.stats, output)))).into_response());
    }
    let mut writer = StreamWriter {
        id,
        model,
        created,
        ids,
        sequence: 0,
        open: Open::None,
        reasoning: String::new(),
        answer: String::new(),
        output: Vec::new(),
    };
    let start = writer.start();
    let events = reply.into_stream().map(move |event| match event {
        ReplyEvent::Done { stats, tool_calls, .. } => writer.finish(&stats, keep_calls(tool_calls)),
        other => writer.write(other),
    });
    let lines = futures_util::StreamExt::flat_map(tokio_stream::once(start).chain(events), tokio_stream::iter)
        .map(Ok::<_, Infallible>);
    Ok(Sse::new(lines).into_response())
}

/// The output item a stream has open.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Open {
    None,
    Reasoning,
    Message,
}

/// Turns a reply's events into the Responses API's stream events.
struct StreamWriter {
    id: String,
    model: String,
    created: i64,
    ids: ItemIds,
    sequence: u64,
    open: Open,
    reasoning: String,
    answer: String,
    /// The finished output items, in order.
    output: Vec<Value>,
}

impl StreamWriter {
    fn event(&mut self, kind: &str, mut data: Value) -> Event {
        data["type"] = json!(kind);
        data["sequence_number"] = json!(self.sequence);
        self.sequence += 1;
        Event::default().event(kind).data(data.to_string())
    }

    fn start(&mut self) -> Vec<Event> {
        let response = response_object(&self.id, &self.model, self.created, None);
        vec![
            self.event("response.created", json!({"response": response})),
            self.event("response.in_progress", json!({"response": response})),
        ]
    }

    /// Closes the open item, if any.
    fn close(&mut self, out: &mut Vec<Event>) {
        let index = self.output.len();
        match self.open {
            Open::None => return,
            Open::Reasoning => {
                let (id, text) = (self.ids.reasoning.clone(), self.reasoning.clone());
                out.push(self.event(
                    "response.reasoning_text.done",
                    json!({"item_id": id, "output_index": index, "content_index": 0, "text": text}),
                ));
                let item = reasoning_item(&id, &text);
                out.push(self.event("response.output_item.done", json!({"output_index": index, "item": item})));
                self.output.push(item);
            }
            Open::Message => {
                let (id, text) = (self.ids.message.clone(), self.answer.clone());
                let part = json!({"type": "output_text", "text": text, "annotations": []});
                out.push(self.event(
                    "response.output_text.done",
                    json!({"item_id": id, "output_index": index, "content_index": 0, "text": text}),
                ));
                out.push(self.event(
                    "response.content_part.done",
                    json!({"item_id": id, "output_index": index, "content_index": 0, "part": part}),
                ));
                let item = message_item(&id, &text, "completed");
                out.push(self.event("response.output_item.done", json!({"output_index": index, "item": item})));
                self.output.push(item);
            }
        }
        self.open = Open::None;
    }

    /// Opens an item of `kind` unless one is open.
    fn open(&mut self, kind: Open, out: &mut Vec<Event>) {
        if self.open == kind {
            return;
        }
        self.close(out);
        let index = self.output.len();
        match kind {
            Open::Reasoning => {
                let item = json!({"type": "reasoning", "id": self.ids.reasoning, "summary": [], "content": []});
                out.push(self.event("response.output_item.added", json!({"output_index": index, "item": item})));
            }
            _ => {
                let item = message_item(&self.ids.message, "", "in_progress");
                let mut empty = item.clone();
                empty["content"] = json!([]);
                out.push(self.event("response.output_item.added", json!({"output_index": index, "item": empty})));
                let part = json!({"type": "output_text", "text": "", "annotations": []});
                let id = self.ids.message.clone();
                out.push(self.event(
                    "response.content_part.added",
                    json!({"item_id": id, "output_index": index, "content_index": 0, "part": part}),
                ));
            }
        }
        self.open = kind;
    }

    fn write(&mut self, event: ReplyEvent) -> Vec<Event> {
        let mut out = Vec::new();
        match event {
            ReplyEvent::Reasoning(text) => {
                self.open(Open::Reasoning, &mut out);
                let index = self.output.len();
                self.reasoning.push_str(&text);
                let id = self.ids.reasoning.clone();
                out.push(self.event(
                    "response.reasoning_text.delta",
                    json!({"item_id": id, "output_index": index, "content_index": 0, "delta": text}),
                ));
            }
            ReplyEvent::Text(text) => {
                self.open(Open::Message, &mut out);
                let index = self.output.len();
                self.answer.push_str(&text);
                let id = self.ids.message.clone();
                out.push(self.event(
                    "response.output_text.delta",
                    json!({"item_id": id, "output_index": index, "content_index": 0, "delta": text, "logprobs": []}),
                ));
            }
            ReplyEvent::Notice(message) => out.push(Event::default().comment(format!("notice: {message}"))),
            ReplyEvent::Failed(error) => {
                out.push(self.event("error", json!({"code": null, "message": error.message(), "param": null})));
            }
            ReplyEvent::Done { .. } => {}
        }
        out
    }

    fn finish(&mut self, stats: &ReplyStats, calls: Vec<ToolCall>) -> Vec<Event> {
        let mut out = Vec::new();
        if calls.is_empty() && self.output.is_empty() && self.open != Open::Message {
            self.open(Open::Message, &mut out); // an empty answer is still a message
        }
        self.close(&mut out);
        for call in &calls {
            let index = self.output.len();
            let item = function_call_item(call);
            let mut added = item.clone();
            added["arguments"] = json!("");
            added["status"] = json!("in_progress");
            out.push(self.event("response.output_item.added", json!({"output_index": index, "item": added})));
            let (id, arguments) = (item["id"].clone(), item["arguments"].clone());
            out.push(self.event(
                "response.function_call_arguments.delta",
                json!({"item_id": id, "output_index": index, "delta": arguments}),
            ));
            out.push(self.event(
                "response.function_call_arguments.done",
                json!({"item_id": id, "output_index": index, "arguments": arguments}),
            ));
            out.push(self.event("response.output_item.done", json!({"output_index": index, "item": item})));
            self.output.push(item);
        }
        let response = response_object(&self.id, &self.model, self.created, Some((stats, self.output.clone())));
        let kind = if response["status"] == "incomplete" { "response.incomplete" } else { "response.completed" };
        out.push(self.event(kind, json!({"response": response})));
        out
    }
}
