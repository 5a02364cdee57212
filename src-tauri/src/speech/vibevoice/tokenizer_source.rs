//! Where a VibeVoice checkpoint's text tokenizer is. The checkpoints ship
//! none: the reference loads the tokenizer of the language model it was
//! trained from (`preprocessor_config.json`'s
//! `language_model_pretrained_name`, Qwen/Qwen2.5-1.5B by default). Cake
//! takes `tokenizer.json` from the model folder, else from that model in the
//! Hugging Face cache (where downloading a VibeVoice model puts it), else,
//! for a Qwen2.5 model, from any Qwen2.5 model in the cache: every size,
//! base or instruct, ships the same `tokenizer.json`.

use crate::files::hf_cache;
use anyhow::{bail, Result};
use std::path::{Path, PathBuf};

/// The model whose tokenizer VibeVoice uses unless its preprocessor config says otherwise.
pub const DEFAULT_TOKENIZER_REPO: &str = "Qwen/Qwen2.5-1.5B";

/// The ids of the Qwen2.5 models, which share one tokenizer.
const QWEN25_PREFIX: &str = "Qwen/Qwen2.5-";

/// The snapshot of a Qwen2.5 model in `hf_cache` that holds `tokenizer.json`
/// (the first by name), if any.
fn any_qwen25_tokenizer(hf_cache: &Path) -> Result<Option<PathBuf>> {
    let folder_prefix = format!("models--{}", QWEN25_PREFIX.replace('/', "--"));
    let Ok(entries) = std::fs::read_dir(hf_cache) else { return Ok(None) };
    let mut repos: Vec<String> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.strip_prefix("models--")).map(str::to_string))
        .filter(|name| format!("models--{name}").starts_with(&folder_prefix))
        .map(|name| name.replacen("--", "/", 1))
        .collect();
    repos.sort();
    for repo in repos {
        if let Some(snapshot) = hf_cache::find_snapshot(hf_cache, &repo)? {
            if snapshot.join("tokenizer.json").exists() {
                return Ok(Some(snapshot));
            }
        }
    }
    Ok(None)
}

/// The Hugging Face id of the tokenizer `dir`'s checkpoint was trained with.
pub fn tokenizer_repo(dir: &Path) -> String {
    std::fs::read(dir.join("preprocessor_config.json"))
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .and_then(|v| v["language_model_pretrained_name"].as_str().map(str::to_string))
        .filter(|name| hf_cache::looks_like_repo_id(name))
        .unwrap_or_else(|| DEFAULT_TOKENIZER_REPO.to_string())
}

/// The folder holding the tokenizer for the checkpoint in `dir`, looking in
/// `hf_cache` when the folder has none.
pub fn tokenizer_dir(dir: &Path, hf_cache: &Path) -> Result<PathBuf> {
    if dir.join("tokenizer.json").exists() {
        return Ok(dir.to_path_buf());
    }
    let repo = tokenizer_repo(dir);
    if let Some(snapshot) = hf_cache::find_snapshot(hf_cache, &repo)? {
        if snapshot.join("tokenizer.json").exists() {
            return Ok(snapshot);
        }
    }
    if repo.starts_with(QWEN25_PREFIX) {
        if let Some(snapshot) = any_qwen25_tokenizer(hf_cache)? {
            return Ok(snapshot);
        }
    }
    bail!(
        "{}: VibeVoice checkpoints ship no tokenizer; add {repo}'s tokenizer.json to the folder (downloading the model with Cake fetches it)",
        dir.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cached snapshot of `repo` holding `files`.
    fn cached(cache: &Path, repo: &str, files: &[&str]) -> PathBuf {
        let snapshot = cache.join(format!("models--{}", repo.replace('/', "--"))).join("snapshots/abc");
        std::fs::create_dir_all(&snapshot).unwrap();
        for file in files {
            std::fs::write(snapshot.join(file), "{}").unwrap();
        }
        snapshot
    }

    #[test]
    fn a_qwen25_tokenizer_of_any_size_in_the_cache_serves() {
        let root = tempfile::tempdir().unwrap();
        let (model, cache) = (root.path().join("VibeVoice-1.5B"), root.path().join("hub"));
        std::fs::create_dir_all(&model).unwrap();
        let error = tokenizer_dir(&model, &cache).unwrap_err().to_string();
        assert!(error.contains("Qwen/Qwen2.5-1.5B's tokenizer.json"), "{error}");
        cached(&cache, "Qwen/Qwen2.5-7B-Instruct", &["config.json"]); // no tokenizer
        let small = cached(&cache, "Qwen/Qwen2.5-0.5B-Instruct", &["tokenizer.json"]);
        cached(&cache, "Qwen/Qwen3-0.6B", &["tokenizer.json"]); // another family's
        assert_eq!(tokenizer_dir(&model, &cache).unwrap(), small);
        let exact = cached(&cache, "Qwen/Qwen2.5-1.5B", &["tokenizer.json"]);
        assert_eq!(tokenizer_dir(&model, &cache).unwrap(), exact, "the model's own comes first");
    }
}
