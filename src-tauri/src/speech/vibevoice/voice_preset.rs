//! A VibeVoice-Realtime voice: the model's state after reading the voice's
//! prompt, kept so that speech in that voice starts at once. A preset is a
//! safetensors file holding, for each branch (`lm`: the text stack,
//! `tts_lm`: the speech stack, and their text-free twins `neg_lm` and
//! `neg_tts_lm` that guidance contrasts with):
//!
//! - `{branch}.last_hidden_state` `[1, n, hidden]`: the stack's output at
//!   each of the prompt's `n` positions (only the last is used);
//! - `{branch}.layers.{i}.key` / `.value` `[1, kv_heads, n, head_dim]`: the
//!   attention cache of layer `i`, keys already rotated to their positions.
//!
//! Microsoft's presets (`.pt`, from `torch.save`) hold the same tensors as
//! a dict of four `BaseModelOutputWithPast` with a `DynamicCache` each
//! (docs/vibevoice.md, "Realtime"); they are read too, without running
//! their pickle. The text-free text branch (`neg_lm`) is never run again,
//! so it is optional.

use crate::formats::safetensors::SafetensorsFile;
use crate::formats::torch_pickle::{TensorRef, TorchFile, Value};
use crate::models::decoder::Decoder;
use crate::models::nn::kv_cache::KvCache;
use anyhow::{bail, Context, Result};
use candle_core::{DType, Device, Tensor};
use std::collections::BTreeMap;
use std::path::Path;

/// What a preset must fit: the two stacks' shapes.
#[derive(Debug, Clone, Copy)]
pub struct PresetShape {
    pub hidden: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub text_layers: usize,
    pub speech_layers: usize,
    /// Most positions a branch may hold (the model's context length).
    pub max_positions: usize,
}

/// One branch's state after the prompt.
pub struct BranchState {
    /// The last position's output `[hidden]`.
    pub last_hidden: Tensor,
    /// Per layer, keys and values `[1, kv_heads, n, head_dim]`.
    pub layers: Vec<(Tensor, Tensor)>,
}

impl BranchState {
    /// Positions the branch has read.
    pub fn positions(&self) -> usize {
        self.layers.first().map_or(0, |(k, _)| k.dims()[2])
    }

    /// A cache for `decoder` (a stack of as many layers) holding this state.
    pub fn cache(&self, decoder: &Decoder) -> Result<KvCache> {
        let mut cache = decoder.new_cache();
        if cache.layers.len() != self.layers.len() {
            bail!("a preset branch of {} layers for a stack of {}", self.layers.len(), cache.layers.len());
        }
        for (layer, (keys, values)) in cache.layers.iter_mut().zip(&self.layers) {
            let dtype = decoder.dtype();
            layer.append(&keys.to_dtype(dtype)?, &values.to_dtype(dtype)?)?;
        }
        Ok(cache)
    }
}

/// A voice's preset, checked against the model it is for.
pub struct VoicePreset {
    pub lm: BranchState,
    pub tts_lm: BranchState,
    pub neg_tts_lm: BranchState,
}

impl VoicePreset {
    /// Reads the preset at `path` (safetensors, or a `.pt` of Microsoft's),
    /// checking every tensor's presence and shape before any is read.
    pub fn load(path: &Path, shape: &PresetShape) -> Result<Self> {
        let source = PresetFile::open(path)?;
        let branch = |name: &str, layers: usize| {
            read_branch(&source, name, layers, shape).with_context(|| format!("{}: voice preset", path.display()))
        };
        Ok(Self {
            lm: branch("lm", shape.text_layers)?,
            tts_lm: branch("tts_lm", shape.speech_layers)?,
            neg_tts_lm: branch("neg_tts_lm", shape.speech_layers)?,
        })
    }
}

/// A preset file's tensors, by Cake's names (`{branch}.last_hidden_state`,
/// `{branch}.layers.{i}.key` / `.value`).
enum PresetFile {
    Safetensors(SafetensorsFile),
    Torch { file: TorchFile, tensors: BTreeMap<String, TensorRef> },
}

impl PresetFile {
    fn open(path: &Path) -> Result<Self> {
        let mut magic = [0u8; 2];
        let is_zip = std::fs::File::open(path)
            .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut magic))
            .is_ok_and(|()| &magic == b"PK");
        if !is_zip {
            let file =
                SafetensorsFile::open(path).with_context(|| format!("{}: not a voice preset", path.display()))?;
            return Ok(Self::Safetensors(file));
        }
        let file = TorchFile::open(path).with_context(|| format!("{}: not a voice preset", path.display()))?;
        let tensors = torch_tensors(&file.root).with_context(|| format!("{}: not a voice preset", path.display()))?;
        Ok(Self::Torch { file, tensors })
    }

    fn shape(&self, name: &str) -> Option<Vec<usize>> {
        match self {
            Self::Safetensors(file) => file.entry(name).map(|e| e.shape.clone()),
            Self::Torch { tensors, .. } => tensors.get(name).map(|t| t.shape.clone()),
        }
    }

    fn load(&self, name: &str) -> Result<Tensor> {
        let tensor = match self {
            Self::Safetensors(file) => file.load(name, &Device::Cpu)?,
            Self::Torch { file, tensors } => {
                file.load(tensors.get(name).with_context(|| format!("`{name}` is missing"))?, &Device::Cpu)?
            }
        };
        Ok(tensor.to_dtype(DType::F32)?)
    }
}

