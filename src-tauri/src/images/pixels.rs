//! From an upright picture to the pixel values a vision tower reads:
//! channels first, each value rescaled and normalised per channel with the
//! arithmetic of transformers' processors (the scale applied in f64 and
//! rounded to f32, then the mean subtracted and the deviation divided in
//! f32), so that the values are the reference's, bit for bit.

use super::decode::DecodedImage;

/// How 8-bit values become a model's inputs: `(v · rescale − mean) / std`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Normalization {
    pub rescale: f64,
    pub mean: [f32; 3],
    pub std: [f32; 3],
}

impl Normalization {
    /// SigLIP's (Gemma 3, SmolVLM): 0..255 to −1..1.
    pub const HALF: Self = Self { rescale: 1.0 / 255.0, mean: [0.5; 3], std: [0.5; 3] };
}

/// `image`'s values, channels first: `3 × height × width`.
pub fn pixel_values(image: &DecodedImage, normalization: &Normalization) -> Vec<f32> {
    let pixels = image.width as usize * image.height as usize;
    let mut values = vec![0f32; 3 * pixels];
    for (channel, plane) in values.chunks_exact_mut(pixels).enumerate() {
        let (mean, std) = (normalization.mean[channel], normalization.std[channel]);
        for (value, pixel) in plane.iter_mut().zip(image.rgb.chunks_exact(3)) {
            let rescaled = (f64::from(pixel[channel]) * normalization.rescale) as f32;
            *value = (rescaled - mean) / std;
        }
    }
    values
}
