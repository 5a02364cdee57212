//! The sinusoidal features diffusion and flow models embed a time (or a
//! guidance scale) with: `[cos(v·fᵢ) …, sin(v·fᵢ) …]`, `fᵢ = 10000^(−i/(dim/2))`,
//! in f32 as the references compute them.

/// `dim` features of `value`: cosines, then sines, then a zero if `dim` is odd.
pub fn sinusoidal_features(value: f32, dim: usize) -> Vec<f32> {
    let half = dim / 2;
    let args: Vec<f32> = (0..half).map(|i| value * (-(10000f32.ln()) * i as f32 / half as f32).exp()).collect();
    let mut features: Vec<f32> = args.iter().map(|a| a.cos()).chain(args.iter().map(|a| a.sin())).collect();
    features.resize(dim, 0.0);
    features
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sinusoidal_features_are_cosines_then_sines() {
        let features = sinusoidal_features(0.5, 6);
        assert_eq!(features.len(), 6);
        let frequencies = [1.0f32, 10000f32.powf(-1.0 / 3.0), 10000f32.powf(-2.0 / 3.0)];
        for (i, f) in frequencies.iter().enumerate() {
            assert!((features[i] - (0.5 * f).cos()).abs() < 1e-6);
            assert!((features[3 + i] - (0.5 * f).sin()).abs() < 1e-6);
        }
    }
}
