//! A transformer block on the GPU: what [`crate::models::decoder`]'s CPU
//! block computes (pre-, post- or sandwich norms, grouped-query attention
//! with rotary positions, q/k norms, sliding windows and soft-capping, the
//! gated MLP), with its weights and its keys and values in VRAM. Hidden
//! states stay on the GPU from one such block to the next.

use super::kv_cache::{room_for, GpuLayerKv, KvPrecision, LayerCache};
use super::norm::RmsNorm;
use super::rotary::RotaryEmbedding;
use crate::models::config::{Activation, ModelConfig, QkNorm, RotaryPairs, TokenMixer};
use crate::models::weights::Weights;
use anyhow::{bail, Context, Result};
use cake_gpu::attention::{AttentionShape, GpuKvCache, KvPrecision as GpuKvPrecision, MAX_HEAD_DIM};
use cake_gpu::matmul::GpuMatrix;
use cake_gpu::ops::{self, RotaryPairs as GpuPairs};
use cake_gpu::{Batch, Gpu, GpuTensor};
use candle_core::{DType, Device};
use std::ops::Range;
use std::sync::Arc;

/// Why layer `index` of `cfg` cannot run on the GPU, if it cannot.
pub fn unsupported(cfg: &ModelConfig, index: usize) -> Option<String> {
    let sparse = cfg.moe.as_ref().is_some_and(|moe| moe.sparse_layers.get(index).copied().unwrap_or(false));
    if sparse {
        return Some("mixture-of-experts layers run on the CPU".into());
    }
    if cfg.layers[index].mixer == TokenMixer::GatedDeltaNet {
        return Some("Gated DeltaNet layers run on the CPU".into());
    }
    if cfg.attention_output_gate {
        return Some("gated attention outputs run on the CPU".into());
    }
    if !cfg.head_dim.is_multiple_of(2) || cfg.head_dim > MAX_HEAD_DIM {
        return Some(format!("heads of {} values run on the CPU", cfg.head_dim));
    }
    None
}

/// `y = x Wᵀ + b` on the GPU.
struct GpuLinear {
    matrix: GpuMatrix,
    bias: Option<GpuTensor>,
}

impl GpuLinear {
    fn forward(&self, batch: &mut Batch, x: &GpuTensor, tokens: usize) -> Result<GpuTensor> {
        let y = batch.gpu().zeros("projection", tokens * self.matrix.rows)?;
        batch.matmul(&self.matrix, x, tokens, &y)?;
        if let Some(bias) = &self.bias {
            batch.add_bias(&y, bias, tokens)?;
        }
        Ok(y)
    }

    fn vram_bytes(&self) -> u64 {
        self.matrix.bytes() + self.bias.as_ref().map_or(0, GpuTensor::bytes)
    }
}

/// Several projections of one input, from separate matrices or one fused
/// matrix whose rows are split into them at upload (Phi-3's `qkv_proj`).
fn load_projections(
    gpu: &Gpu,
    weights: &Weights,
    prefix: &str,
    fused: &str,
    parts: &[(&str, usize)],
    in_dim: usize,
    bias: bool,
) -> Result<Vec<GpuLinear>> {
    let fused_name = format!("{prefix}.{fused}");
    if weights.contains(&format!("{fused_name}.weight")) {
        let total: usize = parts.iter().map(|&(_, width)| width).sum();
        let biases = match bias {
            true => Some(weights.dense(&format!("{fused_name}.bias"), &[total])?.to_dtype(DType::F32)?.to_vec1()?),
            false => None,
        };
        let mut start = 0;
        let mut linears = Vec::new();
        for &(_, width) in parts {
            let rows = start..start + width;
            let matrix = weights.gpu_matrix(gpu, &format!("{fused_name}.weight"), (total, in_dim), rows.clone())?;
            let bias = biases.as_ref().map(|b: &Vec<f32>| gpu.upload("bias", &b[rows])).transpose()?;
            linears.push(GpuLinear { matrix, bias });
            start += width;
        }
        return Ok(linears);
    }
    parts
        .iter()
        .map(|&(name, width)| {
            let name = format!("{prefix}.{name}");
            let matrix = weights.gpu_matrix(gpu, &format!("{name}.weight"), (width, in_dim), 0..width)?;
            let bias = match bias {
                true => Some(upload_dense(gpu, weights, &format!("{name}.bias"), width)?),
                false => None,
            };
            Ok(GpuLinear { matrix, bias })
        })
        .collect()
}

