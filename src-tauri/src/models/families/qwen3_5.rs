//! Qwen3.5 text (`Qwen3_5ForCausalLM`, `qwen3_5_text`): hybrid layers from
//! `layer_types`, Gated DeltaNet linear attention (`linear_attention`) and
//! gated full attention (`full_attention`: per-head q/k norm, rotary on the
//! first `partial_rotary_factor` of each head, output times `sigmoid(gate)`),
//! with every RMSNorm stored centred on zero (`1 + w`) except the DeltaNet's
//! own gated norm.

use crate::models::config::{GatedDeltaNetConfig, HfConfig, ModelConfig, QkNorm, TokenMixer};
use anyhow::{bail, Result};

/// transformers' default share of a head that rotates, for configs that give none.
const DEFAULT_PARTIAL_ROTARY_FACTOR: f64 = 0.25;

pub fn adjust(cfg: &HfConfig, config: &mut ModelConfig) -> Result<()> {
    config.qk_norm = QkNorm::PerHead;
    config.norm_unit_offset = true;
    config.attention_output_gate = true;
    let n = config.layers.len();
    let linear = match super::layers_of_type(cfg, "linear_attention", n)? {
        Some(linear) => linear,
        None => {
            let interval = cfg.full_attention_interval.unwrap_or(4).max(1);
            (0..n).map(|i| (i + 1) % interval != 0).collect()
        }
    };
    let rotary_share_given = cfg.partial_rotary_factor.is_some()
        || cfg.rope_parameters.as_ref().is_some_and(|p| p.get("partial_rotary_factor").is_some());
    for (layer, is_linear) in config.layers.iter_mut().zip(&linear) {
        if !rotary_share_given {
            layer.rope.partial_rotary_factor = DEFAULT_PARTIAL_ROTARY_FACTOR;
        }
        if *is_linear {
            layer.mixer = TokenMixer::GatedDeltaNet;
        }
    }
    if linear.contains(&true) {
        let get = |value: Option<usize>, name: &str| cfg.require(value, name);
        let net = GatedDeltaNetConfig {
            num_key_heads: get(cfg.linear_num_key_heads, "linear_num_key_heads")?,
            num_value_heads: get(cfg.linear_num_value_heads, "linear_num_value_heads")?,
            key_head_dim: get(cfg.linear_key_head_dim, "linear_key_head_dim")?,
            value_head_dim: get(cfg.linear_value_head_dim, "linear_value_head_dim")?,
            conv_kernel: get(cfg.linear_conv_kernel_dim, "linear_conv_kernel_dim")?,
        };
        if [net.num_key_heads, net.num_value_heads, net.key_head_dim, net.value_head_dim, net.conv_kernel].contains(&0)
        {
            bail!("config.json: the linear attention sizes must be positive");
        }
        if !net.num_value_heads.is_multiple_of(net.num_key_heads) {
            bail!(
                "config.json: linear_num_value_heads ({}) is not a multiple of linear_num_key_heads ({})",
                net.num_value_heads,
                net.num_key_heads
            );
        }
        config.gated_delta_net = Some(net);
    }
    Ok(())
}
