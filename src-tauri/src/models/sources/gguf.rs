//! Tensors from a single GGUF file, served under Hugging Face names.
//!
//! GGUF names tensors `blk.N.attn_q.weight`; the models use the Hugging Face
//! names, so this store translates. llama.cpp's converter also reorders the
//! rows of Llama's `attn_q`/`attn_k` so that rotary pairs sit next to each
//! other; those rows are served as stored, and the model rotates adjacent
//! pairs for such files ([`crate::models::config::RotaryPairs`]), so q and k
//! can be read in place like every other matrix.

use crate::formats::gguf::{qtensor_from_bytes, GgmlType, GgufFile};
use crate::models::config::{Architecture, GatedDeltaNetConfig, ModelConfig};
use crate::models::sources::tile_cache::TileCache;
use crate::models::weights::{repackable, MappedFloat, MappedMatrix, StoredTensor, WeightStore};
use anyhow::{Context, Result};
use cake_kernels::packed::PackedMatrix;
use candle_core::{DType, Device, Tensor};
use std::collections::HashSet;
use std::sync::{Arc, Mutex};

/// A GGUF file seen as a Hugging Face checkpoint.
pub struct GgufStore {
    file: Arc<GgufFile>,
    architecture: Architecture,
    /// Gated DeltaNet sizes, to put its value heads back in order.
    linear: Option<GatedDeltaNetConfig>,
    /// The layers (and lone tensors) whose reading from disk has been asked for.
    read_ahead: Mutex<HashSet<String>>,
    /// Where repacked matrices are kept from one load to the next.
    tiles: Option<TileCache>,
    /// Whether to read layers ahead: not when their matrices come from the
    /// tile cache, which would make it read them from the GGUF file for nothing.
    reads_ahead: bool,
}

impl GgufStore {
    pub fn new(file: Arc<GgufFile>, config: &ModelConfig) -> Self {
        let tiles = TileCache::for_file(&file.path);
        let reads_ahead = tiles.as_ref().is_none_or(TileCache::is_empty);
        Self {
            file,
            architecture: config.architecture,
            linear: config.gated_delta_net,
            read_ahead: Mutex::new(HashSet::new()),
            tiles,
            reads_ahead,
        }
    }

    /// For a matrix read where it lies from now on: maps tensor `gname`'s
    /// pages in at once (all experts' with the first, at `expert_offset`
    /// 0), rather than one fault per page during the first token.
    fn map_pages_in(&self, gname: &str, expert_offset: usize) {
        if expert_offset == 0 {
            self.file.populate(gname);
        }
    }

    /// Before GGUF tensor `gguf_name` is read: asks for its layer and the
    /// next one to be read from disk in the background (for a tensor outside
    /// the layers, for itself and the first layer). Loading then overlaps
    /// the disk with the repacking, instead of waiting on one page fault
    /// after another; a worker holding some layers reads only those and the
    /// next.
    fn read_ahead_for(&self, gguf_name: &str) {
        if !self.reads_ahead {
            return;
        }
        let layer = gguf_name.strip_prefix("blk.").and_then(|rest| rest.split('.').next()?.parse::<usize>().ok());
        let prefixes = match layer {
            Some(layer) => [format!("blk.{layer}."), format!("blk.{}.", layer + 1)],
            None => [gguf_name.to_string(), "blk.0.".to_string()],
        };
        let mut asked = self.read_ahead.lock().unwrap_or_else(|e| e.into_inner());
        for prefix in prefixes {
            if asked.insert(prefix.clone()) {
                self.file.read_ahead(&prefix);
            }
        }
    }
}

/// Where a Hugging Face tensor lies in a GGUF file: a whole tensor, or one
/// expert's slice of a tensor that stacks every expert (MoE layers).
#[derive(Debug, PartialEq, Eq)]
pub struct GgufLocation {
    pub tensor: String,
    pub expert: Option<usize>,
    pub undo: Undo,
}

