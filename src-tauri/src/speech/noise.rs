//! Where the sampler's random numbers come from: a seeded generator in
//! normal use, or a recorded tape (the reference run's draws, in order)
//! when checking against the reference.

use anyhow::{bail, Result};
use candle_core::{Device, Tensor};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::VecDeque;

/// Standard normal tensors, one request at a time.
pub trait NoiseSource {
    fn normal(&mut self, shape: &[usize], device: &Device) -> Result<Tensor>;
}

/// Normal noise from a seeded generator (Box–Muller).
pub struct SeededNoise {
    rng: StdRng,
}

impl SeededNoise {
    pub fn new(seed: u64) -> Self {
        Self { rng: StdRng::seed_from_u64(seed) }
    }
}

impl NoiseSource for SeededNoise {
    fn normal(&mut self, shape: &[usize], device: &Device) -> Result<Tensor> {
        let count: usize = shape.iter().product();
        let mut values = Vec::with_capacity(count + 1);
        while values.len() < count {
            // u1 in (0, 1] so that ln(u1) is finite.
            let u1: f64 = 1.0 - self.rng.random::<f64>();
            let u2: f64 = self.rng.random::<f64>();
            let radius = (-2.0 * u1.ln()).sqrt();
            let angle = 2.0 * std::f64::consts::PI * u2;
            values.push((radius * angle.cos()) as f32);
            values.push((radius * angle.sin()) as f32);
        }
        values.truncate(count);
        Ok(Tensor::from_vec(values, shape, device)?)
    }
}

/// Recorded draws, handed out in order; a draw of another shape is an error.
pub struct NoiseTape {
    draws: VecDeque<Tensor>,
}

impl NoiseTape {
    pub fn new(draws: Vec<Tensor>) -> Self {
        Self { draws: draws.into() }
    }
}

impl NoiseSource for NoiseTape {
    fn normal(&mut self, shape: &[usize], device: &Device) -> Result<Tensor> {
        let Some(draw) = self.draws.pop_front() else {
            bail!("the noise tape ran out (a draw of shape {shape:?} was asked for)");
        };
        if draw.dims() != shape {
            bail!("the noise tape holds a draw of shape {:?} where {shape:?} was asked for", draw.dims());
        }
        Ok(draw.to_device(device)?)
    }
}
