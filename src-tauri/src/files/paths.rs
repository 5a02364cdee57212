//! The app's own folders.

use std::path::PathBuf;

/// File name of the model Cake uses when none is chosen.
pub const DEFAULT_MODEL_FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

/// The app's data folder: `$CAKE_DATA_DIR`, else `$XDG_DATA_HOME/cake`, else `~/.local/share/cake`.
pub fn data_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("CAKE_DATA_DIR") {
        return PathBuf::from(dir);
    }
    if let Some(dir) = std::env::var_os("XDG_DATA_HOME") {
        return PathBuf::from(dir).join("cake");
    }
    home_dir().join(".local/share/cake")
}

/// Where the embedded default model is installed.
pub fn default_model_path() -> PathBuf {
    data_dir().join("models").join(DEFAULT_MODEL_FILE)
}

pub fn home_dir() -> PathBuf {
    std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("."))
}
