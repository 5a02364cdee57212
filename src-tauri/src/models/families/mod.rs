//! Per-family mapping from a checkpoint's configuration to [`ModelConfig`].
//!
//! The families here share one decoder (see `models::decoder`). Each
//! module states what its family sets differently: biases, q/k norms and
//! norm placement, sliding-window and hybrid (linear-attention) layer
//! patterns, mixture-of-experts layouts, RoPE scaling, and tensor names.

mod exaone4;
mod gemma3;
mod gguf_config;
mod llama;
mod mistral;
mod olmo2;
mod phi3;
mod qwen2;
mod qwen3;
mod qwen3_5;
mod qwen3_5_moe;
mod qwen3_moe;
mod qwen3_next;

use crate::formats::gguf::GgufFile;
use crate::models::config::{
    token_ids, Activation, Architecture, HfConfig, LayerAttention, ModelConfig, NormPlacement, QkNorm, RotaryPairs,
    TokenMixer,
};
use anyhow::{bail, Context, Result};

/// Builds the model description from a parsed `config.json`.
pub fn from_hf(cfg: &HfConfig) -> Result<ModelConfig> {
    let architecture = Architecture::detect(&cfg.architectures, cfg.model_type.as_deref())?;
    cfg.require_runnable_quantization()?;
    let mut config = common_hf(cfg, architecture)?;
    match architecture {
        Architecture::Llama => llama::adjust(cfg, &mut config)?,
        Architecture::Qwen2 => qwen2::adjust(cfg, &mut config)?,
        Architecture::Qwen3 => qwen3::adjust(cfg, &mut config)?,
        Architecture::Mistral => mistral::adjust(cfg, &mut config)?,
        Architecture::Olmo2 => olmo2::adjust(cfg, &mut config)?,
        Architecture::Phi3 => phi3::adjust(cfg, &mut config)?,
        Architecture::Exaone4 => exaone4::adjust(cfg, &mut config)?,
        Architecture::Gemma3 => gemma3::adjust(cfg, &mut config)?,
        Architecture::Qwen3Moe => qwen3_moe::adjust(cfg, &mut config)?,
        Architecture::Qwen3_5 => qwen3_5::adjust(cfg, &mut config)?,
        Architecture::Qwen3_5Moe => qwen3_5_moe::adjust(cfg, &mut config)?,
        Architecture::Qwen3Next => qwen3_next::adjust(cfg, &mut config)?,
    }
    config.validate()?;
    Ok(config)
}

/// What every family reads the same way: sizes, rope, embeddings tying.
/// Families then adjust biases, norms and windows.
fn common_hf(cfg: &HfConfig, architecture: Architecture) -> Result<ModelConfig> {
    let hidden_size = cfg.require(cfg.hidden_size, "hidden_size")?;
    let num_attention_heads = cfg.require(cfg.num_attention_heads, "num_attention_heads")?;
    let num_layers = cfg.require(cfg.num_hidden_layers, "num_hidden_layers")?;
    if num_attention_heads == 0 {
        bail!("config.json: num_attention_heads must be positive");
    }
    let head_dim = cfg.head_dim.unwrap_or(hidden_size / num_attention_heads);
    let rope = cfg.rope_for("full_attention")?;
    let attention_bias = cfg.attention_bias.unwrap_or(false);
    Ok(ModelConfig {
        architecture,
        vocab_size: cfg.require(cfg.vocab_size, "vocab_size")?,
        hidden_size,
        // Models whose every layer is sparse (Qwen3.5-MoE) give no dense
        // width; the experts' stands in, and no dense MLP uses it.
        intermediate_size: cfg.require(cfg.intermediate_size.or(cfg.moe_intermediate_size), "intermediate_size")?,
        num_attention_heads,
        num_key_value_heads: cfg.num_key_value_heads.unwrap_or(num_attention_heads),
        head_dim,
        rms_norm_eps: cfg.rms_norm_eps.unwrap_or(1e-6),
        max_position_embeddings: cfg.max_position_embeddings.unwrap_or(4096),
        tie_word_embeddings: cfg.tie_word_embeddings.unwrap_or(false),
        qkv_bias: attention_bias,
        o_bias: attention_bias,
        mlp_bias: cfg.mlp_bias.unwrap_or(false),
        qk_norm: QkNorm::None,
        norm_placement: NormPlacement::Pre,
        norm_unit_offset: false,
        activation: cfg.activation()?,
        embedding_scale: None,
        query_pre_attn_scalar: None,
        attn_logit_softcapping: None,
        final_logit_softcapping: None,
        moe: None,
        fp8_block_size: cfg.fp8_block_size()?,
        gated_delta_net: None,
        attention_output_gate: false,
        layers: vec![
            LayerAttention { sliding_window: None, rope, uses_rope: true, mixer: TokenMixer::Attention };
            num_layers
        ],
        bos_token_id: token_ids(cfg.bos_token_id.as_ref()).first().copied(),
        eos_token_ids: token_ids(cfg.eos_token_id.as_ref()),
    })
}

