//! Gated DeltaNet linear attention (Qwen3.5's `linear_attention` layers).
//!
//! Each value head keeps a `key_dim × value_dim` state `S` instead of a KV
//! cache. Per token: `S ← exp(g)·S`, then the delta rule writes the value
//! the state failed to predict, `S ← S + k (β (v − Sᵀk))ᵀ`, and the output
//! reads `Sᵀq`. q, k and v come through a causal depthwise convolution with
//! SiLU; q and k are L2-normalised and q scaled by `1/√key_dim`. The output
//! is RMS-normalised, gated by `silu(z)` and projected back.
//!
//! A prompt is processed in chunks of [`CHUNK`] positions with the
//! reference's chunked form (a triangular solve inside each chunk, one
//! state update per chunk); single decode steps use the recurrent form.

use super::kv_cache::{LayerCache, RecurrentState};
use super::linear::Linear;
use super::norm::RmsNorm;
use crate::models::config::{GatedDeltaNetConfig, ModelConfig};
use crate::models::weights::{MatrixWeight, Weights};
use anyhow::Result;
use candle_core::{DType, Tensor, D};

/// Positions per chunk of the chunked form (as the reference).
pub const CHUNK: usize = 64;

pub struct GatedDeltaNet {
    in_proj_qkv: Linear,
    in_proj_z: Linear,
    in_proj_b: Linear,
    in_proj_a: Linear,
    /// Depthwise convolution weights, `(channels, kernel)`.
    conv_weight: Tensor,
    /// f32, one per value head.
    dt_bias: Tensor,
    a_log: Tensor,
    /// RMSNorm over each value head (weights used as stored), before the gate.
    norm: RmsNorm,
    out_proj: Linear,
    sizes: GatedDeltaNetConfig,
}

impl GatedDeltaNet {
    pub fn load(weights: &Weights, prefix: &str, cfg: &ModelConfig, sizes: GatedDeltaNetConfig) -> Result<Self> {
        let h = cfg.hidden_size;
        let key_dim = sizes.num_key_heads * sizes.key_head_dim;
        let value_dim = sizes.num_value_heads * sizes.value_head_dim;
        let channels = 2 * key_dim + value_dim;
        let nv = sizes.num_value_heads;
        let (in_proj_qkv, in_proj_z, in_proj_b, in_proj_a) =
            if weights.contains(&format!("{prefix}.in_proj_qkvz.weight")) {
                grouped_projections(weights, prefix, h, sizes)?
            } else {
                (
                    Linear::load(weights, &format!("{prefix}.in_proj_qkv"), h, channels, false)?,
                    Linear::load(weights, &format!("{prefix}.in_proj_z"), h, value_dim, false)?,
                    Linear::load(weights, &format!("{prefix}.in_proj_b"), h, nv, false)?,
                    Linear::load(weights, &format!("{prefix}.in_proj_a"), h, nv, false)?,
                )
            };
        let conv = weights.dense(&format!("{prefix}.conv1d.weight"), &[channels, 1, sizes.conv_kernel])?;
        let f32_vector = |name: &str| -> Result<Tensor> {
            Ok(weights.dense(&format!("{prefix}.{name}"), &[nv])?.to_dtype(DType::F32)?)
        };
        Ok(Self {
            in_proj_qkv,
            in_proj_z,
            in_proj_b,
            in_proj_a,
            conv_weight: conv.reshape((channels, sizes.conv_kernel))?,
            dt_bias: f32_vector("dt_bias")?,
            a_log: f32_vector("A_log")?,
            norm: RmsNorm::load(weights, &format!("{prefix}.norm.weight"), sizes.value_head_dim, cfg.rms_norm_eps)?,
            out_proj: Linear::load(weights, &format!("{prefix}.out_proj"), value_dim, h, false)?,
            sizes,
        })
    }

