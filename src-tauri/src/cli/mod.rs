//! The `cake` command line: argument parsing and dispatch.

mod chat;
mod library;
pub mod logging;
mod perplexity;
mod run;
mod serve;
mod stopped;
mod tts;
mod worker;

use crate::cluster::cluster_key::ClusterKey;
use crate::cluster::decode_steps::DecodeSteps;
use crate::cluster::discovery::scope_from;
use crate::cluster::master::ClusterSettings;
use crate::cluster::protocol::HiddenRoute;
use crate::cluster::protocol::WireFormat;
use crate::cluster::topology::Topology;
use crate::library::resolve_model;
use crate::models::gpu_offload::{GpuMode, GpuRequest, LayerCount};
use crate::models::loader::ComputeDtype;
use crate::text::model::{LoadOptions, TextModel};
use crate::text::sampling::{SamplingOverrides, SamplingParams};
use anyhow::{bail, Context, Result};
use candle_core::DType;
use clap::{Args, Parser, Subcommand};

#[derive(Parser)]
#[command(name = "cake", version, about = "Run language models on one machine or across a LAN")]
pub struct Cli {
    /// What to do; without one, Cake opens its desktop window.
    #[command(subcommand)]
    pub command: Option<Command>,
    /// With no command: start without the window while serving as a worker
    /// (how Start at login runs Cake).
    #[arg(long)]
    pub background: bool,
}

#[derive(Subcommand)]
pub enum Command {
    /// Generate text from a prompt, streamed as it is produced.
    Run(run::RunArgs),
    /// Chat with a model in the terminal (multi-turn, streamed).
    Chat(chat::ChatArgs),
    /// Download a model from the Hugging Face hub into the shared cache.
    Pull(library::PullArgs),
    /// List the models in the library.
    List(library::ListArgs),
    /// Delete a model from the library.
    Rm(library::RmArgs),
    /// Offer this machine's memory and compute to a cluster.
    Worker(worker::WorkerArgs),
    /// Serve the web UI, the app API and the OpenAI-compatible API over HTTP.
    Serve(serve::ServeArgs),
    /// Score a text: per-token negative log-likelihood and perplexity.
    Perplexity(perplexity::PerplexityArgs),
    /// Speak a text or script in the voices of WAV files (VibeVoice).
    Tts(tts::TtsArgs),
}

