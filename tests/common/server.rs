//! A real `cake serve` process on a loopback port, with its own data folder
//! and Hugging Face cache, for tests that speak HTTP to it.

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Server {
    child: Child,
    pub base: String,
    pub data_dir: PathBuf,
    agent: ureq::Agent,
    /// The session cookie the UI's page hands out (`name=value`), sent with
    /// every request as the page's own fetches would send it; fetched at the
    /// first request (which may run in another network namespace).
    session_cookie: std::sync::OnceLock<String>,
}

/// The response whatever its status (ureq reports 4xx/5xx as errors).
fn any_status(result: Result<ureq::Response, ureq::Error>) -> ureq::Response {
    match result {
        Ok(response) | Err(ureq::Error::Status(_, response)) => response,
        Err(e) => panic!("request did not reach the server: {e}"),
    }
}

/// The installed default model (see `make model`).
pub fn default_model_file() -> PathBuf {
    let path =
        std::env::var_os("CAKE_TEST_MODEL").map(PathBuf::from).unwrap_or_else(cake::files::paths::default_model_path);
    assert!(path.exists(), "the default model is missing at {}: run `make model`", path.display());
    path
}

/// A data folder whose `models/` holds (a link to) the default model.
pub fn data_dir_with_default_model(root: &Path) -> PathBuf {
    let data = root.join("data");
    std::fs::create_dir_all(data.join("models")).unwrap();
    let link = data.join("models").join(cake::files::paths::DEFAULT_MODEL_FILE);
    std::os::unix::fs::symlink(default_model_file(), link).unwrap();
    data
}

impl Server {
    /// Starts `cake serve` on a free port with `data_dir` and waits until it listens.
    pub fn start(data_dir: &Path, hf_cache: &Path, extra_args: &[&str]) -> Self {
        Self::start_with_env(data_dir, hf_cache, extra_args, &[])
    }

    /// Like [`Server::start`], with extra environment variables.
    pub fn start_with_env(data_dir: &Path, hf_cache: &Path, extra_args: &[&str], envs: &[(&str, &str)]) -> Self {
        Self::start_command(Command::new(env!("CARGO_BIN_EXE_cake")), data_dir, hf_cache, extra_args, envs)
    }

    /// Like [`Server::start_with_env`], running `cake` through `command`
    /// (say, inside a network namespace).
    pub fn start_command(
        mut command: Command,
        data_dir: &Path,
        hf_cache: &Path,
        extra_args: &[&str],
        envs: &[(&str, &str)],
    ) -> Self {
        let mut child = command
            .envs(envs.iter().copied())
            .args(["serve", "--host", "127.0.0.1", "--port", "0"])
            .args(extra_args)
            .env("CAKE_DATA_DIR", data_dir)
            .env("HF_HUB_CACHE", hf_cache)
            .env("RAYON_NUM_THREADS", "2")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("cake serve starts");
        let stdout = child.stdout.take().unwrap();
        let mut lines = BufReader::new(stdout).lines();
        let deadline = Instant::now() + Duration::from_secs(30);
        let base = loop {
            assert!(Instant::now() < deadline, "cake serve did not start listening");
            let line = lines.next().expect("cake serve printed its address").unwrap();
            if let Some(url) = line.strip_prefix("Cake is serving on ") {
                break url.trim_end_matches('/').to_string();
            }
        };
        // Keep draining stdout so the server never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        let agent = ureq::AgentBuilder::new().timeout(Duration::from_secs(300)).build();
        Self { child, base, data_dir: data_dir.to_path_buf(), agent, session_cookie: Default::default() }
    }

    /// The port the server listens on.
    pub fn port(&self) -> u16 {
        self.base.rsplit(':').next().unwrap().parse().unwrap()
    }

    /// The session cookie (`name=value`), as the UI's page receives it.
    pub fn session_cookie(&self) -> &str {
        self.session_cookie
            .get_or_init(|| session_cookie_of(&any_status(self.agent.get(&format!("{}/", self.base)).call())))
    }

    fn request(&self, method: &str, path: &str) -> ureq::Request {
        self.agent.request(method, &format!("{}{path}", self.base)).set("cookie", self.session_cookie())
    }

