//! The master's handle on one worker: a secure channel and the requests of
//! [`super::protocol`], one at a time.

use super::protocol::{decode, encode, tensor_from_bytes, tensor_to_bytes, Request, Response, WorkerInfo};
use super::secure_channel::{ClusterKey, SecureChannel};
use super::weight_transfer::{read_chunk, ModelManifest};
use anyhow::{bail, Context, Result};
use candle_core::Tensor;
use std::net::{TcpStream, ToSocketAddrs};
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

/// How long the master waits for any one answer (loading layers included).
/// A worker that dies is noticed at once (its connection closes); this
/// bounds the wait for one that hangs or vanishes from the network.
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(300);

/// A worker stopped answering (it died, or the network between us broke).
#[derive(Debug, Clone, thiserror::Error)]
#[error("lost worker {name} ({address}): {reason}")]
pub struct WorkerLost {
    pub name: String,
    pub address: String,
    pub reason: String,
}

pub struct RemoteWorker {
    pub address: String,
    pub info: WorkerInfo,
    channel: Mutex<SecureChannel<TcpStream>>,
}

impl RemoteWorker {
    /// Connects, authenticates and asks the worker to describe itself.
    pub fn connect(address: &str, key: &ClusterKey) -> Result<Self> {
        let socket = address
            .to_socket_addrs()
            .with_context(|| format!("`{address}` is not a host:port"))?
            .next()
            .with_context(|| format!("`{address}` resolves to nothing"))?;
        let stream = TcpStream::connect_timeout(&socket, Duration::from_secs(10))
            .with_context(|| format!("cannot reach worker {address}"))?;
        stream.set_read_timeout(Some(ANSWER_TIMEOUT))?;
        stream.set_nodelay(true)?;
        let channel = SecureChannel::connect(stream, key, &format!("worker {address}"))?;
        let mut worker = Self {
            address: address.to_string(),
            info: WorkerInfo {
                name: address.to_string(),
                os: String::new(),
                cpu: String::new(),
                devices: Vec::new(),
                memory_bytes: 0,
                bytes_per_second: 0.0,
            },
            channel: Mutex::new(channel),
        };
        match worker.ask(&Request::Info, &[])? {
            (Response::Info(info), _) => worker.info = info,
            (other, _) => bail!("worker {address} answered {other:?} to Info"),
        }
        Ok(worker)
    }

    /// Sends one request and waits for its answer; a worker's error is an
    /// error here, and a broken connection is a [`WorkerLost`].
    fn ask(&self, request: &Request, payload: &[u8]) -> Result<(Response, Vec<u8>)> {
        let mut channel = self.channel.lock().expect("worker channel");
        let frame = channel
            .send(&encode(request, payload))
            .and_then(|()| channel.receive())
            .map_err(|e| WorkerLost {
                name: self.info.name.clone(),
                address: self.address.clone(),
                reason: format!("{e:#}"),
            })?;
        let (response, payload): (Response, &[u8]) = decode(&frame)?;
        if let Response::Error { message } = response {
            bail!("worker {} ({}): {message}", self.info.name, self.address);
        }
        Ok((response, payload.to_vec()))
    }

    /// Has the worker load layers `start..end` of the model at `model`,
    /// first sending it whatever bytes of them it lacks. Returns the weight
    /// bytes sent.
    pub fn load(&self, model: &Path, manifest: &ModelManifest, start: usize, end: usize, dtype: Option<&str>) -> Result<u64> {
        let request = Request::Load {
            manifest: manifest.clone(),
            start,
            end,
            dtype: dtype.map(str::to_string),
        };
        let mut sent = 0u64;
        // One round normally; a second if a worker lost a chunk (say, its disk filled).
        for _round in 0..3 {
            match self.ask(&request, &[])? {
                (Response::Loaded { .. }, _) => return Ok(sent),
                (Response::NeedChunks { chunks }, _) => {
                    let total: u64 = chunks.iter().map(|c| c.len).sum();
                    let mut done = 0u64;
                    let mut last_report = std::time::Instant::now();
                    for chunk in chunks {
                        let (sha256, packed) = read_chunk(model, manifest, chunk)?;
                        let message = Request::Chunk {
                            manifest_key: manifest.key.clone(),
                            chunk,
                            sha256,
                        };
                        self.ask(&message, &packed)?;
                        done += chunk.len;
                        sent += chunk.len;
                        if done == total || last_report.elapsed().as_millis() >= 500 {
                            last_report = std::time::Instant::now();
                            eprintln!(
                                "sending weights to {}: {:.1} / {:.1} MB",
                                self.info.name,
                                done as f64 / 1e6,
                                total as f64 / 1e6
                            );
                        }
                    }
                }
                (other, _) => bail!("worker {} answered {other:?} to Load", self.address),
            }
        }
        bail!("worker {} still lacks weights after they were sent three times", self.info.name)
    }

    /// Runs the worker's layers on `hidden` within sequence `sequence`.
    pub fn forward(&self, sequence: u64, hidden: &Tensor) -> Result<Tensor> {
        let (shape, bytes) = tensor_to_bytes(hidden)?;
        match self.ask(&Request::Forward { sequence, shape }, &bytes)? {
            (Response::Hidden { shape }, payload) => {
                tensor_from_bytes(&shape, &payload, hidden.device())?.to_dtype(hidden.dtype()).map_err(Into::into)
            }
            (other, _) => bail!("worker {} answered {other:?} to Forward", self.address),
        }
    }

    /// Bytes sent to and received from the worker since connecting.
    pub fn traffic(&self) -> (u64, u64) {
        let channel = self.channel.lock().expect("worker channel");
        (channel.bytes_sent, channel.bytes_received)
    }

    /// Frees the worker's cache of `sequence`.
    pub fn forget(&self, sequence: u64) -> Result<()> {
        self.ask(&Request::Forget { sequence }, &[]).map(|_| ())
    }
}
