//! The web UI's files, embedded in the binary when `ui/dist` was built
//! before compiling (see build.rs), so `cake serve` is one file.

use axum::http::{header, StatusCode, Uri};
use axum::response::{Html, IntoResponse, Response};

#[cfg(cake_ui_built)]
static UI: include_dir::Dir<'static> = include_dir::include_dir!("$CARGO_MANIFEST_DIR/../ui/dist");

fn content_type(path: &str) -> &'static str {
    match path.rsplit('.').next() {
        Some("html") => "text/html; charset=utf-8",
        Some("js") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("ico") => "image/x-icon",
        Some("json") => "application/json",
        Some("woff2") => "font/woff2",
        _ => "application/octet-stream",
    }
}

/// The embedded file for `path`, if the UI was built in.
pub fn asset(path: &str) -> Option<&'static [u8]> {
    #[cfg(cake_ui_built)]
    {
        UI.get_file(path).map(|f| f.contents())
    }
    #[cfg(not(cake_ui_built))]
    {
        let _ = path;
        None
    }
}

pub async fn serve_asset(uri: Uri) -> Response {
    let path = uri.path().trim_start_matches('/');
    let path = if path.is_empty() { "index.html" } else { path };
    if let Some(bytes) = asset(path) {
        return ([(header::CONTENT_TYPE, content_type(path))], bytes).into_response();
    }
    if path == "index.html" {
        return Html(
            "<!doctype html><title>Cake</title><p>The web UI was not built into this binary. \
             Run <code>make build</code> (which builds <code>ui/</code> first), or use the API under /api and /v1.</p>",
        )
        .into_response();
    }
    (StatusCode::NOT_FOUND, "not found").into_response()
}