    /// Bytes of weights held.
    pub fn weight_bytes(&self) -> usize {
        let tensors =
            [&self.conv_weight, &self.dt_bias, &self.a_log].map(crate::models::fp8::tensor_bytes).iter().sum::<usize>();
        [&self.in_proj_qkv, &self.in_proj_z, &self.in_proj_b, &self.in_proj_a, &self.out_proj]
            .iter()
            .map(|l| l.weight_bytes())
            .sum::<usize>()
            + tensors
            + self.norm.weight_bytes()
    }

    /// `x` of shape `(b, t, hidden)`, continuing the state in `cache`.
    pub fn forward(&self, x: &Tensor, cache: &mut LayerCache) -> Result<Tensor> {
        let (b, t, _) = x.dims3()?;
        let s = self.sizes;
        let (key_dim, value_dim) = (s.num_key_heads * s.key_head_dim, s.num_value_heads * s.value_head_dim);
        let dtype = x.dtype();
        let previous = cache.recurrent.take();

        // The causal depthwise convolution, continuing the previous inputs.
        let mixed = self.in_proj_qkv.forward(x)?;
        let channels = mixed.dim(D::Minus1)?;
        let kernel = s.conv_kernel;
        let history = match &previous {
            Some(p) => p.conv_history.clone(),
            None => Tensor::zeros((b, kernel - 1, channels), dtype, x.device())?,
        };
        let inputs = Tensor::cat(&[&history, &mixed], 1)?;
        let mut conv = Tensor::zeros((b, t, channels), DType::F32, x.device())?;
        let weight = self.conv_weight.to_dtype(DType::F32)?;
        let inputs32 = inputs.to_dtype(DType::F32)?;
        for j in 0..kernel {
            let tap = weight.narrow(1, j, 1)?.squeeze(1)?;
            conv = (conv + inputs32.narrow(1, j, t)?.broadcast_mul(&tap)?)?;
        }
        let conv = candle_nn::ops::silu(&conv)?;
        let conv_history = inputs.narrow(1, inputs.dim(1)? - (kernel - 1), kernel - 1)?.contiguous()?;

        let q = conv.narrow(D::Minus1, 0, key_dim)?;
        let k = conv.narrow(D::Minus1, key_dim, key_dim)?;
        let v = conv.narrow(D::Minus1, 2 * key_dim, value_dim)?;
        let beta = candle_nn::ops::sigmoid(&self.in_proj_b.forward(x)?.to_dtype(DType::F32)?)?;
        // g = −exp(A_log) · softplus(a + dt_bias), in log space (≤ 0).
        let a = self.in_proj_a.forward(x)?.to_dtype(DType::F32)?.broadcast_add(&self.dt_bias)?;
        // softplus, without overflow for large inputs: max(a, 0) + ln(1 + e^−|a|).
        let softplus = (a.relu()? + (a.abs()?.neg()?.exp()? + 1.0)?.log()?)?;
        let g = softplus.broadcast_mul(&self.a_log.exp()?.neg()?)?;

        let rule = DeltaRule { sizes: s, batch: b, len: t };
        let mut state = match &previous {
            Some(p) => p.state.clone(),
            None => vec![0f32; b * s.num_value_heads * s.key_head_dim * s.value_head_dim],
        };
        let inputs = RuleInputs {
            q: q.contiguous()?.flatten_all()?.to_vec1()?,
            k: k.contiguous()?.flatten_all()?.to_vec1()?,
            v: v.contiguous()?.flatten_all()?.to_vec1()?,
            g: g.flatten_all()?.to_vec1()?,
            beta: beta.flatten_all()?.to_vec1()?,
        };
        // As the reference: the recurrent form for one token after a prompt, chunks otherwise.
        let out = if previous.is_some() && t == 1 {
            rule.recurrent(&inputs, &mut state)
        } else {
            rule.chunked(&inputs, &mut state)
        };
        cache.recurrent =
            Some(RecurrentState { conv_history, state, positions: previous.map_or(0, |p| p.positions) + t });

        // Norm per value head, gate with silu(z), project.
        let out = Tensor::from_vec(out, (b, t, s.num_value_heads, s.value_head_dim), x.device())?.to_dtype(dtype)?;
        let z = self.in_proj_z.forward(x)?.reshape((b, t, s.num_value_heads, s.value_head_dim))?;
        let gated = (self.norm.forward(&out)?.to_dtype(DType::F32)? * candle_nn::ops::silu(&z.to_dtype(DType::F32)?)?)?;
        self.out_proj.forward(&gated.to_dtype(dtype)?.reshape((b, t, value_dim))?)
    }
}

