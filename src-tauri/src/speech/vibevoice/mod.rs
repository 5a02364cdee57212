//! VibeVoice, as docs/vibevoice.md describes Microsoft's reference.
//!
//! - [`config`]: the checkpoint's `config.json`.
//! - [`scheduler`]: the DPM-Solver++ sampler that turns noise into a latent.
//! - [`diffusion_head`]: the network the sampler asks for each step's velocity.
//! - [`connector`]: speech features into the language model's embedding space.
//! - [`causal_conv`]: the causal (streamable) convolutions of the speech tokenizers.
//! - [`speech_tokenizer`]: the acoustic encoder/decoder and the semantic encoder.
//! - [`tokenizer_source`]: where the (unshipped) text tokenizer is found.
//! - [`processor`]: scripts and voice prompts into the model's prompt.
//! - [`model`]: a loaded checkpoint; [`generate`]: speaking a prompt.
//! - [`realtime`]: VibeVoice-Realtime-0.5B, which speaks text as it reads
//!   it, in a voice from a [`voice_preset`].

pub mod causal_conv;
pub mod config;
pub mod connector;
pub mod diffusion_head;
pub mod generate;
pub mod model;
pub mod processor;
pub mod realtime;
pub mod scheduler;
pub mod speech_tokenizer;
pub mod tokenizer_source;
pub mod voice_preset;
