//! EXAONE 4: OLMo 2's post-norm blocks with Qwen3's per-head q/k norm, and
//! hybrid attention when a window is set: local layers (sliding window,
//! rotary) and global layers that attend everywhere with no position
//! encoding at all, three local to one global in the released models.

use crate::models::config::{HfConfig, ModelConfig, NormPlacement, QkNorm};
use anyhow::Result;

pub fn adjust(cfg: &HfConfig, config: &mut ModelConfig) -> Result<()> {
    config.qk_norm = QkNorm::PerHead;
    config.norm_placement = NormPlacement::Post;
    let Some(window) = cfg.sliding_window else {
        return Ok(());
    };
    let local = super::local_layers(cfg, 4, config.layers.len())?;
    for (layer, is_local) in config.layers.iter_mut().zip(local) {
        if is_local {
            layer.sliding_window = Some(window);
        } else {
            layer.uses_rope = false;
        }
    }
    Ok(())
}
