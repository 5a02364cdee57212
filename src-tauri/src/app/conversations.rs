//! Conversations on disk, one JSON file each, written atomically.
//!
//! The UI owns the conversation's shape (see docs/api.md); the store checks
//! the id, stamps nothing it does not own, and never lets one unreadable
//! file hide the others: a damaged file is listed as damaged and kept.
//! Errors say whose fault they are: a bad id or shape is the request's,
//! a file that cannot be written or read is the machine's.

use super::error::ApiError;
use super::picture_store::{pictures_in, PictureId};
use crate::files::storage::{read_json, write_json_atomically, StorageError};
use serde_json::Value;
use std::collections::HashSet;
use std::path::PathBuf;

type Result<T> = std::result::Result<T, ApiError>;

pub struct ConversationStore {
    dir: PathBuf,
}

/// Most conversations a search returns.
const SEARCH_LIMIT: usize = 50;
/// Longest search query, in characters.
const MAX_QUERY_CHARS: usize = 200;
/// Characters of context kept before and after a match in a snippet.
const SNIPPET_BEFORE: usize = 30;
const SNIPPET_AFTER: usize = 60;

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
            return Err(ApiError::BadRequest(format!(
                "invalid conversation id `{id}` (use 1–64 letters, digits, - or _)"
            )));
        }
        Ok(self.dir.join(format!("{id}.json")))
    }

    /// `{id, title, updated_at}` of every conversation, newest first; a
    /// file that cannot be read is listed with `damaged` saying why (and
    /// its id as title), so the user sees it is there.
    pub fn list(&self) -> Result<Vec<Value>> {
        let mut items: Vec<Value> = self
            .files()
            .into_iter()
            .map(|(id, read)| match read {
                Ok(conversation) => summary(&conversation),
                Err(e) => {
                    let modified = std::fs::metadata(self.dir.join(format!("{id}.json"))).and_then(|m| m.modified());
                    let updated_at = modified.map(|t| chrono::DateTime::<chrono::Utc>::from(t).to_rfc3339());
                    serde_json::json!({
                        "id": id, "title": id, "updated_at": updated_at.unwrap_or_default(), "damaged": e.to_string(),
                    })
                }
            })
            .collect();
        newest_first(&mut items);
        Ok(items)
    }

    /// The conversations whose title or messages contain `query`, ignoring
    /// case: `{id, title, updated_at, snippet}`, newest first, at most
    /// [`SEARCH_LIMIT`]; the snippet is the first match with some context.
    pub fn search(&self, query: &str) -> Result<Vec<Value>> {
        let needle = query.split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase();
        if needle.is_empty() {
            return Err(ApiError::BadRequest("type something to search for".into()));
        }
        if needle.chars().count() > MAX_QUERY_CHARS {
            return Err(ApiError::BadRequest(format!("a search is at most {MAX_QUERY_CHARS} characters")));
        }
        let mut found: Vec<Value> = self
            .files()
            .into_iter()
            .filter_map(|(_, read)| read.ok())
            .filter_map(|conversation| {
                // The title is shown beside the snippet: a message's words say more.
                let title = conversation["title"].as_str().into_iter();
                let messages = conversation["messages"].as_array().into_iter().flatten();
                let mut texts = messages.filter_map(|m| m["content"].as_str()).chain(title);
                let snippet = texts.find_map(|text| snippet_around(text, &needle))?;
                let mut item = summary(&conversation);
                item["snippet"] = Value::String(snippet);
                Some(item)
            })
            .collect();
        newest_first(&mut found);
        found.truncate(SEARCH_LIMIT);
        Ok(found)
    }

    /// Every conversation file by id, read or not (one bad file hides
    /// nothing else).
    fn files(&self) -> Vec<(String, std::result::Result<Value, StorageError>)> {
        let Ok(dir) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        dir.filter_map(|e| e.ok())
            .filter_map(|e| {
                let path = e.path();
                let id = path.file_stem()?.to_str()?.to_string();
                let is_conversation = path.extension().is_some_and(|x| x == "json") && valid_id(&id);
                is_conversation.then(|| (id, read_json(&path).map(Option::unwrap_or_default)))
            })
            .collect()
    }

    /// The pictures the conversations show; `None` when a file cannot be
    /// read (what it shows is unknown, so no picture may be deleted).
    pub fn pictures_used(&self) -> Option<HashSet<PictureId>> {
        let mut used = HashSet::new();
        for (_, read) in self.files() {
            pictures_in(&read.ok()?, &mut used);
        }
        Some(used)
    }

    pub fn get(&self, id: &str) -> Result<Value> {
        let path = self.path(id)?;
        match read_json(&path) {
            Ok(Some(conversation)) => Ok(conversation),
            Ok(None) => Err(ApiError::NotFound(format!("no conversation `{id}`"))),
            Err(e) => Err(ApiError::Server(e.to_string())),
        }
    }

    /// Saves a conversation object (which must carry a valid `id`).
    pub fn save(&self, conversation: &Value) -> Result<()> {
        let id =
            conversation["id"].as_str().ok_or_else(|| ApiError::BadRequest("the conversation has no `id`".into()))?;
        if !conversation["messages"].is_array() {
            return Err(ApiError::BadRequest("the conversation has no `messages` list".into()));
        }
        write_json_atomically(&self.path(id)?, conversation).map_err(ApiError::server)
    }

    pub fn delete(&self, id: &str) -> Result<()> {
        let path = self.path(id)?;
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                Err(ApiError::NotFound(format!("no conversation `{id}`")))
            }
            Err(e) => Err(ApiError::Server(format!("cannot delete {}: {e}", path.display()))),
        }
    }
}

