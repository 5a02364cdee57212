//! What this machine can offer the cluster: OS, CPU, devices, memory for
//! a model's share, and a quick estimate of how fast it streams weights.

use super::protocol::WorkerInfo;
use std::time::Instant;

/// Bytes a model's share may take when no limit is set: nine tenths of
/// the memory available, a tenth left to the system and other programs.
pub fn usable_memory_bytes() -> u64 {
    let available = available_memory_bytes();
    available - available / 10
}

/// Bytes of memory the OS reports as available (Linux `MemAvailable`).
fn available_memory_bytes() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| l.starts_with("MemAvailable:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .map_or(4 << 30, |kb| kb * 1024)
}

fn cpu_name() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| t.lines().find(|l| l.starts_with("model name"))?.split(':').nth(1).map(|s| s.trim().to_string()))
        .unwrap_or_else(|| std::env::consts::ARCH.to_string())
}

/// Weight bytes per second a matrix–vector product streams here, measured
/// on a 16 MiB matrix (a rough stand-in for decoding speed).
pub fn measure_bytes_per_second() -> f64 {
    let rows = 4096;
    let cols = 1024;
    let matrix: Vec<f32> = (0..rows * cols).map(|i| (i % 7) as f32 * 0.1).collect();
    let vector: Vec<f32> = (0..cols).map(|i| (i % 5) as f32 * 0.2).collect();
    let mut best = f64::INFINITY;
    let mut sink = 0f32;
    for _ in 0..3 {
        let start = Instant::now();
        for row in matrix.chunks_exact(cols) {
            sink += row.iter().zip(&vector).map(|(a, b)| a * b).sum::<f32>();
        }
        best = best.min(start.elapsed().as_secs_f64());
    }
    std::hint::black_box(sink);
    (rows * cols * 4) as f64 / best.max(1e-6)
}

/// This machine as a worker describes itself.
pub fn describe(name: &str, memory_limit: Option<u64>) -> WorkerInfo {
    WorkerInfo {
        name: name.to_string(),
        os: format!("{} {}", std::env::consts::OS, std::env::consts::ARCH),
        cpu: cpu_name(),
        devices: vec!["cpu".into()],
        memory_bytes: memory_limit.unwrap_or_else(usable_memory_bytes),
        bytes_per_second: measure_bytes_per_second(),
    }
}
