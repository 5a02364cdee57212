//! Pictures sent to the chat routes: base64 file bytes (OpenAI's `data:`
//! URLs, Ollama's `images`, Anthropic's `base64` sources), their size
//! checked before they are decoded. Cake fetches no picture from the web:
//! an `http(s)` address is refused.

use crate::app::error::ApiError;
use crate::images::decode::ImageLimits;
use crate::text::pictures::AttachedPicture;
use base64::Engine;
use serde_json::Value;

/// The largest request body of a route that takes pictures: a picture of
/// the largest size allowed, in base64, and room for the conversation.
pub const PICTURE_BODY_LIMIT: usize = ImageLimits::DEFAULT_FILE_BYTES.div_ceil(3) * 4 + (4 << 20);

/// Runs `read` (which decodes a request's pictures: up to a second of
/// work for a large photo) on a thread of its own, off the server's async
/// threads.
pub async fn off_the_async_threads<T: Send + 'static>(
    read: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(read)
        .await
        .map_err(|e| ApiError::Server(format!("reading the request stopped: {e}")))?
}

/// The pictures of Ollama's `images` (base64 strings) of the `n`th
/// message, or of the prompt when `message` is `None`.
pub fn pictures_of_list(images: Option<Value>, message: Option<usize>) -> Result<Vec<AttachedPicture>, ApiError> {
    let images = match images {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(images)) => images,
        Some(_) => return Err(ApiError::BadRequest("`images` must be a list of base64 strings".into())),
    };
    let place = message.map(|n| format!(" of message {n}")).unwrap_or_default();
    images
        .iter()
        .enumerate()
        .map(|(i, image)| {
            let name = format!("image {}{place}", i + 1);
            let encoded = image.as_str().ok_or_else(|| ApiError::BadRequest(format!("{name}: not a base64 string")))?;
            picture_of_base64(&name, encoded)
        })
        .collect()
}

/// The picture of OpenAI's `image_url` (called `name` in errors): a
/// `data:` URL holding a base64 file.
pub fn picture_of_url(name: &str, url: &str) -> Result<AttachedPicture, ApiError> {
    if url.starts_with("http://") || url.starts_with("https://") {
        return Err(ApiError::BadRequest(format!(
            "{name}: Cake does not fetch pictures from the web; send the picture itself as a `data:` URL \
             (data:image/png;base64,…)"
        )));
    }
    let encoded = url
        .strip_prefix("data:")
        .and_then(|rest| rest.split_once(','))
        .filter(|(kind, _)| kind.ends_with(";base64"))
        .map(|(_, data)| data)
        .ok_or_else(|| ApiError::BadRequest(format!("{name}: not a base64 `data:` URL")))?;
    picture_of_base64(name, encoded)
}

/// The picture whose file is `encoded` in base64 (called `name` in errors).
pub fn picture_of_base64(name: &str, encoded: &str) -> Result<AttachedPicture, ApiError> {
    let limit = ImageLimits::default().max_file_bytes;
    let encoded = encoded.trim();
    // Refused before anything is decoded: base64 holds 3 bytes in 4 characters.
    if encoded.len() / 4 * 3 > limit + 3 {
        return Err(ApiError::BadRequest(format!(
            "{name}: the picture is about {} bytes, more than the {limit} allowed",
            encoded.len() / 4 * 3
        )));
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .map_err(|e| ApiError::BadRequest(format!("{name}: the picture is not valid base64 ({e})")))?;
    AttachedPicture::decode(name, &bytes).map_err(|e| ApiError::BadRequest(format!("{e:#}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(result: Result<AttachedPicture, ApiError>) -> String {
        match result {
            Err(ApiError::BadRequest(message)) => message,
            other => panic!("expected a 400, got {other:?}"),
        }
    }

    #[test]
    fn web_addresses_and_other_urls_are_refused_naming_the_part() {
        let web = refusal(picture_of_url("the image_url of message 1", "https://example.com/cat.png"));
        assert!(web.starts_with("the image_url of message 1: Cake does not fetch"), "{web}");
        assert!(refusal(picture_of_url("p", "data:image/png,plain")).contains("not a base64 `data:` URL"));
        assert!(refusal(picture_of_url("p", "data:image/png;base64,AAAA")).contains("p: not a PNG"));
        assert!(refusal(picture_of_base64("p", "not base64!")).contains("not valid base64"));
    }

    #[test]
    fn a_picture_over_the_limit_is_refused_before_decoding() {
        let huge = "A".repeat(ImageLimits::default().max_file_bytes / 3 * 4 + 64);
        assert!(refusal(picture_of_base64("p", &huge)).contains("more than the"));
    }
}
