//! Loading a model split over this machine and its workers.
//!
//! The master measures itself, asks each worker what it offers, plans the
//! layer ranges ([`super::assignment`]), has every worker with layers load
//! them, and loads its own range together with the embedding and the head.
//! Workers that get no layers are not used.

use super::assignment::{plan, NodeCapacity, Plan};
use super::machine;
use super::remote::RemoteWorker;
use super::weight_transfer::ModelManifest;
use crate::models::loader::{dtype_name, Checkpoint, LoadOptions};
use crate::models::sources::selection::TensorSelection;
use crate::text::model::{RemoteStage, TextModel};
use anyhow::{Context, Result};
use std::path::Path;
use std::sync::Arc;

/// Loads `path` over this machine (allowed `master_memory` bytes, default
/// all available) and `workers`; returns the model and the plan used.
pub fn load_distributed(
    path: &Path,
    options: &LoadOptions,
    workers: Vec<RemoteWorker>,
    master_memory: Option<u64>,
) -> Result<(TextModel, Plan)> {
    let path = std::fs::canonicalize(path).with_context(|| format!("{}: no such model", path.display()))?;
    let checkpoint = Checkpoint::open(&path)?;
    let (layer_bytes, other_bytes) = checkpoint.layer_bytes()?;
    let me = machine::describe("master", master_memory);
    let mut nodes = vec![NodeCapacity {
        name: me.name.clone(),
        memory_bytes: me.memory_bytes,
        bytes_per_second: me.bytes_per_second,
    }];
    nodes.extend(workers.iter().map(|w| NodeCapacity {
        name: w.info.name.clone(),
        memory_bytes: w.info.memory_bytes,
        bytes_per_second: w.info.bytes_per_second,
    }));
    let plan = plan(&layer_bytes, other_bytes, &nodes)?;
    let dtype = options.dtype.map(dtype_name);
    let mut stages = Vec::new();
    for (worker, stage) in workers.into_iter().zip(&plan.stages[1..]) {
        if stage.layers.is_empty() {
            continue;
        }
        let selection = TensorSelection {
            layers: stage.layers.clone(),
            embedding: false,
            head: false,
        };
        let manifest = ModelManifest::for_selection(&path, &selection, checkpoint.config().tie_word_embeddings)?;
        let sent = worker
            .load(&path, &manifest, stage.layers.start, stage.layers.end, dtype)
            .with_context(|| format!("worker {} could not load layers {:?}", worker.info.name, stage.layers))?;
        eprintln!(
            "worker {}: layers {:?} ready ({sent} bytes of weights sent, {} needed)",
            worker.info.name,
            stage.layers,
            manifest.total_bytes()
        );
        stages.push(RemoteStage {
            worker: Arc::new(worker),
            layers: stage.layers.clone(),
        });
    }
    let selection = TensorSelection {
        layers: plan.stages[0].layers.clone(),
        embedding: true,
        head: true,
    };
    let decoder = checkpoint.load_decoder(Some(selection), options)?;
    let model = TextModel::assemble(&path, &checkpoint, decoder, stages)?;
    Ok((model, plan))
}

/// How a master finds and uses its workers.
#[derive(Debug, Clone)]
pub struct ClusterSettings {
    pub key: super::secure_channel::ClusterKey,
    /// Workers named explicitly (host:port); when empty, found over mDNS.
    pub workers: Vec<String>,
    pub mdns: super::discovery::MdnsScope,
    pub discovery_timeout: std::time::Duration,
    /// Bytes of weights this machine may hold (default: its available memory).
    pub master_memory: Option<u64>,
}

impl ClusterSettings {
    /// The addresses of the workers to use now (discovering them if none were named).
    pub fn worker_addresses(&self) -> Result<Vec<String>> {
        if !self.workers.is_empty() {
            return Ok(self.workers.clone());
        }
        let found = super::discovery::discover(&self.key, self.discovery_timeout, &self.mdns)?;
        for worker in &found {
            eprintln!("found worker {}", worker.describe());
        }
        Ok(found.iter().map(|w| w.address.to_string()).collect())
    }

    /// Loads `path` over this machine and the workers that answer; workers
    /// that cannot be reached are left out with a warning.
    pub fn load(&self, path: &Path, options: &LoadOptions) -> Result<TextModel> {
        let mut workers = Vec::new();
        for address in self.worker_addresses()? {
            match RemoteWorker::connect(&address, &self.key) {
                Ok(worker) => workers.push(worker),
                Err(e) => eprintln!("leaving out {address}: {e:#}"),
            }
        }
        let (model, plan) = load_distributed(path, options, workers, self.master_memory)?;
        for stage in &plan.stages {
            eprintln!("{}: layers {:?} — {}", stage.node, stage.layers, stage.reason);
        }
        Ok(model)
    }
}
