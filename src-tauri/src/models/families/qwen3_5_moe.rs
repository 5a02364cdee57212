//! Qwen3.5-MoE text (`Qwen3_5MoeForCausalLM`, `qwen3_5_moe_text`): Qwen3.5's
//! hybrid layers with a sparse MoE in every layer: the chosen experts'
//! probabilities always renormalised, plus a shared expert gated by a sigmoid.

use crate::models::config::{HfConfig, ModelConfig};
use anyhow::Result;

pub fn adjust(cfg: &HfConfig, config: &mut ModelConfig) -> Result<()> {
    super::qwen3_5::adjust(cfg, config)?;
    let shared = cfg.require(cfg.shared_expert_intermediate_size, "shared_expert_intermediate_size")?;
    // Its configs give neither `decoder_sparse_step` nor `mlp_only_layers`: every layer is sparse.
    let mut experts = super::qwen3_moe::experts(cfg, config.layers.len(), Some(shared))?;
    experts.normalize_top_k = true;
    config.moe = Some(experts);
    Ok(())
}
