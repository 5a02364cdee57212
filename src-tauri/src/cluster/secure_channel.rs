//! An authenticated, encrypted connection between two cluster nodes.
//!
//! Before any protocol byte, both sides run SPAKE2, a balanced PAKE, on the
//! cluster key (why SPAKE2: docs/cluster.md):
//!
//! 1. master → worker: `CAKE`, protocol version, SPAKE2 message `A`
//! 2. worker → master: `CAKE`, protocol version, SPAKE2 message `B`, and
//!    `Cw = HMAC(K, "worker-confirm" ‖ v ‖ A ‖ B)`
//! 3. master → worker: `Cm = HMAC(K, "master-confirm" ‖ v ‖ A ‖ B)`
//!
//! `K` is the SPAKE2 session key. Both messages are fresh random group
//! elements, so a recorded handshake gives an eavesdropper nothing to test
//! key guesses against, and a peer without the key learns only that its
//! one guess per connection was wrong. Each confirmation names the role
//! that makes it, so it cannot be reflected. Each direction then gets its
//! own key, `HMAC(K, "key" ‖ direction)`, and every frame is sealed with
//! ChaCha20-Poly1305 under a counter nonce: a tampered, reordered or
//! replayed frame fails to open and the connection closes.
//!
//! A worker answers a hello of another version with its own hello before
//! closing, so both sides can name both versions in their error.
//!
//! Frames are a 4-byte big-endian length then the sealed bytes, capped at
//! [`MAX_FRAME`]; a larger claim is refused before anything is allocated.

use super::admission::{Deadlined, FIRST_MESSAGE_DEADLINE};
use super::cluster_key::ClusterKey;
use anyhow::{bail, Context, Result};
use chacha20poly1305::aead::{Aead, KeyInit};
use chacha20poly1305::{ChaCha20Poly1305, Key, Nonce};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use spake2::{Ed25519Group, Identity, Password, Spake2};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// Version of the cluster protocol this build speaks (2: SPAKE2 handshake;
/// 3: `Load` names the context length, hidden states travel in f16 or f32;
/// 6: hidden states hop from worker to worker along a route; 7: a sequence's
/// cache can start as a copy of another's first positions, or be cut back).
pub const PROTOCOL_VERSION: u16 = 7;
/// How long a whole handshake may take, from the first byte to the last.
pub const HANDSHAKE_DEADLINE: Duration = Duration::from_secs(5);
/// Largest sealed frame accepted (64 MiB).
pub const MAX_FRAME: usize = 64 << 20;
const MAGIC: &[u8; 4] = b"CAKE";
/// A SPAKE2 message on Ed25519: a side byte and a compressed point.
const PAKE_MESSAGE_LEN: usize = 33;
/// The opening message: `CAKE`, the version and a SPAKE2 message.
const HELLO_LEN: usize = 4 + 2 + PAKE_MESSAGE_LEN;
const CONFIRM_LEN: usize = 32;
const MASTER_IDENTITY: &[u8] = b"cake master";
const WORKER_IDENTITY: &[u8] = b"cake worker";

fn mac(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    let mut m = <Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC takes any key length");
    for part in parts {
        m.update(&(part.len() as u32).to_be_bytes());
        m.update(part);
    }
    m.finalize().into_bytes().into()
}

/// Compares MACs in constant time.
fn same_tag(a: &[u8], b: &[u8]) -> bool {
    bool::from(subtle::ConstantTimeEq::ct_eq(a, b))
}

/// One side's SPAKE2 state and the message it sends.
fn start_pake(key: &ClusterKey, i_am_master: bool) -> (Spake2<Ed25519Group>, Vec<u8>) {
    let password = Password::new(key.password());
    let (master, worker) = (Identity::new(MASTER_IDENTITY), Identity::new(WORKER_IDENTITY));
    if i_am_master {
        Spake2::<Ed25519Group>::start_a(&password, &master, &worker)
    } else {
        Spake2::<Ed25519Group>::start_b(&password, &master, &worker)
    }
}

/// A handshake in which the peer's one guess at the key was answered but
/// not proven right: a wrong key, or a peer that left before proving it.
#[derive(Debug)]
pub struct FailedGuess {
    pub peer: String,
    /// It closed the connection instead of proving its key.
    pub left: bool,
}

impl std::fmt::Display for FailedGuess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.left {
            true => write!(f, "{} closed the connection before proving it holds the cluster key", self.peer),
            false => write!(f, "{} does not hold this cluster's key (the handshake did not match)", self.peer),
        }
    }
}

impl std::error::Error for FailedGuess {}

