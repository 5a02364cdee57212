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
//! Microsoft's presets hold the same tensors in a torch pickle
//! (docs/vibevoice.md, "Realtime"). The text-free text branch (`neg_lm`) is
//! never run again, so it is optional here.

use crate::formats::safetensors::SafetensorsFile;
use crate::models::decoder::Decoder;
use crate::models::nn::kv_cache::KvCache;
use anyhow::{bail, Context, Result};
use candle_core::{DType, Device, Tensor};
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
    /// Reads the preset at `path`, checking every tensor's presence and
    /// shape from the header before any is read.
    pub fn load(path: &Path, shape: &PresetShape) -> Result<Self> {
        let file = SafetensorsFile::open(path).with_context(|| format!("{}: not a voice preset", path.display()))?;
        let branch = |name: &str, layers: usize| {
            read_branch(&file, name, layers, shape).with_context(|| format!("{}: voice preset", path.display()))
        };
        Ok(Self {
            lm: branch("lm", shape.text_layers)?,
            tts_lm: branch("tts_lm", shape.speech_layers)?,
            neg_tts_lm: branch("neg_tts_lm", shape.speech_layers)?,
        })
    }
}

/// Branch `name` of `layers` layers from `file`.
fn read_branch(file: &SafetensorsFile, name: &str, layers: usize, shape: &PresetShape) -> Result<BranchState> {
    let dims = |tensor: &str| -> Result<Vec<usize>> {
        file.entry(tensor).map(|e| e.shape.clone()).with_context(|| format!("`{tensor}` is missing"))
    };
    let hidden_name = format!("{name}.last_hidden_state");
    let hidden_dims = dims(&hidden_name)?;
    let positions = match hidden_dims.as_slice() {
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
    if file.entry(&format!("{name}.layers.{layers}.key")).is_some() {
        bail!("branch `{name}` has more than the model's {layers} layers");
    }
    let load = |tensor: &str| -> Result<Tensor> { Ok(file.load(tensor, &Device::Cpu)?.to_dtype(DType::F32)?) };
    let last_hidden = load(&hidden_name)?.get(0)?.get(positions - 1)?;
    let layers = (0..layers)
        .map(|i| Ok((load(&format!("{name}.layers.{i}.key"))?, load(&format!("{name}.layers.{i}.value"))?)))
        .collect::<Result<_>>()?;
    Ok(BranchState { last_hidden, layers })
}
