//! Tensors from a single GGUF file, served under Hugging Face names.
//!
//! GGUF names tensors `blk.N.attn_q.weight`; the models use the Hugging Face
//! names, so this store translates. llama.cpp's converter also reorders the
//! rows of Llama's `attn_q`/`attn_k` so that rotary pairs sit next to each
//! other (its rope rotates interleaved pairs); the models here rotate halves
//! as transformers does, so the rows are put back in Hugging Face order on
//! load. Rows are whole quantization blocks, so this works on quantized data
//! as a byte shuffle and the weights stay quantized.

use crate::formats::gguf::{qtensor_from_bytes, GgufFile};
use crate::models::config::Architecture;
use crate::models::weights::{repackable, StoredTensor, WeightStore};
use anyhow::{Context, Result};
use cake_kernels::packed::PackedMatrix;
use candle_core::quantized::GgmlDType;
use candle_core::{DType, Device, Tensor};
use std::borrow::Cow;
use std::sync::Arc;

/// Head counts needed to undo llama.cpp's q/k row order.
#[derive(Debug, Clone, Copy)]
pub struct RotaryRowOrder {
    pub num_attention_heads: usize,
    pub num_key_value_heads: usize,
}

/// A GGUF file seen as a Hugging Face checkpoint.
pub struct GgufStore {
    file: Arc<GgufFile>,
    /// Set for Llama-family files whose q/k rows llama.cpp permuted.
    row_order: Option<RotaryRowOrder>,
    architecture: Architecture,
}

impl GgufStore {
    pub fn new(file: Arc<GgufFile>, row_order: Option<RotaryRowOrder>, architecture: Architecture) -> Self {
        Self { file, row_order, architecture }
    }

    /// Heads whose rows must be un-permuted for this Hugging Face name, if any.
    fn permuted_heads(&self, hf_name: &str) -> Option<usize> {
        let order = self.row_order?;
        if hf_name.contains(".self_attn.q_proj.") {
            Some(order.num_attention_heads)
        } else if hf_name.contains(".self_attn.k_proj.") {
            Some(order.num_key_value_heads)
        } else {
            None
        }
    }
}

/// Where a Hugging Face tensor lies in a GGUF file: a whole tensor, or one
/// expert's slice of a tensor that stacks every expert (MoE layers).
#[derive(Debug, PartialEq, Eq)]
pub struct GgufLocation {
    pub tensor: String,
    pub expert: Option<usize>,
}

