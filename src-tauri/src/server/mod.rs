//! `cake serve`: the UI, the app's commands over HTTP, and the
//! OpenAI-compatible API, on one port (loopback unless told otherwise).
//!
//! - `GET /` and assets: the web UI, embedded in the binary at build time.
//! - `POST /api/<command>`: [`App::call`] as JSON, or [`App::stream`] as
//!   Server-Sent Events; closing the connection cancels the stream.
//! - `/v1/…`: see [`openai`].
//!
//! Every request first passes the [`access`] policy (host, origin, content
//! type, session, API key). [`background`] runs the same routes inside the
//! desktop app, for other programs, behind [`api_switch`].

pub mod access;
pub mod api_switch;
pub mod background;
pub mod connections;
pub mod openai;
pub mod openai_speech;
mod ui_assets;

use crate::app::engine::EventSink;
use crate::app::error::ApiError;
use crate::app::events::EngineEvent;
use crate::app::request::CommandRequest;
use crate::app::App;
use access::AccessPolicy;
use axum::body::Bytes;
use axum::extract::Request;
use axum::extract::{Path, State};
use axum::http::header;
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::Value;
use std::convert::Infallible;
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio_stream::wrappers::UnboundedReceiverStream;
use tokio_stream::StreamExt;

/// The HTTP routes over `app`, each behind `policy`.
pub fn router(app: Arc<App>, policy: Arc<AccessPolicy>) -> Router {
    let login = Router::new().route("/login", post(log_in)).with_state(policy.clone());
    Router::new()
        .route("/api/{command}", post(api_command))
        .route("/v1/models", get(openai::list_models))
        .route("/v1/chat/completions", post(openai::chat_completions))
        .route("/v1/audio/speech", post(openai_speech::speech))
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

/// Applies the access policy; hands the UI's page its session cookie.
async fn guard(State(policy): State<Arc<AccessPolicy>>, request: Request, next: Next) -> Response {
    let path = request.uri().path().to_string();
    if let Err(refusal) = policy.check(request.method(), request.uri(), request.headers()) {
        let mut response = refusal.into_response();
        access::add_security_headers(response.headers_mut());
        return response;
    }
    let mut response = next.run(request).await;
    if access::is_page(&path) && response.status().is_success() && !policy.needs_login() {
        response.headers_mut().append(header::SET_COOKIE, policy.session_cookie());
    }
    access::add_security_headers(response.headers_mut());
    response
}

#[derive(serde::Deserialize)]
struct LoginForm {
    api_key: String,
}

/// The login form: the right key sets the session cookie and opens the UI.
async fn log_in(State(policy): State<Arc<AccessPolicy>>, axum::Form(form): axum::Form<LoginForm>) -> Response {
    if !policy.is_api_key(form.api_key.trim()) {
        // A wrong key costs a second: guessing over the network stays slow.
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        return (StatusCode::UNAUTHORIZED, access::login_page(Some("That is not this Cake's API key.")))
            .into_response();
    }
    let mut response = (StatusCode::SEE_OTHER, [(header::LOCATION, "/")]).into_response();
    response.headers_mut().append(header::SET_COOKIE, policy.session_cookie());
    response
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

/// An event sink feeding an unbounded channel, and the channel's receiving end.
pub fn channel_sink() -> (EventSink, mpsc::UnboundedReceiver<EngineEvent>) {
    let (tx, rx) = mpsc::unbounded_channel();
    (Box::new(move |event| tx.send(event).is_ok()), rx)
}

async fn api_command(State(app): State<Arc<App>>, Path(command): Path<String>, body: Bytes) -> Response {
    let request = match parse_body(&body).and_then(|args| CommandRequest::parse(&command, args)) {
        Ok(request) => request,
        Err(e) => return e.into_response(),
    };
    if request.command.is_streaming() {
        let (sink, rx) = channel_sink();
        let started = {
            let app = app.clone();
            tokio::task::spawn_blocking(move || app.stream(request, sink)).await
        };
        return match started {
            Ok(Ok(())) => {
                let events = UnboundedReceiverStream::new(rx)
                    .map(|event| Ok::<_, Infallible>(Event::default().json_data(event).expect("events serialize")));
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
