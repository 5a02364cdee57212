//! Rotary position embeddings, rotating each head's dimensions in pairs:
//! `i` with `i + rotary_dim / 2` as transformers does, or `2i` with `2i + 1`
//! for Llama's q and k as GGUF files order them ([`RotaryPairs`]).
//!
//! Frequencies follow transformers' `rope_init_fn`s (default, linear,
//! llama3, longrope), over all of a head or its first part; angles are computed per call for the positions in use, so no
//! table sized by the context length is kept.

use super::cpu_values::with_all_cpu_values;
use crate::models::config::{RopeConfig, RopeScaling, RotaryPairs};
use anyhow::{bail, Result};
use candle_core::{DType, Device, Tensor, D};

pub struct RotaryEmbedding {
    /// One inverse frequency per rotated pair (`rotary_dim / 2` of them).
    inv_freq: Vec<f32>,
    /// LongRoPE's frequencies for sequences longer than `.1` positions.
    long_inv_freq: Option<(Vec<f32>, usize)>,
    /// cos and sin are multiplied by this (LongRoPE's attention factor).
    magnitude: f32,
    /// How many leading dimensions of a head rotate.
    rotary_dim: usize,
    pairs: RotaryPairs,
}

impl RotaryEmbedding {
    pub fn new(rope: &RopeConfig, head_dim: usize) -> Result<Self> {
        // transformers truncates: int(head_dim * partial_rotary_factor).
        let rotary_dim = (head_dim as f64 * rope.partial_rotary_factor) as usize;
        if rotary_dim == 0 || !rotary_dim.is_multiple_of(2) || rotary_dim > head_dim {
            bail!("config: {rotary_dim} rotary dimensions of a {head_dim}-wide head (partial_rotary_factor {}) cannot rotate in pairs", rope.partial_rotary_factor);
        }
        let base: Vec<f64> =
            (0..rotary_dim / 2).map(|i| 1.0 / rope.theta.powf((2 * i) as f64 / rotary_dim as f64)).collect();
        if let RopeScaling::LongRope { short_factor, long_factor, original_max_position_embeddings, attention_factor } =
            &rope.scaling
        {
            let divided = |factors: &[f64], which: &str| -> Result<Vec<f32>> {
                if factors.len() != base.len() {
                    bail!(
                        "config: longrope `{which}` has {} entries for {} rotary frequencies",
                        factors.len(),
                        base.len()
                    );
                }
                Ok(base.iter().zip(factors).map(|(f, d)| (f / d) as f32).collect())
            };
            return Ok(Self {
                inv_freq: divided(short_factor, "short_factor")?,
                long_inv_freq: Some((divided(long_factor, "long_factor")?, *original_max_position_embeddings)),
                magnitude: *attention_factor as f32,
                rotary_dim,
                pairs: rope.pairs,
            });
        }
        let inv_freq = base.into_iter().map(|f| scale_frequency(f, &rope.scaling) as f32).collect();
        Ok(Self { inv_freq, long_inv_freq: None, magnitude: 1.0, rotary_dim, pairs: rope.pairs })
    }

    /// `(cos, sin)`, each `(len, rotary_dim / 2)`, for positions `start..start + len`.
    pub fn cos_sin(&self, start: usize, len: usize, dtype: DType, device: &Device) -> Result<(Tensor, Tensor)> {
        let inv_freq = self.frequencies_until(start + len);
        self.tables((start..start + len).map(|pos| (pos, inv_freq)), dtype, device)
    }

    /// `(cos, sin)`, each `(positions.len(), rotary_dim / 2)`, row `i` for
    /// position `positions[i]` as a decode step there ([`Self::cos_sin`]
    /// of that position alone) would have it.
    pub fn cos_sin_steps(&self, positions: &[usize], dtype: DType, device: &Device) -> Result<(Tensor, Tensor)> {
        self.tables(positions.iter().map(|&pos| (pos, self.frequencies_until(pos + 1))), dtype, device)
    }

    /// The frequencies for a forward pass whose sequence ends at `end`:
    /// LongRoPE switches to its long frequencies once the sequence is longer
    /// than the pretraining context (as transformers decides per forward pass).
    fn frequencies_until(&self, end: usize) -> &[f32] {
        match &self.long_inv_freq {
            Some((long, original)) if end > *original => long,
            _ => &self.inv_freq,
        }
    }