/// What llama.cpp's converter did to a Gated DeltaNet tensor, to be undone:
/// for Qwen3.5 it stores the value heads tiled (head `g·r + i` of key group
/// `g` at position `i·nk + g`) where Hugging Face groups them by key head
/// (Qwen3-Next keeps them grouped); for both it keeps `-exp(A_log)` instead
/// of `A_log` and drops the conv's middle dimension; Qwen3-Next's fused
/// projections come split (`attn_qkv`, `attn_gate`) or fused (`ssm_ba`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Undo {
    None,
    /// `in_proj_qkv`: the value rows, after the query and key rows.
    QkvValueRows,
    /// `in_proj_z`: one block of rows per value head.
    GateRows,
    /// `in_proj_a`, `in_proj_b`, `dt_bias`: one row per value head.
    PerHeadRows,
    /// `out_proj`: one block of columns per value head.
    OutColumns,
    /// `A_log`, stored as `-exp(A_log)`, one per value head.
    ALog,
    /// `conv1d`: value channels after the query and key ones, stored `(C, K)`.
    ConvChannels,
    /// Qwen3-Next's `in_proj_b` / `in_proj_a`: the first / second half of
    /// each key group's rows in the fused `ssm_ba` (`[b × r | a × r]` per group).
    BaRows {
        second_half: bool,
    },
}

/// Translates a Hugging Face tensor name to where llama.cpp's converter put
/// it for `architecture`: post-norm and sandwich blocks (OLMo 2, EXAONE 4,
/// Gemma 3) keep their own norm names, Phi-3 keeps its fused projections
/// (`gate_up_proj` becomes `ffn_up`, gate rows first), and MoE experts are
/// stacked three-dimensional tensors.
pub fn gguf_location(hf_name: &str, architecture: Architecture) -> Option<GgufLocation> {
    let whole = |tensor: &str| Some(GgufLocation { tensor: tensor.into(), expert: None, undo: Undo::None });
    let undone = |tensor: String, undo: Undo| Some(GgufLocation { tensor, expert: None, undo });
    match hf_name {
        "model.embed_tokens.weight" => return whole("token_embd.weight"),
        "model.norm.weight" => return whole("output_norm.weight"),
        "lm_head.weight" => return whole("output.weight"),
        _ => {}
    }
    let rest = hf_name.strip_prefix("model.layers.")?;
    let (layer, rest) = rest.split_once('.')?;
    let qwen3_5 = matches!(architecture, Architecture::Qwen3_5 | Architecture::Qwen3_5Moe | Architecture::Qwen3Next);
    if qwen3_5 {
        match rest {
            "linear_attn.A_log" => return undone(format!("blk.{layer}.ssm_a"), Undo::ALog),
            "linear_attn.dt_bias" => return undone(format!("blk.{layer}.ssm_dt.bias"), Undo::PerHeadRows),
            _ => {}
        }
    }
    let (module, kind) = rest.rsplit_once('.')?;
    if qwen3_5 {
        let linear = match module {
            "linear_attn.in_proj_qkv" => Some(("attn_qkv", Undo::QkvValueRows)),
            "linear_attn.in_proj_z" => Some(("attn_gate", Undo::GateRows)),
            "linear_attn.in_proj_b" if architecture == Architecture::Qwen3Next => {
                Some(("ssm_ba", Undo::BaRows { second_half: false }))
            }
            "linear_attn.in_proj_a" if architecture == Architecture::Qwen3Next => {
                Some(("ssm_ba", Undo::BaRows { second_half: true }))
            }
            "linear_attn.in_proj_b" => Some(("ssm_beta", Undo::PerHeadRows)),
            "linear_attn.in_proj_a" => Some(("ssm_alpha", Undo::PerHeadRows)),
            "linear_attn.out_proj" => Some(("ssm_out", Undo::OutColumns)),
            "linear_attn.conv1d" => Some(("ssm_conv1d", Undo::ConvChannels)),
            "linear_attn.norm" => Some(("ssm_norm", Undo::None)),
            _ => None,
        };
        if let Some((tensor, undo)) = linear {
            return undone(format!("blk.{layer}.{tensor}.{kind}"), undo);
        }
    }
    if let Some(expert_module) = module.strip_prefix("mlp.experts.") {
        let (expert, projection) = expert_module.split_once('.')?;
        let stacked = match projection {
            "gate_proj" => "ffn_gate_exps",
            "up_proj" => "ffn_up_exps",
            "down_proj" => "ffn_down_exps",
            _ => return None,
        };
        return Some(GgufLocation {
            tensor: format!("blk.{layer}.{stacked}.{kind}"),
            expert: Some(expert.parse().ok()?),
            undo: Undo::None,
        });
    }
    let own_norms =
        qwen3_5 || matches!(architecture, Architecture::Olmo2 | Architecture::Exaone4 | Architecture::Gemma3);
    let phi3 = architecture == Architecture::Phi3;
    let gguf_module = match module {
        "input_layernorm" => "attn_norm",
        "post_attention_layernorm" if own_norms => "post_attention_norm",
        "post_attention_layernorm" => "ffn_norm",
        "pre_feedforward_layernorm" => "ffn_norm",
        "post_feedforward_layernorm" if own_norms => "post_ffw_norm",
        "self_attn.qkv_proj" if phi3 => "attn_qkv",
        "mlp.gate_up_proj" if phi3 => "ffn_up",
        "mlp.gate_proj" | "mlp.up_proj" | "self_attn.q_proj" | "self_attn.k_proj" | "self_attn.v_proj" if phi3 => {
            return None
        }
        "self_attn.q_proj" => "attn_q",
        "self_attn.k_proj" => "attn_k",
        "self_attn.v_proj" => "attn_v",
        "self_attn.o_proj" => "attn_output",
        "self_attn.q_norm" => "attn_q_norm",
        "self_attn.k_norm" => "attn_k_norm",
        "mlp.gate" => "ffn_gate_inp",
        "mlp.shared_expert.gate_proj" => "ffn_gate_shexp",
        "mlp.shared_expert.up_proj" => "ffn_up_shexp",
        "mlp.shared_expert.down_proj" => "ffn_down_shexp",
        "mlp.shared_expert_gate" => "ffn_gate_inp_shexp",
        "mlp.gate_proj" => "ffn_gate",
        "mlp.up_proj" => "ffn_up",
        "mlp.down_proj" => "ffn_down",
        _ => return None,
    };
    whole(&format!("blk.{layer}.{gguf_module}.{kind}"))
}

