//! Model architectures: configuration, weight sources and the shared decoder.

pub mod config;
pub mod context;
pub mod decoder;
pub mod families;
pub mod fp8;
pub mod gpu_offload;
pub mod kernel_census;
pub mod loader;
pub mod memory_needs;
pub mod nn;
pub mod pipeline;
pub mod sources;
pub mod vision;
pub mod weights;
