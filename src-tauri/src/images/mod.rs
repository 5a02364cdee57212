//! Pictures people attach to a chat, decoded safely before any model sees
//! them.
//!
//! - [`decode`]: PNG, JPEG, WebP and GIF (first frame) to upright RGB,
//!   with the file size, the sides and the pixel count checked from the
//!   header before anything the size of the picture is allocated;
//! - [`resize`]: resampling exactly as Pillow does, as the vision
//!   processors of transformers resize;
//! - [`pixels`]: rescaled, normalised values, channels first.

pub mod decode;
pub mod pixels;
pub mod resize;