/// Applies `layer_types` (transformers ≥ 4.5x) or the older
/// `use_sliding_window` + `max_window_layers` pair used by Qwen.
fn qwen_style_windows(cfg: &HfConfig, config: &mut ModelConfig) -> Result<()> {
    let window = cfg.sliding_window;
    let n = config.layers.len();
    let sliding: Vec<bool> = match layers_of_type(cfg, "sliding_attention", n)? {
        Some(sliding) => sliding,
        None if cfg.use_sliding_window.unwrap_or(false) => {
            let first = cfg.max_window_layers.unwrap_or(n);
            (0..n).map(|i| i >= first).collect()
        }
        None => vec![false; n],
    };
    for (layer, is_sliding) in config.layers.iter_mut().zip(sliding) {
        if is_sliding {
            layer.sliding_window = Some(window.context("config.json: sliding layers need `sliding_window`")?);
            layer.rope = cfg.rope_for("sliding_attention")?;
        }
    }
    Ok(())
}

/// Which of `n` layers are local (sliding-window) ones, from an older
/// `sliding_window_pattern`: a period whose last layer is global (EXAONE 4:
/// 4, Gemma 3: 6; `default` when absent), or a string of `L` (local) and `G`.
fn local_layers_from_pattern(pattern: Option<&serde_json::Value>, default: usize, n: usize) -> Result<Vec<bool>> {
    use serde_json::Value;
    match pattern {
        None => Ok((0..n).map(|i| (i + 1) % default != 0).collect()),
        Some(Value::Number(period)) => {
            let period = period
                .as_u64()
                .filter(|&p| p > 0)
                .context("config.json: `sliding_window_pattern` must be a positive integer")?
                as usize;
            Ok((0..n).map(|i| (i + 1) % period != 0).collect())
        }
        Some(Value::String(letters)) if !letters.is_empty() && letters.chars().all(|c| c == 'L' || c == 'G') => {
            let letters: Vec<char> = letters.chars().collect();
            Ok((0..n).map(|i| letters[i % letters.len()] == 'L').collect())
        }
        Some(other) => {
            bail!("config.json: `sliding_window_pattern` {other} is neither a period nor a string of L and G")
        }
    }
}

/// Which of the config's layers are local ones: `layer_types` when given,
/// else the older `sliding_window_pattern` (see [`local_layers_from_pattern`]).
fn local_layers(cfg: &HfConfig, default_period: usize, n: usize) -> Result<Vec<bool>> {
    match layers_of_type(cfg, "sliding_attention", n)? {
        Some(local) => Ok(local),
        None => local_layers_from_pattern(cfg.sliding_window_pattern.as_ref(), default_period, n),
    }
}

/// Per layer, whether `layer_types` names it `kind`; `None` when the config
/// has no `layer_types`, an error when it does not list `n` layers.
fn layers_of_type(cfg: &HfConfig, kind: &str, n: usize) -> Result<Option<Vec<bool>>> {
    match &cfg.layer_types {
        None => Ok(None),
        Some(types) if types.len() != n => {
            bail!("config.json: `layer_types` has {} entries for {n} layers", types.len())
        }
        Some(types) => Ok(Some(types.iter().map(|t| t == kind).collect())),
    }
}

