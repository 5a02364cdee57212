//! A state dict that `torch.save` wrote, as a [`WeightStore`]: either the
//! file's top-level dict itself (`torch.save(model.state_dict())`) or the
//! dict under one key of it (`torch.save({"model": state_dict, …})`).
//! Nothing is read but the pickle until a tensor is asked for.

use crate::formats::torch_pickle::{TensorRef, TorchFile, Value};
use crate::models::weights::{StoredTensor, WeightStore};
use anyhow::{bail, Context, Result};
use candle_core::Device;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub struct TorchCheckpoint {
    path: PathBuf,
    file: TorchFile,
    tensors: BTreeMap<String, TensorRef>,
}

impl TorchCheckpoint {
    /// Opens `path`; `key` names the entry that holds the state dict, if
    /// the dict is not the file's top level.
    pub fn open(path: &Path, key: Option<&str>) -> Result<Self> {
        let file = TorchFile::open(path)?;
        let dict = match key {
            None => &file.root,
            Some(key) => file
                .root
                .get(key)
                .with_context(|| format!("{}: the checkpoint has no `{key}` entry", path.display()))?,
        };
        let Value::Dict(items) = dict else {
            bail!("{}: the checkpoint's state dict is not a dict", path.display());
        };
        let mut tensors = BTreeMap::new();
        for (name, value) in items {
            let (Value::Str(name), Value::Tensor(tensor)) = (name, value) else {
                bail!("{}: the state dict holds {name:?} → {value:?}, not a named tensor", path.display());
            };
            tensors.insert(name.clone(), tensor.clone());
        }
        Ok(Self { path: path.to_path_buf(), file, tensors })
    }

    /// Every tensor's name, in order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tensors.keys().map(String::as_str)
    }
}

impl WeightStore for TorchCheckpoint {
    fn origin(&self) -> String {
        self.path.display().to_string()
    }

    fn contains(&self, name: &str) -> bool {
        self.tensors.contains_key(name)
    }

    fn shape(&self, name: &str) -> Option<Vec<usize>> {
        self.tensors.get(name).map(|t| t.shape.clone())
    }

    fn load(&self, name: &str, device: &Device) -> Result<StoredTensor> {
        let tensor =
            self.tensors.get(name).with_context(|| format!("{}: tensor `{name}` is missing", self.origin()))?;
        let loaded = self.file.load(tensor, device).with_context(|| format!("{}: tensor `{name}`", self.origin()))?;
        Ok(StoredTensor::Dense(loaded))
    }
}
