//! The image side of vision-language models: encoders that turn a
//! picture's pixel values into features, the projectors that make those
//! features tokens of the text model, and how a prompt spells a picture.
//!
//! - [`siglip`]: the SigLIP vision transformer (Gemma 3, SmolVLM);
//! - [`gemma3_projector`]: Gemma 3's pooling to soft tokens and projection;
//! - [`gemma3`]: Gemma 3's whole picture reader;
//! - [`smolvlm`]: SmolVLM's tiles, tower and connector;
//! - [`tensors`]: their weights, from a model folder or an [`mmproj`] file.

pub mod gemma3;
pub mod gemma3_projector;
pub mod mmproj;
pub mod siglip;
pub mod smolvlm;
pub mod tensors;

use crate::images::decode::DecodedImage;
use anyhow::{bail, Context, Result};
use candle_core::Tensor;
use std::borrow::Cow;
use std::path::Path;

/// One piece of what a picture's marker becomes in the prompt's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Spelled {
    Text(&'static str),
    /// A special token, by id.
    Token(u32),
    /// The soft token, once for each of the picture's tokens.
    SoftTokens,
}

/// How a prompt spells a picture, as the model's processor does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PictureSpelling {
    /// What the processor writes where the picture goes.
    pub expansion: Vec<Spelled>,
    /// The token whose positions a picture's embeddings take, in runs of
    /// `run_length` (one run for each [`Spelled::SoftTokens`]).
    pub soft_token: u32,
    pub run_length: usize,
    /// Whether the tokens of a run see each other both ways.
    pub mutual: bool,
}

impl PictureSpelling {
    /// How many runs of soft tokens the picture takes.
    pub fn runs(&self) -> usize {
        self.expansion.iter().filter(|piece| **piece == Spelled::SoftTokens).count()
    }
}

/// The text model's vocabulary, as a picture reader needs it: the ids of
/// the tokens that spell a picture.
pub trait PictureVocabulary {
    /// The id of the token named `name`, if the vocabulary has it.
    fn id(&self, name: &str) -> Option<u32>;
    /// Adds `name` as a special token past the vocabulary and gives its id:
    /// a placeholder whose positions take a picture's embeddings.
    fn add_placeholder(&mut self, name: &str) -> Result<u32>;
}

/// The projectors of mmproj files Cake reads.
const MMPROJ_PROJECTORS: [&str; 2] = ["gemma3", "idefics3"];

/// A model's picture reader.
pub enum VisionModel {
    Gemma3(Box<gemma3::Gemma3Vision>),
    SmolVlm(Box<smolvlm::SmolVlmVision>),
}

impl VisionModel {
    /// The picture reader of the model folder `dir` (whose text model's
    /// vocabulary is `vocabulary`), `None` when its config.json describes
    /// no vision part Cake reads.
    pub fn load_folder(dir: &Path, vocabulary: Option<&dyn PictureVocabulary>) -> Result<Option<Self>> {
        let path = dir.join("config.json");
        let text = std::fs::read_to_string(&path).with_context(|| path.display().to_string())?;
        let config: serde_json::Value = serde_json::from_str(&text).with_context(|| path.display().to_string())?;
        match Family::of(&config) {
            None => Ok(None),
            Some(Family::Gemma3) => Ok(Some(Self::Gemma3(Box::new(gemma3::Gemma3Vision::load(dir, &config)?)))),
            Some(Family::SmolVlm) => {
                let vocabulary = vocabulary.with_context(|| format!("{}: no tokenizer", dir.display()))?;
                Ok(Some(Self::SmolVlm(Box::new(smolvlm::SmolVlmVision::load(dir, &config, vocabulary)?))))
            }
        }
    }

    /// The picture reader in the opened mmproj file `mmproj` for a text
    /// model whose vocabulary is `vocabulary`.
    pub fn load_mmproj(mmproj: mmproj::Mmproj, vocabulary: &mut dyn PictureVocabulary) -> Result<Self> {
        match mmproj.projector() {
            "gemma3" => Ok(Self::Gemma3(Box::new(gemma3::Gemma3Vision::from_mmproj(mmproj, vocabulary)?))),
            "idefics3" => Ok(Self::SmolVlm(Box::new(smolvlm::SmolVlmVision::from_mmproj(mmproj, vocabulary)?))),
            other => bail!("{}: Cake does not read `{other}` picture readers yet", mmproj.path().display()),
        }
    }

    /// The mmproj file beside the text GGUF `text_file` (tokens
    /// `text_width` wide) that Cake can read: `None` when there is none,
    /// an error naming the file and the reason when none there serves.
    pub fn mmproj_beside(text_file: &Path, text_width: usize) -> Result<Option<mmproj::Mmproj>> {
        mmproj::beside(text_file, text_width, |projector| MMPROJ_PROJECTORS.contains(&projector))
    }

    /// Whether a model folder with this `config.json` holds a picture
    /// reader Cake runs (Gemma 3's, SmolVLM's).
    pub fn reads_pictures(config: &serde_json::Value) -> bool {
        Family::of(config).is_some()
    }

    /// How the prompt spells a picture whose upright `(width, height)`
    /// `size` gives (asked only by readers whose spelling depends on it).
    pub fn spelling(&self, size: impl FnOnce() -> Result<(u32, u32)>) -> Result<Cow<'_, PictureSpelling>> {
        match self {
            Self::Gemma3(model) => Ok(Cow::Borrowed(model.spelling())),
            Self::SmolVlm(model) => {
                let (width, height) = size()?;
                Ok(Cow::Owned(model.spelling(width, height)?))
            }
        }
    }

    /// A picture's soft tokens, all its runs' one after the other:
    /// `(tokens, text hidden)`, f32.
    pub fn encode(&self, picture: &DecodedImage) -> Result<Tensor> {
        match self {
            Self::Gemma3(model) => model.encode(picture),
            Self::SmolVlm(model) => model.encode(picture),
        }
    }

    /// The width of the soft tokens.
    pub fn output_width(&self) -> usize {
        match self {
            Self::Gemma3(model) => model.output_width(),
            Self::SmolVlm(model) => model.output_width(),
        }
    }
}

/// The model families whose folders' picture readers Cake runs.
enum Family {
    Gemma3,
    SmolVlm,
}

impl Family {
    fn of(config: &serde_json::Value) -> Option<Self> {
        config.get("vision_config")?;
        match config.get("model_type").and_then(|t| t.as_str()) {
            Some("gemma3") => Some(Self::Gemma3),
            Some("smolvlm" | "idefics3") => Some(Self::SmolVlm),
            _ => None,
        }
    }
}
