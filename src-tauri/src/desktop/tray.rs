//! The tray icon that keeps a window-less worker reachable: **Open**,
//! **Stop worker** and **Quit**. Desktops without a tray (or without the
//! AppIndicator library) get none; the window says beforehand how to come
//! back (start Cake again).

use crate::app::App;
use std::sync::Arc;
use tauri::menu::{Menu, MenuItem};
use tauri::tray::TrayIconBuilder;
use tauri::{AppHandle, Manager};

/// The libraries the tray needs at run time (the tray crate loads one
/// itself and panics without it, so Cake looks first).
const INDICATOR_LIBRARIES: [&str; 2] = ["libayatana-appindicator3.so.1", "libappindicator3.so.1"];

/// Whether an AppIndicator library can be loaded.
fn indicator_library_present() -> bool {
    INDICATOR_LIBRARIES.iter().any(|name| {
        let name = std::ffi::CString::new(*name).expect("no NUL");
        // SAFETY: dlopen with a valid C string; the handle is closed at once.
        unsafe {
            let handle = libc::dlopen(name.as_ptr(), libc::RTLD_LAZY | libc::RTLD_LOCAL);
            if handle.is_null() {
                return false;
            }
            libc::dlclose(handle);
            true
        }
    })
}

/// Adds the tray icon; says why not when it cannot.
pub fn install(handle: &AppHandle) -> Result<(), String> {
    if cfg!(target_os = "linux") && !indicator_library_present() {
        return Err(format!("no tray icon: none of {} is installed", INDICATOR_LIBRARIES.join(", ")));
    }
    let item = |id: &str, text: &str| MenuItem::with_id(handle, id, text, true, None::<&str>);
    let (open, stop, quit) = (
        item("open", "Open Cake").map_err(|e| e.to_string())?,
        item("stop-worker", "Stop worker").map_err(|e| e.to_string())?,
        item("quit", "Quit").map_err(|e| e.to_string())?,
    );
    let menu = Menu::with_items(handle, &[&open, &stop, &quit]).map_err(|e| e.to_string())?;
    let mut tray = TrayIconBuilder::with_id("cake").tooltip("Cake").menu(&menu).on_menu_event(|handle, event| {
        match event.id().as_ref() {
            "open" => super::show_main_window(handle),
            "stop-worker" => {
                let app = handle.state::<Arc<App>>();
                if let Err(e) = app.cluster.stop_worker() {
                    tracing::warn!("cannot stop the worker: {e:#}");
                }
                if handle.get_webview_window(super::MAIN_WINDOW).is_none() {
                    handle.exit(0);
                }
            }
            "quit" => handle.exit(0),
            _ => {}
        }
    });
    if let Some(icon) = handle.default_window_icon() {
        tray = tray.icon(icon.clone());
    }
    tray.build(handle).map(|_| ()).map_err(|e| e.to_string())
}
