//! Text to speech.
//!
//! - [`vibevoice`]: Microsoft's VibeVoice (a Qwen2 language model that emits
//!   speech latents through a diffusion head and a convolutional VAE).
//! - [`voice_prompt`]: WAV files of the voices to imitate.

pub mod vibevoice;
pub mod voice_prompt;
