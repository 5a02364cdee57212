//! Qwen3.5-MoE text (`Qwen3_5MoeForCausalLM`, `qwen3_5_moe_text`): Qwen3.5's
//! hybrid layers with a sparse MoE in every layer: the chosen experts'
//! probabilities renormalised, plus a shared expert gated by a sigmoid.

use crate::models::config::{HfConfig, ModelConfig, MoeConfig};
use anyhow::{bail, Result};

pub fn adjust(cfg: &HfConfig, config: &mut ModelConfig) -> Result<()> {
    super::qwen3_5::adjust(cfg, config)?;
    let num_experts = cfg.require(cfg.num_experts, "num_experts")?;
    let experts_per_token = cfg.require(cfg.num_experts_per_tok, "num_experts_per_tok")?;
    if experts_per_token == 0 || experts_per_token > num_experts {
        bail!("config.json: num_experts_per_tok {experts_per_token} must be between 1 and num_experts ({num_experts})");
    }
    config.moe = Some(MoeConfig {
        num_experts,
        experts_per_token,
        expert_intermediate_size: cfg.require(cfg.moe_intermediate_size, "moe_intermediate_size")?,
        normalize_top_k: true,
        sparse_layers: vec![true; config.layers.len()],
        shared_expert_intermediate_size: Some(cfg.require(cfg.shared_expert_intermediate_size, "shared_expert_intermediate_size")?),
    });
    Ok(())
}
