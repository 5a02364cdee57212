//! What a model needs in memory for a chosen context length: its weights,
//! the keys and values (or recurrent state) each layer keeps, and the
//! working memory of a forward pass. A cluster's plan counts all of them,
//! so that a machine given layers can also hold their cache at full context.

use super::config::{LayerAttention, ModelConfig, TokenMixer};
use super::context::{context_length, kv_positions, PREFILL_CHUNK};
use super::gpu_offload::layer_cache_vram;
use super::loader::{Checkpoint, LoadOptions};
use super::nn::gpu_block;
use super::nn::kv_cache::KvPrecision;
use crate::formats::gguf_header::GgmlType;
use anyhow::Result;
use candle_core::DType;
use serde::Serialize;
use std::ops::Range;

/// Each machine's share is planned this much larger than its estimate
/// (allocator slack, buffers the estimate does not name).
const SAFETY_MARGIN: f64 = 0.05;

/// The memory a model needs, part by part, for one conversation at full context.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemoryNeeds {
    /// Tokens the model runs in (prompt and reply together).
    pub context_length: usize,
    /// Per layer: bytes of weights, as stored.
    pub layer_weights: Vec<u64>,
    /// Per layer: bytes of keys and values (or recurrent state) at full context.
    pub layer_kv: Vec<u64>,
    /// Embedding, final norm, head and a vision tower: held by the master.
    pub other_weights: u64,
    /// Per layer: what a decode step reads, in bytes of Q8_0 that take as
    /// long to multiply (the stored bytes, until [`Self::weigh_reads`]).
    pub layer_reads: Vec<u64>,
    /// The same for the embedding, final norm and head (a vision tower is
    /// not read by a decode step).
    pub other_reads: u64,
    /// Per layer: VRAM it takes on a GPU (weights as stored, its cache
    /// counted as f32, see [`layer_cache_vram`]); `None` where the GPU
    /// cannot run it (it stays on the CPU).
    pub layer_gpu_vram: Vec<Option<u64>>,
    /// Working memory of a forward pass on a machine that runs layers.
    pub activations: u64,
    /// Each machine's share is planned this fraction larger than its estimate.
    pub safety_margin: f64,
}

impl MemoryNeeds {
    /// The needs of `checkpoint` loaded with `options`, from its header
    /// only: nothing is loaded.
    pub fn of(checkpoint: &Checkpoint, options: &LoadOptions) -> Result<Self> {
        let config = checkpoint.config();
        let context_length = context_length(config, options.context_length)?;
        let (layer_weights, decoder_other) = checkpoint.weighed_layer_bytes(|_| 1.0)?;
        let other_weights = decoder_other + checkpoint.companion_bytes()?;
        let kv_value_bytes = kv_value_bytes(checkpoint, options)?;
        let layer_kv =
            config.layers.iter().map(|layer| layer_kv_bytes(config, layer, context_length, kv_value_bytes)).collect();
        let activations = activation_bytes(config, context_length);
        let cache_vram = layer_cache_vram(config.num_key_value_heads, config.head_dim, context_length);
        let layer_gpu_vram = (0..config.num_hidden_layers())
            .map(|i| gpu_block::unsupported(config, i).is_none().then(|| layer_weights[i] + cache_vram))
            .collect();
        Ok(Self {
            layer_gpu_vram,
            context_length,
            layer_reads: layer_weights.clone(),
            other_reads: decoder_other,
            layer_weights,
            layer_kv,
            other_weights,
            activations,
            safety_margin: SAFETY_MARGIN,
        })
    }

    /// Weighs what a decode step reads by how long each stored type takes
    /// to multiply: `cost` gives a type's time per byte relative to Q8_0's.
    pub fn weigh_reads(&mut self, checkpoint: &Checkpoint, cost: impl Fn(GgmlType) -> f64) -> Result<()> {
        (self.layer_reads, self.other_reads) = checkpoint.weighed_layer_bytes(cost)?;
        Ok(())
    }

