//! Opening a checkpoint (model folder or GGUF file) as a [`Decoder`], whole
//! or one layer range of it.

use super::config::{HfConfig, ModelConfig};
use super::decoder::Decoder;
use super::families;
use super::gpu_offload::GpuRequest;
use super::sources::folder::SafetensorsFolder;
use super::sources::gguf::GgufStore;
use super::sources::renamed::RenamedStore;
use super::sources::selection::TensorSelection;
use super::vision::VisionModel;
use super::weights::{LoadPolicy, StoredTensor, WeightStore, Weights};
use crate::formats::gguf::GgufFile;
use crate::formats::gguf_header::GgmlType;
use anyhow::{bail, Context, Result};
use candle_core::{DType, Device};
use std::path::Path;
use std::sync::Arc;

/// How to load a model.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    /// Dtype for weights and activations; `None` keeps what the checkpoint
    /// stores (GGUF quantized weights stay quantized, activations in f32).
    pub dtype: Option<DType>,
    pub device: Device,
    /// Tokens a conversation may hold (prompt and reply); `None` for the
    /// model's own length up to [`super::context::DEFAULT_CONTEXT_LENGTH`].
    pub context_length: Option<usize>,
    /// Which layers to run on the GPU.
    pub gpu: GpuRequest,
    /// The mmproj file a GGUF model reads pictures with; `None` looks for
    /// one beside the model's file.
    pub picture_reader: Option<std::path::PathBuf>,
}

impl Default for LoadOptions {
    fn default() -> Self {
        Self {
            dtype: None,
            device: Device::Cpu,
            context_length: None,
            gpu: GpuRequest::default(),
            picture_reader: None,
        }
    }
}

/// The compute dtypes a person can choose, by their command-line spelling.
/// A dtype weights and activations can be computed in: what `--dtype`
/// accepts and what a master asks its workers for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum ComputeDtype {
    F32,
    F16,
    Bf16,
}

impl ComputeDtype {
    /// The compute dtype `dtype` is, if it is one.
    pub fn of(dtype: DType) -> Option<Self> {
        match dtype {
            DType::F32 => Some(Self::F32),
            DType::F16 => Some(Self::F16),
            DType::BF16 => Some(Self::Bf16),
            _ => None,
        }
    }
}

impl From<ComputeDtype> for DType {
    fn from(dtype: ComputeDtype) -> Self {
        match dtype {
            ComputeDtype::F32 => DType::F32,
            ComputeDtype::F16 => DType::F16,
            ComputeDtype::Bf16 => DType::BF16,
        }
    }
}

/// Where a model folder keeps its decoder's tensors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TensorLayout {
    /// Hugging Face's decoder names: `model.layers.N.…`, `model.embed_tokens…`.
    Plain,
    /// A language model nested in a larger model (VibeVoice, multimodal
    /// Qwen3.5 and Gemma 3) under `model.language_model.`; the LM head stays
    /// `lm_head.weight`, and the other tensors (speech tokenizers, vision
    /// tower, connectors…) are not the decoder's.
    NestedLanguageModel,
    /// The same in checkpoints saved by transformers 4 (the Hub's Gemma 3):
    /// `language_model.model.…` and `language_model.lm_head.weight`.
    OlderNestedLanguageModel,
    /// SmolVLM's and Idefics3's text model: `model.text_model.…`, the head
    /// `lm_head.weight`.
    NestedTextModel,
    /// A base model saved alone (`Qwen3Model`: embedding models such as
    /// Qwen3-Embedding): `layers.N.…`, `embed_tokens…`, `norm…`, no head.
    BaseModel,
}

impl TensorLayout {
    const NESTED_PREFIX: &'static str = "model.language_model.";
    const OLDER_NESTED_PREFIX: &'static str = "language_model.model.";
    const OLDER_NESTED_HEAD: &'static str = "language_model.lm_head.weight";
    const TEXT_MODEL_PREFIX: &'static str = "model.text_model.";

