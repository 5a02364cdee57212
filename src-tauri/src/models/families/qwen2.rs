//! Qwen2 / Qwen2.5: biases on the q/k/v projections (not on o), and optional
//! sliding-window layers above `max_window_layers`.

use crate::models::config::{HfConfig, ModelConfig};
use anyhow::Result;

pub fn adjust(cfg: &HfConfig, config: &mut ModelConfig) -> Result<()> {
    config.qkv_bias = true;
    config.o_bias = false;
    super::qwen_style_windows(cfg, config)
}
