//! The app's side of the cluster: its settings, kept across restarts, and
//! the role they give this machine.
//!
//! With no cluster key the app runs models alone. With a key it is a master
//! (models it loads spread over the workers it finds), or, with "Join as
//! worker" on, a worker serving other machines' masters. The key lives in
//! the [`KeyStore`]; the other settings in `cluster.json` of the data folder.

use super::key_store::{KeyStorage, KeyStore};
use crate::cluster::cluster_key::ClusterKey;
use crate::cluster::discovery::{advertise, Advertisement, DiscoveryWatch, MdnsScope};
use crate::cluster::master::ClusterSettings;
use crate::cluster::monitor::ClusterMonitor;
use crate::cluster::prediction::Preview;
use crate::cluster::worker::{start, RunningWorker, WorkerConfig};
use crate::files::storage::write_json_atomically;
use crate::models::context::MIN_CONTEXT_LENGTH;
use crate::models::gpu_offload::{device_name, shared_gpu, GpuMode, GpuRequest};
use crate::models::loader::LoadOptions;
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::net::{IpAddr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The port a worker listens on unless told otherwise.
pub const DEFAULT_WORKER_PORT: u16 = 10128;

/// Cluster settings other than the key (which the key store keeps).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ClusterPreferences {
    /// Serve other machines' masters instead of using workers.
    pub join_as_worker: bool,
    /// This machine's name as a worker.
    pub worker_name: String,
    /// The port the worker listens on (0 picks a free one).
    pub worker_port: u16,
    /// Interfaces mDNS may use (empty: all; `lo`: IPv4 loopback only).
    pub mdns_interfaces: Vec<String>,
    /// How long a master looks for workers before loading a model.
    pub discovery_timeout_s: f64,
    /// Workers added by address (`host:port`), for machines mDNS cannot see.
    pub worker_addresses: Vec<String>,
    /// Tokens a conversation may hold, which caches and plans are sized
    /// for; 0 for the model's own context, up to 8 192.
    pub context_length: usize,
    /// Whether models (and a worker's layers) run on this machine's GPU.
    pub gpu: GpuMode,
}

impl Default for ClusterPreferences {
    fn default() -> Self {
        Self {
            join_as_worker: false,
            worker_name: host_name(),
            worker_port: DEFAULT_WORKER_PORT,
            mdns_interfaces: Vec::new(),
            discovery_timeout_s: 2.0,
            worker_addresses: Vec::new(),
            context_length: 0,
            gpu: GpuMode::Off,
        }
    }
}

/// A change of settings from the UI; absent fields stay as they are.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SettingsUpdate {
    /// The new key; an empty string forgets it.
    pub key: Option<String>,
    pub join_as_worker: Option<bool>,
    pub worker_name: Option<String>,
    pub worker_port: Option<u16>,
    pub mdns_interfaces: Option<Vec<String>>,
    pub discovery_timeout_s: Option<f64>,
    pub worker_addresses: Option<Vec<String>>,
    pub context_length: Option<usize>,
    pub gpu: Option<GpuMode>,
}

/// The longest context one may ask for in the settings.
pub const MAX_CONTEXT_LENGTH: usize = 1 << 20;

/// At most this many workers added by address.
pub const MAX_WORKER_ADDRESSES: usize = 32;

/// The prompt length the app's preview predicts the time to first token for.
const PREVIEW_PROMPT_TOKENS: usize = 512;

/// `host:port` addresses as typed, trimmed and without repeats; an error
/// names the first that is not one.
fn checked_worker_addresses(addresses: Vec<String>) -> Result<Vec<String>> {
    let mut checked: Vec<String> = Vec::new();
    for address in addresses.iter().map(|a| a.trim()).filter(|a| !a.is_empty()) {
        let port = address.rsplit_once(':').and_then(|(host, port)| {
            let host = host.trim_start_matches('[').trim_end_matches(']');
            let plain = !host.is_empty() && host.len() <= 253 && !host.contains(char::is_whitespace);
            port.parse::<u16>().ok().filter(|&p| plain && p > 0)
        });
        if port.is_none() {
            bail!("`{address}` is not a worker address: write host:port, e.g. 192.168.1.20:{DEFAULT_WORKER_PORT}");
        }
        if !checked.iter().any(|a| a == address) {
            checked.push(address.to_string());
        }
    }
    if checked.len() > MAX_WORKER_ADDRESSES {
        bail!("at most {MAX_WORKER_ADDRESSES} workers can be added by address");
    }
    Ok(checked)
}

