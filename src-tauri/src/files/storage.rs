//! Writing files so that a crash never leaves a half-written one.
//!
//! Data goes to a temporary file in the same folder, is flushed to disk, and
//! then renamed over the target: readers see the old file or the new one,
//! never a mix.

use anyhow::{Context, Result};
use serde::Serialize;
use std::io::Write;
use std::path::Path;

/// Atomically replaces `path` with `bytes`, creating parent folders.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    write_via_temporary(path, bytes, std::fs::OpenOptions::new())
}

/// Like [`write_atomically`], readable and writable by the owner only (on
/// Unix) from the first byte: for secrets such as the cluster key.
pub fn write_private_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut options = std::fs::OpenOptions::new();
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    write_via_temporary(path, bytes, options)
}

fn write_via_temporary(path: &Path, bytes: &[u8], mut options: std::fs::OpenOptions) -> Result<()> {
    let dir = path.parent().context("file path has no folder")?;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let name = path.file_name().context("file path has no name")?.to_string_lossy();
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let result = (|| -> Result<()> {
        let mut file = options.write(true).create(true).truncate(true).open(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)?;
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.with_context(|| format!("cannot write {}", path.display()))
}

/// Atomically writes `value` as pretty JSON.
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

pub fn write_json_atomically<T: Serialize + ?Sized>(path: &Path, value: &T) -> Result<()> {
    write_atomically(path, &serde_json::to_vec_pretty(value)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_content_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/file.json");
        write_json_atomically(&path, &vec![1, 2]).unwrap();
        write_json_atomically(&path, &vec![3]).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap().replace(char::is_whitespace, ""), "[3]");
        let names: Vec<_> =
            std::fs::read_dir(path.parent().unwrap()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, vec![std::ffi::OsString::from("file.json")]);
    }
}
