//! Causal self-attention with grouped-query heads, rotary positions, optional
//! q/k RMSNorm (per head or over the projection), an optional sliding
//! window, and spans of positions that see each other both ways (one
//! picture's tokens in Gemma 3).

use super::kv_cache::{CacheView, CacheViews, LayerCache};
use super::linear::Linear;
use super::norm::RmsNorm;
use super::projections::Projections;
use super::rotary::RotaryEmbedding;
use crate::models::config::{LayerAttention, ModelConfig, QkNorm};
use crate::models::weights::Weights;
use anyhow::{bail, Result};
use cake_kernels::attention::{decode_attention_streams, prefill_attention};
use cake_kernels::cpu::Level;
use candle_core::{DType, Device, Tensor};
use std::ops::Range;

pub struct Attention {
    /// q, k and v (separate or fused as `qkv_proj`).
    qkv: Projections,
    o_proj: Linear,
    q_norm: Option<RmsNorm>,
    k_norm: Option<RmsNorm>,
    /// Whether `q_norm`/`k_norm` span the whole projection rather than one head.
    norm_whole: bool,
    /// `None` for layers without position encoding.
    rotary: Option<RotaryEmbedding>,
    num_heads: usize,
    num_kv_heads: usize,
    head_dim: usize,
    sliding_window: Option<usize>,
    /// Scores are multiplied by this (1/√head_dim unless the config says otherwise).
    scale: f64,
    /// `cap · tanh(score / cap)` before the mask (Gemma 2 style), if set.
    logit_softcap: Option<f64>,
    /// Each head's q projection carries a gate after its query (Qwen3.5);
    /// the output is multiplied by `sigmoid(gate)` before `o_proj`.
    output_gate: bool,
}

impl Attention {
    pub fn load(weights: &Weights, prefix: &str, cfg: &ModelConfig, layer: &LayerAttention) -> Result<Self> {
        let (h, d) = (cfg.hidden_size, cfg.head_dim);
        let q_dim = cfg.num_attention_heads * d;
        let kv_dim = cfg.num_key_value_heads * d;
        let qk_norm = |name: &str, projection: usize| -> Result<Option<RmsNorm>> {
            let dim = match cfg.qk_norm {
                QkNorm::None => return Ok(None),
                QkNorm::PerHead => d,
                QkNorm::Whole => projection,
            };
            Ok(Some(RmsNorm::load_for(weights, &format!("{prefix}.{name}.weight"), dim, cfg)?))
        };
        Ok(Self {
            qkv: Projections::load(
                weights,
                prefix,
                "qkv_proj",
                &[
                    ("q_proj", if cfg.attention_output_gate { 2 * q_dim } else { q_dim }),
                    ("k_proj", kv_dim),
                    ("v_proj", kv_dim),
                ],
                h,
                cfg.qkv_bias,
            )?,
            o_proj: Linear::load(weights, &format!("{prefix}.o_proj"), q_dim, h, cfg.o_bias)?,
            q_norm: qk_norm("q_norm", q_dim)?,
            k_norm: qk_norm("k_norm", kv_dim)?,
            norm_whole: cfg.qk_norm == QkNorm::Whole,
            rotary: layer.uses_rope.then(|| RotaryEmbedding::new(&layer.rope, d)).transpose()?,
            num_heads: cfg.num_attention_heads,
            num_kv_heads: cfg.num_key_value_heads,
            head_dim: d,
            sliding_window: layer.sliding_window,
            scale: 1.0 / cfg.query_pre_attn_scalar.unwrap_or(d as f64).sqrt(),
            logit_softcap: cfg.attn_logit_softcapping,
            output_gate: cfg.attention_output_gate,
        })
    }

    /// Bytes of weights held.
    pub fn weight_bytes(&self) -> usize {
        let norms =
            [&self.q_norm, &self.k_norm].iter().filter_map(|n| n.as_ref()).map(RmsNorm::weight_bytes).sum::<usize>();
        self.qkv.weight_bytes() + self.o_proj.weight_bytes() + norms
    }