/// A worker this app runs, with its mDNS advertisement.
struct ServingWorker {
    running: RunningWorker,
    _advertisement: Option<Advertisement>,
}

struct ControlState {
    prefs: ClusterPreferences,
    key: Option<(String, KeyStorage)>,
    /// Master settings from the command line, which win until the UI changes them.
    from_command_line: Option<ClusterSettings>,
    worker: Option<ServingWorker>,
    /// Why the worker could not start.
    worker_error: Option<String>,
    /// As a master with a key: the workers seen in the background, so a
    /// load waits for no one, and the key text and interfaces it watches with.
    discovery: Option<(Watched, Arc<DiscoveryWatch>)>,
}

/// The key text and mDNS interfaces a discovery watch was started with.
type Watched = (String, Vec<String>);

/// Owns the cluster settings and the role they give this machine.
pub struct ClusterControl {
    prefs_path: PathBuf,
    key_store: KeyStore,
    worker_cache: PathBuf,
    /// What the master sees (shared with the engine's loads).
    monitor: Arc<ClusterMonitor>,
    state: Mutex<ControlState>,
}

impl ClusterControl {
    /// Reads the settings kept in `data_dir` and takes up the role they
    /// give; `command_line` master settings win over stored ones.
    pub fn open(data_dir: &Path, command_line: Option<ClusterSettings>) -> Self {
        let prefs_path = data_dir.join("cluster.json");
        let prefs = match read_preferences(&prefs_path) {
            Ok(prefs) => prefs,
            Err(e) => {
                tracing::warn!("{e:#}; using default cluster settings");
                ClusterPreferences::default()
            }
        };
        let key_store = KeyStore::new(data_dir.join("cluster-key"));
        let key = key_store.load().unwrap_or_else(|e| {
            tracing::warn!("{e:#}");
            None
        });
        let monitor = command_line.as_ref().map_or_else(Arc::default, |s| s.monitor.clone());
        let control = Self {
            prefs_path,
            key_store,
            worker_cache: data_dir.join("worker-cache"),
            monitor,
            state: Mutex::new(ControlState {
                prefs,
                key,
                from_command_line: command_line,
                worker: None,
                worker_error: None,
                discovery: None,
            }),
        };
        control.take_up_role(&mut control.state.lock().expect("cluster state"));
        control
    }

    /// How models should be loaded now: over workers (as a master) or not.
    pub fn master_settings(&self) -> Option<ClusterSettings> {
        let state = self.state.lock().expect("cluster state");
        self.master_settings_of(&state)
    }

    fn master_settings_of(&self, state: &ControlState) -> Option<ClusterSettings> {
        if let Some(settings) = &state.from_command_line {
            return Some(settings.clone());
        }
        if state.prefs.join_as_worker {
            return None;
        }
        let (text, _) = state.key.as_ref()?;
        let key = ClusterKey::from_passphrase(text).ok()?;
        let mut settings = ClusterSettings::new(key, scope(&state.prefs), timeout(&state.prefs));
        // The machine name the Cluster screen shows and workers are told.
        settings.name = state.prefs.worker_name.clone();
        settings.monitor = self.monitor.clone();
        settings.remembered_workers = state.prefs.worker_addresses.clone();
        settings.discovery = state.discovery.as_ref().map(|(_, watch)| watch.clone());
        Some(settings)
    }

