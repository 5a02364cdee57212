//! Gemma 3 text (`Gemma3ForCausalLM`, `gemma3_text`): sandwich norms (before
//! and after attention and MLP) stored centred on zero (`1 + w`), per-head
//! q/k norm, GELU-tanh MLP, embeddings scaled by √hidden_size, scores scaled
//! by `query_pre_attn_scalar`, optional logit soft-capping, and local
//! sliding-window layers with their own rope base between global ones.

use crate::models::config::{HfConfig, ModelConfig, NormPlacement, QkNorm, RopeConfig, RopeScaling, RotaryPairs};
use anyhow::{Context, Result};

/// transformers' defaults for Gemma 3's two rope bases.
const GLOBAL_ROPE_THETA: f64 = 1_000_000.0;
const LOCAL_ROPE_THETA: f64 = 10_000.0;

pub fn adjust(cfg: &HfConfig, config: &mut ModelConfig) -> Result<()> {
    config.norm_placement = NormPlacement::Sandwich;
    config.norm_unit_offset = true;
    config.qk_norm = QkNorm::PerHead;
    config.embedding_scale = Some((config.hidden_size as f64).sqrt());
    config.query_pre_attn_scalar = Some(cfg.query_pre_attn_scalar.unwrap_or(256.0));
    config.attn_logit_softcapping = cfg.attn_logit_softcapping;
    config.final_logit_softcapping = cfg.final_logit_softcapping;
    config.tie_word_embeddings = cfg.tie_word_embeddings.unwrap_or(true);
    let window = cfg.sliding_window;
    let local = super::local_layers(cfg, 6, config.layers.len())?;
    for (layer, is_local) in config.layers.iter_mut().zip(local) {
        layer.rope = rope_for(cfg, is_local)?;
        if is_local {
            layer.sliding_window = Some(window.context("config.json: local layers need `sliding_window`")?);
        }
    }
    Ok(())
}

/// The rope of a local or global layer: from `rope_parameters` per layer
/// type, or in the older layout `rope_theta` + `rope_scaling` for global
/// layers and `rope_local_base_freq` (no scaling) for local ones.
fn rope_for(cfg: &HfConfig, local: bool) -> Result<RopeConfig> {
    let layer_type = if local { "sliding_attention" } else { "full_attention" };
    if cfg.rope_parameters.as_ref().is_some_and(|p| p.get(layer_type).is_some()) {
        return cfg.rope_for(layer_type);
    }
    if local {
        return Ok(RopeConfig {
            theta: cfg.rope_local_base_freq.unwrap_or(LOCAL_ROPE_THETA),
            scaling: RopeScaling::None,
            partial_rotary_factor: 1.0,
            pairs: RotaryPairs::HalfSplit,
        });
    }
    let mut global = cfg.clone();
    global.rope_theta = Some(cfg.rope_theta.unwrap_or(GLOBAL_ROPE_THETA));
    global.rope_for(layer_type)
}
