//! What a command says when a signal stops it: which signal, after how
//! long, and what it was doing. A `cake run` killed by a test harness's
//! timeout, a closed terminal or `kill` would otherwise end without a word
//! (its `--json` answer is printed only at the end), and nobody could tell
//! a hang in discovery from a slow load or a long reply.

use std::sync::Mutex;
use std::time::Instant;

/// What the command is doing now, in words ("loading the model").
static DOING: Mutex<String> = Mutex::new(String::new());

/// Records what the command is doing now, for the message a signal prints.
pub fn doing(what: impl Into<String>) {
    *DOING.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = what.into();
}

/// From now on, SIGTERM, SIGINT and SIGHUP end the process with a line on
/// stderr naming the signal, the time since this call and what it was
/// doing, and the shell's status for that signal (128 + its number).
/// SIGKILL cannot be caught: nothing can be said then.
pub fn say_why_when_stopped() -> anyhow::Result<()> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let started = Instant::now();
    let mut signals = signal_hook::iterator::Signals::new([SIGTERM, SIGINT, SIGHUP])?;
    std::thread::Builder::new().name("cake-signals".into()).spawn(move || {
        if let Some(signal) = signals.forever().next() {
            let name = match signal {
                SIGTERM => "SIGTERM",
                SIGINT => "SIGINT",
                _ => "SIGHUP",
            };
            let doing = DOING.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone();
            let doing = if doing.is_empty() { "starting".to_string() } else { doing };
            eprintln!("\nerror: stopped by {name} after {:.1} s, while {doing}", started.elapsed().as_secs_f64());
            std::process::exit(128 + signal);
        }
    })?;
    Ok(())
}
