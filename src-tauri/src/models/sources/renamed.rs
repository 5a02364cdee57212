//! A view of a weight store under other tensor names: checkpoints that nest
//! a language model inside a larger model (VibeVoice's
//! `model.language_model.layers.0…`) are read by the decoder, which asks for
//! `model.layers.0…`.

use crate::models::weights::{StoredTensor, WeightStore};
use anyhow::Result;
use candle_core::Device;

/// Serves `{to}{rest}` when asked for `{from}{rest}`, for the first
/// `(from, to)` prefix pair that matches; other names pass through.
pub struct RenamedStore<S> {
    inner: S,
    prefixes: Vec<(String, String)>,
}

impl<S: WeightStore> RenamedStore<S> {
    pub fn new(inner: S, prefixes: &[(&str, &str)]) -> Self {
        Self { inner, prefixes: prefixes.iter().map(|(from, to)| (from.to_string(), to.to_string())).collect() }
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

    fn with_stored_bytes(
        &self,
        name: &str,
        f: &mut dyn FnMut(crate::formats::gguf::GgmlType, &[u8]) -> Result<()>,
    ) -> Option<Result<()>> {
        self.inner.with_stored_bytes(&self.stored_name(name), f)
    }

    fn stored_name(&self, name: &str) -> String {
        for (from, to) in &self.prefixes {
            if let Some(rest) = name.strip_prefix(from.as_str()) {
                return self.inner.stored_name(&format!("{to}{rest}"));
            }
        }
        self.inner.stored_name(name)
    }
}