/// Qwen3-Next's fused projections, reordered into the separate ones: per
/// key head group, `in_proj_qkvz` holds `[q, k, v (r heads), z (r heads)]`
/// and `in_proj_ba` holds `[b (r), a (r)]`, with `r` value heads per key head.
fn grouped_projections(
    weights: &Weights,
    prefix: &str,
    hidden: usize,
    s: GatedDeltaNetConfig,
) -> Result<(Linear, Linear, Linear, Linear)> {
    let (nk, dk, dv) = (s.num_key_heads, s.key_head_dim, s.value_head_dim);
    let r = s.num_value_heads / nk;
    let group = 2 * dk + 2 * r * dv;
    let dense = |name: &str, rows: usize| -> Result<Tensor> {
        weights
            .matrix(&format!("{prefix}.{name}.weight"), &[rows, hidden])?
            .dequantize(weights.policy.dtype, &weights.device)
    };
    let qkvz = dense("in_proj_qkvz", nk * group)?;
    let ba = dense("in_proj_ba", nk * 2 * r)?;
    // Row ranges `offset..offset + len` of every group, in group order.
    let rows = |per_group: usize, offset: usize, len: usize| -> Vec<u32> {
        (0..nk).flat_map(|g| (0..len).map(move |i| (g * per_group + offset + i) as u32)).collect()
    };
    let pick = |matrix: &Tensor, ids: Vec<u32>| -> Result<Linear> {
        let n = ids.len();
        Linear::from_matrix(MatrixWeight::Dense(matrix.index_select(&Tensor::from_vec(ids, n, matrix.device())?, 0)?))
    };
    let mut qkv_rows = rows(group, 0, dk);
    qkv_rows.extend(rows(group, dk, dk));
    qkv_rows.extend(rows(group, 2 * dk, r * dv));
    Ok((
        pick(&qkvz, qkv_rows)?,
        pick(&qkvz, rows(group, 2 * dk + r * dv, r * dv))?,
        pick(&ba, rows(2 * r, 0, r))?,
        pick(&ba, rows(2 * r, r, r))?,
    ))
}

/// q, k, v, g and β of a step, f32, in `(batch, position, head, dim)` order.
struct RuleInputs {
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    g: Vec<f32>,
    beta: Vec<f32>,
}

/// The gated delta rule over `len` positions of `batch` sequences.
struct DeltaRule {
    sizes: GatedDeltaNetConfig,
    batch: usize,
    len: usize,
}

/// One value head's inputs at every position: q and k L2-normalised (q also
/// scaled), in position order.
struct HeadInputs {
    q: Vec<Vec<f32>>,
    k: Vec<Vec<f32>>,
    v: Vec<Vec<f32>>,
    g: Vec<f32>,
    beta: Vec<f32>,
}

