//! An authenticated, encrypted connection between two cluster nodes.
//!
//! Before any protocol byte, both sides prove they hold the cluster key:
//!
//! 1. master → worker: `CAKE`, protocol version, master nonce `Nm`
//! 2. worker → master: `CAKE`, protocol version, worker nonce `Nw`, and
//!    `Pw = HMAC(K, "worker-proof" ‖ v ‖ Nm ‖ Nw)`
//! 3. master → worker: `Pm = HMAC(K, "master-proof" ‖ v ‖ Nm ‖ Nw ‖ Pw)`
//!
//! `K` is derived from the person's cluster key. Each proof names the role
//! that makes it and covers both fresh nonces (and the master's also the
//! worker's proof), so a peer without the key cannot reflect a worker's
//! challenge back at it or replay an old handshake. Each direction then gets
//! its own session key, `HMAC(K, "key" ‖ direction ‖ Nm ‖ Nw)`, and every
//! frame is sealed with ChaCha20-Poly1305 under a counter nonce: a tampered,
//! reordered or replayed frame fails to open and the connection closes.
//!
//! Frames are a 4-byte big-endian length then the sealed bytes, capped at
//! [`MAX_FRAME`]; a larger claim is refused before anything is allocated.

use super::admission::Deadlined;
use anyhow::{bail, Context, Result};
use chacha20poly1305::aead::{Aead, KeyInit};
use chacha20poly1305::{ChaCha20Poly1305, Key, Nonce};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// Version of the cluster protocol this build speaks.
pub const PROTOCOL_VERSION: u16 = 1;
/// How long a whole handshake may take, from the first byte to the last.
pub const HANDSHAKE_DEADLINE: Duration = Duration::from_secs(5);
/// Largest sealed frame accepted (64 MiB).
pub const MAX_FRAME: usize = 64 << 20;
const MAGIC: &[u8; 4] = b"CAKE";
const NONCE_LEN: usize = 32;
const PROOF_LEN: usize = 32;

type HmacSha256 = Hmac<Sha256>;

/// The secret every node of one cluster shares, derived from the key a person typed.
#[derive(Clone)]
pub struct ClusterKey([u8; 32]);

impl ClusterKey {
    /// Derives the key; the text itself is not kept.
    pub fn from_passphrase(passphrase: &str) -> Result<Self> {
        if passphrase.len() < 8 {
            bail!("the cluster key must be at least 8 characters");
        }
        Ok(Self(mac(b"cake cluster key v1", &[passphrase.as_bytes()])))
    }

    /// A short public fingerprint for mDNS records: lets nodes skip clusters
    /// that are not theirs without revealing the key.
    pub fn fingerprint(&self) -> String {
        let digest = mac(&self.0, &[b"fingerprint"]);
        digest[..6].iter().map(|b| format!("{b:02x}")).collect()
    }

    fn tag(&self, parts: &[&[u8]]) -> [u8; 32] {
        mac(&self.0, parts)
    }
}

impl std::fmt::Debug for ClusterKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ClusterKey({})", self.fingerprint())
    }
}

fn mac(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    let mut m = <HmacSha256 as Mac>::new_from_slice(key).expect("HMAC takes any key length");
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

fn random_nonce() -> [u8; NONCE_LEN] {
    rand::random()
}

fn read_hello(stream: &mut impl Read, peer: &str) -> Result<(u16, [u8; NONCE_LEN])> {
    let mut head = [0u8; 6];
    stream.read_exact(&mut head).with_context(|| format!("{peer} closed the connection during the handshake"))?;
    if &head[..4] != MAGIC {
        bail!("{peer} is not a Cake node (it sent {:?} instead of the handshake)", &head[..4]);
    }
    let version = u16::from_be_bytes([head[4], head[5]]);
    let mut nonce = [0u8; NONCE_LEN];
    stream.read_exact(&mut nonce).with_context(|| format!("{peer} sent a truncated handshake"))?;
    Ok((version, nonce))
}

fn check_version(theirs: u16, peer: &str) -> Result<()> {
    if theirs != PROTOCOL_VERSION {
        bail!("{peer} speaks cluster protocol v{theirs}, this app v{PROTOCOL_VERSION}: update the older one");
    }
    Ok(())
}

fn hello(nonce: &[u8; NONCE_LEN]) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    out.extend_from_slice(&PROTOCOL_VERSION.to_be_bytes());
    out.extend_from_slice(nonce);
    out
}

