//! Text to speech.
//!
//! - [`vibevoice`]: Microsoft's VibeVoice (a Qwen2 language model that emits
//!   speech latents through a diffusion head and a convolutional VAE).
//! - [`luxtts`]: LuxTTS (ZipVoice-Distill), a flow-matching model over mel
//!   features and a 48 kHz vocoder.
//! - [`family`]: which of them a folder holds, and what each speaks in.
//! - [`noise`]: the samplers' random numbers (seeded, or a recorded tape).
//! - [`time_features`]: the sinusoidal features both samplers embed a time with.
//! - [`voice_prompt`]: WAV files of the voices to imitate.
//! - [`pieces`]: long scripts cut into pieces of whole sentences.
//! - [`model`]: a loaded speech model of any family, speaking a script of
//!   any length.

pub mod family;
pub mod luxtts;
pub mod model;
pub mod noise;
pub mod pieces;
pub mod time_features;
pub mod vibevoice;
pub mod voice_prompt;