    /// The cos and sin tables of `rows`, each a position and its frequencies.
    fn tables<'a>(
        &self,
        rows: impl ExactSizeIterator<Item = (usize, &'a [f32])>,
        dtype: DType,
        device: &Device,
    ) -> Result<(Tensor, Tensor)> {
        let (len, half) = (rows.len(), self.inv_freq.len());
        let mut cos = Vec::with_capacity(len * half);
        let mut sin = Vec::with_capacity(len * half);
        for (pos, inv_freq) in rows {
            for &f in inv_freq {
                let angle = pos as f32 * f;
                cos.push(angle.cos() * self.magnitude);
                sin.push(angle.sin() * self.magnitude);
            }
        }
        let cos = Tensor::from_vec(cos, (len, half), device)?.to_dtype(dtype)?;
        let sin = Tensor::from_vec(sin, (len, half), device)?.to_dtype(dtype)?;
        Ok((cos, sin))
    }

    /// Rotates the first `rotary_dim` dimensions of `x` of shape
    /// `(batch, heads, seq, head_dim)` by the given angles.
    pub fn apply(&self, x: &Tensor, cos: &Tensor, sin: &Tensor) -> Result<Tensor> {
        let rotate = |x: &Tensor| -> Result<Tensor> {
            if let Some(rotated) = rotate_f32(x, cos, sin, self.pairs)? {
                return Ok(rotated);
            }
            Ok(match self.pairs {
                RotaryPairs::HalfSplit => candle_nn::rotary_emb::rope(x, cos, sin)?,
                RotaryPairs::Adjacent => candle_nn::rotary_emb::rope_i(x, cos, sin)?,
            })
        };
        let head_dim = x.dim(D::Minus1)?;
        if self.rotary_dim == head_dim {
            return rotate(&x.contiguous()?);
        }
        let rotated = rotate(&x.narrow(D::Minus1, 0, self.rotary_dim)?.contiguous()?)?;
        let passed = x.narrow(D::Minus1, self.rotary_dim, head_dim - self.rotary_dim)?;
        Ok(Tensor::cat(&[rotated, passed], D::Minus1)?)
    }
}

/// Rows of `head_dim` values one item of the pool rotates.
const ROWS_PER_ITEM: usize = 64;

/// `x (b, heads, t, d)` rotated by `cos` and `sin` `(t, d / 2)`, when all
/// are contiguous f32 on the CPU (else `None`): candle's `rope` / `rope_i`
/// arithmetic, value for value, on Cake's pool rather than candle's (whose
/// threads, woken for the few rows of a decode step of several sequences,
/// cost more than the rotation).
fn rotate_f32(x: &Tensor, cos: &Tensor, sin: &Tensor, pairs: RotaryPairs) -> Result<Option<Tensor>> {
    let (_, _, t, d) = x.dims4()?;
    if [x, cos, sin].iter().any(|v| v.dtype() != DType::F32) || cos.dims() != [t, d / 2] || sin.dims() != [t, d / 2] {
        return Ok(None);
    }
    let mut out = vec![0f32; x.elem_count()];
    let done = with_all_cpu_values(&[x, cos, sin], |values: &[&[f32]]| {
        let [x, cos, sin] = values else { unreachable!("three tensors") };
        let half = d / 2;
        cake_kernels::pool::global().for_each_chunk(&mut out, ROWS_PER_ITEM * d, &|item, part| {
            for (r, row) in part.chunks_exact_mut(d).enumerate() {
                let at = (item * ROWS_PER_ITEM + r) * d;
                let src = &x[at..at + d];
                let position = (item * ROWS_PER_ITEM + r) % t;
                let (cos, sin) = (&cos[position * half..][..half], &sin[position * half..][..half]);
                for i in 0..half {
                    let (c, s) = (cos[i], sin[i]);
                    let (i1, i2) = match pairs {
                        RotaryPairs::Adjacent => (2 * i, 2 * i + 1),
                        RotaryPairs::HalfSplit => (i, i + half),
                    };
                    row[i1] = src[i1] * c - src[i2] * s;
                    row[i2] = src[i1] * s + src[i2] * c;
                }
            }
        });
    });
    Ok(match done {
        Some(()) => Some(Tensor::from_vec(out, x.shape(), x.device())?),
        None => None,
    })
}

