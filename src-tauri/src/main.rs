//! The `cake` executable.

use clap::Parser;

/// How long candle's idle kernel threads spin before they sleep, unless
/// `CANDLE_BARRIER_POOL_SPIN_LIMIT` says otherwise. Candle's default
/// (25 000 spins, about a millisecond here) keeps a process that just
/// handed its hidden state to the next machine burning both cores while the
/// next stage starts (measured: docs/benchmarks.md, "Tuning constants").
const KERNEL_SPIN_LIMIT: &str = "2000";

/// Allocations at least this large get their own fresh mapping from glibc.
/// Its default adapts up from 128 KiB, but not before a prompt's temporary
/// tensors (megabytes each, allocated and freed by every op) have each cost
/// a mapping, a page fault per page and an unmapping (measured:
/// docs/benchmarks.md, "Tuning constants").
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MMAP_THRESHOLD: libc::c_int = 32 << 20;
/// Free memory at the top of the heap kept for reuse rather than returned.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const TRIM_THRESHOLD: libc::c_int = 256 << 20;

fn main() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: called before any other thread starts or allocates much.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
        libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD);
    }
    if std::env::var_os("CANDLE_BARRIER_POOL_SPIN_LIMIT").is_none() {
        // Set before any thread starts: candle reads it when its pool is built.
        std::env::set_var("CANDLE_BARRIER_POOL_SPIN_LIMIT", KERNEL_SPIN_LIMIT);
    }
    cake::cli::exit_on_error(cake::cli::main_with(cake::cli::Cli::parse()));
}