    /// Splits `(b, t, heads * d)` into `(b, heads, t, d)`, normalising the
    /// projection or each head if configured.
    fn heads(&self, x: &Tensor, heads: usize, norm: Option<&RmsNorm>) -> Result<Tensor> {
        let (b, t, _) = x.dims3()?;
        let x = match norm {
            Some(n) if self.norm_whole => n.forward(x)?.reshape((b, t, heads, self.head_dim))?,
            Some(n) => n.forward(&x.reshape((b, t, heads, self.head_dim))?)?,
            None => x.reshape((b, t, heads, self.head_dim))?,
        };
        Ok(x.transpose(1, 2)?.contiguous()?)
    }

    /// Attends `x` of shape `(b, t, hidden)` at positions `cache.len()..` and
    /// appends its keys and values to `cache`. Besides its past, a position
    /// sees every position of a `mutual` span it lies in (spans must lie
    /// within this input or before it).
    pub fn forward(&self, x: &Tensor, cache: &mut LayerCache, mutual: &[Range<usize>]) -> Result<Tensor> {
        let projected = self.project(x)?;
        let out = self.attend_cached(&projected.q, &projected.k, &projected.v, cache, mutual)?;
        self.output(out, projected.gate)
    }

    /// One new position of each of several sequences (a batched decode
    /// step): row `i` of `x (1, n, hidden)` is the next position of the
    /// sequence whose cache is `caches[i]`. The projections read their
    /// weights once for all rows, heads are split and rotated for all rows
    /// together, and each row attends over its own cache, all rows in one
    /// job where the caches allow (each row's values equal its step alone).
    pub fn forward_streams(&self, x: &Tensor, caches: &mut [&mut LayerCache]) -> Result<Tensor> {
        let projected = self.project(x)?;
        let positions: Vec<usize> = caches.iter().map(|cache| cache.len()).collect();
        let q = self.heads(&projected.q, self.num_heads, self.q_norm.as_ref())?;
        let k = self.heads(&projected.k, self.num_kv_heads, self.k_norm.as_ref())?;
        let v = self.heads(&projected.v, self.num_kv_heads, None)?;
        let (q, k) = match &self.rotary {
            Some(rotary) => {
                let (cos, sin) = rotary.cos_sin_steps(&positions, q.dtype(), q.device())?;
                (rotary.apply(&q, &cos, &sin)?, rotary.apply(&k, &cos, &sin)?)
            }
            None => (q, k),
        };
        let row = |t: &Tensor, i: usize| t.narrow(2, i, 1)?.contiguous();
        // Only the future is hidden from any row: one kernel over every cache in place.
        let together = q.dtype() == DType::F32
            && self.sliding_window.is_none()
            && caches.iter().all(|cache| cache.first_position() == 0);
        if together {
            let mut filled = Vec::with_capacity(caches.len());
            for (i, cache) in caches.iter_mut().enumerate() {
                filled.push(cache.append(&row(&k, i)?, &row(&v, i)?)?);
            }
            let out = match self.attend_streams_in_place(&q, caches)? {
                Some(out) => out,
                // Not CPU buffers: each row over its own keys and values, nothing to mask.
                None => {
                    let rows = (filled.iter().enumerate())
                        .map(|(i, (k, v))| {
                            self.attend(&row(&q, i)?, &k.to_dtype(q.dtype())?, &v.to_dtype(q.dtype())?, None)
                        })
                        .collect::<Result<Vec<_>>>()?;
                    Tensor::cat(&rows, 1)?
                }
            };
            return self.output(out, projected.gate);
        }
        let rows = (caches.iter_mut().enumerate())
            .map(|(i, cache)| self.append_and_attend(&row(&q, i)?, &row(&k, i)?, &row(&v, i)?, cache, &[]))
            .collect::<Result<Vec<_>>>()?;
        self.output(Tensor::cat(&rows, 1)?, projected.gate)
    }