/// Translates a Hugging Face tensor name to where llama.cpp's converter put
/// it for `architecture`: post-norm and sandwich blocks (OLMo 2, EXAONE 4,
/// Gemma 3) keep their own norm names, Phi-3 keeps its fused projections
/// (`gate_up_proj` becomes `ffn_up`, gate rows first), and MoE experts are
/// stacked three-dimensional tensors.
pub fn gguf_location(hf_name: &str, architecture: Architecture) -> Option<GgufLocation> {
    let whole = |tensor: &str| Some(GgufLocation { tensor: tensor.into(), expert: None });
    match hf_name {
        "model.embed_tokens.weight" => return whole("token_embd.weight"),
        "model.norm.weight" => return whole("output_norm.weight"),
        "lm_head.weight" => return whole("output.weight"),
        _ => {}
    }
    let rest = hf_name.strip_prefix("model.layers.")?;
    let (layer, rest) = rest.split_once('.')?;
    let (module, kind) = rest.rsplit_once('.')?;
    if let Some(expert_module) = module.strip_prefix("mlp.experts.") {
        let (expert, projection) = expert_module.split_once('.')?;
        let stacked = match projection {
            "gate_proj" => "ffn_gate_exps",
            "up_proj" => "ffn_up_exps",
            "down_proj" => "ffn_down_exps",
            _ => return None,
        };
        return Some(GgufLocation { tensor: format!("blk.{layer}.{stacked}.{kind}"), expert: Some(expert.parse().ok()?) });
    }
    let own_norms = matches!(architecture, Architecture::Olmo2 | Architecture::Exaone4 | Architecture::Gemma3);
    let phi3 = architecture == Architecture::Phi3;
    let gguf_module = match module {
        "input_layernorm" => "attn_norm",
        "post_attention_layernorm" if own_norms => "post_attention_norm",
        "post_attention_layernorm" => "ffn_norm",
        "pre_feedforward_layernorm" => "ffn_norm",
        "post_feedforward_layernorm" if own_norms => "post_ffw_norm",
        "self_attn.qkv_proj" if phi3 => "attn_qkv",
        "mlp.gate_up_proj" if phi3 => "ffn_up",
        "mlp.gate_proj" | "mlp.up_proj" | "self_attn.q_proj" | "self_attn.k_proj" | "self_attn.v_proj" if phi3 => return None,
        "self_attn.q_proj" => "attn_q",
        "self_attn.k_proj" => "attn_k",
        "self_attn.v_proj" => "attn_v",
        "self_attn.o_proj" => "attn_output",
        "self_attn.q_norm" => "attn_q_norm",
        "self_attn.k_norm" => "attn_k_norm",
        "mlp.gate" => "ffn_gate_inp",
        "mlp.gate_proj" => "ffn_gate",
        "mlp.up_proj" => "ffn_up",
        "mlp.down_proj" => "ffn_down",
        _ => return None,
    };
    whole(&format!("blk.{layer}.{gguf_module}.{kind}"))
}

