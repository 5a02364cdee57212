//! Finding workers on the LAN with mDNS (`_cake._tcp.local.`).
//!
//! A worker advertises its name, the protocol version and the public
//! cluster id of a generated key (nothing derived from the secret, see
//! [`super::cluster_key`]); a master browses for a while (or keeps a
//! [`DiscoveryWatch`] up to date in the background, so that a load waits for
//! no one) and keeps the workers with its own cluster id, or, with a typed
//! key, those without one (the handshake then tells who shares the key). Both
//! can be restricted to named interfaces; `lo` means IPv4 loopback only,
//! which keeps every packet on this machine (what tests use).

use super::cluster_key::{ClusterId, ClusterKey};
use super::secure_channel::PROTOCOL_VERSION;
use anyhow::Result;
use mdns_sd::{IfKind, RecvTimeoutError, ResolvedService, ServiceDaemon, ServiceEvent, ServiceInfo};
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub const SERVICE_TYPE: &str = "_cake._tcp.local.";
/// The TXT property holding a worker's public cluster id.
pub const CLUSTER_ID_PROPERTY: &str = "cluster";

/// Which network interfaces mDNS may use.
#[derive(Debug, Clone, Default)]
pub struct MdnsScope {
    /// Interface names; empty means all. `lo` is IPv4 loopback.
    pub interfaces: Vec<String>,
}

impl MdnsScope {
    /// Starts an mDNS daemon limited to this scope.
    fn daemon(&self) -> Result<ServiceDaemon> {
        let daemon = ServiceDaemon::new().map_err(|e| anyhow::anyhow!("cannot start mDNS: {e}"))?;
        if !self.interfaces.is_empty() {
            daemon.disable_interface(IfKind::All).map_err(|e| anyhow::anyhow!("mDNS: {e}"))?;
            for name in &self.interfaces {
                let kind = if name == "lo" { IfKind::LoopbackV4 } else { IfKind::Name(name.clone()) };
                daemon.enable_interface(kind).map_err(|e| anyhow::anyhow!("mDNS: {e}"))?;
            }
        }
        Ok(daemon)
    }

    fn loopback_only(&self) -> bool {
        self.interfaces.iter().all(|i| i == "lo") && !self.interfaces.is_empty()
    }
}

/// A worker's advertisement; withdrawn when dropped.
pub struct Advertisement {
    daemon: ServiceDaemon,
    fullname: String,
}

impl Drop for Advertisement {
    fn drop(&mut self) {
        if let Ok(done) = self.daemon.unregister(&self.fullname) {
            let _ = done.recv_timeout(Duration::from_secs(1));
        }
        let _ = self.daemon.shutdown();
    }
}

/// Advertises a worker named `name` listening on `port`.
pub fn advertise(name: &str, port: u16, key: &ClusterKey, scope: &MdnsScope) -> Result<Advertisement> {
    let daemon = scope.daemon()?;
    let unique = format!("{}-{:08x}", sanitize(name), rand::random::<u32>());
    let properties = advertised_properties(name, key);
    let host = format!("{unique}.local.");
    let info = if scope.loopback_only() {
        ServiceInfo::new(SERVICE_TYPE, &unique, &host, "127.0.0.1", port, &properties[..])
    } else {
        ServiceInfo::new(SERVICE_TYPE, &unique, &host, "", port, &properties[..]).map(|i| i.enable_addr_auto())
    }
    .map_err(|e| anyhow::anyhow!("cannot describe the worker for mDNS: {e}"))?;
    let fullname = info.get_fullname().to_string();
    daemon.register(info).map_err(|e| anyhow::anyhow!("cannot advertise over mDNS: {e}"))?;
    Ok(Advertisement { daemon, fullname })
}

/// The TXT record of a worker: its name, protocol version and public
/// cluster id. Nothing in it depends on the key's secret part.
fn advertised_properties(name: &str, key: &ClusterKey) -> Vec<(&'static str, String)> {
    let mut properties = vec![("name", name.to_string()), ("v", PROTOCOL_VERSION.to_string())];
    if let Some(id) = key.id() {
        properties.push((CLUSTER_ID_PROPERTY, id.to_string()));
    }
    properties
}

fn sanitize(name: &str) -> String {
    let s: String = name.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect();
    if s.is_empty() {
        "worker".into()
    } else {
        s
    }
}

/// A worker seen on the network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundWorker {
    pub name: String,
    pub address: SocketAddr,
    /// The worker's protocol version, from its advertisement.
    pub version: u16,
    /// Whether it advertises our cluster id (or, like our typed key, none).
    pub same_cluster: bool,
}

/// Browses for `timeout` and returns the workers of `key`'s cluster (others
/// are skipped), in name order.
pub fn discover(key: &ClusterKey, timeout: Duration, scope: &MdnsScope) -> Result<Vec<FoundWorker>> {
    let mut workers = browse(key, timeout, scope)?;
    workers.retain(|w| w.same_cluster);
    Ok(workers)
}

/// Browses for `timeout` and returns every Cake worker seen, marking those
/// of `key`'s cluster, in name order.
pub fn browse(key: &ClusterKey, timeout: Duration, scope: &MdnsScope) -> Result<Vec<FoundWorker>> {
    let daemon = scope.daemon()?;
    let events = daemon.browse(SERVICE_TYPE).map_err(|e| anyhow::anyhow!("cannot browse mDNS: {e}"))?;
    let mut found: BTreeMap<String, FoundWorker> = BTreeMap::new();
    let deadline = Instant::now() + timeout;
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        let Ok(event) = events.recv_timeout(left) else { break };
        note(&mut found, event, key, scope);
    }
    let _ = daemon.shutdown();
    Ok(in_name_order(found))
}

