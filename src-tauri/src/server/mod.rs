//! `cake serve`: the UI, the app's commands over HTTP, and the
//! OpenAI-compatible API, on one port (loopback unless told otherwise).
//!
//! - `GET /` and assets: the web UI, embedded in the binary at build time.
//! - `POST /app/<command>`: [`App::call`] as JSON, or [`App::stream`] as
//!   Server-Sent Events; closing the connection cancels the stream.
//! - `/v1/…`: see [`openai`]; `/api/…`: Ollama's API, see [`ollama`].
//!
//! Every request first passes the [`access`] policy (host, origin, content
//! type, session, API key). [`background`] runs the same routes inside the
//! desktop app, for other programs, behind [`api_switch`].

pub mod access;
pub mod anthropic;
pub mod api_switch;
pub mod background;
pub mod connections;
pub mod ollama;
pub mod openai;
pub mod openai_completions;
pub mod openai_embeddings;
pub mod openai_responses;
pub mod openai_speech;
pub mod pictures;
pub mod replies;
mod ui_assets;

use crate::app::engine::{CancelFlag, EventSink};
use crate::app::error::ApiError;
use crate::app::events::EngineEvent;
use crate::app::request::CommandRequest;
use crate::app::App;
use crate::guesses::{Attempt, Origin};
use crate::speech::voice_prompt::MAX_PROMPT_SECONDS;
use access::{AccessPolicy, Refusal};
use axum::body::Bytes;
use axum::extract::Request;
use axum::extract::{ConnectInfo, DefaultBodyLimit};
use axum::extract::{Path, State};
use axum::http::header;
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use pictures::PICTURE_BODY_LIMIT;
use serde_json::Value;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio_stream::StreamExt;

/// The HTTP routes over `app`, each behind `policy`.
pub fn router(app: Arc<App>, policy: Arc<AccessPolicy>) -> Router {
    let login = Router::new().route("/login", post(log_in)).with_state(policy.clone());
    Router::new()
        .route("/app/add_voice", post(add_voice).layer(DefaultBodyLimit::max(VOICE_UPLOAD_LIMIT)))
        .route("/app/add_picture", post(add_picture).layer(DefaultBodyLimit::max(PICTURE_BODY_LIMIT)))
        .route("/app/{command}", post(api_command))
        .route("/v1/models", get(openai::list_models))
        .route("/v1/chat/completions", post(openai::chat_completions).layer(DefaultBodyLimit::max(PICTURE_BODY_LIMIT)))
        .route("/v1/completions", post(openai_completions::completions))
        .route("/v1/embeddings", post(openai_embeddings::embeddings))
        .route("/v1/messages", post(anthropic::messages).layer(DefaultBodyLimit::max(PICTURE_BODY_LIMIT)))
        .route("/v1/responses", post(openai_responses::responses))
        .route("/v1/audio/speech", post(openai_speech::speech))
        .route("/api/version", get(ollama::version))
        .route("/api/tags", get(ollama::tags))
        .route("/api/ps", get(ollama::running))
        .route("/api/show", post(ollama::show))
        .route("/api/chat", post(ollama::chat).layer(DefaultBodyLimit::max(PICTURE_BODY_LIMIT)))
        .route("/api/generate", post(ollama::generate).layer(DefaultBodyLimit::max(PICTURE_BODY_LIMIT)))
        .route("/api/embed", post(ollama::embed))
        .route("/api/embeddings", post(ollama::embeddings))
        .route("/api/{*rest}", axum::routing::any(ollama::not_served))
        .fallback(get(ui_assets::serve_asset))
        .with_state(app)
        .merge(login)
        .layer(axum::middleware::from_fn_with_state(policy, guard))
}

/// What `cake serve` listens on and who it answers.
pub struct ServeOptions {
    pub host: String,
    pub port: u16,
    /// Required unless the bind is loopback.
    pub api_key: Option<String>,
    /// Host names accepted besides the machine's own.
    pub allowed_hosts: Vec<String>,
}

