//! `cake worker`: join a cluster headless. Once it listens it prints
//! `{"ready": "<address>"}` on a line of its own on stdout.

use crate::cluster::cluster_key::ClusterKey;
use crate::cluster::discovery::{advertise, scope_from};
use crate::cluster::worker::{start, WorkerConfig};
use crate::models::gpu_offload::LayerCount;
use crate::startup::systemd;
use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use std::net::TcpListener;

#[derive(Args, Debug)]
pub struct WorkerArgs {
    /// The key every machine of the cluster shares (or $CAKE_CLUSTER_KEY).
    #[arg(long, env = "CAKE_CLUSTER_KEY", hide_env_values = true, required_unless_present_any = ["generate_key", "uninstall_service"])]
    pub cluster_key: Option<String>,
    /// Make a new cluster key, print it, and serve with it.
    #[arg(long, conflicts_with = "cluster_key")]
    pub generate_key: bool,
    /// This machine's name in the cluster (default: its host name).
    #[arg(long)]
    pub name: Option<String>,
    /// Address to listen on.
    #[arg(long, default_value = "0.0.0.0")]
    pub host: String,
    /// Port to listen on (0 picks a free one).
    #[arg(long, default_value_t = 10128)]
    pub port: u16,
    /// Bytes of memory to give the layers it runs: weights, KV cache and
    /// working memory (default: nine tenths of the machine's available memory).
    #[arg(long)]
    pub max_memory: Option<u64>,
    /// Worker threads for the CPU kernels (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Restrict mDNS to this interface (repeatable; `lo` = IPv4 loopback only).
    #[arg(long = "mdns-iface")]
    pub mdns_interfaces: Vec<String>,
    /// Do not advertise over mDNS (masters must name this worker with --worker).
    #[arg(long)]
    pub no_mdns: bool,
    /// The layers a master gives this worker on its GPU.
    #[command(flatten)]
    pub gpu: super::GpuArgs,
    /// Instead of serving now, write a systemd user unit that serves with
    /// these options at every login, and start it (docs/packaging.md).
    #[arg(long, conflicts_with = "uninstall_service")]
    pub install_service: bool,
    /// Stop the worker's systemd user unit and remove it.
    #[arg(long)]
    pub uninstall_service: bool,
}

impl WorkerArgs {
    /// These options as `cake worker` arguments, for the service's command line.
    fn service_arguments(&self) -> Vec<String> {
        let mut arguments = vec!["worker".to_string()];
        let mut option = |flag: &str, value: Option<String>| {
            if let Some(value) = value {
                arguments.extend([flag.to_string(), value]);
            }
        };
        option("--name", self.name.clone());
        option("--host", Some(self.host.clone()));
        option("--port", Some(self.port.to_string()));
        option("--max-memory", self.max_memory.map(|bytes| bytes.to_string()));
        option("--threads", self.threads.map(|n| n.to_string()));
        option("--gpu", self.gpu.gpu.and_then(|mode| mode.to_possible_value()).map(|v| v.get_name().to_string()));
        option("--gpu-layers", self.gpu.gpu_layers.and_then(LayerCount::cap).map(|n| n.to_string()));
        option("--gpu-memory", self.gpu.gpu_memory.map(|bytes| bytes.to_string()));
        for interface in &self.mdns_interfaces {
            option("--mdns-iface", Some(interface.clone()));
        }
        if self.no_mdns {
            arguments.push("--no-mdns".into());
        }
        arguments
    }
}

pub fn run(args: WorkerArgs) -> Result<()> {
    if args.uninstall_service {
        let removed = systemd::uninstall()?;
        if removed.is_empty() {
            println!("no worker service was installed");
        }
        for path in removed {
            println!("removed {}", path.display());
        }
        return Ok(());
    }
    if let Some(n) = args.threads {
        super::set_threads(n)?;
    }
    let key_text = match args.cluster_key.clone() {
        Some(text) => text,
        None => {
            let text = ClusterKey::generate();
            println!("New cluster key (type or paste it on the other machines of this cluster):\n\n    {text}\n");
            text
        }
    };
    let key = ClusterKey::from_passphrase(&key_text)?;
    if let Some(warning) = key.weakness() {
        eprintln!("warning: {warning}");
    }
    if args.install_service {
        return install_service(&args, &key_text);
    }
    let name = args.name.unwrap_or_else(|| {
        std::fs::read_to_string("/etc/hostname").map_or_else(|_| "worker".into(), |h| h.trim().to_string())
    });
    let listener = TcpListener::bind((args.host.as_str(), args.port))
        .with_context(|| format!("cannot listen on {}:{}", args.host, args.port))?;
    let port = listener.local_addr()?.port();
    let _advertisement =
        if args.no_mdns { None } else { Some(advertise(&name, port, &key, &scope_from(&args.mdns_interfaces))?) };
    let worker = start(
        listener,
        WorkerConfig {
            name,
            key,
            cache_dir: crate::files::paths::data_dir().join("worker-cache"),
            memory_bytes: args.max_memory,
            idle_timeout: crate::cluster::worker::IDLE_TIMEOUT,
            gpu: args.gpu.request(),
        },
    )?;
    // The machine-readable signal scripts and tests wait for: one JSON line.
    println!("{}", serde_json::json!({"ready": worker.address.to_string()}));
    std::io::Write::flush(&mut std::io::stdout())?;
    worker.wait();
    Ok(())
}

fn install_service(args: &WorkerArgs, key_text: &str) -> Result<()> {
    let executable = std::env::current_exe()
        .and_then(|exe| exe.canonicalize())
        .context("cannot tell where this program is, for the service's command line")?;
    let installed = systemd::install(&executable, &args.service_arguments(), key_text)?;
    println!(
        "wrote {} (the cluster key is in {}, readable by you only)",
        installed.unit.display(),
        installed.key_file.display()
    );
    match installed.enabled {
        Ok(()) => println!(
            "the worker runs now and at every login; to keep it running while nobody is logged in: \
             loginctl enable-linger {}",
            std::env::var("USER").unwrap_or_else(|_| "$USER".into())
        ),
        Err(problem) => eprintln!(
            "warning: the unit is written but not started: {problem}\n\
             start it from a login session with `systemctl --user enable --now {}`",
            systemd::UNIT_NAME
        ),
    }
    Ok(())
}
