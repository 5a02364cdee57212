//! The Zipformer's activations (docs/luxtts-research.md §3), applied value by value
//! in f32 as the reference computes them.

use anyhow::Result;
use candle_core::Tensor;

/// `log(1 + eˣ)`, exact for large `x` (where `eˣ` overflows) and for
/// very negative `x` (where `1 + eˣ` rounds to 1).
fn softplus(x: f32) -> f32 {
    x.max(0.0) + (-x.abs()).exp().ln_1p()
}

/// SwooshL: `softplus(x − 4) − 0.08·x − 0.035`, the feed-forward modules'.
pub fn swoosh_l(x: &Tensor) -> Result<Tensor> {
    map_values(x, |v| softplus(v - 4.0) - 0.08 * v - 0.035)
}

/// SwooshR: `softplus(x − 1) − 0.08·x − 0.313261687`, the convolution
/// modules' and the time embeddings'.
pub fn swoosh_r(x: &Tensor) -> Result<Tensor> {
    map_values(x, |v| softplus(v - 1.0) - 0.08 * v - 0.313_261_7)
}

/// `f` applied to every value of an f32 tensor.
pub fn map_values(x: &Tensor, f: impl Fn(f32) -> f32) -> Result<Tensor> {
    let values: Vec<f32> = x.flatten_all()?.to_vec1::<f32>()?.into_iter().map(f).collect();
    Ok(Tensor::from_vec(values, x.shape(), x.device())?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn swooshes_match_their_formulas_at_the_extremes() {
        let x = Tensor::new(&[-200.0f32, -3.0, 0.0, 1.0, 4.0, 200.0], &candle_core::Device::Cpu).unwrap();
        let left = swoosh_l(&x).unwrap().to_vec1::<f32>().unwrap();
        let right = swoosh_r(&x).unwrap().to_vec1::<f32>().unwrap();
        for (i, v) in [-200.0f64, -3.0, 0.0, 1.0, 4.0, 200.0].into_iter().enumerate() {
            let soft = |z: f64| if z > 30.0 { z } else { z.exp().ln_1p() };
            let l = soft(v - 4.0) - 0.08 * v - 0.035;
            let r = soft(v - 1.0) - 0.08 * v - 0.313261687;
            assert!((left[i] as f64 - l).abs() <= 1e-6 * l.abs().max(1.0), "SwooshL({v}) = {} ≠ {l}", left[i]);
            assert!((right[i] as f64 - r).abs() <= 1e-6 * r.abs().max(1.0), "SwooshR({v}) = {} ≠ {r}", right[i]);
        }
    }
}
