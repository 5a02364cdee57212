//! The worker side: accept masters, prove the cluster key, then load the
//! layers a master assigns and run them on the hidden states it sends.
//!
//! Each connection is one master's session with its own loaded stage and
//! one KV cache per sequence, so a master that reconnects starts clean.
//! [`start`] runs the worker in the background (the app's "Join as worker"
//! switch, and `cake worker`, which then waits) and reports what each
//! master is doing.

use super::admission::{AcceptBackoff, Admission, Limits, Ticket};
use super::cluster_key::ClusterKey;
use super::machine;
use super::protocol::{
    check_hidden_shape, check_mutual_spans, check_route, check_streams_shape, decode, encode, tensor_from_bytes,
    tensor_to_bytes, Hop, Request, Response, WireFormat, WorkerInfo, MAX_SEQUENCES, MOST_STEPS_IN_FLIGHT,
};
use super::relay::{Inbox, Inboxes, Links, Relayed};
use super::secure_channel::{FailedGuess, SecureChannel, HANDSHAKE_DEADLINE};
use super::weight_transfer::{ChunkRef, ModelManifest, WeightCache};
use crate::models::decoder::Decoder;
use crate::models::gpu_offload::{GpuMode, GpuRequest};
use crate::models::loader::{Checkpoint, ComputeDtype, LoadOptions};
use crate::models::memory_needs::MemoryNeeds;
use crate::models::nn::kv_cache::KvCache;
use crate::models::sources::selection::TensorSelection;
use anyhow::{bail, Context, Result};
use candle_core::{DType, Tensor};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::ops::Range;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a master may stay silent before the worker drops it (masters
/// send heartbeats far more often, see [`super::remote::HEARTBEAT_INTERVAL`]).
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(20);

/// What a worker offers.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    pub name: String,
    pub key: ClusterKey,
    /// Where received weights are kept between runs.
    pub cache_dir: std::path::PathBuf,
    /// Bytes of weights it will hold (default: the machine's available memory).
    pub memory_bytes: Option<u64>,
    /// How long a master may stay silent before it is dropped.
    pub idle_timeout: Duration,
    /// Which of its layers to run on this machine's GPU.
    pub gpu: GpuRequest,
}

impl WorkerConfig {
    /// How it describes itself to masters: with the GPU its layers run on,
    /// if its settings ask for one and there is one.
    fn info(&self) -> WorkerInfo {
        machine::describe(&self.name, self.memory_bytes, self.gpu)
    }
}

/// What one connected master is doing with this worker.
#[derive(Debug, Clone, Default, Serialize)]
pub struct MasterSession {
    pub address: String,
    /// The layers it had this worker load, once loaded.
    pub layers: Option<[usize; 2]>,
    /// Weight bytes received for the current load, and how many it needs.
    pub weights_received: u64,
    pub weights_needed: u64,
    /// Forward passes run for it.
    pub forwards: u64,
}

/// Connected masters by session number, and their sockets (to close them on stop).
#[derive(Default)]
struct Sessions {
    views: BTreeMap<u64, MasterSession>,
    sockets: HashMap<u64, TcpStream>,
}

