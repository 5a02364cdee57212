//! Tensors from a Hugging Face model folder: one `model.safetensors`, or shards
//! listed by `model.safetensors.index.json`.
//!
//! [`SafetensorsFolder::open`] takes a tensor filter (usually a
//! [`super::selection::TensorSelection`]) so that a worker
//! holding layers 8..16 opens only the shards that contain them;
//! [`tensor_sizes`] reads headers only, to size layers before assignment.

use crate::formats::safetensors::{SafetensorsFile, SafetensorsHeader};
use crate::models::weights::{StoredTensor, WeightStore};
use anyhow::{bail, Context, Result};
use candle_core::Device;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

const SINGLE_FILE: &str = "model.safetensors";
const INDEX_FILE: &str = "model.safetensors.index.json";

/// The tensor name → shard file map of a folder.
fn weight_map(dir: &Path) -> Result<BTreeMap<String, PathBuf>> {
    let index_path = dir.join(INDEX_FILE);
    if index_path.exists() {
        let text =
            std::fs::read_to_string(&index_path).with_context(|| format!("cannot read {}", index_path.display()))?;
        #[derive(serde::Deserialize)]
        struct Index {
            weight_map: BTreeMap<String, String>,
        }
        let index: Index = serde_json::from_str(&text)
            .with_context(|| format!("{}: not a safetensors index", index_path.display()))?;
        let mut map = BTreeMap::new();
        for (tensor, file) in index.weight_map {
            if file.contains('/') || file.contains('\\') || file.starts_with('.') {
                bail!("{}: shard name `{file}` must be a plain file name in the model folder", index_path.display());
            }
            map.insert(tensor, dir.join(file));
        }
        return Ok(map);
    }
    let single = dir.join(SINGLE_FILE);
    if single.exists() {
        let header = SafetensorsHeader::read(&single)?;
        return Ok(header.tensors.into_keys().map(|name| (name, single.clone())).collect());
    }
    bail!("{}: no {SINGLE_FILE} or {INDEX_FILE} in the model folder", dir.display())
}

/// Byte size of every tensor in the folder, from the headers alone.
pub fn tensor_sizes(dir: &Path) -> Result<BTreeMap<String, u64>> {
    let shards: BTreeSet<PathBuf> = weight_map(dir)?.into_values().collect();
    let mut sizes = BTreeMap::new();
    for shard in shards {
        let header = SafetensorsHeader::read(&shard)?;
        for (name, entry) in header.tensors {
            sizes.insert(name, entry.byte_size());
        }
    }
    Ok(sizes)
}

/// The opened shards of a model folder.
pub struct SafetensorsFolder {
    dir: PathBuf,
    files: Vec<SafetensorsFile>,
    /// Tensor name → index into `files`.
    located: HashMap<String, usize>,
}

impl SafetensorsFolder {
    /// Opens the shards holding at least one tensor that `wanted` accepts.
    pub fn open(dir: &Path, wanted: impl Fn(&str) -> bool) -> Result<Self> {
        let map = weight_map(dir)?;
        let mut shard_index: HashMap<PathBuf, usize> = HashMap::new();
        let mut files = Vec::new();
        let mut located = HashMap::new();
        for (name, shard) in map {
            if !wanted(&name) {
                continue;
            }
            let idx = match shard_index.get(&shard) {
                Some(&i) => i,
                None => {
                    files.push(SafetensorsFile::open(&shard)?);
                    shard_index.insert(shard.clone(), files.len() - 1);
                    files.len() - 1
                }
            };
            if files[idx].entry(&name).is_none() {
                bail!("{}: the index lists `{name}` in {} but that shard lacks it", dir.display(), shard.display());
            }
            located.insert(name, idx);
        }
        Ok(Self { dir: dir.to_path_buf(), files, located })
    }

    /// The shard files this store opened.
    pub fn opened_files(&self) -> Vec<&Path> {
        self.files.iter().map(|f| f.header.path.as_path()).collect()
    }
}

impl WeightStore for SafetensorsFolder {
    fn origin(&self) -> String {
        self.dir.display().to_string()
    }

    fn contains(&self, name: &str) -> bool {
        self.located.contains_key(name)
    }

    fn shape(&self, name: &str) -> Option<Vec<usize>> {
        let file = &self.files[*self.located.get(name)?];
        file.entry(name).map(|e| e.shape.clone())
    }

    fn load(&self, name: &str, device: &Device) -> Result<StoredTensor> {
        let idx =
            self.located.get(name).with_context(|| format!("{}: tensor `{name}` is missing", self.dir.display()))?;
        Ok(StoredTensor::Dense(self.files[*idx].load(name, device)?))
    }
}
