//! OpenAI's `POST /v1/embeddings`: one vector per input text, from an
//! embedding model (a chat model is refused with a 400 saying so), as
//! floats or base64 little-endian f32 (`encoding_format`). `dimensions`
//! (a shortened vector) is refused: the models' own length is given.

use super::parse_body;
use super::replies::embed;
use crate::app::engine::base64_encode;
use crate::app::error::ApiError;
use crate::app::App;
use crate::library::catalog::ModelKind;
use axum::body::Bytes;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;

#[derive(Deserialize)]
struct EmbeddingRequest {
    model: String,
    input: Value,
    encoding_format: Option<String>,
    dimensions: Option<usize>,
}

/// The texts of `input`: a text or a list of texts (token ids are refused).
pub fn input_texts(input: Value) -> Result<Vec<String>, ApiError> {
    match input {
        Value::String(text) => Ok(vec![text]),
        Value::Array(items) => items
            .into_iter()
            .map(|item| match item {
                Value::String(text) => Ok(text),
                _ => Err(ApiError::BadRequest(
                    "`input` must be a text or a list of texts (token ids are not supported)".into(),
                )),
            })
            .collect(),
        _ => Err(ApiError::BadRequest("`input` must be a text or a list of texts".into())),
    }
}

pub async fn embeddings(State(app): State<Arc<App>>, body: Bytes) -> Result<Response, ApiError> {
    let request: EmbeddingRequest = serde_json::from_value(parse_body(&body)?)
        .map_err(|e| ApiError::BadRequest(format!("invalid embeddings request: {e}")))?;
    if request.dimensions.is_some() {
        return Err(ApiError::BadRequest("`dimensions` is not supported: vectors keep the model's length".into()));
    }
    let base64 = match request.encoding_format.as_deref() {
        None | Some("float") => false,
        Some("base64") => true,
        Some(_) => return Err(ApiError::BadRequest("`encoding_format` must be `float` or `base64`".into())),
    };
    let texts = input_texts(request.input)?;
    let (lookup, name) = (app.clone(), request.model.clone());
    let model = tokio::task::spawn_blocking(move || lookup.usable_model_of_kind(&name, ModelKind::Embedding))
        .await
        .map_err(|e| ApiError::Server(e.to_string()))??;
    let (vectors, tokens) = embed(app, model, texts, false).await?;
    let data: Vec<Value> = vectors
        .into_iter()
        .enumerate()
        .map(|(index, vector)| {
            let embedding = if base64 {
                let bytes: Vec<u8> = vector.iter().flat_map(|x| x.to_le_bytes()).collect();
                json!(base64_encode(&bytes))
            } else {
                json!(vector)
            };
            json!({"object": "embedding", "index": index, "embedding": embedding})
        })
        .collect();
    let usage = json!({"prompt_tokens": tokens, "total_tokens": tokens});
    Ok(Json(json!({"object": "list", "data": data, "model": request.model, "usage": usage})).into_response())
}
