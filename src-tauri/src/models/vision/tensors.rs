//! Where a picture reader's weights come from: a model folder's
//! safetensors, or an mmproj GGUF file, both read under transformers'
//! names as f32.

use super::mmproj::Mmproj;
use crate::models::sources::folder::SafetensorsFolder;
use crate::models::weights::{StoredTensor, WeightStore};
use anyhow::{bail, Result};
use candle_core::{DType, Device, Tensor};

/// A picture reader's tensors.
pub enum Tensors {
    /// A model folder's, memory-mapped through the folder reader every
    /// model uses (only the shards holding them opened).
    Folder(SafetensorsFolder),
    Mmproj(Mmproj),
}

impl Tensors {
    /// The tensors of the folder `dir` whose names start with one of
    /// `prefixes` (the vision tower's and projector's).
    pub fn open(dir: &std::path::Path, prefixes: &[&str]) -> Result<Self> {
        let vision = |name: &str| prefixes.iter().any(|prefix| name.starts_with(prefix));
        Ok(Self::Folder(SafetensorsFolder::open(dir, vision)?))
    }

    /// The tensor transformers calls `name`, in f32.
    pub fn load(&self, name: &str) -> Result<Tensor> {
        match self {
            Self::Folder(store) => match store.load(name, &Device::Cpu)? {
                StoredTensor::Dense(t) => Ok(t.to_dtype(DType::F32)?),
                _ => bail!("{}: `{name}` is not a plain float tensor", store.origin()),
            },
            Self::Mmproj(file) => file.load(name),
        }
    }
}
