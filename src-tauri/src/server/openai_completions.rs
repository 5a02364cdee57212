//! OpenAI's legacy completions route, `POST /v1/completions`: the model
//! continues a prompt as it is (no chat template; special tokens spelled in
//! it are read as such, and the vocabulary's BOS is added), streamed or
//! not, with `echo` putting the prompt before the continuation and
//! `logprobs` giving each written token's. What it cannot honour (`suffix`,
//! `n` or `best_of` above 1, several prompts, prompts as token ids, the
//! prompt's log-probabilities) is a 400 naming it.

use super::openai::{openai_finish_reason, usage, SamplingFields, Stop, StreamOptions};
use super::replies::{Reply, ReplyEvent};
use super::{parse_body, refuse_if_used};
use crate::app::engine::Prompt;
use crate::app::error::ApiError;
use crate::app::request::ReplyArgs;
use crate::app::App;
use crate::text::logprobs::LogprobEntry;
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

/// OpenAI's default budget for a completion.
const DEFAULT_MAX_TOKENS: usize = 16;

#[derive(Deserialize)]
struct CompletionRequest {
    model: String,
    prompt: Value,
    #[serde(default)]
    stream: bool,
    stream_options: Option<StreamOptions>,
    #[serde(default)]
    echo: bool,
    #[serde(flatten)]
    sampling: SamplingFields,
    max_tokens: Option<usize>,
    stop: Option<Stop>,
    /// Each token's log-probability and this many alternatives.
    logprobs: Option<usize>,
    /// Not served: refused when they ask for something.
    suffix: Option<Value>,
    n: Option<usize>,
    best_of: Option<usize>,
}

impl CompletionRequest {
    /// The prompt's text: a string, or a list holding one.
    fn prompt_text(&self) -> Result<String, ApiError> {
        match &self.prompt {
            Value::String(text) => Ok(text.clone()),
            Value::Array(items) if items.len() == 1 && items[0].is_string() => {
                Ok(items[0].as_str().unwrap_or_default().to_string())
            }
            Value::Array(items) if items.iter().all(Value::is_string) => {
                Err(ApiError::BadRequest("`prompt` may hold one text: Cake makes one completion per request".into()))
            }
            _ => Err(ApiError::BadRequest("`prompt` must be a text (token ids are not supported)".into())),
        }
    }

    fn into_reply_args(self) -> Result<(ReplyArgs, String), ApiError> {
        if self.logprobs.is_some() && self.echo {
            return Err(ApiError::BadRequest(
                "`logprobs` with `echo` is not supported: the prompt's are not computed".into(),
            ));
        }
        refuse_if_used("suffix", &self.suffix, "fill-in-the-middle is not served")?;
        if self.n.is_some_and(|n| n != 1) || self.best_of.is_some_and(|n| n != 1) {
            return Err(ApiError::BadRequest(
                "`n` and `best_of` must be 1: Cake makes one completion per request".into(),
            ));
        }
        let prompt = self.prompt_text()?;
        let args = ReplyArgs {
            model_id: self.model,
            sampling: self.sampling.overrides(),
            max_tokens: self.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
            stop: Stop::into_list(self.stop),
            context_length: None,
            format: None,
            logprobs: self.logprobs,
        };
        Ok((args, prompt))
    }
}

/// The completions route's `logprobs`: parallel lists of the tokens, their
/// log-probabilities, their alternatives and where each starts in the text.
fn legacy_logprobs(entries: &[LogprobEntry]) -> Value {
    if entries.is_empty() {
        return Value::Null;
    }
    let mut offset = 0;
    let offsets: Vec<usize> = entries
        .iter()
        .map(|e| {
            let at = offset;
            offset += e.chosen.token.chars().count();
            at
        })
        .collect();
    let top: Vec<Value> = entries
        .iter()
        .map(|e| Value::Object(e.top_logprobs.iter().map(|t| (t.token.clone(), json!(t.logprob))).collect()))
        .collect();
    json!({
        "tokens": entries.iter().map(|e| &e.chosen.token).collect::<Vec<_>>(),
        "token_logprobs": entries.iter().map(|e| e.chosen.logprob).collect::<Vec<_>>(),
        "top_logprobs": top,
        "text_offset": offsets,
    })
}

pub async fn completions(State(app): State<Arc<App>>, body: Bytes) -> Result<Response, ApiError> {
    let request: CompletionRequest = serde_json::from_value(parse_body(&body)?)
        .map_err(|e| ApiError::BadRequest(format!("invalid completion request: {e}")))?;
    let (stream, echo) = (request.stream, request.echo);
    let include_usage = request.stream_options.as_ref().is_some_and(|o| o.include_usage);
    let (args, prompt) = request.into_reply_args()?;
    let model = args.model_id.clone();
    let echoed = if echo { prompt.clone() } else { String::new() };
    let reply = Reply::start(app, move |app| app.reply_job(args, Prompt::Text(prompt))).await?;

    let id = format!("cmpl-{:016x}", rand::random::<u64>());
    let created = chrono::Utc::now().timestamp();
    let body = move |text: &str, finish: Value| {
        json!({"id": id, "object": "text_completion", "created": created, "model": model,
               "choices": [{"text": text, "index": 0, "logprobs": null, "finish_reason": finish}]})
    };
    if !stream {
        let whole = reply.collect().await?;
        let mut answer = body(&(echoed + &whole.answer), json!(openai_finish_reason(whole.stats.finish_reason, &[])));
        answer["choices"][0]["logprobs"] = legacy_logprobs(&whole.logprobs);
        answer["usage"] = usage(&whole.stats);
        return Ok(Json(answer).into_response());
    }
    let data = |value: Value| Event::default().data(value.to_string());
    let first = (!echoed.is_empty()).then(|| data(body(&echoed, Value::Null)));
    let events = reply.into_stream().map(move |event| -> Vec<Event> {
        match event {
            ReplyEvent::Text(text) => vec![data(body(&text, Value::Null))],
            // Raw prompts open no reasoning block; nothing else comes here.
            ReplyEvent::Reasoning(_) => Vec::new(),
            ReplyEvent::Notice(message) => vec![Event::default().comment(format!("notice: {message}"))],
            ReplyEvent::Done { stats, logprobs, .. } => {
                let mut end = body("", json!(openai_finish_reason(stats.finish_reason, &[])));
                end["choices"][0]["logprobs"] = legacy_logprobs(&logprobs);
                let mut out = vec![data(end)];
                if include_usage {
                    let mut last = body("", Value::Null);
                    last["choices"] = json!([]);
                    last["usage"] = usage(&stats);
                    out.push(data(last));
                }
                out.push(Event::default().data("[DONE]"));
                out
            }
            ReplyEvent::Failed(error) => vec![data(error.body()), Event::default().data("[DONE]")],
        }
    });
    let lines = futures_util::StreamExt::flat_map(
        tokio_stream::once(first.into_iter().collect()).chain(events),
        tokio_stream::iter,
    )
    .map(Ok::<_, Infallible>);
    Ok(Sse::new(lines).into_response())
}