impl DeltaRule {
    /// The inputs of value head `head` of sequence `batch`; a key head serves
    /// `num_value_heads / num_key_heads` consecutive value heads.
    fn head_inputs(&self, x: &RuleInputs, batch: usize, head: usize) -> HeadInputs {
        let s = self.sizes;
        let (dk, dv, nk, nv) = (s.key_head_dim, s.value_head_dim, s.num_key_heads, s.num_value_heads);
        let key_head = head / (nv / nk);
        let mut inputs = HeadInputs { q: Vec::new(), k: Vec::new(), v: Vec::new(), g: Vec::new(), beta: Vec::new() };
        for t in 0..self.len {
            let row = batch * self.len + t;
            let key_at = row * nk * dk + key_head * dk;
            let value_at = row * nv * dv + head * dv;
            let mut q = l2_normalised(&x.q[key_at..key_at + dk]);
            let scale = 1.0 / (dk as f32).sqrt();
            q.iter_mut().for_each(|e| *e *= scale);
            inputs.q.push(q);
            inputs.k.push(l2_normalised(&x.k[key_at..key_at + dk]));
            inputs.v.push(x.v[value_at..value_at + dv].to_vec());
            inputs.g.push(x.g[row * nv + head]);
            inputs.beta.push(x.beta[row * nv + head]);
        }
        inputs
    }

    /// Token by token; returns the outputs `(batch, position, head, dim)`.
    fn recurrent(&self, x: &RuleInputs, state: &mut [f32]) -> Vec<f32> {
        let s = self.sizes;
        let (dk, dv, nv) = (s.key_head_dim, s.value_head_dim, s.num_value_heads);
        let mut out = vec![0f32; self.batch * self.len * nv * dv];
        for batch in 0..self.batch {
            for head in 0..nv {
                let inputs = self.head_inputs(x, batch, head);
                let st = &mut state[(batch * nv + head) * dk * dv..][..dk * dv];
                for t in 0..self.len {
                    let decay = inputs.g[t].exp();
                    st.iter_mut().for_each(|e| *e *= decay);
                    let (k, v, q) = (&inputs.k[t], &inputs.v[t], &inputs.q[t]);
                    // What the state predicts for k, and the correction to write.
                    let delta: Vec<f32> = (0..dv)
                        .map(|j| (v[j] - (0..dk).map(|i| st[i * dv + j] * k[i]).sum::<f32>()) * inputs.beta[t])
                        .collect();
                    for i in 0..dk {
                        for j in 0..dv {
                            st[i * dv + j] += k[i] * delta[j];
                        }
                    }
                    let at = ((batch * self.len + t) * nv + head) * dv;
                    for j in 0..dv {
                        out[at + j] = (0..dk).map(|i| st[i * dv + j] * q[i]).sum();
                    }
                }
            }
        }
        out
    }

