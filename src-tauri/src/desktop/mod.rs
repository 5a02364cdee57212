//! The desktop window (Tauri 2), compiled with the `gui` feature.
//!
//! The window shows the same UI as `cake serve` (ui/dist, embedded at build
//! time). Two IPC commands carry every app command of docs/api.md:
//! `app_call` answers plain commands, `app_stream` forwards a streaming
//! command's events over a Tauri `Channel`. The others are the window's
//! own settings: Start at login, and serving the OpenAI API to other
//! programs ([`OpenAiApi`]).

mod tray;

use crate::app::engine::CancelFlag;
use crate::app::events::EngineEvent;
use crate::app::request::CommandRequest;
use crate::app::App;
use crate::library::catalog::Catalog;
use crate::server::api_switch::{ApiStatus, OpenAiApi};
use crate::startup::autostart;
use crate::startup::single_instance::{self, Claim};
use crate::text::model::LoadOptions;
use serde_json::Value;
use std::sync::Arc;
use tauri::ipc::Channel;
use tauri::{AppHandle, Manager, RunEvent, State, WebviewWindowBuilder};

/// A command's answer, or its error as the HTTP API writes it
/// (`{"error": {"message", "code", …}}`), so the UI reads both alike.
#[tauri::command]
async fn app_call(app: State<'_, Arc<App>>, command: String, args: Value) -> Result<Value, Value> {
    let app = app.inner().clone();
    tauri::async_runtime::spawn_blocking(move || app.call(CommandRequest::parse(&command, args)?))
        .await
        .map_err(|e| serde_json::json!({"error": {"message": e.to_string()}}))?
        .map_err(|e| e.body())
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
    tauri::async_runtime::spawn_blocking(move || {
        app.stream(CommandRequest::parse(&command, args)?, sink, CancelFlag::default())
    })
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

/// The window's label (tauri.conf.json).
pub const MAIN_WINDOW: &str = "main";

/// Shows the window, making it again if it was closed.
fn show_main_window(handle: &AppHandle) {
    let window = match handle.get_webview_window(MAIN_WINDOW) {
        Some(window) => window,
        None => {
            let Some(config) = handle.config().app.windows.iter().find(|w| w.label == MAIN_WINDOW) else { return };
            match WebviewWindowBuilder::from_config(handle, config).and_then(|builder| builder.build()) {
                Ok(window) => window,
                Err(e) => {
                    tracing::error!("cannot open the window: {e}");
                    return;
                }
            }
        }
    };
    let _ = window.show();
    let _ = window.unminimize();
    let _ = window.set_focus();
}

/// Whether Cake writes an XDG autostart entry (Start at login).
#[tauri::command]
fn start_at_login() -> bool {
    autostart::is_enabled()
}

#[tauri::command]
fn set_start_at_login(enabled: bool) -> Result<bool, String> {
    let executable = std::env::current_exe().and_then(|exe| exe.canonicalize()).map_err(|e| e.to_string())?;
    autostart::set_enabled(enabled, &executable).map_err(|e| format!("{e:#}"))?;
    Ok(autostart::is_enabled())
}

/// Whether the OpenAI API is served to other programs, where, and its key.
#[tauri::command]
fn openai_api(api: State<'_, Arc<OpenAiApi>>) -> ApiStatus {
    api.status()
}

/// Switches serving the OpenAI API on or off (on `port`; 0 keeps the current one).
#[tauri::command]
async fn set_openai_api(api: State<'_, Arc<OpenAiApi>>, enabled: bool, port: u16) -> Result<ApiStatus, String> {
    let api = api.inner().clone();
    // Stopping waits for the server's thread: not on the window's thread.
    tauri::async_runtime::spawn_blocking(move || api.set(enabled, port))
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| format!("{e:#}"))
}

/// Opens the window and runs until it is closed — or, while this machine
/// serves as a worker, until Quit (tray) or Stop worker. With `background`
/// (how Start at login runs Cake) a serving worker starts without a window.
/// A second launch shows the running instance's window and returns.
pub fn run(background: bool) -> anyhow::Result<()> {
    if !display_available() {
        anyhow::bail!(
            "no display found (DISPLAY and WAYLAND_DISPLAY are unset): the desktop window needs one. \
             Run `cake serve` and open http://127.0.0.1:8080/ in a browser instead"
        );
    }
    let catalog = Catalog::default();
    let listener = match single_instance::claim(&catalog.data_dir().join("window.sock")) {
        Ok(Claim::AlreadyRunning) => {
            println!("Cake is already running: showing its window");
            return Ok(());
        }
        Ok(Claim::First(listener)) => Some(listener),
        Err(e) => {
            tracing::warn!("{e:#}; a second launch will open a second window");
            None
        }
    };
    let app = Arc::new(App::new(catalog, LoadOptions::default()));
    let api_switch = Arc::new(OpenAiApi::new(app.clone()));
    let serving = {
        let app = app.clone();
        move || app.cluster.is_serving_as_worker()
    };
    let keeps_running = serving.clone();
    tauri::Builder::default()
        .plugin(tauri_plugin_dialog::init())
        .manage(app.clone())
        .manage(api_switch)
        .invoke_handler(tauri::generate_handler![
            app_call,
            app_stream,
            start_at_login,
            set_start_at_login,
            openai_api,
            set_openai_api
        ])
        .setup(move |tauri_app| {
            let handle = tauri_app.handle().clone();
            if let Some(listener) = listener {
                let shower = handle.clone();
                single_instance::answer(listener, move || {
                    let on_main = shower.clone();
                    let _ = shower.run_on_main_thread(move || show_main_window(&on_main));
                });
            }
            if let Err(why) = tray::install(&handle) {
                tracing::info!("{why}: while serving as a worker with the window closed, start Cake again to open it");
            }
            if !(background && serving()) {
                show_main_window(&handle);
            }
            Ok(())
        })
        .build(tauri::generate_context!())
        .map_err(|e| anyhow::anyhow!("the desktop window failed: {e}"))?
        .run(move |_, event| {
            // The last window closed: keep serving other machines if this one is a worker.
            if let RunEvent::ExitRequested { code: None, api, .. } = event {
                if keeps_running() {
                    tracing::info!("the window closed; still serving as a worker");
                    api.prevent_exit();
                }
            }
        });
    Ok(())
}
