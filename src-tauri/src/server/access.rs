//! Who may use `cake serve`: every request passes [`AccessPolicy::check`]
//! before a route sees it.
//!
//! - The `Host` must name the address served (for a loopback bind only
//!   `localhost`, `127.0.0.1` and `[::1]` with the port), which defeats DNS
//!   rebinding. A request that carries an `Origin` must come from the page
//!   Cake served itself.
//! - A `POST` must be `application/json` (the login form excepted), so no
//!   cross-site "simple" request reaches a command.
//! - `/app/*` (the app's commands) needs the per-launch session secret,
//!   which only the served page receives (a `SameSite=Strict`, `HttpOnly`
//!   cookie), or the API key.
//! - With an API key (required for any bind but loopback), the model APIs
//!   (`/v1/*`: OpenAI's and Anthropic's; `/api/*`: Ollama's) need
//!   `Authorization: Bearer <key>` and the UI starts with a login page.
//!   Each attempt at the key is a guess, throttled per client address
//!   ([`AccessPolicy::guesses`]): after a wrong one, that address's next
//!   attempt waits [`FIRST_KEY_WAIT`], doubling up to [`LONGEST_KEY_WAIT`],
//!   and one further off than that gets 429 at once.

use crate::guesses::GuessThrottle;
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{Html, IntoResponse, Response};
use std::net::IpAddr;
use std::time::Duration;

/// The wait after a client address's first wrong API key, doubled by each one after.
pub const FIRST_KEY_WAIT: Duration = Duration::from_secs(1);
/// The longest wait between two API-key attempts of an address that keeps failing.
pub const LONGEST_KEY_WAIT: Duration = Duration::from_secs(8);

/// The shortest API key accepted (a short key falls to guessing over the LAN).
pub const MIN_API_KEY_CHARS: usize = 16;

/// The header Anthropic's clients send their API key in.
const ANTHROPIC_KEY: &str = "x-api-key";

/// The hosts, secrets and key one `cake serve` answers to.
pub struct AccessPolicy {
    port: u16,
    /// Host names (lower case, IPv6 in brackets) accepted in `Host`.
    host_names: Vec<String>,
    /// Any IP literal is accepted too (a non-loopback bind; an address
    /// cannot be rebound the way a name can).
    any_ip_literal: bool,
    session_secret: String,
    api_key: Option<String>,
    /// Where the person finds the key (said when a request lacks it).
    key_source: ApiKeySource,
    /// Wrong API keys, per client address.
    pub guesses: GuessThrottle,
}

/// Where the API key of a server comes from, so that a request without it
/// is told where to find it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ApiKeySource {
    /// `cake serve --api-key` or `CAKE_API_KEY`.
    #[default]
    CommandLine,
    /// The desktop app's OpenAI API switch, which makes the key and shows it.
    DesktopApp,
}

impl ApiKeySource {
    fn where_to_find(self) -> &'static str {
        match self {
            Self::CommandLine => "the key given with --api-key or CAKE_API_KEY",
            Self::DesktopApp => "the API key shown in Cake's window, under Models → Other programs",
        }
    }
}

/// What a request is for, decided from its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Area {
    /// `/app/*`: the app's commands, for Cake's own UI.
    App,
    /// `/v1/*` and `/api/*`: the OpenAI-, Anthropic- and Ollama-compatible APIs.
    ModelApi,
    /// `/login`: the API-key login form.
    Login,
    /// Everything else: the UI's files.
    Ui,
}

impl Area {
    fn of(path: &str) -> Self {
        if path.starts_with("/app/") {
            Self::App
        } else if path.starts_with("/v1/") || path.starts_with("/api/") {
            Self::ModelApi
        } else if path == "/login" {
            Self::Login
        } else {
            Self::Ui
        }
    }
}

/// Why a request was turned away.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    ForeignHost(String),
    ForeignOrigin(String),
    NotJson,
    NoSession,
    NoApiKey(ApiKeySource),
    /// The UI page without a login, when an API key is set.
    LoginNeeded,
    /// Too many wrong API keys from this address lately.
    TooManyGuesses,
}

