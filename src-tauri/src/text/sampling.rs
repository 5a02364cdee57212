//! Choosing the next token from logits.
//!
//! Order follows transformers' logits processors: repetition penalty, then
//! temperature, top-k, top-p and min-p. Temperature 0 is greedy (the first
//! maximum wins, as `argmax` does). A seeded RNG makes sampling repeatable.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

/// Sampling settings of one request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SamplingParams {
    /// 0 means greedy.
    pub temperature: f32,
    /// Keep only the k most likely tokens (0 = off).
    pub top_k: usize,
    /// Keep the smallest set of tokens whose probability reaches p (1 = off).
    pub top_p: f32,
    /// Drop tokens less likely than `min_p` × the most likely one (0 = off).
    pub min_p: f32,
    /// Divide positive / multiply negative logits of seen tokens (1 = off).
    pub repeat_penalty: f32,
    pub seed: u64,
}

impl Default for SamplingParams {
    /// Cake's defaults for models that state none: moderate sampling.
    fn default() -> Self {
        Self { temperature: 0.7, top_k: 0, top_p: 0.9, min_p: 0.0, repeat_penalty: 1.0, seed: 42 }
    }
}

/// Settings a person chose explicitly; `None` keeps the model's default.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SamplingOverrides {
    pub temperature: Option<f32>,
    pub top_k: Option<usize>,
    pub top_p: Option<f32>,
    pub min_p: Option<f32>,
    pub repeat_penalty: Option<f32>,
    pub seed: Option<u64>,
}

impl SamplingOverrides {
    /// `base` with every chosen setting replaced.
    pub fn apply_to(&self, base: &SamplingParams) -> SamplingParams {
        SamplingParams {
            temperature: self.temperature.unwrap_or(base.temperature),
            top_k: self.top_k.unwrap_or(base.top_k),
            top_p: self.top_p.unwrap_or(base.top_p),
            min_p: self.min_p.unwrap_or(base.min_p),
            repeat_penalty: self.repeat_penalty.unwrap_or(base.repeat_penalty),
            seed: self.seed.unwrap_or(base.seed),
        }
    }

    /// The sampling settings of a `generation_config.json`.
    pub fn from_generation_config(config: &serde_json::Value) -> Self {
        let float = |key: &str| config.get(key).and_then(serde_json::Value::as_f64).map(|v| v as f32);
        let greedy = config.get("do_sample").and_then(serde_json::Value::as_bool) == Some(false);
        Self {
            temperature: if greedy { Some(0.0) } else { float("temperature") },
            top_k: config.get("top_k").and_then(serde_json::Value::as_u64).map(|v| v as usize),
            top_p: float("top_p"),
            min_p: float("min_p"),
            repeat_penalty: float("repetition_penalty"),
            seed: None,
        }
    }
}

impl SamplingParams {
    /// Rejects settings that have no meaning.
    pub fn validate(&self) -> anyhow::Result<()> {
        anyhow::ensure!(self.temperature >= 0.0 && self.temperature.is_finite(), "temperature must be ≥ 0");
        anyhow::ensure!(self.top_p > 0.0 && self.top_p <= 1.0, "top-p must be in (0, 1]");
        anyhow::ensure!((0.0..=1.0).contains(&self.min_p), "min-p must be in [0, 1]");
        anyhow::ensure!(self.repeat_penalty > 0.0, "repeat penalty must be > 0");
        Ok(())
    }
}

pub struct Sampler {
    params: SamplingParams,
    rng: StdRng,
}

impl Sampler {
    pub fn new(params: SamplingParams) -> Self {
        let rng = StdRng::seed_from_u64(params.seed);
        Self { params, rng }
    }

    /// Picks the next token. `history` is every token so far (prompt included).
    pub fn sample(&mut self, logits: &mut [f32], history: &[u32]) -> u32 {
        let p = &self.params;
        if p.repeat_penalty != 1.0 {
            apply_repeat_penalty(logits, history, p.repeat_penalty);
        }
        if p.temperature == 0.0 {
            return argmax(logits);
        }
        let mut candidates: Vec<(u32, f32)> =
            logits.iter().enumerate().map(|(i, &l)| (i as u32, l / p.temperature)).collect();
        if p.top_k > 0 && p.top_k < candidates.len() {
            candidates.select_nth_unstable_by(p.top_k - 1, |a, b| b.1.total_cmp(&a.1));
            candidates.truncate(p.top_k);
        }
        // Softmax over the survivors, most likely first.
        candidates.sort_unstable_by(|a, b| b.1.total_cmp(&a.1));
        let max = candidates[0].1;
        let mut probs: Vec<f32> = candidates.iter().map(|c| (c.1 - max).exp()).collect();
        let total: f32 = probs.iter().sum();
        probs.iter_mut().for_each(|q| *q /= total);
        let mut keep = probs.len();
        if p.top_p < 1.0 {
            let mut cumulative = 0.0;
            keep = probs
                .iter()
                .position(|&q| {
                    cumulative += q;
                    cumulative >= p.top_p
                })
                .map_or(probs.len(), |i| i + 1);
        }
        if p.min_p > 0.0 {
            let floor = probs[0] * p.min_p;
            keep = keep.min(probs.iter().take_while(|&&q| q >= floor).count().max(1));
        }
        let kept_total: f32 = probs[..keep].iter().sum();
        let mut draw = self.rng.random::<f32>() * kept_total;
        for (i, &q) in probs[..keep].iter().enumerate() {
            if draw < q {
                return candidates[i].0;
            }
            draw -= q;
        }
        candidates[keep - 1].0
    }
}