fn finish_pake(state: Spake2<Ed25519Group>, theirs: &[u8], peer: &str) -> Result<Vec<u8>> {
    // The identity and the other points of small order carry nothing of
    // the key: refused, as the protocol expects of a peer.
    let point = curve25519_dalek::edwards::CompressedEdwardsY::from_slice(&theirs[1..])
        .ok()
        .and_then(|compressed| compressed.decompress());
    if point.is_none_or(|p| p.is_small_order()) {
        bail!("{peer} sent an invalid handshake message (not a usable group element)");
    }
    state.finish(theirs).map_err(|e| anyhow::anyhow!("{peer} sent an invalid handshake message ({e:?})"))
}

/// Reads the peer's `CAKE` and version.
fn read_hello_head(stream: &mut impl Read, peer: &str) -> Result<u16> {
    let mut head = [0u8; 6];
    stream.read_exact(&mut head).with_context(|| format!("{peer} closed the connection during the handshake"))?;
    if &head[..4] != MAGIC {
        bail!("{peer} is not a Cake node (it sent {:?} instead of the handshake)", &head[..4]);
    }
    Ok(u16::from_be_bytes([head[4], head[5]]))
}

fn check_version(theirs: u16, peer: &str) -> Result<()> {
    if theirs != PROTOCOL_VERSION {
        bail!("{peer} speaks cluster protocol v{theirs}, this app v{PROTOCOL_VERSION}: update the older one");
    }
    Ok(())
}

fn read_exactly<const N: usize>(stream: &mut impl Read, peer: &str) -> Result<[u8; N]> {
    let mut bytes = [0u8; N];
    stream.read_exact(&mut bytes).with_context(|| format!("{peer} closed the connection during the handshake"))?;
    Ok(bytes)
}

fn hello(pake_message: &[u8]) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    out.extend_from_slice(&PROTOCOL_VERSION.to_be_bytes());
    out.extend_from_slice(pake_message);
    out
}

fn confirmation(session: &[u8], role: &[u8], master_message: &[u8], worker_message: &[u8]) -> [u8; 32] {
    mac(session, &[role, &PROTOCOL_VERSION.to_be_bytes(), master_message, worker_message])
}

/// Session keys of one connection, one per direction.
struct SessionKeys {
    send: ChaCha20Poly1305,
    receive: ChaCha20Poly1305,
}

fn session_keys(session: &[u8], i_am_master: bool) -> SessionKeys {
    let m2w = mac(session, &[b"key", b"master->worker"]);
    let w2m = mac(session, &[b"key", b"worker->master"]);
    let (send, receive) = if i_am_master { (m2w, w2m) } else { (w2m, m2w) };
    SessionKeys {
        send: ChaCha20Poly1305::new(Key::from_slice(&send)),
        receive: ChaCha20Poly1305::new(Key::from_slice(&receive)),
    }
}

/// An authenticated connection that seals every frame.
pub struct SecureChannel<S> {
    stream: S,
    keys: SessionKeys,
    sent: u64,
    received: u64,
    /// Bytes written and read after the handshake (frame headers included).
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// Who is at the other end, for error messages.
    pub peer: String,
}

impl<S> SecureChannel<S> {
    /// The same channel over another stream (the handshake's deadline
    /// wrapper swapped for the socket it wrapped).
    fn with_stream<T>(self, stream: T) -> SecureChannel<T> {
        SecureChannel {
            stream,
            keys: self.keys,
            sent: self.sent,
            received: self.received,
            bytes_sent: self.bytes_sent,
            bytes_received: self.bytes_received,
            peer: self.peer,
        }
    }
}

impl<S: Read + Write> SecureChannel<S> {
    /// The master's side of the handshake.
    pub fn connect(mut stream: S, key: &ClusterKey, peer: &str) -> Result<Self> {
        let (pake, master_message) = start_pake(key, true);
        stream.write_all(&hello(&master_message))?;
        stream.flush()?;
        check_version(read_hello_head(&mut stream, peer)?, peer)?;
        let worker_message = read_exactly::<PAKE_MESSAGE_LEN>(&mut stream, peer)?;
        let worker_confirm = read_exactly::<CONFIRM_LEN>(&mut stream, peer)?;
        let session = finish_pake(pake, &worker_message, peer)?;
        let expected = confirmation(&session, b"worker-confirm", &master_message, &worker_message);
        if !same_tag(&worker_confirm, &expected) {
            bail!("{peer} does not hold this cluster's key (the handshake did not match)");
        }
        stream.write_all(&confirmation(&session, b"master-confirm", &master_message, &worker_message))?;
        stream.flush()?;
        Ok(Self::established(stream, &session, true, peer))
    }

