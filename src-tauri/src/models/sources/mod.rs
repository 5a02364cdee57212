//! Where a model's tensors come from.

pub mod folder;
pub mod gguf;
pub mod renamed;
pub mod selection;
pub mod tile_cache;
pub mod torch_checkpoint;