/// Reorders rows from llama.cpp's interleaved rotary layout to Hugging Face's
/// half-split layout. `bytes` holds `rows` rows of equal size.
pub fn unpermute_rotary_rows(bytes: &[u8], rows: usize, heads: usize) -> Result<Vec<u8>> {
    anyhow::ensure!(
        heads > 0 && rows % (2 * heads) == 0 && bytes.len() % rows == 0,
        "cannot split {rows} rows into {heads} rotary heads"
    );
    let row_bytes = bytes.len() / rows;
    let half = rows / heads / 2;
    let mut out = vec![0u8; bytes.len()];
    for head in 0..heads {
        for pair in 0..half {
            for side in 0..2 {
                let hf_row = head * 2 * half + side * half + pair;
                let gguf_row = head * 2 * half + pair * 2 + side;
                out[hf_row * row_bytes..(hf_row + 1) * row_bytes]
                    .copy_from_slice(&bytes[gguf_row * row_bytes..(gguf_row + 1) * row_bytes]);
            }
        }
    }
    Ok(out)
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
        let dims = self.file.tensor_info(&location.tensor)?.shape.dims().to_vec();
        match location.expert {
            None => Some(dims),
            Some(e) if dims.len() == 3 && e < dims[0] => Some(dims[1..].to_vec()),
            Some(_) => None,
        }
    }

    fn load(&self, name: &str, device: &Device) -> Result<StoredTensor> {
        let location = gguf_location(name, self.architecture)
            .with_context(|| format!("{}: no GGUF tensor corresponds to `{name}`", self.origin()))?;
        let gname = location.tensor;
        let info = self
            .file
            .tensor_info(&gname)
            .with_context(|| format!("{}: tensor `{gname}` is missing", self.origin()))?;
        let mut dims = info.shape.dims().to_vec();
        let mut raw = self.file.tensor_bytes(&gname)?;
        let mut last_use = true;
        if let Some(expert) = location.expert {
            // Experts are stacked along the outermost dimension: one
            // expert's rows are a contiguous run of whole blocks.
            anyhow::ensure!(
                dims.len() == 3 && expert < dims[0] && raw.len() % dims[0] == 0,
                "{}: tensor `{gname}` of shape {dims:?} has no expert {expert}",
                self.origin()
            );
            let per_expert = raw.len() / dims[0];
            raw = &raw[expert * per_expert..(expert + 1) * per_expert];
            last_use = expert + 1 == dims[0];
            dims.remove(0);
        }
        let bytes = match self.permuted_heads(name) {
            Some(heads) => Cow::Owned(
                unpermute_rotary_rows(raw, dims[0], heads)
                    .with_context(|| format!("{}: tensor `{gname}`", self.origin()))?,
            ),
            None => Cow::Borrowed(raw),
        };
        let context = || format!("{}: cannot load tensor `{gname}`", self.origin());
        let stored = match (info.ggml_dtype, repackable(info.ggml_dtype)) {
            (GgmlDType::F32 | GgmlDType::F16 | GgmlDType::BF16, _) => {
                let dtype = match info.ggml_dtype {
                    GgmlDType::F32 => DType::F32,
                    GgmlDType::F16 => DType::F16,
                    _ => DType::BF16,
                };
                StoredTensor::Dense(Tensor::from_raw_buffer(&bytes, dtype, &dims, device).with_context(context)?)
            }
            // Matrices Cake's kernels multiply are repacked straight from the map.
            (_, Some(format)) if dims.len() == 2 && device.is_cpu() => {
                StoredTensor::Packed(Arc::new(PackedMatrix::from_ggml(format, &bytes, dims[0], dims[1]).with_context(context)?))
            }
            (dtype, _) => StoredTensor::Quantized(Arc::new(qtensor_from_bytes(dtype, &bytes, &dims, device).with_context(context)?)),
        };
        drop(bytes);
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
        assert_eq!(olmo2("model.layers.1.post_attention_layernorm.weight").as_deref(), Some("blk.1.post_attention_norm.weight"));
        assert_eq!(olmo2("model.layers.1.post_feedforward_layernorm.weight").as_deref(), Some("blk.1.post_ffw_norm.weight"));
        let phi3 = name_in(Architecture::Phi3);
        assert_eq!(phi3("model.layers.0.mlp.gate_up_proj.weight").as_deref(), Some("blk.0.ffn_up.weight"));
        assert_eq!(phi3("model.layers.0.self_attn.qkv_proj.weight").as_deref(), Some("blk.0.attn_qkv.weight"));
        assert_eq!(phi3("model.layers.0.mlp.up_proj.weight"), None);
        let gemma3 = name_in(Architecture::Gemma3);
        assert_eq!(gemma3("model.layers.2.pre_feedforward_layernorm.weight").as_deref(), Some("blk.2.ffn_norm.weight"));
        assert_eq!(gemma3("model.layers.2.post_attention_layernorm.weight").as_deref(), Some("blk.2.post_attention_norm.weight"));
        assert_eq!(
            gguf_location("model.layers.1.mlp.experts.5.down_proj.weight", Architecture::Qwen3Moe),
            Some(GgufLocation { tensor: "blk.1.ffn_down_exps.weight".into(), expert: Some(5) })
        );
        assert_eq!(name_in(Architecture::Qwen3Moe)("model.layers.1.mlp.gate.weight").as_deref(), Some("blk.1.ffn_gate_inp.weight"));
    }

    #[test]
    fn unpermute_inverts_llama_cpp_permutation() {
        // llama.cpp's converter: view (heads, 2, half, ...) then swap axes 1 and 2.
        let heads = 2;
        let rows = 8;
        let half = rows / heads / 2;
        let hf_rows: Vec<u8> = (0..rows as u8).collect();
        let mut gguf_rows = vec![0u8; rows];
        for h in 0..heads {
            for side in 0..2 {
                for pair in 0..half {
                    gguf_rows[h * 2 * half + pair * 2 + side] = hf_rows[h * 2 * half + side * half + pair];
                }
            }
        }
        assert_eq!(unpermute_rotary_rows(&gguf_rows, rows, heads).unwrap(), hf_rows);
    }
}
