//! Resizing as Pillow's `Image.resize` does it for 8-bit pictures, byte for
//! byte: the vision processors of transformers resize with Pillow, so the
//! pixel values a model sees match only if the resampling does.
//!
//! Two separable passes, across then down (down first when the height
//! shrinks much more than the width, as Pillow orders them). Each output pixel is a weighted
//! sum over the input pixels near its centre; when shrinking, the window
//! widens by the scale (so every input pixel counts: antialiasing). Weights
//! are normalised to sum to one, then held in 22-bit fixed point; each pass
//! rounds and clips to 8 bits.

use super::decode::DecodedImage;

/// The resampling filters the processors ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Filter {
    /// Pillow's `BILINEAR` (triangle, support 1).
    Bilinear,
    /// Pillow's `BICUBIC` (Keys' cubic with a = -0.5, support 2).
    Bicubic,
    /// Pillow's `LANCZOS` (Lanczos-3, support 3).
    Lanczos,
}

impl Filter {
    fn support(self) -> f64 {
        match self {
            Self::Bilinear => 1.0,
            Self::Bicubic => 2.0,
            Self::Lanczos => 3.0,
        }
    }

    fn weight(self, x: f64) -> f64 {
        match self {
            Self::Bilinear => (1.0 - x.abs()).max(0.0),
            Self::Bicubic => {
                const A: f64 = -0.5;
                let x = x.abs();
                if x < 1.0 {
                    ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0
                } else if x < 2.0 {
                    (((x - 5.0) * x + 8.0) * x - 4.0) * A
                } else {
                    0.0
                }
            }
            Self::Lanczos => {
                if (-3.0..3.0).contains(&x) {
                    sinc(x) * sinc(x / 3.0)
                } else {
                    0.0
                }
            }
        }
    }
}

fn sinc(x: f64) -> f64 {
    if x == 0.0 {
        1.0
    } else {
        let x = x * std::f64::consts::PI;
        x.sin() / x
    }
}

/// Bits after the point of the fixed-point weights (Pillow's: 32 − 8 − 2).
const PRECISION_BITS: u32 = 22;

/// For each output position along one axis: the first input index and the
/// fixed-point weights of the inputs from there.
struct Taps {
    first: Vec<usize>,
    weights: Vec<Vec<i64>>,
}

impl Taps {
    fn new(in_size: usize, out_size: usize, filter: Filter) -> Self {
        let scale = in_size as f64 / out_size as f64;
        let filter_scale = scale.max(1.0);
        let support = filter.support() * filter_scale;
        let mut first = Vec::with_capacity(out_size);
        let mut weights = Vec::with_capacity(out_size);
        for out in 0..out_size {
            let centre = (out as f64 + 0.5) * scale;
            // Truncation toward zero, as C's cast.
            let start = ((centre - support + 0.5) as i64).max(0) as usize;
            let end = ((centre + support + 0.5) as i64).min(in_size as i64) as usize;
            let raw: Vec<f64> = (start..end).map(|i| filter.weight((i as f64 - centre + 0.5) / filter_scale)).collect();
            let total: f64 = raw.iter().sum();
            let fixed = raw
                .iter()
                .map(|w| {
                    let w = if total != 0.0 { w / total } else { *w };
                    let scaled = w * f64::from(1u32 << PRECISION_BITS);
                    (if w < 0.0 { scaled - 0.5 } else { scaled + 0.5 }) as i64
                })
                .collect();
            first.push(start);
            weights.push(fixed);
        }
        Self { first, weights }
    }

    /// The output at `out` from the inputs `value(i)`.
    fn apply(&self, out: usize, value: impl Fn(usize) -> u8) -> u8 {
        let first = self.first[out];
        let sum = self.weights[out]
            .iter()
            .enumerate()
            .fold(1i64 << (PRECISION_BITS - 1), |sum, (i, w)| sum + i64::from(value(first + i)) * w);
        (sum >> PRECISION_BITS).clamp(0, 255) as u8
    }
}

/// `image` resized to `width × height` (both at least 1) with `filter`.
pub fn resize(image: &DecodedImage, width: u32, height: u32, filter: Filter) -> DecodedImage {
    assert!(width > 0 && height > 0, "a picture has at least one pixel");
    let (in_w, in_h) = (i64::from(image.width), i64::from(image.height));
    let (out_w, out_h) = (i64::from(width), i64::from(height));
    // Pillow (13.0, the fixture records it) goes down first when the height shrinks more than
    // twice as much as the width; the order changes the rounding.
    let across_first = !(in_h - out_h > 0 && in_h - out_h > (in_w - out_w) * 2);
    let mut picture = image.clone();
    for across in [across_first, !across_first] {
        picture = if across { resize_across(&picture, width, filter) } else { resize_down(&picture, height, filter) };
    }
    picture
}

/// Every row of `image` to `width` pixels.
fn resize_across(image: &DecodedImage, width: u32, filter: Filter) -> DecodedImage {
    if width == image.width {
        return image.clone();
    }
    let (in_w, out_w) = (image.width as usize, width as usize);
    let taps = Taps::new(in_w, out_w, filter);
    let mut rgb = vec![0u8; image.height as usize * out_w * 3];
    for (row, out) in image.rgb.chunks_exact(in_w * 3).zip(rgb.chunks_exact_mut(out_w * 3)) {
        for x in 0..out_w {
            for c in 0..3 {
                out[x * 3 + c] = taps.apply(x, |i| row[i * 3 + c]);
            }
        }
    }
    DecodedImage { width, height: image.height, rgb }
}

/// Every column of `image` to `height` pixels.
fn resize_down(image: &DecodedImage, height: u32, filter: Filter) -> DecodedImage {
    if height == image.height {
        return image.clone();
    }
    let (w, in_h, out_h) = (image.width as usize, image.height as usize, height as usize);
    let taps = Taps::new(in_h, out_h, filter);
    let mut rgb = vec![0u8; out_h * w * 3];
    for y in 0..out_h {
        for x in 0..w {
            for c in 0..3 {
                rgb[(y * w + x) * 3 + c] = taps.apply(y, |i| image.rgb[(i * w + x) * 3 + c]);
            }
        }
    }
    DecodedImage { width: image.width, height, rgb }
}
