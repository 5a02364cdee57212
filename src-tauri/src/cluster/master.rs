//! Loading a model split over this machine and its workers.
//!
//! The master measures itself, asks each worker what it offers, plans the
//! layer ranges ([`super::assignment`]), has every worker with layers load
//! them, and loads its own range together with the embedding and the head.
//! Workers that get no layers are not used.

use super::assignment::{plan_with_fixed, NodeCapacity, Plan};
use super::cluster_key::ClusterKey;
use super::decode_steps::DecodeSteps;
use super::discovery::{browse, DiscoveryWatch, MdnsScope};
use super::machine;
use super::monitor::{ClusterMonitor, MachineState, MachineView};
use super::prediction::{self, preview, Preview};
use super::protocol::{HiddenRoute, WireFormat, WorkerInfo};
use super::remote::{RemoteWorker, Unreachable};
use super::topology::Topology;
use super::weight_transfer::ModelManifest;
use crate::models::gpu_offload::GpuRequest;
use crate::models::loader::{Checkpoint, ComputeDtype, LoadOptions};
use crate::models::memory_needs::MemoryNeeds;
use crate::models::sources::selection::TensorSelection;
use crate::text::model::{RemoteStage, TextModel};
use anyhow::{Context, Result};
use std::ops::Range;
use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

/// A worker to use, with the layers a topology file gives it (if any).
pub struct PlannedWorker {
    pub worker: RemoteWorker,
    pub fixed_layers: Option<Range<usize>>,
}

impl From<RemoteWorker> for PlannedWorker {
    fn from(worker: RemoteWorker) -> Self {
        Self { worker, fixed_layers: None }
    }
}

/// Reports loading progress: the fraction done (0..1) and what is happening.
pub type LoadProgress<'a> = &'a mut dyn FnMut(f64, &str);

/// What [`load_distributed`] hands the code that loads this machine's part.
pub struct LocalPart<'a> {
    pub checkpoint: &'a Checkpoint,
    /// The tensors to load here: the first layers, the embedding and the head.
    pub selection: TensorSelection,
    /// The layers already loaded on workers, in pipeline order.
    pub remote_stages: Vec<RemoteStage>,
    /// Reports `(done, total)` layers loaded here.
    pub on_layer: &'a mut dyn FnMut(usize, usize),
}

