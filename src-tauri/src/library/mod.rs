//! Where models live on disk: the app's data folder (holding the embedded
//! default model) and the Hugging Face cache shared with other tools.

pub mod catalog;
pub mod download;
pub mod hub;

use crate::files::{hf_cache, paths};

use anyhow::{bail, Result};
use std::path::{Path, PathBuf};

/// Resolves what a person typed after `--model`: a path to a GGUF file or a
/// model folder, or a Hugging Face id already in the local cache. `None`
/// means the embedded default model.
pub fn resolve_model(spec: Option<&str>) -> Result<PathBuf> {
    let Some(spec) = spec else {
        let candidates = paths::default_model_candidates(&paths::data_dir(), &paths::packaged_model_dirs());
        let Some(path) = candidates.iter().find(|path| path.is_file()).cloned() else {
            let searched: Vec<String> = candidates.iter().map(|path| path.display().to_string()).collect();
            bail!(
                "the default model is not installed (looked for {}); pass --model, or run `make model` in a \
                 source checkout to fetch it",
                searched.join(", ")
            );
        };
        return Ok(path);
    };
    let as_path = Path::new(spec);
    if as_path.exists() {
        return Ok(as_path.to_path_buf());
    }
    if hf_cache::looks_like_repo_id(spec) {
        if let Some(snapshot) = hf_cache::find_snapshot(&hf_cache::cache_dir(), spec)? {
            return Ok(snapshot);
        }
        bail!(
            "`{spec}` is neither a file nor a folder, and not in the Hugging Face cache at {}",
            hf_cache::cache_dir().display()
        );
    }
    bail!("{spec}: no such model file or folder")
}
