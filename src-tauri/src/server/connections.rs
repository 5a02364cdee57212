//! Accepting connections with limits that hold before a request is read.
//!
//! Every check of the [`access`](super::access) policy needs a request's
//! headers, so what a client can do before sending them is bounded here:
//! headers (and the wait for the next request on a kept-alive connection)
//! must arrive within [`Limits::header_timeout`], a request body within
//! [`Limits::body_timeout`], and open connections are capped in all and per
//! client address. A newcomer over a cap takes the place of the oldest idle
//! connection (one with no request in progress) rather than being refused,
//! so holding idle connections open cannot lock anyone out; it is refused
//! only when every connection is answering a request. Running out of file
//! descriptors pauses accepting for a moment, never for good.

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::Router;
use http_body::{Body as HttpBody, Frame, SizeHint};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::collections::BTreeMap;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tower_service::Service;

/// What one server accepts.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Open connections in all.
    pub max_open: usize,
    /// Open connections from one client address.
    pub max_per_address: usize,
    /// Time for a request's headers, counted from when the server starts
    /// waiting for them (so it is also the idle time of a kept-alive connection).
    pub header_timeout: Duration,
    /// Time for a request's whole body, from its headers.
    pub body_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_open: 512,
            max_per_address: 128,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(60),
        }
    }
}

impl Limits {
    /// These limits with `max_open` lowered to what the process's file
    /// descriptor limit leaves room for (files, models and workers need some).
    fn within_descriptor_limit(mut self) -> Self {
        const KEPT_FOR_OTHER_FILES: usize = 128;
        if let Some(descriptors) = raise_descriptor_limit() {
            self.max_open = self.max_open.min(descriptors.saturating_sub(KEPT_FOR_OTHER_FILES).max(16));
            self.max_per_address = self.max_per_address.min(self.max_open);
        }
        self
    }
}

/// Serves `router` on `listener` until `stop` completes.
pub async fn serve(listener: TcpListener, router: Router, limits: Limits, stop: impl Future<Output = ()>) {
    let limits = limits.within_descriptor_limit();
    let table = Arc::new(Mutex::new(Table::default()));
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(limits.header_timeout).keep_alive(true);
    tokio::pin!(stop);
    loop {
        let (stream, peer) = tokio::select! {
            () = &mut stop => return,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of descriptors or a connection reset before it was
                    // taken: wait a moment for connections to close and go on.
                    tracing::warn!(cause = %e, "cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let Some((id, closed)) = admit(&table, peer.ip(), &limits) else {
            tracing::debug!(peer = %peer, "connection refused: every connection is busy");
            continue;
        };
        let connection = Connection { table: table.clone(), id };
        let service = PerConnection { router: router.clone(), connection: connection.clone(), peer, limits };
        let serving = builder.serve_connection(TokioIo::new(stream), service).with_upgrades();
        tokio::spawn(async move {
            tokio::select! {
                result = serving => if let Err(e) = result {
                    tracing::debug!(peer = %peer, cause = %e, "connection ended");
                },
                _ = closed => tracing::debug!(peer = %peer, "idle connection closed for a newcomer"),
            }
            connection.forget();
        });
    }
}

/// Raises the soft limit on open files to the hard one; returns the limit.
fn raise_descriptor_limit() -> Option<usize> {
    #[cfg(unix)]
    {
        let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        // SAFETY: getrlimit/setrlimit only read and write the struct given.
        unsafe {
            if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
                return None;
            }
            if limit.rlim_cur < limit.rlim_max {
                let raised = libc::rlimit { rlim_cur: limit.rlim_max, rlim_max: limit.rlim_max };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                    limit = raised;
                }
            }
        }
        Some(usize::try_from(limit.rlim_cur).unwrap_or(usize::MAX))
    }
    #[cfg(not(unix))]
    None
}

/// The open connections, oldest first.
#[derive(Default)]
struct Table {
    next_id: u64,
    open: BTreeMap<u64, Open>,
}

struct Open {
    address: IpAddr,
    /// Requests being answered (their response bodies not yet sent).
    requests: usize,
    /// Closes the connection when sent to or dropped.
    close: oneshot::Sender<()>,
}

/// Makes room for a connection from `address` and registers it; `None`
/// when no idle connection can give way.
fn admit(table: &Mutex<Table>, address: IpAddr, limits: &Limits) -> Option<(u64, oneshot::Receiver<()>)> {
    let mut table = table.lock().expect("connection table lock");
    let from_address = table.open.values().filter(|open| open.address == address).count();
    if from_address >= limits.max_per_address && !table.close_oldest_idle(Some(address)) {
        return None;
    }
    if table.open.len() >= limits.max_open && !table.close_oldest_idle(None) {
        return None;
    }
    let (close, closed) = oneshot::channel();
    let id = table.next_id;
    table.next_id += 1;
    table.open.insert(id, Open { address, requests: 0, close });
    Some((id, closed))
}