/// A vector of `len` values from the checkpoint, in VRAM as f32.
fn upload_dense(gpu: &Gpu, weights: &Weights, name: &str, len: usize) -> Result<GpuTensor> {
    let values: Vec<f32> = weights.dense(name, &[len])?.to_dtype(DType::F32)?.to_vec1()?;
    gpu.upload(name, &values)
}

/// An RMSNorm's weights (unit offset applied) in VRAM.
struct GpuNorm {
    weight: GpuTensor,
    eps: f32,
}

impl GpuNorm {
    fn load(gpu: &Gpu, weights: &Weights, name: &str, dim: usize, cfg: &ModelConfig) -> Result<Self> {
        let norm = RmsNorm::load_for(weights, name, dim, cfg)?;
        Ok(Self { weight: gpu.upload(name, &norm.values()?)?, eps: norm.eps() })
    }

    fn forward(&self, batch: &mut Batch, x: &GpuTensor, rows: usize) -> Result<GpuTensor> {
        let y = batch.gpu().zeros("normed", rows * self.weight.len())?;
        batch.rms_norm(x, &self.weight, self.eps, rows, &y)?;
        Ok(y)
    }
}

/// `norm(x)`, or `x` where the block has none there.
fn apply(batch: &mut Batch, norm: &Option<GpuNorm>, x: GpuTensor, rows: usize) -> Result<GpuTensor> {
    match norm {
        Some(norm) => norm.forward(batch, &x, rows),
        None => Ok(x),
    }
}

struct GpuAttention {
    q: GpuLinear,
    k: GpuLinear,
    v: GpuLinear,
    o: GpuLinear,
    q_norm: Option<GpuNorm>,
    k_norm: Option<GpuNorm>,
    /// Whether the q/k norms span the projection rather than one head.
    norm_whole: bool,
    rotary: Option<(RotaryEmbedding, GpuPairs)>,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
    window: Option<usize>,
    scale: f32,
    softcap: Option<f32>,
}

struct GpuMlp {
    gate: GpuLinear,
    up: GpuLinear,
    down: GpuLinear,
    activation: ops::Activation,
}

/// One decoder block in VRAM.
pub struct GpuBlock {
    gpu: Arc<Gpu>,
    attention: GpuAttention,
    mlp: GpuMlp,
    attention_input_norm: Option<GpuNorm>,
    attention_output_norm: Option<GpuNorm>,
    mlp_input_norm: Option<GpuNorm>,
    mlp_output_norm: Option<GpuNorm>,
    hidden: usize,
}