impl Refusal {
    fn status(&self) -> StatusCode {
        match self {
            Self::ForeignHost(_) | Self::ForeignOrigin(_) | Self::NoSession => StatusCode::FORBIDDEN,
            Self::NotJson => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::NoApiKey(_) | Self::LoginNeeded => StatusCode::UNAUTHORIZED,
            Self::TooManyGuesses => StatusCode::TOO_MANY_REQUESTS,
        }
    }

    fn message(&self) -> String {
        match self {
            Self::ForeignHost(host) => format!(
                "Cake does not answer requests addressed to host {host:?}: open it at the address it printed when it started"
            ),
            Self::ForeignOrigin(origin) => format!("requests from pages of {origin:?} are refused: only Cake's own page may call it"),
            Self::NotJson => "the request body must be sent as Content-Type: application/json".into(),
            Self::NoSession => {
                "this endpoint serves Cake's own page only, with the session that page receives: reload the page (Cake may have restarted)".into()
            }
            Self::NoApiKey(source) => {
                format!("this Cake needs its API key: send `Authorization: Bearer <key>` ({})", source.where_to_find())
            }
            Self::LoginNeeded => Self::NoApiKey(ApiKeySource::CommandLine).message(),
            Self::TooManyGuesses => format!(
                "too many wrong API keys from this address: try again in {} s",
                LONGEST_KEY_WAIT.as_secs()
            ),
        }
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        if self == Self::LoginNeeded {
            return (self.status(), login_page(None)).into_response();
        }
        let body = serde_json::json!({"error": {"message": self.message(), "type": "access_denied", "param": null, "code": null}});
        let mut response = (self.status(), axum::Json(body)).into_response();
        if self == Self::TooManyGuesses {
            response.headers_mut().insert(header::RETRY_AFTER, LONGEST_KEY_WAIT.as_secs().into());
        }
        response
    }
}

impl AccessPolicy {
    /// The policy for a server bound to `bound` (after binding, so port 0 is
    /// resolved). A bind that is not loopback needs an API key.
    pub fn new(bound: std::net::SocketAddr, api_key: Option<String>, extra_hosts: &[String]) -> anyhow::Result<Self> {
        if let Some(key) = &api_key {
            if key.chars().count() < MIN_API_KEY_CHARS {
                anyhow::bail!(
                    "the API key is too short: use at least {MIN_API_KEY_CHARS} characters (a random one is best)"
                );
            }
        }
        let loopback = bound.ip().is_loopback();
        if !loopback && api_key.is_none() {
            anyhow::bail!(
                "refusing to serve on {bound} without an API key: anyone on that network could use this machine's models, \
                 conversations and cluster settings. Pass --api-key (or set CAKE_API_KEY), or serve on 127.0.0.1"
            );
        }
        let mut host_names: Vec<String> = ["localhost", "127.0.0.1", "[::1]"].map(String::from).to_vec();
        if !loopback {
            if let Some(name) = machine_host_name() {
                host_names.push(format!("{name}.local"));
                host_names.push(name);
            }
        }
        host_names.extend(extra_hosts.iter().map(|h| h.trim().to_ascii_lowercase()));
        Ok(Self {
            port: bound.port(),
            host_names,
            any_ip_literal: !loopback,
            session_secret: random_secret(),
            api_key,
            key_source: ApiKeySource::default(),
            guesses: GuessThrottle::new(FIRST_KEY_WAIT, LONGEST_KEY_WAIT),
        })
    }

    /// The policy with its key coming from `source`.
    pub fn with_key_source(self, source: ApiKeySource) -> Self {
        Self { key_source: source, ..self }
    }

    /// The name of the session cookie. Cookies are shared between the ports
    /// of one host, so the port is part of the name.
    fn cookie_name(&self) -> String {
        format!("cake_session_{}", self.port)
    }

    /// Whether the UI starts with a login page.
    pub fn needs_login(&self) -> bool {
        self.api_key.is_some()
    }