/// Serves until the process is stopped; prints the address it listens on.
pub async fn serve(app: Arc<App>, options: ServeOptions) -> anyhow::Result<()> {
    let (host, port) = (&options.host, options.port);
    let listener = tokio::net::TcpListener::bind((host.as_str(), port))
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {host}:{port}: {e}"))?;
    let address = listener.local_addr()?;
    let policy = Arc::new(AccessPolicy::new(address, options.api_key, &options.allowed_hosts)?);
    println!("Cake is serving on http://{address}/");
    connections::serve(listener, router(app, policy), connections::Limits::default(), std::future::pending()).await;
    Ok(())
}

/// Applies the access policy; hands the UI's page its session cookie. A
/// request that sends an API key is checked in its client's turn (see
/// [`access`] and [`in_turn`]).
async fn guard(State(policy): State<Arc<AccessPolicy>>, request: Request, next: Next) -> Response {
    let path = request.uri().path().to_string();
    // Only the key itself decides a guess: a request refused for another
    // reason (a foreign Host, say) must not clear the client's failures.
    if policy.is_key_attempt(request.headers()) {
        let right = policy.has_bearer_key(request.headers());
        if let Err(refusal) = in_turn(&policy, client_of(&request), || right).await {
            return refused(refusal);
        }
    }
    if let Err(refusal) = policy.check(request.method(), request.uri(), request.headers()) {
        return refused(refusal);
    }
    let mut response = next.run(request).await;
    if access::is_page(&path) && response.status().is_success() && !policy.needs_login() {
        response.headers_mut().append(header::SET_COOKIE, policy.session_cookie());
    }
    access::add_security_headers(response.headers_mut());
    response
}

/// Where a request came from, as the guess throttle counts it.
fn client_of<B>(request: &axum::http::Request<B>) -> Option<Origin> {
    request.extensions().get::<ConnectInfo<SocketAddr>>().map(|info| Origin::of(info.0.ip()))
}

/// Runs `check`, an attempt at the API key (true when right), in the
/// client's turn: at once unless its recent attempts failed, else after
/// waiting for its turn, or refused when that is too far off.
async fn in_turn(
    policy: &AccessPolicy,
    client: Option<Origin>,
    mut check: impl FnMut() -> bool,
) -> Result<bool, Refusal> {
    let Some(origin) = client else { return Ok(check()) };
    let mut reserved = None;
    loop {
        match policy.guesses.attempt(origin, reserved, &mut check) {
            Attempt::Checked(right) => return Ok(right),
            Attempt::ComeBackAt(turn) => {
                reserved = Some(turn);
                tokio::time::sleep_until(turn.into()).await;
            }
            Attempt::Refused => return Err(Refusal::TooManyGuesses),
        }
    }
}

fn refused(refusal: Refusal) -> Response {
    let mut response = refusal.into_response();
    access::add_security_headers(response.headers_mut());
    response
}

#[derive(serde::Deserialize)]
struct LoginForm {
    api_key: String,
}

/// The login form: the right key sets the session cookie and opens the UI.
/// The key is checked in the client's turn, as a bearer key is.
async fn log_in(
    State(policy): State<Arc<AccessPolicy>>,
    client: Option<axum::Extension<ConnectInfo<SocketAddr>>>,
    axum::Form(form): axum::Form<LoginForm>,
) -> Response {
    let client = client.map(|axum::Extension(ConnectInfo(address))| Origin::of(address.ip()));
    match in_turn(&policy, client, || policy.is_api_key(form.api_key.trim())).await {
        Err(refusal) => refused(refusal),
        Ok(false) => {
            (StatusCode::UNAUTHORIZED, access::login_page(Some("That is not this Cake's API key."))).into_response()
        }
        Ok(true) => {
            let mut response = (StatusCode::SEE_OTHER, [(header::LOCATION, "/")]).into_response();
            response.headers_mut().append(header::SET_COOKIE, policy.session_cookie());
            response
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut response = (status, Json(self.body())).into_response();
        if let ApiError::Unavailable(_) = self {
            response.headers_mut().insert(header::RETRY_AFTER, crate::app::error::RETRY_AFTER_S.into());
        }
        response
    }
}

/// Parses a request body as JSON (an empty body is `{}`).
pub fn parse_body(body: &Bytes) -> Result<Value, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Value::Object(Default::default()));
    }
    serde_json::from_slice(body).map_err(|e| ApiError::BadRequest(format!("the request body is not valid JSON: {e}")))
}