    /// Bytes a machine needs to run `layers` (and, on the master, the
    /// embedding and head): weights, caches at full context, working memory,
    /// and the safety margin. A machine with no layers needs nothing.
    pub fn machine_bytes(&self, layers: Range<usize>, master: bool) -> u64 {
        if layers.is_empty() && !master {
            return 0;
        }
        self.ram_bytes(layers, master)
    }

    /// Bytes of RAM a machine that runs `layers` on its CPU needs, as
    /// [`Self::machine_bytes`] counts them (layers on its GPU are not
    /// listed; the working memory is counted even when none are).
    pub fn ram_bytes(&self, layers: impl IntoIterator<Item = usize>, master: bool) -> u64 {
        let layers = layers.into_iter().map(|l| self.layer_weights[l] + self.layer_kv[l]).sum::<u64>();
        let own = layers + self.activations + if master { self.other_weights } else { 0 };
        own + (own as f64 * self.safety_margin) as u64
    }

    /// Bytes of the weights of `layers`, as stored.
    pub fn weights(&self, layers: Range<usize>) -> u64 {
        self.layer_weights[layers].iter().sum()
    }

    /// What a decode step of `layers` reads (see [`Self::layer_reads`]).
    pub fn reads(&self, layers: Range<usize>) -> u64 {
        self.layer_reads[layers].iter().sum()
    }

    /// Bytes of the caches of `layers` at full context.
    pub fn kv(&self, layers: Range<usize>) -> u64 {
        self.layer_kv[layers].iter().sum()
    }
}

/// Bytes one cached key or value takes: f16 where the decoder keeps f32
/// keys and values in f16 (weights in GGML types below f32), else the
/// compute dtype's size.
fn kv_value_bytes(checkpoint: &Checkpoint, options: &LoadOptions) -> Result<u64> {
    let computed = match (options.dtype, checkpoint) {
        (Some(dtype), _) => dtype,
        (None, Checkpoint::Gguf { file, .. }) => {
            let below_f32 =
                file.header.tensor_infos.values().any(|info| info.dims.len() == 2 && info.ggml_type != GgmlType::F32);
            return Ok(match KvPrecision::for_weights(below_f32) {
                KvPrecision::F16 => 2,
                KvPrecision::F32 => 4,
            });
        }
        (None, Checkpoint::Folder { .. }) => checkpoint.stored_float_dtype()?,
    };
    Ok(match computed {
        DType::F16 | DType::BF16 => 2,
        DType::F64 => 8,
        _ => 4,
    })
}

/// A layer's cache at full context: keys and values for attention, the
/// recurrent state (f32) and convolution history for Gated DeltaNet.
fn layer_kv_bytes(config: &ModelConfig, layer: &LayerAttention, context: usize, value_bytes: u64) -> u64 {
    match (layer.mixer, &config.gated_delta_net) {
        (TokenMixer::GatedDeltaNet, Some(net)) => {
            let state = net.num_value_heads * net.key_head_dim * net.value_head_dim;
            let channels = 2 * net.num_key_heads * net.key_head_dim + net.num_value_heads * net.value_head_dim;
            4 * (state + net.conv_kernel.saturating_sub(1) * channels) as u64
        }
        _ => {
            let per_position = 2 * config.num_key_value_heads * config.head_dim;
            (per_position * kv_positions(layer, context)) as u64 * value_bytes
        }
    }
}