/// Options every command that loads a model shares.
#[derive(Args, Debug, Clone)]
pub struct ModelArgs {
    /// A GGUF file, a model folder, or a Hugging Face id in the local cache
    /// (default: the embedded SmolLM2-135M-Instruct).
    #[arg(long)]
    pub model: Option<String>,
    /// Weights and activation dtype (default: as stored; GGUF weights stay quantized).
    #[arg(long, value_enum)]
    pub dtype: Option<ComputeDtype>,
    /// Worker threads for the CPU kernels (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Tokens a conversation may hold, prompt and reply (default: the
    /// model's own context, at most 8192). Caches and cluster plans are
    /// sized for it.
    #[arg(long = "ctx")]
    pub context_length: Option<usize>,
    /// The picture reader of a GGUF vision model: llama.cpp's mmproj file
    /// (default: an `*mmproj*.gguf` file beside the model's).
    #[arg(long = "mmproj", value_name = "PATH")]
    pub picture_reader: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub gpu: GpuArgs,
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

/// Which layers run on this machine's GPU.
#[derive(Args, Debug, Clone)]
pub struct GpuArgs {
    /// Run layers on the GPU: off, auto (a hardware GPU if the machine has
    /// one), or on (any GPU driver, software ones such as Mesa's lavapipe
    /// included). Without a usable GPU the CPU runs everything, and the
    /// load log says why. Default: the app's setting, else off.
    #[arg(long, value_enum)]
    pub gpu: Option<GpuMode>,
    /// How many layers the GPU runs, the first ones: a number, or `all` /
    /// `auto` (the default): all it can run within --gpu-memory, or else
    /// within its free memory less a spare share.
    #[arg(long = "gpu-layers")]
    pub gpu_layers: Option<LayerCount>,
    /// Bytes of GPU memory the layers' weights and full-context caches may
    /// take (default: the free memory the driver reports, less 512 MiB or a
    /// twentieth).
    #[arg(long = "gpu-memory")]
    pub gpu_memory: Option<u64>,
}

impl GpuArgs {
    /// What these flags ask of the GPU (`--gpu` unset: off).
    pub fn request(&self) -> GpuRequest {
        GpuRequest {
            mode: self.gpu.unwrap_or_default(),
            layers: self.gpu_layers.and_then(LayerCount::cap),
            memory: self.gpu_memory,
        }
    }
}

/// Running over workers: their addresses and the shared key.
#[derive(Args, Debug, Clone)]
pub struct ClusterArgs {
    /// A worker to run layers on, as host:port (repeatable).
    #[arg(long = "worker")]
    pub workers: Vec<String>,
    /// The cluster key the workers were started with (or $CAKE_CLUSTER_KEY).
    #[arg(long, env = "CAKE_CLUSTER_KEY", hide_env_values = true)]
    pub cluster_key: Option<String>,
    /// Bytes of memory this machine may give the model: weights, KV cache
    /// and working memory (default: nine tenths of its available memory).
    #[arg(long)]
    pub max_memory: Option<u64>,
    /// Seconds to look for workers over mDNS (with a cluster key and no --worker).
    #[arg(long, default_value_t = 3.0)]
    pub discovery_timeout: f64,
    /// Restrict mDNS to this interface (repeatable; `lo` = IPv4 loopback only).
    #[arg(long = "mdns-iface")]
    pub mdns_interfaces: Vec<String>,
    /// A YAML file naming the workers and, optionally, their layers
    /// (instead of discovering them; see docs/cluster.md).
    #[arg(long)]
    pub topology: Option<std::path::PathBuf>,
    /// How hidden states travel between machines: f32 (exact: the same
    /// tokens as one machine) or f16 (half the bytes; with quantized weights
    /// it can change greedy tokens; a message with a value beyond f16's
    /// range goes in f32).
    #[arg(long, value_enum, default_value = "f32")]
    pub wire: WireFormat,
    /// Which way hidden states go between workers: worker-to-worker (each
    /// sends its result on to the next, the last back to this machine) or
    /// through-master (every worker answers this machine).
    #[arg(long, value_enum, default_value = "worker-to-worker")]
    pub hidden_route: HiddenRoute,
    /// How the decode steps of several conversations go through the
    /// machines: pipelined (split into groups, each machine working on a
    /// different one at once), one-at-a-time (all together, machine after
    /// machine), or auto (pipelined unless machines share a kernel, and so
    /// its cores: processes or containers of one host).
    #[arg(long, value_enum, default_value = "auto")]
    pub decode_steps: DecodeSteps,
}

impl ClusterArgs {
    /// The cluster settings, when a key or workers were given.
    pub fn settings(&self) -> Result<Option<ClusterSettings>> {
        if self.cluster_key.is_none() && self.workers.is_empty() && self.topology.is_none() {
            return Ok(None);
        }
        let mut settings = ClusterSettings::new(
            self.key()?,
            scope_from(&self.mdns_interfaces),
            std::time::Duration::from_secs_f64(self.discovery_timeout.max(0.0)),
        );
        settings.workers = self.workers.clone();
        settings.master_memory = self.max_memory;
        settings.wire_format = self.wire;
        settings.hidden_route = self.hidden_route;
        settings.decode_steps = self.decode_steps;
        settings.topology = self.topology.as_deref().map(Topology::from_file).transpose()?;
        Ok(Some(settings))
    }

    pub fn key(&self) -> Result<ClusterKey> {
        let text = self
            .cluster_key
            .as_deref()
            .context("workers need the cluster key: pass --cluster-key or set CAKE_CLUSTER_KEY")?;
        let key = ClusterKey::from_passphrase(text)?;
        if let Some(warning) = key.weakness() {
            eprintln!("warning: {warning}");
        }
        Ok(key)
    }
}

impl ModelArgs {
    /// How `--dtype`, `--ctx` and the GPU flags ask for the model to be loaded.
    pub fn load_options(&self) -> LoadOptions {
        LoadOptions {
            dtype: self.dtype.map(DType::from),
            context_length: self.context_length,
            gpu: self.gpu.request(),
            picture_reader: self.picture_reader.clone(),
            ..Default::default()
        }
    }

    /// Applies `--threads` before any kernel runs.
    pub fn apply_threads(&self) -> Result<()> {
        match self.threads {
            Some(n) => set_threads(n),
            None => Ok(()),
        }
    }
}

impl ModelArgs {
    /// Applies `--threads`, resolves `--model` and loads it. Also returns
    /// how long loading took, in seconds.
    pub fn load_model(&self) -> Result<(TextModel, f64)> {
        self.load_model_excluding(&[])
    }

