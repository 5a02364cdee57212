//! `cake worker --install-service`: a systemd user unit that keeps a worker
//! serving on a machine without a desktop. The cluster key goes into a
//! separate file only the user can read, never into the unit.

use super::{config_home, exec_line, ExecSyntax};
use crate::files::storage::{write_atomically, write_private_atomically};
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The unit's file name.
pub const UNIT_NAME: &str = "cake-worker.service";

/// Where the user's systemd units live: `$XDG_CONFIG_HOME/systemd/user`.
pub fn unit_path() -> PathBuf {
    config_home().join("systemd").join("user").join(UNIT_NAME)
}

/// The environment file holding `CAKE_CLUSTER_KEY`, mode 0600.
pub fn key_file_path() -> PathBuf {
    config_home().join("cake").join("worker.env")
}

/// The unit's text: `executable` run with `arguments`, its key from `key_file`.
pub fn unit_text(executable: &Path, arguments: &[String], key_file: &Path) -> String {
    format!(
        "# Written by `cake worker --install-service`; removed by `--uninstall-service`.\n\
         [Unit]\n\
         Description=Cake cluster worker\n\
         After=network.target\n\
         \n\
         [Service]\n\
         Type=simple\n\
         EnvironmentFile={key_file}\n\
         ExecStart={exec}\n\
         Restart=on-failure\n\
         RestartSec=5\n\
         \n\
         [Install]\n\
         WantedBy=default.target\n",
        key_file = key_file.display(),
        exec = exec_line(executable, arguments, ExecSyntax::Systemd),
    )
}

/// What installing did: the files written and whether systemd took the unit.
pub struct Installed {
    pub unit: PathBuf,
    pub key_file: PathBuf,
    /// `Err` holds why `systemctl --user enable --now` failed (e.g. no user session).
    pub enabled: Result<(), String>,
}

/// Writes the unit and the key file, then asks the user's systemd to start
/// the worker now and at every login.
pub fn install(executable: &Path, arguments: &[String], cluster_key: &str) -> Result<Installed> {
    let unit = unit_path();
    let key_file = key_file_path();
    write_private_atomically(&key_file, format!("CAKE_CLUSTER_KEY={}\n", env_file_value(cluster_key)).as_bytes())?;
    write_atomically(&unit, unit_text(executable, arguments, &key_file).as_bytes())?;
    let enabled = systemctl(&["daemon-reload"]).and_then(|()| systemctl(&["enable", "--now", UNIT_NAME]));
    Ok(Installed { unit, key_file, enabled })
}

/// Stops and disables the worker's unit and removes it and the key file.
/// Returns the files removed.
pub fn uninstall() -> Result<Vec<PathBuf>> {
    // The unit may already be stopped, or systemd absent: removing the files is what matters.
    let _ = systemctl(&["disable", "--now", UNIT_NAME]);
    let mut removed = Vec::new();
    for path in [unit_path(), key_file_path()] {
        match std::fs::remove_file(&path) {
            Ok(()) => removed.push(path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("cannot remove {}", path.display())),
        }
    }
    let _ = systemctl(&["daemon-reload"]);
    Ok(removed)
}

fn systemctl(arguments: &[&str]) -> Result<(), String> {
    let output = Command::new("systemctl")
        .arg("--user")
        .args(arguments)
        .output()
        .map_err(|e| format!("cannot run systemctl: {e}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`systemctl --user {}` failed: {}",
            arguments.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

/// A value for a systemd environment file: double-quoted, `\` and `"` escaped.
fn env_file_value(value: &str) -> String {
    format!("\"{}\"", value.replace('\\', "\\\\").replace('"', "\\\""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_unit_runs_the_worker_with_its_key_from_a_private_file() {
        let text = unit_text(
            Path::new("/usr/bin/cake"),
            &["worker".into(), "--name".into(), "spare pc".into()],
            Path::new("/home/a/.config/cake/worker.env"),
        );
        assert!(text.contains("\nExecStart=/usr/bin/cake worker --name \"spare pc\"\n"), "{text}");
        assert!(text.contains("\nEnvironmentFile=/home/a/.config/cake/worker.env\n"), "{text}");
        assert!(text.contains("\nWantedBy=default.target\n"), "{text}");
        assert_eq!(env_file_value(r#"key "with" \ quotes"#), r#""key \"with\" \\ quotes""#);
    }
}
