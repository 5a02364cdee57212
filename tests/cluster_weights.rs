//! Workers with no model on disk receive exactly the weights of their
//! layers from the master, resume a transfer that was cut, and reuse their
//! cache the next time.

mod common;

use cake::formats::gguf::GgufFile;
use common::cake_json;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;

const KEY: &str = "weight streaming key";

struct Worker {
    child: Child,
    address: String,
    lines: mpsc::Receiver<String>,
}

impl Worker {
    fn start(data: &Path) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_cake"))
            .args(["worker", "--name", "empty", "--host", "127.0.0.1", "--port", "0", "--no-mdns"])
            .env("CAKE_CLUSTER_KEY", KEY)
            .env("CAKE_DATA_DIR", data)
            .env("RAYON_NUM_THREADS", "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let address = common::ready_address(child.stdout.take().unwrap());
        let (tx, lines) = mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        Self { child, address, lines }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn master(model: &Path, worker: &Worker, master_memory: u64) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_cake"));
    c.args(["run", "--model", model.to_str().unwrap(), "--prompt", "The capital of France is", "--max-tokens", "8"])
        .args(["--temperature", "0", "--ignore-eos", "--json", "--cluster-key", KEY, "--worker", &worker.address])
        .args(["--max-memory", &master_memory.to_string()])
        .env("RAYON_NUM_THREADS", "1");
    c
}

/// `(layers, bytes sent, bytes needed)` from the master's report.
fn transfer_report(stderr: &str) -> (String, u64, u64) {
    let line = stderr.lines().find(|l| l.contains("bytes of weights sent")).unwrap_or_else(|| panic!("{stderr}"));
    let layers = line.split("layers ").nth(1).unwrap().split(' ').next().unwrap().to_string();
    let numbers: Vec<u64> = line.split(|c: char| !c.is_ascii_digit()).filter_map(|s| s.parse().ok()).collect();
    let n = numbers.len();
    (layers, numbers[n - 2], numbers[n - 1])
}

/// Header bytes plus the data of the tensors of layers `start..end`.
fn expected_bytes(model: &Path, start: usize, end: usize) -> u64 {
    let file = GgufFile::open(model).unwrap();
    let mut total = file.header.tensor_data_offset;
    for (name, info) in &file.header.tensor_infos {
        let layer: Option<usize> = name.strip_prefix("blk.").and_then(|r| r.split('.').next()?.parse().ok());
        if layer.is_some_and(|l| (start..end).contains(&l)) {
            total += info.byte_size();
        }
    }
    total
}

#[test]
fn a_worker_receives_only_its_layers_resumes_a_cut_transfer_and_reuses_its_cache() {
    let model = common::server::default_model_file();
    let master_memory = common::share(&model, None, 0..10, true);
    let single = cake_json(&[
        "run",
        "--model",
        model.to_str().unwrap(),
        "--prompt",
        "The capital of France is",
        "--max-tokens",
        "8",
        "--temperature",
        "0",
        "--ignore-eos",
        "--json",
    ]);
    let data = tempfile::tempdir().unwrap();

    // 1. A transfer cut short: the master dies after the first chunk arrives.
    let worker = Worker::start(data.path());
    let mut doomed =
        master(&model, &worker, master_memory).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    loop {
        let line = worker.lines.recv().expect("the worker reports chunks");
        if line.contains("received chunk") {
            break;
        }
    }
    doomed.kill().unwrap();
    doomed.wait().unwrap();

    // 2. The next run sends only what is missing, and the output is right.
    let out = master(&model, &worker, master_memory).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let (range, sent, needed) = transfer_report(&stderr);
    let (start, end) = range.split_once("..").unwrap();
    let expected = expected_bytes(&model, start.parse().unwrap(), end.trim_end_matches(',').parse().unwrap());
    assert_eq!(needed, expected, "the worker needs exactly the header and its layers' tensors");
    assert!(needed < std::fs::metadata(&model).unwrap().len() * 3 / 4, "not the whole model");
    assert!(sent > 0 && sent < needed, "resumed: sent {sent} of {needed}");
    let result: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(result["tokens"], single["tokens"]);

    // 3. Next time the cache answers: no weights cross the network.
    let out = master(&model, &worker, master_memory).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let (_, sent, _) = transfer_report(&stderr);
    assert_eq!(sent, 0, "{stderr}");
    let result: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(result["tokens"], single["tokens"]);
    drop(worker);

    // 4. A restarted worker keeps its cache too.
    let worker = Worker::start(data.path());
    let out = master(&model, &worker, master_memory).output().unwrap();
    assert_eq!(transfer_report(&String::from_utf8_lossy(&out.stderr)).1, 0);
}
