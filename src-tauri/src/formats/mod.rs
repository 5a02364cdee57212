//! Checkpoint file formats, read without trusting their contents.

pub mod gguf;
pub mod gguf_header;
pub mod safetensors;
pub mod stored_zip;
pub mod torch_pickle;
