//! The desktop window (Tauri 2), compiled with the `gui` feature.
//!
//! The window shows the same UI as `cake serve` (ui/dist, embedded at build
//! time). Two IPC commands carry every app command of docs/api.md:
//! `app_call` answers plain commands, `app_stream` forwards a streaming
//! command's events over a Tauri `Channel`.

use crate::app::events::EngineEvent;
use crate::app::request::CommandRequest;
use crate::app::App;
use crate::library::catalog::Catalog;
use crate::text::model::LoadOptions;
use serde_json::Value;
use std::sync::Arc;
use tauri::ipc::Channel;
use tauri::State;

#[tauri::command]
async fn app_call(app: State<'_, Arc<App>>, command: String, args: Value) -> Result<Value, String> {
    let app = app.inner().clone();
    tauri::async_runtime::spawn_blocking(move || app.call(CommandRequest::parse(&command, args)?))
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.message().to_string())
}

#[tauri::command]
async fn app_stream(
    app: State<'_, Arc<App>>,
    command: String,
    args: Value,
    events: Channel<EngineEvent>,
) -> Result<(), String> {
    let app = app.inner().clone();
    let sink = Box::new(move |event: EngineEvent| events.send(event).is_ok());
    tauri::async_runtime::spawn_blocking(move || app.stream(CommandRequest::parse(&command, args)?, sink))
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.message().to_string())
}

/// Whether a graphical session is available (on Linux: X11 or Wayland).
pub fn display_available() -> bool {
    if cfg!(target_os = "linux") {
        std::env::var_os("DISPLAY").is_some() || std::env::var_os("WAYLAND_DISPLAY").is_some()
    } else {
        true
    }
}

/// Opens the window and runs until it is closed.
pub fn run() -> anyhow::Result<()> {
    if !display_available() {
        anyhow::bail!(
            "no display found (DISPLAY and WAYLAND_DISPLAY are unset): the desktop window needs one. \
             Run `cake serve` and open http://127.0.0.1:8080/ in a browser instead"
        );
    }
    let app = Arc::new(App::new(Catalog::default(), LoadOptions::default()));
    tauri::Builder::default()
        .plugin(tauri_plugin_dialog::init())
        .manage(app)
        .invoke_handler(tauri::generate_handler![app_call, app_stream])
        .run(tauri::generate_context!())
        .map_err(|e| anyhow::anyhow!("the desktop window failed: {e}"))
}
