//! Recording kernels to run together: one submission per batch, tensors
//! staying in VRAM in between.

use crate::device::Gpu;
use crate::shader::Kernel;
use anyhow::Result;
use wgpu::util::DeviceExt;

/// Workgroups one grid dimension may hold.
const MAX_GROUPS: u32 = 65_535;

/// Kernels recorded for one submission.
pub struct Batch<'g> {
    pub(crate) gpu: &'g Gpu,
    encoder: wgpu::CommandEncoder,
}

impl<'g> Batch<'g> {
    pub fn new(gpu: &'g Gpu) -> Self {
        let encoder = gpu.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("cake batch") });
        Self { gpu, encoder }
    }

    /// The GPU the batch runs on.
    pub fn gpu(&self) -> &'g Gpu {
        self.gpu
    }

    /// Records `kernel` over `buffers` (bindings 0..) and `params` (the next
    /// binding, a uniform of u32 and f32 fields), in `groups` workgroups
    /// along the 2-D grid the shaders' `group_index` reads, times `layers`
    /// in the third dimension.
    pub(crate) fn dispatch(
        &mut self,
        kernel: Kernel,
        buffers: &[&wgpu::Buffer],
        params: &[u32],
        groups: u32,
        layers: u32,
    ) {
        if groups == 0 || layers == 0 {
            return;
        }
        let pipeline = self.gpu.pipeline(kernel);
        // Uniform blocks are a multiple of 16 bytes.
        let mut words = params.to_vec();
        words.resize(params.len().next_multiple_of(4).max(4), 0);
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        let uniform = self.gpu.device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some("params"),
            contents: &bytes,
            usage: wgpu::BufferUsages::UNIFORM,
        });
        let mut entries: Vec<wgpu::BindGroupEntry> = buffers
            .iter()
            .enumerate()
            .map(|(i, buffer)| wgpu::BindGroupEntry { binding: i as u32, resource: buffer.as_entire_binding() })
            .collect();
        entries.push(wgpu::BindGroupEntry { binding: buffers.len() as u32, resource: uniform.as_entire_binding() });
        let bind_group = self.gpu.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(kernel.label()),
            layout: &pipeline.get_bind_group_layout(0),
            entries: &entries,
        });
        let (x, y) = grid(groups);
        let mut pass = self
            .encoder
            .begin_compute_pass(&wgpu::ComputePassDescriptor { label: Some(kernel.label()), timestamp_writes: None });
        pass.set_pipeline(&pipeline);
        pass.set_bind_group(0, &bind_group, &[]);
        pass.dispatch_workgroups(x, y, layers);
    }

    /// Sends the recorded kernels to the GPU (they run in order).
    pub fn submit(self) -> Result<()> {
        self.gpu.queue.submit([self.encoder.finish()]);
        self.gpu.check()
    }
}

/// `groups` workgroups as an (x, y) grid within the per-dimension limit; the
/// shaders skip the indices past `groups`.
fn grid(groups: u32) -> (u32, u32) {
    if groups <= MAX_GROUPS {
        (groups, 1)
    } else {
        (MAX_GROUPS, groups.div_ceil(MAX_GROUPS))
    }
}

/// Workgroups of 64 threads for `threads` threads.
pub(crate) fn groups_of_64(threads: usize) -> u32 {
    threads.div_ceil(64) as u32
}
