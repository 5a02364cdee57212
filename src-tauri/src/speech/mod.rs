//! Text to speech.
//!
//! - [`vibevoice`]: Microsoft's VibeVoice (a Qwen2 language model that emits
//!   speech latents through a diffusion head and a convolutional VAE).

pub mod vibevoice;
