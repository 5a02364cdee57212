//! GGUF metadata read back into the `config.json` it was converted from.
//!
//! llama.cpp's converter writes a model's configuration as `{arch}.*`
//! metadata keys (and, for Phi-3's LongRoPE, as small tensors). For the
//! families that take this path, Cake rebuilds the Hugging Face
//! configuration from them, so that one mapping per family ([`super`])
//! serves folders and GGUF files alike.

use crate::formats::gguf::{GgmlType, GgufFile, Value};
use crate::models::config::HfConfig;
use anyhow::{bail, ensure, Context, Result};
use serde_json::{json, Map};

/// `general.architecture` names read this way, with their transformers class.
pub const ARCHITECTURES: [(&str, &str); 8] = [
    ("olmo2", "Olmo2ForCausalLM"),
    ("phi3", "Phi3ForCausalLM"),
    ("exaone4", "Exaone4ForCausalLM"),
    ("gemma3", "Gemma3ForCausalLM"),
    ("qwen3moe", "Qwen3MoeForCausalLM"),
    ("qwen35", "Qwen3_5ForCausalLM"),
    ("qwen35moe", "Qwen3_5MoeForCausalLM"),
    ("qwen3next", "Qwen3NextForCausalLM"),
];

/// The configuration of a GGUF file of one of [`ARCHITECTURES`]. Weights
/// the converter stored in another form are described by
/// [`adjust_to_stored_form`].
pub fn as_hf_config(file: &GgufFile, arch: &str) -> Result<HfConfig> {
    let class = ARCHITECTURES
        .iter()
        .find(|(name, _)| *name == arch)
        .map(|(_, class)| *class)
        .with_context(|| format!("{}: `{arch}` is not read as a config", file.path.display()))?;
    let key = |k: &str| format!("{arch}.{k}");
    let optional_usize = |k: &str| -> Result<Option<usize>> {
        match file.get(&key(k)) {
            Some(_) => file.require_usize(&key(k)).map(Some),
            None => Ok(None),
        }
    };
    let hidden = file.require_usize(&key("embedding_length"))?;
    let heads = file.require_usize(&key("attention.head_count"))?;
    ensure!(heads > 0, "{}: attention.head_count must be positive", file.path.display());
    let head_dim = optional_usize("attention.key_length")?.unwrap_or(hidden / heads);
    let vocab = file
        .tensor_info("token_embd.weight")
        .map(|info| info.dims[0])
        .with_context(|| format!("{}: tensor `token_embd.weight` is missing", file.path.display()))?;
    let mut cfg: Map<String, serde_json::Value> = json!({
        "architectures": [class],
        "vocab_size": vocab,
        "hidden_size": hidden,
        "intermediate_size": optional_usize("feed_forward_length")?,
        "num_hidden_layers": file.require_usize(&key("block_count"))?,
        "num_attention_heads": heads,
        "num_key_value_heads": optional_usize("attention.head_count_kv")?.unwrap_or(heads),
        "head_dim": head_dim,
        "rms_norm_eps": file.get_f64(&key("attention.layer_norm_rms_epsilon"))?.unwrap_or(1e-6),
        "max_position_embeddings": file.require_usize(&key("context_length"))?,
        "rope_theta": file.get_f64(&key("rope.freq_base"))?.unwrap_or(10_000.0),
    })
    .as_object()
    .cloned()
    .expect("an object");
    if let Some(dims) = optional_usize("rope.dimension_count")? {
        ensure!(
            dims > 0 && dims <= head_dim,
            "{}: rope.dimension_count {dims} for heads of {head_dim}",
            file.path.display()
        );
        cfg.insert("partial_rotary_factor".into(), json!(dims as f64 / head_dim as f64));
    }
    // 0 is the converter's "no window".
    if let Some(window) = optional_usize("attention.sliding_window")?.filter(|&w| w > 0) {
        cfg.insert("sliding_window".into(), json!(window));
    } else {
        cfg.insert("sliding_window".into(), serde_json::Value::Null);
    }
    if let Some(pattern) = file.get(&key("attention.sliding_window_pattern")) {
        cfg.insert("layer_types".into(), json!(layer_types(file, pattern)?));
    }
    if let Some(original) = optional_usize("rope.scaling.original_context_length")? {
        cfg.insert("original_max_position_embeddings".into(), json!(original));
    }
    if file.get_str(&key("rope.scaling.type")) == Some("linear") {
        let factor = file.get_f64(&key("rope.scaling.factor"))?.unwrap_or(1.0);
        cfg.insert("rope_scaling".into(), json!({"rope_type": "linear", "factor": factor}));
    }
    if file.tensor_info("rope_factors_long.weight").is_some() {
        let mut scaling = json!({
            "type": "longrope",
            "long_factor": f32_tensor(file, "rope_factors_long.weight")?,
            "short_factor": f32_tensor(file, "rope_factors_short.weight")?,
        });
        if let Some(factor) = file.get_f64(&key("rope.scaling.attn_factor"))? {
            scaling["attention_factor"] = json!(factor);
        }
        cfg.insert("rope_scaling".into(), scaling);
    }
    match arch {
        "gemma3" => {
            // What llama.cpp assumes and so never stores: GELU-tanh, and
            // scores scaled by the head size (by hidden / heads in the
            // 62-layer 27B).
            cfg.insert("hidden_activation".into(), json!("gelu_pytorch_tanh"));
            let layers = file.require_usize(&key("block_count"))?;
            let scalar = if layers == 62 { hidden / heads } else { head_dim };
            cfg.insert("query_pre_attn_scalar".into(), json!(scalar));
            if let Some(local_theta) = file.get_f64(&key("rope.freq_base_swa"))? {
                cfg.insert("rope_local_base_freq".into(), json!(local_theta));
            }
            if let Some(cap) = file.get_f64(&key("final_logit_softcapping"))? {
                cfg.insert("final_logit_softcapping".into(), json!(cap));
            }
        }
        "qwen35" | "qwen35moe" | "qwen3next" => {
            // The Gated DeltaNet's sizes, under llama.cpp's Mamba-style names.
            let value_heads = file.require_usize(&key("ssm.time_step_rank"))?;
            ensure!(value_heads > 0, "{}: ssm.time_step_rank must be positive", file.path.display());
            cfg.insert("linear_conv_kernel_dim".into(), json!(file.require_usize(&key("ssm.conv_kernel"))?));
            cfg.insert("linear_key_head_dim".into(), json!(file.require_usize(&key("ssm.state_size"))?));
            cfg.insert("linear_num_key_heads".into(), json!(file.require_usize(&key("ssm.group_count"))?));
            cfg.insert("linear_num_value_heads".into(), json!(value_heads));
            cfg.insert(
                "linear_value_head_dim".into(),
                json!(file.require_usize(&key("ssm.inner_size"))? / value_heads),
            );
            let recurrent = file.require(&key("attention.recurrent_layers"))?;
            let Value::Array(flags) = recurrent else {
                bail!("{}: `attention.recurrent_layers` is not a list of booleans", file.path.display());
            };
            let types = flags
                .iter()
                .map(|flag| match flag {
                    Value::Bool(true) => Ok("linear_attention"),
                    Value::Bool(false) => Ok("full_attention"),
                    _ => bail!("{}: `attention.recurrent_layers` is not a list of booleans", file.path.display()),
                })
                .collect::<Result<Vec<_>>>()?;
            cfg.insert("layer_types".into(), json!(types));
            if arch != "qwen35" {
                insert_experts(file, &mut cfg, arch)?;
                let shared = file.require_usize(&key("expert_shared_feed_forward_length"))?;
                cfg.insert("shared_expert_intermediate_size".into(), json!(shared));
            }
        }
        "qwen3moe" => insert_experts(file, &mut cfg, arch)?,
        _ => {}
    }
    HfConfig::parse(&serde_json::Value::Object(cfg).to_string())
        .with_context(|| format!("{}: GGUF metadata", file.path.display()))
}

