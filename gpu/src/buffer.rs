//! Memory on the GPU: storage buffers, filled from and read back to the CPU.

use crate::device::Gpu;
use anyhow::{anyhow, bail, Context, Result};

/// A run of f32 values in VRAM (activations, norms' weights, tables).
#[derive(Debug)]
pub struct GpuTensor {
    pub(crate) buffer: wgpu::Buffer,
    len: usize,
}

impl GpuTensor {
    /// Number of f32 values.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes of VRAM it holds.
    pub fn bytes(&self) -> u64 {
        self.buffer.size()
    }
}

/// Buffers may not be empty: one value at least.
fn padded_bytes(bytes: u64) -> u64 {
    bytes.max(4).next_multiple_of(4)
}

impl Gpu {
    /// A storage buffer of `bytes`, or an error (never a panic) when the
    /// device has no room or the size exceeds what one buffer may be.
    pub(crate) fn storage(&self, label: &str, bytes: u64, copy_out: bool) -> Result<wgpu::Buffer> {
        let size = padded_bytes(bytes);
        if size > self.info().max_binding_bytes {
            bail!(
                "{label}: {size} bytes is more than one buffer may hold on {} ({} bytes)",
                self.info().name,
                self.info().max_binding_bytes
            );
        }
        let mut usage = wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST;
        if copy_out {
            usage |= wgpu::BufferUsages::COPY_SRC;
        }
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let buffer = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size,
            usage,
            mapped_at_creation: false,
        });
        if let Some(error) = pollster::block_on(scope.pop()) {
            bail!("{label}: the GPU {} has no room for {size} bytes: {error}", self.info().name);
        }
        self.check()?;
        Ok(buffer)
    }

    /// A storage buffer holding `bytes` (padded to a whole word).
    pub(crate) fn storage_with(&self, label: &str, bytes: &[u8]) -> Result<wgpu::Buffer> {
        let buffer = self.storage(label, bytes.len() as u64, false)?;
        let whole = bytes.len() / 4 * 4;
        if whole > 0 {
            self.queue.write_buffer(&buffer, 0, &bytes[..whole]);
        }
        if whole < bytes.len() {
            let mut tail = [0u8; 4];
            tail[..bytes.len() - whole].copy_from_slice(&bytes[whole..]);
            self.queue.write_buffer(&buffer, whole as u64, &tail);
        }
        Ok(buffer)
    }

    /// `len` zeroed f32 values in VRAM.
    pub fn zeros(&self, label: &str, len: usize) -> Result<GpuTensor> {
        Ok(GpuTensor { buffer: self.storage(label, 4 * len as u64, true)?, len })
    }

    /// A copy of `values` in VRAM.
    pub fn upload(&self, label: &str, values: &[f32]) -> Result<GpuTensor> {
        let tensor = self.zeros(label, values.len())?;
        self.write(&tensor, values)?;
        Ok(tensor)
    }

    /// Overwrites the first `values.len()` values of `tensor`.
    pub fn write(&self, tensor: &GpuTensor, values: &[f32]) -> Result<()> {
        if values.len() > tensor.len {
            bail!("{} values do not fit a GPU tensor of {}", values.len(), tensor.len);
        }
        if !values.is_empty() {
            let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
            self.queue.write_buffer(&tensor.buffer, 0, &bytes);
        }
        Ok(())
    }

    /// The first `len` values of `tensor`, after every submitted batch ran.
    pub fn read(&self, tensor: &GpuTensor, len: usize) -> Result<Vec<f32>> {
        if len > tensor.len {
            bail!("reading {len} values of a GPU tensor of {}", tensor.len);
        }
        if len == 0 {
            return Ok(Vec::new());
        }
        let bytes = 4 * len as u64;
        let staging = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("read back"),
            size: bytes,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut encoder = self.device.create_command_encoder(&Default::default());
        encoder.copy_buffer_to_buffer(&tensor.buffer, 0, &staging, 0, bytes);
        self.queue.submit([encoder.finish()]);
        let (sender, receiver) = std::sync::mpsc::channel();
        staging.map_async(wgpu::MapMode::Read, .., move |result| {
            let _ = sender.send(result);
        });
        self.wait()?;
        receiver
            .recv()
            .context("the GPU dropped a read-back")?
            .map_err(|e| anyhow!("reading back from the GPU {}: {e}", self.info().name))?;
        let view = staging.get_mapped_range(..).map_err(|e| anyhow!("reading back from the GPU: {e}"))?;
        let values = view.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
        drop(view);
        staging.unmap();
        Ok(values)
    }
}
