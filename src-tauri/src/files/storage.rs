//! Writing files so that a crash never leaves a half-written one and two
//! writers never lose each other's work.
//!
//! Every write goes to a temporary file of its own in the target's folder
//! (named by process and a per-process counter), is flushed to disk, and is
//! renamed over the target; then the folder itself is flushed, so the rename
//! survives a power cut. Readers see the old file or the new one, never a
//! mix. Writers of one folder take its lock first (an advisory lock on the
//! folder's `.cake-lock` file, which serializes threads of this process and
//! other processes alike), so writes land in the order they are
//! acknowledged and a read-modify-write ([`update_json`]) sees every write
//! acknowledged before it. Temporary files left by a crash are removed by
//! [`sweep_orphans`].

use anyhow::{Context, Result};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The lock file every writer of a folder holds while it writes there.
const LOCK_FILE: &str = ".cake-lock";
/// How temporary files end; [`sweep_orphans`] removes them.
const TEMPORARY_SUFFIX: &str = ".tmp";

/// Writes made by this process so far, for unique temporary names.
static WRITES: AtomicU64 = AtomicU64::new(0);

/// A file of the app's could not be read or written, or holds what it
/// should not: the machine's failure (a full disk, a folder without
/// permission, a damaged file), not the request's. Callers find it in an
/// error's chain to answer 5xx rather than 4xx.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("cannot write {}: {source}", path.display())]
    Write { path: PathBuf, source: std::io::Error },
    #[error("cannot read {}: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{} is damaged (not valid JSON: {source}); it is kept as it is", path.display())]
    Damaged { path: PathBuf, source: serde_json::Error },
}

impl StorageError {
    /// Whether `error` or one of its causes is a storage failure.
    pub fn is_in(error: &anyhow::Error) -> bool {
        error.chain().any(|cause| cause.is::<StorageError>())
    }
}

/// The JSON file at `path`, `None` if there is none.
pub fn read_json<T: DeserializeOwned>(path: &Path) -> Result<Option<T>, StorageError> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|source| StorageError::Damaged { path: path.to_path_buf(), source }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(StorageError::Read { path: path.to_path_buf(), source }),
    }
}

/// Atomically replaces `path` with `bytes`, creating parent folders.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let _lock = FolderLock::take(folder_of(path)?)?;
    write_locked(path, bytes, Permissions::Default)
}

/// Like [`write_atomically`], readable and writable by the owner only (on
/// Unix) from the first byte: for secrets such as the cluster key.
pub fn write_private_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let _lock = FolderLock::take(folder_of(path)?)?;
    write_locked(path, bytes, Permissions::OwnerOnly)
}

/// Atomically writes `value` as pretty JSON.
pub fn write_json_atomically<T: Serialize + ?Sized>(path: &Path, value: &T) -> Result<()> {
    write_atomically(path, &serde_json::to_vec_pretty(value)?)
}

/// Reads the JSON file at `path` (its default if there is none), lets
/// `change` modify it, and writes it back, all under the folder's lock: two
/// updates at once both land. `change`'s error leaves the file as it was.
pub fn update_json<T, R>(path: &Path, change: impl FnOnce(&mut T) -> Result<R>) -> Result<R>
where
    T: Serialize + DeserializeOwned + Default,
{
    let _lock = FolderLock::take(folder_of(path)?)?;
    let mut value = read_json(path)?.unwrap_or_default();
    let result = change(&mut value)?;
    write_locked(path, &serde_json::to_vec_pretty(&value)?, Permissions::Default)?;
    Ok(result)
}

/// A small text file's content without surrounding white space; `None` if
/// the file is missing or blank (a secret not made yet).
pub fn read_trimmed(path: &Path) -> std::io::Result<Option<String>> {
    match std::fs::read_to_string(path) {
        Ok(text) if !text.trim().is_empty() => Ok(Some(text.trim().to_string())),
        Ok(_) => Ok(None),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Removes the temporary files that writers killed mid-write left in
/// `folder` (none is being written while the folder's lock is held), and
/// returns how many. A missing folder has none.
pub fn sweep_orphans(folder: &Path) -> Result<usize> {
    if !folder.is_dir() {
        return Ok(0);
    }
    let _lock = FolderLock::take(folder)?;
    let mut removed = 0;
    for entry in std::fs::read_dir(folder).with_context(|| format!("cannot list {}", folder.display()))? {
        let name = entry?.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') && name.ends_with(TEMPORARY_SUFFIX) {
            std::fs::remove_file(folder.join(&*name))
                .with_context(|| format!("cannot remove {}", folder.join(&*name).display()))?;
            removed += 1;
        }
    }
    Ok(removed)
}

#[derive(Clone, Copy)]
enum Permissions {
    Default,
    /// Readable and writable by the owner only (Unix).
    OwnerOnly,
}

fn folder_of(path: &Path) -> Result<&Path> {
    path.parent().filter(|dir| !dir.as_os_str().is_empty()).context("file path has no folder")
}

/// The lock on a folder's writes, held until dropped (closing the file
/// releases it, however the holder leaves).
struct FolderLock {
    _file: std::fs::File,
}

impl FolderLock {
    fn take(folder: &Path) -> Result<Self> {
        let path = folder.join(LOCK_FILE);
        let file = std::fs::create_dir_all(folder)
            .and_then(|()| std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path))
            .and_then(|file| file.lock().map(|()| file))
            .map_err(|source| StorageError::Write { path, source })?;
        Ok(Self { _file: file })
    }
}

