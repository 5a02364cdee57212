//! `cake serve` against the attacks a web page or a LAN stranger can make:
//! cross-site "simple" POSTs, DNS rebinding (a foreign `Host`), requests
//! without the session or the API key. Each one is sent from this test
//! process over a real socket to a real server, and must be refused without
//! changing anything on disk; the same request made the legitimate way must
//! work (so the refusals are not an accident of a broken request).

mod common;

use common::place::Place;
use common::server::{data_dir_with_default_model, Server};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// One HTTP/1.1 exchange written by hand, so every header is the attacker's choice.
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

fn exchange(port: u16, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Reply {
    exchange_over(TcpStream::connect(("127.0.0.1", port)).expect("the server accepts"), method, path, headers, body)
}

fn exchange_over(mut stream: TcpStream, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Reply {
    stream.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut request = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\nContent-Length: {}\r\n", body.len());
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    stream.write_all(request.as_bytes()).unwrap();
    let mut reader = BufReader::new(stream);
    let mut status_line = String::new();
    reader.read_line(&mut status_line).unwrap();
    let status = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {status_line:?}"));
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        let (name, value) = line.split_once(':').unwrap();
        headers.push((name.trim().to_string(), value.trim().to_string()));
    }
    let mut raw = Vec::new();
    reader.read_to_end(&mut raw).unwrap();
    let chunked = headers.iter().any(|(n, v)| n.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
    let body = if chunked { unchunk(&raw) } else { raw };
    Reply { status, headers, body: String::from_utf8_lossy(&body).into_owned() }
}

fn unchunk(mut raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(end) = raw.windows(2).position(|w| w == b"\r\n") {
        let size = usize::from_str_radix(std::str::from_utf8(&raw[..end]).unwrap().trim(), 16).unwrap();
        if size == 0 {
            break;
        }
        out.extend_from_slice(&raw[end + 2..end + 2 + size]);
        raw = &raw[end + 4 + size..];
    }
    out
}

/// Every file under `roots` (following the model's symlink) with its bytes.
fn snapshot(roots: &[&Path]) -> BTreeMap<PathBuf, Vec<u8>> {
    fn walk(dir: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for entry in entries {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "gguf") {
                // The model: its presence and size (reading 100 MB per snapshot adds nothing).
                out.insert(
                    path.clone(),
                    std::fs::metadata(&path).map(|m| m.len().to_le_bytes().to_vec()).unwrap_or_default(),
                );
            } else {
                out.insert(path.clone(), std::fs::read(&path).unwrap_or_default());
            }
        }
    }
    let mut out = BTreeMap::new();
    for root in roots {
        walk(root, &mut out);
    }
    out
}

const EVIL_ORIGIN: &str = "https://evil.example";

/// A request described for a test: what it is, its headers, the status it must get.
type Attempt<'a> = (&'a str, Vec<(&'a str, &'a str)>, u16);

