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
    /// The token a chat message holds where a picture goes
    /// (`<start_of_image>` in Gemma 3's chat template).
    pub marker: u32,
    /// What the processor writes in place of each marker.
    pub expansion: Vec<Spelled>,
    /// The token whose positions a picture's embeddings take, and how many
    /// a picture has.
    pub soft_token: u32,
    pub soft_tokens: usize,
    /// Whether a picture's tokens see each other both ways.
    pub mutual: bool,
}

/// The text model's vocabulary, as a picture reader loaded from its own
/// file needs it: the ids of the tokens that spell a picture.
pub trait PictureVocabulary {
    /// The id of the token named `name`, if the vocabulary has it.
    fn id(&self, name: &str) -> Option<u32>;
    /// Adds `name` as a special token past the vocabulary and gives its id:
    /// a placeholder whose positions take a picture's embeddings.
    fn add_placeholder(&mut self, name: &str) -> Result<u32>;
}

/// The projectors of mmproj files Cake reads.
const MMPROJ_PROJECTORS: [&str; 1] = ["gemma3"];

/// A model's picture reader.
pub enum VisionModel {
    Gemma3(Box<gemma3::Gemma3Vision>),
}

impl VisionModel {
    /// The picture reader of the model folder `dir`, `None` when its
    /// config.json describes no vision part.
    pub fn load_folder(dir: &Path) -> Result<Option<Self>> {
        let path = dir.join("config.json");
        let text = std::fs::read_to_string(&path).with_context(|| path.display().to_string())?;
        let config: serde_json::Value = serde_json::from_str(&text).with_context(|| path.display().to_string())?;
        if !Self::reads_pictures(&config) {
            return Ok(None);
        }
        Ok(Some(Self::Gemma3(Box::new(gemma3::Gemma3Vision::load(dir, &config)?))))
    }

    /// The picture reader in the mmproj file `path` for a text model whose
    /// vocabulary is `vocabulary`.
    pub fn load_mmproj(path: &Path, vocabulary: &mut dyn PictureVocabulary) -> Result<Self> {
        let mmproj = mmproj::Mmproj::open(path)?;
        match mmproj.projector() {
            "gemma3" => Ok(Self::Gemma3(Box::new(gemma3::Gemma3Vision::from_mmproj(mmproj, vocabulary)?))),
            other => bail!("{}: Cake does not read `{other}` picture readers yet", path.display()),
        }
    }

    /// The mmproj file beside the text GGUF `text_file` (tokens
    /// `text_width` wide) that Cake can read: `None` when there is none,
    /// an error naming the file and the reason when none there serves.
    pub fn mmproj_beside(text_file: &Path, text_width: usize) -> Result<Option<std::path::PathBuf>> {
        mmproj::beside(text_file, text_width, |projector| MMPROJ_PROJECTORS.contains(&projector))
    }

    /// Whether a model folder with this `config.json` holds a picture
    /// reader Cake runs (Gemma 3's).
    pub fn reads_pictures(config: &serde_json::Value) -> bool {
        config.get("vision_config").is_some() && config.get("model_type").and_then(|t| t.as_str()) == Some("gemma3")
    }

    pub fn spelling(&self) -> &PictureSpelling {
        match self {
            Self::Gemma3(model) => model.spelling(),
        }
    }

    /// A picture's soft tokens: `(tokens, text hidden)`, f32.
    pub fn encode(&self, picture: &DecodedImage) -> Result<Tensor> {
        match self {
            Self::Gemma3(model) => model.encode(picture),
        }
    }

    /// The width of the soft tokens.
    pub fn output_width(&self) -> usize {
        match self {
            Self::Gemma3(model) => model.output_width(),
        }
    }
}