    /// Applies a change from the UI, saves it and takes up the new role.
    pub fn update(&self, update: SettingsUpdate) -> Result<()> {
        let mut state = self.state.lock().expect("cluster state");
        let mut prefs = state.prefs.clone();
        if let Some(name) = update.worker_name {
            let name = name.trim().to_string();
            if name.is_empty() || name.len() > 64 {
                bail!("the machine name must have 1 to 64 characters");
            }
            prefs.worker_name = name;
        }
        if let Some(port) = update.worker_port {
            prefs.worker_port = port;
        }
        if let Some(interfaces) = update.mdns_interfaces {
            prefs.mdns_interfaces =
                interfaces.into_iter().map(|i| i.trim().to_string()).filter(|i| !i.is_empty()).collect();
        }
        if let Some(seconds) = update.discovery_timeout_s {
            if !(0.0..=60.0).contains(&seconds) {
                bail!("the discovery time must be between 0 and 60 seconds");
            }
            prefs.discovery_timeout_s = seconds;
        }
        if let Some(addresses) = update.worker_addresses {
            prefs.worker_addresses = checked_worker_addresses(addresses)?;
        }
        if let Some(tokens) = update.context_length {
            if tokens != 0 && !(MIN_CONTEXT_LENGTH..=MAX_CONTEXT_LENGTH).contains(&tokens) {
                bail!(
                    "the context length must be 0 (the model's own) or {MIN_CONTEXT_LENGTH} to {MAX_CONTEXT_LENGTH} tokens"
                );
            }
            prefs.context_length = tokens;
        }
        if let Some(join) = update.join_as_worker {
            prefs.join_as_worker = join;
        }
        if let Some(gpu) = update.gpu {
            prefs.gpu = gpu;
        }
        let key = match update.key.as_deref().map(str::trim) {
            Some("") => {
                self.key_store.clear()?;
                None
            }
            Some(text) => {
                // Refuse a key the cluster would refuse, before storing it.
                ClusterKey::from_passphrase(text)?;
                Some((text.to_string(), self.key_store.save(text)?))
            }
            None => state.key.clone(),
        };
        if prefs.join_as_worker && key.is_none() {
            bail!("set a cluster key before joining as a worker");
        }
        write_json_atomically(&self.prefs_path, &prefs)?;
        state.prefs = prefs;
        state.key = key;
        state.from_command_line = None;
        self.take_up_role(&mut state);
        Ok(())
    }

    /// Starts or stops the worker (or, as a master with a key, the
    /// background watch for workers) to match the settings.
    fn take_up_role(&self, state: &mut ControlState) {
        // Restart the worker so that a new key, name or port takes effect.
        if let Some(worker) = state.worker.take() {
            worker.running.stop();
        }
        state.worker_error = None;
        if state.from_command_line.is_some() {
            state.discovery = None;
            return;
        }
        if !state.prefs.join_as_worker {
            self.keep_watching(state);
            return;
        }
        state.discovery = None;
        let Some((text, _)) = &state.key else { return };
        match self.start_worker(&state.prefs, text) {
            Ok(worker) => state.worker = Some(worker),
            Err(e) => {
                tracing::warn!("cannot join as a worker: {e:#}");
                state.worker_error = Some(format!("{e:#}"));
            }
        }
    }

    /// As a master: watches for workers with the key and interfaces set,
    /// keeping the watch under way while they stay (a new one would make the
    /// next load wait out its first discovery window again).
    fn keep_watching(&self, state: &mut ControlState) {
        let wanted = state.key.as_ref().map(|(text, _)| (text.clone(), state.prefs.mdns_interfaces.clone()));
        if state.discovery.as_ref().map(|(watched, _)| watched) != wanted.as_ref() {
            state.discovery = wanted.and_then(|wanted| Some((wanted, self.watch_for_workers(state)?)));
        }
    }

    /// Starts watching for workers (none without a usable key, or when mDNS
    /// cannot start, said in the log).
    fn watch_for_workers(&self, state: &ControlState) -> Option<Arc<DiscoveryWatch>> {
        let key = ClusterKey::from_passphrase(&state.key.as_ref()?.0).ok()?;
        match DiscoveryWatch::start(&key, &scope(&state.prefs)) {
            Ok(watch) => Some(Arc::new(watch)),
            Err(e) => {
                tracing::warn!("cannot watch for workers in the background ({e:#}); each load looks for them");
                None
            }
        }
    }