/// Refuses a request field Cake cannot honour yet when it asks for
/// something (absent, `null`, `false`, `""` and `[]` ask for nothing):
/// a client must not believe it was honoured.
pub fn refuse_if_used(field: &str, value: &Option<Value>, what: &str) -> Result<(), ApiError> {
    let used = match value {
        None | Some(Value::Null) | Some(Value::Bool(false)) => false,
        Some(Value::Array(items)) => !items.is_empty(),
        Some(Value::String(text)) => !text.is_empty(),
        Some(_) => true,
    };
    if used {
        return Err(ApiError::BadRequest(format!("`{field}` is not supported by Cake yet: {what}")));
    }
    Ok(())
}

/// An event sink feeding an unbounded channel, the channel's receiving
/// end, and the work's cancel flag, raised as soon as that end is dropped
/// (the client went away), so that the engine stops the work before its
/// next event and a stopped reply never shares a step with the one asked
/// next.
pub fn channel_sink() -> (EventSink, EventReceiver, CancelFlag) {
    let (tx, rx) = mpsc::unbounded_channel();
    let cancel = CancelFlag::default();
    (Box::new(move |event| tx.send(event).is_ok()), EventReceiver { rx, cancel: cancel.clone() }, cancel)
}

/// The receiving end of [`channel_sink`]'s events (a stream of them);
/// dropped, it raises the work's cancel flag.
pub struct EventReceiver {
    rx: mpsc::UnboundedReceiver<EngineEvent>,
    cancel: CancelFlag,
}

impl EventReceiver {
    /// The next event; `None` once the work ended and all were read.
    pub async fn recv(&mut self) -> Option<EngineEvent> {
        self.rx.recv().await
    }
}

impl tokio_stream::Stream for EventReceiver {
    type Item = EngineEvent;

    fn poll_next(
        self: std::pin::Pin<&mut Self>,
        context: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<EngineEvent>> {
        self.get_mut().rx.poll_recv(context)
    }
}

impl Drop for EventReceiver {
    fn drop(&mut self) {
        self.cancel.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

async fn api_command(State(app): State<Arc<App>>, Path(command): Path<String>, body: Bytes) -> Response {
    run_command(app, &command, body).await
}

/// `add_voice`, whose body may carry a whole voice prompt (see
/// [`VOICE_UPLOAD_LIMIT`]).
async fn add_voice(State(app): State<Arc<App>>, body: Bytes) -> Response {
    run_command(app, "add_voice", body).await
}

/// `add_picture`, whose body may carry the largest picture allowed.
async fn add_picture(State(app): State<Arc<App>>, body: Bytes) -> Response {
    run_command(app, "add_picture", body).await
}

/// The largest request body `add_voice` takes: the longest voice prompt
/// used ([`MAX_PROMPT_SECONDS`]) as a WAV at 48 kHz, stereo, 32-bit, in
/// base64 (4 bytes for every 3), and room for the rest of the JSON. Other
/// routes keep axum's 2 MB.
pub const VOICE_UPLOAD_LIMIT: usize = (MAX_PROMPT_SECONDS as usize * 48_000 * 2 * 4).div_ceil(3) * 4 + (1 << 20);

async fn run_command(app: Arc<App>, command: &str, body: Bytes) -> Response {
    let request = match parse_body(&body).and_then(|args| CommandRequest::parse(command, args)) {
        Ok(request) => request,
        Err(e) => return e.into_response(),
    };
    if request.command.is_streaming() {
        let (sink, rx, cancel) = channel_sink();
        let started = {
            let app = app.clone();
            tokio::task::spawn_blocking(move || app.stream(request, sink, cancel)).await
        };
        return match started {
            Ok(Ok(())) => {
                let events =
                    rx.map(|event| Ok::<_, Infallible>(Event::default().json_data(event).expect("events serialize")));
                Sse::new(events).keep_alive(KeepAlive::default()).into_response()
            }
            Ok(Err(e)) => e.into_response(),
            Err(e) => ApiError::Server(format!("the request failed: {e}")).into_response(),
        };
    }
    match tokio::task::spawn_blocking(move || app.call(request)).await {
        Ok(Ok(value)) => Json(value).into_response(),
        Ok(Err(e)) => e.into_response(),
        Err(e) => ApiError::Server(format!("the request failed: {e}")).into_response(),
    }
}
