//! The app's own folders.

use std::path::{Path, PathBuf};

/// File name of the model Cake uses when none is chosen.
pub const DEFAULT_MODEL_FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

/// The app's data folder: `$CAKE_DATA_DIR`, else `$XDG_DATA_HOME/cake`, else `~/.local/share/cake`.
pub fn data_dir() -> PathBuf {
    folder_from_env("CAKE_DATA_DIR", ("XDG_DATA_HOME", "cake"), ".local/share/cake")
}

/// The app's cache folder, for files it can make again:
/// `$CAKE_CACHE_DIR`, else `$XDG_CACHE_HOME/cake`, else `~/.cache/cake`.
pub fn cache_dir() -> PathBuf {
    folder_from_env("CAKE_CACHE_DIR", ("XDG_CACHE_HOME", "cake"), ".cache/cake")
}

/// A folder chosen the usual way: `$own` itself, else `child` of
/// `$parent`, else `in_home` under the home folder.
pub fn folder_from_env(own: &str, (parent, child): (&str, &str), in_home: &str) -> PathBuf {
    if let Some(dir) = std::env::var_os(own) {
        return PathBuf::from(dir);
    }
    if let Some(dir) = std::env::var_os(parent) {
        return PathBuf::from(dir).join(child);
    }
    home_dir().join(in_home)
}

/// Read-only folders where an installed package keeps models, searched
/// after the user's own: `<prefix>/share/cake/models` beside the running
/// executable (`/usr/bin/cake` → `/usr/share/cake/models`), the bundle
/// resources of the macOS app (`Cake.app/Contents/Resources/models`) and of
/// the Windows installer (`models` beside `cake.exe`), then
/// `<dir>/cake/models` for each `$XDG_DATA_DIRS` entry (default
/// `/usr/local/share:/usr/share`).
pub fn packaged_model_dirs() -> Vec<PathBuf> {
    let executable = std::env::current_exe().ok().and_then(|exe| exe.canonicalize().ok());
    let data_dirs = std::env::var("XDG_DATA_DIRS").ok().filter(|dirs| !dirs.is_empty());
    packaged_model_dirs_for(executable.as_deref(), data_dirs.as_deref().unwrap_or("/usr/local/share:/usr/share"))
}

fn packaged_model_dirs_for(executable: Option<&Path>, xdg_data_dirs: &str) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(bin) = executable.and_then(Path::parent) {
        if let Some(prefix) = bin.parent() {
            dirs.push(prefix.join("share").join("cake").join("models"));
            if cfg!(target_os = "macos") {
                dirs.push(prefix.join("Resources").join("models"));
            }
        }
        if cfg!(windows) {
            dirs.push(bin.join("models"));
        }
    }
    for dir in xdg_data_dirs.split(':').filter(|dir| Path::new(dir).is_absolute()) {
        let models = Path::new(dir).join("cake").join("models");
        if !dirs.contains(&models) {
            dirs.push(models);
        }
    }
    dirs
}

/// The default model to use: the copy in the user's data folder if there is
/// one, else a packaged copy. When neither exists this is the data-folder
/// path, where `make model` installs it (and errors name it).
pub fn default_model_path() -> PathBuf {
    let data_dir = data_dir();
    find_default_model(&data_dir, &packaged_model_dirs()).unwrap_or_else(|| user_default_model_path(&data_dir))
}

/// Where the default model lives in the data folder `data_dir`.
pub fn user_default_model_path(data_dir: &Path) -> PathBuf {
    data_dir.join("models").join(DEFAULT_MODEL_FILE)
}

/// Where the default model may be, in search order: the user's copy, then the packaged ones.
pub fn default_model_candidates(data_dir: &Path, packaged_dirs: &[PathBuf]) -> Vec<PathBuf> {
    std::iter::once(user_default_model_path(data_dir))
        .chain(packaged_dirs.iter().map(|dir| dir.join(DEFAULT_MODEL_FILE)))
        .collect()
}

/// The first existing copy of the default model.
pub fn find_default_model(data_dir: &Path, packaged_dirs: &[PathBuf]) -> Option<PathBuf> {
    default_model_candidates(data_dir, packaged_dirs).into_iter().find(|path| path.is_file())
}

pub fn home_dir() -> PathBuf {
    std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("."))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packaged_models_sit_beside_the_executable_then_in_xdg_data_dirs() {
        let dirs =
            packaged_model_dirs_for(Some(Path::new("/opt/cake/bin/cake")), "/usr/local/share:relative:/usr/share");
        assert_eq!(
            dirs,
            [
                PathBuf::from("/opt/cake/share/cake/models"),
                PathBuf::from("/usr/local/share/cake/models"),
                PathBuf::from("/usr/share/cake/models"),
            ]
        );
        let installed = packaged_model_dirs_for(Some(Path::new("/usr/bin/cake")), "/usr/share");
        assert_eq!(installed, [PathBuf::from("/usr/share/cake/models")], "no folder twice");
    }

    #[test]
    fn the_users_copy_of_the_default_model_comes_before_the_packaged_one() {
        let root = tempfile::tempdir().unwrap();
        let data = root.path().join("data");
        let packaged = root.path().join("share");
        let packaged_dirs = [packaged.clone()];
        assert_eq!(find_default_model(&data, &packaged_dirs), None);
        std::fs::create_dir_all(&packaged).unwrap();
        std::fs::write(packaged.join(DEFAULT_MODEL_FILE), b"packaged").unwrap();
        assert_eq!(find_default_model(&data, &packaged_dirs), Some(packaged.join(DEFAULT_MODEL_FILE)));
        std::fs::create_dir_all(data.join("models")).unwrap();
        std::fs::write(user_default_model_path(&data), b"own").unwrap();
        assert_eq!(find_default_model(&data, &packaged_dirs), Some(user_default_model_path(&data)));
    }
}