    /// `Set-Cookie` for the session secret.
    pub fn session_cookie(&self) -> HeaderValue {
        let cookie = format!("{}={}; Path=/; HttpOnly; SameSite=Strict", self.cookie_name(), self.session_secret);
        HeaderValue::from_str(&cookie).expect("the cookie is ASCII")
    }

    /// Whether `key` is the API key (compared in constant time).
    pub fn is_api_key(&self, key: &str) -> bool {
        self.api_key.as_deref().is_some_and(|expected| constant_time_eq(expected.as_bytes(), key.as_bytes()))
    }

    fn has_session(&self, headers: &HeaderMap) -> bool {
        let name = self.cookie_name();
        headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .flat_map(|value| value.split(';'))
            .filter_map(|pair| pair.trim().split_once('='))
            .any(|(key, value)| key == name && constant_time_eq(value.as_bytes(), self.session_secret.as_bytes()))
    }

    /// Whether the request is an attempt at the API key: it sends one as
    /// a bearer token (or in Anthropic's `x-api-key`) to a server that has
    /// one (the login form is the other way, judged by its handler).
    pub fn is_key_attempt(&self, headers: &HeaderMap) -> bool {
        self.needs_login() && (headers.contains_key(header::AUTHORIZATION) || headers.contains_key(ANTHROPIC_KEY))
    }

    /// Whether the request carries the API key as its bearer token or, as
    /// Anthropic's clients send it, in `x-api-key`.
    pub fn has_bearer_key(&self, headers: &HeaderMap) -> bool {
        let bearer = headers
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "));
        let anthropic = headers.get(ANTHROPIC_KEY).and_then(|value| value.to_str().ok());
        bearer.or(anthropic).is_some_and(|key| self.is_api_key(key.trim()))
    }

    /// Whether `host` (a `Host` header value) names this server.
    fn is_own_host(&self, host: &str) -> bool {
        let Some((name, port)) = split_host_port(host) else { return false };
        if port.unwrap_or(80) != self.port {
            return false;
        }
        let name = name.to_ascii_lowercase();
        if self.host_names.contains(&name) {
            return true;
        }
        self.any_ip_literal && name.trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>().is_ok()
    }

    /// Lets the request through, or says why not.
    pub fn check(&self, method: &Method, uri: &Uri, headers: &HeaderMap) -> Result<(), Refusal> {
        let host = headers.get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or_default();
        if !self.is_own_host(host) {
            return Err(Refusal::ForeignHost(host.chars().take(100).collect()));
        }
        if let Some(origin) = headers.get(header::ORIGIN) {
            let origin = origin.to_str().unwrap_or_default();
            if origin != format!("http://{host}") {
                return Err(Refusal::ForeignOrigin(origin.chars().take(100).collect()));
            }
        }
        let area = Area::of(uri.path());
        if *method == Method::POST && area != Area::Login && !is_json(headers) {
            return Err(Refusal::NotJson);
        }
        match area {
            Area::App if self.has_session(headers) || self.has_bearer_key(headers) => Ok(()),
            Area::App if self.needs_login() => Err(Refusal::NoApiKey(self.key_source)),
            Area::App => Err(Refusal::NoSession),
            Area::ModelApi if self.needs_login() && !self.has_bearer_key(headers) => {
                Err(Refusal::NoApiKey(self.key_source))
            }
            Area::Ui if self.needs_login() && is_page(uri.path()) && !self.has_session(headers) => {
                Err(Refusal::LoginNeeded)
            }
            _ => Ok(()),
        }
    }
}

/// Whether `path` asks for an HTML page (which is where a login is due).
pub fn is_page(path: &str) -> bool {
    path == "/" || path.ends_with(".html")
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|mime| mime.trim().eq_ignore_ascii_case("application/json"))
}

/// `name[:port]` or `[v6][:port]`; `None` when malformed.
fn split_host_port(host: &str) -> Option<(&str, Option<u16>)> {
    if host.is_empty() {
        return None;
    }
    let (name, rest) = if host.starts_with('[') {
        let end = host.find(']')? + 1;
        (&host[..end], &host[end..])
    } else {
        match host.rfind(':') {
            Some(colon) => (&host[..colon], &host[colon..]),
            None => (host, ""),
        }
    };
    let port = match rest.strip_prefix(':') {
        Some(digits) => Some(digits.parse().ok()?),
        None if rest.is_empty() => None,
        None => return None,
    };
    Some((name, port))
}

