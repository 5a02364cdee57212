//! A local HTTP server with the Hugging Face hub's shape, serving a tiny
//! model folder: `GET /api/models/<repo>/revision/main` lists its files,
//! `HEAD`/`GET /<repo>/resolve/main/<file>` serve them (large files by a
//! redirect to `/cdn/<sha256>`, with range requests), the way the real hub
//! does. `GET /api/models?search=` finds repos by name and
//! `GET /api/models/<repo>/tree/main` lists files with sizes (GGUF files are
//! large files too). It can cut a transfer short, corrupt a file or refuse
//! access, and it records the range of every request.

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Router;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

pub const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";
/// The file served as a large (LFS) file, besides GGUF files.
pub const WEIGHTS: &str = "model.safetensors";

/// Whether the hub serves `file` as a large (LFS) file.
fn is_large(file: &str) -> bool {
    file == WEIGHTS || file.ends_with(".gguf")
}

#[derive(Default, Clone)]
pub struct Behaviour {
    /// Close the connection after this many bytes of the weights, once.
    pub cut_weights_after: Option<usize>,
    /// Serve the weights with one byte changed.
    pub corrupt_weights: bool,
    /// Answer 401 / 403 to everything under this repo.
    pub refuse_with: Option<u16>,
    /// Pause this many milliseconds between weight chunks.
    pub slow_ms: u64,
}

struct Hub {
    /// Files by repo id (`*`: every repo asked for).
    repos: BTreeMap<String, BTreeMap<String, Vec<u8>>>,
    behaviour: Mutex<Behaviour>,
    /// `(path, range header)` of every GET.
    log: Mutex<Vec<(String, Option<String>)>>,
}

pub struct FakeHub {
    pub endpoint: String,
    hub: Arc<Hub>,
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// A fake git blob id for small files (the real hub uses git's SHA-1).
fn small_etag(bytes: &[u8]) -> String {
    sha256_hex(bytes)[..40].to_string()
}

impl FakeHub {
    /// Serves every file of `folder` as any model repo `org/name`.
    pub fn start(folder: &std::path::Path, behaviour: Behaviour) -> Self {
        Self::start_repos(&[("*", folder, &[])], behaviour)
    }

    /// Serves several repos: `(repo id, folder, files of the folder left out)`.
    pub fn start_repos(repos: &[(&str, &std::path::Path, &[&str])], behaviour: Behaviour) -> Self {
        let mut served = BTreeMap::new();
        for (repo, folder, left_out) in repos {
            let mut files = BTreeMap::new();
            for entry in std::fs::read_dir(folder).unwrap() {
                let entry = entry.unwrap();
                let name = entry.file_name().to_string_lossy().into_owned();
                if !name.starts_with("reference.") && !left_out.contains(&name.as_str()) {
                    files.insert(name, std::fs::read(entry.path()).unwrap());
                }
            }
            served.insert(repo.to_string(), files);
        }
        let hub = Arc::new(Hub { repos: served, behaviour: Mutex::new(behaviour), log: Mutex::new(Vec::new()) });
        let app = Router::new()
            .route("/api/models", axum::routing::get(search))
            .route("/api/models/{org}/{name}/revision/main", axum::routing::get(repo_info))
            .route("/api/models/{org}/{name}/tree/main", axum::routing::get(tree))
            .route("/{org}/{name}/resolve/main/{file}", axum::routing::any(resolve))
            .route("/cdn/{sha}", axum::routing::get(cdn))
            .with_state(hub.clone());
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                axum::serve(listener, app).await.unwrap();
            });
        });
        Self { endpoint, hub }
    }

    pub fn set_behaviour(&self, behaviour: Behaviour) {
        *self.hub.behaviour.lock().unwrap() = behaviour;
    }

    /// Range headers of the GETs of the weights, in order.
    pub fn weight_ranges(&self) -> Vec<Option<String>> {
        self.hub.log.lock().unwrap().iter().filter(|(p, _)| p.starts_with("/cdn/")).map(|(_, r)| r.clone()).collect()
    }

    pub fn weights_len(&self) -> usize {
        self.hub.repos["*"][WEIGHTS].len()
    }
}

impl Hub {
    fn files(&self, org: &str, name: &str) -> Option<&BTreeMap<String, Vec<u8>>> {
        self.repos.get(&format!("{org}/{name}")).or_else(|| self.repos.get("*"))
    }
}

fn refused(hub: &Hub) -> Option<Response> {
    hub.behaviour
        .lock()
        .unwrap()
        .refuse_with
        .map(|code| (StatusCode::from_u16(code).unwrap(), "Access to this model is restricted").into_response())
}

async fn repo_info(State(hub): State<Arc<Hub>>, Path((org, name)): Path<(String, String)>) -> Response {
    if let Some(r) = refused(&hub) {
        return r;
    }
    let Some(files) = hub.files(&org, &name) else {
        return (StatusCode::NOT_FOUND, "Repository not found").into_response();
    };
    let siblings: Vec<_> = files.keys().map(|f| serde_json::json!({"rfilename": f})).collect();
    axum::Json(serde_json::json!({"id": format!("{org}/{name}"), "sha": COMMIT, "siblings": siblings})).into_response()
}

