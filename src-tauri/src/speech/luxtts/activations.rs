//! The Zipformer's activations (docs/luxtts-research.md §3) and its gated
//! products, in f32 on Cake's vector kernels, spread over the kernel pool.

use anyhow::Result;
use cake_kernels::cpu::Level;
use cake_kernels::elementwise::{gated, swoosh, Gate};
use candle_core::Tensor;

/// Values per work item of the pool.
const CHUNK: usize = 8192;

/// SwooshL: `softplus(x − 4) − 0.08·x − 0.035`, the feed-forward modules'.
pub fn swoosh_l(x: &Tensor) -> Result<Tensor> {
    swooshed(x, 4.0, 0.035)
}

/// SwooshR: `softplus(x − 1) − 0.08·x − 0.313261687`, the convolution
/// modules' and the time embeddings'.
pub fn swoosh_r(x: &Tensor) -> Result<Tensor> {
    swooshed(x, 1.0, 0.313_261_7)
}

fn swooshed(x: &Tensor, shift: f32, offset: f32) -> Result<Tensor> {
    let mut values = x.flatten_all()?.to_vec1::<f32>()?;
    let level = Level::detected();
    cake_kernels::pool::global()
        .for_each_chunk(&mut values, CHUNK, &|_, part| swoosh(part, shift, 0.08, offset, level));
    Ok(Tensor::from_vec(values, x.shape(), x.device())?)
}

/// `values · σ(gates)` (`Gate::Sigmoid`) or `values · tanh(gates)`, of two
/// tensors of one shape.
pub fn gated_product(values: &Tensor, gates: &Tensor, gate: Gate) -> Result<Tensor> {
    let v = values.flatten_all()?.to_vec1::<f32>()?;
    let g = gates.flatten_all()?.to_vec1::<f32>()?;
    anyhow::ensure!(v.len() == g.len(), "gated values and gates differ in size");
    let mut out = vec![0f32; v.len()];
    let level = Level::detected();
    cake_kernels::pool::global().for_each_chunk(&mut out, CHUNK, &|i, part| {
        let at = i * CHUNK;
        gated(&v[at..at + part.len()], &g[at..at + part.len()], part, gate, level)
    });
    Ok(Tensor::from_vec(out, values.shape(), values.device())?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gated_products_match_their_formulas() {
        let device = candle_core::Device::Cpu;
        let v = Tensor::new(&[[1.5f32, -2.0], [0.25, 3.0]], &device).unwrap();
        let g = Tensor::new(&[[0.0f32, 1.0], [-30.0, 2.5]], &device).unwrap();
        let sigmoid = gated_product(&v, &g, Gate::Sigmoid).unwrap().to_vec2::<f32>().unwrap();
        let tanh = gated_product(&v, &g, Gate::Tanh).unwrap().to_vec2::<f32>().unwrap();
        for (i, j) in [(0, 0), (0, 1), (1, 0), (1, 1)] {
            let (vv, gg) = ([[1.5f64, -2.0], [0.25, 3.0]][i][j], [[0.0f64, 1.0], [-30.0, 2.5]][i][j]);
            assert!((sigmoid[i][j] as f64 - vv / (1.0 + (-gg).exp())).abs() < 1e-6);
            assert!((tanh[i][j] as f64 - vv * gg.tanh()).abs() < 1e-6);
        }
    }

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
