//! EXAONE 4: OLMo 2's post-norm blocks with Qwen3's per-head q/k norm, and
//! hybrid attention when a window is set: local layers (sliding window,
//! rotary) and global layers that attend everywhere with no position
//! encoding at all, three local to one global in the released models.

use crate::models::config::{HfConfig, ModelConfig, NormPlacement, QkNorm};
use anyhow::{bail, Context, Result};
use serde_json::Value;

pub fn adjust(cfg: &HfConfig, config: &mut ModelConfig) -> Result<()> {
    config.qk_norm = QkNorm::PerHead;
    config.norm_placement = NormPlacement::Post;
    let Some(window) = cfg.sliding_window else {
        return Ok(());
    };
    let n = config.layers.len();
    let local: Vec<bool> = match &cfg.layer_types {
        Some(types) if types.len() != n => bail!("config.json: `layer_types` has {} entries for {n} layers", types.len()),
        Some(types) => types.iter().map(|t| t == "sliding_attention").collect(),
        None => local_layers_from_pattern(cfg.sliding_window_pattern.as_ref(), n)?,
    };
    for (layer, is_local) in config.layers.iter_mut().zip(local) {
        if is_local {
            layer.sliding_window = Some(window);
        } else {
            layer.uses_rope = false;
        }
    }
    Ok(())
}

/// Which layers are local, from `sliding_window_pattern` (default 4): a
/// period whose last layer is global, or a string of `L` (local) and `G`.
fn local_layers_from_pattern(pattern: Option<&Value>, n: usize) -> Result<Vec<bool>> {
    match pattern {
        None => Ok((0..n).map(|i| (i + 1) % 4 != 0).collect()),
        Some(Value::Number(period)) => {
            let period = period.as_u64().filter(|&p| p > 0).context("config.json: `sliding_window_pattern` must be a positive integer")? as usize;
            Ok((0..n).map(|i| (i + 1) % period != 0).collect())
        }
        Some(Value::String(letters)) if !letters.is_empty() && letters.chars().all(|c| c == 'L' || c == 'G') => {
            let letters: Vec<char> = letters.chars().collect();
            Ok((0..n).map(|i| letters[i % letters.len()] == 'L').collect())
        }
        Some(other) => bail!("config.json: `sliding_window_pattern` {other} is neither a period nor a string of L and G"),
    }
}