impl GpuBlock {
    /// Uploads layer `index`'s weights (check [`unsupported`] first).
    pub fn load(gpu: &Arc<Gpu>, weights: &Weights, cfg: &ModelConfig, index: usize) -> Result<Self> {
        let prefix = format!("model.layers.{index}");
        let (h, d) = (cfg.hidden_size, cfg.head_dim);
        let [attention_input_norm, attention_output_norm, mlp_input_norm, mlp_output_norm] =
            cfg.norm_placement.norm_names().map(|name| {
                name.map(|name| GpuNorm::load(gpu, weights, &format!("{prefix}.{name}.weight"), h, cfg)).transpose()
            });
        let (attention_input_norm, attention_output_norm, mlp_input_norm, mlp_output_norm) =
            (attention_input_norm?, attention_output_norm?, mlp_input_norm?, mlp_output_norm?);
        let attn = format!("{prefix}.self_attn");
        let (q_dim, kv_dim) = (cfg.num_attention_heads * d, cfg.num_key_value_heads * d);
        let parts = [("q_proj", q_dim), ("k_proj", kv_dim), ("v_proj", kv_dim)];
        let [q, k, v]: [GpuLinear; 3] = load_projections(gpu, weights, &attn, "qkv_proj", &parts, h, cfg.qkv_bias)?
            .try_into()
            .map_err(|_| anyhow::anyhow!("three projections"))?;
        let o_matrix = weights.gpu_matrix(gpu, &format!("{attn}.o_proj.weight"), (h, q_dim), 0..h)?;
        let o_bias = cfg.o_bias.then(|| upload_dense(gpu, weights, &format!("{attn}.o_proj.bias"), h)).transpose()?;
        let qk_norm = |name: &str, projection: usize| -> Result<Option<GpuNorm>> {
            let dim = match cfg.qk_norm {
                QkNorm::None => return Ok(None),
                QkNorm::PerHead => d,
                QkNorm::Whole => projection,
            };
            GpuNorm::load(gpu, weights, &format!("{attn}.{name}.weight"), dim, cfg).map(Some)
        };
        let layer = &cfg.layers[index];
        let pairs = match layer.rope.pairs {
            RotaryPairs::HalfSplit => GpuPairs::Halves,
            RotaryPairs::Adjacent => GpuPairs::Adjacent,
        };
        let attention = GpuAttention {
            q,
            k,
            v,
            o: GpuLinear { matrix: o_matrix, bias: o_bias },
            q_norm: qk_norm("q_norm", q_dim)?,
            k_norm: qk_norm("k_norm", kv_dim)?,
            norm_whole: cfg.qk_norm == QkNorm::Whole,
            rotary: layer.uses_rope.then(|| RotaryEmbedding::new(&layer.rope, d).map(|r| (r, pairs))).transpose()?,
            heads: cfg.num_attention_heads,
            kv_heads: cfg.num_key_value_heads,
            head_dim: d,
            window: layer.sliding_window,
            scale: (1.0 / cfg.query_pre_attn_scalar.unwrap_or(d as f64).sqrt()) as f32,
            softcap: cfg.attn_logit_softcapping.map(|c| c as f32),
        };
        let mlp_prefix = format!("{prefix}.mlp");
        let i = cfg.intermediate_size;
        let [gate, up]: [GpuLinear; 2] = load_projections(
            gpu,
            weights,
            &mlp_prefix,
            "gate_up_proj",
            &[("gate_proj", i), ("up_proj", i)],
            h,
            cfg.mlp_bias,
        )?
        .try_into()
        .map_err(|_| anyhow::anyhow!("two projections"))?;
        let down_matrix = weights.gpu_matrix(gpu, &format!("{mlp_prefix}.down_proj.weight"), (h, i), 0..h)?;
        let down_bias =
            cfg.mlp_bias.then(|| upload_dense(gpu, weights, &format!("{mlp_prefix}.down_proj.bias"), h)).transpose()?;
        let activation = match cfg.activation {
            Activation::Silu => ops::Activation::Silu,
            Activation::GeluTanh => ops::Activation::GeluTanh,
        };
        let mlp = GpuMlp { gate, up, down: GpuLinear { matrix: down_matrix, bias: down_bias }, activation };
        gpu.check().with_context(|| format!("loading layer {index} onto the GPU"))?;
        Ok(Self {
            gpu: gpu.clone(),
            attention,
            mlp,
            attention_input_norm,
            attention_output_norm,
            mlp_input_norm,
            mlp_output_norm,
            hidden: h,
        })
    }

    /// Bytes of VRAM the weights take.
    pub fn vram_bytes(&self) -> u64 {
        let a = &self.attention;
        let linears = [&a.q, &a.k, &a.v, &a.o, &self.mlp.gate, &self.mlp.up, &self.mlp.down];
        let norms = [
            &self.attention_input_norm,
            &self.attention_output_norm,
            &self.mlp_input_norm,
            &self.mlp_output_norm,
            &a.q_norm,
            &a.k_norm,
        ];
        linears.iter().map(|l| l.vram_bytes()).sum::<u64>()
            + norms.iter().filter_map(|n| n.as_ref()).map(|n| n.weight.bytes()).sum::<u64>()
    }

    pub fn gpu(&self) -> &Arc<Gpu> {
        &self.gpu
    }

