//! Embeds the web UI when it has been built: sets `cfg(cake_ui_built)` if
//! `ui/dist/index.html` exists, so the engine still builds without Node.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(cake_ui_built)");
    println!("cargo::rerun-if-changed=../ui/dist");
    if std::path::Path::new("../ui/dist/index.html").exists() {
        println!("cargo::rustc-cfg=cake_ui_built");
    }
}
