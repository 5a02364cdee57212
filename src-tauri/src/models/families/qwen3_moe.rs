//! Qwen3-MoE: Qwen3's attention with sparse mixture-of-experts MLPs. Every
//! `decoder_sparse_step`-th layer (counting from 1) not listed in
//! `mlp_only_layers` routes each token to its `num_experts_per_tok` most
//! likely experts; the other layers keep the dense MLP.

use crate::models::config::{HfConfig, ModelConfig, MoeConfig};
use anyhow::{bail, Result};

pub fn adjust(cfg: &HfConfig, config: &mut ModelConfig) -> Result<()> {
    super::qwen3::adjust(cfg, config)?;
    config.moe = Some(experts(cfg, config.layers.len(), None)?);
    Ok(())
}

/// The MoE layout Qwen3-MoE and Qwen3-Next share (`decoder_sparse_step`,
/// `mlp_only_layers`, `norm_topk_prob`), with a shared expert of that width if given.
pub fn experts(cfg: &HfConfig, num_layers: usize, shared_expert_intermediate_size: Option<usize>) -> Result<MoeConfig> {
    let num_experts = cfg.require(cfg.num_experts, "num_experts")?;
    let experts_per_token = cfg.require(cfg.num_experts_per_tok, "num_experts_per_tok")?;
    if experts_per_token == 0 || experts_per_token > num_experts {
        bail!("config.json: num_experts_per_tok {experts_per_token} must be between 1 and num_experts ({num_experts})");
    }
    let step = cfg.decoder_sparse_step.unwrap_or(1);
    if step == 0 {
        bail!("config.json: decoder_sparse_step must be positive");
    }
    let dense_only = cfg.mlp_only_layers.clone().unwrap_or_default();
    let sparse_layers = (0..num_layers).map(|i| !dense_only.contains(&i) && (i + 1) % step == 0).collect();
    Ok(MoeConfig {
        num_experts,
        experts_per_token,
        expert_intermediate_size: cfg.require(cfg.moe_intermediate_size, "moe_intermediate_size")?,
        normalize_top_k: cfg.norm_topk_prob.unwrap_or(false),
        sparse_layers,
        shared_expert_intermediate_size,
    })
}
