//! A decoder's layers as one pipeline: the local part (embedding, the first
//! layers, final norm and head) and, after it, the layer ranges that run
//! elsewhere ([`RemoteLayers`], which the cluster's workers implement).
//! Text models and the speech model's language model both run through it;
//! on a single machine it is just the local decoder.

use super::decoder::Decoder;
use super::nn::kv_cache::KvCache;
use anyhow::{Context, Result};
use candle_core::Tensor;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Layers run by another machine, as the pipeline sees them.
pub trait RemoteLayers: Send + Sync {
    /// The machine's name, for messages.
    fn name(&self) -> &str;
    /// Runs the layers on `hidden` within sequence `sequence`'s cache; the
    /// positions of each `mutual` span see each other both ways.
    fn forward(&self, sequence: u64, hidden: &Tensor, mutual: &[Range<usize>]) -> Result<Tensor>;
    /// One decode step of several sequences: row `i` of `hidden (1, n,
    /// hidden)` is the next position of `sequences[i]`.
    fn forward_streams(&self, sequences: &[u64], hidden: &Tensor) -> Result<Tensor>;
    /// Frees the cache of `sequence`.
    fn forget(&self, sequence: u64) -> Result<()>;
    /// Starts the cache of `to` with copies of `from`'s first `positions`.
    fn copy_prefix(&self, from: u64, to: u64, positions: usize) -> Result<()>;
    /// Keeps only the first `positions` of the cache of `sequence`.
    fn truncate(&self, sequence: u64, positions: usize) -> Result<()>;
    /// How many stages, this one first, its `forward` runs: more than one
    /// when it passes hidden states on to the next stages' machines itself.
    fn stages_reached(&self) -> usize {
        1
    }
    /// What the exchanges with it cost so far.
    fn timings(&self) -> StageTimings;
    /// Decode steps that can be sent before earlier ones are answered
    /// (`None` where the machine takes one at a time).
    fn steps_in_flight(&self) -> Option<Box<dyn RemoteSteps + '_>> {
        None
    }
}

/// Decode steps sent to a remote stage whose answers are read later, in
/// the order the steps went.
pub trait RemoteSteps {
    /// Sends one decode step of several sequences (row `i` of `hidden (1,
    /// n, hidden)` is the next position of `sequences[i]`) without waiting.
    fn send(&mut self, sequences: &[u64], hidden: &Tensor) -> Result<()>;
    /// The hidden states of the oldest step sent and not yet received.
    fn receive(&mut self) -> Result<Tensor>;
    /// The most steps that may be in flight at once.
    fn most_in_flight(&self) -> usize;
}

/// Counters of one remote stage.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StageTimings {
    pub forwards: u64,
    /// Round trips as this machine timed them.
    pub round_trip_nanos: u64,
    /// The part the other machine says its layers took.
    pub compute_nanos: u64,
    /// Bytes it sent: to this machine, and to the next stage's machine
    /// when it passes hidden states on itself.
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// The most bytes a sequence's KV cache has held there.
    pub kv_bytes: u64,
}

/// Layers that run on another machine, after the local ones.
pub struct RemoteStage {
    pub worker: Arc<dyn RemoteLayers>,
    pub layers: Range<usize>,
}

/// One sequence being processed: the local KV cache, and the id under which
/// workers keep theirs.
pub struct Session {
    pub cache: KvCache,
    pub sequence: u64,
}

pub struct LayerPipeline {
    /// The local part: embedding, the first layers (all of them on a single
    /// machine), final norm and LM head.
    pub decoder: Decoder,
    /// Later layers on workers, in pipeline order (empty on a single machine).
    pub remote_stages: Vec<RemoteStage>,
    /// Time spent in the local layers, in nanoseconds (for the cluster view).
    pub local_nanos: Arc<AtomicU64>,
}

impl LayerPipeline {
    /// Every layer on this machine.
    pub fn local(decoder: Decoder) -> Self {
        Self::new(decoder, Vec::new())
    }

