//! The master's handle on one worker: a secure channel and the requests of
//! [`super::protocol`], one at a time, with live counters for the cluster
//! view and a heartbeat that keeps an idle connection alive (and notices a
//! worker that vanished while nobody was asking it anything).

use super::cluster_key::ClusterKey;
use super::prediction::LinkSpeed;
use super::protocol::{
    decode, encode, tensor_from_bytes, tensor_to_bytes, Hop, Request, Response, WireFormat, WorkerInfo,
    MOST_STEPS_IN_FLIGHT,
};
use super::secure_channel::SecureChannel;
use super::weight_transfer::{read_chunk, ModelManifest};
use crate::models::loader::ComputeDtype;
use crate::models::pipeline::{RemoteLayers, RemoteSteps, StageTimings};
use anyhow::{bail, Context, Result};
use candle_core::{DType, Device, Tensor};
use std::collections::VecDeque;
use std::net::{TcpStream, ToSocketAddrs};
use std::ops::Range;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long the master waits for any one answer (loading layers included).
/// A worker that dies is noticed at once (its connection closes); this
/// bounds the wait for one that hangs or vanishes from the network.
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(300);

/// How long a connection may stay idle before the master sends a heartbeat.
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(2);
/// How long reaching a worker may take, from the TCP connection to its
/// description: a silent or slow worker is left out after this.
pub const CONTACT_DEADLINE: Duration = Duration::from_secs(5);

/// A worker stopped answering (it died, or the network between us broke).
#[derive(Debug, Clone, thiserror::Error)]
#[error("lost worker {name} ({address}): {reason}")]
pub struct WorkerLost {
    pub name: String,
    pub address: String,
    pub reason: String,
}

/// Live counters of one worker connection (read by the cluster view while
/// the engine uses the worker).
#[derive(Debug, Default)]
pub struct WorkerStats {
    pub bytes_sent: AtomicU64,
    pub bytes_received: AtomicU64,
    /// Time spent in `forward` round trips, in nanoseconds.
    pub forward_nanos: AtomicU64,
    /// The part of it the worker says it spent in its layers (never more
    /// than the round trip the master measured).
    pub compute_nanos: AtomicU64,
    pub forwards: AtomicU64,
    /// Round trips of one position (decode steps) and their time: what the
    /// master measures of the worker's speed, whatever the worker claims.
    pub single_position_forwards: AtomicU64,
    pub single_position_nanos: AtomicU64,
    /// Weight bytes sent so far for the current load, and how many it needs.
    pub weights_sent: AtomicU64,
    pub weights_to_send: AtomicU64,
    /// The most bytes a sequence's KV cache has held on the worker, as it says.
    pub kv_bytes: AtomicU64,
    /// Bytes of hidden states it sent straight to the next worker of a route.
    pub bytes_relayed: AtomicU64,
    /// Set once the connection failed; the reason is in `lost_reason`.
    pub lost: AtomicBool,
    pub lost_reason: Mutex<Option<String>>,
}

pub struct RemoteWorker {
    pub address: String,
    pub info: WorkerInfo,
    pub stats: Arc<WorkerStats>,
    /// How hidden states are sent to it (and asked back).
    pub wire_format: WireFormat,
    channel: Arc<Mutex<Connection>>,
    /// Tells the heartbeat thread to end when the worker is dropped.
    closed: Arc<AtomicBool>,
    /// Where the worker before it on a route sends this master's hidden
    /// states (from `Loaded`; 0 until loaded).
    inbox: AtomicU64,
    /// The workers after this one that its forward steps reach directly,
    /// worker to worker (see [`RemoteWorker::route_through`]).
    route: Mutex<Vec<Arc<RemoteWorker>>>,
    /// Whether decode steps may be sent before earlier ones are answered
    /// (see [`RemoteWorker::pipeline_steps`]).
    pipelined: AtomicBool,
}

/// The channel and when the master last sent on it (the worker drops a
/// master that stays silent, see [`HEARTBEAT_INTERVAL`]).
struct Connection {
    channel: SecureChannel<TcpStream>,
    last_sent: Instant,
    /// Messages of steps in flight still to come on it (see
    /// [`StepsInFlight`]): nothing else may be asked meanwhile.
    awaited: usize,
}

impl Drop for RemoteWorker {
    fn drop(&mut self) {
        self.closed.store(true, Ordering::Relaxed);
    }
}