    /// The decoder's name for a stored tensor (as [`Decoder`] and
    /// [`TensorSelection`] spell it), or `None` when the tensor is not part
    /// of the decoder.
    pub fn decoder_name<'a>(self, stored: &'a str) -> Option<std::borrow::Cow<'a, str>> {
        match self {
            Self::Plain => Some(stored.into()),
            Self::NestedLanguageModel | Self::NestedTextModel => match stored.strip_prefix(self.nested_prefix()) {
                Some(rest) => Some(format!("model.{rest}").into()),
                None if stored == "lm_head.weight" => Some(stored.into()),
                None => None,
            },
            Self::OlderNestedLanguageModel => match stored.strip_prefix(Self::OLDER_NESTED_PREFIX) {
                Some(rest) => Some(format!("model.{rest}").into()),
                None if stored == Self::OLDER_NESTED_HEAD => Some("lm_head.weight".into()),
                None => None,
            },
            Self::BaseModel => Some(format!("model.{stored}").into()),
        }
    }

    /// Whether the stored tensor `name` is one `selection` needs (with
    /// `tied_embeddings`, the head reuses the embedding matrix).
    pub fn wants(self, name: &str, selection: &TensorSelection, tied_embeddings: bool) -> bool {
        self.decoder_name(name).is_some_and(|n| selection.wants(&n, tied_embeddings))
    }

    /// `store`, read under the decoder's names.
    fn view(self, store: SafetensorsFolder) -> Box<dyn WeightStore> {
        match self {
            Self::Plain => Box::new(store),
            Self::NestedLanguageModel | Self::NestedTextModel => {
                Box::new(RenamedStore::new(store, &[("model.", self.nested_prefix())]))
            }
            Self::OlderNestedLanguageModel => Box::new(RenamedStore::new(
                store,
                &[("model.", Self::OLDER_NESTED_PREFIX), ("lm_head.weight", Self::OLDER_NESTED_HEAD)],
            )),
            Self::BaseModel => Box::new(RenamedStore::new(store, &[("model.", "")])),
        }
    }

    /// Where a nested decoder's `model.` tensors are.
    fn nested_prefix(self) -> &'static str {
        match self {
            Self::NestedTextModel => Self::TEXT_MODEL_PREFIX,
            _ => Self::NESTED_PREFIX,
        }
    }

    /// The nested layout the folder's tensors actually use: transformers 4
    /// saved them the other way round.
    fn as_found_in(self, dir: &Path) -> Result<Self> {
        if self != Self::NestedLanguageModel {
            return Ok(self);
        }
        let names = super::sources::folder::tensor_sizes(dir)?;
        let older = names.keys().any(|n| n.starts_with(Self::OLDER_NESTED_PREFIX))
            && !names.keys().any(|n| n.starts_with(Self::NESTED_PREFIX));
        Ok(if older { Self::OlderNestedLanguageModel } else { self })
    }
}

/// The `config.json` of a folder's decoder: the file itself, or the part
/// of it describing a language model nested in a larger model (VibeVoice's
/// `decoder_config`; the `text_config` of Qwen3.5, Gemma 3 and SmolVLM /
/// Idefics3, read beside their vision towers), with where the decoder's
/// tensors are.
pub fn folder_decoder_hf_config(text: &str) -> Result<(HfConfig, TensorLayout)> {
    let json: serde_json::Value = serde_json::from_str(text)?;
    let nested = match json.get("model_type").and_then(|t| t.as_str()) {
        Some("vibevoice") => Some("decoder_config"),
        Some("vibevoice_streaming") => bail!(
            "a VibeVoice-Realtime speech model: for now it speaks through `cake tts --voice PRESET` only \
             (not as a text model, and not yet in the app)"
        ),
        Some("qwen3_5" | "qwen3_5_moe" | "gemma3" | "smolvlm" | "idefics3") => Some("text_config"),
        _ => None,
    };
    let text_model = matches!(json.get("model_type").and_then(|t| t.as_str()), Some("smolvlm" | "idefics3"));
    let Some(key) = nested else {
        // `XxxModel` (no `ForCausalLM`): a base model saved alone.
        let classes = json.get("architectures").and_then(|a| a.as_array());
        let base = classes.and_then(|c| c.first()).and_then(|c| c.as_str()).is_some_and(|c| c.ends_with("Model"));
        let layout = if base { TensorLayout::BaseModel } else { TensorLayout::Plain };
        return Ok((serde_json::from_value(json)?, layout));
    };
    let mut decoder = json.get(key).with_context(|| format!("no `{key}`"))?.clone();
    if let (Some(part), Some(outer)) = (decoder.as_object_mut(), json.as_object()) {
        // Settings the outer config may hold for the whole model.
        for inherited in ["tie_word_embeddings", "quantization_config"] {
            if let (false, Some(value)) = (part.contains_key(inherited), outer.get(inherited)) {
                part.insert(inherited.to_string(), value.clone());
            }
        }
    }
    let hf = serde_json::from_value(decoder).with_context(|| format!("`{key}`"))?;
    Ok((hf, if text_model { TensorLayout::NestedTextModel } else { TensorLayout::NestedLanguageModel }))
}

