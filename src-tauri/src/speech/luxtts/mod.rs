//! LuxTTS (docs/luxtts-research.md): ZipVoice-Distill, a flow-matching acoustic
//! model over mel features, in a few steps.
//!
//! - [`config`]: the checkpoint's `config.json`; [`tokens`]: `tokens.txt`.
//! - [`activations`], [`attention`], [`layer`], [`zipformer`]: the
//!   Zipformer both halves of the model are made of.
//! - [`acoustic`]: the text encoder, the frame layout and the decoder.
//! - [`sampler`]: the Euler steps from noise to features.
//! - [`mel`]: the prompt's audio as the features the model conditions on.
//!
//! Not built yet: the text front end (phonemes), the 48 kHz vocoder and
//! the app's use of the model.

pub mod acoustic;
pub mod activations;
pub mod attention;
pub mod config;
pub mod layer;
pub mod mel;
pub mod sampler;
pub mod tokens;
pub mod zipformer;