    pub fn new(decoder: Decoder, remote_stages: Vec<RemoteStage>) -> Self {
        Self { decoder, remote_stages, local_nanos: Arc::default() }
    }

    /// A new sequence with empty caches.
    pub fn new_session(&self) -> Session {
        Session { cache: self.decoder.new_cache(), sequence: rand::random() }
    }

    /// A new sequence whose caches, here and on every worker, start as
    /// copies of `session`'s first `positions` positions; `None` where a
    /// layer here cannot give them (see [`KvCache::copy_prefix`]).
    pub fn copy_prefix(&self, session: &Session, positions: usize) -> Result<Option<Session>> {
        let Some(cache) = session.cache.copy_prefix(positions)? else {
            return Ok(None);
        };
        let copy = Session { cache, sequence: rand::random() };
        for (copied, stage) in self.remote_stages.iter().enumerate() {
            if let Err(error) = stage.worker.copy_prefix(session.sequence, copy.sequence, positions) {
                for stage in &self.remote_stages[..copied] {
                    let _ = stage.worker.forget(copy.sequence);
                }
                return Err(error.context(format!("copying cached positions on {}", stage.worker.name())));
            }
        }
        Ok(Some(copy))
    }

    /// Keeps only `session`'s first `positions` positions, here and on every
    /// worker; false (nothing changed) where a layer here cannot be cut
    /// back (see [`KvCache::truncate`]). An error leaves the session
    /// unusable: end it.
    pub fn truncate(&self, session: &mut Session, positions: usize) -> Result<bool> {
        if !session.cache.truncate(positions) {
            return Ok(false);
        }
        for stage in &self.remote_stages {
            stage
                .worker
                .truncate(session.sequence, positions)
                .with_context(|| format!("cutting cached positions back on {}", stage.worker.name()))?;
        }
        Ok(true)
    }

    /// `session`, ended (its workers' caches freed) when the guard drops,
    /// whichever way the code using it returns.
    pub fn guard(&self, session: Session) -> SessionGuard<'_> {
        SessionGuard { pipeline: self, session: Some(session) }
    }

    /// Frees the workers' caches of a finished sequence.
    pub fn end_session(&self, session: Session) {
        for stage in &self.remote_stages {
            // A worker that is gone has nothing left to free.
            let _ = stage.worker.forget(session.sequence);
        }
    }

    /// Hidden states `(1, t, hidden)` after every layer, local and remote,
    /// for the embedded positions `embedded` appended to the session.
    pub fn run_layers(&self, embedded: &Tensor, session: &mut Session) -> Result<Tensor> {
        self.run_layers_seeing(embedded, session, &[])
    }

    /// Like [`Self::run_layers`], where the positions of each `mutual` span
    /// see each other both ways (see [`Decoder::forward_layers_seeing`]).
    pub fn run_layers_seeing(
        &self,
        embedded: &Tensor,
        session: &mut Session,
        mutual: &[Range<usize>],
    ) -> Result<Tensor> {
        let started = Instant::now();
        let mut hidden = self.decoder.forward_layers_seeing(embedded, &mut session.cache, mutual)?;
        self.local_nanos.fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
        let mut next = 0;
        while let Some(stage) = self.remote_stages.get(next) {
            hidden = stage.worker.forward(session.sequence, &hidden, mutual)?;
            next += stage.worker.stages_reached();
        }
        Ok(hidden)
    }

    /// Hidden states `(1, n, hidden)` after every layer for one new
    /// position of each of `n` sessions (row `i` is `sessions[i]`'s): every
    /// stage, local or remote, reads its weights once for all rows.
    pub fn run_layers_streams(&self, embedded: &Tensor, sessions: &mut [&mut Session]) -> Result<Tensor> {
        let (mut hidden, sequences) = self.local_layers_streams(embedded, sessions)?;
        let mut next = 0;
        while let Some(stage) = self.remote_stages.get(next) {
            hidden = stage.worker.forward_streams(&sequences, &hidden)?;
            next += stage.worker.stages_reached();
        }
        Ok(hidden)
    }

    /// The local layers' part of [`Self::run_layers_streams`], and the
    /// sessions' sequence ids.
    fn local_layers_streams(&self, embedded: &Tensor, sessions: &mut [&mut Session]) -> Result<(Tensor, Vec<u64>)> {
        let started = Instant::now();
        let mut caches: Vec<&mut KvCache> = sessions.iter_mut().map(|s| &mut s.cache).collect();
        let hidden = self.decoder.forward_layers_streams(embedded, &mut caches)?;
        self.local_nanos.fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
        Ok((hidden, sessions.iter().map(|s| s.sequence).collect()))
    }

    /// Decode steps of several groups of sessions in flight at once, each
    /// machine working on a different group ([`PipelinedSteps`]); `None` on
    /// a single machine, or where the workers do not form one route (each
    /// answers this machine) or take one step at a time.
    pub fn pipelined_steps(&self) -> Option<PipelinedSteps<'_>> {
        let first = self.remote_stages.first()?;
        if first.worker.stages_reached() != self.remote_stages.len() {
            return None;
        }
        Some(PipelinedSteps { pipeline: self, remote: first.worker.steps_in_flight()? })
    }

    /// Bytes exchanged with workers so far (0 on a single machine).
    pub fn network_bytes(&self) -> u64 {
        self.remote_stages
            .iter()
            .map(|s| {
                let timings = s.worker.timings();
                timings.bytes_sent + timings.bytes_received
            })
            .sum()
    }
}

