//! A view of a weight store under other tensor names: checkpoints that nest
//! a language model inside a larger model (VibeVoice's
//! `model.language_model.layers.0…`) are read by the decoder, which asks for
//! `model.layers.0…`.

use crate::models::weights::{StoredTensor, WeightStore};
use anyhow::Result;
use candle_core::Device;

/// Serves `{to}{rest}` when asked for `{from}{rest}`; other names pass through.
pub struct RenamedStore<S> {
    inner: S,
    from: String,
    to: String,
}

impl<S: WeightStore> RenamedStore<S> {
    pub fn new(inner: S, from: &str, to: &str) -> Self {
        Self {
            inner,
            from: from.to_string(),
            to: to.to_string(),
        }
    }

    fn stored_name(&self, name: &str) -> String {
        match name.strip_prefix(&self.from) {
            Some(rest) => format!("{}{rest}", self.to),
            None => name.to_string(),
        }
    }
}

impl<S: WeightStore> WeightStore for RenamedStore<S> {
    fn origin(&self) -> String {
        self.inner.origin()
    }

    fn contains(&self, name: &str) -> bool {
        self.inner.contains(&self.stored_name(name))
    }

    fn shape(&self, name: &str) -> Option<Vec<usize>> {
        self.inner.shape(&self.stored_name(name))
    }

    fn load(&self, name: &str, device: &Device) -> Result<StoredTensor> {
        self.inner.load(&self.stored_name(name), device)
    }
}
