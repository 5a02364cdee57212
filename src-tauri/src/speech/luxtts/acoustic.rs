//! ZipVoice-Distill, LuxTTS's acoustic model (docs/luxtts-research.md §3): the text
//! encoder turns the prompt's and the new text's tokens into features, each
//! token is given an equal share of the frames, and the flow-matching
//! decoder predicts, from noisy features, the text and the prompt's audio
//! features, the velocity towards speech.

use super::attention::PaddingMask;
use super::config::LuxConfig;
use super::tokens::TokenTable;
use super::zipformer::{FlowTime, Zipformer};
use crate::models::weights::Weights;
use anyhow::{bail, Result};
use candle_core::{Tensor, D};

/// The most frames one generation may have: 5 minutes at 93.75 frames/s,
/// far beyond what a piece of a script needs, far below a size whose
/// attention (frames² per head) exhausts memory.
pub const MAX_FRAMES: usize = 28_125;

pub struct AcousticModel {
    embed: Tensor,
    text_encoder: Zipformer,
    fm_decoder: Zipformer,
    vocabulary: usize,
    pad_id: u32,
    feat_dim: usize,
}

/// The frames of a generation, prompt included, and what the text
/// contributes to each.
pub struct TextCondition {
    /// `(frames, feat_dim)`.
    pub features: Tensor,
    pub prompt_frames: usize,
}

impl AcousticModel {
    pub fn load(weights: &Weights, config: &LuxConfig, tokens: &TokenTable) -> Result<Self> {
        Ok(Self {
            embed: weights.dense("embed.weight", &[tokens.len(), config.text_embed_dim])?,
            text_encoder: Zipformer::load(weights, "text_encoder", &config.text_encoder)?,
            fm_decoder: Zipformer::load(weights, "fm_decoder", &config.fm_decoder)?,
            vocabulary: tokens.len(),
            pad_id: tokens.pad_id,
            feat_dim: config.feat_dim,
        })
    }

    /// The width of the features the model makes (100 mel bands).
    pub fn feat_dim(&self) -> usize {
        self.feat_dim
    }

    pub fn fm_decoder(&self) -> &Zipformer {
        &self.fm_decoder
    }

    /// The embeddings of `tokens` followed by one padding token, `(n + 1, text_embed_dim)`.
    pub fn embed_tokens(&self, tokens: &[u32]) -> Result<Tensor> {
        if let Some(bad) = tokens.iter().find(|&&t| t as usize >= self.vocabulary) {
            bail!("token id {bad} is beyond the model's {} symbols", self.vocabulary);
        }
        let ids: Vec<u32> = tokens.iter().copied().chain([self.pad_id]).collect();
        let ids = Tensor::from_vec(ids, tokens.len() + 1, self.embed.device())?;
        Ok(self.embed.index_select(&ids, 0)?)
    }

    /// The text encoder's output for `tokens`, `(n + 1, feat_dim)`: the
    /// appended padding token is masked as a key.
    pub fn encode_tokens(&self, tokens: &[u32]) -> Result<Tensor> {
        let mut padding = vec![false; tokens.len() + 1];
        padding[tokens.len()] = true;
        self.text_encoder.forward(&self.embed_tokens(tokens)?, None, Some(&PaddingMask(padding)))
    }

    /// The text condition of a generation that continues a prompt of
    /// `prompt_frames` frames whose transcript is `prompt_tokens` with
    /// `text_tokens`, at `speed` (LuxTTS's 1.3 × the user's).
    pub fn text_condition(
        &self,
        prompt_tokens: &[u32],
        text_tokens: &[u32],
        prompt_frames: usize,
        speed: f32,
    ) -> Result<TextCondition> {
        let frames = frame_count(prompt_frames, prompt_tokens.len(), text_tokens.len(), speed)?;
        let tokens: Vec<u32> = prompt_tokens.iter().chain(text_tokens).copied().collect();
        let encoded = self.encode_tokens(&tokens)?;
        let index: Vec<u32> = frame_tokens(frames, tokens.len()).into_iter().map(|i| i as u32).collect();
        let index = Tensor::from_vec(index, frames, encoded.device())?;
        Ok(TextCondition { features: encoded.index_select(&index, 0)?, prompt_frames })
    }

    /// The velocity at `flow` for noisy features `x (frames, feat_dim)`,
    /// given the text condition and `speech` (the prompt's features, zero
    /// over the frames to generate).
    pub fn velocity(&self, x: &Tensor, text: &Tensor, speech: &Tensor, flow: FlowTime) -> Result<Tensor> {
        let input = Tensor::cat(&[x, text, speech], D::Minus1)?;
        self.fm_decoder.forward(&input, Some(flow), None)
    }

    /// `prompt (prompt_frames, feat_dim)` followed by zeros up to `frames`.
    pub fn speech_condition(&self, prompt: &Tensor, frames: usize) -> Result<Tensor> {
        let prompt_frames = prompt.dim(0)?;
        if prompt.dim(1)? != self.feat_dim || prompt_frames > frames {
            bail!("prompt features {:?} do not fit {frames} frames of {}", prompt.dims(), self.feat_dim);
        }
        let zeros = Tensor::zeros((frames - prompt_frames, self.feat_dim), prompt.dtype(), prompt.device())?;
        Ok(Tensor::cat(&[prompt, &zeros], 0)?)
    }
}

/// ZipVoice's length rule on its PyTorch path: the prompt's frames plus
/// `⌈prompt_frames / prompt_tokens · text_tokens / speed⌉`, in f32 as the
/// reference computes it.
pub fn frame_count(prompt_frames: usize, prompt_tokens: usize, text_tokens: usize, speed: f32) -> Result<usize> {
    if prompt_frames == 0 || prompt_tokens == 0 || text_tokens == 0 {
        bail!("a prompt with audio and a transcript, and some text, are needed");
    }
    if !(speed.is_finite() && speed > 0.0) {
        bail!("speed {speed} is not a positive number");
    }
    let generated = (prompt_frames as f32 / prompt_tokens as f32 * text_tokens as f32 / speed).ceil();
    let frames = prompt_frames as f64 + generated as f64;
    if frames > MAX_FRAMES as f64 {
        bail!("{frames} frames is more than one generation may make ({MAX_FRAMES}); split the text");
    }
    Ok(frames as usize)
}

/// For each of `frames` frames, the token it shows: every one of `tokens`
/// tokens gets `frames / tokens` frames in turn, and the frames left over
/// go to the padding token after them (index `tokens`).
pub fn frame_tokens(frames: usize, tokens: usize) -> Vec<usize> {
    let share = frames / tokens.max(1);
    (0..frames).map(|f| f.checked_div(share).map_or(tokens, |token| token.min(tokens))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_token_gets_an_equal_share_and_the_rest_goes_to_padding() {
        assert_eq!(frame_tokens(7, 3), vec![0, 0, 1, 1, 2, 2, 3]);
        assert_eq!(frame_tokens(6, 3), vec![0, 0, 1, 1, 2, 2]);
        assert_eq!(frame_tokens(2, 3), vec![3, 3]);
    }

    #[test]
    fn the_length_follows_the_prompts_rate() {
        // 281 prompt frames for 47 tokens, 73 new tokens at 1.3: 281 + ⌈335.7…⌉.
        assert_eq!(frame_count(281, 47, 73, 1.3).unwrap(), 281 + 336);
        assert!(frame_count(281, 0, 73, 1.3).is_err());
        assert!(frame_count(281, 1, 100_000, 1.3).unwrap_err().to_string().contains("split the text"));
    }
}