/// `?search=<text>`: the named repos whose id contains it (`*` is never listed).
async fn search(
    State(hub): State<Arc<Hub>>,
    axum::extract::Query(query): axum::extract::Query<BTreeMap<String, String>>,
) -> Response {
    let text = query.get("search").map(|s| s.to_lowercase()).unwrap_or_default();
    let found: Vec<_> = hub
        .repos
        .keys()
        .filter(|id| *id != "*" && id.to_lowercase().contains(&text))
        .map(|id| serde_json::json!({"id": id, "downloads": 1000 + id.len(), "likes": 7}))
        .collect();
    axum::Json(found).into_response()
}

/// The repo's files as the hub's tree API gives them: large files with their LFS size.
async fn tree(State(hub): State<Arc<Hub>>, Path((org, name)): Path<(String, String)>) -> Response {
    let Some(files) = hub.files(&org, &name) else {
        return (StatusCode::NOT_FOUND, "Repository not found").into_response();
    };
    let entries: Vec<_> = files
        .iter()
        .map(|(file, bytes)| {
            let mut entry = serde_json::json!({"type": "file", "path": file, "size": bytes.len()});
            if is_large(file) {
                entry["lfs"] = serde_json::json!({"oid": sha256_hex(bytes), "size": bytes.len(), "pointerSize": 134});
                entry["size"] = serde_json::json!(134);
            }
            entry
        })
        .collect();
    axum::Json(entries).into_response()
}

async fn resolve(
    State(hub): State<Arc<Hub>>,
    method: Method,
    Path((org, name, file)): Path<(String, String, String)>,
    headers: HeaderMap,
) -> Response {
    if let Some(r) = refused(&hub) {
        return r;
    }
    let Some(bytes) = hub.files(&org, &name).and_then(|f| f.get(&file)) else {
        return (StatusCode::NOT_FOUND, "Entry not found").into_response();
    };
    if is_large(&file) {
        // Large files: the hub answers with their hash and a redirect to storage.
        let sha = sha256_hex(bytes);
        return Response::builder()
            .status(StatusCode::FOUND)
            .header("location", format!("/cdn/{sha}"))
            .header("x-repo-commit", COMMIT)
            .header("x-linked-etag", format!("\"{sha}\""))
            .header("x-linked-size", bytes.len().to_string())
            .body(Body::empty())
            .unwrap();
    }
    let builder = Response::builder()
        .header("x-repo-commit", COMMIT)
        .header("etag", format!("\"{}\"", small_etag(bytes)))
        .header("content-length", bytes.len().to_string());
    if method == Method::HEAD {
        return builder.body(Body::empty()).unwrap();
    }
    hub.log.lock().unwrap().push((format!("/resolve/{file}"), range_of(&headers)));
    builder.body(Body::from(bytes.clone())).unwrap()
}

fn range_of(headers: &HeaderMap) -> Option<String> {
    headers.get("range").map(|v| v.to_str().unwrap().to_string())
}

async fn cdn(State(hub): State<Arc<Hub>>, Path(sha): Path<String>, headers: HeaderMap) -> Response {
    let large = hub.repos.values().flat_map(|f| f.iter().filter(|(name, _)| is_large(name)).map(|(_, b)| b));
    let found = large.into_iter().find(|b| sha256_hex(b) == sha);
    let Some(mut bytes) = found.cloned() else {
        return (StatusCode::NOT_FOUND, "no such object").into_response();
    };
    let range = range_of(&headers);
    hub.log.lock().unwrap().push((format!("/cdn/{sha}"), range.clone()));
    let behaviour = std::mem::take(&mut hub.behaviour.lock().unwrap().cut_weights_after);
    let (corrupt, slow_ms) = {
        let b = hub.behaviour.lock().unwrap();
        (b.corrupt_weights, b.slow_ms)
    };
    if corrupt {
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0xff;
    }
    let start: usize =
        range.as_deref().and_then(|r| r.strip_prefix("bytes=")?.strip_suffix('-')?.parse().ok()).unwrap_or(0);
    let total = bytes.len();
    let body_bytes = bytes[start.min(total)..].to_vec();
    let cut = behaviour;
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> = {
        let mut out = Vec::new();
        let mut sent = 0;
        for chunk in body_bytes.chunks(4096) {
            if let Some(limit) = cut {
                if start + sent >= limit {
                    out.push(Err(std::io::Error::other("connection cut by the test")));
                    break;
                }
            }
            sent += chunk.len();
            out.push(Ok(chunk.to_vec()));
        }
        out
    };
    let stream = futures_util::stream::iter(chunks).then(move |c| async move {
        // Let the bytes before a cut reach the client before the connection drops.
        let pause = if c.is_err() { 200 } else { slow_ms };
        if pause > 0 {
            tokio::time::sleep(std::time::Duration::from_millis(pause)).await;
        }
        c
    });
    let builder = Response::builder().header("content-length", (total - start.min(total)).to_string());
    let builder = if start > 0 {
        builder
            .status(StatusCode::PARTIAL_CONTENT)
            .header("content-range", format!("bytes {start}-{}/{total}", total - 1))
    } else {
        builder.status(StatusCode::OK)
    };
    builder.body(Body::from_stream(stream)).unwrap()
}

use futures_util::StreamExt as _;