/// The write itself; the caller holds the folder's lock.
fn write_locked(path: &Path, bytes: &[u8], permissions: Permissions) -> Result<()> {
    let dir = folder_of(path)?;
    let tmp = temporary_path(path)?;
    let result = (|| -> std::io::Result<()> {
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        if let Permissions::OwnerOnly = permissions {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        #[cfg(not(unix))]
        let _ = permissions;
        let mut file = options.open(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)?;
        sync_folder(dir)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    Ok(result.map_err(|source| StorageError::Write { path: path.to_path_buf(), source })?)
}

/// A name no other write uses: `.{name}.{process}-{write}.tmp`.
fn temporary_path(path: &Path) -> Result<PathBuf> {
    let name = path.file_name().context("file path has no name")?.to_string_lossy();
    let write = WRITES.fetch_add(1, Ordering::Relaxed);
    Ok(path.with_file_name(format!(".{name}.{}-{write}{TEMPORARY_SUFFIX}", std::process::id())))
}

/// Flushes a folder's entries (the rename) to disk; a no-op where folders
/// cannot be opened as files.
fn sync_folder(dir: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    std::fs::File::open(dir)?.sync_all()?;
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names_in(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> =
            std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        names
    }

    #[test]
    fn replaces_content_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/file.json");
        write_json_atomically(&path, &vec![1, 2]).unwrap();
        write_json_atomically(&path, &vec![3]).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap().replace(char::is_whitespace, ""), "[3]");
        assert_eq!(names_in(path.parent().unwrap()), vec![LOCK_FILE, "file.json"]);
    }

    #[test]
    fn concurrent_writers_of_one_file_each_leave_a_whole_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.json");
        std::thread::scope(|scope| {
            for writer in 0..4usize {
                let path = &path;
                scope.spawn(move || {
                    for round in 0..50usize {
                        // Sizes differ, so a mix of two writes would not parse.
                        let value = vec![writer * 1000 + round; 1 + (writer * 37 + round) % 300];
                        write_json_atomically(path, &value).unwrap();
                        let read: Vec<usize> = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
                        assert!(!read.is_empty());
                    }
                });
            }
        });
        assert_eq!(names_in(dir.path()), vec![LOCK_FILE, "c.json"]);
    }

    #[test]
    fn concurrent_updates_all_land() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("list.json");
        std::thread::scope(|scope| {
            for writer in 0..8u32 {
                let path = &path;
                scope.spawn(move || {
                    for round in 0..10u32 {
                        update_json(path, |list: &mut Vec<u32>| {
                            list.push(writer * 100 + round);
                            Ok(())
                        })
                        .unwrap();
                    }
                });
            }
        });
        let list: Vec<u32> = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(list.len(), 80, "every update kept: {list:?}");
    }

    #[test]
    fn a_failed_update_leaves_the_file_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("list.json");
        write_json_atomically(&path, &vec![1]).unwrap();
        let failed = update_json(&path, |list: &mut Vec<u32>| -> Result<()> {
            list.push(2);
            anyhow::bail!("no")
        });
        assert!(failed.is_err());
        assert_eq!(std::fs::read_to_string(&path).unwrap().replace(char::is_whitespace, ""), "[1]");
    }

    #[test]
    fn orphaned_temporary_files_are_swept_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(".c.json.123-4.tmp"), "half").unwrap();
        std::fs::write(dir.path().join(".c.json.99.tmp"), "old-style").unwrap();
        std::fs::write(dir.path().join("c.json"), "[]").unwrap();
        std::fs::write(dir.path().join("notes.tmp"), "the user's").unwrap();
        assert_eq!(sweep_orphans(dir.path()).unwrap(), 2);
        assert_eq!(names_in(dir.path()), vec![LOCK_FILE, "c.json", "notes.tmp"]);
        assert_eq!(sweep_orphans(&dir.path().join("missing")).unwrap(), 0);
    }
}
