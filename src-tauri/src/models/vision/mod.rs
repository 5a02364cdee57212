//! The image side of vision-language models: encoders that turn a
//! picture's pixel values into features, and the projectors that make
//! those features tokens of the text model.
//!
//! - [`siglip`]: the SigLIP vision transformer (Gemma 3, SmolVLM);
//! - [`gemma3_projector`]: Gemma 3's pooling to soft tokens and projection.

pub mod gemma3_projector;
pub mod siglip;
