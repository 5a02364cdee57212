//! One master and two workers on three "machines": network namespaces of
//! the test's own, joined by veth pairs to a bridge in a fourth namespace,
//! with 10.77.x addresses. mDNS runs with its default settings (all
//! interfaces of each namespace), as on a real LAN. Needs root; elsewhere
//! the test says so and does nothing.

mod common;

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

const KEY: &str = "namespace cluster key";

fn ip(args: &[&str]) -> bool {
    Command::new("ip").args(args).stderr(Stdio::null()).status().is_ok_and(|s| s.success())
}

/// The namespaces and links of the test network; removed when dropped.
struct TestNetwork {
    bridge: String,
    hosts: Vec<String>,
}

impl TestNetwork {
    /// `count` hosts at 10.77.<subnet>.1, .2, …; `None` when namespaces cannot be made.
    fn create(count: usize, subnet: u8) -> Option<Self> {
        let tag = format!("{}-{subnet}", std::process::id());
        let bridge = format!("cakebr-{tag}");
        if !ip(&["netns", "add", &bridge]) {
            return None;
        }
        let mut network = Self { bridge: bridge.clone(), hosts: Vec::new() };
        let ok = ip(&["-n", &bridge, "link", "add", "br0", "type", "bridge"])
            && ip(&["-n", &bridge, "link", "set", "br0", "up"]);
        assert!(ok, "cannot create the bridge");
        for i in 0..count {
            let host = format!("cakeh{i}-{tag}");
            assert!(ip(&["netns", "add", &host]), "cannot create namespace {host}");
            network.hosts.push(host.clone());
            let (inside, outside) = (format!("veth{i}"), format!("port{i}"));
            let address = format!("10.77.{subnet}.{}/24", i + 1);
            let steps: [&[&str]; 8] = [
                &["link", "add", &inside, "netns", &host, "type", "veth", "peer", "name", &outside, "netns", &bridge],
                &["-n", &bridge, "link", "set", &outside, "master", "br0"],
                &["-n", &bridge, "link", "set", &outside, "up"],
                &["-n", &host, "addr", "add", &address, "dev", &inside],
                &["-n", &host, "link", "set", &inside, "up"],
                &["-n", &host, "link", "set", "lo", "up"],
                &["netns", "exec", &host, "sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1"],
                &["-n", &host, "route", "add", "224.0.0.0/4", "dev", &inside],
            ];
            for step in steps {
                assert!(ip(step), "network set-up failed at `ip {}`", step.join(" "));
            }
        }
        Some(network)
    }

    fn command(&self, host: usize) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.hosts[host], env!("CARGO_BIN_EXE_cake")]);
        c.env("RAYON_NUM_THREADS", "1").env("CAKE_CLUSTER_KEY", KEY);
        c
    }
}

impl Drop for TestNetwork {
    fn drop(&mut self) {
        for ns in self.hosts.iter().chain(std::iter::once(&self.bridge)) {
            ip(&["netns", "del", ns]);
        }
    }
}

struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_worker(network: &TestNetwork, host: usize, name: &str, max_memory: u64, data: &std::path::Path) -> Process {
    let mut child = network
        .command(host)
        .env("CAKE_DATA_DIR", data)
        .args(["worker", "--name", name, "--port", "10128", "--max-memory", &max_memory.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    common::ready_address(child.stdout.take().unwrap());
    let lines = BufReader::new(child.stderr.take().unwrap()).lines();
    std::thread::spawn(move || for _ in lines {});
    Process(child)
}

#[test]
fn master_and_two_workers_in_three_namespaces_discover_each_other_and_generate() {
    let Some(network) = TestNetwork::create(3, 1) else {
        eprintln!("SKIPPED: creating network namespaces needs root; the namespace cluster test did not run");
        return;
    };
    // The default model, a third of its layers on each machine (the memory caps leave one choice).
    let model = common::server::default_model_file();
    let n = common::layer_count(&model);
    let third = n / 3;
    let data = tempfile::tempdir().unwrap();
    let _a =
        start_worker(&network, 1, "ns-a", common::share(&model, None, third..2 * third, false), &data.path().join("a"));
    let _b =
        start_worker(&network, 2, "ns-b", common::share(&model, None, 2 * third..n, false), &data.path().join("b"));
    let run = ["run", "--model", model.to_str().unwrap(), "--prompt", "The capital of France is", "--max-tokens", "16"];
    let greedy = ["--temperature", "0", "--ignore-eos", "--json"];
    let single = common::cake_json(&[&run[..], &greedy[..]].concat());
    let out = network
        .command(0)
        .args(run)
        .args(greedy)
        .args(["--discovery-timeout", "5", "--max-memory", &common::share(&model, None, 0..third, true).to_string()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("found worker ns-a at 10.77.1.2") && err.contains("found worker ns-b at 10.77.1.3"), "{err}");
    for name in ["ns-a", "ns-b"] {
        let plan = err.lines().find(|l| l.starts_with(&format!("{name}: layers"))).unwrap_or_else(|| panic!("{err}"));
        assert!(!plan.contains("no layers"), "{plan}");
    }
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(result["tokens"], single["tokens"]);
}