/// A worker serving in the background; stops when [`RunningWorker::stop`]
/// is called or it is dropped.
pub struct RunningWorker {
    /// Where it listens.
    pub address: SocketAddr,
    stopping: Arc<AtomicBool>,
    sessions: Arc<Mutex<Sessions>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl RunningWorker {
    /// What each connected master is doing.
    pub fn sessions(&self) -> Vec<MasterSession> {
        self.sessions.lock().expect("worker sessions").views.values().cloned().collect()
    }

    /// Stops accepting masters and closes the open connections.
    pub fn stop(mut self) {
        self.shut_down();
    }

    /// Blocks until the worker stops (it does not on its own).
    pub fn wait(mut self) {
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }

    fn shut_down(&mut self) {
        let Some(thread) = self.thread.take() else { return };
        self.stopping.store(true, Ordering::Relaxed);
        // Wake the accept loop with a connection of our own.
        let mut wake = self.address;
        if wake.ip().is_unspecified() {
            wake.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
        }
        let _ = TcpStream::connect_timeout(&wake, Duration::from_secs(1));
        for socket in self.sessions.lock().expect("worker sessions").sockets.values() {
            let _ = socket.shutdown(Shutdown::Both);
        }
        let _ = thread.join();
    }
}

impl Drop for RunningWorker {
    fn drop(&mut self) {
        self.shut_down();
    }
}

/// Serves masters on `listener` in the background, one thread each.
pub fn start(listener: TcpListener, config: WorkerConfig) -> Result<RunningWorker> {
    let info = config.info();
    let address = listener.local_addr()?;
    tracing::info!(
        "worker {} ready on {address} ({:.2} GB for weights, ~{:.1} GB/s)",
        info.name,
        info.memory_bytes as f64 / 1e9,
        info.bytes_per_second / 1e9
    );
    let stopping = Arc::new(AtomicBool::new(false));
    let sessions = Arc::new(Mutex::new(Sessions::default()));
    let inboxes = Inboxes::default();
    let thread = {
        let stopping = stopping.clone();
        let sessions = sessions.clone();
        std::thread::Builder::new().name("cake-worker".into()).spawn(move || {
            let next_id = AtomicU64::new(0);
            let admission = Admission::new(Limits::default());
            let mut backoff = AcceptBackoff::default();
            for stream in listener.incoming() {
                if stopping.load(Ordering::Relaxed) {
                    break;
                }
                let stream = match stream {
                    Ok(stream) => {
                        backoff.succeeded();
                        stream
                    }
                    Err(_) => {
                        backoff.failed();
                        continue;
                    }
                };
                // A slot before a thread (an older candidate's, if need be).
                let Ok(from) = stream.peer_addr() else { continue };
                let ticket = admission.admit(from.ip(), stream.try_clone().ok());
                let id = next_id.fetch_add(1, Ordering::Relaxed);
                let peer = format!("master {from}");
                {
                    let mut all = sessions.lock().expect("worker sessions");
                    if let Ok(socket) = stream.try_clone() {
                        all.sockets.insert(id, socket);
                    }
                }
                let config = config.clone();
                let info = info.clone();
                let views = sessions.clone();
                let inboxes = inboxes.clone();
                let spawned = std::thread::Builder::new().name("cake-worker-session".into()).spawn(move || {
                    let report = SessionReport { id, sessions: &views };
                    // A panic ends this master's session only; the socket
                    // is closed below either way.
                    let served = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        session(stream, ticket, &config, info, &peer, &report, &inboxes)
                    }));
                    match served {
                        Ok(Ok(())) => {}
                        Ok(Err(e)) => tracing::warn!("worker {}: {peer}: {e:#}", config.name),
                        Err(_) => tracing::warn!(
                            "worker {}: {peer}: its session hit an internal error and was closed",
                            config.name
                        ),
                    }
                    let mut all = views.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                    all.views.remove(&id);
                    all.sockets.remove(&id);
                });
                if spawned.is_err() {
                    sessions.lock().expect("worker sessions").sockets.remove(&id);
                    backoff.failed();
                }
            }
        })?
    };
    Ok(RunningWorker { address, stopping, sessions, thread: Some(thread) })
}

/// Loads `layers` of the model at `path` for a context of `context_length`
/// tokens, as a master asked, once they are known to fit in `offered`
/// bytes (see [`check_fits`]).
pub fn load_stage(
    path: &std::path::Path,
    layers: Range<usize>,
    dtype: Option<ComputeDtype>,
    context_length: usize,
    offered: u64,
    gpu: GpuRequest,
) -> Result<Decoder> {
    let checkpoint = Checkpoint::open(path)?;
    let options =
        LoadOptions { dtype: dtype.map(DType::from), context_length: Some(context_length), gpu, ..Default::default() };
    check_fits(&checkpoint, &options, layers.clone(), offered)?;
    let selection = TensorSelection { layers, embedding: false, head: false };
    checkpoint.load_decoder(Some(selection), &options)
}