/// Most memory a worker may claim (16 TiB): more is taken as this much.
const MAX_CLAIMED_MEMORY: u64 = 1 << 44;
/// Fastest a worker may claim to read weights (2 TB/s): more is taken as this.
const MAX_CLAIMED_SPEED: f64 = 2e12;

/// A worker that does not take connections (as opposed to one that answers
/// wrongly); told apart by downcasting.
#[derive(Debug, thiserror::Error)]
#[error("cannot reach worker {address}")]
pub struct Unreachable {
    pub address: String,
}

/// Bytes echoed to measure a link's bandwidth.
const ECHO_BYTES: usize = 1 << 20;

/// Decode steps a worker must have run before its measured speed counts.
pub const MIN_MEASURED_STEPS: u64 = 4;

/// A worker's description with its claims bounded: memory and speed it
/// reports are clamped to what a machine can have, and a speed that is not
/// a positive number is refused.
pub(crate) fn plausible(mut info: WorkerInfo, address: &str) -> Result<WorkerInfo> {
    if !(info.bytes_per_second.is_finite() && info.bytes_per_second > 0.0) {
        bail!("worker {address} reports an unusable speed ({})", info.bytes_per_second);
    }
    info.bytes_per_second = info.bytes_per_second.min(MAX_CLAIMED_SPEED);
    // Not reported (an older worker) or unusable: a prompt reads at least as fast as a decode step.
    if !(info.prompt_bytes_per_second.is_finite() && info.prompt_bytes_per_second >= info.bytes_per_second) {
        info.prompt_bytes_per_second = info.bytes_per_second;
    }
    info.prompt_bytes_per_second = info.prompt_bytes_per_second.min(MAX_CLAIMED_SPEED * 64.0);
    // A layer costs between nothing and a tenth of a second beyond its weights.
    info.layer_overhead_seconds =
        if info.layer_overhead_seconds.is_finite() { info.layer_overhead_seconds.clamp(0.0, 0.1) } else { 0.0 };
    info.memory_bytes = info.memory_bytes.min(MAX_CLAIMED_MEMORY);
    if info.kernel_boot.len() > 64 {
        info.kernel_boot.clear();
    }
    if info.instance.len() > 64 {
        info.instance.clear();
    }
    Ok(info)
}

