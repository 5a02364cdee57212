//! Phi-3 and Phi-4 (`Phi3ForCausalLM`): Llama's block with q/k/v fused into
//! one `qkv_proj` and gate/up into one `gate_up_proj` (the layers find the
//! fused tensors themselves), rotary on the first `partial_rotary_factor` of
//! each head and LongRoPE scaling where configured (both read with the rope
//! parameters). Otherwise Mistral's mapping: no biases, and one sliding
//! window over every layer when the config sets one.

use crate::models::config::{HfConfig, ModelConfig};
use anyhow::Result;

pub fn adjust(cfg: &HfConfig, config: &mut ModelConfig) -> Result<()> {
    super::mistral::adjust(cfg, config)
}