#[test]
fn cross_site_posts_and_foreign_hosts_are_refused_and_change_nothing() {
    let root = tempfile::tempdir().unwrap();
    let data = data_dir_with_default_model(root.path());
    let hf_cache = root.path().join("hf-cache");
    std::fs::create_dir_all(&hf_cache).unwrap();
    let server = Server::start(&data, &hf_cache, &[]);
    let port = server.port();
    let own_host = format!("127.0.0.1:{port}");
    let conversation = json!({
        "id": "conv_1", "title": "Mine", "model_id": "default", "system_prompt": "",
        "sampling": {}, "messages": [{"role": "user", "content": "Hi"}],
        "created_at": "2026-12-01T10:00:00Z", "updated_at": "2026-12-01T10:00:01Z",
    });
    assert_eq!(server.post("/app/save_conversation", &json!({"conversation": conversation})).0, 200);
    assert_eq!(server.post("/app/set_cluster_settings", &json!({"key": "the user's own key"})).0, 200);
    let before = snapshot(&[&data, &hf_cache]);

    let plant_key = json!({"key": "planted by evil.example", "join_as_worker": true}).to_string();
    let delete_default = json!({"id": "default"}).to_string();
    let mut planted = conversation.clone();
    planted["messages"][0]["content"] = json!("planted");
    let plant_conversation = json!({"conversation": planted}).to_string();
    let cookie = server.session_cookie();
    let rebound = format!("rebind.evil.example:{port}");
    for (command, body) in [
        ("set_cluster_settings", &plant_key),
        ("delete_model", &delete_default),
        ("save_conversation", &plant_conversation),
    ] {
        let path = format!("/app/{command}");
        let host = ("Host", own_host.as_str());
        let attempts: [Attempt; 5] = [
            ("a cross-site simple POST", vec![host, ("Origin", EVIL_ORIGIN), ("Content-Type", "text/plain")], 403),
            ("a simple POST without an origin", vec![host, ("Content-Type", "text/plain"), ("Cookie", cookie)], 415),
            ("JSON without the session", vec![host, ("Content-Type", "application/json")], 403),
            (
                "JSON with the session from a foreign page",
                vec![host, ("Origin", EVIL_ORIGIN), ("Content-Type", "application/json"), ("Cookie", cookie)],
                403,
            ),
            (
                "JSON with the session under a rebound name",
                vec![("Host", &rebound), ("Content-Type", "application/json"), ("Cookie", cookie)],
                403,
            ),
        ];
        for (what, headers, status) in attempts {
            let reply = exchange(port, "POST", &path, &headers, body);
            assert_eq!(reply.status, status, "{what} to {path}: {}", reply.body);
            let message =
                serde_json::from_str::<Value>(&reply.body).unwrap()["error"]["message"].as_str().unwrap().to_string();
            assert!(!message.is_empty(), "{what}: the refusal says why");
        }
    }

    // DNS rebinding: a page of rebind.evil.example whose name now points at
    // 127.0.0.1 reads nothing, not even the page that would hand out the session.
    for (method, path, content_type) in [
        ("GET", "/", ""),
        ("GET", "/v1/models", ""),
        ("POST", "/v1/chat/completions", "application/json"),
        ("POST", "/app/list_conversations", "application/json"),
        ("POST", "/app/get_conversation", "application/json"),
        ("POST", "/app/cluster_status", "application/json"),
    ] {
        let mut headers = vec![("Host", rebound.as_str()), ("Cookie", cookie)];
        if !content_type.is_empty() {
            headers.push(("Content-Type", content_type));
        }
        let reply = exchange(port, method, path, &headers, r#"{"id":"conv_1"}"#);
        assert_eq!(reply.status, 403, "{method} {path} under a rebound name: {}", reply.body);
        assert!(reply.header("set-cookie").is_none(), "no session for a rebound name");
        assert!(!reply.body.contains("Mine"), "nothing of the user's in a refusal");
    }
    // A cross-site form post at the OpenAI API.
    let form = exchange(
        port,
        "POST",
        "/v1/chat/completions",
        &[("Host", &own_host), ("Origin", EVIL_ORIGIN), ("Content-Type", "application/x-www-form-urlencoded")],
        "a=b",
    );
    assert_eq!(form.status, 403, "{}", form.body);

    assert!(before == snapshot(&[&data, &hf_cache]), "a refused request changed the data folder or the cache");

    // The page hands out the session only as a strict, script-proof cookie,
    // under a policy that runs no script but its own.
    let page = exchange(port, "GET", "/", &[("Host", &format!("localhost:{port}"))], "");
    assert_eq!(page.status, 200);
    let set_cookie = page.header("set-cookie").expect("the page sets the session");
    assert!(set_cookie.contains("HttpOnly") && set_cookie.contains("SameSite=Strict"), "{set_cookie}");
    assert!(page.header("content-security-policy").is_some_and(|p| p.contains("script-src 'self'")));

    // Local clients with no setup: an OpenAI request without any cookie works.
    let chat =
        json!({"model": "default", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2, "temperature": 0})
            .to_string();
    let reply = exchange(
        port,
        "POST",
        "/v1/chat/completions",
        &[("Host", &own_host), ("Content-Type", "application/json"), ("Authorization", "Bearer anything")],
        &chat,
    );
    assert_eq!(reply.status, 200, "{}", reply.body);

    // The legitimate way, the same request changes what the attacks could not.
    let ok = exchange(
        port,
        "POST",
        "/app/save_conversation",
        &[
            ("Host", &own_host),
            ("Origin", &format!("http://{own_host}")),
            ("Content-Type", "application/json"),
            ("Cookie", cookie),
        ],
        &plant_conversation,
    );
    assert_eq!(ok.status, 200, "{}", ok.body);
    assert!(
        before != snapshot(&[&data, &hf_cache]),
        "the page's own request is the control: it must change the conversation"
    );
}

/// `cake serve` started inside `place` with `args`; its printed port, or
/// its exit status and stderr when it refuses to start.
fn serve_in(
    place: &Place,
    data: &Path,
    args: &[&str],
) -> Result<(std::process::Child, u16), (std::process::ExitStatus, String)> {
    let mut child = place
        .command(env!("CARGO_BIN_EXE_cake"))
        .arg("serve")
        .args(args)
        .env("CAKE_DATA_DIR", data)
        .env("HF_HUB_CACHE", data.join("hf-cache"))
        .env_remove("CAKE_API_KEY")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    match lines.next() {
        Some(Ok(line)) if line.starts_with("Cake is serving on ") => {
            let port = line.trim_end_matches('/').rsplit(':').next().unwrap().parse().unwrap();
            std::thread::spawn(move || for _ in lines {});
            Ok((child, port))
        }
        _ => {
            let status = child.wait().unwrap();
            let mut stderr = String::new();
            child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
            Err((status, stderr))
        }
    }
}

#[test]
fn a_lan_bind_needs_an_api_key_and_then_every_request_needs_it() {
    let root = tempfile::tempdir().unwrap();
    let data = data_dir_with_default_model(root.path());
    // All interfaces of a namespace of its own (only its loopback exists there).
    let place = Place::new("serve-lan");
    let started = Instant::now();
    let (status, stderr) =
        serve_in(&place, &data, &["--host", "0.0.0.0", "--port", "0"]).expect_err("no key: it must refuse to start");
    assert!(!status.success());
    assert!(stderr.contains("without an API key") && stderr.contains("--api-key"), "{stderr}");
    assert!(started.elapsed() < Duration::from_secs(20));
    let (_, stderr) = serve_in(&place, &data, &["--host", "0.0.0.0", "--port", "0", "--api-key", "short"])
        .expect_err("a short key is refused");
    assert!(stderr.contains("too short"), "{stderr}");

    let key = "correct-horse-battery-staple-42";
    let (mut child, port) =
        serve_in(&place, &data, &["--host", "0.0.0.0", "--port", "0", "--api-key", key]).expect("with a key it serves");
    place.run(|| {
        let host = format!("127.0.0.1:{port}");
        let bearer = format!("Bearer {key}");
        let json = ("Content-Type", "application/json");
        let h = ("Host", host.as_str());
        assert_eq!(exchange(port, "GET", "/v1/models", &[h], "").status, 401);
        assert_eq!(
            exchange(port, "GET", "/v1/models", &[h, ("Authorization", "Bearer wrong-key-of-some-length")], "").status,
            401
        );
        assert_eq!(exchange(port, "POST", "/app/list_models", &[h, json], "{}").status, 401);
        let models = exchange(port, "GET", "/v1/models", &[h, ("Authorization", &bearer)], "");
        assert_eq!(models.status, 200, "{}", models.body);
        assert_eq!(
            exchange(port, "POST", "/app/list_models", &[h, json, ("Authorization", &bearer)], "{}").status,
            200
        );
        // The key does not excuse a rebound name.
        let rebound = format!("rebind.evil.example:{port}");
        assert_eq!(
            exchange(port, "GET", "/v1/models", &[("Host", &rebound), ("Authorization", &bearer)], "").status,
            403
        );

        // The UI: a login page first, no session for a wrong key, then the app.
        let page = exchange(port, "GET", "/", &[h], "");
        assert_eq!(page.status, 401);
        assert!(page.body.contains("API key") && page.header("set-cookie").is_none());
        let form = ("Content-Type", "application/x-www-form-urlencoded");
        let wrong = exchange(port, "POST", "/login", &[h, form], "api_key=not-the-key-at-all");
        assert_eq!(wrong.status, 401);
        assert!(wrong.header("set-cookie").is_none());
        let login = exchange(port, "POST", "/login", &[h, form], &format!("api_key={key}"));
        assert_eq!(login.status, 303, "{}", login.body);
        let cookie = login.header("set-cookie").unwrap().split(';').next().unwrap().to_string();
        assert_eq!(exchange(port, "GET", "/", &[h, ("Cookie", &cookie)], "").status, 200);
        let listed = exchange(port, "POST", "/app/list_models", &[h, json, ("Cookie", &cookie)], "{}");
        assert_eq!(listed.status, 200, "{}", listed.body);
    });
    let _ = child.kill();
    let _ = child.wait();
}

/// Wrong API keys sent in parallel from one address are answered one turn
/// at a time, further apart after each, and then refused with 429 at once;
/// a client at another address with the key is not held up.
#[test]
fn wrong_api_keys_from_one_address_are_throttled_and_others_still_get_in() {
    let root = tempfile::tempdir().unwrap();
    let data = data_dir_with_default_model(root.path());
    let key = "correct-horse-battery-staple-42";
    let server = Server::start(&data, &root.path().join("hf"), &["--api-key", key]);
    let port = server.port();
    let to: std::net::SocketAddr = ([127, 0, 0, 1], port).into();
    let host = format!("127.0.0.1:{port}");
    let started = Instant::now();
    let statuses: Vec<(u16, Option<String>)> = std::thread::scope(|scope| {
        let guesses: Vec<_> = (0..40)
            .map(|i| {
                let host = &host;
                scope.spawn(move || {
                    let stream = common::connect_from([127, 0, 0, 2].into(), to).unwrap();
                    let wrong = format!("Bearer wrong-key-number-{i:04}-of-many");
                    let reply =
                        exchange_over(stream, "GET", "/v1/models", &[("Host", host), ("Authorization", &wrong)], "");
                    (reply.status, reply.header("retry-after").map(str::to_string))
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(500));
        // Meanwhile, from another address, the right key gets in at once.
        let asked = Instant::now();
        let bearer = format!("Bearer {key}");
        let stream = common::connect_from([127, 0, 0, 3].into(), to).unwrap();
        let models = exchange_over(stream, "GET", "/v1/models", &[("Host", &host), ("Authorization", &bearer)], "");
        assert_eq!(models.status, 200, "{}", models.body);
        assert!(asked.elapsed() < Duration::from_secs(1), "{:?}", asked.elapsed());
        guesses.into_iter().map(|g| g.join().unwrap()).collect()
    });
    let checked = statuses.iter().filter(|(status, _)| *status == 401).count();
    let throttled: Vec<_> = statuses.iter().filter(|(status, _)| *status == 429).collect();
    assert_eq!(checked + throttled.len(), 40, "{statuses:?}");
    // One checked at once, the others given turns at least a second apart
    // up to the 8 s ceiling, the rest refused: about one guess a second.
    assert!((2..=10).contains(&checked), "{checked} of 40 wrong keys were checked: {statuses:?}");
    assert!(throttled.iter().all(|(_, retry)| retry.as_deref() == Some("8")), "{statuses:?}");
    assert!(started.elapsed() < Duration::from_secs(20), "{:?}", started.elapsed());

    // A request refused for something else (a foreign Host) does not clear
    // an address's failures: the wrong key after it still waits its turn.
    let from = |last: u8| common::connect_from([127, 0, 0, last].into(), to).unwrap();
    let wrong = ("Authorization", "Bearer wrong-key-from-a-fresh-address-1");
    assert_eq!(exchange_over(from(5), "GET", "/v1/models", &[("Host", &host), wrong], "").status, 401);
    let foreign = exchange_over(from(5), "GET", "/v1/models", &[("Host", "evil.example"), wrong], "");
    assert_eq!(foreign.status, 403);
    let asked = Instant::now();
    assert_eq!(exchange_over(from(5), "GET", "/v1/models", &[("Host", &host), wrong], "").status, 401);
    assert!(
        asked.elapsed() >= Duration::from_millis(500),
        "answered after {:?}: the failures were cleared",
        asked.elapsed()
    );
}
