//! Text to speech.
//!
//! - [`vibevoice`]: Microsoft's VibeVoice (a Qwen2 language model that emits
//!   speech latents through a diffusion head and a convolutional VAE).
//! - [`luxtts`]: LuxTTS (ZipVoice-Distill), a flow-matching model over mel
//!   features (its acoustic model so far).
//! - [`noise`]: the samplers' random numbers (seeded, or a recorded tape).
//! - [`time_features`]: the sinusoidal features both samplers embed a time with.
//! - [`voice_prompt`]: WAV files of the voices to imitate.
//! - [`pieces`]: long scripts cut into pieces of whole sentences.
//! - [`model`]: a loaded speech model of either kind, speaking a script of
//!   any length.

pub mod luxtts;
pub mod model;
pub mod noise;
pub mod pieces;
pub mod time_features;
pub mod vibevoice;
pub mod voice_prompt;
