//! Mistral: Llama's layout without biases, where every layer attends only to
//! the last `sliding_window` positions when the config sets one.

use crate::models::config::{HfConfig, ModelConfig};
use anyhow::Result;

pub fn adjust(cfg: &HfConfig, config: &mut ModelConfig) -> Result<()> {
    config.qkv_bias = false;
    config.o_bias = false;
    for layer in &mut config.layers {
        layer.sliding_window = cfg.sliding_window;
    }
    Ok(())
}
