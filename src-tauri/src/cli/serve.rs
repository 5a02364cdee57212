//! `cake serve`: the web UI, the app API and the OpenAI-compatible API.

use crate::app::events::{Done, EngineEvent};
use crate::app::App;
use crate::library::catalog::Catalog;
use crate::server::ServeOptions;
use crate::text::model::LoadOptions;
use anyhow::{Context, Result};
use clap::Args;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Model to load at start: a library id (`default`, `hf:org/name`), a
    /// GGUF file or a model folder (imported into the library). Repeat it
    /// to offer more (an embedding model beside a chat model, say): the
    /// first is loaded at start, the others on their first request.
    #[arg(long)]
    pub model: Vec<String>,
    /// Address to listen on; loopback unless you choose otherwise.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    #[arg(long, default_value_t = 8080)]
    pub port: u16,
    /// The key clients must send (`Authorization: Bearer …`, or the UI's
    /// login page); required to serve on anything but loopback.
    #[arg(long, env = "CAKE_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// A host name clients may use to reach this server besides its
    /// addresses and `<hostname>.local` (repeatable).
    #[arg(long = "allow-host")]
    pub allowed_hosts: Vec<String>,
    /// Worker threads for the CPU kernels (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Tokens a conversation may hold (default: the Cluster screen's
    /// setting, else the model's own context up to 8192).
    #[arg(long = "ctx")]
    pub context_length: Option<usize>,
    #[command(flatten)]
    pub gpu: super::GpuArgs,
    #[command(flatten)]
    pub cluster: super::ClusterArgs,
}

pub fn run(args: ServeArgs) -> Result<()> {
    if let Some(n) = args.threads {
        super::set_threads(n)?;
    }
    let catalog = Catalog::default();
    let mut named = Vec::with_capacity(args.model.len());
    for spec in &args.model {
        named.push(match catalog.find(spec) {
            Ok(entry) => entry,
            Err(_) => catalog
                .import(std::path::Path::new(spec))
                .with_context(|| format!("--model {spec}: not a library id, and cannot import it"))?,
        });
    }
    // The first is loaded at start; the others wait for their first request.
    let preload = named.into_iter().next();
    // Without --gpu, the app's setting (the Models screen) decides.
    let gpu = args.gpu.gpu.is_some().then(|| args.gpu.request());
    let options = LoadOptions { context_length: args.context_length, ..Default::default() };
    let app = Arc::new(App::with_cluster(catalog, options, args.cluster.settings()?, gpu));
    if let Some(entry) = preload {
        eprintln!("loading {} …", entry.name);
        app.engine.load(entry, Box::new(report_preload), Arc::new(AtomicBool::new(false)));
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let options = ServeOptions {
        host: args.host,
        port: args.port,
        api_key: args.api_key.filter(|key| !key.is_empty()),
        allowed_hosts: args.allowed_hosts,
    };
    runtime.block_on(crate::server::serve(app, options))
}

/// Prints the outcome of loading the `--model` at start.
fn report_preload(event: EngineEvent) -> bool {
    match event {
        EngineEvent::Done(Done::Model { model }) => eprintln!("model loaded: {}", model.name),
        EngineEvent::Error { message, .. } => eprintln!("error: {message}"),
        _ => {}
    }
    true
}
