//! The Hugging Face hub cache (`models--org--name/snapshots/<rev>/`), shared
//! with `transformers` and `huggingface-cli`.

use super::paths::folder_from_env;
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

/// `$HF_HUB_CACHE`, else `$HF_HOME/hub`, else `~/.cache/huggingface/hub`.
pub fn cache_dir() -> PathBuf {
    folder_from_env("HF_HUB_CACHE", ("HF_HOME", "hub"), ".cache/huggingface/hub")
}

/// `org/name` with plain characters only.
pub fn looks_like_repo_id(spec: &str) -> bool {
    let mut parts = spec.split('/');
    let ok = |p: Option<&str>| {
        p.is_some_and(|p| {
            !p.is_empty() && p != "." && p != ".." && p.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        })
    };
    ok(parts.next()) && ok(parts.next()) && parts.next().is_none()
}

/// The snapshot folder of `repo_id` that `refs/main` points to (or the only one).
pub fn find_snapshot(cache: &Path, repo_id: &str) -> Result<Option<PathBuf>> {
    let repo_dir = cache.join(format!("models--{}", repo_id.replace('/', "--")));
    let snapshots = repo_dir.join("snapshots");
    if !snapshots.is_dir() {
        return Ok(None);
    }
    if let Ok(rev) = std::fs::read_to_string(repo_dir.join("refs/main")) {
        let dir = snapshots.join(rev.trim());
        if dir.is_dir() {
            return Ok(Some(dir));
        }
    }
    let mut entries: Vec<PathBuf> = std::fs::read_dir(&snapshots)
        .with_context(|| format!("cannot list {}", snapshots.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    entries.sort();
    Ok(entries.pop())
}

/// Whether the repo's blob folder holds a partial download (`*.incomplete`).
pub fn has_incomplete_blobs(cache: &Path, repo_id: &str) -> bool {
    let blobs = cache.join(format!("models--{}", repo_id.replace('/', "--"))).join("blobs");
    std::fs::read_dir(blobs)
        .is_ok_and(|dir| dir.filter_map(|e| e.ok()).any(|e| e.file_name().to_string_lossy().ends_with(".incomplete")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repo_ids_are_recognised() {
        assert!(looks_like_repo_id("HuggingFaceTB/SmolLM2-135M-Instruct"));
        assert!(!looks_like_repo_id("../etc"));
        assert!(!looks_like_repo_id("a/b/c"));
        assert!(!looks_like_repo_id("model.gguf"));
    }

    #[test]
    fn snapshot_follows_refs_main() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("models--org--m");
        std::fs::create_dir_all(repo.join("snapshots/abc")).unwrap();
        std::fs::create_dir_all(repo.join("snapshots/zzz")).unwrap();
        std::fs::create_dir_all(repo.join("refs")).unwrap();
        std::fs::write(repo.join("refs/main"), "abc\n").unwrap();
        assert_eq!(find_snapshot(dir.path(), "org/m").unwrap(), Some(repo.join("snapshots/abc")));
        assert_eq!(find_snapshot(dir.path(), "org/other").unwrap(), None);
    }
}
