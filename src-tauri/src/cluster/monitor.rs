//! What a master knows about its cluster right now: the machines it has
//! seen (and whether they proved the key) and, while a model runs over
//! them, who holds which layers, why, and how busy each one is. It also
//! keeps the speed each worker showed (measured by the master on decode
//! steps) against the speed its stage was planned at (its claims: CPU and,
//! for layers on its GPU, GPU), so the next plan slows those claims to what
//! it showed, and the view says when a claim was far off. The app's cluster view polls
//! [`ClusterMonitor::snapshot`].

use super::assignment::{Plan, StageAssignment};
use super::decode_steps::StepsChoice;
use super::protocol::WorkerInfo;
use super::remote::RemoteWorker;
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// How a machine stands with this master.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MachineState {
    /// The master itself.
    ThisMachine,
    /// Proved the cluster key; may get layers.
    Authenticated,
    /// Advertised another cluster's id, or failed the handshake.
    Rejected,
    /// Advertised but could not be reached.
    Unreachable,
    /// Was in use and stopped answering.
    Lost,
}

/// One machine as the cluster view shows it.
#[derive(Debug, Clone, Serialize)]
pub struct MachineView {
    pub name: String,
    /// host:port (none for the master itself).
    pub address: Option<String>,
    pub state: MachineState,
    /// Why it was rejected, unreachable or lost.
    pub problem: Option<String>,
    /// What it reported about itself, once authenticated.
    pub info: Option<WorkerInfo>,
    /// Other names it was found under (adverts or addresses that reached
    /// this same worker process), shown beside it rather than as machines.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub also_named: Vec<String>,
}

/// A model running (or loading) over the cluster.
struct Run {
    model_name: String,
    total_layers: usize,
    plan: Plan,
    /// One entry per plan stage: `None` for the master, else its worker.
    workers: Vec<Option<Arc<RemoteWorker>>>,
    /// The master's time in its own layers, once the model is loaded.
    local_nanos: Option<Arc<AtomicU64>>,
    /// Whether several conversations' decode steps are pipelined over the
    /// machines, and why (once the workers are loaded).
    decode_steps: Option<StepsChoice>,
}

#[derive(Default)]
struct State {
    /// By address, or by name for the master itself.
    machines: BTreeMap<String, MachineView>,
    run: Option<Run>,
    /// What each worker showed in earlier runs over what its stage was
    /// planned at, by address.
    shown: BTreeMap<String, f64>,
    /// Workers that stopped answering while in use, by address, with why:
    /// left out of plans until they answer again.
    lost: BTreeMap<String, String>,
}

/// A claimed speed this many times what the master measured is doubted.
pub const SPEED_DOUBT_FACTOR: f64 = 4.0;

/// The speed `stage` was planned at on `worker`, in weight bytes per
/// second: a worker's claimed speed, or with layers on its GPU, its CPU's
/// and GPU's claims together.
fn planned_speed(stage: &StageAssignment, worker: &RemoteWorker) -> f64 {
    if stage.gpu_layers.is_empty() || stage.seconds_per_token <= 0.0 {
        worker.info.bytes_per_second
    } else {
        stage.read_bytes as f64 / stage.seconds_per_token
    }
}

impl Run {
    /// Each worker's measured speed on its stage over the speed it was
    /// planned at, by address.
    fn shown_ratios(&self) -> impl Iterator<Item = (String, f64)> + '_ {
        self.plan.stages.iter().zip(&self.workers).filter_map(|(stage, worker)| {
            let worker = worker.as_ref()?;
            let measured = worker.measured_bytes_per_second(stage.bytes)?;
            Some((worker.address.clone(), measured / planned_speed(stage, worker)))
        })
    }
}

/// The master's live view of its cluster; cheap to read while the engine works.
#[derive(Default)]
pub struct ClusterMonitor {
    state: Mutex<State>,
}