fn apply_repeat_penalty(logits: &mut [f32], history: &[u32], penalty: f32) {
    let mut seen = std::collections::HashSet::new();
    for &t in history {
        if let Some(l) = logits.get_mut(t as usize) {
            if seen.insert(t) {
                *l = if *l > 0.0 { *l / penalty } else { *l * penalty };
            }
        }
    }
}

/// Values [`argmax`] compares at once.
const LANES: usize = 8;

/// Index of the first maximum (NaNs never win; 0 when nothing beats minus
/// infinity). Two passes the compiler can vectorize: the maximum, kept per
/// lane, then the first block of values that holds it. A greedy step's
/// search of a 49 152-word vocabulary takes about 3 µs here, a tenth of a
/// one-value-at-a-time loop, once per conversation in flight.
pub fn argmax(values: &[f32]) -> u32 {
    let mut lanes = [f32::NEG_INFINITY; LANES];
    let chunks = values.chunks_exact(LANES);
    let tail = chunks.remainder();
    for chunk in chunks {
        for (best, &value) in lanes.iter_mut().zip(chunk) {
            *best = if value > *best { value } else { *best };
        }
    }
    let max = tail.iter().chain(&lanes).fold(f32::NEG_INFINITY, |max, &v| if v > max { v } else { max });
    if max == f32::NEG_INFINITY {
        return 0;
    }
    const BLOCK: usize = 64;
    let holds_max = |block: &[f32]| block.iter().fold(false, |found, &v| found | (v == max));
    let block = values.chunks(BLOCK).position(holds_max).unwrap_or(0);
    let within = values[block * BLOCK..].iter().position(|&v| v == max).unwrap_or(0);
    (block * BLOCK + within) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(temperature: f32) -> SamplingParams {
        SamplingParams { temperature, top_p: 1.0, ..Default::default() }
    }

    #[test]
    fn generation_config_sets_defaults_and_overrides_win() {
        let config = serde_json::json!({"do_sample": true, "temperature": 0.6, "top_p": 0.95, "top_k": 20});
        let model_defaults = SamplingOverrides::from_generation_config(&config).apply_to(&SamplingParams::default());
        assert_eq!((model_defaults.temperature, model_defaults.top_p, model_defaults.top_k), (0.6, 0.95, 20));
        let chosen = SamplingOverrides { temperature: Some(0.0), ..Default::default() }.apply_to(&model_defaults);
        assert_eq!((chosen.temperature, chosen.top_p), (0.0, 0.95));
        let greedy =
            SamplingOverrides::from_generation_config(&serde_json::json!({"do_sample": false, "temperature": 0.9}));
        assert_eq!(greedy.temperature, Some(0.0));
    }

    #[test]
    fn greedy_takes_first_maximum() {
        let mut s = Sampler::new(params(0.0));
        assert_eq!(s.sample(&mut [0.1, 3.0, 3.0, -1.0], &[]), 1);
    }

    /// The two passes find what a one-at-a-time scan finds: the first
    /// maximum, ties and all, whatever the length and where it lies.
    #[test]
    fn argmax_is_the_first_maximum_of_a_plain_scan() {
        let scan = |values: &[f32]| {
            let mut best = (f32::NEG_INFINITY, 0u32);
            for (i, &v) in values.iter().enumerate() {
                if v > best.0 {
                    best = (v, i as u32);
                }
            }
            best.1
        };
        let mut state = 12345u32;
        for len in [1, 2, 7, 8, 9, 15, 16, 17, 63, 64, 65, 1000, 49152] {
            for coarse in [3, 1000] {
                // Few distinct values (many ties) and many.
                let values: Vec<f32> = (0..len)
                    .map(|_| {
                        state ^= state << 13;
                        state ^= state >> 17;
                        state ^= state << 5;
                        (state % coarse) as f32 - 7.0
                    })
                    .collect();
                assert_eq!(argmax(&values), scan(&values), "{len} values, {coarse} distinct");
            }
        }
        assert_eq!(argmax(&[f32::NEG_INFINITY; 11]), 0);
        assert_eq!(argmax(&[1.0, f32::NAN, 2.0, f32::NAN]), 2);
    }

    #[test]
    fn same_seed_same_choices() {
        let logits: Vec<f32> = (0..50).map(|i| (i as f32 * 0.37).sin()).collect();
        let run = || {
            let mut s = Sampler::new(params(1.0));
            (0..20).map(|_| s.sample(&mut logits.clone(), &[])).collect::<Vec<_>>()
        };
        assert_eq!(run(), run());
    }

    #[test]
    fn top_k_one_is_greedy() {
        let mut s = Sampler::new(SamplingParams { top_k: 1, ..params(5.0) });
        for _ in 0..20 {
            assert_eq!(s.sample(&mut [0.0, 0.5, 0.4], &[]), 1);
        }
    }

    #[test]
    fn min_p_removes_unlikely_tokens() {
        let mut s = Sampler::new(SamplingParams { min_p: 0.5, ..params(1.0) });
        for _ in 0..50 {
            // Token 2 has probability e^-10 relative to the others: always removed.
            let t = s.sample(&mut [5.0, 5.0, -5.0], &[]);
            assert_ne!(t, 2);
        }
    }

    #[test]
    fn top_p_keeps_the_nucleus() {
        let mut s = Sampler::new(SamplingParams { top_p: 0.5, ..params(1.0) });
        for _ in 0..50 {
            assert_eq!(s.sample(&mut [10.0, 0.0, 0.0, 0.0], &[]), 0);
        }
    }

    #[test]
    fn repeat_penalty_discourages_seen_tokens() {
        let mut s = Sampler::new(SamplingParams { repeat_penalty: 4.0, ..params(0.0) });
        assert_eq!(s.sample(&mut [2.0, 1.0], &[0]), 1);
        assert_eq!(s.sample(&mut [-1.0, -2.0], &[0, 0]), 1);
    }
}
