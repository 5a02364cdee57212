//! Conversations on disk, one JSON file each, written atomically.
//!
//! The UI owns the conversation's shape (see docs/api.md); the store checks
//! the id, stamps nothing it does not own, and never lets one unreadable
//! file hide the others.

use crate::files::storage::write_json_atomically;
use anyhow::{bail, Context, Result};
use serde_json::Value;
use std::path::{Path, PathBuf};

pub struct ConversationStore {
    dir: PathBuf,
}

/// A conversation id is 1–64 characters of `[A-Za-z0-9_-]` (it names a file).
pub fn valid_id(id: &str) -> bool {
    (1..=64).contains(&id.len()) && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

impl ConversationStore {
    pub fn new(dir: PathBuf) -> Self {
        Self { dir }
    }

    fn path(&self, id: &str) -> Result<PathBuf> {
        if !valid_id(id) {
            bail!("invalid conversation id `{id}` (use 1–64 letters, digits, - or _)");
        }
        Ok(self.dir.join(format!("{id}.json")))
    }

    /// `{id, title, updated_at}` of every readable conversation, newest first.
    pub fn list(&self) -> Result<Vec<Value>> {
        let Ok(dir) = std::fs::read_dir(&self.dir) else {
            return Ok(Vec::new());
        };
        let mut items: Vec<Value> = dir
            .filter_map(|e| e.ok())
            .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
            .filter_map(|e| read(&e.path()).ok())
            .map(|c| serde_json::json!({"id": c["id"], "title": c["title"], "updated_at": c["updated_at"]}))
            .collect();
        items.sort_by(|a, b| b["updated_at"].as_str().cmp(&a["updated_at"].as_str()));
        Ok(items)
    }

    pub fn get(&self, id: &str) -> Result<Value> {
        let path = self.path(id)?;
        if !path.exists() {
            bail!("no conversation `{id}`");
        }
        read(&path)
    }

    /// Saves a conversation object (which must carry a valid `id`).
    pub fn save(&self, conversation: &Value) -> Result<()> {
        let id = conversation["id"].as_str().context("the conversation has no `id`")?;
        if !conversation["messages"].is_array() {
            bail!("the conversation has no `messages` list");
        }
        write_json_atomically(&self.path(id)?, conversation)
    }

    pub fn delete(&self, id: &str) -> Result<()> {
        let path = self.path(id)?;
        std::fs::remove_file(&path).with_context(|| format!("no conversation `{id}`"))
    }
}

fn read(path: &Path) -> Result<Value> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{}: not valid JSON", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn save_list_get_delete_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let store = ConversationStore::new(dir.path().to_path_buf());
        let a = serde_json::json!({"id": "a1", "title": "first", "updated_at": "2026-01-01T00:00:00Z", "messages": []});
        let b =
            serde_json::json!({"id": "b2", "title": "second", "updated_at": "2026-02-01T00:00:00Z", "messages": []});
        store.save(&a).unwrap();
        store.save(&b).unwrap();
        std::fs::write(dir.path().join("broken.json"), "{not json").unwrap();
        let listed = store.list().unwrap();
        assert_eq!(listed.iter().map(|c| c["id"].as_str().unwrap()).collect::<Vec<_>>(), vec!["b2", "a1"]);
        assert_eq!(store.get("a1").unwrap(), a);
        store.delete("a1").unwrap();
        assert!(store.get("a1").is_err());
    }

    #[test]
    fn ids_that_could_escape_the_folder_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = ConversationStore::new(dir.path().to_path_buf());
        for id in ["../x", "", "a/b", "a.json"] {
            assert!(store.get(id).is_err(), "{id}");
        }
        let bad = serde_json::json!({"id": "../../etc", "messages": []});
        assert!(store.save(&bad).is_err());
    }
}