impl ClusterMonitor {
    /// Records (or updates) what is known about a machine.
    pub fn machine_seen(&self, mut view: MachineView) {
        let key = view.address.clone().unwrap_or_else(|| view.name.clone());
        let mut state = self.state.lock().expect("cluster monitor");
        // A machine that cannot be reached is named by its address only;
        // keep the name and description it gave when it last answered.
        if let Some(known) = state.machines.get(&key).filter(|_| Some(&view.name) == view.address.as_ref()) {
            view.name = known.name.clone();
            view.info = view.info.or_else(|| known.info.clone());
        }
        state.machines.insert(key, view);
    }

    /// Forgets every machine except this one (before a new discovery round).
    pub fn forget_machines(&self) {
        let mut state = self.state.lock().expect("cluster monitor");
        state.machines.retain(|_, m| m.state == MachineState::ThisMachine);
    }

    /// A model's layers were planned over `workers` (aligned with the plan's
    /// stages, `None` for the master); weights may still be on their way.
    pub fn begin_run(
        &self,
        model_name: &str,
        total_layers: usize,
        plan: Plan,
        workers: Vec<Option<Arc<RemoteWorker>>>,
    ) {
        let mut state = self.state.lock().expect("cluster monitor");
        state.remember_measured_speeds();
        state.run = Some(Run {
            model_name: model_name.to_string(),
            total_layers,
            plan,
            workers,
            local_nanos: None,
            decode_steps: None,
        });
    }

    /// The planned model is loaded; `local_nanos` counts the master's compute time.
    pub fn run_ready(&self, local_nanos: Arc<AtomicU64>) {
        if let Some(run) = self.state.lock().expect("cluster monitor").run.as_mut() {
            run.local_nanos = Some(local_nanos);
        }
    }

    /// How the run's decode steps of several conversations go, and why.
    pub fn decode_steps_chosen(&self, chosen: StepsChoice) {
        if let Some(run) = self.state.lock().expect("cluster monitor").run.as_mut() {
            run.decode_steps = Some(chosen);
        }
    }

    /// A worker in use stopped answering: it stays out of plans (named by
    /// the user or not) until [`Self::answered`] says it is back.
    pub fn worker_lost(&self, address: &str, reason: &str) {
        self.state.lock().expect("cluster monitor").lost.insert(address.to_string(), reason.to_string());
    }

    /// Whether the worker at `address` was lost and has not answered since.
    pub fn is_lost(&self, address: &str) -> bool {
        self.state.lock().expect("cluster monitor").lost.contains_key(address)
    }

    /// The workers lost and not heard from since, by address.
    pub fn lost_addresses(&self) -> Vec<String> {
        self.state.lock().expect("cluster monitor").lost.keys().cloned().collect()
    }

    /// The worker at `address` proved the key again: it may be planned.
    pub fn answered(&self, address: &str) {
        self.state.lock().expect("cluster monitor").lost.remove(address);
    }

    /// No model runs over the cluster any more.
    pub fn end_run(&self) {
        let mut state = self.state.lock().expect("cluster monitor");
        state.remember_measured_speeds();
        state.run = None;
    }

    /// How much of its claimed speeds to plan the worker at `address` with:
    /// 1, unless the master measured its stage slower than planned (network
    /// included), in this run or an earlier one; then that fraction.
    pub fn believed_fraction(&self, address: &str) -> f64 {
        let state = self.state.lock().expect("cluster monitor");
        let live = state.run.as_ref().and_then(|run| run.shown_ratios().find(|(a, _)| a == address).map(|(_, r)| r));
        live.or_else(|| state.shown.get(address).copied()).map_or(1.0, |shown| shown.min(1.0))
    }