/// Loads the decoder of the checkpoint at `path` over this machine (`me`,
/// as [`machine::describe`] found it) and `workers`: plans the layers, has
/// each worker load its range, then calls `load_local` for this machine's
/// part, which returns the assembled model with its local layer counter.
/// The plan is published to `monitor` before weights are sent.
#[allow(clippy::too_many_arguments)]
pub fn load_distributed<M>(
    path: &Path,
    options: &LoadOptions,
    workers: Vec<PlannedWorker>,
    me: &WorkerInfo,
    route: HiddenRoute,
    decode_steps: DecodeSteps,
    monitor: Option<&ClusterMonitor>,
    on_progress: LoadProgress,
    load_local: impl FnOnce(LocalPart) -> Result<(M, Arc<AtomicU64>)>,
) -> Result<(M, Plan)> {
    let path = std::fs::canonicalize(path).with_context(|| format!("{}: no such model", path.display()))?;
    let checkpoint = Checkpoint::open(&path)?;
    let mut needs = MemoryNeeds::of(&checkpoint, options)?;
    needs.weigh_reads(&checkpoint, machine::read_cost)?;
    let mut nodes = vec![NodeCapacity {
        name: me.name.clone(),
        memory_bytes: me.memory_bytes,
        bytes_per_second: me.bytes_per_second,
        gpu: me.gpu.as_ref().map(|g| g.capacity.clone()),
    }];
    let mut fixed = vec![None];
    for planned in &workers {
        let info = &planned.worker.info;
        let address = &planned.worker.address;
        // Claims slowed to what the worker showed in earlier steps, if less.
        let believed = monitor.map_or(1.0, |m| m.believed_fraction(address));
        nodes.push(NodeCapacity {
            name: info.name.clone(),
            memory_bytes: info.memory_bytes,
            bytes_per_second: info.bytes_per_second * believed,
            gpu: info.gpu.as_ref().map(|g| g.capacity.slowed(believed)),
        });
        fixed.push(planned.fixed_layers.clone());
    }
    let (plan, order) = plan_with_fixed(&needs, &nodes, &fixed)?;
    let mut by_node: Vec<Option<Arc<RemoteWorker>>> =
        std::iter::once(None).chain(workers.into_iter().map(|p| Some(Arc::new(p.worker)))).collect();
    let stage_workers: Vec<Option<Arc<RemoteWorker>>> = order.iter().map(|&i| by_node[i].take()).collect();
    if let Some(monitor) = monitor {
        let name = path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned());
        monitor.begin_run(&name, needs.layer_weights.len(), plan.clone(), stage_workers.clone());
    }
    let dtype = match options.dtype {
        Some(dtype) => Some(ComputeDtype::of(dtype).with_context(|| format!("workers cannot compute in {dtype:?}"))?),
        None => None,
    };
    let mut stages = Vec::new();
    let mut loaded: Vec<Arc<RemoteWorker>> = Vec::new();
    // Progress: each worker that gets layers is one part, local loading the last.
    let parts = 1 + stage_workers.iter().zip(&plan.stages).filter(|(w, s)| w.is_some() && !s.layers.is_empty()).count();
    for (worker, stage) in stage_workers.iter().zip(&plan.stages) {
        let Some(worker) = worker else { continue };
        if stage.layers.is_empty() {
            continue;
        }
        let part = stages.len() as f64;
        let selection = TensorSelection { layers: stage.layers.clone(), embedding: false, head: false };
        let manifest = ModelManifest::for_selection(
            &path,
            &selection,
            checkpoint.config().tie_word_embeddings,
            checkpoint.layout(),
        )?;
        let name = &worker.info.name;
        let layers = stage.layers.clone();
        on_progress(part / parts as f64, &format!("{name} loads layers {}–{}", layers.start, layers.end - 1));
        let mut on_sent = |sent: u64, total: u64| {
            let message = format!(
                "sending {name} the weights of layers {}–{}: {:.1} of {:.1} MB",
                layers.start,
                layers.end - 1,
                sent as f64 / 1e6,
                total as f64 / 1e6
            );
            on_progress((part + sent as f64 / total.max(1) as f64) / parts as f64, &message);
        };
        let sent = worker
            .load(&path, &manifest, stage.layers.clone(), dtype, plan.context_length, &mut on_sent)
            .with_context(|| format!("worker {} could not load layers {:?}", worker.info.name, stage.layers))?;
        tracing::info!(
            "worker {}: layers {:?} ready ({sent} bytes of weights sent, {} needed)",
            worker.info.name,
            stage.layers,
            manifest.total_bytes()
        );
        stages.push(RemoteStage { worker: worker.clone(), layers: stage.layers.clone() });
        loaded.push(worker.clone());
    }
    if let (HiddenRoute::WorkerToWorker, [first, rest @ ..]) = (route, loaded.as_slice()) {
        first.route_through(rest.to_vec());
    }
    if let Some(first) = loaded.first() {
        let machines: Vec<&WorkerInfo> = std::iter::once(me).chain(loaded.iter().map(|w| &w.info)).collect();
        let chosen = decode_steps.choose(&machines);
        first.pipeline_steps(chosen.pipelined);
        let how = if chosen.pipelined { "pipelined" } else { "one machine after another" };
        tracing::info!("decode steps of several conversations: {how} ({})", chosen.why);
        if let Some(monitor) = monitor {
            monitor.decode_steps_chosen(chosen);
        }
    }
    let local_part = (parts - 1) as f64;
    let mut on_layer = |done: usize, total: usize| {
        let message = format!("loading layers here: {done} of {total}");
        on_progress((local_part + done as f64 / total.max(1) as f64) / parts as f64, &message);
    };
    let (model, local_nanos) = load_local(LocalPart {
        checkpoint: &checkpoint,
        selection: TensorSelection { layers: plan.stages[0].layers.clone(), embedding: true, head: true },
        remote_stages: stages,
        on_layer: &mut on_layer,
    })?;
    if let Some(monitor) = monitor {
        monitor.run_ready(local_nanos);
    }
    Ok((model, plan))
}