impl RemoteWorker {
    /// Connects, authenticates and asks the worker to describe itself, all
    /// within [`CONTACT_DEADLINE`].
    pub fn connect(address: &str, key: &ClusterKey) -> Result<Self> {
        let _span = tracing::info_span!("worker_contact", worker = %address).entered();
        let deadline = Instant::now() + CONTACT_DEADLINE;
        let left = || {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                bail!("worker {address} did not answer within {} s", CONTACT_DEADLINE.as_secs());
            }
            Ok(left)
        };
        let socket = address
            .to_socket_addrs()
            .with_context(|| format!("`{address}` is not a host:port"))?
            .next()
            .with_context(|| format!("`{address}` resolves to nothing"))?;
        let stream = TcpStream::connect_timeout(&socket, left()?)
            .with_context(|| Unreachable { address: address.to_string() })?;
        stream.set_nodelay(true)?;
        let channel = SecureChannel::connect_within(stream, key, &format!("worker {address}"), left()?)?;
        channel.stream().set_read_timeout(Some(left()?))?;
        let mut worker = Self {
            address: address.to_string(),
            info: WorkerInfo {
                name: address.to_string(),
                os: String::new(),
                cpu: String::new(),
                devices: Vec::new(),
                memory_bytes: 0,
                bytes_per_second: 0.0,
                prompt_bytes_per_second: 0.0,
                layer_overhead_seconds: 0.0,
                kernel_boot: String::new(),
                instance: String::new(),
                gpu: None,
            },
            stats: Arc::default(),
            wire_format: WireFormat::F32,
            channel: Arc::new(Mutex::new(Connection { channel, last_sent: Instant::now(), awaited: 0 })),
            inbox: AtomicU64::new(0),
            route: Mutex::default(),
            pipelined: AtomicBool::new(false),
            closed: Arc::default(),
        };
        match worker.ask(&Request::Info, &[])? {
            (Response::Info(info), _) => worker.info = plausible(info, address)?,
            (other, _) => bail!("worker {address} answered {other:?} to Info"),
        }
        {
            let connection = worker.channel.lock().expect("worker connection");
            connection.channel.stream().set_read_timeout(Some(ANSWER_TIMEOUT))?;
            connection.channel.stream().set_write_timeout(Some(ANSWER_TIMEOUT))?;
        }
        worker.start_heartbeat();
        Ok(worker)
    }

    /// Sends a heartbeat whenever the connection has been idle for
    /// [`HEARTBEAT_INTERVAL`], until the worker is dropped or lost.
    fn start_heartbeat(&self) {
        let channel = self.channel.clone();
        let stats = self.stats.clone();
        let closed = self.closed.clone();
        let name = self.info.name.clone();
        let thread_name = format!("heartbeat-{name}");
        let spawned = std::thread::Builder::new().name(thread_name).spawn(move || {
            while !closed.load(Ordering::Relaxed) && !stats.lost.load(Ordering::Relaxed) {
                std::thread::sleep(HEARTBEAT_INTERVAL / 4);
                // A busy connection needs no heartbeat: skip it if in use.
                let Ok(mut connection) = channel.try_lock() else { continue };
                let busy = connection.awaited > 0 || connection.last_sent.elapsed() < HEARTBEAT_INTERVAL;
                if busy || closed.load(Ordering::Relaxed) {
                    continue;
                }
                let answer = connection.round_trip(&encode(&Request::Heartbeat, &[]), &stats);
                if let Err(e) = answer {
                    mark_lost(&stats, format!("no answer to a heartbeat: {e:#}"));
                    tracing::warn!("worker {name} stopped answering heartbeats: {e:#}");
                }
            }
        });
        if let Err(e) = spawned {
            tracing::warn!("worker {}: no heartbeat thread ({e}); an idle connection may time out", self.info.name);
        }
    }

    /// Checks that the worker answers.
    pub fn ping(&self) -> Result<()> {
        self.ask(&Request::Heartbeat, &[]).map(drop)
    }

    /// Measures the link: the median of 9 empty round trips (what a token's
    /// hop typically waits: on a link with jitter the shortest is well
    /// below it), and the bandwidth of echoing [`ECHO_BYTES`], from the
    /// shortest echo less the shortest empty round trip (well under a
    /// second on any usable link).
    pub fn measure_link(&self) -> Result<LinkSpeed> {
        let timed = |payload: &[u8]| -> Result<f64> {
            let start = Instant::now();
            let (_, echoed) = self.ask(&Request::Echo, payload)?;
            if echoed.len() != payload.len() {
                bail!("worker {} echoed {} bytes of {}", self.address, echoed.len(), payload.len());
            }
            Ok(start.elapsed().as_secs_f64())
        };
        let mut round_trips = (0..9).map(|_| timed(&[])).collect::<Result<Vec<f64>>>()?;
        round_trips.sort_by(f64::total_cmp);
        let payload = vec![0x5Au8; ECHO_BYTES];
        let mut echo = f64::INFINITY;
        for _ in 0..2 {
            echo = echo.min(timed(&payload)?);
        }
        // Both ways carried the payload; what the empty round trip took is not bandwidth.
        let transfer = (echo - round_trips[0]).max(1e-6);
        Ok(LinkSpeed { round_trip_seconds: round_trips[4], bytes_per_second: 2.0 * ECHO_BYTES as f64 / transfer })
    }

    /// Whether the connection has failed (and why).
    pub fn lost_reason(&self) -> Option<String> {
        self.stats.lost_reason.lock().expect("worker stats").clone()
    }

    /// Sends one request and waits for its answer; a worker's error is an
    /// error here, and a broken connection is a [`WorkerLost`].
    fn ask(&self, request: &Request, payload: &[u8]) -> Result<(Response, Vec<u8>)> {
        let mut connection = self.channel.lock().expect("worker channel");
        if connection.awaited > 0 {
            bail!("worker {}: answers to earlier steps are still to be read", self.info.name);
        }
        let frame = connection.round_trip(&encode(request, payload), &self.stats).map_err(|e| self.lost(e))?;
        drop(connection);
        self.answer_of(&frame)
    }

    /// Marks the connection failed with `error`'s reason, as a [`WorkerLost`].
    fn lost(&self, error: anyhow::Error) -> WorkerLost {
        let reason = format!("{error:#}");
        mark_lost(&self.stats, reason.clone());
        WorkerLost { name: self.info.name.clone(), address: self.address.clone(), reason }
    }

    /// A frame from the worker as its answer and payload; its `Error` as an error.
    fn answer_of(&self, frame: &[u8]) -> Result<(Response, Vec<u8>)> {
        let (response, payload): (Response, &[u8]) = decode(frame)?;
        if let Response::Error { message } = response {
            bail!("worker {} ({}): {message}", self.info.name, self.address);
        }
        Ok((response, payload.to_vec()))
    }

    /// Has this worker's forward steps go on to `next` (the workers after
    /// it in pipeline order) worker to worker, the last one answering the
    /// master: one link crossing per worker instead of two. Empty `next`,
    /// or one with a worker that named no inbox when it loaded, sends each
    /// step back here.
    pub fn route_through(&self, next: Vec<Arc<RemoteWorker>>) {
        let reachable = next.iter().all(|w| w.inbox.load(Ordering::Relaxed) != 0);
        *self.route.lock().expect("worker route") = if reachable { next } else { Vec::new() };
    }

    /// Lets the engine send decode steps of several groups of conversations
    /// before earlier ones are answered ([`StepsInFlight`]), or not.
    pub fn pipeline_steps(&self, pipelined: bool) {
        self.pipelined.store(pipelined, Ordering::Relaxed);
    }

    /// Stages of the pipeline its forward steps run: itself and its route.
    pub fn stages_reached(&self) -> usize {
        1 + self.route.lock().expect("worker route").len()
    }

    /// Has the worker load layers `start..end` of the model at `model` for
    /// conversations of up to `context_length` tokens, first sending it
    /// whatever bytes of them it lacks, calling `on_sent(sent, to_send)` as
    /// chunks go. Returns the weight bytes sent.
    pub fn load(
        &self,
        model: &Path,
        manifest: &ModelManifest,
        layers: std::ops::Range<usize>,
        dtype: Option<ComputeDtype>,
        context_length: usize,
        on_sent: &mut dyn FnMut(u64, u64),
    ) -> Result<u64> {
        let (start, end) = (layers.start, layers.end);
        let request = Request::Load { manifest: manifest.clone(), start, end, dtype, context_length };
        let mut sent = 0u64;
        // One round normally; a second if a worker lost a chunk (say, its disk filled).
        for _round in 0..3 {
            match self.ask(&request, &[])? {
                (Response::Loaded { inbox, .. }, _) => {
                    self.inbox.store(inbox, Ordering::Relaxed);
                    return Ok(sent);
                }
                (Response::NeedChunks { chunks }, _) => {
                    let chunks = manifest
                        .chunks_to_send(chunks, sent)
                        .with_context(|| format!("worker {} asked for weights it cannot have", self.address))?;
                    let total: u64 = chunks.iter().map(|c| c.len).sum();
                    self.stats.weights_sent.store(0, Ordering::Relaxed);
                    self.stats.weights_to_send.store(total, Ordering::Relaxed);
                    let mut done = 0u64;
                    for chunk in chunks {
                        let (sha256, packed) = read_chunk(model, manifest, chunk)?;
                        let message = Request::Chunk { manifest_key: manifest.key.clone(), chunk, sha256 };
                        self.ask(&message, &packed)?;
                        done += chunk.len;
                        sent += chunk.len;
                        self.stats.weights_sent.store(done, Ordering::Relaxed);
                        on_sent(done, total);
                    }
                }
                (other, _) => bail!("worker {} answered {other:?} to Load", self.address),
            }
        }
        bail!("worker {} still lacks weights after they were sent three times", self.info.name)
    }

    /// Runs the worker's layers (and its route's) on `hidden` within
    /// sequence `sequence`.
    pub fn forward(&self, sequence: u64, hidden: &Tensor, mutual: &[Range<usize>]) -> Result<Tensor> {
        let mutual = mutual.to_vec();
        self.exchange_hidden(hidden, |shape, format, route| Request::Forward { sequence, shape, format, route, mutual })
    }

    /// One decode step of several sequences: row `i` of `hidden (1, n,
    /// hidden)` is the next position of `sequences[i]`.
    pub fn forward_streams(&self, sequences: &[u64], hidden: &Tensor) -> Result<Tensor> {
        let sequences = sequences.to_vec();
        self.exchange_hidden(hidden, |shape, format, route| Request::ForwardStreams { sequences, shape, format, route })
    }

    /// Sends `hidden` with the request `request(shape, format, route)`
    /// makes, to this worker and on along its route, and returns the hidden
    /// states the last worker sends back, counting each worker's part.
    fn exchange_hidden(
        &self,
        hidden: &Tensor,
        request: impl FnOnce(Vec<usize>, WireFormat, Vec<Hop>) -> Request,
    ) -> Result<Tensor> {
        let mut steps = self.steps_in_flight();
        steps.send(hidden, request)?;
        steps.receive()
    }

    /// Steps sent to this worker and on along its route whose answers are
    /// read later, in the order they went (see [`StepsInFlight`]).
    pub fn steps_in_flight(&self) -> StepsInFlight<'_> {
        let route = self.route.lock().expect("worker route").clone();
        StepsInFlight { first: self, route, pending: VecDeque::new() }
    }

    /// Weight bytes per second this worker has shown on its `stage_bytes` of
    /// layers, from the master's clock on decode steps (network included, so
    /// a lower bound); `None` before [`MIN_MEASURED_STEPS`] of them.
    pub fn measured_bytes_per_second(&self, stage_bytes: u64) -> Option<f64> {
        let steps = self.stats.single_position_forwards.load(Ordering::Relaxed);
        let nanos = self.stats.single_position_nanos.load(Ordering::Relaxed);
        (steps >= MIN_MEASURED_STEPS && nanos > 0 && stage_bytes > 0)
            .then(|| stage_bytes as f64 * steps as f64 / (nanos as f64 / 1e9))
    }

    /// Bytes sent to and received from the worker since connecting.
    pub fn traffic(&self) -> (u64, u64) {
        (self.stats.bytes_sent.load(Ordering::Relaxed), self.stats.bytes_received.load(Ordering::Relaxed))
    }

    /// Frees the worker's cache of `sequence`.
    pub fn forget(&self, sequence: u64) -> Result<()> {
        self.ask(&Request::Forget { sequence }, &[]).map(|_| ())
    }

    /// Starts the worker's cache of `to` with copies of `from`'s first
    /// `positions` positions.
    pub fn copy_prefix(&self, from: u64, to: u64, positions: usize) -> Result<()> {
        self.ask(&Request::CopyPrefix { from, to, positions }, &[]).map(|_| ())
    }

    /// Keeps only the first `positions` positions of the worker's cache of
    /// `sequence`.
    pub fn truncate(&self, sequence: u64, positions: usize) -> Result<()> {
        self.ask(&Request::Truncate { sequence, positions }, &[]).map(|_| ())
    }
}