/// Session keys of one connection, one per direction.
struct SessionKeys {
    send: ChaCha20Poly1305,
    receive: ChaCha20Poly1305,
}

fn session_keys(key: &ClusterKey, master_nonce: &[u8], worker_nonce: &[u8], i_am_master: bool) -> SessionKeys {
    let m2w = key.tag(&[b"key", b"master->worker", master_nonce, worker_nonce]);
    let w2m = key.tag(&[b"key", b"worker->master", master_nonce, worker_nonce]);
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
        let master_nonce = random_nonce();
        stream.write_all(&hello(&master_nonce))?;
        stream.flush()?;
        let (version, worker_nonce) = read_hello(&mut stream, peer)?;
        check_version(version, peer)?;
        let mut worker_proof = [0u8; PROOF_LEN];
        stream
            .read_exact(&mut worker_proof)
            .with_context(|| format!("{peer} closed the connection during the handshake"))?;
        let v = PROTOCOL_VERSION.to_be_bytes();
        let expected = key.tag(&[b"worker-proof", &v, &master_nonce, &worker_nonce]);
        if !same_tag(&worker_proof, &expected) {
            bail!("{peer} does not hold this cluster's key (its proof is wrong)");
        }
        let master_proof = key.tag(&[b"master-proof", &v, &master_nonce, &worker_nonce, &worker_proof]);
        stream.write_all(&master_proof)?;
        stream.flush()?;
        Ok(Self {
            stream,
            keys: session_keys(key, &master_nonce, &worker_nonce, true),
            sent: 0,
            received: 0,
            bytes_sent: 0,
            bytes_received: 0,
            peer: peer.to_string(),
        })
    }

    /// The worker's side of the handshake.
    pub fn accept(mut stream: S, key: &ClusterKey, peer: &str) -> Result<Self> {
        let (version, master_nonce) = read_hello(&mut stream, peer)?;
        let worker_nonce = random_nonce();
        // Answer with our version even on a mismatch, so the master can say which side is old.
        stream.write_all(&hello(&worker_nonce))?;
        check_version(version, peer)?;
        let v = PROTOCOL_VERSION.to_be_bytes();
        let worker_proof = key.tag(&[b"worker-proof", &v, &master_nonce, &worker_nonce]);
        stream.write_all(&worker_proof)?;
        stream.flush()?;
        let mut master_proof = [0u8; PROOF_LEN];
        stream
            .read_exact(&mut master_proof)
            .with_context(|| format!("{peer} closed the connection before proving it holds the cluster key"))?;
        let expected = key.tag(&[b"master-proof", &v, &master_nonce, &worker_nonce, &worker_proof]);
        if !same_tag(&master_proof, &expected) {
            bail!("{peer} does not hold this cluster's key (its proof is wrong)");
        }
        Ok(Self {
            stream,
            keys: session_keys(key, &master_nonce, &worker_nonce, false),
            sent: 0,
            received: 0,
            bytes_sent: 0,
            bytes_received: 0,
            peer: peer.to_string(),
        })
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

    /// [`Self::accept`] with the whole handshake bounded by `allowance`: a
    /// peer that stalls or drips its bytes is dropped when it runs out.
    pub fn accept_within(mut stream: TcpStream, key: &ClusterKey, peer: &str, allowance: Duration) -> Result<Self> {
        let channel = SecureChannel::accept(Deadlined::new(&mut stream, allowance), key, peer)?.with_stream(());
        Ok(channel.with_stream(stream))
    }
}