fn summary(conversation: &Value) -> Value {
    serde_json::json!({"id": conversation["id"], "title": conversation["title"], "updated_at": conversation["updated_at"]})
}

fn newest_first(items: &mut [Value]) {
    items.sort_by(|a, b| b["updated_at"].as_str().cmp(&a["updated_at"].as_str()));
}

/// The text around the first place `text` contains `needle` (lower case,
/// single spaces), ignoring case and runs of white space, on one line; none
/// if it does not.
fn snippet_around(text: &str, needle: &str) -> Option<String> {
    let chars: Vec<char> = text.split_whitespace().collect::<Vec<_>>().join(" ").chars().collect();
    // The text in lower case, and for each of its bytes the character it came from.
    let mut lowered = String::new();
    let mut origin = Vec::new();
    for (i, c) in chars.iter().enumerate() {
        for low in c.to_lowercase() {
            origin.extend(std::iter::repeat_n(i, low.len_utf8()));
            lowered.push(low);
        }
    }
    let at = origin[lowered.find(needle)?];
    let from = at.saturating_sub(SNIPPET_BEFORE);
    let to = (at + needle.chars().count() + SNIPPET_AFTER).min(chars.len());
    let mut snippet: String = chars[from..to].iter().collect();
    if from > 0 {
        snippet.insert(0, '…');
    }
    if to < chars.len() {
        snippet.push('…');
    }
    Some(snippet)
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
        // A damaged file is dated by its last change.
        assert_eq!(listed.iter().map(|c| c["id"].as_str().unwrap()).collect::<Vec<_>>(), vec!["broken", "b2", "a1"]);
        assert!(listed[0]["damaged"].as_str().unwrap().contains("not valid JSON"), "{listed:?}");
        assert_eq!(store.get("a1").unwrap(), a);
        let damaged = store.get("broken").unwrap_err();
        assert_eq!(damaged.status(), 500, "{damaged}");
        assert!(dir.path().join("broken.json").exists(), "a damaged file is kept");
        assert_eq!(store.get("zz").unwrap_err().status(), 404);
        store.delete("a1").unwrap();
        assert!(store.get("a1").is_err());
    }

    #[test]
    fn search_finds_messages_and_titles_ignoring_case_with_a_snippet() {
        let dir = tempfile::tempdir().unwrap();
        let store = ConversationStore::new(dir.path().to_path_buf());
        let long = format!("{} the Sourdough starter needs feeding {}", "x ".repeat(40), "y ".repeat(60));
        let conversations = [
            serde_json::json!({"id": "a", "title": "Bread", "updated_at": "2026-01-01T00:00:00Z",
                "messages": [{"role": "user", "content": long}]}),
            serde_json::json!({"id": "b", "title": "SOURDOUGH notes", "updated_at": "2026-02-01T00:00:00Z",
                "messages": [{"role": "user", "content": "Feed the sourdough daily"}]}),
            serde_json::json!({"id": "d", "title": "Sourdough, title only", "updated_at": "2025-12-01T00:00:00Z",
                "messages": []}),
            serde_json::json!({"id": "c", "title": "Cake", "updated_at": "2026-03-01T00:00:00Z",
                "messages": [{"role": "assistant", "content": "Größe matters"}]}),
        ];
        for c in &conversations {
            store.save(c).unwrap();
        }
        let found = store.search("  sourdough\n").unwrap();
        assert_eq!(found.iter().map(|c| c["id"].as_str().unwrap()).collect::<Vec<_>>(), vec!["b", "a", "d"]);
        assert_eq!(found[0]["snippet"], "Feed the sourdough daily", "a message's words before the title's");
        assert_eq!(found[2]["snippet"], "Sourdough, title only");
        let snippet = found[1]["snippet"].as_str().unwrap();
        assert!(
            snippet.starts_with('…') && snippet.ends_with('…') && snippet.contains("Sourdough starter"),
            "{snippet}"
        );
        assert!(snippet.chars().count() <= SNIPPET_BEFORE + SNIPPET_AFTER + "sourdough".len() + 2, "{snippet}");
        assert_eq!(store.search("GRÖSSE").unwrap().len(), 0, "no case folding beyond lower case");
        assert_eq!(store.search("größe").unwrap()[0]["snippet"], "Größe matters");
        assert!(store.search("rye").unwrap().is_empty());
        assert!(store.search("   ").is_err());
        assert!(store.search(&"a".repeat(MAX_QUERY_CHARS + 1)).is_err());
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