/// Working memory of one forward pass of [`PREFILL_CHUNK`] tokens, in f32:
/// the hidden states and their norms, the projections, the feed-forward
/// block's widest temporaries, and (where attention is computed outside
/// Cake's in-place kernel: sliding windows) the score matrix; twice that,
/// as a step's inputs and outputs are alive together.
fn activation_bytes(config: &ModelConfig, context: usize) -> u64 {
    let hidden = 4 * config.hidden_size;
    let projections = (2 * config.num_attention_heads + 2 * config.num_key_value_heads) * config.head_dim;
    let expert_width = config.moe.as_ref().map_or(0, |moe| moe.experts_per_token * moe.expert_intermediate_size);
    let feed_forward = 3 * config.intermediate_size.max(expert_width);
    let per_token = hidden + projections + feed_forward;
    let windowed = config.layers.iter().filter_map(|l| l.sliding_window).map(|w| w + PREFILL_CHUNK).max();
    let scores = windowed.map_or(0, |w| 2 * config.num_attention_heads * w.min(context));
    (2 * 4 * PREFILL_CHUNK * (per_token + scores)) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn needs(weights: &[u64], kv: &[u64]) -> MemoryNeeds {
        MemoryNeeds {
            context_length: 4096,
            layer_weights: weights.to_vec(),
            layer_kv: kv.to_vec(),
            other_weights: 1000,
            layer_reads: weights.to_vec(),
            other_reads: 1000,
            layer_gpu_vram: vec![None; weights.len()],
            activations: 100,
            safety_margin: 0.1,
        }
    }

    /// A machine's share is its layers' weights and caches, the working
    /// memory, the master's embedding and head, and the margin.
    #[test]
    fn a_share_counts_weights_caches_working_memory_and_the_margin() {
        let needs = needs(&[200, 200, 200], &[40, 40, 40]);
        assert_eq!(needs.machine_bytes(1..3, false), 638, "(2 × 240 + 100) × 1.1");
        assert_eq!(needs.machine_bytes(0..1, true), 1474, "(240 + 100 + 1000) × 1.1");
        assert_eq!(needs.machine_bytes(2..2, false), 0, "a worker without layers needs nothing");
    }

    /// A vision tower beside the decoder is held by the master but not read
    /// by a decode step.
    #[test]
    fn a_vision_tower_is_held_by_the_master_and_not_read_per_token() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/tiny/gemma3_vision");
        let tower: u64 = crate::models::sources::folder::tensor_sizes(&path)
            .unwrap()
            .into_iter()
            .filter(|(name, _)| name.starts_with("vision_tower.") || name.starts_with("multi_modal_projector."))
            .map(|(_, bytes)| bytes)
            .sum();
        assert!(tower > 0);
        let checkpoint = Checkpoint::open(&path).unwrap();
        let mut needs = MemoryNeeds::of(&checkpoint, &LoadOptions::default()).unwrap();
        assert_eq!(needs.other_weights - needs.other_reads, tower);
        needs.weigh_reads(&checkpoint, |_| 1.0).unwrap();
        assert_eq!(needs.other_weights - needs.other_reads, tower, "weighing reads leaves the tower out too");

        // The same model as GGUF files: the mmproj file beside it holds the tower.
        let mmproj = crate::formats::gguf::GgufFile::open(&path.join("mmproj-f32.gguf")).unwrap();
        let tower: u64 = mmproj.header.tensor_infos.values().map(|t| t.byte_size()).sum();
        let checkpoint = Checkpoint::open(&path.join("model-f32.gguf")).unwrap();
        let needs = MemoryNeeds::of(&checkpoint, &LoadOptions::default()).unwrap();
        assert_eq!(needs.other_weights - needs.other_reads, tower);
    }

    /// What a step reads is each tensor's bytes weighed by its stored type:
    /// in a Q8_0 file, the norms stay f32 and the matrices are Q8_0.
    #[test]
    fn reads_weigh_each_tensor_by_its_stored_type() {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/tiny/gemma3_gguf/model-q8_0.gguf");
        let checkpoint = Checkpoint::open(&path).unwrap();
        let mut needs = MemoryNeeds::of(&checkpoint, &LoadOptions::default()).unwrap();
        assert_eq!((needs.layer_reads.clone(), needs.other_reads), (needs.layer_weights.clone(), needs.other_weights));
        needs.weigh_reads(&checkpoint, |t| if t == GgmlType::Q8_0 { 3.0 } else { 1.0 }).unwrap();
        let (weights, reads) = (needs.weights(0..needs.layer_weights.len()), needs.reads(0..needs.layer_reads.len()));
        assert!(reads > 2 * weights && reads < 3 * weights, "{reads} read for {weights} stored");
        needs.weigh_reads(&checkpoint, |_| 0.5).unwrap();
        assert_eq!(needs.reads(0..1), needs.weights(0..1).div_ceil(2));
    }
}
