//! Which of a model's layers run on the GPU: what was asked (`--gpu`,
//! `--gpu-layers`, `--gpu-memory`), the GPU opened once per process, and
//! what the load chose, for the load log and `cake run --json`.

use super::sources::selection::layer_ranges;
use cake_gpu::attention::{GpuKvCache, KvPrecision};
use cake_gpu::{Gpu, GpuOptions, Unavailable};
use serde::Serialize;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// Whether to use a GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum GpuMode {
    /// The CPU only.
    #[default]
    Off,
    /// A hardware GPU if the machine has one, else the CPU.
    Auto,
    /// Any GPU driver, one that computes on the CPU included (Mesa's
    /// lavapipe: for testing the GPU path on machines without a GPU).
    On,
}

/// What a load asks of the GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GpuRequest {
    pub mode: GpuMode,
    /// At most this many layers (the first ones); `None`: all that fit.
    pub layers: Option<usize>,
    /// Bytes of VRAM the weights and caches may take; `None`: no cap.
    pub memory: Option<u64>,
}

/// The GPU for `mode`, opened on first use and shared by every load of
/// the process; `Err` says why there is none.
pub fn shared_gpu(mode: GpuMode) -> Result<Arc<Gpu>, Unavailable> {
    /// The outcome of opening, by whether software drivers were allowed.
    type Opened = HashMap<bool, Result<Arc<Gpu>, Unavailable>>;
    static OPENED: OnceLock<Mutex<Opened>> = OnceLock::new();
    let allow_software = mode == GpuMode::On;
    let mut opened = OPENED.get_or_init(Mutex::default).lock().unwrap_or_else(|e| e.into_inner());
    opened
        .entry(allow_software)
        .or_insert_with(|| Gpu::open(GpuOptions { allow_software, ..Default::default() }).map(Arc::new))
        .clone()
}

/// Where a load put the layers, as the load log and `--json` show it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct GpuPlacement {
    /// The GPU used, e.g. `NVIDIA H100 (Vulkan, discrete)`; `None` when
    /// every layer is on the CPU.
    pub device: Option<String>,
    /// The model's layers on the GPU.
    pub layers: Vec<usize>,
    /// Bytes of VRAM the layers' weights take.
    pub weight_bytes: u64,
    /// Why layers (or all of them) stay on the CPU, one line each.
    pub cpu_reasons: Vec<String>,
}

impl GpuPlacement {
    /// One line for the load log.
    pub fn describe(&self, total_layers: usize) -> String {
        let mut line = match &self.device {
            Some(device) if !self.layers.is_empty() => format!(
                "GPU {device}: layers {} of {total_layers} ({:.1} MB of weights)",
                layer_ranges(&self.layers),
                self.weight_bytes as f64 / 1e6
            ),
            Some(device) => format!("GPU {device}: no layers"),
            None => "CPU only".to_string(),
        };
        if !self.cpu_reasons.is_empty() {
            line.push_str(&format!("; {}", self.cpu_reasons.join("; ")));
        }
        line
    }
}

/// The GPU's name as placements show it.
pub fn device_name(gpu: &Gpu) -> String {
    let info = gpu.info();
    format!("{} ({}, {})", info.name, info.backend, info.kind.name())
}

/// VRAM a load may fill with layers: what the driver says is free, less
/// what stays spare for the kernels' working buffers, the driver and other
/// programs (512 MiB or a twentieth of the free memory, whichever is more).
/// `None` where the backend cannot tell (see [`Gpu::memory`]).
pub fn usable_vram(gpu: &Gpu) -> Option<u64> {
    Some(usable_of_free(gpu.memory()?.free_bytes))
}

/// [`usable_vram`] of `free` bytes.
fn usable_of_free(free: u64) -> u64 {
    free.saturating_sub((512u64 << 20).max(free / 20))
}

/// VRAM a layer's key/value cache is counted at while layers are placed:
/// f32 keys and values (the larger of the two precisions; the cache's own is
/// chosen once every layer is in).
pub fn layer_cache_vram(kv_heads: usize, head_dim: usize, context: usize) -> u64 {
    GpuKvCache::bytes_for(KvPrecision::F32, kv_heads, head_dim, context)
}

