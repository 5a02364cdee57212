//! Turns for chat templates that read a message's content only as a list
//! of typed parts (`{"type": "text", "text": …}`, `{"type": "image"}`),
//! as SmolVLM's does: a message's text is cut at its pictures' marks into
//! such parts, and what the template writes for each image part is made a
//! [`PICTURE_MARK`] again, so pictures are spelled as for other templates.

use super::pictures::PICTURE_MARK;
use serde_json::{json, Value};

/// The parts of `content`, a message's text whose pictures are held by
/// [`PICTURE_MARK`]s: its texts (none empty, but for a message of no
/// text at all) and an image part for each picture, in order.
pub fn content_parts(content: &str) -> Value {
    let mut parts = Vec::new();
    for (i, text) in content.split(PICTURE_MARK).enumerate() {
        if i > 0 {
            parts.push(json!({ "type": "image" }));
        }
        if !text.is_empty() {
            parts.push(json!({ "type": "text", "text": text }));
        }
    }
    if parts.is_empty() {
        parts.push(json!({ "type": "text", "text": "" }));
    }
    Value::Array(parts)
}

/// `messages` (serialized turns) with each string content made parts.
pub fn with_content_parts(mut messages: Value) -> Value {
    for message in messages.as_array_mut().into_iter().flatten() {
        if let Some(content) = message.get_mut("content") {
            if let Some(text) = content.as_str() {
                *content = content_parts(text);
            }
        }
    }
    messages
}

/// `rendered`, the template's output for `messages` (made by
/// [`with_content_parts`]), with what it wrote for each image part
/// (`picture`) made a [`PICTURE_MARK`]. The parts are found in order, each
/// text after the one before (as written or trimmed, as templates often
/// trim), so that a `picture` people wrote stays text. An image part the
/// template left out is not marked.
pub fn mark_pictures(rendered: &str, messages: &Value, picture: &str) -> String {
    let parts = messages.as_array().into_iter().flatten().filter_map(|m| m.get("content")?.as_array()).flatten();
    let mut marked = String::with_capacity(rendered.len());
    let mut cursor = 0;
    for part in parts {
        match (part.get("type").and_then(Value::as_str), part.get("text").and_then(Value::as_str)) {
            (Some("text"), Some(text)) if !text.trim().is_empty() => {
                let found = [text, text.trim()].into_iter().find_map(|t| Some((rendered[cursor..].find(t)?, t.len())));
                if let Some((at, length)) = found {
                    marked.push_str(&rendered[cursor..cursor + at + length]);
                    cursor += at + length;
                }
            }
            (Some("image"), _) if !picture.is_empty() => {
                if let Some(at) = rendered[cursor..].find(picture) {
                    marked.push_str(&rendered[cursor..cursor + at]);
                    marked.push(PICTURE_MARK);
                    cursor += at + picture.len();
                }
            }
            _ => {}
        }
    }
    marked.push_str(&rendered[cursor..]);
    marked
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pictures_become_image_parts_in_place() {
        let mark = PICTURE_MARK;
        assert_eq!(
            content_parts(&format!("{mark}What is this?")),
            json!([{ "type": "image" }, { "type": "text", "text": "What is this?" }])
        );
        assert_eq!(
            content_parts(&format!("Compare{mark}{mark}")),
            json!([{ "type": "text", "text": "Compare" }, { "type": "image" }, { "type": "image" }])
        );
        assert_eq!(content_parts(""), json!([{ "type": "text", "text": "" }]));
    }

    #[test]
    fn only_the_templates_picture_text_is_marked() {
        let messages = with_content_parts(json!([
            { "role": "user", "content": format!("Say <image> back{PICTURE_MARK}") },
            { "role": "assistant", "content": "<image>" },
        ]));
        let rendered = "User: Say <image> back<image><end>\nAssistant: <image><end>\n";
        let marked = mark_pictures(rendered, &messages, "<image>");
        assert_eq!(marked, format!("User: Say <image> back{PICTURE_MARK}<end>\nAssistant: <image><end>\n"));
    }
}
