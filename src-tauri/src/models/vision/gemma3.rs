//! Gemma 3's picture reader (`Gemma3ForConditionalGeneration`): the
//! processor's resize and normalisation, the SigLIP tower and the projector
//! to soft tokens, and how the prompt spells a picture.

use super::gemma3_projector::Gemma3Projector;
use super::mmproj::Mmproj;
use super::siglip::{SiglipConfig, SiglipVision};
use super::tensors::Tensors;
use super::{PictureSpelling, PictureVocabulary, Spelled};
use crate::images::decode::DecodedImage;
use crate::images::pixels::{pixel_values, Normalization};
use crate::images::resize::{resize, Filter};
use anyhow::{bail, Context, Result};
use candle_core::Tensor;
use serde::Deserialize;
use std::path::Path;

/// The picture-related part of a Gemma 3 config.json.
#[derive(Debug, Deserialize)]
struct Gemma3VisionConfig {
    vision_config: SiglipConfig,
    #[serde(default = "default_tokens")]
    mm_tokens_per_image: usize,
    /// `<start_of_image>`, `<end_of_image>` and `<image_soft_token>` in
    /// the released vocabulary.
    #[serde(default = "default_boi")]
    boi_token_index: u32,
    #[serde(default = "default_eoi")]
    eoi_token_index: u32,
    #[serde(default = "default_image_token")]
    image_token_index: u32,
}

fn default_tokens() -> usize {
    256
}
fn default_boi() -> u32 {
    255_999
}
fn default_eoi() -> u32 {
    256_000
}
fn default_image_token() -> u32 {
    262_144
}

/// What preprocessor_config.json says of the pictures' preparation.
#[derive(Debug, Default, Deserialize)]
struct Preprocessor {
    size: Option<Size>,
    /// PIL's resampling code (2: bilinear, 3: bicubic, 1: Lanczos).
    resample: Option<u8>,
    image_mean: Option<[f32; 3]>,
    image_std: Option<[f32; 3]>,
    rescale_factor: Option<f64>,
    do_pan_and_scan: Option<bool>,
}

#[derive(Debug, Deserialize)]
struct Size {
    height: u32,
    width: u32,
}

/// The token names Gemma 3's vocabulary gives a picture's marks.
const START_OF_IMAGE: &str = "<start_of_image>";
const END_OF_IMAGE: &str = "<end_of_image>";
/// Released GGUF vocabularies lack it (transformers adds it past the
/// SentencePiece model's pieces): it is added where missing.
const IMAGE_SOFT_TOKEN: &str = "<image_soft_token>";

pub struct Gemma3Vision {
    tower: SiglipVision,
    projector: Gemma3Projector,
    side: u32,
    filter: Filter,
    normalization: Normalization,
    spelling: PictureSpelling,
}

/// The ids of the tokens that spell a picture.
struct PictureTokens {
    start: u32,
    end: u32,
    soft: u32,
}

impl Gemma3Vision {
    /// The reader of the folder `dir` whose config.json is `config`.
    pub fn load(dir: &Path, config: &serde_json::Value) -> Result<Self> {
        let config: Gemma3VisionConfig = serde_json::from_value(config.clone()).context("config.json")?;
        let preprocessor = read_preprocessor(dir)?;
        let vision = config.vision_config;
        let side = vision.image_size as u32;
        if let Some(size) = &preprocessor.size {
            if (size.width, size.height) != (side, side) {
                bail!("preprocessor_config.json resizes to {} × {}, the tower reads {side}", size.width, size.height);
            }
        }
        if preprocessor.do_pan_and_scan == Some(true) {
            bail!("preprocessor_config.json asks for pan and scan, which Cake does not do yet");
        }
        let filter = match preprocessor.resample.unwrap_or(2) {
            2 => Filter::Bilinear,
            3 => Filter::Bicubic,
            1 => Filter::Lanczos,
            other => bail!("preprocessor_config.json: resampling filter {other} is not supported"),
        };
        let normalization = Normalization {
            rescale: preprocessor.rescale_factor.unwrap_or(1.0 / 255.0),
            mean: preprocessor.image_mean.unwrap_or(Normalization::HALF.mean),
            std: preprocessor.image_std.unwrap_or(Normalization::HALF.std),
        };
        let tokens = PictureTokens {
            start: config.boi_token_index,
            end: config.eoi_token_index,
            soft: config.image_token_index,
        };
        let tensors = Tensors::open(dir, &["vision_tower.", "multi_modal_projector."])?;
        Self::build(vision, &tensors, config.mm_tokens_per_image, tokens, filter, normalization)
    }