/// Builds the model description from GGUF metadata and tensor table.
pub fn from_gguf(file: &GgufFile) -> Result<ModelConfig> {
    let arch_name = file
        .get_str("general.architecture")
        .with_context(|| format!("{}: GGUF metadata lacks `general.architecture`", file.path.display()))?
        .to_string();
    if gguf_config::ARCHITECTURES.iter().any(|(name, _)| *name == arch_name) {
        // Read back into the config.json it came from, then mapped as folders are.
        let mut config = from_hf(&gguf_config::as_hf_config(file, &arch_name)?)
            .with_context(|| format!("{}: inconsistent GGUF metadata", file.path.display()))?;
        gguf_config::adjust_to_stored_form(&arch_name, &mut config);
        config.tie_word_embeddings = file.tensor_info("output.weight").is_none();
        config.bos_token_id = gguf_token(file, "tokenizer.ggml.bos_token_id");
        config.eos_token_ids = gguf_token(file, "tokenizer.ggml.eos_token_id").into_iter().collect();
        return Ok(config);
    }
    let architecture = Architecture::from_model_type(&arch_name).with_context(|| {
        format!(
            "{}: unsupported model architecture `{arch_name}`; supported in GGUF: llama, qwen2, qwen3, mistral, olmo2, phi3, exaone4, gemma3, qwen3moe, qwen35, qwen35moe, qwen3next",
            file.path.display(),
        )
    })?;
    let key = |k: &str| format!("{arch_name}.{k}");
    let hidden_size = file.require_usize(&key("embedding_length"))?;
    let num_attention_heads = file.require_usize(&key("attention.head_count"))?;
    let num_layers = file.require_usize(&key("block_count"))?;
    if num_attention_heads == 0 {
        bail!("{}: attention.head_count must be positive", file.path.display());
    }
    let head_dim = match file.get(&key("attention.key_length")) {
        Some(_) => file.require_usize(&key("attention.key_length"))?,
        None => hidden_size / num_attention_heads,
    };
    let num_key_value_heads = match file.get(&key("attention.head_count_kv")) {
        Some(_) => file.require_usize(&key("attention.head_count_kv"))?,
        None => num_attention_heads,
    };
    if file.tensor_info("rope_freqs.weight").is_some() {
        bail!("{}: rope frequency factors (`rope_freqs.weight`) are not supported yet", file.path.display());
    }
    let rope = crate::models::config::RopeConfig {
        theta: file.get_f64(&key("rope.freq_base"))?.unwrap_or(10_000.0),
        scaling: match file.get_str(&key("rope.scaling.type")) {
            None | Some("none") => crate::models::config::RopeScaling::None,
            Some("linear") => crate::models::config::RopeScaling::Linear {
                factor: file.get_f64(&key("rope.scaling.factor"))?.unwrap_or(1.0),
            },
            Some(other) => bail!("{}: rope scaling `{other}` is not supported yet", file.path.display()),
        },
        partial_rotary_factor: 1.0,
        // llama.cpp's converter orders Llama's q and k rows for its
        // interleaved rope; they are used as stored, not reordered.
        pairs: match architecture {
            Architecture::Llama | Architecture::Mistral => RotaryPairs::Adjacent,
            _ => RotaryPairs::HalfSplit,
        },
    };
    let sliding_window = match (architecture, file.get(&key("attention.sliding_window"))) {
        (Architecture::Mistral, Some(_)) => Some(file.require_usize(&key("attention.sliding_window"))?),
        _ => None,
    };
    let vocab_size = file
        .tensor_info("token_embd.weight")
        .map(|info| info.dims[0])
        .with_context(|| format!("{}: tensor `token_embd.weight` is missing", file.path.display()))?;
    let has = |name: &str| file.tensor_info(name).is_some();
    let config = ModelConfig {
        architecture,
        vocab_size,
        hidden_size,
        intermediate_size: file.require_usize(&key("feed_forward_length"))?,
        num_attention_heads,
        num_key_value_heads,
        head_dim,
        rms_norm_eps: file.get_f64(&key("attention.layer_norm_rms_epsilon"))?.unwrap_or(1e-6),
        max_position_embeddings: file.require_usize(&key("context_length"))?,
        tie_word_embeddings: !has("output.weight"),
        qkv_bias: has("blk.0.attn_q.bias"),
        o_bias: has("blk.0.attn_output.bias"),
        mlp_bias: has("blk.0.ffn_up.bias"),
        qk_norm: if has("blk.0.attn_q_norm.weight") { QkNorm::PerHead } else { QkNorm::None },
        norm_placement: NormPlacement::Pre,
        norm_unit_offset: false,
        activation: Activation::Silu,
        embedding_scale: None,
        query_pre_attn_scalar: None,
        attn_logit_softcapping: None,
        final_logit_softcapping: None,
        moe: None,
        fp8_block_size: None,
        gated_delta_net: None,
        attention_output_gate: false,
        layers: vec![
            LayerAttention { sliding_window, rope, uses_rope: true, mixer: TokenMixer::Attention };
            num_layers
        ],
        bos_token_id: gguf_token(file, "tokenizer.ggml.bos_token_id"),
        eos_token_ids: gguf_token(file, "tokenizer.ggml.eos_token_id").into_iter().collect(),
    };
    config.validate().with_context(|| format!("{}: inconsistent GGUF metadata", file.path.display()))?;
    if config.qk_norm != QkNorm::None && config.layers.iter().any(|l| l.rope.pairs == RotaryPairs::Adjacent) {
        bail!(
            "{}: q/k norms in a {arch_name} GGUF file are not supported (their order would not match the rows')",
            file.path.display()
        );
    }
    Ok(config)
}