    fn start_worker(&self, prefs: &ClusterPreferences, key_text: &str) -> Result<ServingWorker> {
        let key = ClusterKey::from_passphrase(key_text)?;
        let listener = TcpListener::bind(("0.0.0.0", prefs.worker_port))
            .with_context(|| format!("cannot listen on port {}", prefs.worker_port))?;
        let port = listener.local_addr()?.port();
        let running = start(
            listener,
            WorkerConfig {
                name: prefs.worker_name.clone(),
                key: key.clone(),
                cache_dir: self.worker_cache.clone(),
                memory_bytes: None,
                idle_timeout: crate::cluster::worker::IDLE_TIMEOUT,
                gpu: GpuRequest { mode: prefs.gpu, ..GpuRequest::default() },
            },
        )?;
        let advertisement = advertise(&prefs.worker_name, port, &key, &scope(prefs))?;
        Ok(ServingWorker { running, _advertisement: Some(advertisement) })
    }

    /// The context length chosen in the settings, if any.
    pub fn context_length(&self) -> Option<usize> {
        let tokens = self.state.lock().expect("cluster state").prefs.context_length;
        (tokens > 0).then_some(tokens)
    }

    /// What the settings ask of this machine's GPU.
    pub fn gpu_request(&self) -> GpuRequest {
        GpuRequest { mode: self.state.lock().expect("cluster state").prefs.gpu, ..GpuRequest::default() }
    }

    /// Whether this machine is serving other machines' masters right now.
    pub fn is_serving_as_worker(&self) -> bool {
        self.state.lock().expect("cluster state").worker.is_some()
    }

    /// Stops serving as a worker and remembers that ("Join as worker" off).
    pub fn stop_worker(&self) -> Result<()> {
        self.update(SettingsUpdate { join_as_worker: Some(false), ..SettingsUpdate::default() })
    }

    /// Looks for workers now and records what it finds (as a master).
    pub fn scan(&self) -> Result<()> {
        let settings =
            self.master_settings().context("set a cluster key (and leave worker mode) to look for workers")?;
        settings.survey()
    }

    /// The placement preview of the model at `path` over the workers that
    /// answer now, for the context length chosen in the settings.
    pub fn preview(&self, path: &Path) -> Result<Preview> {
        let settings = self.master_settings().context("set a cluster key (and leave worker mode) to preview plans")?;
        let options = LoadOptions { context_length: self.context_length(), ..LoadOptions::default() };
        settings.preview(path, &options, PREVIEW_PROMPT_TOKENS)
    }

    /// The `cluster_status` answer (see docs/api.md).
    pub fn status(&self) -> Value {
        let state = self.state.lock().expect("cluster state");
        let role = if state.worker.is_some() || (state.prefs.join_as_worker && state.from_command_line.is_none()) {
            "worker"
        } else if self.master_settings_of(&state).is_some() {
            "master"
        } else {
            "off"
        };
        let key = state.from_command_line.as_ref().map(|s| s.key.clone()).or_else(|| {
            let (text, _) = state.key.as_ref()?;
            ClusterKey::from_passphrase(text).ok()
        });
        let mut status = json!({
            "settings": {
                "key_set": key.is_some(),
                "cluster_id": key.as_ref().and_then(|k| k.id()).map(ToString::to_string),
                "key_warning": key.as_ref().and_then(ClusterKey::weakness),
                "key_storage": state.key.as_ref().map(|(_, storage)| storage),
                "from_command_line": state.from_command_line.is_some(),
                "join_as_worker": state.prefs.join_as_worker,
                "worker_name": state.prefs.worker_name,
                "worker_port": state.prefs.worker_port,
                "mdns_interfaces": state.prefs.mdns_interfaces,
                "discovery_timeout_s": state.prefs.discovery_timeout_s,
                "worker_addresses": state.prefs.worker_addresses,
                "context_length": state.prefs.context_length,
                "gpu": state.prefs.gpu,
            },
            "gpus": this_machines_gpus(),
            "role": role,
            "worker": state.worker.as_ref().map(|w| json!({
                "address": w.running.address.to_string(),
                "reachable_at": reachable_addresses(w.running.address),
                "masters": w.running.sessions(),
            })),
            "worker_error": state.worker_error,
            "machines": [],
            "run": null,
        });
        if role == "master" {
            let seen = self.monitor.snapshot();
            status["machines"] = seen["machines"].clone();
            status["run"] = seen["run"].clone();
        }
        status
    }
}

