//! The `cake` executable.

use clap::Parser;

/// How long candle's idle kernel threads spin before they sleep, unless
/// `CANDLE_BARRIER_POOL_SPIN_LIMIT` says otherwise. Candle's default
/// (25 000 spins, about a millisecond here) keeps a process that just
/// handed its hidden state to the next machine burning both cores while the
/// next stage starts; with master and workers sharing a CPU that cost the
/// cluster benchmark about 10% (0.80–0.83x against 0.91–0.92x with 2 000),
/// while one process alone ran at the same speed either way.
const KERNEL_SPIN_LIMIT: &str = "2000";

fn main() {
    if std::env::var_os("CANDLE_BARRIER_POOL_SPIN_LIMIT").is_none() {
        // Set before any thread starts: candle reads it when its pool is built.
        std::env::set_var("CANDLE_BARRIER_POOL_SPIN_LIMIT", KERNEL_SPIN_LIMIT);
    }
    let cli = cake::cli::Cli::parse();
    if let Err(error) = cake::cli::main_with(cli) {
        eprintln!("error: {error:#}");
        std::process::exit(1);
    }
}
