//! A conversation's prompt tokens with its pictures: the rendered turns
//! with each picture spelled as the model's processor spells one,
//! tokenized so that people's own text stays text, and each picture's
//! soft tokens placed where its tokens are.

use super::chat_template::ChatMessage;
use super::model::TextModel;
use super::pictures::{place_pictures, spell_pictures, AttachedPicture, PicturesRefused, PromptPicture};
use crate::models::vision::{PictureSpelling, VisionModel};
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
    let attached = attached(messages);
    if attached.is_empty() {
        return Ok(Cow::Borrowed(text));
    }
    Ok(Cow::Owned(spell_pictures(text, &spellings(model, &attached)?, model.tokenizer()?)?))
}

/// The pictures of `messages`, read by the model's vision tower and placed
/// in their prompt `tokens` (made by [`tokenize_turns`]).
pub fn turn_pictures(model: &TextModel, tokens: &[u32], messages: &[ChatMessage]) -> Result<Vec<PromptPicture>> {
    pictures_in(model, tokens, &attached(messages))
}

/// The pictures `attached`, read by the model's vision tower and placed in
/// order in the prompt `tokens` that spells them.
pub fn pictures_in(model: &TextModel, tokens: &[u32], attached: &[&AttachedPicture]) -> Result<Vec<PromptPicture>> {
    if attached.is_empty() {
        return Ok(Vec::new());
    }
    let vision = vision_of(model)?;
    place_pictures(tokens, attached, &spellings(model, attached)?, |picture| {
        model.picture_memo.get_or_encode(picture.digest, || vision.encode(&*picture.image()?))
    })
}

/// The pictures of `messages`, in order.
fn attached(messages: &[ChatMessage]) -> Vec<&AttachedPicture> {
    messages.iter().flat_map(|m| m.pictures.iter().map(|p| &**p)).collect()
}

/// How the model's processor spells each of `attached`.
fn spellings<'m>(model: &'m TextModel, attached: &[&AttachedPicture]) -> Result<Vec<Cow<'m, PictureSpelling>>> {
    let vision = vision_of(model)?;
    attached.iter().map(|picture| vision.spelling(|| model.picture_memo.upright_size(picture))).collect()
}

/// The model's picture reader; a request's fault when there is none.
fn vision_of(model: &TextModel) -> Result<&VisionModel> {
    model.vision().map_err(|error| PicturesRefused(format!("{error:#}")).into())
}