/// Forward steps sent to a worker (and on along its route, worker to
/// worker) whose answers are still to be read. Several may be in flight:
/// while the last worker runs one step, the one before it runs the next and
/// the master its own layers of a third, so each machine works on a
/// different group of conversations at once. Workers take steps in the
/// order they come and answer in that order; the master reads one message
/// per worker and step, oldest step first, and nothing else is asked of
/// those connections meanwhile (no heartbeat either). Dropped with steps
/// unread, it reads and discards their answers, so the connections stay in
/// step, unless a worker of the route was lost (the cluster is then
/// re-planned and these connections are not used again).
pub struct StepsInFlight<'w> {
    first: &'w RemoteWorker,
    /// The workers after `first` that its steps reach directly.
    route: Vec<Arc<RemoteWorker>>,
    pending: VecDeque<PendingStep>,
}

/// What reading the answers of a step in flight needs.
struct PendingStep {
    /// The hidden states as sent: what comes back must have this shape.
    shape: Vec<usize>,
    dtype: DType,
    device: Device,
    sent: Instant,
    /// Sent with no other step in flight: only then do the parts' times
    /// measure the workers rather than the wait behind other steps.
    alone: bool,
}

impl StepsInFlight<'_> {
    /// The workers a step passes through, in order.
    fn workers(&self) -> Vec<&RemoteWorker> {
        std::iter::once(self.first).chain(self.route.iter().map(|w| &**w)).collect()
    }

    /// Sends `hidden` with the request `request(shape, format, route)`
    /// makes, without waiting for the answers.
    pub fn send(
        &mut self,
        hidden: &Tensor,
        request: impl FnOnce(Vec<usize>, WireFormat, Vec<Hop>) -> Request,
    ) -> Result<()> {
        let first = self.first;
        let (shape, format, bytes) = tensor_to_bytes(hidden, first.wire_format)?;
        let hops = self
            .route
            .iter()
            .map(|w| Hop { address: w.address.clone(), inbox: w.inbox.load(Ordering::Relaxed) })
            .collect();
        let frame = encode(&request(shape, format, hops), &bytes);
        // Marked awaited first, so that no heartbeat slips in before an answer.
        let workers = self.workers();
        for worker in &workers {
            worker.channel.lock().expect("worker channel").awaited += 1;
        }
        let sent = first.channel.lock().expect("worker channel").send(&frame, &first.stats);
        if let Err(error) = sent {
            for worker in &workers {
                worker.channel.lock().expect("worker channel").awaited -= 1;
            }
            return Err(first.lost(error).into());
        }
        let alone = self.pending.is_empty();
        let (dtype, device) = (hidden.dtype(), hidden.device().clone());
        self.pending.push_back(PendingStep {
            shape: hidden.dims().to_vec(),
            dtype,
            device,
            sent: Instant::now(),
            alone,
        });
        Ok(())
    }

    /// The hidden states of the oldest step in flight, as the last worker
    /// of the route sends them back, after every worker's account of its
    /// part. Every worker of the route tells the master how its part went,
    /// on its own connection: the first answers, each later one pushes
    /// `Relayed` (those that passed the states on) or `Hidden` (the last).
    /// A worker that fails sends its error and the workers after it get
    /// nothing, so nothing more is read for the step.
    pub fn receive(&mut self) -> Result<Tensor> {
        let step = self.pending.pop_front().context("no step in flight")?;
        let workers = self.workers();
        let mut answered = 0;
        let result = read_answers(&workers, &step, &mut answered);
        for worker in &workers[answered..] {
            worker.channel.lock().expect("worker channel").awaited -= 1;
        }
        result
    }
}

