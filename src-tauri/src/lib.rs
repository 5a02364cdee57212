//! Cake: run language models on one machine or across the machines of a LAN.
//!
//! - [`formats`]: reading checkpoint files (safetensors, GGUF) defensively.
//! - [`models`]: architectures, weight sources and the shared decoder.
//! - [`text`]: tokenizer, chat templates, sampling, generation, perplexity.
//! - [`library`]: where models live on disk, and the model list.
//! - [`app`]: what the desktop window and `cake serve` share: commands, engine thread, conversations.
//! - [`server`]: `cake serve`, the HTTP transport and the OpenAI-compatible API.
//! - [`cluster`]: running a model across the machines of a LAN.
//! - [`speech`]: text to speech (VibeVoice).
//! - [`audio`]: reading, resampling and writing WAV audio (voice prompts, speech).
//! - [`cli`]: the `cake` command line.
//! - `desktop` (feature `gui`): the Tauri window.
//! - [`fuzz_targets`]: the readers of untrusted bytes, as the fuzzers drive them.

pub mod app;
pub mod audio;
pub mod cli;
pub mod cluster;
#[cfg(feature = "gui")]
pub mod desktop;
pub mod formats;
pub mod fuzz_targets;
pub mod library;
pub mod models;
pub mod server;
pub mod speech;
pub mod text;