    /// The worker's side of the handshake.
    pub fn accept(mut stream: S, key: &ClusterKey, peer: &str) -> Result<Self> {
        let version = read_hello_head(&mut stream, peer)?;
        let (pake, worker_message) = start_pake(key, false);
        // Answer with our version even on a mismatch, so the master can say which side is old.
        stream.write_all(&hello(&worker_message))?;
        stream.flush()?;
        check_version(version, peer)?;
        let master_message = read_exactly::<PAKE_MESSAGE_LEN>(&mut stream, peer)?;
        let session = finish_pake(pake, &master_message, peer)?;
        stream.write_all(&confirmation(&session, b"worker-confirm", &master_message, &worker_message))?;
        stream.flush()?;
        // From here the peer can tell whether its guess was right.
        let failed = |left| FailedGuess { peer: peer.to_string(), left };
        let master_confirm: [u8; CONFIRM_LEN] = read_exactly(&mut stream, peer).map_err(|_| failed(true))?;
        let expected = confirmation(&session, b"master-confirm", &master_message, &worker_message);
        if !same_tag(&master_confirm, &expected) {
            return Err(failed(false).into());
        }
        Ok(Self::established(stream, &session, false, peer))
    }

    fn established(stream: S, session: &[u8], i_am_master: bool, peer: &str) -> Self {
        Self {
            stream,
            keys: session_keys(session, i_am_master),
            sent: 0,
            received: 0,
            bytes_sent: 0,
            bytes_received: 0,
            peer: peer.to_string(),
        }
    }

    fn nonce(counter: u64) -> Nonce {
        let mut n = [0u8; 12];
        n[4..].copy_from_slice(&counter.to_be_bytes());
        *Nonce::from_slice(&n)
    }

    /// Seals and sends one frame.
    pub fn send(&mut self, plaintext: &[u8]) -> Result<()> {
        let sealed = self
            .keys
            .send
            .encrypt(&Self::nonce(self.sent), plaintext)
            .map_err(|_| anyhow::anyhow!("cannot seal a frame for {}", self.peer))?;
        if sealed.len() > MAX_FRAME {
            bail!("a frame of {} bytes is larger than the {MAX_FRAME}-byte limit", sealed.len());
        }
        self.sent = self.sent.checked_add(1).context("frame counter exhausted")?;
        self.stream.write_all(&(sealed.len() as u32).to_be_bytes())?;
        self.stream.write_all(&sealed)?;
        self.stream.flush()?;
        self.bytes_sent += 4 + sealed.len() as u64;
        Ok(())
    }

    /// Receives and opens one frame; any tampering is an error.
    pub fn receive(&mut self) -> Result<Vec<u8>> {
        let mut len = [0u8; 4];
        self.stream.read_exact(&mut len).with_context(|| format!("the connection to {} closed", self.peer))?;
        let len = u32::from_be_bytes(len) as usize;
        if len > MAX_FRAME {
            bail!("{} sent a frame claiming {len} bytes, over the {MAX_FRAME}-byte limit", self.peer);
        }
        let mut sealed = vec![0u8; len];
        self.stream.read_exact(&mut sealed).with_context(|| format!("{} sent a truncated frame", self.peer))?;
        let plaintext = self.keys.receive.decrypt(&Self::nonce(self.received), sealed.as_slice()).map_err(|_| {
            anyhow::anyhow!("a frame from {} failed authentication (tampered or out of order)", self.peer)
        })?;
        self.received = self.received.checked_add(1).context("frame counter exhausted")?;
        self.bytes_received += 4 + len as u64;
        Ok(plaintext)
    }

    /// The underlying stream (to set timeouts or shut it down).
    pub fn stream(&self) -> &S {
        &self.stream
    }
}

impl SecureChannel<TcpStream> {
    /// [`Self::connect`] with the whole handshake bounded by `allowance`.
    pub fn connect_within(mut stream: TcpStream, key: &ClusterKey, peer: &str, allowance: Duration) -> Result<Self> {
        let channel = SecureChannel::connect(Deadlined::new(&mut stream, allowance), key, peer)?.with_stream(());
        Ok(channel.with_stream(stream))
    }

    /// [`Self::accept`] with the whole handshake bounded by `allowance`, and
    /// its opening message by [`FIRST_MESSAGE_DEADLINE`]: a peer that
    /// stalls or drips its bytes is dropped when it runs out.
    pub fn accept_within(mut stream: TcpStream, key: &ClusterKey, peer: &str, allowance: Duration) -> Result<Self> {
        let deadlined = Deadlined::new(&mut stream, allowance).first_bytes_within(HELLO_LEN, FIRST_MESSAGE_DEADLINE);
        let channel = SecureChannel::accept(deadlined, key, peer)?.with_stream(());
        Ok(channel.with_stream(stream))
    }
}