/// The experts' sizes; llama.cpp always renormalises the chosen experts' weights.
fn insert_experts(file: &GgufFile, cfg: &mut Map<String, serde_json::Value>, arch: &str) -> Result<()> {
    let key = |k: &str| format!("{arch}.{k}");
    cfg.insert("num_experts".into(), json!(file.require_usize(&key("expert_count"))?));
    cfg.insert("num_experts_per_tok".into(), json!(file.require_usize(&key("expert_used_count"))?));
    cfg.insert("moe_intermediate_size".into(), json!(file.require_usize(&key("expert_feed_forward_length"))?));
    cfg.insert("norm_topk_prob".into(), json!(true));
    Ok(())
}

/// `sliding_window_pattern` as a bool per layer (true: sliding), as
/// transformers' `layer_types`.
fn layer_types(file: &GgufFile, pattern: &Value) -> Result<Vec<&'static str>> {
    let Value::Array(flags) = pattern else {
        bail!("{}: `sliding_window_pattern` is not a list of booleans", file.path.display());
    };
    flags
        .iter()
        .map(|flag| match flag {
            Value::Bool(true) => Ok("sliding_attention"),
            Value::Bool(false) => Ok("full_attention"),
            _ => bail!("{}: `sliding_window_pattern` is not a list of booleans", file.path.display()),
        })
        .collect()
}

/// A small f32 tensor's values (LongRoPE factors).
fn f32_tensor(file: &GgufFile, name: &str) -> Result<Vec<f64>> {
    let info =
        file.tensor_info(name).with_context(|| format!("{}: tensor `{name}` is missing", file.path.display()))?;
    ensure!(info.ggml_type == GgmlType::F32, "{}: tensor `{name}` is {}, not F32", file.path.display(), info.ggml_type);
    let bytes = file.tensor_bytes(name)?;
    Ok(bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64).collect())
}

/// What differs between a folder and its GGUF conversion in how weights are
/// stored: Gemma 3's, Qwen3.5's and Qwen3-Next's norms are saved as `1 + w` by the
/// converter (the DeltaNet's gated norm never had the offset). The rest is
/// undone tensor by tensor (`sources::gguf`).
pub fn adjust_to_stored_form(arch: &str, config: &mut crate::models::config::ModelConfig) {
    if matches!(arch, "gemma3" | "qwen35" | "qwen35moe" | "qwen3next") {
        config.norm_unit_offset = false;
    }
}
