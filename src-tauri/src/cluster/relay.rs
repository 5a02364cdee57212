//! How a forward step passes from one worker straight to the next on its
//! master's route (docs/cluster.md, "Worker to worker"): the sending side
//! keeps a link per next worker ([`Links`]); the receiving worker hands
//! the step to the session that holds the master's next layers through
//! that session's inbox ([`Inboxes`]), which wakes it.

use super::cluster_key::ClusterKey;
use super::protocol::{encode, Request};
use super::remote::{ANSWER_TIMEOUT, CONTACT_DEADLINE};
use super::secure_channel::SecureChannel;
use anyhow::{bail, Context, Result};
use std::collections::HashMap;
use std::io::Write;
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::sync::mpsc::{SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A forward step relayed to a session by the worker before it on its
/// master's route, with its hidden states.
pub struct Relayed {
    pub step: Request,
    pub payload: Vec<u8>,
}

/// Where relayed steps for one session go, and how it is woken for them.
pub struct Inbox {
    pub steps: SyncSender<Relayed>,
    pub wake: UnixStream,
}

/// The sessions of this worker that take relayed steps, by inbox number
/// (random, so a peer cannot guess another master's).
#[derive(Clone, Default)]
pub struct Inboxes(Arc<Mutex<HashMap<u64, Inbox>>>);

impl Inboxes {
    /// Registers `inbox`; returns its number, closed when the guard drops.
    pub fn open(&self, inbox: Inbox) -> OpenInbox {
        let mut all = self.0.lock().expect("worker inboxes");
        let mut number = rand::random::<u64>();
        while number == 0 || all.contains_key(&number) {
            number = rand::random();
        }
        all.insert(number, inbox);
        OpenInbox { inboxes: self.clone(), number }
    }

    /// Hands `step` and its hidden states to the session of inbox `number`
    /// and wakes it.
    pub fn deliver(&self, number: u64, step: Request, payload: &[u8]) -> Result<()> {
        if !matches!(step, Request::Forward { .. } | Request::ForwardStreams { .. }) {
            bail!("only forward steps are relayed");
        }
        let all = self.0.lock().expect("worker inboxes");
        let inbox =
            all.get(&number).context("no session here has that inbox (its master left, or the route is stale)")?;
        match inbox.steps.try_send(Relayed { step, payload: payload.to_vec() }) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => bail!("the session of that inbox has too many steps waiting"),
            Err(TrySendError::Disconnected(_)) => bail!("the session of that inbox has ended"),
        }
        // A byte already waiting wakes it as well: a full buffer is no error.
        let _ = (&inbox.wake).write(&[1]);
        Ok(())
    }
}

/// This session's connections to the next workers on its master's routes,
/// by address, opened on first use, with when each was last used.
#[derive(Default)]
pub struct Links(HashMap<String, (SecureChannel<TcpStream>, Instant)>);

/// A link unused for longer is opened afresh rather than trusted: the
/// worker at its end may have dropped it as idle (nothing may be sent
/// twice, so a step is never retried on another link).
const LINK_REUSE: Duration = Duration::from_secs(2);

impl Links {
    /// Sends `relay` (hidden states in `payload`) to the worker at `address`,
    /// without waiting: relays are not answered (the next worker's session
    /// answers the master, and a worker that cannot take one closes the
    /// link). Returns the bytes sent. A link that fails is dropped (the
    /// next step opens a new one).
    pub fn relay(&mut self, address: &str, key: &ClusterKey, relay: &Request, payload: &[u8]) -> Result<u64> {
        if self.0.get(address).is_some_and(|(_, used)| used.elapsed() > LINK_REUSE) {
            self.0.remove(address);
        }
        let (link, used) = match self.0.entry(address.to_string()) {
            std::collections::hash_map::Entry::Occupied(link) => link.into_mut(),
            std::collections::hash_map::Entry::Vacant(slot) => slot.insert((open_link(address, key)?, Instant::now())),
        };
        *used = Instant::now();
        let before = link.bytes_sent;
        if let Err(e) = link.send(&encode(relay, payload)) {
            self.0.remove(address);
            return Err(e.context(format!("the hidden states could not be sent to {address}")));
        }
        Ok(link.bytes_sent - before)
    }
}

/// An authenticated connection to the worker at `address`, within
/// [`CONTACT_DEADLINE`].
fn open_link(address: &str, key: &ClusterKey) -> Result<SecureChannel<TcpStream>> {
    let started = Instant::now();
    let socket = std::net::ToSocketAddrs::to_socket_addrs(address)
        .with_context(|| format!("`{address}` is not a host:port"))?
        .next()
        .with_context(|| format!("`{address}` resolves to nothing"))?;
    let stream = TcpStream::connect_timeout(&socket, CONTACT_DEADLINE)
        .with_context(|| format!("cannot reach the next worker on the route ({address})"))?;
    stream.set_nodelay(true)?;
    let left = CONTACT_DEADLINE.saturating_sub(started.elapsed()).max(Duration::from_millis(100));
    // Only a worker of this cluster is a hop: anything else is refused,
    // and nothing of what it sent goes back to the master (a route is not a
    // way to read other services' banners through a worker).
    let channel = SecureChannel::connect_within(stream, key, &format!("worker {address}"), left).map_err(|e| {
        tracing::debug!("the next hop {address} failed the handshake: {e:#}");
        anyhow::anyhow!("the next hop {address} did not complete the cluster handshake: not a worker of this cluster")
    })?;
    channel.stream().set_read_timeout(Some(ANSWER_TIMEOUT))?;
    channel.stream().set_write_timeout(Some(ANSWER_TIMEOUT))?;
    Ok(channel)
}

/// A session's inbox, open while this lives (so a session that ends in a
/// panic closes it too).
pub struct OpenInbox {
    inboxes: Inboxes,
    pub number: u64,
}

impl Drop for OpenInbox {
    fn drop(&mut self) {
        self.inboxes.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).remove(&self.number);
    }
}
