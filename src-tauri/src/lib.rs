//! Cake: run language models on one machine or across the machines of a LAN.
//!
//! - [`formats`]: reading checkpoint files (safetensors, GGUF) defensively.
//! - [`models`]: architectures, weight sources and the shared decoder.
//! - [`text`]: tokenizer, chat templates, sampling, generation, perplexity.
//! - [`library`]: where models live on disk.
//! - [`cli`]: the `cake` command line.

pub mod cli;
pub mod formats;
pub mod library;
pub mod models;
pub mod text;