/// The placement preview of the model at `path` over this machine (`me`)
/// and `workers` (measuring each link), hidden states sent in `wire`.
pub fn preview_over(
    path: &Path,
    options: &LoadOptions,
    me: &WorkerInfo,
    workers: &[&RemoteWorker],
    wire: WireFormat,
    route: HiddenRoute,
    prompt_tokens: usize,
) -> Result<Preview> {
    let checkpoint = Checkpoint::open(path)?;
    let mut needs = MemoryNeeds::of(&checkpoint, options)?;
    needs.weigh_reads(&checkpoint, machine::read_cost)?;
    let hidden_bytes = (checkpoint.config().hidden_size * wire.value_bytes()) as u64;
    let machine = |info: &WorkerInfo, link| prediction::Machine {
        capacity: NodeCapacity {
            name: info.name.clone(),
            memory_bytes: info.memory_bytes,
            bytes_per_second: info.bytes_per_second,
            gpu: info.gpu.as_ref().map(|g| g.capacity.clone()),
        },
        prompt_bytes_per_second: info.prompt_bytes_per_second,
        layer_overhead_seconds: info.layer_overhead_seconds,
        link,
    };
    let mut machines = vec![machine(me, None)];
    for worker in workers {
        let link = worker.measure_link().with_context(|| format!("measuring the link to {}", worker.info.name))?;
        machines.push(machine(&worker.info, Some(link)));
    }
    Ok(preview(&needs, &machines, hidden_bytes, route, prompt_tokens))
}

/// How a master finds and uses its workers.
#[derive(Clone)]
pub struct ClusterSettings {
    pub key: ClusterKey,
    /// This machine's name in plans and the cluster view.
    pub name: String,
    /// Workers named explicitly (host:port); when empty (and no topology), found over mDNS.
    pub workers: Vec<String>,
    /// Workers the app was told about (host:port), tried beside those found
    /// over mDNS: for machines mDNS cannot reach. One that does not answer
    /// is shown as such and left out.
    pub remembered_workers: Vec<String>,
    /// A hand-written layout naming the workers and, optionally, their layers.
    pub topology: Option<Topology>,
    pub mdns: MdnsScope,
    pub discovery_timeout: Duration,
    /// Workers seen in the background: asked instead of browsing for
    /// `discovery_timeout` at each load (the app keeps one).
    pub discovery: Option<Arc<DiscoveryWatch>>,
    /// Bytes of memory this machine may give the model (default: nine tenths of its available memory).
    pub master_memory: Option<u64>,
    /// Where the cluster view reads what the master sees.
    pub monitor: Arc<ClusterMonitor>,
    /// How hidden states travel to the workers (default f32: exact; f16
    /// halves the bytes but can change greedy tokens, see docs/cluster.md).
    pub wire_format: WireFormat,
    /// Which way hidden states go between workers (default: straight from
    /// one worker to the next).
    pub hidden_route: HiddenRoute,
    /// Whether decode steps of several conversations are pipelined over
    /// the machines (default: unless they share a kernel).
    pub decode_steps: DecodeSteps,
}

impl std::fmt::Debug for ClusterSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterSettings")
            .field("key", &self.key)
            .field("workers", &self.workers)
            .field("remembered_workers", &self.remembered_workers)
            .field("topology", &self.topology)
            .field("mdns", &self.mdns)
            .field("discovery_timeout", &self.discovery_timeout)
            .field("wire_format", &self.wire_format)
            .field("hidden_route", &self.hidden_route)
            .field("decode_steps", &self.decode_steps)
            .finish_non_exhaustive()
    }
}

/// Whether two connections reach one worker process: the same id, or for
/// workers that report none, the same address.
fn same_process(a: &RemoteWorker, b: &RemoteWorker) -> bool {
    match (a.info.instance.as_str(), b.info.instance.as_str()) {
        ("", _) | (_, "") => a.address == b.address,
        (a, b) => a == b,
    }
}

/// Whether `remembered` (`host:port`) names one of the `discovered`
/// addresses: equal to one, or resolving (once) to one.
fn already_found(remembered: &str, discovered: &[&str]) -> bool {
    use std::net::{SocketAddr, ToSocketAddrs};
    if discovered.is_empty() {
        return false;
    }
    if discovered.contains(&remembered) {
        return true;
    }
    let resolved: Vec<SocketAddr> = remembered.to_socket_addrs().map(Iterator::collect).unwrap_or_default();
    discovered.iter().filter_map(|a| a.parse::<SocketAddr>().ok()).any(|a| resolved.contains(&a))
}

/// A worker to try: its address and, from a topology file, name and layers.
struct Candidate {
    address: String,
    name: Option<String>,
    fixed_layers: Option<Range<usize>>,
    /// Named by the user (topology or --worker): failing to use it is an
    /// error; a discovered worker that fails is left out.
    required: bool,
}