    /// Runs the block over `tokens` hidden states `x` `(tokens, hidden)` at
    /// the positions after `cache`'s, appending their keys and values. The
    /// positions of each `mutual` span (absolute, each within this input
    /// or before it) see each other both ways: one picture's tokens.
    pub fn forward(
        &self,
        x: &GpuTensor,
        tokens: usize,
        cache: &mut LayerCache,
        mutual: &[Range<usize>],
    ) -> Result<GpuTensor> {
        let a = &self.attention;
        let start = cache.len();
        let mutual: Vec<Range<usize>> = mutual.iter().filter(|span| span.end > start).cloned().collect();
        if let Some(span) = mutual.iter().find(|span| span.start < start || span.end > start + tokens) {
            bail!("positions {span:?} that see each other must be read in one piece, not from {start} for {tokens}");
        }
        let kv = ensure_room(&self.gpu, cache, (a.kv_heads, a.head_dim), start + tokens)?;
        let table = match &a.rotary {
            Some((rotary, _)) => Some(rotary_table(&self.gpu, rotary, start, tokens)?),
            None => None,
        };
        let mut batch = Batch::new(&self.gpu);
        let b = &mut batch;
        let normed = match &self.attention_input_norm {
            Some(norm) => norm.forward(b, x, tokens)?,
            None => self.copy(b, x, tokens)?,
        };
        let mut q = a.q.forward(b, &normed, tokens)?;
        let mut k = a.k.forward(b, &normed, tokens)?;
        let v = a.v.forward(b, &normed, tokens)?;
        let head_rows = |heads: usize| if a.norm_whole { tokens } else { tokens * heads };
        if let Some(norm) = &a.q_norm {
            q = norm.forward(b, &q, head_rows(a.heads))?;
        }
        if let Some(norm) = &a.k_norm {
            k = norm.forward(b, &k, head_rows(a.kv_heads))?;
        }
        if let (Some((_, pairs)), Some((table, rotary_dim))) = (&a.rotary, &table) {
            b.rope(&q, table, (tokens, a.heads, a.head_dim), *rotary_dim, *pairs)?;
            b.rope(&k, table, (tokens, a.kv_heads, a.head_dim), *rotary_dim, *pairs)?;
        }
        b.kv_append(kv, &k, &v, tokens)?;
        let attended = self.gpu.zeros("attended", q.len())?;
        let shape = AttentionShape {
            tokens,
            heads: a.heads,
            scale: a.scale,
            softcap: a.softcap,
            window: a.window,
            mutual: &mutual,
        };
        b.attention(&q, kv, shape, &attended)?;
        let out = a.o.forward(b, &attended, tokens)?;
        let out = apply(b, &self.attention_output_norm, out, tokens)?;
        let after_attention = self.gpu.zeros("residual", tokens * self.hidden)?;
        b.add(x, &out, tokens * self.hidden, &after_attention)?;
        let normed = match &self.mlp_input_norm {
            Some(norm) => norm.forward(b, &after_attention, tokens)?,
            None => self.copy(b, &after_attention, tokens)?,
        };
        let gate = self.mlp.gate.forward(b, &normed, tokens)?;
        let up = self.mlp.up.forward(b, &normed, tokens)?;
        let gated = self.gpu.zeros("gated", gate.len())?;
        b.glu(&gate, &up, self.mlp.activation, gate.len(), &gated)?;
        let down = self.mlp.down.forward(b, &gated, tokens)?;
        let down = apply(b, &self.mlp_output_norm, down, tokens)?;
        let after_mlp = self.gpu.zeros("residual", tokens * self.hidden)?;
        b.add(&after_attention, &down, tokens * self.hidden, &after_mlp)?;
        batch.submit()?;
        Ok(after_mlp)
    }

    /// A copy of `x` (`x + 0`), for a block with no input norm.
    fn copy(&self, batch: &mut Batch, x: &GpuTensor, tokens: usize) -> Result<GpuTensor> {
        let len = tokens * self.hidden;
        let (zero, y) = (self.gpu.zeros("zero", len)?, self.gpu.zeros("copy", len)?);
        batch.add(x, &zero, len, &y)?;
        Ok(y)
    }
}

/// The layer's GPU cache with room for `positions`, grown (or made) as the
/// CPU caches grow.
fn ensure_room<'c>(
    gpu: &Arc<Gpu>,
    cache: &'c mut LayerCache,
    (kv_heads, head_dim): (usize, usize),
    positions: usize,
) -> Result<&'c mut GpuKvCache> {
    let room = room_for(positions, usize::MAX);
    let grown = match cache.gpu.take() {
        Some(kv) if kv.cache.capacity >= positions => kv.cache,
        Some(kv) => gpu.kv_copy(&kv.cache, kv.cache.len, room)?,
        None => gpu.kv_cache(gpu_precision(cache.precision()), kv_heads, head_dim, room)?,
    };
    Ok(&mut cache.gpu.insert(GpuLayerKv { gpu: gpu.clone(), cache: grown }).cache)
}

/// The GPU cache's precision for a CPU cache's: f32 stays exact.
pub fn gpu_precision(precision: KvPrecision) -> GpuKvPrecision {
    match precision {
        KvPrecision::F32 => GpuKvPrecision::F32,
        KvPrecision::F16 => GpuKvPrecision::F16,
    }
}

/// The rotary angles of positions `start..start + tokens` as the GPU's
/// table of (cos, sin) pairs, and how many values of a head rotate.
fn rotary_table(gpu: &Gpu, rotary: &RotaryEmbedding, start: usize, tokens: usize) -> Result<(GpuTensor, usize)> {
    let (cos, sin) = rotary.cos_sin(start, tokens, DType::F32, &Device::Cpu)?;
    let half = cos.dim(1)?;
    let (cos, sin) = (cos.flatten_all()?.to_vec1::<f32>()?, sin.flatten_all()?.to_vec1::<f32>()?);
    let table: Vec<f32> = cos.iter().zip(&sin).flat_map(|(c, s)| [*c, *s]).collect();
    Ok((gpu.upload("rotary", &table)?, 2 * half))
}
