//! Building blocks shared by every decoder family.

pub mod attention;
pub mod cpu_values;
pub mod gated_delta_net;
pub mod gpu_block;
pub mod kv_cache;
pub mod linear;
pub mod mlp;
pub mod moe;
pub mod norm;
pub mod projections;
pub mod rotary;
