//! Cake's GPU backend: the transformer's kernels as WGSL compute shaders on
//! [wgpu] (Vulkan on Linux and Windows, Metal on macOS, DX12 on Windows).
//!
//! [`device::Gpu`] picks one adapter (a real GPU unless software is allowed,
//! see [`device::GpuOptions`]) and turns every driver failure into an error
//! instead of wgpu's default panic. Work is recorded into a [`batch::Batch`]
//! and submitted at once; tensors stay in VRAM between kernels
//! ([`buffer::GpuTensor`]) and come back to the CPU only when asked.
//!
//! Kernels:
//! - [`matmul`]: weight matrix × activations for every GGUF type Cake reads,
//!   reading the blocks as stored (no dequantized copy in VRAM);
//! - [`ops`]: RMSNorm, rotary embeddings from the CPU's cos/sin tables, the
//!   gated activations, residual adds, biases;
//! - [`attention`]: an f16 key/value cache in VRAM and causal attention over
//!   it (decode and prompt, grouped queries, sliding windows, soft-capping).
//!
//! Every kernel is tested against a plain CPU computation on random inputs,
//! odd sizes included, on whatever adapter the machine has (Mesa's lavapipe
//! in CI).

pub mod attention;
pub mod batch;
pub mod buffer;
pub mod device;
pub mod matmul;
pub mod memory;
pub mod ops;
mod shader;

pub use batch::Batch;
pub use buffer::GpuTensor;
pub use device::{Gpu, GpuInfo, GpuOptions, Unavailable};
pub use memory::GpuMemory;
