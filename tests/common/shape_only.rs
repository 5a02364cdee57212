//! A weight store that knows tensors by name and shape only (from a
//! reference state dict dumped on torch's meta device): every tensor is a
//! broadcast zero, so a loader can be run over a full-size layout without
//! allocating its weights, and what it loaded is recorded.

use cake::models::weights::{StoredTensor, WeightStore};
use candle_core::{Device, Tensor};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// Tensors known only by name and shape; loading one records it.
#[derive(Clone)]
pub struct ShapeOnly {
    pub shapes: Arc<BTreeMap<String, Vec<usize>>>,
    pub loaded: Arc<Mutex<BTreeMap<String, Vec<usize>>>>,
}

impl WeightStore for ShapeOnly {
    fn origin(&self) -> String {
        "the reference state dict".into()
    }
    fn contains(&self, name: &str) -> bool {
        self.shapes.contains_key(name)
    }
    fn shape(&self, name: &str) -> Option<Vec<usize>> {
        self.shapes.get(name).cloned()
    }
    fn load(&self, name: &str, device: &Device) -> anyhow::Result<StoredTensor> {
        let shape =
            self.shapes.get(name).ok_or_else(|| anyhow::anyhow!("`{name}` is not in the reference state dict"))?;
        self.loaded.lock().unwrap().insert(name.to_string(), shape.clone());
        // The scaling scalars must be finite for the loader; the rest is never read.
        let value = if name.ends_with("speech_scaling_factor") { 1.0f32 } else { 0.0 };
        Ok(StoredTensor::Dense(Tensor::new(value, device)?.broadcast_as(shape.as_slice())?))
    }
}