    /// Chunk by chunk (the reference's chunked form, padded to whole chunks).
    fn chunked(&self, x: &RuleInputs, state: &mut [f32]) -> Vec<f32> {
        let s = self.sizes;
        let (dk, dv, nv) = (s.key_head_dim, s.value_head_dim, s.num_value_heads);
        let mut out = vec![0f32; self.batch * self.len * nv * dv];
        let dot = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>();
        for batch in 0..self.batch {
            for head in 0..nv {
                let inputs = self.head_inputs(x, batch, head);
                let st = &mut state[(batch * nv + head) * dk * dv..][..dk * dv];
                for start in (0..self.len).step_by(CHUNK) {
                    let n = CHUNK.min(self.len - start);
                    let at = |i: usize| start + i;
                    // Cumulative log decay inside the chunk.
                    let cum: Vec<f32> = inputs.g[start..start + n]
                        .iter()
                        .scan(0f32, |acc, g| {
                            *acc += g;
                            Some(*acc)
                        })
                        .collect();
                    let decay = |i: usize, j: usize| (cum[i] - cum[j]).exp();
                    let k_beta: Vec<Vec<f32>> =
                        (0..n).map(|i| inputs.k[at(i)].iter().map(|e| e * inputs.beta[at(i)]).collect()).collect();
                    // Forward substitution: (I + L) X = B with L the strictly lower
                    // part of (β k)·kᵀ ⊙ decay; B = β v (giving u) and β k·exp(cum) (giving w).
                    let mut u: Vec<Vec<f32>> = Vec::with_capacity(n);
                    let mut w: Vec<Vec<f32>> = Vec::with_capacity(n);
                    for i in 0..n {
                        let mut ui: Vec<f32> = inputs.v[at(i)].iter().map(|e| e * inputs.beta[at(i)]).collect();
                        let mut wi: Vec<f32> = k_beta[i].iter().map(|e| e * cum[i].exp()).collect();
                        for j in 0..i {
                            let l = dot(&k_beta[i], &inputs.k[at(j)]) * decay(i, j);
                            ui.iter_mut().zip(&u[j]).for_each(|(a, b): (&mut f32, &f32)| *a -= l * b);
                            wi.iter_mut().zip(&w[j]).for_each(|(a, b): (&mut f32, &f32)| *a -= l * b);
                        }
                        u.push(ui);
                        w.push(wi);
                    }
                    // The corrections the chunk writes, given the state before it.
                    let v_new: Vec<Vec<f32>> = (0..n)
                        .map(|i| {
                            (0..dv).map(|j| u[i][j] - (0..dk).map(|c| w[i][c] * st[c * dv + j]).sum::<f32>()).collect()
                        })
                        .collect();
                    for (i, cum_i) in cum.iter().enumerate() {
                        let q_decayed: Vec<f32> = inputs.q[at(i)].iter().map(|e| e * cum_i.exp()).collect();
                        let o = ((batch * self.len + at(i)) * nv + head) * dv;
                        for j in 0..dv {
                            let from_state: f32 = (0..dk).map(|c| q_decayed[c] * st[c * dv + j]).sum();
                            let within: f32 = (0..=i)
                                .map(|m| dot(&inputs.q[at(i)], &inputs.k[at(m)]) * decay(i, m) * v_new[m][j])
                                .sum();
                            out[o + j] = from_state + within;
                        }
                    }
                    // S ← exp(cum_last)·S + Σ_i (k_i · exp(cum_last − cum_i)) v_newᵢᵀ
                    let last = cum[n - 1];
                    st.iter_mut().for_each(|e| *e *= last.exp());
                    for i in 0..n {
                        let scale = (last - cum[i]).exp();
                        for c in 0..dk {
                            let kc = inputs.k[at(i)][c] * scale;
                            for j in 0..dv {
                                st[c * dv + j] += kc * v_new[i][j];
                            }
                        }
                    }
                }
            }
        }
        out
    }
}

/// `x / √(Σx² + 1e-6)`, as the reference's `l2norm`.
fn l2_normalised(x: &[f32]) -> Vec<f32> {
    let inv = 1.0 / (x.iter().map(|e| e * e).sum::<f32>() + 1e-6).sqrt();
    x.iter().map(|e| e * inv).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both forms compute the same rule: over several chunks, with a state carried in.
    #[test]
    fn chunked_and_recurrent_forms_agree() {
        let sizes = GatedDeltaNetConfig {
            num_key_heads: 1,
            num_value_heads: 2,
            key_head_dim: 3,
            value_head_dim: 2,
            conv_kernel: 4,
        };
        let len = CHUNK + 9;
        let wave = |n: usize, f: f32| -> Vec<f32> { (0..n).map(|i| ((i as f32) * f).sin()).collect() };
        let inputs = RuleInputs {
            q: wave(len * 3, 0.7),
            k: wave(len * 3, 1.3),
            v: wave(len * 2 * 2, 0.4),
            g: wave(len * 2, 0.9).iter().map(|e| -0.1 - 0.2 * e.abs()).collect(),
            beta: wave(len * 2, 0.3).iter().map(|e| 0.5 + 0.4 * e).collect(),
        };
        let rule = DeltaRule { sizes, batch: 1, len };
        let start: Vec<f32> = wave(2 * 3 * 2, 0.5);
        let (mut a, mut b) = (start.clone(), start);
        let chunked = rule.chunked(&inputs, &mut a);
        let recurrent = rule.recurrent(&inputs, &mut b);
        for (x, y) in chunked.iter().zip(&recurrent).chain(a.iter().zip(&b)) {
            assert!((x - y).abs() < 1e-4, "{x} vs {y}");
        }
    }
}