fn machine_host_name() -> Option<String> {
    let mut buffer = [0u8; 256];
    // SAFETY: gethostname writes at most `buffer.len()` bytes into the buffer.
    let done = unsafe { libc::gethostname(buffer.as_mut_ptr().cast(), buffer.len()) };
    if done != 0 {
        return None;
    }
    let end = buffer.iter().position(|&b| b == 0)?;
    let name = std::str::from_utf8(&buffer[..end]).ok()?.to_ascii_lowercase();
    (!name.is_empty()).then_some(name)
}

/// 32 random bytes (rand's thread generator: a CSPRNG seeded by the OS) in hex.
fn random_secret() -> String {
    rand::random::<[u8; 32]>().iter().map(|b| format!("{b:02x}")).collect()
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    bool::from(subtle::ConstantTimeEq::ct_eq(a, b))
}

/// The login page shown before the UI when an API key is set.
pub fn login_page(error: Option<&str>) -> Html<String> {
    let notice = error.map(|e| format!("<p class=\"error\">{e}</p>")).unwrap_or_default();
    Html(format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Cake: sign in</title>\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <style>body{{font-family:system-ui,sans-serif;max-width:26rem;margin:15vh auto;padding:0 1rem}}\
         input,button{{font:inherit;padding:.5rem;width:100%;box-sizing:border-box;margin-top:.5rem}}\
         .error{{color:#b00020}}</style></head><body><h1>Cake</h1>\
         <p>This Cake is shared on the network. Enter its API key to continue.</p>{notice}\
         <form method=\"post\" action=\"/login\"><label>API key<input type=\"password\" name=\"api_key\" \
         autocomplete=\"current-password\" required autofocus></label><button type=\"submit\">Sign in</button></form>\
         </body></html>"
    ))
}

/// Headers every response carries: no framing, no sniffing, no referrer,
/// and a content security policy that lets a page run only Cake's own script.
pub fn add_security_headers(headers: &mut HeaderMap) {
    const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; \
                       img-src 'self' data: blob:; media-src 'self' blob: data:; connect-src 'self'; \
                       object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(bind: &str, key: Option<&str>) -> AccessPolicy {
        AccessPolicy::new(bind.parse().unwrap(), key.map(String::from), &[]).unwrap()
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    #[test]
    fn host_names_are_split_from_their_port() {
        assert_eq!(split_host_port("127.0.0.1:8080"), Some(("127.0.0.1", Some(8080))));
        assert_eq!(split_host_port("[::1]:8080"), Some(("[::1]", Some(8080))));
        assert_eq!(split_host_port("localhost"), Some(("localhost", None)));
        assert_eq!(split_host_port("[::1]x"), None);
        assert_eq!(split_host_port("a:b"), None);
        assert_eq!(split_host_port(""), None);
    }

    #[test]
    fn a_loopback_bind_answers_only_loopback_names_on_its_port() {
        let p = policy("127.0.0.1:8080", None);
        for good in ["127.0.0.1:8080", "localhost:8080", "LOCALHOST:8080", "[::1]:8080"] {
            assert!(p.is_own_host(good), "{good}");
        }
        for bad in ["evil.example:8080", "127.0.0.1:8081", "192.168.1.5:8080", "127.0.0.1", ""] {
            assert!(!p.is_own_host(bad), "{bad}");
        }
    }

    #[test]
    fn a_lan_bind_needs_a_long_enough_key_and_accepts_ip_literals() {
        assert!(AccessPolicy::new("0.0.0.0:8080".parse().unwrap(), None, &[]).is_err());
        assert!(AccessPolicy::new("0.0.0.0:8080".parse().unwrap(), Some("short".into()), &[]).is_err());
        let p = policy("0.0.0.0:8080", Some("a-key-of-enough-length"));
        assert!(p.is_own_host("192.168.1.5:8080"));
        assert!(p.is_own_host("[fe80::1]:8080"));
        assert!(!p.is_own_host("rebind.evil.example:8080"));
    }

    #[test]
    fn app_commands_need_json_the_session_and_no_foreign_origin() {
        let p = policy("127.0.0.1:8080", None);
        let uri: Uri = "/app/list_models".parse().unwrap();
        let cookie = format!("other=1; {}={}", p.cookie_name(), p.session_secret);
        let host = ("host", "127.0.0.1:8080");
        let json = ("content-type", "application/json; charset=utf-8");
        assert_eq!(p.check(&Method::POST, &uri, &headers(&[host, json, ("cookie", &cookie)])), Ok(()));
        assert_eq!(p.check(&Method::POST, &uri, &headers(&[host, json])), Err(Refusal::NoSession));
        assert_eq!(
            p.check(&Method::POST, &uri, &headers(&[host, ("content-type", "text/plain"), ("cookie", &cookie)])),
            Err(Refusal::NotJson)
        );
        let wrong = format!("{}=00", p.cookie_name());
        assert_eq!(p.check(&Method::POST, &uri, &headers(&[host, json, ("cookie", &wrong)])), Err(Refusal::NoSession));
        let foreign = p.check(
            &Method::POST,
            &uri,
            &headers(&[host, json, ("cookie", &cookie), ("origin", "https://evil.example")]),
        );
        assert!(matches!(foreign, Err(Refusal::ForeignOrigin(_))));
        let own = p.check(
            &Method::POST,
            &uri,
            &headers(&[host, json, ("cookie", &cookie), ("origin", "http://127.0.0.1:8080")]),
        );
        assert_eq!(own, Ok(()));
    }

    #[test]
    fn with_an_api_key_the_model_apis_need_the_bearer_key() {
        let p = policy("127.0.0.1:8080", Some("a-key-of-enough-length"));
        let host = ("host", "localhost:8080");
        let ollama: Uri = "/api/tags".parse().unwrap();
        assert_eq!(
            p.check(&Method::GET, &ollama, &headers(&[host])),
            Err(Refusal::NoApiKey(ApiKeySource::CommandLine))
        );
        let key = ("authorization", "Bearer a-key-of-enough-length");
        assert_eq!(p.check(&Method::GET, &ollama, &headers(&[host, key])), Ok(()));
        let uri: Uri = "/v1/models".parse().unwrap();
        assert_eq!(p.check(&Method::GET, &uri, &headers(&[host])), Err(Refusal::NoApiKey(ApiKeySource::CommandLine)));
        assert_eq!(
            p.check(&Method::GET, &uri, &headers(&[host, ("authorization", "Bearer wrong")])),
            Err(Refusal::NoApiKey(ApiKeySource::CommandLine))
        );
        assert_eq!(
            p.check(&Method::GET, &uri, &headers(&[host, ("authorization", "Bearer a-key-of-enough-length")])),
            Ok(())
        );
        assert_eq!(p.check(&Method::GET, &"/".parse().unwrap(), &headers(&[host])), Err(Refusal::LoginNeeded));
        assert_eq!(p.check(&Method::GET, &"/assets/app.js".parse().unwrap(), &headers(&[host])), Ok(()));
    }

    #[test]
    fn a_missing_key_is_looked_for_where_its_server_got_it() {
        let served = policy("127.0.0.1:8080", Some("a-key-of-enough-length"));
        let desktop =
            policy("127.0.0.1:8080", Some("a-key-of-enough-length")).with_key_source(ApiKeySource::DesktopApp);
        let (uri, host): (Uri, _) = ("/v1/models".parse().unwrap(), ("host", "localhost:8080"));
        let refusal = |p: &AccessPolicy| p.check(&Method::GET, &uri, &headers(&[host])).unwrap_err().message();
        assert!(refusal(&served).contains("--api-key or CAKE_API_KEY"), "{}", refusal(&served));
        let in_window = refusal(&desktop);
        assert!(in_window.contains("Cake's window, under Models → Other programs"), "{in_window}");
        assert!(!in_window.contains("--api-key") && !in_window.contains("CAKE_API_KEY"), "{in_window}");
    }
}