/// Cake's names for the tensors of a `.pt` preset: a dict of branches, each
/// `BaseModelOutputWithPast(last_hidden_state, past_key_values)` whose cache
/// is a `DynamicCache` with `key_cache` and `value_cache` lists.
fn torch_tensors(root: &Value) -> Result<BTreeMap<String, TensorRef>> {
    let Value::Dict(branches) = root else { bail!("the pickle holds no dict of branches") };
    let mut tensors = BTreeMap::new();
    for (key, output) in branches {
        let Value::Str(branch) = key else { continue };
        let Value::Object { args, state, .. } = output else { bail!("branch `{branch}` is not a model output") };
        // Positional fields, or (another version) the instance's state.
        let field = |index: usize, name: &str| {
            args.get(index).or_else(|| state.as_deref().and_then(|s| s.get(name))).filter(|v| **v != Value::None)
        };
        if let Some(Value::Tensor(hidden)) = field(0, "last_hidden_state") {
            tensors.insert(format!("{branch}.last_hidden_state"), hidden.clone());
        }
        let Some(Value::Object { state: Some(cache), .. }) = field(1, "past_key_values") else {
            bail!("branch `{branch}` has no cache");
        };
        for (list, part) in [("key_cache", "key"), ("value_cache", "value")] {
            let Some(Value::List(layers)) = cache.get(list) else { bail!("branch `{branch}` has no {list}") };
            for (i, layer) in layers.iter().enumerate() {
                let Value::Tensor(t) = layer else { bail!("branch `{branch}`: {list}[{i}] is not a tensor") };
                tensors.insert(format!("{branch}.layers.{i}.{part}"), t.clone());
            }
        }
    }
    Ok(tensors)
}

/// Checks branch `name` of `file` against `shape` (a stack of `layers`
/// layers) without reading any values; returns its positions.
fn check_branch(file: &PresetFile, name: &str, layers: usize, shape: &PresetShape) -> Result<usize> {
    let dims =
        |tensor: &str| -> Result<Vec<usize>> { file.shape(tensor).with_context(|| format!("`{tensor}` is missing")) };
    let hidden_name = format!("{name}.last_hidden_state");
    let positions = match dims(&hidden_name)?.as_slice() {
        [1, n, h] if *h == shape.hidden && *n >= 1 && *n <= shape.max_positions => *n,
        other => bail!(
            "`{hidden_name}` has shape {other:?}; [1, n, {}] with 1 ≤ n ≤ {} was expected",
            shape.hidden,
            shape.max_positions
        ),
    };
    let cache_shape = [1, shape.kv_heads, positions, shape.head_dim];
    for i in 0..layers {
        for part in ["key", "value"] {
            let tensor = format!("{name}.layers.{i}.{part}");
            let found = dims(&tensor)?;
            if found != cache_shape {
                bail!("`{tensor}` has shape {found:?}; {cache_shape:?} was expected");
            }
        }
    }
    if file.shape(&format!("{name}.layers.{layers}.key")).is_some() {
        bail!("branch `{name}` has more than the model's {layers} layers");
    }
    Ok(positions)
}

/// Branch `name` of `layers` layers from `file`, checked first.
fn read_branch(file: &PresetFile, name: &str, layers: usize, shape: &PresetShape) -> Result<BranchState> {
    let positions = check_branch(file, name, layers, shape)?;
    let last_hidden = file.load(&format!("{name}.last_hidden_state"))?.get(0)?.get(positions - 1)?;
    let layers = (0..layers)
        .map(|i| Ok((file.load(&format!("{name}.layers.{i}.key"))?, file.load(&format!("{name}.layers.{i}.value"))?)))
        .collect::<Result<_>>()?;
    Ok(BranchState { last_hidden, layers })
}

/// What a preset file holds, read from its tensors' shapes alone: the
/// shape of the model it was made for, and its speech stack's positions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PresetSummary {
    pub hidden: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub text_layers: usize,
    pub speech_layers: usize,
    /// Positions the speech stack has read (the voice's prompt and its text).
    pub positions: usize,
}

/// Most layers a stack of a preset may have (Qwen2.5-0.5B has 24).
const MAX_LAYERS: usize = 256;

impl PresetSummary {
    /// Checks that the file at `path` is a complete voice preset (every
    /// branch, consistent shapes) without reading its values.
    pub fn read(path: &Path) -> Result<Self> {
        let file = PresetFile::open(path)?;
        Self::of(&file).with_context(|| format!("{}: not a usable voice preset", path.display()))
    }

    fn of(file: &PresetFile) -> Result<Self> {
        let hidden_dims = file.shape("lm.last_hidden_state").context("`lm.last_hidden_state` is missing")?;
        let key_dims = file.shape("lm.layers.0.key").context("`lm.layers.0.key` is missing")?;
        let (&[1, _, hidden], &[1, kv_heads, _, head_dim]) = (hidden_dims.as_slice(), key_dims.as_slice()) else {
            bail!(
                "`lm.last_hidden_state` {hidden_dims:?} and `lm.layers.0.key` {key_dims:?} are not a state and a cache"
            );
        };
        let layers_of = |branch: &str| {
            (0..MAX_LAYERS).take_while(|i| file.shape(&format!("{branch}.layers.{i}.key")).is_some()).count()
        };
        let (text_layers, speech_layers) = (layers_of("lm"), layers_of("tts_lm"));
        if speech_layers == 0 {
            bail!("`tts_lm.layers.0.key` is missing");
        }
        let shape = PresetShape { hidden, kv_heads, head_dim, text_layers, speech_layers, max_positions: usize::MAX };
        check_branch(file, "lm", text_layers, &shape)?;
        let positions = check_branch(file, "tts_lm", speech_layers, &shape)?;
        check_branch(file, "neg_tts_lm", speech_layers, &shape)?;
        Ok(Self { hidden, kv_heads, head_dim, text_layers, speech_layers, positions })
    }
}
