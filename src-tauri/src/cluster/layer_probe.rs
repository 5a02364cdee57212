//! What a decoder layer costs beyond streaming its weights: decoder layers
//! of a small model's shape (hidden 576, 9 query and 3 key/value heads of
//! 64, feed-forward 1536, Q8_0 weights, as the default model), built with
//! the engine's own code, are stepped with 128 positions cached; what the
//! step takes beyond their weights' bytes at the machine's measured decode
//! speed (norms, rotary positions, the KV cache, attention, activations,
//! the pool's hand-offs, small matrices read less efficiently than a large
//! one) is paid by every layer of every model at every step, and is what
//! makes a small model's step several times longer than streaming its
//! weights would take. [`CPU_LAYERS`] distinct layers hold more than the
//! processor's caches, so their weights come from memory as a model's do.
//! The same layers run on a GPU measure what a layer costs there (fewer:
//! kernel launches, not weights, make a GPU layer's fixed cost).

use super::machine::{q8_0_matrix, synthetic_blocks};
use crate::formats::gguf_header::GgmlType;
use crate::models::config::HfConfig;
use crate::models::decoder::Decoder;
use crate::models::families;
use crate::models::gpu_offload::{GpuMode, GpuRequest};
use crate::models::sources::selection::TensorSelection;
use crate::models::weights::{LoadPolicy, StoredTensor, WeightStore, Weights};
use anyhow::{bail, Context, Result};
use cake_kernels::ggml_blocks::GgmlFormat;
use cake_kernels::packed::PackedMatrix;
use candle_core::{DType, Device, Tensor};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

const HIDDEN: usize = 576;
const FEED_FORWARD: usize = 1536;
const HEAD_DIM: usize = 64;
const HEADS: usize = 9;
const KV_HEADS: usize = 3;
/// Positions in the cache while a step is timed.
const CACHED: usize = 128;
/// Layers stepped on a CPU: 45 MB of weights, more than a processor's
/// last-level cache.
const CPU_LAYERS: usize = 12;
/// Layers stepped on a GPU.
const GPU_LAYERS: usize = 4;

/// The layers' tensors, made up (speed does not depend on the values).
struct SyntheticLayers {
    matrices: HashMap<String, Arc<PackedMatrix>>,
}

impl SyntheticLayers {
    fn new(layers: usize) -> Self {
        let shapes = [
            ("self_attn.q_proj", HEADS * HEAD_DIM, HIDDEN),
            ("self_attn.k_proj", KV_HEADS * HEAD_DIM, HIDDEN),
            ("self_attn.v_proj", KV_HEADS * HEAD_DIM, HIDDEN),
            ("self_attn.o_proj", HIDDEN, HEADS * HEAD_DIM),
            ("mlp.gate_proj", FEED_FORWARD, HIDDEN),
            ("mlp.up_proj", FEED_FORWARD, HIDDEN),
            ("mlp.down_proj", HIDDEN, FEED_FORWARD),
        ];
        let matrices = (0..layers)
            .flat_map(|layer| {
                shapes.map(|(name, rows, cols)| {
                    (format!("model.layers.{layer}.{name}.weight"), Arc::new(q8_0_matrix(rows, cols)))
                })
            })
            .collect();
        Self { matrices }
    }

    fn bytes(&self) -> usize {
        self.matrices.values().map(|m| m.bytes()).sum()
    }
}

impl WeightStore for SyntheticLayers {
    fn origin(&self) -> String {
        "synthetic layers".into()
    }

    fn contains(&self, name: &str) -> bool {
        self.shape(name).is_some()
    }

    fn shape(&self, name: &str) -> Option<Vec<usize>> {
        if name.ends_with("layernorm.weight") {
            return Some(vec![HIDDEN]);
        }
        self.matrices.get(name).map(|m| vec![m.rows, m.cols])
    }

