//! The worker side: accept masters, prove the cluster key, then load the
//! layers a master assigns and run them on the hidden states it sends.
//!
//! Each connection is one master's session with its own loaded stage and
//! one KV cache per sequence, so a master that reconnects starts clean.

use super::machine;
use super::protocol::{decode, encode, tensor_from_bytes, tensor_to_bytes, Request, Response, WorkerInfo};
use super::secure_channel::{ClusterKey, SecureChannel};
use super::weight_transfer::{ModelManifest, WeightCache};
use crate::models::decoder::Decoder;
use crate::models::loader::{parse_dtype, Checkpoint, LoadOptions};
use crate::models::nn::kv_cache::KvCache;
use crate::models::sources::selection::TensorSelection;
use anyhow::{Context, Result};
use std::collections::HashMap;
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

/// How long a master may stay silent before the worker drops it.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// What a worker offers.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    pub name: String,
    pub key: ClusterKey,
    /// Where received weights are kept between runs.
    pub cache_dir: std::path::PathBuf,
    /// Bytes of weights it will hold (default: the machine's available memory).
    pub memory_bytes: Option<u64>,
}

impl WorkerConfig {
    fn info(&self) -> WorkerInfo {
        machine::describe(&self.name, self.memory_bytes)
    }
}

/// Serves masters on `listener` until the process ends, one thread each.
pub fn serve(listener: TcpListener, config: WorkerConfig) -> Result<()> {
    let info = config.info();
    eprintln!(
        "worker {} ready on {} ({:.2} GB for weights, ~{:.1} GB/s)",
        info.name,
        listener.local_addr()?,
        info.memory_bytes as f64 / 1e9,
        info.bytes_per_second / 1e9
    );
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        let config = config.clone();
        let info = info.clone();
        std::thread::spawn(move || {
            let peer = stream.peer_addr().map_or_else(|_| "a master".to_string(), |a| format!("master {a}"));
            if let Err(e) = session(stream, &config, info, &peer) {
                eprintln!("worker {}: {peer}: {e:#}", config.name);
            }
        });
    }
    Ok(())
}

/// One master's connection, from handshake to hang-up.
fn session(stream: TcpStream, config: &WorkerConfig, info: WorkerInfo, peer: &str) -> Result<()> {
    stream.set_read_timeout(Some(IDLE_TIMEOUT))?;
    stream.set_nodelay(true)?;
    let mut channel = SecureChannel::accept(stream, &config.key, peer)?;
    eprintln!("worker {}: {peer} authenticated", config.name);
    let mut stage: Option<Decoder> = None;
    let mut caches: HashMap<u64, KvCache> = HashMap::new();
    let weights = WeightCache::new(config.cache_dir.clone());
    let mut manifest: Option<ModelManifest> = None;
    loop {
        let frame = match channel.receive() {
            Ok(frame) => frame,
            Err(e) => {
                eprintln!("worker {}: {peer} left ({e:#})", config.name);
                return Ok(());
            }
        };
        let (request, payload): (Request, &[u8]) = decode(&frame)?;
        let mut state = State {
            info: &info,
            stage: &mut stage,
            caches: &mut caches,
            weights: &weights,
            manifest: &mut manifest,
            name: &config.name,
        };
        let (response, out) = match state.handle(request, payload) {
            Ok(answer) => answer,
            Err(e) => (Response::Error { message: format!("{e:#}") }, Vec::new()),
        };
        channel.send(&encode(&response, &out))?;
    }
}

/// A session's state, borrowed for one request.
struct State<'a> {
    info: &'a WorkerInfo,
    stage: &'a mut Option<Decoder>,
    caches: &'a mut HashMap<u64, KvCache>,
    weights: &'a WeightCache,
    /// The manifest of the last Load, which chunks must belong to.
    manifest: &'a mut Option<ModelManifest>,
    name: &'a str,
}

impl State<'_> {
    fn handle(&mut self, request: Request, payload: &[u8]) -> Result<(Response, Vec<u8>)> {
        Ok(match request {
            Request::Info => (Response::Info(self.info.clone()), Vec::new()),
            Request::Heartbeat => (Response::Done, Vec::new()),
            Request::Load { manifest, start, end, dtype } => {
                manifest.validate()?;
                *self.stage = None;
                self.caches.clear();
                let missing = self.weights.missing(&manifest);
                if !missing.is_empty() {
                    let bytes: u64 = missing.iter().map(|c| c.len).sum();
                    eprintln!(
                        "worker {}: needs {} chunks ({:.1} MB) of weights for layers {start}..{end}",
                        self.name,
                        missing.len(),
                        bytes as f64 / 1e6
                    );
                    *self.manifest = Some(manifest);
                    return Ok((Response::NeedChunks { chunks: missing }, Vec::new()));
                }
                let path = self.weights.model_path(&manifest);
                *self.manifest = Some(manifest);
                let checkpoint = Checkpoint::open(&path)?;
                let options = LoadOptions {
                    dtype: dtype.as_deref().map(parse_dtype).transpose()?,
                    ..Default::default()
                };
                let selection = TensorSelection {
                    layers: start..end,
                    embedding: false,
                    head: false,
                };
                *self.stage = Some(checkpoint.load_decoder(Some(selection), &options)?);
                eprintln!("worker {}: loaded layers {start}..{end}", self.name);
                (Response::Loaded { start, end }, Vec::new())
            }
            Request::Chunk { manifest_key, chunk, sha256 } => {
                let manifest = self
                    .manifest
                    .as_ref()
                    .filter(|m| m.key == manifest_key)
                    .context("a weight chunk arrived for a model this session is not loading")?;
                self.weights.store(manifest, chunk, &sha256, payload)?;
                let left = self.weights.missing(manifest).len();
                let received = manifest.chunks().len() - left;
                if received == 1 || left % 32 == 0 || left < 2 {
                    eprintln!(
                        "worker {}: received chunk of {} at {} ({} bytes), {left} to go",
                        self.name, manifest.files[chunk.file].name, chunk.offset, chunk.len
                    );
                }
                (Response::Done, Vec::new())
            }
            Request::Forward { sequence, shape } => {
                let decoder = self.stage.as_ref().context("no layers loaded: send Load first")?;
                let hidden = tensor_from_bytes(&shape, payload, decoder.device())?;
                let cache = self.caches.entry(sequence).or_insert_with(|| decoder.new_cache());
                let out = decoder.forward_layers(&hidden, cache)?;
                let (shape, bytes) = tensor_to_bytes(&out)?;
                (Response::Hidden { shape }, bytes)
            }
            Request::Forget { sequence } => {
                self.caches.remove(&sequence);
                (Response::Done, Vec::new())
            }
        })
    }
}