impl ClusterSettings {
    /// Settings for `key` with discovery over `mdns` and nothing else set.
    pub fn new(key: ClusterKey, mdns: MdnsScope, discovery_timeout: Duration) -> Self {
        Self {
            key,
            name: "master".into(),
            workers: Vec::new(),
            remembered_workers: Vec::new(),
            topology: None,
            mdns,
            discovery_timeout,
            discovery: None,
            master_memory: None,
            monitor: Arc::default(),
            wire_format: WireFormat::F32,
            hidden_route: HiddenRoute::default(),
            decode_steps: DecodeSteps::default(),
        }
    }

    /// The addresses of the workers to use now (discovering them if none were named).
    pub fn worker_addresses(&self) -> Result<Vec<String>> {
        Ok(self.candidates()?.into_iter().map(|c| c.address).collect())
    }

    /// The workers to try: the topology's, the named ones, or those of
    /// this cluster found over mDNS (the others are shown as rejected) and
    /// the remembered ones that mDNS did not find.
    fn candidates(&self) -> Result<Vec<Candidate>> {
        if let Some(topology) = &self.topology {
            return Ok(topology
                .nodes
                .iter()
                .map(|n| Candidate {
                    address: n.host.clone(),
                    name: Some(n.name.clone()),
                    fixed_layers: n.layers.clone(),
                    required: true,
                })
                .collect());
        }
        if !self.workers.is_empty() {
            return Ok(self
                .workers
                .iter()
                .map(|a| Candidate { address: a.clone(), name: None, fixed_layers: None, required: true })
                .collect());
        }
        self.monitor.forget_machines();
        let mut candidates = Vec::new();
        let found = match &self.discovery {
            Some(watch) => watch.seen_after(self.discovery_timeout),
            None => browse(&self.key, self.discovery_timeout, &self.mdns)?,
        };
        for found in found {
            if found.same_cluster {
                tracing::info!("found worker {}", found.describe());
                candidates.push(Candidate {
                    address: found.address.to_string(),
                    name: Some(found.name),
                    fixed_layers: None,
                    required: false,
                });
            } else {
                self.monitor.machine_seen(MachineView {
                    name: found.name,
                    address: Some(found.address.to_string()),
                    state: MachineState::Rejected,
                    problem: Some("advertises another cluster id (a different cluster key)".into()),
                    info: None,
                    also_named: Vec::new(),
                });
            }
        }
        let discovered: Vec<String> = candidates.iter().map(|c| c.address.clone()).collect();
        let discovered: Vec<&str> = discovered.iter().map(String::as_str).collect();
        for address in &self.remembered_workers {
            if !already_found(address, &discovered) {
                candidates.push(Candidate {
                    address: address.clone(),
                    name: None,
                    fixed_layers: None,
                    required: false,
                });
            }
        }
        Ok(candidates)
    }

