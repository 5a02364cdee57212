//! Build steps: embed the web UI when it has been built (sets
//! `cfg(cake_ui_built)` if `ui/dist/index.html` exists, so the engine still
//! builds without Node), and run Tauri's build step for the `gui` feature.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(cake_ui_built)");
    println!("cargo::rerun-if-changed=../ui/dist");
    if std::path::Path::new("../ui/dist/index.html").exists() {
        println!("cargo::rustc-cfg=cake_ui_built");
    }
    #[cfg(feature = "gui")]
    tauri_build::build();
}
