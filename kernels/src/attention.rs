//! Attention of one new position (a decode step) over the cached keys and
//! values, for every query head at once: scores, softmax and the weighted
//! sum of values in one pass per head, reading the cache where it lies.

use super::cpu::Level;
use super::dense::dot;
use super::pool::Pool;

/// Where the cached keys and values of one layer lie: `kv_heads` blocks of
/// `len` positions × `head_dim` values, block `h` starting at `h · head_stride`.
pub struct CachedKv<'a> {
    pub keys: &'a [f32],
    pub values: &'a [f32],
    pub kv_heads: usize,
    pub head_stride: usize,
    pub len: usize,
    pub head_dim: usize,
}

/// `out[h] = softmax(scale · q[h] · Kᵀ) · V` for each query head `h`
/// (`q` and `out`: heads × head_dim), query heads sharing kv heads in
/// groups (`heads / kv_heads` per kv head). With `softcap`, scores become
/// `cap · tanh(score / cap)` first.
pub fn decode_attention(q: &[f32], kv: &CachedKv, heads: usize, scale: f32, softcap: Option<f32>, out: &mut [f32], level: Level, pool: &Pool) {
    let d = kv.head_dim;
    assert!(heads % kv.kv_heads == 0 && q.len() == heads * d && out.len() == heads * d, "head counts disagree");
    assert!(kv.len > 0 && (kv.kv_heads - 1) * kv.head_stride + kv.len * d <= kv.keys.len().min(kv.values.len()), "cache too short");
    let group = heads / kv.kv_heads;
    let output = Output(out.as_mut_ptr());
    pool.run(heads, &|range| {
        let mut scores = vec![0f32; kv.len];
        for h in range {
            let base = (h / group) * kv.head_stride;
            let query = &q[h * d..(h + 1) * d];
            let mut max = f32::NEG_INFINITY;
            for (j, score) in scores.iter_mut().enumerate() {
                let key = &kv.keys[base + j * d..base + (j + 1) * d];
                let mut s = dot(query, key, level) * scale;
                if let Some(cap) = softcap {
                    s = cap * (s / cap).tanh();
                }
                *score = s;
                max = max.max(s);
            }
            let mut total = 0f32;
            for score in scores.iter_mut() {
                *score = (*score - max).exp();
                total += *score;
            }
            // SAFETY: head `h`'s output, written by this thread only.
            let out = unsafe { output.head(h, d) };
            out.fill(0.0);
            for (j, &weight) in scores.iter().enumerate() {
                let value = &kv.values[base + j * d..base + (j + 1) * d];
                let weight = weight / total;
                // A plain multiply-add: `mul_add` would be a libm call
                // without FMA enabled at compile time.
                for (o, &v) in out.iter_mut().zip(value) {
                    *o += weight * v;
                }
            }
        }
    });
}

struct Output(*mut f32);
// SAFETY: each head's slice is written by one thread.
unsafe impl Sync for Output {}

impl Output {
    /// SAFETY: in bounds, and used by one thread at a time.
    unsafe fn head(&self, h: usize, d: usize) -> &mut [f32] {
        std::slice::from_raw_parts_mut(self.0.add(h * d), d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_a_plain_double_precision_attention() {
        let (heads, kv_heads, d, len, stride_pad) = (6, 2, 20, 13, 7);
        let head_stride = (len + stride_pad) * d;
        let value = |i: usize| ((i * 2654435761usize % 1000) as f32 - 500.0) / 300.0;
        let keys: Vec<f32> = (0..kv_heads * head_stride).map(value).collect();
        let values: Vec<f32> = (0..kv_heads * head_stride).map(|i| value(i + 77)).collect();
        let q: Vec<f32> = (0..heads * d).map(|i| value(i + 5)).collect();
        let kv = CachedKv { keys: &keys, values: &values, kv_heads, head_stride, len, head_dim: d };
        for softcap in [None, Some(2.0f32)] {
            for level in Level::all_supported() {
                let mut out = vec![f32::NAN; heads * d];
                decode_attention(&q, &kv, heads, 0.3, softcap, &mut out, level, &Pool::new(2));
                for h in 0..heads {
                    let base = (h / (heads / kv_heads)) * head_stride;
                    let mut scores: Vec<f64> = (0..len)
                        .map(|j| {
                            let s: f64 = (0..d).map(|c| q[h * d + c] as f64 * keys[base + j * d + c] as f64).sum::<f64>() * 0.3;
                            softcap.map_or(s, |cap| cap as f64 * (s / cap as f64).tanh())
                        })
                        .collect();
                    let max = scores.iter().cloned().fold(f64::MIN, f64::max);
                    scores.iter_mut().for_each(|s| *s = (*s - max).exp());
                    let total: f64 = scores.iter().sum();
                    for c in 0..d {
                        let expected: f64 = (0..len).map(|j| scores[j] / total * values[base + j * d + c] as f64).sum();
                        let got = out[h * d + c] as f64;
                        assert!((got - expected).abs() < 1e-5, "head {h} value {c} {level:?} {softcap:?}: {got} vs {expected}");
                    }
                }
            }
        }
    }
}