fn scale_frequency(freq: f64, scaling: &RopeScaling) -> f64 {
    match *scaling {
        RopeScaling::None | RopeScaling::LongRope { .. } => freq,
        RopeScaling::Linear { factor } => freq / factor,
        RopeScaling::Llama3 {
            factor,
            low_freq_factor,
            high_freq_factor,
            original_max_position_embeddings: context,
        } => {
            let wavelen = 2.0 * std::f64::consts::PI / freq;
            let low_freq_wavelen = context / low_freq_factor;
            let high_freq_wavelen = context / high_freq_factor;
            if wavelen > low_freq_wavelen {
                freq / factor
            } else if wavelen < high_freq_wavelen {
                freq
            } else {
                let smooth = (context / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor);
                (1.0 - smooth) * freq / factor + smooth * freq
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// llama.cpp's converter puts q/k row `i` of each half at `2i` and
    /// `i + d/2` at `2i + 1`; rotating adjacent pairs in that order must
    /// give transformers' rotation in its order, dimension for dimension.
    #[test]
    fn adjacent_pairs_on_gguf_rows_equal_half_split_on_hf_rows() -> Result<()> {
        let (heads, seq, dim) = (3, 5, 8);
        let rope =
            |pairs| RopeConfig { theta: 10_000.0, scaling: RopeScaling::None, partial_rotary_factor: 1.0, pairs };
        let hf = Tensor::randn(0f32, 1.0, (1, heads, seq, dim), &Device::Cpu)?;
        let gguf_order: Vec<u32> =
            (0..dim as u32).map(|j| if j % 2 == 0 { j / 2 } else { j / 2 + dim as u32 / 2 }).collect();
        let to_gguf = |t: &Tensor| t.index_select(&Tensor::new(gguf_order.as_slice(), &Device::Cpu)?, 3);
        let rotate = |pairs, x: &Tensor| -> Result<Tensor> {
            let rotary = RotaryEmbedding::new(&rope(pairs), dim)?;
            let (cos, sin) = rotary.cos_sin(7, seq, DType::F32, &Device::Cpu)?;
            rotary.apply(x, &cos, &sin)
        };
        let expected = to_gguf(&rotate(RotaryPairs::HalfSplit, &hf)?)?;
        let got = rotate(RotaryPairs::Adjacent, &to_gguf(&hf)?)?;
        let gap = (expected - got)?.abs()?.max_all()?.to_scalar::<f32>()?;
        assert!(gap < 1e-6, "largest difference {gap}");
        Ok(())
    }

    /// Cake's rotation gives candle's values bit for bit, for a decode
    /// step, a few rows and a prompt long enough to be split on the pool;
    /// rows rotated for separate positions equal each position's own.
    #[test]
    fn own_rotation_equals_candles_and_steps_equal_their_positions() -> Result<()> {
        let dim = 64;
        let rope =
            |pairs| RopeConfig { theta: 10_000.0, scaling: RopeScaling::None, partial_rotary_factor: 1.0, pairs };
        for pairs in [RotaryPairs::HalfSplit, RotaryPairs::Adjacent] {
            let rotary = RotaryEmbedding::new(&rope(pairs), dim)?;
            for seq in [1, 4, 300] {
                let x = Tensor::randn(0f32, 1.0, (1, 3, seq, dim), &Device::Cpu)?;
                let (cos, sin) = rotary.cos_sin(17, seq, DType::F32, &Device::Cpu)?;
                let ours = rotate_f32(&x, &cos, &sin, pairs)?.expect("f32 on the CPU");
                let candles = match pairs {
                    RotaryPairs::HalfSplit => candle_nn::rotary_emb::rope(&x, &cos, &sin)?,
                    RotaryPairs::Adjacent => candle_nn::rotary_emb::rope_i(&x, &cos, &sin)?,
                };
                let flat = |t: &Tensor| t.flatten_all()?.to_vec1::<f32>();
                assert_eq!(flat(&ours)?, flat(&candles)?, "{pairs:?}, {seq} positions");
            }
            let positions = [5, 0, 130];
            let (cos, sin) = rotary.cos_sin_steps(&positions, DType::F32, &Device::Cpu)?;
            for (row, &position) in positions.iter().enumerate() {
                let (alone_cos, alone_sin) = rotary.cos_sin(position, 1, DType::F32, &Device::Cpu)?;
                assert_eq!(cos.narrow(0, row, 1)?.to_vec2::<f32>()?, alone_cos.to_vec2::<f32>()?);
                assert_eq!(sin.narrow(0, row, 1)?.to_vec2::<f32>()?, alone_sin.to_vec2::<f32>()?);
            }
        }
        Ok(())
    }

    #[test]
    fn llama3_scaling_keeps_high_and_divides_low_frequencies() {
        let scaling = RopeScaling::Llama3 {
            factor: 8.0,
            low_freq_factor: 1.0,
            high_freq_factor: 4.0,
            original_max_position_embeddings: 8192.0,
        };
        assert_eq!(scale_frequency(1.0, &scaling), 1.0);
        let low = 2.0 * std::f64::consts::PI / 100_000.0;
        assert!((scale_frequency(low, &scaling) - low / 8.0).abs() < 1e-15);
    }
}