    fn load(&self, name: &str, device: &Device) -> Result<StoredTensor> {
        if name.ends_with("layernorm.weight") {
            return Ok(StoredTensor::Dense(Tensor::ones(HIDDEN, DType::F32, device)?));
        }
        let matrix = self.matrices.get(name).with_context(|| format!("the synthetic layers have no {name}"))?;
        Ok(StoredTensor::Packed(matrix.clone()))
    }

    /// The blocks as a file would hold them, for the GPU.
    fn with_stored_bytes(&self, name: &str, f: &mut dyn FnMut(GgmlType, &[u8]) -> Result<()>) -> Option<Result<()>> {
        let matrix = self.matrices.get(name)?;
        Some(f(GgmlType::Q8_0, &synthetic_blocks(GgmlFormat::Q8_0, matrix.rows, matrix.cols)))
    }
}

/// The model of `layers` synthetic layers.
fn config(layers: usize) -> Result<HfConfig> {
    HfConfig::parse(&format!(
        r#"{{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": {HIDDEN},
            "intermediate_size": {FEED_FORWARD}, "num_attention_heads": {HEADS},
            "num_key_value_heads": {KV_HEADS}, "num_hidden_layers": {layers}, "vocab_size": 64,
            "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "max_position_embeddings": 1024,
            "hidden_act": "silu", "tie_word_embeddings": true}}"#
    ))
}

/// Seconds a decoder layer's step takes beyond reading its weights at
/// `decode_bytes_per_second` (the median of repeated runs within `budget`,
/// at least 5), on the CPU or, as `gpu` asks, on the GPU.
pub fn layer_overhead_seconds(budget: Duration, decode_bytes_per_second: f64, gpu: GpuRequest) -> Result<f64> {
    let count = if gpu.mode == GpuMode::Off { CPU_LAYERS } else { GPU_LAYERS };
    let layers = SyntheticLayers::new(count);
    let bytes = layers.bytes();
    let config = families::from_hf(&config(count)?)?;
    let policy = LoadPolicy { dtype: DType::F32, keep_quantized: true };
    let weights = Weights::new(Box::new(layers), policy, Device::Cpu);
    let selection = TensorSelection { layers: 0..count, embedding: false, head: false };
    let decoder = Decoder::load_placed(config, &weights, selection, 2 * CACHED, gpu, &mut |_, _| {})?;
    if gpu.mode != GpuMode::Off && decoder.gpu.layers.len() != count {
        bail!("the GPU did not take the synthetic layers: {}", decoder.gpu.describe(count));
    }
    let values = |n: usize| {
        Tensor::from_vec(
            (0..n).map(|i| ((i * 7919) % 2001) as f32 / 1000.0 - 1.0).collect(),
            (1, n / HIDDEN, HIDDEN),
            &Device::Cpu,
        )
    };
    let mut cache = decoder.new_cache();
    decoder.forward_layers(&values(CACHED * HIDDEN)?, &mut cache)?;
    let step = values(HIDDEN)?;
    let step_seconds = median_seconds(budget, || {
        decoder.forward_layers(&step, &mut cache)?;
        cache.truncate(CACHED);
        Ok(())
    })?;
    Ok(((step_seconds - bytes as f64 / decode_bytes_per_second) / count as f64).max(0.0))
}

/// The median time of `run`, over at least 5 runs and more while `budget`
/// lasts (at most 200).
pub(super) fn median_seconds(budget: Duration, mut run: impl FnMut() -> Result<()>) -> Result<f64> {
    let began = Instant::now();
    let mut times = Vec::new();
    while times.len() < 5 || (times.len() < 200 && began.elapsed() < budget) {
        let start = Instant::now();
        run()?;
        times.push(start.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_layers_fixed_cost_is_a_plausible_figure() {
        // Zero is possible: on a busy machine the decode speed measured a
        // moment before can be more than the layers see.
        let overhead = layer_overhead_seconds(Duration::from_millis(40), 20e9, GpuRequest::default()).unwrap();
        assert!((0.0..0.05).contains(&overhead), "{overhead} s per layer");
    }
}
