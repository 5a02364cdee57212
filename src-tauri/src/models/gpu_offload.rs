//! Which of a model's layers run on the GPU: what was asked (`--gpu`,
//! `--gpu-layers`, `--gpu-memory`), the GPU opened once per process, and
//! what the load chose, for the load log and `cake run --json`.

use super::sources::selection::layer_ranges;
use cake_gpu::{Gpu, GpuOptions, Unavailable};
use serde::Serialize;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// Whether to use a GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, serde::Deserialize, clap::ValueEnum)]
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

/// `--gpu-layers`: all the layers the GPU can run, or the first `n`.
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
            "all" => Ok(Self::All),
            n => n.parse().map(Self::First).map_err(|_| format!("`{n}` is not a number of layers or `all`")),
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
        assert_eq!("12".parse(), Ok(LayerCount::First(12)));
        assert!("twelve".parse::<LayerCount>().is_err());
    }
}