impl GgufStore {
    /// A Gated DeltaNet tensor put back as the checkpoint had it (see [`Undo`]).
    fn undo_linear_attention(
        &self,
        undo: Undo,
        bytes: &[u8],
        dims: &[usize],
        dtype: GgmlType,
        device: &Device,
    ) -> Result<StoredTensor> {
        let s = self.linear.context("a linear-attention tensor in a model without linear attention")?;
        let (nk, nv, dk, dv) = (s.num_key_heads, s.num_value_heads, s.key_head_dim, s.value_head_dim);
        let rows = dims.first().copied().unwrap_or(0);
        // Only Qwen3.5's converter tiles the value heads.
        let tiled = self.architecture != Architecture::Qwen3Next;
        let reordered = |from: usize, per_head: usize| match tiled {
            true => ungroup_value_heads(bytes, rows, from, per_head, nk, nv),
            false => Ok(bytes.to_vec()),
        };
        let (bytes, dims) = match undo {
            Undo::None => (bytes.to_vec(), dims.to_vec()),
            Undo::QkvValueRows => (reordered(2 * nk * dk, dv)?, dims.to_vec()),
            Undo::GateRows => (reordered(0, dv)?, dims.to_vec()),
            Undo::PerHeadRows | Undo::ALog => (reordered(0, 1)?, dims.to_vec()),
            Undo::ConvChannels => {
                anyhow::ensure!(dims.len() == 2, "expected a (channels, kernel) convolution, found {dims:?}");
                (reordered(2 * nk * dk, dv)?, vec![dims[0], 1, dims[1]])
            }
            Undo::BaRows { second_half } => {
                let halved: Vec<usize> =
                    dims.iter().enumerate().map(|(i, &d)| if i == 0 { d / 2 } else { d }).collect();
                (half_of_each_group(bytes, rows, nk, second_half)?, halved)
            }
            Undo::OutColumns if !tiled => (bytes.to_vec(), dims.to_vec()),
            Undo::OutColumns => {
                // Columns cannot be moved inside quantized blocks: work in f32.
                let values = f32_values(bytes, dtype, dims)?;
                let cols = *dims.last().context("a matrix")?;
                let mut out = Vec::with_capacity(values.len());
                for row in values.chunks_exact(cols) {
                    out.extend(reorder_columns(row, nk, nv, dv)?);
                }
                return Ok(StoredTensor::Dense(Tensor::from_vec(out, dims.to_vec(), device)?));
            }
        };
        let stored = stored_tensor(dtype, &bytes, &dims, device)?;
        if undo != Undo::ALog {
            return Ok(stored);
        }
        // The converter stored -exp(A_log).
        match stored {
            StoredTensor::Dense(values) => Ok(StoredTensor::Dense(values.to_dtype(DType::F32)?.neg()?.log()?)),
            _ => anyhow::bail!("A_log must be stored as floats, found {dtype:?}"),
        }
    }
}