/// The decoder config of a folder's `config.json` and where its tensors are.
fn folder_decoder_config(text: &str) -> Result<(ModelConfig, TensorLayout)> {
    let (hf, layout) = folder_decoder_hf_config(text)?;
    Ok((families::from_hf(&hf)?, layout))
}

/// A checkpoint opened far enough to know its architecture, before weights load.
pub enum Checkpoint {
    Folder { dir: std::path::PathBuf, config: ModelConfig, layout: TensorLayout },
    Gguf { file: Arc<GgufFile>, config: ModelConfig },
}

impl Checkpoint {
    /// Reads `config.json` or the GGUF header at `path`.
    pub fn open(path: &Path) -> Result<Self> {
        if path.is_dir() {
            let config_path = path.join("config.json");
            let text = std::fs::read_to_string(&config_path)
                .with_context(|| format!("{}: cannot read config.json", path.display()))?;
            let (config, layout) =
                folder_decoder_config(&text).with_context(|| format!("{}", config_path.display()))?;
            let layout = layout.as_found_in(path)?;
            Ok(Self::Folder { dir: path.to_path_buf(), config, layout })
        } else if path.is_file() {
            let file = Arc::new(GgufFile::open(path)?);
            let config = families::from_gguf(&file)?;
            Ok(Self::Gguf { file, config })
        } else {
            bail!("{}: no such model file or folder", path.display())
        }
    }

    pub fn config(&self) -> &ModelConfig {
        match self {
            Self::Folder { config, .. } | Self::Gguf { config, .. } => config,
        }
    }

    /// Where the decoder's tensors are (GGUF files use their own names).
    pub fn layout(&self) -> TensorLayout {
        match self {
            Self::Folder { layout, .. } => *layout,
            Self::Gguf { .. } => TensorLayout::Plain,
        }
    }

    /// Stored bytes of the tensors beside the decoder (a vision tower and
    /// its projector, in the folder or in the mmproj file beside a GGUF
    /// file): held where the embedding is, read only for pictures.
    pub fn companion_bytes(&self) -> Result<u64> {
        match self {
            Self::Folder { dir, layout, .. } => Ok(super::sources::folder::tensor_sizes(dir)?
                .into_iter()
                .filter(|(name, _)| layout.decoder_name(name).is_none())
                .map(|(_, bytes)| bytes)
                .sum()),
            // A picture reader that cannot serve is not loaded.
            Self::Gguf { file, config } => match VisionModel::mmproj_beside(&file.path, config.hidden_size) {
                Ok(Some(mmproj)) => Ok(mmproj.stored_bytes()),
                _ => Ok(0),
            },
        }
    }

