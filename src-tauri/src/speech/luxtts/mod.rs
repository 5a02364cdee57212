//! LuxTTS (docs/luxtts-research.md): ZipVoice-Distill, a flow-matching acoustic
//! model over mel features, in a few steps.
//!
//! - [`config`]: the checkpoint's `config.json`; [`tokens`]: `tokens.txt`.
//! - [`activations`], [`attention`], [`layer`], [`zipformer`]: the
//!   Zipformer both halves of the model are made of.
//! - [`acoustic`]: the text encoder, the frame layout and the decoder.
//! - [`sampler`]: the Euler steps from noise to features.
//! - [`mel`]: the prompt's audio as the features the model conditions on.
//! - [`vocoder`]: features to 48 kHz audio; [`window`]: the Hann window
//!   both spectral transforms use; [`depthwise`]: the convolution over time
//!   the Zipformer and the vocoder share.
//!
//! - [`model`]: all of it, from a voice prompt and tokens to 48 kHz speech.
//! - [`normalize`]: English text spelled out as the reference does before
//!   phonemizing it; [`phonemize`]: its phonemes and tokens (espeak-ng).

pub mod acoustic;
pub mod activations;
pub mod attention;
pub mod config;
pub mod depthwise;
pub mod layer;
pub mod mel;
pub mod model;
pub mod normalize;
pub mod phonemize;
pub mod sampler;
pub mod tokens;
pub mod vocoder;
pub mod window;
pub mod zipformer;