/// A tensor from its GGUF bytes: floats copied once, the matrices Cake's
/// kernels multiply repacked straight from the map, other quantized types
/// kept as candle's.
fn stored_tensor(dtype: GgmlType, bytes: &[u8], dims: &[usize], device: &Device) -> Result<StoredTensor> {
    Ok(match (dtype, repackable(dtype)) {
        (GgmlType::F32 | GgmlType::F16 | GgmlType::BF16, _) => {
            let float = match dtype {
                GgmlType::F32 => DType::F32,
                GgmlType::F16 => DType::F16,
                _ => DType::BF16,
            };
            StoredTensor::Dense(Tensor::from_raw_buffer(bytes, float, dims, device)?)
        }
        (_, Some(format)) if dims.len() == 2 && device.is_cpu() => {
            StoredTensor::Packed(Arc::new(PackedMatrix::from_ggml(format, bytes, dims[0], dims[1])?))
        }
        _ => StoredTensor::Quantized(Arc::new(qtensor_from_bytes(dtype, bytes, dims, device)?)),
    })
}

/// A tensor's values as f32, dequantizing if it is quantized.
fn f32_values(bytes: &[u8], dtype: GgmlType, dims: &[usize]) -> Result<Vec<f32>> {
    if let (Some(format), [rows, cols]) = (repackable(dtype), dims) {
        return Ok(PackedMatrix::from_ggml(format, bytes, *rows, *cols)?.dequantize());
    }
    let tensor = qtensor_from_bytes(dtype, bytes, dims, &Device::Cpu)?.dequantize(&Device::Cpu)?;
    Ok(tensor.flatten_all()?.to_dtype(DType::F32)?.to_vec1()?)
}

/// Puts the value heads of rows `from..` back in Hugging Face's order
/// (grouped by key head: head `g·r + i`) from llama.cpp's (tiled: head
/// `g·r + i` at `i·nk + g`); each head is `per_head` rows of `bytes`.
fn ungroup_value_heads(
    bytes: &[u8],
    rows: usize,
    from: usize,
    per_head: usize,
    nk: usize,
    nv: usize,
) -> Result<Vec<u8>> {
    anyhow::ensure!(
        nk > 0 && nv.is_multiple_of(nk) && rows > 0 && bytes.len().is_multiple_of(rows) && from + nv * per_head == rows,
        "{rows} rows do not hold {nv} value heads of {per_head} rows after row {from}"
    );
    let row_bytes = bytes.len() / rows;
    let head_bytes = per_head * row_bytes;
    let r = nv / nk;
    let mut out = bytes.to_vec();
    for g in 0..nk {
        for i in 0..r {
            let (hf, gguf) = (g * r + i, i * nk + g);
            let (to, at) = (from * row_bytes + hf * head_bytes, from * row_bytes + gguf * head_bytes);
            out[to..to + head_bytes].copy_from_slice(&bytes[at..at + head_bytes]);
        }
    }
    Ok(out)
}

/// The first or second half of each of `groups` equal row groups.
fn half_of_each_group(bytes: &[u8], rows: usize, groups: usize, second_half: bool) -> Result<Vec<u8>> {
    anyhow::ensure!(
        groups > 0 && rows.is_multiple_of(2 * groups) && bytes.len().is_multiple_of(rows),
        "{rows} rows do not split into {groups} groups of two halves"
    );
    let row_bytes = bytes.len() / rows;
    let half = rows / groups / 2;
    let mut out = Vec::with_capacity(bytes.len() / 2);
    for g in 0..groups {
        let start = (g * 2 * half + if second_half { half } else { 0 }) * row_bytes;
        out.extend_from_slice(&bytes[start..start + half * row_bytes]);
    }
    Ok(out)
}

/// One row of `out_proj` with its value-head column blocks put back in
/// Hugging Face's order (see [`ungroup_value_heads`]).
fn reorder_columns(row: &[f32], nk: usize, nv: usize, dv: usize) -> Result<Vec<f32>> {
    let bytes: Vec<u8> = row.iter().flat_map(|v| v.to_le_bytes()).collect();
    let reordered = ungroup_value_heads(&bytes, nv * dv, 0, dv, nk, nv)?;
    Ok(reordered.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect())
}

impl WeightStore for GgufStore {
    fn origin(&self) -> String {
        self.file.path.display().to_string()
    }

    fn contains(&self, name: &str) -> bool {
        self.shape(name).is_some()
    }

