//! Where a VibeVoice checkpoint's text tokenizer is. The checkpoints ship
//! none: the reference loads the tokenizer of the language model it was
//! trained from (`preprocessor_config.json`'s
//! `language_model_pretrained_name`, Qwen/Qwen2.5-1.5B by default). Cake
//! takes `tokenizer.json` from the model folder, else from that model in the
//! Hugging Face cache (where downloading a VibeVoice model puts it).

use crate::files::hf_cache;
use anyhow::{bail, Result};
use std::path::{Path, PathBuf};

/// The model whose tokenizer VibeVoice uses unless its preprocessor config says otherwise.
pub const DEFAULT_TOKENIZER_REPO: &str = "Qwen/Qwen2.5-1.5B";

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
    bail!(
        "{}: VibeVoice checkpoints ship no tokenizer; add {repo}'s tokenizer.json to the folder (downloading the model with Cake fetches it)",
        dir.display()
    )
}