    /// The q, k and v projections of `x (b, t, hidden)`, the query split
    /// from its gate where heads carry one.
    fn project(&self, x: &Tensor) -> Result<Projected> {
        let (b, t, _) = x.dims3()?;
        let [q, k, v]: [Tensor; 3] = self.qkv.forward(x)?.try_into().expect("three projections");
        if !self.output_gate {
            return Ok(Projected { q, k, v, gate: None });
        }
        // Per head: [query (head_dim) | gate (head_dim)].
        let both = q.reshape((b, t, self.num_heads, 2 * self.head_dim))?;
        let width = self.num_heads * self.head_dim;
        let q = both.narrow(3, 0, self.head_dim)?.contiguous()?.reshape((b, t, width))?;
        let gate = both.narrow(3, self.head_dim, self.head_dim)?.contiguous()?.reshape((b, t, width))?;
        Ok(Projected { q, k, v, gate: Some(gate) })
    }

    /// Projected queries, keys and values `(b, t, ·)` of the positions
    /// `cache.len()..`: heads split and normed, rotated, keys and values
    /// appended to `cache`, queries attended over it: `(b, t, heads · d)`.
    fn attend_cached(
        &self,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        cache: &mut LayerCache,
        mutual: &[Range<usize>],
    ) -> Result<Tensor> {
        let t = q.dim(1)?;
        let start = cache.len();
        let q = self.heads(q, self.num_heads, self.q_norm.as_ref())?;
        let k = self.heads(k, self.num_kv_heads, self.k_norm.as_ref())?;
        let v = self.heads(v, self.num_kv_heads, None)?;
        let (q, k) = match &self.rotary {
            Some(rotary) => {
                let (cos, sin) = rotary.cos_sin(start, t, q.dtype(), q.device())?;
                (rotary.apply(&q, &cos, &sin)?, rotary.apply(&k, &cos, &sin)?)
            }
            None => (q, k),
        };
        self.append_and_attend(&q, &k, &v, cache, mutual)
    }

    /// Queries, keys and values `(1, ·, t, d)` of the positions
    /// `cache.len()..`, split into heads and rotated: the keys and values
    /// appended to `cache`, the queries attended over it: `(1, t, heads · d)`.
    fn append_and_attend(
        &self,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        cache: &mut LayerCache,
        mutual: &[Range<usize>],
    ) -> Result<Tensor> {
        let (t, start) = (q.dim(2)?, cache.len());
        let first_key = cache.first_position();
        // Only spans reaching into this input change what it sees.
        let mutual: Vec<Range<usize>> = mutual.iter().filter(|s| s.end > start && s.len() > 1).cloned().collect();
        if let Some(split) = mutual.iter().find(|s| s.start < start || s.end > start + t) {
            bail!("positions {split:?} see each other but arrive split at {start}..{}", start + t);
        }
        let (k, v) = cache.append(k, v)?;
        let total = k.dim(2)?;
        if let Some(window) = self.sliding_window {
            // Later queries never look further back than the window.
            cache.keep_last(window)?;
        }
        let mask = || attention_mask(start, t, first_key, total, self.sliding_window, &mutual, q.device());
        // Over a cache on the CPU that hides only the future (or one position with
        // nothing to hide), Cake's kernel reads the cache in place, every row
        // exactly as a decode step at its position would: a prompt gives the
        // same values read whole, in pieces, or continued from a kept session.
        let only_causal = self.sliding_window.is_none() && first_key == 0 && mutual.is_empty();
        let in_place = match q.dtype() {
            DType::F32 if only_causal || (t == 1 && mask()?.is_none()) => self.attend_in_place(q, cache)?,
            _ => None,
        };
        match in_place {
            Some(out) => Ok(out),
            None => self.attend(q, &k.to_dtype(q.dtype())?, &v.to_dtype(q.dtype())?, mask()?.as_ref()),
        }
    }

    /// The gate (where heads carry one) and `o_proj` on attended values.
    fn output(&self, out: Tensor, gate: Option<Tensor>) -> Result<Tensor> {
        let out = match gate {
            Some(gate) => (out * candle_nn::ops::sigmoid(&gate)?)?,
            None => out,
        };
        self.o_proj.forward(&out)
    }
}

/// A layer input's projections, before heads are split.
struct Projected {
    q: Tensor,
    k: Tensor,
    v: Tensor,
    /// The output gate, where heads carry one.
    gate: Option<Tensor>,
}

