//! Qwen3-Next (`Qwen3NextForCausalLM`): Qwen3.5's hybrid layers (Gated
//! DeltaNet and gated full attention) with Qwen3-MoE's expert layout plus a
//! sigmoid-gated shared expert. Its DeltaNet stores q/k/v/z and b/a fused per
//! key head group (`in_proj_qkvz`, `in_proj_ba`); the layer reorders them.

use crate::models::config::{HfConfig, ModelConfig};
use anyhow::Result;

pub fn adjust(cfg: &HfConfig, config: &mut ModelConfig) -> Result<()> {
    super::qwen3_5::adjust(cfg, config)?;
    let shared = cfg.require(cfg.shared_expert_intermediate_size, "shared_expert_intermediate_size")?;
    config.moe = Some(super::qwen3_moe::experts(cfg, config.layers.len(), Some(shared))?);
    Ok(())
}