impl Table {
    /// Closes the oldest connection with no request in progress (from
    /// `address` if given); whether there was one.
    fn close_oldest_idle(&mut self, address: Option<IpAddr>) -> bool {
        let oldest = self
            .open
            .iter()
            .find(|(_, open)| open.requests == 0 && address.is_none_or(|a| a == open.address))
            .map(|(id, _)| *id);
        match oldest.and_then(|id| self.open.remove(&id)) {
            Some(open) => {
                let _ = open.close.send(());
                true
            }
            None => false,
        }
    }
}

/// One connection's entry in the table.
#[derive(Clone)]
struct Connection {
    table: Arc<Mutex<Table>>,
    id: u64,
}

impl Connection {
    fn forget(&self) {
        self.table.lock().expect("connection table lock").open.remove(&self.id);
    }

    /// Marks a request in progress until the guard is dropped.
    fn request_started(&self) -> RequestInProgress {
        if let Some(open) = self.table.lock().expect("connection table lock").open.get_mut(&self.id) {
            open.requests += 1;
        }
        RequestInProgress(self.clone())
    }
}

struct RequestInProgress(Connection);

impl Drop for RequestInProgress {
    fn drop(&mut self) {
        if let Some(open) = self.0.table.lock().expect("connection table lock").open.get_mut(&self.0.id) {
            open.requests -= 1;
        }
    }
}

/// The router as one connection's service: tells handlers the peer's
/// address ([`ConnectInfo`]), bounds the request body's time, and keeps
/// the connection busy until the response body is sent.
#[derive(Clone)]
struct PerConnection {
    router: Router,
    connection: Connection,
    peer: SocketAddr,
    limits: Limits,
}

impl hyper::service::Service<hyper::Request<hyper::body::Incoming>> for PerConnection {
    type Response = axum::response::Response;
    type Error = std::convert::Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn call(&self, request: hyper::Request<hyper::body::Incoming>) -> Self::Future {
        let in_progress = self.connection.request_started();
        let deadline = Box::pin(tokio::time::sleep(self.limits.body_timeout));
        let mut request = request.map(|body| Body::new(TimedBody { body, deadline }));
        request.extensions_mut().insert(ConnectInfo(self.peer));
        let answer = self.router.clone().call(request);
        Box::pin(async move {
            let response = answer.await?;
            Ok(response.map(|body| Body::new(BodyInProgress { body, _in_progress: in_progress })))
        })
    }
}

/// A request body that fails once its deadline passes.
struct TimedBody {
    body: hyper::body::Incoming,
    deadline: Pin<Box<tokio::time::Sleep>>,
}

/// The error a request body that took too long ends with.
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive in time")]
struct BodyTooSlow;

impl HttpBody for TimedBody {
    type Data = axum::body::Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        if let Poll::Ready(frame) = Pin::new(&mut self.body).poll_frame(cx) {
            return Poll::Ready(frame.map(|frame| frame.map_err(Into::into)));
        }
        match self.deadline.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Some(Err(BodyTooSlow.into()))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// A response body that keeps its connection marked busy until sent.
struct BodyInProgress {
    body: Body,
    _in_progress: RequestInProgress,
}

impl HttpBody for BodyInProgress {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(max_open: usize, max_per_address: usize) -> Limits {
        Limits { max_open, max_per_address, ..Limits::default() }
    }

    #[test]
    fn a_newcomer_takes_the_place_of_the_oldest_idle_connection() {
        let table = Mutex::new(Table::default());
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let (first, mut first_closed) = admit(&table, a, &limits(2, 2)).unwrap();
        let (_, mut second_closed) = admit(&table, a, &limits(2, 2)).unwrap();
        table.lock().unwrap().open.get_mut(&first).unwrap().requests = 1;
        let (_, _third_closed) = admit(&table, b, &limits(2, 2)).unwrap();
        assert!(first_closed.try_recv().is_err(), "a connection answering a request stays");
        assert!(second_closed.try_recv().is_ok(), "the oldest idle one gave way");
        table.lock().unwrap().open.values_mut().for_each(|open| open.requests = 1);
        assert!(admit(&table, b, &limits(2, 2)).is_none(), "refused only when every connection is busy");
    }

    #[test]
    fn one_address_over_its_share_gives_way_among_its_own() {
        let table = Mutex::new(Table::default());
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let (_, mut from_b) = admit(&table, b, &limits(10, 2)).unwrap();
        let (_, mut oldest_of_a) = admit(&table, a, &limits(10, 2)).unwrap();
        let _kept = admit(&table, a, &limits(10, 2)).unwrap();
        let _newest = admit(&table, a, &limits(10, 2)).unwrap();
        assert!(oldest_of_a.try_recv().is_ok());
        assert!(from_b.try_recv().is_err(), "another address's connection is not touched");
        assert_eq!(table.lock().unwrap().open.len(), 3);
    }
}