fn read_preferences(path: &Path) -> Result<ClusterPreferences> {
    match std::fs::read(path) {
        Ok(bytes) => {
            serde_json::from_slice(&bytes).with_context(|| format!("{}: unreadable cluster settings", path.display()))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(ClusterPreferences::default()),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

fn scope(prefs: &ClusterPreferences) -> MdnsScope {
    MdnsScope { interfaces: prefs.mdns_interfaces.clone() }
}

fn timeout(prefs: &ClusterPreferences) -> Duration {
    Duration::from_secs_f64(prefs.discovery_timeout_s.clamp(0.0, 60.0))
}

/// Where other machines reach a server listening on `listening`: its own
/// address, or for one on every interface (`0.0.0.0`) each IPv4 address of
/// this machine's network interfaces that are up, loopback and link-local
/// left out.
pub fn reachable_addresses(listening: SocketAddr) -> Vec<String> {
    if !listening.ip().is_unspecified() {
        return vec![listening.to_string()];
    }
    let interfaces = if_addrs::get_if_addrs().unwrap_or_default();
    let usable = interfaces.iter().filter(|i| i.is_oper_up() && !i.is_loopback() && !i.is_link_local());
    usable
        .filter_map(|i| match i.ip() {
            IpAddr::V4(ip) => Some(SocketAddr::new(IpAddr::V4(ip), listening.port()).to_string()),
            IpAddr::V6(_) => None,
        })
        .collect()
}

/// What `--gpu auto` and `--gpu on` find on this machine: the GPU's name,
/// or why there is none.
fn this_machines_gpus() -> Value {
    let found = |mode: GpuMode| match shared_gpu(mode) {
        Ok(gpu) => json!({"device": device_name(&gpu), "unavailable": null}),
        Err(why) => json!({"device": null, "unavailable": why.to_string()}),
    };
    json!({"auto": found(GpuMode::Auto), "on": found(GpuMode::On)})
}

/// This machine's host name (for the default worker name).
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("COMPUTERNAME").ok())
        .unwrap_or_else(|| "this-machine".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_on_every_interface_is_shown_at_its_network_addresses() {
        let bound: SocketAddr = "0.0.0.0:45419".parse().unwrap();
        for address in reachable_addresses(bound) {
            let address: SocketAddr = address.parse().unwrap();
            assert!(!address.ip().is_unspecified() && !address.ip().is_loopback(), "{address}");
            assert_eq!(address.port(), 45419);
        }
        assert_eq!(reachable_addresses("192.168.1.20:10128".parse().unwrap()), ["192.168.1.20:10128"]);
    }

    #[test]
    fn worker_addresses_are_host_and_port_without_repeats() {
        let typed = ["  192.168.1.20:10128 ", "", "kitchen.local:9000", "[::1]:10128", "192.168.1.20:10128"];
        let checked = checked_worker_addresses(typed.iter().map(|a| a.to_string()).collect()).unwrap();
        assert_eq!(checked, ["192.168.1.20:10128", "kitchen.local:9000", "[::1]:10128"]);
        for bad in ["kitchen", "kitchen:", ":10128", "kitchen:0", "kitchen:70000", "two words:10128"] {
            let message = checked_worker_addresses(vec![bad.to_string()]).unwrap_err().to_string();
            assert!(message.contains(bad.trim()) && message.contains("host:port"), "{bad}: {message}");
        }
        let many = (1..=MAX_WORKER_ADDRESSES as u16 + 1).map(|p| format!("host:{p}")).collect();
        assert!(checked_worker_addresses(many).is_err());
    }
}
