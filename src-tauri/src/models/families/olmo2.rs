//! OLMo 2: Llama's layout with the norms moved after attention and MLP
//! (`post_attention_layernorm`, `post_feedforward_layernorm`, no input
//! norm), and RMSNorm over the whole q and k projections before rotary.

use crate::models::config::{HfConfig, ModelConfig, NormPlacement, QkNorm};
use anyhow::Result;

pub fn adjust(_cfg: &HfConfig, config: &mut ModelConfig) -> Result<()> {
    config.qk_norm = QkNorm::Whole;
    config.norm_placement = NormPlacement::Post;
    Ok(())
}
