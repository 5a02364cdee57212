//! The DPM-Solver++ sampler (second order, midpoint) over a cosine noise
//! schedule with v-prediction: the settings VibeVoice builds its scheduler
//! with (docs/vibevoice.md §10). It starts from Gaussian noise and, at each
//! of a few timesteps, turns the model's velocity into a data prediction
//! and moves the sample towards it.

use anyhow::{bail, Result};
use candle_core::Tensor;

/// Training timesteps of the schedule.
const TRAIN_STEPS: usize = 1000;

/// The solver for a fixed number of inference steps.
#[derive(Debug, Clone)]
pub struct DpmSolver {
    timesteps: Vec<usize>,
    /// Per step, then the final target: the VP pair and log-SNR.
    alpha: Vec<f32>,
    sigma: Vec<f32>,
    lambda: Vec<f32>,
}

/// `ᾱ(u)` of the cosine schedule.
fn alpha_bar(u: f64) -> f64 {
    let angle = (u + 0.008) / 1.008 * std::f64::consts::FRAC_PI_2;
    angle.cos().powi(2)
}

/// numpy's `round` (half to even).
fn round_half_even(x: f64) -> f64 {
    let r = x.round();
    if (x - x.trunc()).abs() == 0.5 && r % 2.0 != 0.0 {
        r - x.signum()
    } else {
        r
    }
}

impl DpmSolver {
    /// A solver taking `steps` steps (1 to 1000).
    pub fn new(steps: usize) -> Result<Self> {
        if steps == 0 || steps > TRAIN_STEPS {
            bail!("the number of diffusion steps must be between 1 and {TRAIN_STEPS}, not {steps}");
        }
        // Betas in f64, stored f32; the cumulative product in f32.
        let mut alphas_cumprod = Vec::with_capacity(TRAIN_STEPS);
        let mut product = 1f32;
        for i in 0..TRAIN_STEPS {
            let beta = (1.0
                - alpha_bar((i + 1) as f64 / TRAIN_STEPS as f64) / alpha_bar(i as f64 / TRAIN_STEPS as f64))
            .min(0.999);
            product *= 1.0 - beta as f32;
            alphas_cumprod.push(product);
        }
        // linspace(0, 999, steps + 1), rounded, reversed, without the final 0.
        let last = (TRAIN_STEPS - 1) as f64;
        let timesteps: Vec<usize> = (1..=steps)
            .rev()
            .map(|i| if i == steps { last } else { round_half_even(i as f64 * (last / steps as f64)) } as usize)
            .collect();
        let mut alpha = Vec::with_capacity(steps + 1);
        let mut sigma = Vec::with_capacity(steps + 1);
        let mut lambda = Vec::with_capacity(steps + 1);
        for &t in &timesteps {
            let ac = alphas_cumprod[t];
            let s = ((1.0 - ac) / ac).sqrt();
            let a = 1.0 / (s * s + 1.0).sqrt();
            let vp_sigma = s * a;
            alpha.push(a);
            sigma.push(vp_sigma);
            lambda.push(a.ln() - vp_sigma.ln());
        }
        // The final target: no noise left.
        alpha.push(1.0);
        sigma.push(0.0);
        lambda.push(f32::INFINITY);
        Ok(Self { timesteps, alpha, sigma, lambda })
    }

    /// The timesteps the model is asked at, from noisiest to cleanest.
    pub fn timesteps(&self) -> &[usize] {
        &self.timesteps
    }

    /// The noise level `sqrt((1−ᾱ)/ᾱ)` of each step and the final 0.
    pub fn sigmas(&self) -> Vec<f32> {
        self.alpha.iter().zip(&self.sigma).map(|(a, s)| if *s == 0.0 { 0.0 } else { s / a }).collect()
    }

    /// Runs the whole solver from `noise`, asking `velocity(x, t)` at each
    /// step and observing each step through `on_step(index, x0, x_after)`.
    pub fn sample(
        &self,
        noise: &Tensor,
        mut velocity: impl FnMut(&Tensor, usize) -> Result<Tensor>,
        mut on_step: impl FnMut(usize, &Tensor, &Tensor),
    ) -> Result<Tensor> {
        let steps = self.timesteps.len();
        let mut x = noise.clone();
        let mut previous_x0: Option<Tensor> = None;
        for (i, &t) in self.timesteps.iter().enumerate() {
            let v = velocity(&x, t)?;
            // Data prediction from the velocity.
            let x0 = ((&x * self.alpha[i] as f64)? - (v * self.sigma[i] as f64)?)?;
            let next = if i == steps - 1 {
                // The last target has no noise: the sample is the prediction.
                x0.clone()
            } else {
                let h = self.lambda[i + 1] - self.lambda[i];
                let decay = (-h).exp() - 1.0;
                let keep = self.sigma[i + 1] / self.sigma[i];
                let first = ((&x * keep as f64)? - (&x0 * (self.alpha[i + 1] * decay) as f64)?)?;
                match &previous_x0 {
                    Some(prev) if i > 0 => {
                        let r0 = (self.lambda[i] - self.lambda[i - 1]) / h;
                        let d1 = ((&x0 - prev)? / r0 as f64)?;
                        (first - (d1 * (0.5 * self.alpha[i + 1] * decay) as f64)?)?
                    }
                    _ => first,
                }
            };
            on_step(i, &x0, &next);
            previous_x0 = Some(x0);
            x = next;
        }
        Ok(x)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timesteps_match_the_reference_tables() {
        assert_eq!(DpmSolver::new(10).unwrap().timesteps(), &[999, 899, 799, 699, 599, 500, 400, 300, 200, 100]);
        assert_eq!(
            DpmSolver::new(20).unwrap().timesteps(),
            &[999, 949, 899, 849, 799, 749, 699, 649, 599, 549, 500, 450, 400, 350, 300, 250, 200, 150, 100, 50]
        );
        let sigmas = DpmSolver::new(10).unwrap().sigmas();
        let expected =
            [20291.3, 6.36459, 3.10373, 1.9807, 1.39075, 1.01555, 0.740281, 0.52236, 0.337461, 0.171044, 0.0];
        for (got, want) in sigmas.iter().zip(expected) {
            assert!((got - want).abs() <= want * 1e-4, "{got} vs {want}");
        }
        assert!(DpmSolver::new(0).is_err() && DpmSolver::new(1001).is_err());
    }
}