    /// Like [`Self::load_model`], leaving out the workers at `excluded` addresses.
    pub fn load_model_excluding(&self, excluded: &[String]) -> Result<(TextModel, f64)> {
        self.apply_threads()?;
        let path = resolve_model(self.model.as_deref())?;
        let options = self.load_options();
        let start = std::time::Instant::now();
        let model = match self.cluster.settings()? {
            Some(cluster) => cluster.load(&path, &options, excluded, &mut progress_printer())?,
            None => TextModel::load(&path, &options)?,
        };
        let load_s = start.elapsed().as_secs_f64();
        let decoder = model.decoder();
        eprintln!(
            "kernels: {}; keys and values kept in {}",
            crate::models::kernel_census::describe(&decoder.kernels),
            decoder.kv_precision().name()
        );
        if self.gpu.request().mode != GpuMode::Off {
            eprintln!("{}", decoder.gpu.describe(decoder.config.num_hidden_layers()));
        }
        Ok((model, load_s))
    }
}

/// Prints loading progress to stderr, at most twice a second.
pub fn progress_printer() -> impl FnMut(f64, &str) {
    let mut last: Option<std::time::Instant> = None;
    move |fraction: f64, message: &str| {
        if last.is_none_or(|t| t.elapsed().as_millis() >= 500) || fraction >= 1.0 {
            last = Some(std::time::Instant::now());
            eprintln!("[{:>3.0}%] {message}", fraction * 100.0);
        }
    }
}

/// Sampling flags shared by the generating commands; unset flags keep the
/// model's defaults (its `generation_config.json`, else Cake's).
#[derive(Args, Debug, Clone)]
pub struct SamplingArgs {
    /// 0 is greedy.
    #[arg(long)]
    pub temperature: Option<f32>,
    /// Keep only the k most likely tokens (0 = off).
    #[arg(long)]
    pub top_k: Option<usize>,
    /// Nucleus sampling threshold (1 = off).
    #[arg(long)]
    pub top_p: Option<f32>,
    /// Drop tokens less likely than this fraction of the best (0 = off).
    #[arg(long)]
    pub min_p: Option<f32>,
    /// Penalise tokens already seen (1 = off).
    #[arg(long)]
    pub repeat_penalty: Option<f32>,
    /// Random seed (default: a fresh one each run).
    #[arg(long)]
    pub seed: Option<u64>,
}

impl SamplingArgs {
    /// The settings for `model`: its defaults with these flags applied.
    pub fn resolve(&self, model: &TextModel) -> SamplingParams {
        let overrides = SamplingOverrides {
            temperature: self.temperature,
            top_k: self.top_k,
            top_p: self.top_p,
            min_p: self.min_p,
            repeat_penalty: self.repeat_penalty,
            seed: Some(self.seed.unwrap_or_else(rand::random)),
        };
        overrides.apply_to(&model.sampling_defaults)
    }
}

/// Sets the number of CPU kernel threads; call before any kernel runs.
pub fn set_threads(n: usize) -> Result<()> {
    if n == 0 {
        bail!("--threads must be at least 1");
    }
    std::env::set_var("RAYON_NUM_THREADS", n.to_string());
    cake_kernels::pool::set_threads(n);
    // A second call fails harmlessly if the pool already exists.
    let _ = rayon::ThreadPoolBuilder::new().num_threads(n).build_global();
    Ok(())
}

/// Parses `1,2,3` into token ids.
pub fn parse_token_list(text: &str) -> Result<Vec<u32>> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<u32>().map_err(|_| anyhow::anyhow!("`{s}` is not a token id")))
        .collect()
}

/// Opens the desktop window, when this build has one.
fn open_window(background: bool) -> Result<()> {
    #[cfg(feature = "gui")]
    {
        crate::desktop::run(background)
    }
    #[cfg(not(feature = "gui"))]
    {
        let _ = background;
        bail!("this build of Cake has no desktop window (built without the `gui` feature): use `cake serve`, `cake chat` or `cake --help`")
    }
}

/// Prints a failed command's error and ends the process with status 1.
pub fn exit_on_error(outcome: Result<()>) {
    crate::models::sources::tile_cache::wait_for_commits();
    if let Err(error) = outcome {
        eprintln!("error: {error:#}");
        std::process::exit(1);
    }
}

pub fn main_with(cli: Cli) -> Result<()> {
    let Some(command) = cli.command else {
        logging::init(Some(&crate::files::paths::data_dir().join("cake.log")));
        return open_window(cli.background);
    };
    logging::init(None);
    match command {
        Command::Run(args) => run::run(args),
        Command::Chat(args) => chat::run(args),
        Command::Perplexity(args) => perplexity::run(args),
        Command::Serve(args) => serve::run(args),
        Command::Worker(args) => worker::run(args),
        Command::Pull(args) => library::pull(args),
        Command::List(args) => library::list(args),
        Command::Rm(args) => library::rm(args),
        Command::Tts(args) => tts::run(args),
    }
}