impl RemoteSteps for StepsInFlight<'_> {
    fn send(&mut self, sequences: &[u64], hidden: &Tensor) -> Result<()> {
        let sequences = sequences.to_vec();
        StepsInFlight::send(self, hidden, |shape, format, route| Request::ForwardStreams {
            sequences,
            shape,
            format,
            route,
        })
    }

    fn receive(&mut self) -> Result<Tensor> {
        StepsInFlight::receive(self)
    }

    fn most_in_flight(&self) -> usize {
        MOST_STEPS_IN_FLIGHT
    }
}

impl Drop for StepsInFlight<'_> {
    fn drop(&mut self) {
        while !self.pending.is_empty() {
            if self.workers().iter().any(|w| w.stats.lost.load(Ordering::Relaxed)) {
                return;
            }
            let _ = self.receive();
        }
    }
}

/// Reads `step`'s message from each of `workers` in order (counting them in
/// `answered`), as [`StepsInFlight::receive`] describes.
fn read_answers(workers: &[&RemoteWorker], step: &PendingStep, answered: &mut usize) -> Result<Tensor> {
    let mut part_started = step.sent;
    for (i, worker) in workers.iter().enumerate() {
        let frame = {
            let mut connection = worker.channel.lock().expect("worker channel");
            connection.awaited -= 1;
            *answered += 1;
            connection.receive(&worker.stats).map_err(|e| worker.lost(e))?
        };
        let part = part_started.elapsed().as_nanos() as u64;
        part_started = Instant::now();
        let stats = &worker.stats;
        if step.alone {
            stats.forward_nanos.fetch_add(part, Ordering::Relaxed);
            stats.forwards.fetch_add(1, Ordering::Relaxed);
            if step.shape.get(1) == Some(&1) {
                stats.single_position_forwards.fetch_add(1, Ordering::Relaxed);
                stats.single_position_nanos.fetch_add(part, Ordering::Relaxed);
            }
        }
        let counted_compute = |compute_nanos: u64| {
            if step.alone {
                stats.compute_nanos.fetch_add(compute_nanos.min(part), Ordering::Relaxed);
            }
        };
        let last = i + 1 == workers.len();
        match worker.answer_of(&frame)? {
            (Response::Relayed { compute_nanos, kv_bytes, relayed_bytes }, _) if !last => {
                stats.kv_bytes.fetch_max(kv_bytes, Ordering::Relaxed);
                counted_compute(compute_nanos);
                stats.bytes_relayed.fetch_add(relayed_bytes, Ordering::Relaxed);
            }
            (Response::Hidden { shape, format, compute_nanos, kv_bytes }, payload) if last => {
                stats.kv_bytes.fetch_max(kv_bytes, Ordering::Relaxed);
                if shape != step.shape {
                    bail!("worker {} answered hidden states of shape {shape:?} to {:?}", worker.address, step.shape);
                }
                counted_compute(compute_nanos);
                let states = tensor_from_bytes(&shape, format, &payload, &step.device).with_context(|| {
                    format!("worker {} ({}) sent unusable hidden states", worker.info.name, worker.address)
                })?;
                return states.to_dtype(step.dtype).map_err(Into::into);
            }
            (Response::RelayFailed { next, reason }, _) if !last => {
                let next_worker = workers[i + 1];
                let reason = format!("{} could not pass hidden states on to it: {reason}", worker.info.name);
                if next_worker.address != next {
                    bail!("worker {} passed hidden states to {next}, not to {}", worker.address, next_worker.address);
                }
                return Err(next_worker.lost(anyhow::anyhow!(reason)).into());
            }
            (other, _) => bail!("worker {} answered {other:?} to hidden states", worker.address),
        }
    }
    unreachable!("the last worker of a route answers or fails")
}