/// `event` applied to the workers `found` so far (by service name): a
/// resolved advertisement added, a withdrawn one removed.
fn note(found: &mut BTreeMap<String, FoundWorker>, event: ServiceEvent, key: &ClusterKey, scope: &MdnsScope) {
    match event {
        ServiceEvent::ServiceResolved(service) => {
            if let Some(worker) = found_worker(&service, key, scope) {
                found.insert(service.get_fullname().to_string(), worker);
            }
        }
        ServiceEvent::ServiceRemoved(_, fullname) => {
            found.remove(&fullname);
        }
        _ => {}
    }
}

/// The worker an advertisement describes (`None` without an IPv4 address).
fn found_worker(service: &ResolvedService, key: &ClusterKey, scope: &MdnsScope) -> Option<FoundWorker> {
    let their_id = service.get_property_val_str(CLUSTER_ID_PROPERTY).and_then(ClusterId::parse);
    let same_cluster = their_id.as_ref() == key.id();
    let mut addresses: Vec<IpAddr> = service.get_addresses_v4().into_iter().map(IpAddr::V4).collect();
    // On loopback, use 127.0.0.1; on a LAN, a LAN address first.
    let loopback_only = scope.loopback_only();
    addresses.sort_by_key(|a| a.is_loopback() != loopback_only);
    let ip = addresses.first().copied()?;
    let name = service.get_property_val_str("name").unwrap_or("worker").to_string();
    let version = service.get_property_val_str("v").and_then(|v| v.parse().ok()).unwrap_or(0);
    Some(FoundWorker { name, address: SocketAddr::new(ip, service.get_port()), version, same_cluster })
}

fn in_name_order(found: BTreeMap<String, FoundWorker>) -> Vec<FoundWorker> {
    let mut workers: Vec<FoundWorker> = found.into_values().collect();
    workers.sort_by(|a, b| a.name.cmp(&b.name).then(a.address.cmp(&b.address)));
    workers
}

/// Workers seen on the network, kept up to date in the background from
/// when the watch starts (a master with a key keeps one), so that a model
/// load asks it instead of browsing and waiting for answers. Stops when
/// dropped.
pub struct DiscoveryWatch {
    daemon: ServiceDaemon,
    seen: Arc<Mutex<BTreeMap<String, FoundWorker>>>,
    stop: Arc<AtomicBool>,
    started: Instant,
}

/// How often the watch's thread looks whether it should stop.
const WATCH_POLL: Duration = Duration::from_millis(500);

impl DiscoveryWatch {
    /// Starts watching for the workers of `key`'s cluster (and others) in `scope`.
    pub fn start(key: &ClusterKey, scope: &MdnsScope) -> Result<Self> {
        let daemon = scope.daemon()?;
        let events = daemon.browse(SERVICE_TYPE).map_err(|e| anyhow::anyhow!("cannot browse mDNS: {e}"))?;
        let seen: Arc<Mutex<BTreeMap<String, FoundWorker>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let (shared, stopping, key, scope) = (seen.clone(), stop.clone(), key.clone(), scope.clone());
        std::thread::Builder::new().name("cake-mdns-watch".into()).spawn(move || {
            while !stopping.load(Ordering::Relaxed) {
                match events.recv_timeout(WATCH_POLL) {
                    Ok(event) => note(&mut shared.lock().expect("workers seen"), event, &key, &scope),
                    Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => break,
                }
            }
        })?;
        Ok(Self { daemon, seen, stop, started: Instant::now() })
    }

    /// The workers seen, in name order, once `window` has passed since the
    /// watch started: only a load right after it started waits, for the
    /// rest of that window.
    pub fn seen_after(&self, window: Duration) -> Vec<FoundWorker> {
        if let Some(left) = (self.started + window).checked_duration_since(Instant::now()) {
            std::thread::sleep(left);
        }
        in_name_order(self.seen.lock().expect("workers seen").clone())
    }
}

impl Drop for DiscoveryWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.daemon.shutdown();
    }
}

/// Parses `--mdns-iface` values.
pub fn scope_from(interfaces: &[String]) -> MdnsScope {
    MdnsScope { interfaces: interfaces.to_vec() }
}

impl FoundWorker {
    pub fn describe(&self) -> String {
        format!("{} at {}", self.name, self.address)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_record_holds_nothing_derived_from_the_secret() {
        let generated = ClusterKey::generate();
        let (id_part, secret_words) = generated.split_at("cake1-".len() + 8);
        let other_secret = ClusterKey::generate();
        let same_id_other_secret = format!("{id_part}{}", &other_secret["cake1-".len() + 8..]);
        assert_ne!(secret_words, &other_secret["cake1-".len() + 8..]);
        let record = advertised_properties("w", &ClusterKey::from_passphrase(&generated).unwrap());
        let twin = advertised_properties("w", &ClusterKey::from_passphrase(&same_id_other_secret).unwrap());
        assert_eq!(record, twin, "the record changed with the secret");
        assert_eq!(record.iter().find(|(k, _)| *k == CLUSTER_ID_PROPERTY).unwrap().1, &id_part[6..]);
        // A typed key has no id, so its record is the same for every key.
        let typed = advertised_properties("w", &ClusterKey::from_passphrase("one typed key").unwrap());
        let other_typed = advertised_properties("w", &ClusterKey::from_passphrase("another typed key").unwrap());
        assert_eq!(typed, other_typed);
        assert_eq!(typed.len(), 2);
    }
}
