//! Where the app keeps the cluster key between runs.
//!
//! In the OS keyring when one is available (Secret Service on Linux,
//! Keychain on macOS, Credential Manager on Windows; desktop builds only),
//! else in a file of the data folder that only the user can read (mode
//! 0600). The key is never written anywhere else.

use crate::files::storage::{read_trimmed, write_private_atomically};
use anyhow::{Context, Result};
use serde::Serialize;
use std::path::PathBuf;

/// Where the key ended up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum KeyStorage {
    Keyring,
    File,
}

/// The cluster key's storage.
pub struct KeyStore {
    /// The fallback file.
    file: PathBuf,
    /// Whether to try the OS keyring first ($CAKE_KEYRING=off disables it).
    use_keyring: bool,
}

const SERVICE: &str = "cake";
const ACCOUNT: &str = "cluster-key";

impl KeyStore {
    /// A store whose fallback file is `file`.
    pub fn new(file: PathBuf) -> Self {
        let use_keyring =
            cfg!(feature = "gui") && std::env::var("CAKE_KEYRING").map_or(true, |v| v != "off") && keyring_reachable();
        Self { file, use_keyring }
    }

    /// The stored key, if any, and where it was.
    pub fn load(&self) -> Result<Option<(String, KeyStorage)>> {
        if self.use_keyring {
            if let Some(key) = keyring_get() {
                return Ok(Some((key, KeyStorage::Keyring)));
            }
        }
        let key = read_trimmed(&self.file)
            .with_context(|| format!("cannot read the cluster key from {}", self.file.display()))?;
        Ok(key.map(|key| (key, KeyStorage::File)))
    }

    /// Stores `key`, in the keyring if possible.
    pub fn save(&self, key: &str) -> Result<KeyStorage> {
        if self.use_keyring && keyring_set(key) {
            // Leave no second copy behind.
            self.remove_file()?;
            return Ok(KeyStorage::Keyring);
        }
        write_private_atomically(&self.file, key.as_bytes())
            .with_context(|| format!("cannot write the cluster key to {}", self.file.display()))?;
        Ok(KeyStorage::File)
    }

    /// Forgets the key everywhere.
    pub fn clear(&self) -> Result<()> {
        if self.use_keyring {
            keyring_delete();
        }
        self.remove_file()
    }

    fn remove_file(&self) -> Result<()> {
        match std::fs::remove_file(&self.file) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(e).with_context(|| format!("cannot remove {}", self.file.display()))
            }
            _ => Ok(()),
        }
    }
}

/// Whether an OS keyring can be reached without side effects. On Linux the
/// Secret Service lives on the session bus: without one configured
/// (`DBUS_SESSION_BUS_ADDRESS`), libdbus would try to autolaunch a bus for
/// the X display, which disturbed the desktop window's WebKit; use the file.
fn keyring_reachable() -> bool {
    if cfg!(target_os = "linux") {
        std::env::var_os("DBUS_SESSION_BUS_ADDRESS").is_some_and(|v| !v.is_empty())
    } else {
        true
    }
}

#[cfg(feature = "gui")]
fn keyring_entry() -> Option<keyring::Entry> {
    keyring::Entry::new(SERVICE, ACCOUNT).ok()
}

#[cfg(feature = "gui")]
fn keyring_get() -> Option<String> {
    keyring_entry()?.get_password().ok()
}

#[cfg(feature = "gui")]
fn keyring_set(key: &str) -> bool {
    keyring_entry().is_some_and(|e| e.set_password(key).is_ok())
}

#[cfg(feature = "gui")]
fn keyring_delete() {
    if let Some(entry) = keyring_entry() {
        let _ = entry.delete_credential();
    }
}

#[cfg(not(feature = "gui"))]
fn keyring_get() -> Option<String> {
    let _ = (SERVICE, ACCOUNT);
    None
}

#[cfg(not(feature = "gui"))]
fn keyring_set(_key: &str) -> bool {
    false
}

#[cfg(not(feature = "gui"))]
fn keyring_delete() {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_fallback_is_private_and_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let store = KeyStore { file: dir.path().join("cluster-key"), use_keyring: false };
        assert_eq!(store.load().unwrap(), None);
        assert_eq!(store.save("correct horse").unwrap(), KeyStorage::File);
        assert_eq!(store.load().unwrap(), Some(("correct horse".into(), KeyStorage::File)));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.path().join("cluster-key")).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        store.clear().unwrap();
        assert_eq!(store.load().unwrap(), None);
    }
}
