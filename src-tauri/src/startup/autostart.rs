//! **Start at login**: an XDG autostart entry
//! (`$XDG_CONFIG_HOME/autostart/dev.cake.Cake.desktop`) that desktops run
//! when the user logs in. It starts Cake with `--background`: serving as a
//! worker if "Join as worker" is on, with the window closed.

use super::{config_home, exec_line, ExecSyntax};
use crate::files::storage::write_atomically;
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

/// The entry's path.
pub fn entry_path() -> PathBuf {
    config_home().join("autostart").join("dev.cake.Cake.desktop")
}

/// The entry's text, starting `executable --background`.
pub fn entry_text(executable: &Path) -> String {
    format!(
        "[Desktop Entry]\n\
         Type=Application\n\
         Name=Cake\n\
         Comment=Start Cake in the background when you log in (Cake's Start at login setting)\n\
         Exec={}\n\
         Icon=dev.cake.Cake\n\
         Terminal=false\n\
         NoDisplay=true\n\
         X-GNOME-Autostart-enabled=true\n",
        exec_line(executable, &["--background".to_string()], ExecSyntax::DesktopEntry)
    )
}

/// Whether the entry exists (and so Cake starts at login).
pub fn is_enabled() -> bool {
    entry_path().is_file()
}

/// Writes the entry for `executable`, or removes it.
pub fn set_enabled(enabled: bool, executable: &Path) -> Result<()> {
    let path = entry_path();
    if !enabled {
        return match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(e).with_context(|| format!("cannot remove {}", path.display()))
            }
            _ => Ok(()),
        };
    }
    write_atomically(&path, entry_text(executable).as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_entry_starts_cake_in_the_background() {
        let text = entry_text(Path::new("/opt/my apps/cake"));
        assert!(text.contains("\nExec=\"/opt/my apps/cake\" --background\n"), "{text}");
        assert!(text.starts_with("[Desktop Entry]\nType=Application\n"), "{text}");
    }
}