/// The rule that fills a GPU with layers, shared by the load (which places
/// them) and the cluster planner (which predicts the same placement): the
/// layers are offered in order, and the GPU takes each it can run until
/// the layer count or the VRAM would be exceeded; from then on, none.
#[derive(Debug, Clone)]
pub struct GpuFill {
    max_layers: Option<usize>,
    max_bytes: Option<u64>,
    taken_layers: usize,
    taken_bytes: u64,
    full: bool,
}

/// What [`GpuFill::offer`] decided for one layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FillOutcome {
    /// On the GPU.
    Taken,
    /// On the CPU: the GPU already holds the layers asked for.
    CountReached,
    /// On the CPU: it would go over the VRAM allowed.
    NoRoom,
    /// On the CPU: an earlier layer filled the GPU.
    Full,
}

impl GpuFill {
    /// At most `max_layers` layers and `max_bytes` of VRAM (`None`: no cap).
    pub fn new(max_layers: Option<usize>, max_bytes: Option<u64>) -> Self {
        Self { max_layers, max_bytes, taken_layers: 0, taken_bytes: 0, full: false }
    }

    /// Whether the GPU takes a layer needing `bytes` of VRAM.
    pub fn offer(&mut self, bytes: u64) -> FillOutcome {
        if self.full {
            return FillOutcome::Full;
        }
        if self.max_layers.is_some_and(|n| self.taken_layers >= n) {
            self.full = true;
            return FillOutcome::CountReached;
        }
        if self.max_bytes.is_some_and(|cap| self.taken_bytes.saturating_add(bytes) > cap) {
            self.full = true;
            return FillOutcome::NoRoom;
        }
        self.taken_layers += 1;
        self.taken_bytes += bytes;
        FillOutcome::Taken
    }

    /// Marks the GPU full (a layer failed to load): later layers stay off it.
    pub fn close(&mut self) {
        self.full = true;
    }

    /// Whether another layer could still be taken (before its size is
    /// known: a load checks this before uploading).
    pub fn takes_more(&self) -> bool {
        !self.full && self.max_layers.is_none_or(|n| self.taken_layers < n)
    }

    /// VRAM taken so far.
    pub fn taken_bytes(&self) -> u64 {
        self.taken_bytes
    }
}

/// `--gpu-layers`: all the layers the GPU can run and hold (`all`, or
/// `auto` as llama.cpp-style tools say it), or the first `n`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LayerCount {
    All,
    First(usize),
}

impl LayerCount {
    /// The cap on layers, if any.
    pub fn cap(self) -> Option<usize> {
        match self {
            Self::All => None,
            Self::First(n) => Some(n),
        }
    }
}

impl std::str::FromStr for LayerCount {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "all" | "auto" => Ok(Self::All),
            n => n.parse().map(Self::First).map_err(|_| format!("`{n}` is not a number of layers, `all` or `auto`")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layer_lists_read_as_ranges_and_counts_parse() {
        assert_eq!(layer_ranges(&[0, 1, 2, 5, 7, 8]), "0-2, 5, 7-8");
        assert_eq!(layer_ranges(&[]), "");
        assert_eq!("all".parse(), Ok(LayerCount::All));
        assert_eq!("auto".parse(), Ok(LayerCount::All));
        assert_eq!("12".parse(), Ok(LayerCount::First(12)));
        assert!("twelve".parse::<LayerCount>().is_err());
    }

    #[test]
    fn a_spare_share_of_vram_is_kept() {
        assert_eq!(usable_of_free(2 << 30), (2 << 30) - (512 << 20));
        assert_eq!(usable_of_free(80_000_000_000), 76_000_000_000);
        assert_eq!(usable_of_free(100 << 20), 0);
    }

    #[test]
    fn a_gpu_fills_in_order_until_a_cap_is_reached() {
        let mut fill = GpuFill::new(None, Some(100));
        let outcomes: Vec<_> = [40, 50, 20, 5].into_iter().map(|b| fill.offer(b)).collect();
        assert_eq!(outcomes, [FillOutcome::Taken, FillOutcome::Taken, FillOutcome::NoRoom, FillOutcome::Full]);
        assert_eq!(fill.taken_bytes(), 90);
        let mut fill = GpuFill::new(Some(2), None);
        let outcomes: Vec<_> = (0..4).map(|_| fill.offer(1 << 40)).collect();
        assert_eq!(outcomes, [FillOutcome::Taken, FillOutcome::Taken, FillOutcome::CountReached, FillOutcome::Full]);
    }
}