impl Attention {
    /// Queries `q (b, heads, t, d)` over keys and values `(b, kv, total, d)`,
    /// with `mask (t, total)` if any: `(b, t, heads · d)`.
    fn attend(&self, q: &Tensor, k: &Tensor, v: &Tensor, mask: Option<&Tensor>) -> Result<Tensor> {
        let (b, _, t, _) = q.dims4()?;
        let total = k.dim(2)?;
        // Group the query heads that share a kv head: (b, kv, rep * t, d).
        let rep = self.num_heads / self.num_kv_heads;
        let q = q.reshape((b, self.num_kv_heads, rep * t, self.head_dim))?;
        let scores = (q.matmul(&k.t()?)? * self.scale)?.to_dtype(DType::F32)?;
        let scores = match self.logit_softcap {
            Some(cap) => ((scores / cap)?.tanh()? * cap)?,
            None => scores,
        };
        let scores = match mask {
            Some(mask) => scores.reshape((b, self.num_kv_heads, rep, t, total))?.broadcast_add(mask)?.reshape((
                b,
                self.num_kv_heads,
                rep * t,
                total,
            ))?,
            None => scores,
        };
        let probs = candle_nn::ops::softmax_last_dim(&scores)?.to_dtype(v.dtype())?;
        let out = probs.matmul(v)?; // (b, kv, rep * t, d)
        Ok(out.reshape((b, self.num_heads, t, self.head_dim))?.transpose(1, 2)?.reshape((
            b,
            t,
            self.num_heads * self.head_dim,
        ))?)
    }

    /// The `t` newest positions' queries `q (1, heads, t, head_dim)` over
    /// the cache where it lies (see [`cake_kernels::attention`]):
    /// `(1, t, heads · head_dim)`, or `None` where the cache is not f32 or
    /// f16 on the CPU.
    fn attend_in_place(&self, q: &Tensor, cache: &LayerCache) -> Result<Option<Tensor>> {
        let t = q.dim(2)?;
        self.with_kernel(q, |q, out, k| {
            cache.with_in_place(|view| match view {
                CacheView::F32(kv) => prefill_attention(q, &kv, t, k.heads, k.scale, k.softcap, out, k.level, k.pool),
                CacheView::F16(kv) => prefill_attention(q, &kv, t, k.heads, k.scale, k.softcap, out, k.level, k.pool),
            })
        })
    }

    /// One new position of each sequence, queries `q (1, heads, n, d)`
    /// (row `i` the newest position of `caches[i]`), over every cache where
    /// it lies in one job (see [`decode_attention_streams`]): `(1, n, heads
    /// · d)`, or `None` where the caches are not all f32 or all f16 on the CPU.
    fn attend_streams_in_place(&self, q: &Tensor, caches: &[&mut LayerCache]) -> Result<Option<Tensor>> {
        let caches: Vec<&LayerCache> = caches.iter().map(|cache| &**cache).collect();
        self.with_kernel(q, |q, out, k| {
            LayerCache::with_all_in_place(&caches, |views| match views {
                CacheViews::F32(kvs) => {
                    decode_attention_streams(q, &kvs, k.heads, k.scale, k.softcap, out, k.level, k.pool)
                }
                CacheViews::F16(kvs) => {
                    decode_attention_streams(q, &kvs, k.heads, k.scale, k.softcap, out, k.level, k.pool)
                }
            })
        })
    }

    /// Runs one of Cake's attention kernels: `kernel(queries, out, settings)`
    /// with the queries `q (1, heads, rows, d)` laid out rows × heads × d and
    /// room for as many outputs; `(1, rows, heads · d)`, or `None` when the
    /// kernel could not read the caches.
    fn with_kernel(
        &self,
        q: &Tensor,
        kernel: impl FnOnce(&[f32], &mut [f32], &KernelSettings) -> Option<()>,
    ) -> Result<Option<Tensor>> {
        let rows = q.dim(2)?;
        let width = self.num_heads * self.head_dim;
        let q = q.transpose(1, 2)?.contiguous()?.flatten_all()?.to_vec1::<f32>()?;
        let mut out = vec![0f32; rows * width];
        let settings = KernelSettings {
            heads: self.num_heads,
            scale: self.scale as f32,
            softcap: self.logit_softcap.map(|c| c as f32),
            level: Level::detected(),
            pool: cake_kernels::pool::global(),
        };
        Ok(match kernel(&q, &mut out, &settings) {
            Some(()) => Some(Tensor::from_vec(out, (1, rows, width), &Device::Cpu)?),
            None => None,
        })
    }
}

