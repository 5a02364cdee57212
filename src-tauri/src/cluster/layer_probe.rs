//! What a decoder layer costs beyond its weights' products: a synthetic
//! layer of a small model's shape (hidden 576, 9 query and 3 key/value
//! heads of 64, feed-forward 1536, Q8_0 weights, as the default model) is
//! built with the engine's own code and stepped with 128 positions cached;
//! the same products timed alone are taken off. What remains (norms,
//! rotary positions, the KV cache, attention, activations, the pool's
//! hand-offs) is paid by every layer of every model at every step, and is
//! what makes a small model's step several times longer than streaming
//! its weights would take.

use super::machine::q8_0_matrix;
use crate::models::config::HfConfig;
use crate::models::decoder::Decoder;
use crate::models::families;
use crate::models::sources::selection::TensorSelection;
use crate::models::weights::{LoadPolicy, StoredTensor, WeightStore, Weights};
use anyhow::{Context, Result};
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

/// One layer's tensors, made up (speed does not depend on the values).
struct SyntheticLayer {
    matrices: HashMap<String, Arc<PackedMatrix>>,
}

impl SyntheticLayer {
    fn new() -> Self {
        let shapes = [
            ("self_attn.q_proj", HEADS * HEAD_DIM, HIDDEN),
            ("self_attn.k_proj", KV_HEADS * HEAD_DIM, HIDDEN),
            ("self_attn.v_proj", KV_HEADS * HEAD_DIM, HIDDEN),
            ("self_attn.o_proj", HIDDEN, HEADS * HEAD_DIM),
            ("mlp.gate_proj", FEED_FORWARD, HIDDEN),
            ("mlp.up_proj", FEED_FORWARD, HIDDEN),
            ("mlp.down_proj", HIDDEN, FEED_FORWARD),
        ];
        let matrices = shapes
            .into_iter()
            .map(|(name, rows, cols)| (format!("model.layers.0.{name}.weight"), Arc::new(q8_0_matrix(rows, cols))))
            .collect();
        Self { matrices }
    }

    /// The products of one decode step, as the layer runs them: q, k and v
    /// together, the output, gate and up together, down.
    fn products(&self) -> [Vec<&PackedMatrix>; 4] {
        let m = |name: &str| self.matrices[&format!("model.layers.0.{name}.weight")].as_ref();
        [
            vec![m("self_attn.q_proj"), m("self_attn.k_proj"), m("self_attn.v_proj")],
            vec![m("self_attn.o_proj")],
            vec![m("mlp.gate_proj"), m("mlp.up_proj")],
            vec![m("mlp.down_proj")],
        ]
    }
}

impl WeightStore for SyntheticLayer {
    fn origin(&self) -> String {
        "a synthetic layer".into()
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
        let matrix = self.matrices.get(name).with_context(|| format!("a synthetic layer has no {name}"))?;
        Ok(StoredTensor::Packed(matrix.clone()))
    }
}

/// The model a synthetic layer belongs to.
fn config() -> Result<HfConfig> {
    HfConfig::parse(&format!(
        r#"{{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": {HIDDEN},
            "intermediate_size": {FEED_FORWARD}, "num_attention_heads": {HEADS},
            "num_key_value_heads": {KV_HEADS}, "num_hidden_layers": 1, "vocab_size": 64,
            "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "max_position_embeddings": 1024,
            "hidden_act": "silu", "tie_word_embeddings": true}}"#
    ))
}

/// Seconds a decoder layer's step takes beyond its products (the median
/// of repeated runs within `budget`, at least 5 each).
pub fn layer_overhead_seconds(budget: Duration) -> Result<f64> {
    let layer = SyntheticLayer::new();
    let products = layer.products();
    let config = families::from_hf(&config()?)?;
    let policy = LoadPolicy { dtype: DType::F32, keep_quantized: true };
    let store = SyntheticLayer { matrices: layer.matrices.clone() };
    let weights = Weights::new(Box::new(store), policy, Device::Cpu);
    let selection = TensorSelection { layers: 0..1, embedding: false, head: false };
    let decoder = Decoder::load(config, &weights, selection, 2 * CACHED, &mut |_, _| {})?;
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
    let layer_seconds = median_seconds(budget / 2, || {
        decoder.forward_layers(&step, &mut cache)?;
        cache.truncate(CACHED);
        Ok(())
    })?;
    let x: Vec<f32> = (0..FEED_FORWARD).map(|i| ((i * 104729) % 777) as f32 / 400.0 - 1.0).collect();
    let mut out = vec![0f32; 2 * FEED_FORWARD];
    let product_seconds = median_seconds(budget / 2, || {
        for stacked in &products {
            let (cols, rows) = (stacked[0].cols, stacked.iter().map(|m| m.rows).sum::<usize>());
            cake_kernels::matmul::matmul_stacked(stacked, &x[..cols], 1, &mut out[..rows]);
        }
        Ok(())
    })?;
    Ok((layer_seconds - product_seconds).max(0.0))
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
        // Zero is possible: on a busy machine the products alone can time
        // slower than the whole layer did a moment before.
        let overhead = layer_overhead_seconds(Duration::from_millis(40)).unwrap();
        assert!((0.0..0.05).contains(&overhead), "{overhead} s per layer");
    }
}
