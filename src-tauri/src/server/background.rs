//! `cake serve`'s routes started and stopped inside a running app: what
//! the desktop window's "Serve the OpenAI API" switch runs. Always on
//! loopback and always behind an API key, so no other program on the
//! machine (or page in its browser) uses the app without that key.

use super::access::{AccessPolicy, ApiKeySource};
use super::connections::{self, Limits};
use super::router;
use crate::app::App;
use anyhow::{anyhow, Context, Result};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use tokio::sync::oneshot;

/// A server running on its own thread until stopped or dropped.
pub struct BackgroundServer {
    address: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl BackgroundServer {
    /// Listens on `127.0.0.1:port` (0: a free port), answering only requests
    /// that carry `api_key` (see [`AccessPolicy`]). Fails at once if the
    /// port is taken or the key too short.
    pub fn start(app: Arc<App>, port: u16, api_key: String) -> Result<Self> {
        let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, port))
            .map_err(|e| anyhow!("cannot listen on 127.0.0.1:{port}: {e}"))?;
        listener.set_nonblocking(true)?;
        let address = listener.local_addr()?;
        let policy =
            Arc::new(AccessPolicy::new(address, Some(api_key), &[])?.with_key_source(ApiKeySource::DesktopApp));
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("cake-api-server")
            .enable_all()
            .build()
            .context("cannot start the API server's async runtime")?;
        let (stop, stopped) = oneshot::channel::<()>();
        let thread = std::thread::Builder::new().name("cake-api-server".into()).spawn(move || {
            runtime.block_on(async move {
                let listener = match tokio::net::TcpListener::from_std(listener) {
                    Ok(listener) => listener,
                    Err(e) => return tracing::error!("the OpenAI API server cannot use its socket: {e}"),
                };
                let stopped = async {
                    let _ = stopped.await;
                };
                connections::serve(listener, router(app, policy), Limits::default(), stopped).await;
            });
            // Open streams end now: their clients see the connection close,
            // and a reply being generated stops when its client is gone.
            runtime.shutdown_background();
        })?;
        Ok(Self { address, stop: Some(stop), thread: Some(thread) })
    }

    /// Where it listens.
    pub fn address(&self) -> SocketAddr {
        self.address
    }
}

impl Drop for BackgroundServer {
    /// Stops listening and waits for the server's thread to end.
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::library::catalog::Catalog;
    use crate::text::model::LoadOptions;
    use std::io::{Read, Write};
    use std::net::TcpStream;
    use std::time::Duration;

    const KEY: &str = "a-test-key-of-enough-length";

    /// Status code of `GET path` over a real socket, with `key` as bearer if given.
    pub(crate) fn status_of(address: SocketAddr, path: &str, key: Option<&str>) -> std::io::Result<u16> {
        let mut stream = TcpStream::connect_timeout(&address, Duration::from_secs(5))?;
        stream.set_read_timeout(Some(Duration::from_secs(10)))?;
        let auth = key.map(|k| format!("Authorization: Bearer {k}\r\n")).unwrap_or_default();
        write!(stream, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\n{auth}Connection: close\r\n\r\n", address.port())?;
        let mut response = String::new();
        stream.read_to_string(&mut response)?;
        let code = response.split_whitespace().nth(1).and_then(|c| c.parse().ok());
        code.ok_or_else(|| std::io::Error::other(format!("not an HTTP response: {response:.80}")))
    }

    fn app() -> (tempfile::TempDir, Arc<App>) {
        let dir = tempfile::tempdir().unwrap();
        let catalog = Catalog::new(dir.path().join("data"), dir.path().join("hf"));
        (dir, Arc::new(App::new(catalog, LoadOptions::default())))
    }

    #[test]
    fn answers_only_with_the_key_and_stops_listening_when_dropped() {
        let (_dir, app) = app();
        let server = BackgroundServer::start(app, 0, KEY.into()).unwrap();
        let address = server.address();
        assert!(address.ip().is_loopback());
        assert_eq!(status_of(address, "/v1/models", None).unwrap(), 401);
        assert_eq!(status_of(address, "/v1/models", Some("a-wrong-key-of-enough-length")).unwrap(), 401);
        assert_eq!(status_of(address, "/v1/models", Some(KEY)).unwrap(), 200);
        drop(server);
        assert!(TcpStream::connect_timeout(&address, Duration::from_secs(2)).is_err(), "still listening");
    }

    #[test]
    fn a_taken_port_or_a_short_key_fails_at_once() {
        let (_dir, app) = app();
        let taken = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let port = taken.local_addr().unwrap().port();
        let error = BackgroundServer::start(app.clone(), port, KEY.into()).err().unwrap();
        assert!(error.to_string().contains(&format!("127.0.0.1:{port}")), "{error}");
        let error = BackgroundServer::start(app, 0, "short".into()).err().unwrap();
        assert!(error.to_string().contains("too short"), "{error}");
    }
}