    /// Stored bytes of each decoder layer and of the decoder's tensors
    /// outside the layers (embedding, final norm, LM head): what a decode
    /// step may read, each tensor's bytes multiplied by `weight` of the
    /// type it is stored in (a folder's tensors count as the float type it
    /// stores).
    pub fn weighed_layer_bytes(&self, weight: impl Fn(GgmlType) -> f64) -> Result<(Vec<u64>, u64)> {
        let mut layers = vec![0f64; self.config().num_hidden_layers()];
        let mut other = 0f64;
        let mut add = |layer: Option<usize>, bytes: f64| match layer {
            Some(i) if i < layers.len() => layers[i] += bytes,
            _ => other += bytes,
        };
        match self {
            Self::Folder { dir, layout, .. } => {
                let stored = match self.stored_float_dtype()? {
                    DType::F16 => GgmlType::F16,
                    DType::BF16 => GgmlType::BF16,
                    _ => GgmlType::F32,
                };
                for (name, bytes) in super::sources::folder::tensor_sizes(dir)? {
                    let Some(name) = layout.decoder_name(&name) else {
                        continue; // beside the decoder: see companion_bytes
                    };
                    add(super::sources::selection::layer_index(&name), bytes as f64 * weight(stored));
                }
            }
            Self::Gguf { file, .. } => {
                for (name, info) in &file.header.tensor_infos {
                    let layer = name.strip_prefix("blk.").and_then(|r| r.split('.').next()?.parse().ok());
                    add(layer, info.byte_size() as f64 * weight(info.ggml_type));
                }
            }
        }
        Ok((layers.into_iter().map(|b| b.round() as u64).collect(), other.round() as u64))
    }

    /// The float dtype a folder's tensors are stored in (and computed in
    /// unless another is chosen); f32 for a GGUF file.
    pub fn stored_float_dtype(&self) -> Result<DType> {
        match self {
            Self::Folder { dir, layout, config } => {
                let selection = TensorSelection::all(config.num_hidden_layers());
                let store = layout.view(SafetensorsFolder::open(dir, |name| {
                    layout.wants(name, &selection, config.tie_word_embeddings)
                })?);
                stored_float_dtype(store.as_ref())
            }
            Self::Gguf { .. } => Ok(DType::F32),
        }
    }

    /// Loads the tensors `selection` names (all of them when `None`).
    pub fn load_decoder(&self, selection: Option<TensorSelection>, options: &LoadOptions) -> Result<Decoder> {
        self.load_decoder_with_progress(selection, options, &mut |_, _| {})
    }

    /// Like [`Self::load_decoder`], calling `on_layer(done, total)` as layers load.
    pub fn load_decoder_with_progress(
        &self,
        selection: Option<TensorSelection>,
        options: &LoadOptions,
        on_layer: &mut dyn FnMut(usize, usize),
    ) -> Result<Decoder> {
        let config = self.config().clone();
        let context_length = super::context::context_length(&config, options.context_length)?;
        let selection = selection.unwrap_or_else(|| TensorSelection::all(config.num_hidden_layers()));
        let weights = match self {
            Self::Folder { dir, layout, .. } => {
                let store = layout.view(SafetensorsFolder::open(dir, |name| {
                    layout.wants(name, &selection, config.tie_word_embeddings)
                })?);
                let dtype = match options.dtype {
                    Some(d) => d,
                    None => stored_float_dtype(store.as_ref())?,
                };
                let policy = LoadPolicy { dtype, keep_quantized: false };
                let mut weights = Weights::new(store, policy, options.device.clone());
                weights.fp8_block_size = config.fp8_block_size;
                weights
            }
            Self::Gguf { file, config } => {
                let policy = match options.dtype {
                    None => LoadPolicy { dtype: DType::F32, keep_quantized: true },
                    Some(dtype) => LoadPolicy { dtype, keep_quantized: false },
                };
                Weights::new(Box::new(GgufStore::new(file.clone(), config)), policy, options.device.clone())
            }
        };
        Decoder::load_placed(config, &weights, selection, context_length, options.gpu, on_layer)
    }
}

/// The float dtype the checkpoint stores its tensors in, when candle can
/// compute in it; otherwise f32.
fn stored_float_dtype(store: &dyn WeightStore) -> Result<DType> {
    let probe = ["model.embed_tokens.weight", "model.norm.weight"]
        .into_iter()
        .chain(std::iter::once("model.layers.0.input_layernorm.weight"))
        .find(|name| store.contains(name));
    let Some(name) = probe else {
        return Ok(DType::F32);
    };
    Ok(match store.load(name, &Device::Cpu)? {
        StoredTensor::Dense(t) if matches!(t.dtype(), DType::F16 | DType::BF16 | DType::F32) => t.dtype(),
        _ => DType::F32,
    })
}