    /// POSTs `body` (raw text) to `path`; returns status and parsed JSON body.
    pub fn post_raw(&self, path: &str, body: &str) -> (u16, Value) {
        let response = any_status(self.request("POST", path).set("content-type", "application/json").send_string(body));
        let status = response.status();
        let text = response.into_string().unwrap();
        (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
    }

    pub fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        self.post_raw(path, &body.to_string())
    }

    /// POSTs `body`; its status, or `None` if the request did not get an
    /// answer (the server died).
    pub fn try_post(&self, path: &str, body: &Value) -> Option<u16> {
        let sent = self.request("POST", path).set("content-type", "application/json").send_string(&body.to_string());
        match sent {
            Ok(response) | Err(ureq::Error::Status(_, response)) => Some(response.status()),
            Err(_) => None,
        }
    }

    /// Kills the server at once (SIGKILL), as a crash would; requests in
    /// flight on other threads see their connections fail.
    pub fn kill(&self) {
        // SAFETY: a signal to this test's own child process.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGKILL) };
    }

    /// POSTs `body` as JSON; the response whatever its status.
    fn post_json(&self, path: &str, body: &Value) -> ureq::Response {
        any_status(self.request("POST", path).set("content-type", "application/json").send_string(&body.to_string()))
    }

    /// POSTs JSON and returns the status, content type and raw body bytes.
    pub fn post_bytes(&self, path: &str, body: &Value) -> (u16, String, Vec<u8>) {
        let response = self.post_json(path, body);
        let status = response.status();
        let content_type = response.content_type().to_string();
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut response.into_reader(), &mut bytes).unwrap();
        (status, content_type, bytes)
    }

    pub fn get(&self, path: &str) -> (u16, Value) {
        let response = any_status(self.request("GET", path).call());
        let status = response.status();
        (status, response.into_json().unwrap())
    }

    /// POSTs to a streaming endpoint and returns the `data:` payloads, calling
    /// `keep_going(index, payload)` after each; reading stops (and the
    /// connection closes) when it returns false.
    pub fn stream(
        &self,
        path: &str,
        body: &Value,
        mut keep_going: impl FnMut(usize, &str) -> bool,
    ) -> (u16, Vec<String>) {
        let response = self.post_json(path, body);
        let status = response.status();
        let mut payloads = Vec::new();
        let mut reader = BufReader::new(response.into_reader());
        let mut line = String::new();
        loop {
            line.clear();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                break;
            }
            if let Some(data) = line.trim_end().strip_prefix("data: ") {
                payloads.push(data.to_string());
                if !keep_going(payloads.len() - 1, data) {
                    break;
                }
            }
        }
        (status, payloads)
    }

    /// POSTs to a streaming endpoint and returns its status and every
    /// non-empty line of the stream (`data: …` and `: comment` lines alike),
    /// calling `on_line` with each.
    pub fn stream_lines(&self, path: &str, body: &Value, mut on_line: impl FnMut(&str)) -> (u16, Vec<String>) {
        let response = self.post_json(path, body);
        let status = response.status();
        let lines: Vec<String> = BufReader::new(response.into_reader())
            .lines()
            .map_while(Result::ok)
            .filter(|line| !line.trim().is_empty())
            .inspect(|line| on_line(line))
            .collect();
        (status, lines)
    }

    /// Streams the app's `chat` with `body` to its end and returns the
    /// last event, which must be `done`.
    pub fn chat_done(&self, body: &Value) -> Value {
        let (status, payloads) = self.stream("/app/chat", body, |_, _| true);
        assert_eq!(status, 200);
        let done: Value = serde_json::from_str(payloads.last().expect("some events")).unwrap();
        assert_eq!(done["type"], "done", "{payloads:?}");
        done
    }
}

/// `name=value` of the `Set-Cookie` a page response carries.
fn session_cookie_of(response: &ureq::Response) -> String {
    let cookie = response.header("set-cookie").expect("the UI's page sets the session cookie");
    cookie.split(';').next().unwrap().trim().to_string()
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
