//! The distilled flow's sampler (docs/luxtts-research.md §4): a few Euler steps
//! from noise at t = 0 to features at t = 1, on a schedule shifted towards
//! small t, each step one pass of the decoder (the guidance scale is an
//! input of the distilled model, not a second pass).

use anyhow::Result;
use candle_core::Tensor;
use std::ops::ControlFlow;

/// The times `t₀ = 0 < … < t_N = 1` the sampler visits.
#[derive(Debug, Clone, PartialEq)]
pub struct FlowSchedule(Vec<f32>);

impl FlowSchedule {
    /// `steps` steps; `shift` in (0, 1] moves the times towards 0:
    /// `t ← shift·t / (1 + (shift − 1)·t)` over an even grid.
    pub fn new(steps: usize, shift: f32) -> Self {
        let steps = steps.max(1);
        let step = 1.0f32 / steps as f32;
        let times = (0..=steps)
            .map(|i| {
                // torch.linspace over steps + 1 points: from the start for the first
                // half of them, from the end after it.
                let t = if i < steps.div_ceil(2) { step * i as f32 } else { 1.0 - step * (steps - i) as f32 };
                shift * t / (1.0 + (shift - 1.0) * t)
            })
            .collect();
        Self(times)
    }

    pub fn times(&self) -> &[f32] {
        &self.0
    }

    pub fn steps(&self) -> usize {
        self.0.len() - 1
    }
}

/// Follows the flow from `noise` through `schedule`: `velocity(x, t)` is the
/// model's; `progress(step)` is told of each finished step and may break
/// to stop (then there are no features: `None`).
pub fn sample(
    schedule: &FlowSchedule,
    noise: &Tensor,
    mut velocity: impl FnMut(&Tensor, f32) -> Result<Tensor>,
    mut progress: impl FnMut(usize) -> ControlFlow<()>,
) -> Result<Option<Tensor>> {
    let times = schedule.times();
    let mut x = noise.clone();
    for step in 0..schedule.steps() {
        let (now, next) = (times[step], times[step + 1]);
        let v = velocity(&x, now)?;
        // The reference's form of the Euler step: its predictions of the
        // clean features and of the noise, mixed at the next time.
        let clean = (&x + (&v * (1.0 - now) as f64)?)?;
        x = if step + 1 < schedule.steps() {
            let noise_part = (&x - (&v * now as f64)?)?;
            ((noise_part * (1.0 - next) as f64)? + (clean * next as f64)?)?
        } else {
            clean
        };
        if progress(step + 1).is_break() {
            return Ok(None);
        }
    }
    Ok(Some(x))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shifted_schedule_of_four_steps() {
        let expected = [0.0, 1.0 / 7.0, 1.0 / 3.0, 0.6, 1.0];
        for (t, e) in FlowSchedule::new(4, 0.5).times().iter().zip(expected) {
            assert!((t - e).abs() < 1e-6, "{t} ≠ {e}");
        }
    }
}