    /// Connects to every candidate worker, recording each outcome in the monitor.
    /// `me` is this machine, as shown in the monitor.
    fn connect_workers(&self, me: &WorkerInfo, excluded: &[String]) -> Result<Vec<PlannedWorker>> {
        self.monitor.machine_seen(MachineView {
            name: me.name.clone(),
            address: None,
            state: MachineState::ThisMachine,
            problem: None,
            info: Some(me.clone()),
            also_named: Vec::new(),
        });
        let candidates: Vec<Candidate> =
            self.candidates()?.into_iter().filter(|c| !excluded.contains(&c.address)).collect();
        // All at once: each contact is bounded by CONTACT_DEADLINE, so a
        // silent worker delays the others by at most that.
        let contacts: Vec<Result<RemoteWorker>> = std::thread::scope(|scope| {
            let handles: Vec<_> =
                candidates.iter().map(|c| scope.spawn(|| RemoteWorker::connect(&c.address, &self.key))).collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|_| Err(anyhow::anyhow!("contacting the worker panicked"))))
                .collect()
        });
        let mut workers: Vec<PlannedWorker> = Vec::new();
        let mut views: Vec<MachineView> = Vec::new();
        for (candidate, contact) in candidates.into_iter().zip(contacts) {
            let name = candidate.name.clone().unwrap_or_else(|| candidate.address.clone());
            match contact {
                Ok(mut worker) => {
                    self.monitor.answered(&candidate.address);
                    // Another advert or address of a worker already met: one machine.
                    if let Some(same) = workers.iter().position(|w| same_process(&w.worker, &worker)) {
                        tracing::info!(
                            "{name} ({}) is worker {} again: planned once",
                            candidate.address,
                            views[same].name
                        );
                        views[same].also_named.push(format!("{name} ({})", candidate.address));
                        continue;
                    }
                    worker.wire_format = self.wire_format;
                    views.push(MachineView {
                        name: worker.info.name.clone(),
                        address: Some(candidate.address.clone()),
                        state: MachineState::Authenticated,
                        problem: None,
                        info: Some(worker.info.clone()),
                        also_named: Vec::new(),
                    });
                    workers.push(PlannedWorker { worker, fixed_layers: candidate.fixed_layers });
                }
                Err(e) => {
                    let problem = format!("{e:#}");
                    tracing::warn!("leaving out {name} ({}): {problem}", candidate.address);
                    let was_lost = self.monitor.is_lost(&candidate.address);
                    let state = if was_lost {
                        MachineState::Lost
                    } else if e.downcast_ref::<Unreachable>().is_some() {
                        MachineState::Unreachable
                    } else {
                        MachineState::Rejected
                    };
                    self.monitor.machine_seen(MachineView {
                        name: name.clone(),
                        address: Some(candidate.address),
                        state,
                        problem: Some(problem),
                        info: None,
                        also_named: Vec::new(),
                    });
                    // A worker lost while in use is left out, named or not:
                    // the machines left may hold the model without it.
                    if candidate.required && !was_lost {
                        return Err(e.context(format!("cannot use worker {name}")));
                    }
                }
            }
        }
        for view in views {
            self.monitor.machine_seen(view);
        }
        Ok(workers)
    }

    /// Looks for workers and tries each, recording the outcomes in the monitor.
    pub fn survey(&self) -> Result<()> {
        self.connect_workers(&machine::describe(&self.name, self.master_memory, GpuRequest::default()), &[]).map(drop)
    }

    /// The placement preview for the model at `path`: finds and contacts
    /// the workers as loading would, measures each link, and compares plans
    /// for a prompt of `prompt_tokens` without loading anything.
    pub fn preview(&self, path: &Path, options: &LoadOptions, prompt_tokens: usize) -> Result<Preview> {
        let me = machine::describe(&self.name, self.master_memory, options.gpu);
        let workers = self.connect_workers(&me, &[])?;
        let workers: Vec<&RemoteWorker> = workers.iter().map(|p| &p.worker).collect();
        preview_over(path, options, &me, &workers, self.wire_format, self.hidden_route, prompt_tokens)
    }

    /// Loads the text model at `path` over this machine and the workers
    /// that answer, leaving out those at `excluded` addresses (and, with a
    /// warning, discovered ones that cannot be used).
    pub fn load(
        &self,
        path: &Path,
        options: &LoadOptions,
        excluded: &[String],
        on_progress: LoadProgress,
    ) -> Result<TextModel> {
        self.load_with(path, options, excluded, on_progress, |part| {
            let decoder = part.checkpoint.load_decoder_with_progress(Some(part.selection), options, part.on_layer)?;
            let model = TextModel::assemble(path, part.checkpoint, decoder, part.remote_stages, options)?;
            let local_nanos = model.pipeline.local_nanos.clone();
            Ok((model, local_nanos))
        })
    }

    /// Like [`Self::load`] for any model built on a decoder: `load_local`
    /// loads this machine's part (see [`load_distributed`]).
    pub fn load_with<M>(
        &self,
        path: &Path,
        options: &LoadOptions,
        excluded: &[String],
        on_progress: LoadProgress,
        load_local: impl FnOnce(LocalPart) -> Result<(M, Arc<AtomicU64>)>,
    ) -> Result<M> {
        self.monitor.end_run();
        on_progress(0.0, "looking for workers");
        // Its speed is measured once per process; its free memory, now.
        let me = machine::describe(&self.name, self.master_memory, options.gpu);
        let workers = self.connect_workers(&me, excluded)?;
        let (model, plan) = load_distributed(
            path,
            options,
            workers,
            &me,
            self.hidden_route,
            self.decode_steps,
            Some(&self.monitor),
            on_progress,
            load_local,
        )
        .map_err(|e| {
            // The machines left may be too few only because some are gone.
            let lost = self.monitor.lost_addresses();
            if lost.is_empty() {
                e
            } else {
                e.context(Unreachable { address: lost.join(", ") })
            }
        })?;
        for stage in &plan.stages {
            tracing::info!("{}: layers {:?} — {}", stage.node, stage.layers, stage.reason);
        }
        Ok(model)
    }
}