impl Connection {
    /// Sends one frame, waits for the answer and updates the counters.
    fn round_trip(&mut self, frame: &[u8], stats: &WorkerStats) -> Result<Vec<u8>> {
        self.send(frame, stats)?;
        self.receive(stats)
    }

    fn send(&mut self, frame: &[u8], stats: &WorkerStats) -> Result<()> {
        let sent = self.channel.send(frame);
        self.last_sent = Instant::now();
        stats.bytes_sent.store(self.channel.bytes_sent, Ordering::Relaxed);
        sent
    }

    fn receive(&mut self, stats: &WorkerStats) -> Result<Vec<u8>> {
        let frame = self.channel.receive();
        stats.bytes_received.store(self.channel.bytes_received, Ordering::Relaxed);
        frame
    }
}

fn mark_lost(stats: &WorkerStats, reason: String) {
    let mut slot = stats.lost_reason.lock().expect("worker stats");
    if slot.is_none() {
        *slot = Some(reason);
    }
    stats.lost.store(true, Ordering::Relaxed);
}

impl RemoteLayers for RemoteWorker {
    fn name(&self) -> &str {
        &self.info.name
    }

    fn forward(&self, sequence: u64, hidden: &Tensor, mutual: &[Range<usize>]) -> Result<Tensor> {
        RemoteWorker::forward(self, sequence, hidden, mutual)
    }

