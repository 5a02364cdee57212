//! Llama (Llama 2/3, SmolLM2, Falcon 3, DeepSeek-R1 Llama distills).
//!
//! The common mapping is Llama: `attention_bias` covers q/k/v/o, `mlp_bias`
//! the MLP, `rope_scaling` may be `llama3`, and small models tie the LM head
//! to the embedding. Nothing to adjust.

use crate::models::config::{HfConfig, ModelConfig};
use anyhow::Result;

pub fn adjust(_cfg: &HfConfig, _config: &mut ModelConfig) -> Result<()> {
    Ok(())
}
