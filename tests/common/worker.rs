//! A `cake worker` child process on loopback, for the cluster tests.

use super::place::Place;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

/// A `cake worker` process on a free loopback port.
pub struct Worker {
    pub child: Child,
    pub address: String,
    /// The worker's own data folder (its weight cache).
    pub data: tempfile::TempDir,
    /// What it printed to stderr so far (its log).
    pub log: Arc<Mutex<Vec<String>>>,
}

impl Worker {
    /// A worker of the cluster `key`, named explicitly by the master: no
    /// mDNS at all.
    pub fn start(key: &str, name: &str, max_memory: Option<u64>) -> Self {
        Self::spawn(Command::new(env!("CARGO_BIN_EXE_cake")), name, max_memory, key, &["--no-mdns"])
    }

    /// [`Self::start`] with more `cake worker` arguments.
    pub fn start_with(key: &str, name: &str, max_memory: Option<u64>, extra: &[&str]) -> Self {
        let mut args = vec!["--no-mdns"];
        args.extend_from_slice(extra);
        Self::spawn(Command::new(env!("CARGO_BIN_EXE_cake")), name, max_memory, key, &args)
    }

    /// A worker that advertises itself over mDNS on IPv4 loopback, inside `place`.
    pub fn advertised(place: &Place, key: &str, name: &str, max_memory: Option<u64>) -> Self {
        Self::spawn(place.command(env!("CARGO_BIN_EXE_cake")), name, max_memory, key, &["--mdns-iface", "lo"])
    }

    fn spawn(mut command: Command, name: &str, max_memory: Option<u64>, key: &str, extra: &[&str]) -> Self {
        let data = tempfile::tempdir().unwrap();
        command
            .env("CAKE_DATA_DIR", data.path())
            .args(["worker", "--name", name, "--host", "127.0.0.1", "--port", "0"])
            .args(extra)
            .env("CAKE_CLUSTER_KEY", key)
            .env("RAYON_NUM_THREADS", "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(bytes) = max_memory {
            command.args(["--max-memory", &bytes.to_string()]);
        }
        let mut child = command.spawn().expect("cake worker starts");
        let address = super::ready_address(child.stdout.take().unwrap());
        let lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let log = Arc::new(Mutex::new(Vec::new()));
        let kept = log.clone();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                kept.lock().unwrap().push(line);
            }
        });
        Self { child, address, data, log }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
