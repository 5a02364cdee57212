//! Qwen3: RMSNorm over each head of q and k before rotary, an explicit
//! `head_dim`, biases only when `attention_bias` says so, and Qwen's
//! sliding-window layer rule.

use crate::models::config::{HfConfig, ModelConfig, QkNorm};
use anyhow::Result;

pub fn adjust(cfg: &HfConfig, config: &mut ModelConfig) -> Result<()> {
    config.qk_norm = QkNorm::PerHead;
    super::qwen_style_windows(cfg, config)
}