    fn shape(&self, name: &str) -> Option<Vec<usize>> {
        let location = gguf_location(name, self.architecture)?;
        let mut dims = self.file.tensor_info(&location.tensor)?.dims.clone();
        match location.undo {
            Undo::ConvChannels if dims.len() == 2 => dims.insert(1, 1),
            Undo::BaRows { .. } if !dims.is_empty() => dims[0] /= 2,
            _ => {}
        }
        match location.expert {
            None => Some(dims),
            Some(e) if dims.len() == 3 && e < dims[0] => Some(dims[1..].to_vec()),
            Some(_) => None,
        }
    }

    fn with_stored_bytes(&self, name: &str, f: &mut dyn FnMut(GgmlType, &[u8]) -> Result<()>) -> Option<Result<()>> {
        let location = gguf_location(name, self.architecture)?;
        if location.undo != Undo::None || location.expert.is_some() {
            return None;
        }
        let info = self.file.tensor_info(&location.tensor)?;
        let result = self.file.tensor_bytes(&location.tensor).and_then(|bytes| f(info.ggml_type, bytes));
        Some(result.with_context(|| format!("{}: tensor `{}`", self.origin(), location.tensor)))
    }

    fn load(&self, name: &str, device: &Device) -> Result<StoredTensor> {
        let location = gguf_location(name, self.architecture)
            .with_context(|| format!("{}: no GGUF tensor corresponds to `{name}`", self.origin()))?;
        let gname = location.tensor.clone();
        let info =
            self.file.tensor_info(&gname).with_context(|| format!("{}: tensor `{gname}` is missing", self.origin()))?;
        let mut dims = info.dims.clone();
        let mut raw = self.file.tensor_bytes(&gname)?;
        let mut last_use = true;
        let mut expert_offset = 0;
        if let Some(expert) = location.expert {
            // Experts are stacked along the outermost dimension: one
            // expert's rows are a contiguous run of whole blocks.
            anyhow::ensure!(
                dims.len() == 3 && expert < dims[0] && raw.len() % dims[0] == 0,
                "{}: tensor `{gname}` of shape {dims:?} has no expert {expert}",
                self.origin()
            );
            let per_expert = raw.len() / dims[0];
            expert_offset = expert * per_expert;
            raw = &raw[expert_offset..expert_offset + per_expert];
            last_use = expert + 1 == dims[0];
            dims.remove(0);
        }
        // Stored as the model uses it: nothing to undo.
        let plain = location.undo == Undo::None;
        let kernel_format = repackable(info.ggml_type).filter(|_| plain && dims.len() == 2 && device.is_cpu());
        if let Some(format) = kernel_format.filter(|&format| PackedMatrix::reads_in_place(format)) {
            let start = self.file.tensor_offset(&gname)? + expert_offset;
            let map: Arc<dyn AsRef<[u8]> + Send + Sync> = self.file.map().clone();
            let matrix = PackedMatrix::in_place(format, map, start, dims[0], dims[1])
                .with_context(|| format!("{}: tensor `{gname}`", self.origin()))?;
            self.map_pages_in(&gname, expert_offset);
            return Ok(StoredTensor::Packed(Arc::new(matrix)));
        }
        // Matrices repacked for Cake's kernels, which the tile cache keeps.
        let cached = match (&self.tiles, kernel_format) {
            (Some(tiles), Some(format)) => Some((tiles, format)),
            _ => None,
        };
        if let Some(matrix) = cached.and_then(|(tiles, format)| tiles.load(name, format, dims[0], dims[1])) {
            return Ok(StoredTensor::Packed(Arc::new(matrix)));
        }
        self.read_ahead_for(&gname);
        let mapped_float = match info.ggml_type {
            GgmlType::F32 => Some(MappedFloat::F32),
            GgmlType::F16 => Some(MappedFloat::F16),
            GgmlType::BF16 => Some(MappedFloat::BF16),
            _ => None,
        };
        if let (true, Some(float), 2, true) = (plain, mapped_float, dims.len(), device.is_cpu()) {
            let start = self.file.tensor_offset(&gname)? + expert_offset;
            if let Some(mapped) = MappedMatrix::new(self.file.map().clone(), start, dims[0], dims[1], float) {
                self.map_pages_in(&gname, expert_offset);
                return Ok(StoredTensor::Mapped(Arc::new(mapped)));
            }
        }
        if location.undo != Undo::None {
            let stored = self
                .undo_linear_attention(location.undo, raw, &dims, info.ggml_type, device)
                .with_context(|| format!("{}: tensor `{gname}`", self.origin()))?;
            self.file.release(&gname);
            return Ok(stored);
        }
        let stored = match cached.and_then(|(tiles, format)| tiles.repack(name, format, raw, dims[0], dims[1])) {
            Some(matrix) => StoredTensor::Packed(Arc::new(matrix)),
            // Copied from the file, not through the map (see `copy_of`).
            None => stored_tensor(info.ggml_type, &self.file.copy_of(raw)?, &dims, device)
                .with_context(|| format!("{}: cannot load tensor `{gname}`", self.origin()))?,
        };
        if last_use {
            self.file.release(&gname);
        }
        Ok(stored)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hf_names_map_to_gguf_names() {
        let name_in = |architecture| move |name: &str| gguf_location(name, architecture).map(|l| l.tensor);
        let llama = name_in(Architecture::Llama);
        assert_eq!(llama("model.layers.12.self_attn.q_proj.weight").as_deref(), Some("blk.12.attn_q.weight"));
        assert_eq!(llama("model.layers.0.mlp.down_proj.weight").as_deref(), Some("blk.0.ffn_down.weight"));
        assert_eq!(llama("model.layers.0.post_attention_layernorm.weight").as_deref(), Some("blk.0.ffn_norm.weight"));
        assert_eq!(llama("lm_head.weight").as_deref(), Some("output.weight"));
        assert_eq!(llama("model.layers.0.unknown.weight"), None);
        assert_eq!(llama("model.layers.0.mlp.gate_up_proj.weight"), None);
        let olmo2 = name_in(Architecture::Olmo2);
        assert_eq!(
            olmo2("model.layers.1.post_attention_layernorm.weight").as_deref(),
            Some("blk.1.post_attention_norm.weight")
        );
        assert_eq!(
            olmo2("model.layers.1.post_feedforward_layernorm.weight").as_deref(),
            Some("blk.1.post_ffw_norm.weight")
        );
        let phi3 = name_in(Architecture::Phi3);
        assert_eq!(phi3("model.layers.0.mlp.gate_up_proj.weight").as_deref(), Some("blk.0.ffn_up.weight"));
        assert_eq!(phi3("model.layers.0.self_attn.qkv_proj.weight").as_deref(), Some("blk.0.attn_qkv.weight"));
        assert_eq!(phi3("model.layers.0.mlp.up_proj.weight"), None);
        let gemma3 = name_in(Architecture::Gemma3);
        assert_eq!(gemma3("model.layers.2.pre_feedforward_layernorm.weight").as_deref(), Some("blk.2.ffn_norm.weight"));
        assert_eq!(
            gemma3("model.layers.2.post_attention_layernorm.weight").as_deref(),
            Some("blk.2.post_attention_norm.weight")
        );
        assert_eq!(
            gguf_location("model.layers.1.mlp.experts.5.down_proj.weight", Architecture::Qwen3Moe),
            Some(GgufLocation { tensor: "blk.1.ffn_down_exps.weight".into(), expert: Some(5), undo: Undo::None })
        );
        assert_eq!(
            name_in(Architecture::Qwen3Moe)("model.layers.1.mlp.gate.weight").as_deref(),
            Some("blk.1.ffn_gate_inp.weight")
        );
        let qwen3_5 = |name: &str| gguf_location(name, Architecture::Qwen3_5).map(|l| (l.tensor, l.undo));
        assert_eq!(qwen3_5("model.layers.0.linear_attn.A_log"), Some(("blk.0.ssm_a".into(), Undo::ALog)));
        assert_eq!(
            qwen3_5("model.layers.0.linear_attn.out_proj.weight"),
            Some(("blk.0.ssm_out.weight".into(), Undo::OutColumns))
        );
        assert_eq!(
            qwen3_5("model.layers.3.post_attention_layernorm.weight"),
            Some(("blk.3.post_attention_norm.weight".into(), Undo::None))
        );
    }

    #[test]
    fn value_heads_return_to_their_key_groups() {
        // 2 key heads, 4 value heads of one row each: llama.cpp stores HF's
        // heads [0, 1, 2, 3] (groups [0, 1] and [2, 3]) as [0, 2, 1, 3], after one leading row.
        let stored = [9u8, 0, 2, 1, 3];
        assert_eq!(ungroup_value_heads(&stored, 5, 1, 1, 2, 4).unwrap(), vec![9, 0, 1, 2, 3]);
        assert!(ungroup_value_heads(&stored, 5, 0, 1, 2, 4).is_err());
    }
}
