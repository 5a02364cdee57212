//! A conversation's prompt tokens with its pictures: the rendered turns
//! with each picture spelled as the model's processor spells one,
//! tokenized so that people's own text stays text, and each picture's
//! soft tokens placed where its tokens are.

use super::chat_template::ChatMessage;
use super::model::TextModel;
use super::pictures::{place_pictures, spell_pictures, AttachedPicture, PicturesRefused, PromptPicture};
use crate::models::vision::VisionModel;
use anyhow::Result;
use std::borrow::Cow;

/// The prompt tokens of `rendered`, the chat template's text for
/// `messages`.
pub fn tokenize_turns(model: &TextModel, rendered: &str, messages: &[ChatMessage]) -> Result<Vec<u32>> {
    let written: Vec<&str> = messages.iter().flat_map(ChatMessage::written_texts).collect();
    model.tokenizer()?.encode_chat(&spell_turn_pictures(model, rendered, messages)?, &written)
}

/// `text` (made of `messages`) with each of their pictures spelled the
/// way the model's processor spells one.
pub fn spell_turn_pictures<'t>(model: &TextModel, text: &'t str, messages: &[ChatMessage]) -> Result<Cow<'t, str>> {
    let pictures: usize = messages.iter().map(|m| m.pictures.len()).sum();
    if pictures == 0 {
        return Ok(Cow::Borrowed(text));
    }
    Ok(Cow::Owned(spell_pictures(text, pictures, vision_of(model)?.spelling(), model.tokenizer()?)?))
}

/// The pictures of `messages`, read by the model's vision tower and placed
/// in their prompt `tokens` (made by [`tokenize_turns`]).
pub fn turn_pictures(model: &TextModel, tokens: &[u32], messages: &[ChatMessage]) -> Result<Vec<PromptPicture>> {
    let attached: Vec<&AttachedPicture> = messages.iter().flat_map(|m| m.pictures.iter().map(|p| &**p)).collect();
    if attached.is_empty() {
        return Ok(Vec::new());
    }
    let vision = vision_of(model)?;
    place_pictures(tokens, &attached, vision.spelling(), |picture| {
        model.picture_memo.get_or_encode(picture.digest, || vision.encode(&*picture.image()?))
    })
}

/// The model's picture reader; a request's fault when there is none.
fn vision_of(model: &TextModel) -> Result<&VisionModel> {
    model.vision().map_err(|error| PicturesRefused(format!("{error:#}")).into())
}