    /// Machines and the current run as JSON (the `machines` and `run` fields
    /// of the `cluster_status` command, see docs/api.md).
    pub fn snapshot(&self) -> Value {
        let state = self.state.lock().expect("cluster monitor");
        let mut machines: Vec<MachineView> = state.machines.values().cloned().collect();
        // A worker lost earlier shows as lost until it answers again, and one
        // in use that stopped answering shows as lost.
        for m in &mut machines {
            if let Some(reason) = m.address.as_ref().and_then(|a| state.lost.get(a)) {
                m.state = MachineState::Lost;
                m.problem = Some(format!("{reason}; left out until it answers again"));
            }
        }
        if let Some(run) = &state.run {
            for worker in run.workers.iter().flatten() {
                if let Some(reason) = worker.lost_reason() {
                    if let Some(m) = machines.iter_mut().find(|m| m.address.as_deref() == Some(worker.address.as_str()))
                    {
                        m.state = MachineState::Lost;
                        m.problem = Some(reason);
                    }
                }
            }
        }
        machines.sort_by_key(|m| (m.state != MachineState::ThisMachine, m.name.clone()));
        json!({
            "machines": machines,
            "run": state.run.as_ref().map(run_snapshot),
        })
    }
}

impl State {
    fn remember_measured_speeds(&mut self) {
        if let Some(run) = &self.run {
            let ratios: Vec<(String, f64)> = run.shown_ratios().collect();
            self.shown.extend(ratios);
        }
    }
}

/// Why a worker's claimed speed is not believed, when it is far above what the master measured.
fn speed_doubt(claimed: f64, measured: Option<f64>) -> Option<String> {
    let measured = measured?;
    (claimed > measured * SPEED_DOUBT_FACTOR).then(|| {
        format!(
            "claims {:.1} GB/s but ran its layers at {:.2} GB/s (network included): planned with the measured speed",
            claimed / 1e9,
            measured / 1e9
        )
    })
}

fn run_snapshot(run: &Run) -> Value {
    let busy: Vec<u64> = run
        .plan
        .stages
        .iter()
        .zip(&run.workers)
        .map(|(_, worker)| match worker {
            Some(w) => w.stats.forward_nanos.load(Ordering::Relaxed),
            None => run.local_nanos.as_ref().map_or(0, |n| n.load(Ordering::Relaxed)),
        })
        .collect();
    let total_busy: u64 = busy.iter().sum();
    let stages: Vec<Value> = run
        .plan
        .stages
        .iter()
        .zip(&run.workers)
        .zip(&busy)
        .map(|((stage, worker), busy)| {
            let counter = |f: fn(&super::remote::WorkerStats) -> &AtomicU64| {
                worker.as_ref().map_or(0, |w| f(&w.stats).load(Ordering::Relaxed))
            };
            let claimed = worker.as_ref().map(|w| planned_speed(stage, w));
            let measured = worker.as_ref().and_then(|w| w.measured_bytes_per_second(stage.bytes));
            json!({
                "node": stage.node,
                "address": worker.as_ref().map(|w| w.address.clone()),
                "layers": [stage.layers.start, stage.layers.end],
                "bytes": stage.bytes,
                "kv_bytes": stage.kv_bytes,
                "memory_bytes": stage.memory_bytes,
                "gpu_layers": stage.gpu_layers,
                "gpu_memory_bytes": stage.gpu_memory_bytes,
                "seconds_per_token": stage.seconds_per_token,
                "reason": stage.reason,
                "compute_share": if total_busy == 0 { 0.0 } else { *busy as f64 / total_busy as f64 },
                "bytes_sent": counter(|s| &s.bytes_sent),
                "bytes_received": counter(|s| &s.bytes_received),
                "weights_sent": counter(|s| &s.weights_sent),
                "weights_to_send": counter(|s| &s.weights_to_send),
                "lost": worker.as_ref().and_then(|w| w.lost_reason()),
                "claimed_bytes_per_second": claimed,
                "measured_bytes_per_second": measured,
                "speed_doubt": claimed.and_then(|claimed| speed_doubt(claimed, measured)),
            })
        })
        .collect();
    json!({
        "model_name": run.model_name,
        "total_layers": run.total_layers,
        "context_length": run.plan.context_length,
        "ready": run.local_nanos.is_some(),
        "decode_steps": run.decode_steps,
        "stages": stages,
    })
}