    /// The reader of an mmproj file (`projector` `gemma3`) for a text model
    /// whose vocabulary is `vocabulary`. The pictures are prepared as
    /// Gemma3ImageProcessor does (bilinear, rescaled by 1/255) with the
    /// file's mean and deviation.
    pub fn from_mmproj(mmproj: Mmproj, vocabulary: &mut dyn PictureVocabulary) -> Result<Self> {
        let origin = mmproj.path().display().to_string();
        let vision = mmproj.siglip_config()?;
        // Patches per side of a pooling window: 4 unless the file says.
        let window = mmproj.vision_usize("projector.scale_factor")?.unwrap_or(4);
        let side = vision.patches_per_side();
        if window == 0 || !side.is_multiple_of(window) {
            bail!("{origin}: a {side} × {side} patch grid cannot pool in windows of {window}");
        }
        let soft_tokens = (side / window) * (side / window);
        let normalization = Normalization {
            rescale: 1.0 / 255.0,
            mean: mmproj.channel_values("image_mean")?.unwrap_or(Normalization::HALF.mean),
            std: mmproj.channel_values("image_std")?.unwrap_or(Normalization::HALF.std),
        };
        let marker = |name: &str| {
            vocabulary.id(name).with_context(|| format!("the text model's vocabulary has no {name} for {origin}"))
        };
        let (start, end) = (marker(START_OF_IMAGE)?, marker(END_OF_IMAGE)?);
        let soft = vocabulary.id(IMAGE_SOFT_TOKEN).map_or_else(|| vocabulary.add_placeholder(IMAGE_SOFT_TOKEN), Ok)?;
        let tokens = PictureTokens { start, end, soft };
        let tensors = Tensors::Mmproj(mmproj);
        Self::build(vision, &tensors, soft_tokens, tokens, Filter::Bilinear, normalization)
            .with_context(|| format!("{origin}: not a usable Gemma 3 picture reader"))
    }

    fn build(
        vision: SiglipConfig,
        tensors: &Tensors,
        soft_tokens: usize,
        tokens: PictureTokens,
        filter: Filter,
        normalization: Normalization,
    ) -> Result<Self> {
        let side = vision.image_size as u32;
        let (patches_per_side, eps) = (vision.patches_per_side(), vision.layer_norm_eps);
        let tower = SiglipVision::load(vision, tensors, "vision_tower.vision_model")?;
        let projector = Gemma3Projector::load(tensors, patches_per_side, soft_tokens, eps)?;
        let spelling = PictureSpelling {
            expansion: vec![
                Spelled::Text("\n\n"),
                Spelled::Token(tokens.start),
                Spelled::SoftTokens,
                Spelled::Token(tokens.end),
                Spelled::Text("\n\n"),
            ],
            soft_token: tokens.soft,
            run_length: soft_tokens,
            mutual: true,
        };
        Ok(Self { tower, projector, side, filter, normalization, spelling })
    }

    pub fn spelling(&self) -> &PictureSpelling {
        &self.spelling
    }

    /// The soft tokens of `picture`: `(tokens, text hidden)`, f32.
    pub fn encode(&self, picture: &DecodedImage) -> Result<Tensor> {
        let resized = resize(picture, self.side, self.side, self.filter);
        let features = self.tower.forward(&pixel_values(&resized, &self.normalization))?;
        self.projector.forward(&features)
    }

    /// The width of the soft tokens (the text model's).
    pub fn output_width(&self) -> usize {
        self.projector.output_width()
    }
}

fn read_preprocessor(dir: &Path) -> Result<Preprocessor> {
    let path = dir.join("preprocessor_config.json");
    match std::fs::read_to_string(&path) {
        Ok(text) => serde_json::from_str(&text).with_context(|| path.display().to_string()),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(Preprocessor::default()),
        Err(error) => Err(error).with_context(|| path.display().to_string()),
    }
}
