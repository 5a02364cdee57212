//! A text model ready to use: decoder, tokenizer, chat template, stop tokens.
//!
//! [`TextModel::load`] takes a Hugging Face model folder or a single GGUF
//! file and detects everything else: the architecture, the stored dtype, the
//! tokenizer, the chat template and the end-of-sequence ids.

use super::chat_template::ChatTemplate;
use super::tokenizer::TextTokenizer;
use crate::formats::gguf::GgufFile;
use crate::models::config::HfConfig;
use crate::models::decoder::Decoder;
use crate::models::families;
use crate::models::sources::folder::SafetensorsFolder;
use crate::models::sources::gguf::GgufStore;
use crate::models::sources::selection::TensorSelection;
use crate::models::weights::{LoadPolicy, StoredTensor, WeightStore, Weights};
use anyhow::{bail, Context, Result};
use candle_core::{DType, Device};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// How to load a model.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    /// Dtype for weights and activations; `None` keeps what the checkpoint
    /// stores (GGUF quantized weights stay quantized, activations in f32).
    pub dtype: Option<DType>,
    pub device: Device,
}

impl Default for LoadOptions {
    fn default() -> Self {
        Self {
            dtype: None,
            device: Device::Cpu,
        }
    }
}

pub struct TextModel {
    pub path: PathBuf,
    pub decoder: Decoder,
    pub tokenizer: Option<TextTokenizer>,
    /// Raw Jinja source of the model's chat template, if it has one.
    pub chat_template_source: Option<String>,
    /// Every token id that ends generation.
    pub eos_token_ids: Vec<u32>,
}

impl TextModel {
    /// Loads a model folder or a `.gguf` file.
    pub fn load(path: &Path, options: &LoadOptions) -> Result<Self> {
        if path.is_dir() {
            load_folder(path, options)
        } else if path.is_file() {
            load_gguf(path, options)
        } else {
            bail!("{}: no such model file or folder", path.display())
        }
    }

    /// The tokenizer, or an error saying the model has none.
    pub fn tokenizer(&self) -> Result<&TextTokenizer> {
        self.tokenizer
            .as_ref()
            .with_context(|| format!("{}: the model has no tokenizer", self.path.display()))
    }

    /// The model's chat template (ChatML when it has none).
    pub fn chat_template(&self) -> Result<ChatTemplate> {
        let tok = self.tokenizer.as_ref();
        ChatTemplate::new(
            self.chat_template_source.as_deref(),
            tok.and_then(|t| t.bos_token.as_deref()),
            tok.and_then(|t| t.eos_token.as_deref()),
        )
    }
}

fn read_json(path: &Path) -> Result<Option<serde_json::Value>> {
    if !path.exists() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let value = serde_json::from_str(&text).with_context(|| format!("{}: not valid JSON", path.display()))?;
    Ok(Some(value))
}

fn load_folder(dir: &Path, options: &LoadOptions) -> Result<TextModel> {
    let config_path = dir.join("config.json");
    let text = std::fs::read_to_string(&config_path)
        .with_context(|| format!("{}: cannot read config.json", dir.display()))?;
    let hf = HfConfig::parse(&text).with_context(|| format!("{}: invalid config.json", config_path.display()))?;
    let config = families::from_hf(&hf).with_context(|| format!("{}", config_path.display()))?;
    let selection = TensorSelection::all(config.num_hidden_layers());
    let store = SafetensorsFolder::open(dir, &selection)?;
    let dtype = match options.dtype {
        Some(d) => d,
        None => stored_float_dtype(&store)?,
    };
    let weights = Weights::new(
        Box::new(store),
        LoadPolicy {
            dtype,
            keep_quantized: false,
        },
        options.device.clone(),
    );
    let mut eos = config.eos_token_ids.clone();
    let decoder = Decoder::load(config, &weights, selection)?;

    let tokenizer = if dir.join("tokenizer.json").exists() {
        Some(TextTokenizer::from_folder(dir)?)
    } else {
        None
    };
    let tokenizer_config = read_json(&dir.join("tokenizer_config.json"))?;
    let chat_template_source = match std::fs::read_to_string(dir.join("chat_template.jinja")) {
        Ok(source) => Some(source),
        Err(_) => tokenizer_config.as_ref().and_then(chat_template_from_config),
    };
    if let Some(generation) = read_json(&dir.join("generation_config.json"))? {
        eos.extend(crate::models::config::token_ids(generation.get("eos_token_id")));
    }
    if let Some(id) = tokenizer
        .as_ref()
        .and_then(|t| t.eos_token.as_deref().and_then(|name| t.token_id(name)))
    {
        eos.push(id);
    }
    eos.sort_unstable();
    eos.dedup();
    Ok(TextModel {
        path: dir.to_path_buf(),
        decoder,
        tokenizer,
        chat_template_source,
        eos_token_ids: eos,
    })
}

/// The float dtype the checkpoint stores its embedding in, when candle can
/// compute in it; otherwise f32.
fn stored_float_dtype(store: &SafetensorsFolder) -> Result<DType> {
    let name = "model.embed_tokens.weight";
    if !store.contains(name) {
        return Ok(DType::F32);
    }
    Ok(match store.load(name, &Device::Cpu)? {
        StoredTensor::Dense(t) if matches!(t.dtype(), DType::F16 | DType::BF16 | DType::F32) => t.dtype(),
        _ => DType::F32,
    })
}

/// `chat_template` as a string, or the `default` entry of a list of named templates.
fn chat_template_from_config(config: &serde_json::Value) -> Option<String> {
    match config.get("chat_template")? {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Array(items) => items
            .iter()
            .find(|t| t.get("name").and_then(|n| n.as_str()) == Some("default"))
            .and_then(|t| t.get("template")?.as_str().map(str::to_string)),
        _ => None,
    }
}

fn load_gguf(path: &Path, options: &LoadOptions) -> Result<TextModel> {
    let file = Arc::new(GgufFile::open(path)?);
    let (config, row_order) = families::from_gguf(&file)?;
    let selection = TensorSelection::all(config.num_hidden_layers());
    let policy = match options.dtype {
        None => LoadPolicy {
            dtype: DType::F32,
            keep_quantized: true,
        },
        Some(dtype) => LoadPolicy {
            dtype,
            keep_quantized: false,
        },
    };
    let weights = Weights::new(Box::new(GgufStore::new(file.clone(), row_order)), policy, options.device.clone());
    let mut eos = config.eos_token_ids.clone();
    let decoder = Decoder::load(config, &weights, selection)?;
    let tokenizer = TextTokenizer::from_gguf(&file)?;
    if let Some(id) = tokenizer.eos_token.as_deref().and_then(|n| tokenizer.token_id(n)) {
        eos.push(id);
    }
    eos.sort_unstable();
    eos.dedup();
    Ok(TextModel {
        path: path.to_path_buf(),
        decoder,
        tokenizer: Some(tokenizer),
        chat_template_source: file.get_str("tokenizer.chat_template").map(str::to_string),
        eos_token_ids: eos,
    })
}