/// One forward step of a sequence through the loaded layers: hidden states
/// of `shape` (in `format`, in `payload`) checked against the model's width,
/// the cache's room and [`MAX_STEP_POSITIONS`](super::protocol::MAX_STEP_POSITIONS),
/// and the `mutual` spans (positions that see each other both ways) against
/// the step, before anything is built.
pub fn run_step(
    decoder: &Decoder,
    cache: &mut KvCache,
    shape: &[usize],
    format: WireFormat,
    payload: &[u8],
    mutual: &[Range<usize>],
) -> Result<Tensor> {
    check_hidden_shape(shape, decoder.config.hidden_size, cache.position(), decoder.context_length())?;
    check_mutual_spans(mutual, cache.position(), shape[1])?;
    let hidden = tensor_from_bytes(shape, format, payload, decoder.device())?;
    decoder.forward_layers_seeing(&hidden, cache, mutual)
}

/// Refuses layers that, with their caches at the context a master asks
/// for and a step's working memory, need more memory than this worker
/// offers: what a master may make it allocate is bounded by what it chose,
/// not by the context the model's own files claim.
fn check_fits(checkpoint: &Checkpoint, options: &LoadOptions, layers: Range<usize>, offered: u64) -> Result<()> {
    let needs = MemoryNeeds::of(checkpoint, options)?;
    if layers.end > needs.layer_weights.len() {
        bail!("layers {}..{} are beyond the model's {}", layers.start, layers.end, needs.layer_weights.len());
    }
    let needed = needs.machine_bytes(layers.clone(), false);
    if needed > offered {
        bail!(
            "layers {}..{} with a context of {} tokens need {:.3} GB (weights, caches and working memory); \
             this worker offers {:.3} GB",
            layers.start,
            layers.end,
            needs.context_length,
            needed as f64 / 1e9,
            offered as f64 / 1e9
        );
    }
    Ok(())
}

/// Where a session publishes what it is doing.
struct SessionReport<'a> {
    id: u64,
    sessions: &'a Mutex<Sessions>,
}

impl SessionReport<'_> {
    fn update(&self, change: impl FnOnce(&mut MasterSession)) {
        if let Some(view) = self.sessions.lock().expect("worker sessions").views.get_mut(&self.id) {
            change(view);
        }
    }
}

/// One master's connection, from handshake to hang-up (or another
/// worker's, relaying steps along a master's route).
fn session(
    stream: TcpStream,
    mut ticket: Ticket,
    config: &WorkerConfig,
    info: WorkerInfo,
    peer: &str,
    report: &SessionReport,
    inboxes: &Inboxes,
) -> Result<()> {
    stream.set_nodelay(true)?;
    let address = stream.peer_addr().map(|a| a.to_string()).unwrap_or_default();
    // Every event of this connection carries the worker and the master it serves.
    let _span = tracing::info_span!("master_session", worker = %config.name, master = %address).entered();
    ticket.wait_for_turn()?;
    let mut channel = SecureChannel::accept_within(stream, &config.key, peer, HANDSHAKE_DEADLINE).inspect_err(|e| {
        if e.downcast_ref::<FailedGuess>().is_some() {
            ticket.failed_guess();
        }
    })?;
    if !ticket.authenticated() {
        anyhow::bail!("refused: this worker already serves as many masters as it takes");
    }
    // Frames are read once the socket has one coming (see `next_event`);
    // this bounds one that stalls half-way.
    channel.stream().set_read_timeout(Some(config.idle_timeout))?;
    channel.stream().set_write_timeout(Some(config.idle_timeout))?;
    tracing::info!("worker {}: {peer} authenticated", config.name);
    report
        .sessions
        .lock()
        .expect("worker sessions")
        .views
        .insert(report.id, MasterSession { address, ..Default::default() });
    let (wake, woken) = UnixStream::pair()?;
    wake.set_nonblocking(true)?;
    woken.set_nonblocking(true)?;
    let (steps, relayed) = sync_channel(MOST_STEPS_IN_FLIGHT);
    let inbox = inboxes.open(Inbox { steps, wake });
    let inbox_number = inbox.number;
    let mut stage: Option<Decoder> = None;
    let mut caches: HashMap<u64, KvCache> = HashMap::new();
    let weights = WeightCache::new(config.cache_dir.clone());
    let mut manifest: Option<ModelManifest> = None;
    let mut links = Links::default();
    let served = loop {
        let (request, payload) = match next_event(&mut channel, &relayed, &woken, config.idle_timeout) {
            Ok(Some(Event::Frame(frame))) => match decode::<Request>(&frame) {
                Ok((request, payload)) => (request, payload.to_vec()),
                Err(e) => break Err(e),
            },
            Ok(Some(Event::Relayed(Relayed { step, payload }))) => (step, payload),
            Ok(None) => {
                tracing::info!("worker {}: {peer} was silent for {:?}; dropped", config.name, config.idle_timeout);
                break Ok(());
            }
            Err(e) => {
                tracing::info!("worker {}: {peer} left ({e:#})", config.name);
                break Ok(());
            }
        };
        // A relay is handed to its inbox's session, which answers that
        // session's master; one that cannot be ends this connection, so
        // the worker that sent it fails its next relay.
        if let Request::Relay { inbox, step } = request {
            if let Err(e) = inboxes.deliver(inbox, *step, &payload) {
                tracing::warn!("worker {}: a relay from {peer} was refused: {e:#}", config.name);
                break Ok(());
            }
            continue;
        }
        let mut state = State {
            info: &info,
            stage: &mut stage,
            caches: &mut caches,
            weights: &weights,
            manifest: &mut manifest,
            name: &config.name,
            report,
            inbox: inbox_number,
            links: &mut links,
            key: &config.key,
            gpu: config.gpu,
        };
        let (response, out) = match state.handle(request, &payload) {
            Ok(answer) => answer,
            Err(e) => (Response::Error { message: format!("{e:#}") }, Vec::new()),
        };
        if let Err(e) = channel.send(&encode(&response, &out)) {
            break Err(e);
        }
    };
    drop(inbox);
    served
}

