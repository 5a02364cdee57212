//! Finding and opening the GPU: one adapter, its limits, and driver errors
//! turned into `Result`s.

use crate::shader::{self, Kernel};
use anyhow::{anyhow, Result};
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};

/// What [`Gpu::open`] may pick.
#[derive(Debug, Clone, Copy, Default)]
pub struct GpuOptions {
    /// Accept a driver that computes on the CPU (Mesa's lavapipe,
    /// SwiftShader, WARP). Off by default: such a "GPU" is slower than Cake's
    /// own CPU kernels, so picking it silently would be a silent slowdown.
    /// Tests turn it on to run the kernels in CI.
    pub allow_software: bool,
    /// Caps every buffer at this many bytes (below the device's own limit):
    /// tests use it to split matrices over several buffers.
    pub max_buffer_bytes: Option<u64>,
}

/// Why no GPU is used: one line for the load log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unavailable {
    /// No Vulkan, Metal or DX12 driver answered (none installed, or the
    /// loader was pointed elsewhere, e.g. `VK_ICD_FILENAMES`).
    NoDriver,
    /// The only adapters compute on the CPU.
    OnlySoftware { name: String },
    /// The driver refused to open the device.
    DeviceFailed { name: String, reason: String },
}

impl fmt::Display for Unavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoDriver => write!(f, "no GPU driver found (Vulkan, Metal or DX12)"),
            Self::OnlySoftware { name } => {
                write!(f, "the only GPU driver, {name}, computes on the CPU (slower than Cake's CPU path)")
            }
            Self::DeviceFailed { name, reason } => write!(f, "the GPU {name} could not be opened: {reason}"),
        }
    }
}

impl std::error::Error for Unavailable {}

/// What kind of adapter a [`Gpu`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdapterKind {
    Discrete,
    Integrated,
    Virtual,
    /// Computes on the CPU (lavapipe and the like).
    Software,
    Other,
}

impl AdapterKind {
    fn of(device_type: wgpu::DeviceType) -> Self {
        match device_type {
            wgpu::DeviceType::DiscreteGpu => Self::Discrete,
            wgpu::DeviceType::IntegratedGpu => Self::Integrated,
            wgpu::DeviceType::VirtualGpu => Self::Virtual,
            wgpu::DeviceType::Cpu => Self::Software,
            wgpu::DeviceType::Other => Self::Other,
        }
    }

    /// Preference when a machine has several: lower is better.
    fn rank(self) -> u8 {
        match self {
            Self::Discrete => 0,
            Self::Integrated => 1,
            Self::Virtual => 2,
            Self::Other => 3,
            Self::Software => 4,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Discrete => "discrete",
            Self::Integrated => "integrated",
            Self::Virtual => "virtual",
            Self::Software => "software",
            Self::Other => "other",
        }
    }
}

/// The adapter a [`Gpu`] runs on, as the load log and the app show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuInfo {
    pub name: String,
    /// `Vulkan`, `Metal` or `Dx12`.
    pub backend: String,
    pub driver: String,
    pub kind: AdapterKind,
    /// The largest buffer one kernel may bind: bigger matrices are split.
    pub max_binding_bytes: u64,
}

/// An open GPU: the device, its queue and the kernels compiled for it.
pub struct Gpu {
    pub(crate) device: wgpu::Device,
    pub(crate) queue: wgpu::Queue,
    info: GpuInfo,
    pipelines: Mutex<HashMap<Kernel, Arc<wgpu::ComputePipeline>>>,
    /// The first error the driver reported outside a scope (validation,
    /// out of memory, device lost): every later call fails with it.
    failure: Arc<Mutex<Option<String>>>,
}

impl fmt::Debug for Gpu {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Gpu").field("info", &self.info).finish()
    }
}

impl Gpu {
    /// Opens the best adapter the machine has: discrete before integrated,
    /// software only when `options` allow it.
    pub fn open(options: GpuOptions) -> Result<Self, Unavailable> {
        let instance = wgpu::Instance::new(wgpu::InstanceDescriptor {
            backends: wgpu::Backends::VULKAN | wgpu::Backends::METAL | wgpu::Backends::DX12,
            ..wgpu::InstanceDescriptor::new_without_display_handle()
        });
        let mut adapters = pollster::block_on(instance.enumerate_adapters(wgpu::Backends::all()));
        if adapters.is_empty() {
            return Err(Unavailable::NoDriver);
        }
        adapters.sort_by_key(|a| AdapterKind::of(a.get_info().device_type).rank());
        let best = adapters.remove(0);
        let adapter_info = best.get_info();
        let kind = AdapterKind::of(adapter_info.device_type);
        if kind == AdapterKind::Software && !options.allow_software {
            return Err(Unavailable::OnlySoftware { name: adapter_info.name });
        }
        let limits = best.limits();
        let descriptor = wgpu::DeviceDescriptor {
            label: Some("cake"),
            required_features: wgpu::Features::empty(),
            // Everything the adapter offers: big weight buffers above all.
            required_limits: limits.clone(),
            memory_hints: wgpu::MemoryHints::Performance,
            ..Default::default()
        };
        let (device, queue) = pollster::block_on(best.request_device(&descriptor))
            .map_err(|e| Unavailable::DeviceFailed { name: adapter_info.name.clone(), reason: e.to_string() })?;
        let failure = Arc::new(Mutex::new(None));
        let recorded = failure.clone();
        device.on_uncaptured_error(Arc::new(move |error: wgpu::Error| {
            let mut slot = recorded.lock().unwrap_or_else(|e| e.into_inner());
            slot.get_or_insert_with(|| error.to_string());
        }));
        let info = GpuInfo {
            name: adapter_info.name,
            backend: format!("{:?}", adapter_info.backend),
            driver: [adapter_info.driver, adapter_info.driver_info]
                .into_iter()
                .filter(|s| !s.is_empty())
                .collect::<Vec<_>>()
                .join(" "),
            kind,
            max_binding_bytes: limits
                .max_storage_buffer_binding_size
                .min(limits.max_buffer_size)
                .min(options.max_buffer_bytes.unwrap_or(u64::MAX)),
        };
        Ok(Self { device, queue, info, pipelines: Mutex::default(), failure })
    }

    pub fn info(&self) -> &GpuInfo {
        &self.info
    }

    /// Fails with the driver's first reported error, if there was one.
    pub fn check(&self) -> Result<()> {
        match self.failure.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            Some(error) => Err(anyhow!("the GPU {} failed: {error}", self.info.name)),
            None => Ok(()),
        }
    }

    /// The compiled pipeline of `kernel`, compiled on first use.
    pub(crate) fn pipeline(&self, kernel: Kernel) -> Arc<wgpu::ComputePipeline> {
        let mut pipelines = self.pipelines.lock().unwrap_or_else(|e| e.into_inner());
        pipelines
            .entry(kernel)
            .or_insert_with(|| {
                let source = shader::source(kernel);
                let module = self.device.create_shader_module(wgpu::ShaderModuleDescriptor {
                    label: Some(kernel.label()),
                    source: wgpu::ShaderSource::Wgsl(source.into()),
                });
                Arc::new(self.device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                    label: Some(kernel.label()),
                    layout: None,
                    module: &module,
                    entry_point: Some("main"),
                    compilation_options: Default::default(),
                    cache: None,
                }))
            })
            .clone()
    }

    /// Waits until every submitted batch has run.
    pub fn wait(&self) -> Result<()> {
        self.device
            .poll(wgpu::PollType::Wait { submission_index: None, timeout: None })
            .map_err(|e| anyhow!("waiting for the GPU {}: {e}", self.info.name))?;
        self.check()
    }
}