    fn forward_streams(&self, sequences: &[u64], hidden: &Tensor) -> Result<Tensor> {
        RemoteWorker::forward_streams(self, sequences, hidden)
    }

    fn forget(&self, sequence: u64) -> Result<()> {
        RemoteWorker::forget(self, sequence)
    }

    fn copy_prefix(&self, from: u64, to: u64, positions: usize) -> Result<()> {
        RemoteWorker::copy_prefix(self, from, to, positions)
    }

    fn truncate(&self, sequence: u64, positions: usize) -> Result<()> {
        RemoteWorker::truncate(self, sequence, positions)
    }

    fn stages_reached(&self) -> usize {
        RemoteWorker::stages_reached(self)
    }

    fn steps_in_flight(&self) -> Option<Box<dyn RemoteSteps + '_>> {
        let pipelined = self.pipelined.load(Ordering::Relaxed);
        pipelined.then(|| Box::new(RemoteWorker::steps_in_flight(self)) as Box<dyn RemoteSteps + '_>)
    }

    fn timings(&self) -> StageTimings {
        let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        StageTimings {
            forwards: load(&self.stats.forwards),
            round_trip_nanos: load(&self.stats.forward_nanos),
            compute_nanos: load(&self.stats.compute_nanos),
            bytes_sent: load(&self.stats.bytes_sent) + load(&self.stats.bytes_relayed),
            bytes_received: load(&self.stats.bytes_received),
            kv_bytes: load(&self.stats.kv_bytes),
        }
    }
}