/// What a session acts on next.
enum Event {
    /// A frame from its own peer.
    Frame(Vec<u8>),
    Relayed(Relayed),
}

/// The session's next event: a relayed step waiting (first), else
/// whichever comes first of a frame on its connection and a relayed step;
/// `None` when neither comes within `idle`. Waits in `poll` on the socket
/// and the inbox's wake-up socket, so neither needs a thread of its own.
fn next_event(
    channel: &mut SecureChannel<TcpStream>,
    relayed: &Receiver<Relayed>,
    woken: &UnixStream,
    idle: Duration,
) -> Result<Option<Event>> {
    use std::os::fd::AsRawFd;
    let deadline = Instant::now() + idle;
    loop {
        if let Ok(step) = relayed.try_recv() {
            return Ok(Some(Event::Relayed(step)));
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(None);
        }
        let mut watched = [
            libc::pollfd { fd: channel.stream().as_raw_fd(), events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: woken.as_raw_fd(), events: libc::POLLIN, revents: 0 },
        ];
        let millis = left.as_millis().clamp(1, i32::MAX as u128) as libc::c_int;
        // SAFETY: two valid pollfd entries, both file descriptors open for the call.
        let ready = unsafe { libc::poll(watched.as_mut_ptr(), watched.len() as libc::nfds_t, millis) };
        if ready < 0 {
            let error = std::io::Error::last_os_error();
            if error.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(error.into());
        }
        if watched[1].revents != 0 {
            // Drain the wake-up bytes; the step itself is in the queue.
            let mut bytes = [0u8; 64];
            while matches!((&*woken).read(&mut bytes), Ok(n) if n > 0) {}
        }
        if watched[0].revents != 0 {
            // Data, or the connection closing (which `receive` reports).
            return channel.receive().map(|frame| Some(Event::Frame(frame)));
        }
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
    report: &'a SessionReport<'a>,
    /// This session's inbox (told to the master in `Loaded`).
    inbox: u64,
    links: &'a mut Links,
    key: &'a ClusterKey,
    gpu: GpuRequest,
}

impl State<'_> {
    fn handle(&mut self, request: Request, payload: &[u8]) -> Result<(Response, Vec<u8>)> {
        Ok(match request {
            Request::Info => (Response::Info(self.info.clone()), Vec::new()),
            Request::Heartbeat => (Response::Done, Vec::new()),
            Request::Echo => (Response::Done, payload.to_vec()),
            Request::Load { manifest, start, end, dtype, context_length } => {
                (self.load(manifest, start..end, dtype, context_length)?, Vec::new())
            }
            Request::Chunk { manifest_key, chunk, sha256 } => {
                self.store_chunk(&manifest_key, chunk, &sha256, payload)?;
                (Response::Done, Vec::new())
            }
            Request::Forward { sequence, shape, format, route, mutual } => {
                check_route(&route)?;
                let (answer, out) = self.forward(sequence, &shape, format, payload, &mutual)?;
                let step = |shape, route| Request::Forward { sequence, shape, format, route, mutual: mutual.clone() };
                self.pass_on(out, answer, route, step)?
            }
            Request::ForwardStreams { sequences, shape, format, route } => {
                check_route(&route)?;
                let (answer, out) = self.forward_streams(&sequences, &shape, format, payload)?;
                let step =
                    |shape, route| Request::ForwardStreams { sequences: sequences.clone(), shape, format, route };
                self.pass_on(out, answer, route, step)?
            }
            Request::Relay { .. } => bail!("a relay is not a request to answer"),
            Request::Forget { sequence } => {
                self.caches.remove(&sequence);
                (Response::Done, Vec::new())
            }
            Request::CopyPrefix { from, to, positions } => {
                self.copy_prefix(from, to, positions)?;
                (Response::Done, Vec::new())
            }
            Request::Truncate { sequence, positions } => {
                let cache = self.caches.get_mut(&sequence).with_context(|| format!("no sequence {sequence} here"))?;
                if !cache.truncate(positions) {
                    bail!(
                        "sequence {sequence} cannot be cut back to {positions} positions (it has seen {})",
                        cache.position()
                    );
                }
                (Response::Done, Vec::new())
            }
        })
    }

    /// Loads `layers` of the manifest's model for conversations of up to
    /// `context_length` tokens, or answers which chunks of its weights are
    /// still missing.
    fn load(
        &mut self,
        manifest: ModelManifest,
        layers: Range<usize>,
        dtype: Option<ComputeDtype>,
        context_length: usize,
    ) -> Result<Response> {
        manifest.validate()?;
        *self.stage = None;
        self.caches.clear();
        self.report.update(|v| v.layers = None);
        let (start, end) = (layers.start, layers.end);
        let missing = self.weights.missing(&manifest);
        if !missing.is_empty() {
            let bytes: u64 = missing.iter().map(|c| c.len).sum();
            self.report.update(|v| {
                v.weights_received = 0;
                v.weights_needed = bytes;
            });
            tracing::info!(
                "worker {}: needs {} chunks ({:.1} MB) of weights for layers {start}..{end}",
                self.name,
                missing.len(),
                bytes as f64 / 1e6
            );
            *self.manifest = Some(manifest);
            return Ok(Response::NeedChunks { chunks: missing });
        }
        let path = self.weights.model_path(&manifest);
        *self.manifest = Some(manifest);
        let stage = load_stage(&path, layers, dtype, context_length, self.info.memory_bytes, self.gpu)?;
        if self.gpu.mode != GpuMode::Off {
            tracing::info!("worker {}: {}", self.name, stage.gpu.describe(stage.config.num_hidden_layers()));
        }
        *self.stage = Some(stage);
        tracing::info!("worker {}: loaded layers {start}..{end}", self.name);
        self.report.update(|v| v.layers = Some([start, end]));
        Ok(Response::Loaded { start, end, inbox: self.inbox })
    }

    /// Checks and stores one chunk of the model being loaded.
    fn store_chunk(&mut self, manifest_key: &str, chunk: ChunkRef, sha256: &str, payload: &[u8]) -> Result<()> {
        let manifest = self
            .manifest
            .as_ref()
            .filter(|m| m.key == manifest_key)
            .context("a weight chunk arrived for a model this session is not loading")?;
        self.weights.store(manifest, chunk, sha256, payload)?;
        self.report.update(|v| v.weights_received += chunk.len);
        let left = self.weights.missing(manifest).len();
        let received = manifest.chunks().len() - left;
        if received == 1 || left.is_multiple_of(32) || left < 2 {
            tracing::info!(
                "worker {}: received chunk of {} at {} ({} bytes), {left} to go",
                self.name,
                manifest.files[chunk.file].name,
                chunk.offset,
                chunk.len
            );
        }
        Ok(())
    }

    /// Runs the loaded layers on hidden states, checked before anything is
    /// built, and answers in the `format` they came in (where the values fit).
    fn forward(
        &mut self,
        sequence: u64,
        shape: &[usize],
        format: WireFormat,
        payload: &[u8],
        mutual: &[Range<usize>],
    ) -> Result<(Response, Vec<u8>)> {
        let decoder = self.stage.as_ref().context("no layers loaded: send Load first")?;
        let started = std::time::Instant::now();
        self.check_room_for(&[sequence])?;
        let cache = self.caches.entry(sequence).or_insert_with(|| decoder.new_cache());
        let out = run_step(decoder, cache, shape, format, payload, mutual)?;
        let kv_bytes = cache.allocated_bytes();
        self.answer_hidden(&out, format, started, kv_bytes)
    }

    /// One decode step of several sequences together (see
    /// [`Request::ForwardStreams`]).
    fn forward_streams(
        &mut self,
        sequences: &[u64],
        shape: &[usize],
        format: WireFormat,
        payload: &[u8],
    ) -> Result<(Response, Vec<u8>)> {
        let decoder = self.stage.as_ref().context("no layers loaded: send Load first")?;
        let started = std::time::Instant::now();
        let cached = |sequence| self.caches.get(&sequence).map_or(0, KvCache::position);
        check_streams_shape(sequences, shape, decoder.config.hidden_size, cached, decoder.context_length())?;
        self.check_room_for(sequences)?;
        let hidden = tensor_from_bytes(shape, format, payload, decoder.device())?;
        // The sequences' caches in the rows' order, put back whatever happens.
        let mut caches: Vec<KvCache> =
            sequences.iter().map(|s| self.caches.remove(s).unwrap_or_else(|| decoder.new_cache())).collect();
        let out = decoder.forward_layers_streams(&hidden, &mut caches.iter_mut().collect::<Vec<_>>());
        let kv_bytes = caches.iter().map(KvCache::allocated_bytes).sum();
        self.caches.extend(sequences.iter().copied().zip(caches));
        self.answer_hidden(&out?, format, started, kv_bytes)
    }

    /// The `Hidden` answer for `out`, computed since `started`, with the
    /// bytes the sequences' KV caches hold.
    fn answer_hidden(
        &self,
        out: &Tensor,
        format: WireFormat,
        started: std::time::Instant,
        kv_bytes: u64,
    ) -> Result<(Response, Vec<u8>)> {
        self.report.update(|v| v.forwards += 1);
        let (shape, format, bytes) = tensor_to_bytes(out, format)?;
        let compute_nanos = started.elapsed().as_nanos() as u64;
        Ok((Response::Hidden { shape, format, compute_nanos, kv_bytes }, bytes))
    }

    /// The answer to a forward step: `answer` itself (hidden states `out`
    /// in its payload) at the end of the route, or, with hops left, the
    /// hidden states relayed to the first (as `step(shape, the rest of the
    /// route)`) and `Relayed` as the answer.
    fn pass_on(
        &mut self,
        out: Vec<u8>,
        answer: Response,
        route: Vec<Hop>,
        step: impl FnOnce(Vec<usize>, Vec<Hop>) -> Request,
    ) -> Result<(Response, Vec<u8>)> {
        let Some((next, rest)) = route.split_first() else {
            return Ok((answer, out));
        };
        let Response::Hidden { shape, compute_nanos, kv_bytes, .. } = answer else {
            bail!("a forward step answered {answer:?}");
        };
        let relay = Request::Relay { inbox: next.inbox, step: Box::new(step(shape, rest.to_vec())) };
        Ok(match self.links.relay(&next.address, self.key, &relay, &out) {
            Ok(relayed_bytes) => (Response::Relayed { compute_nanos, kv_bytes, relayed_bytes }, Vec::new()),
            Err(e) => (Response::RelayFailed { next: next.address.clone(), reason: format!("{e:#}") }, Vec::new()),
        })
    }

    /// Starts sequence `to`'s cache as a copy of sequence `from`'s first
    /// `positions` positions, which it must hold (checked before copying).
    fn copy_prefix(&mut self, from: u64, to: u64, positions: usize) -> Result<()> {
        if self.caches.contains_key(&to) {
            bail!("sequence {to} already has a cache here");
        }
        self.check_room_for(&[to])?;
        let source = self.caches.get(&from).with_context(|| format!("no sequence {from} here to copy from"))?;
        let copy = source.copy_prefix(positions)?.with_context(|| {
            format!("sequence {from} cannot give its first {positions} positions (it has seen {})", source.position())
        })?;
        self.caches.insert(to, copy);
        Ok(())
    }

    /// Refuses to start caches beyond [`MAX_SEQUENCES`] for this master.
    fn check_room_for(&self, sequences: &[u64]) -> Result<()> {
        let new = sequences.iter().filter(|s| !self.caches.contains_key(s)).count();
        if self.caches.len() + new > MAX_SEQUENCES {
            bail!("a master may keep at most {MAX_SEQUENCES} sequences here; forget finished ones first");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::remote::RemoteWorker;

    #[test]
    fn heartbeats_keep_an_idle_master_connected_and_silent_ones_are_dropped() {
        let key = ClusterKey::from_passphrase("heartbeat test key").unwrap();
        let cache = tempfile::tempdir().unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let worker = start(
            listener,
            WorkerConfig {
                name: "hb".into(),
                key: key.clone(),
                cache_dir: cache.path().to_path_buf(),
                memory_bytes: Some(1 << 20),
                idle_timeout: Duration::from_secs(5),
                gpu: GpuRequest::default(),
            },
        )
        .unwrap();
        let address = worker.address.to_string();
        let master = RemoteWorker::connect(&address, &key).unwrap();
        // A master that only authenticates and then says nothing.
        let silent = TcpStream::connect(&address).unwrap();
        silent.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
        let mut silent = SecureChannel::connect(silent, &key, "worker").unwrap();
        std::thread::sleep(Duration::from_secs(8));
        master.ping().expect("heartbeats kept the idle connection open");
        assert!(master.lost_reason().is_none());
        assert!(silent.receive().is_err(), "the silent master was dropped");
        assert_eq!(worker.sessions().len(), 1, "{:?}", worker.sessions());
        worker.stop();
        assert!(master.ping().is_err(), "a stopped worker closes its connections");
        assert!(TcpStream::connect(&address).is_err(), "a stopped worker no longer listens");
    }

    /// A master's copy or cut of a sequence the worker does not hold is
    /// refused with the reason, and the connection goes on.
    #[test]
    fn a_copy_or_cut_of_a_sequence_not_held_is_refused_and_the_connection_goes_on() {
        let key = ClusterKey::from_passphrase("copy test key").unwrap();
        let cache = tempfile::tempdir().unwrap();
        let config = WorkerConfig {
            name: "copy".into(),
            key: key.clone(),
            cache_dir: cache.path().to_path_buf(),
            memory_bytes: Some(1 << 20),
            idle_timeout: Duration::from_secs(5),
            gpu: GpuRequest::default(),
        };
        let worker = start(TcpListener::bind("127.0.0.1:0").unwrap(), config).unwrap();
        let master = RemoteWorker::connect(&worker.address.to_string(), &key).unwrap();
        let refused = master.copy_prefix(1, 2, 5).unwrap_err();
        assert!(format!("{refused:#}").contains("no sequence 1 here"), "{refused:#}");
        let refused = master.truncate(3, 1).unwrap_err();
        assert!(format!("{refused:#}").contains("no sequence 3 here"), "{refused:#}");
        master.ping().expect("a refused copy or cut leaves the connection usable");
        assert!(master.lost_reason().is_none());
        worker.stop();
    }
}