fn gguf_token(file: &GgufFile, key: &str) -> Option<u32> {
    file.get(key).and_then(crate::formats::gguf::value_to_u64).map(|v| v as u32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::config::RopeScaling;

    fn parse(json: &str) -> Result<ModelConfig> {
        from_hf(&HfConfig::parse(json).unwrap())
    }

    const SIZES: &str = r#""hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 100"#;

    #[test]
    fn legacy_and_new_rope_layouts_agree() {
        let legacy = parse(&format!(
            r#"{{"architectures": ["LlamaForCausalLM"], {SIZES}, "rope_theta": 500000.0,
            "rope_scaling": {{"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
            "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}}}}"#
        ))
        .unwrap();
        let new = parse(&format!(
            r#"{{"architectures": ["LlamaForCausalLM"], {SIZES}, "rope_parameters": {{"rope_type": "llama3",
            "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192}}}}"#
        ))
        .unwrap();
        assert_eq!(legacy, new);
        assert_eq!(new.layers[0].rope.theta, 500000.0);
        assert!(matches!(new.layers[0].rope.scaling, RopeScaling::Llama3 { factor, .. } if factor == 8.0));
    }

    #[test]
    fn rope_parameters_per_layer_type_are_applied_per_layer() {
        let cfg = parse(&format!(
            r#"{{"architectures": ["Qwen2ForCausalLM"], {SIZES}, "sliding_window": 16,
            "layer_types": ["sliding_attention", "full_attention"],
            "rope_parameters": {{"full_attention": {{"rope_type": "default", "rope_theta": 1000000.0}},
                                 "sliding_attention": {{"rope_type": "default", "rope_theta": 10000.0}}}}}}"#
        ))
        .unwrap();
        assert_eq!(cfg.layers[0].sliding_window, Some(16));
        assert_eq!(cfg.layers[0].rope.theta, 10000.0);
        assert_eq!(cfg.layers[1].sliding_window, None);
        assert_eq!(cfg.layers[1].rope.theta, 1000000.0);
        assert!(cfg.qkv_bias && !cfg.o_bias);
    }

    #[test]
    fn eos_lists_and_family_traits_are_read() {
        let cfg = parse(&format!(
            r#"{{"architectures": ["Qwen3ForCausalLM"], {SIZES}, "head_dim": 32, "eos_token_id": [7, 9],
            "rope_theta": 1000000.0}}"#
        ))
        .unwrap();
        assert_eq!(cfg.eos_token_ids, vec![7, 9]);
        assert_eq!(cfg.head_dim, 32);
        assert_eq!(cfg.qk_norm, QkNorm::PerHead);
    }

    #[test]
    fn phi3s_older_longrope_layout_is_read() {
        // Phi-3-mini-128k's layout: `su` scaling, the pretraining context and
        // the partial rotary share at the top level.
        let factors = "[1.0, 1.5, 2.0, 2.5]";
        let cfg = parse(&format!(
            r#"{{"architectures": ["Phi3ForCausalLM"], {SIZES}, "max_position_embeddings": 131072,
            "original_max_position_embeddings": 4096, "partial_rotary_factor": 0.5, "rope_theta": 10000.0,
            "rope_scaling": {{"type": "su", "short_factor": {factors}, "long_factor": {factors}}}}}"#
        ))
        .unwrap();
        let rope = &cfg.layers[0].rope;
        assert_eq!(rope.partial_rotary_factor, 0.5);
        let RopeScaling::LongRope { original_max_position_embeddings, attention_factor, .. } = rope.scaling else {
            panic!("{:?}", rope.scaling)
        };
        assert_eq!(original_max_position_embeddings, 4096);
        let expected = (1.0 + 32f64.ln() / 4096f64.ln()).sqrt();
        assert!((attention_factor - expected).abs() < 1e-12);
    }

    #[test]
    fn exaone4_layer_patterns_make_local_rotary_and_global_unrotated_layers() {
        let sizes = SIZES.replace("\"num_hidden_layers\": 2", "\"num_hidden_layers\": 8");
        for pattern in ["4", "\"LLLG\""] {
            let cfg = parse(&format!(
                r#"{{"architectures": ["Exaone4ForCausalLM"], {sizes}, "sliding_window": 16, "sliding_window_pattern": {pattern}}}"#
            ))
            .unwrap();
            let local: Vec<bool> = cfg.layers.iter().map(|l| l.sliding_window == Some(16)).collect();
            assert_eq!(local, [true, true, true, false, true, true, true, false], "{pattern}");
            assert!(cfg.layers.iter().all(|l| l.uses_rope == l.sliding_window.is_some()), "{pattern}");
        }
        // Without a window every layer is global and rotates.
        let cfg =
            parse(&format!(r#"{{"architectures": ["Exaone4ForCausalLM"], {sizes}, "sliding_window": null}}"#)).unwrap();
        assert!(cfg.layers.iter().all(|l| l.sliding_window.is_none() && l.uses_rope));
        assert_eq!((cfg.qk_norm, cfg.norm_placement), (QkNorm::PerHead, NormPlacement::Post));
    }

    #[test]
    fn quantized_checkpoints_are_refused_with_their_method() {
        for (config, method) in [
            (r#"{"quant_method": "gptq", "bits": 4}"#, "`gptq`"),
            (r#"{"quant_method": "bitsandbytes", "load_in_4bit": true}"#, "`bitsandbytes`"),
            (r#"{"load_in_4bit": true}"#, "`unnamed`"),
        ] {
            let err = parse(&format!(
                r#"{{"architectures": ["LlamaForCausalLM"], {SIZES}, "quantization_config": {config}}}"#
            ))
            .unwrap_err();
            assert!(format!("{err:#}").contains(method), "{err:#}");
        }
        assert!(parse(&format!(r#"{{"architectures": ["LlamaForCausalLM"], {SIZES}, "quantization_config": null}}"#))
            .is_ok());
        let fp8 = parse(&format!(
            r#"{{"architectures": ["LlamaForCausalLM"], {SIZES}, "quantization_config": {{"quant_method": "fp8", "weight_block_size": [128, 64]}}}}"#
        ))
        .unwrap();
        assert_eq!(fp8.fp8_block_size, Some((128, 64)));
    }

    #[test]
    fn unknown_rope_type_and_activation_are_refused() {
        let err = parse(&format!(
            r#"{{"architectures": ["LlamaForCausalLM"], {SIZES}, "rope_scaling": {{"type": "dynamic", "factor": 2.0}}}}"#
        ))
        .unwrap_err();
        assert!(format!("{err:#}").contains("`dynamic` is not supported"), "{err:#}");
        let err =
            parse(&format!(r#"{{"architectures": ["LlamaForCausalLM"], {SIZES}, "hidden_act": "gelu"}}"#)).unwrap_err();
        assert!(format!("{err:#}").contains("gelu"), "{err:#}");
    }
}