/// What Cake's attention kernels need besides queries, caches and output.
struct KernelSettings {
    heads: usize,
    scale: f32,
    softcap: Option<f32>,
    level: Level,
    pool: &'static cake_kernels::pool::Pool,
}

/// Additive mask `(t, total)` for queries at `start..start + t` over the
/// keys at positions `first_key..first_key + total`: a key is visible when it
/// is not in the future or lies in a `mutual` span with the query, and, with
/// a window, fewer than `window` positions back. `None` when nothing is
/// masked.
fn attention_mask(
    start: usize,
    t: usize,
    first_key: usize,
    total: usize,
    window: Option<usize>,
    mutual: &[Range<usize>],
    device: &Device,
) -> Result<Option<Tensor>> {
    let together = |q: usize, k: usize| mutual.iter().any(|s| s.contains(&q) && s.contains(&k));
    let visible = |q: usize, k: usize| (k <= q || together(q, k)) && window.is_none_or(|w| k + w > q);
    let keys = first_key..first_key + total;
    let all_visible = (start..start + t).all(|q| keys.clone().all(|k| visible(q, k)));
    if all_visible {
        return Ok(None);
    }
    let mut mask = Vec::with_capacity(t * total);
    for q in start..start + t {
        for k in keys.clone() {
            mask.push(if visible(q, k) { 0f32 } else { f32::NEG_INFINITY });
        }
    }
    Ok(Some(Tensor::from_vec(mask, (t, total), device)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mask_rows(start: usize, t: usize, total: usize, window: Option<usize>) -> Vec<Vec<bool>> {
        match attention_mask(start, t, 0, total, window, &[], &Device::Cpu).unwrap() {
            None => vec![vec![true; total]; t],
            Some(m) => {
                m.to_vec2::<f32>().unwrap().into_iter().map(|row| row.into_iter().map(|v| v == 0.0).collect()).collect()
            }
        }
    }

    #[test]
    fn single_decode_step_needs_no_mask_without_window() {
        assert!(attention_mask(5, 1, 0, 6, None, &[], &Device::Cpu).unwrap().is_none());
    }

    #[test]
    fn prefill_is_causal() {
        let rows = mask_rows(0, 3, 3, None);
        assert_eq!(rows, vec![vec![true, false, false], vec![true, true, false], vec![true, true, true]]);
    }

    #[test]
    fn window_hides_old_keys() {
        let rows = mask_rows(4, 1, 5, Some(2));
        assert_eq!(rows, vec![vec![false, false, false, true, true]]);
    }

    #[test]
    fn a_trimmed_window_cache_needs_no_mask_for_one_step() {
        // Keys 3..5 kept of a window of 2: query 4 sees 3 and 4, nothing to mask.
        assert!(attention_mask(4, 1, 3, 2, Some(2), &[], &Device::Cpu).unwrap().is_none());
    }

    #[test]
    fn a_mutual_span_sees_itself_both_ways_and_only_its_past_beyond() {
        // Positions 1..3 (one picture) see each other; 3 sees all before it.
        let picture = std::slice::from_ref(&(1..3));
        let mask = attention_mask(0, 4, 0, 4, None, picture, &Device::Cpu).unwrap().unwrap();
        let rows: Vec<Vec<bool>> =
            mask.to_vec2::<f32>().unwrap().into_iter().map(|r| r.into_iter().map(|v| v == 0.0).collect()).collect();
        let expected = [[true, false, false, false], [true, true, true, false], [true, true, true, false], [true; 4]];
        assert_eq!(rows, expected.map(Vec::from).to_vec());
    }
}