/// Decode steps sent through the pipeline without waiting for earlier ones
/// to come back: this machine runs its layers of a group of sessions and
/// sends them on while the workers run earlier groups'. Each group's rows
/// come out exactly as [`LayerPipeline::run_layers_streams`] gives them.
pub struct PipelinedSteps<'p> {
    pipeline: &'p LayerPipeline,
    remote: Box<dyn RemoteSteps + 'p>,
}

impl PipelinedSteps<'_> {
    /// How many groups of sessions to keep in flight: one per machine a
    /// step passes through (each then works on a different one), as far
    /// as the workers take that many.
    pub fn groups(&self) -> usize {
        (1 + self.pipeline.remote_stages.len()).min(self.remote.most_in_flight())
    }

    /// Runs the local layers on one new position of each of `sessions`
    /// (embedded in `embedded`, row `i` for `sessions[i]`) and sends the
    /// result on to the workers.
    pub fn send(&mut self, embedded: &Tensor, sessions: &mut [&mut Session]) -> Result<()> {
        let (hidden, sequences) = self.pipeline.local_layers_streams(embedded, sessions)?;
        self.remote.send(&sequences, &hidden)
    }

    /// Hidden states `(1, n, hidden)` after every layer for the oldest
    /// group sent and not yet received.
    pub fn receive(&mut self) -> Result<Tensor> {
        self.remote.receive()
    }
}

/// A session that ends itself on drop (see [`LayerPipeline::guard`]);
/// [`SessionGuard::keep`] takes it back out to keep it going.
pub struct SessionGuard<'a> {
    pipeline: &'a LayerPipeline,
    session: Option<Session>,
}

impl SessionGuard<'_> {
    /// The session, no longer ended on drop.
    pub fn keep(mut self) -> Session {
        self.session.take().expect("a guard holds its session until kept")
    }
}

impl std::ops::Deref for SessionGuard<'_> {
    type Target = Session;
    fn deref(&self) -> &Session {
        self.session.as_ref().expect("a guard holds its session until kept")
    }
}

impl std::ops::DerefMut for SessionGuard<'_> {
    fn deref_mut(&mut self) -> &mut Session {
        self.session.as_mut().expect("a guard holds its session until kept")
    }
}

impl Drop for SessionGuard<'_> {
    fn drop(&mut self) {
        if let Some(session) = self.session.take() {
            self.pipeline.end_session(session);
        }
    }
}
