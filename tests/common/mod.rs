//! Helpers shared by the integration tests: fixture paths and running the
//! `cake` binary.

#![allow(dead_code)]

pub mod fake_hub;
pub mod place;
pub mod server;
pub mod worker;

use serde_json::Value;
use std::path::PathBuf;
use std::process::{Command, Output};

/// A path under `tests/fixtures/`.
pub fn fixture(relative: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures").join(relative)
}

/// Runs `cake` with `args`, returning its output whatever the exit status.
pub fn cake(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cake"))
        .args(args)
        .env("RAYON_NUM_THREADS", "2")
        .output()
        .expect("the cake binary runs")
}

/// Runs `cake` with `args`, expects success and parses stdout as JSON.
pub fn cake_json(args: &[&str]) -> Value {
    let out = cake(args);
    assert!(out.status.success(), "cake {args:?} failed:\n{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("cake {args:?} printed no JSON ({e}):\n{}", String::from_utf8_lossy(&out.stdout)))
}

/// Runs `cake` with `args`, expects failure and returns stderr.
pub fn cake_error(args: &[&str]) -> String {
    let out = cake(args);
    assert!(
        !out.status.success(),
        "cake {args:?} should have failed but printed:\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

pub fn join_ids(ids: &[u64]) -> String {
    ids.iter().map(u64::to_string).collect::<Vec<_>>().join(",")
}
