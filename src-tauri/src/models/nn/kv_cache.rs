//! Keys and values of past positions, per layer, owned by one conversation.
//!
//! The model itself is immutable; each sequence being generated owns a
//! [`KvCache`], so several conversations (or cluster stages) can share one
//! loaded model.

use anyhow::Result;
use candle_core::Tensor;

/// Cached keys and values of one attention layer, shaped `(batch, kv_heads, seq, head_dim)`.
/// A sliding-window layer keeps only the positions its window can still
/// see; `dropped` counts those it let go.
#[derive(Default, Clone)]
pub struct LayerCache {
    kv: Option<(Tensor, Tensor)>,
    dropped: usize,
    /// A linear-attention layer's state instead of keys and values.
    pub recurrent: Option<RecurrentState>,
}

/// What a Gated DeltaNet layer carries from one step to the next.
#[derive(Clone)]
pub struct RecurrentState {
    /// The last `kernel - 1` inputs of the causal convolution, `(b, kernel - 1, channels)`.
    pub conv_history: Tensor,
    /// The delta-rule state, `[batch][value_head][key_dim][value_dim]` flattened, f32.
    pub state: Vec<f32>,
    /// Positions processed.
    pub positions: usize,
}

impl LayerCache {
    /// Appends this step's keys and values and returns everything cached so
    /// far: positions [`Self::first_position`]`..`[`Self::len`].
    pub fn append(&mut self, k: &Tensor, v: &Tensor) -> Result<(Tensor, Tensor)> {
        let (k, v) = match &self.kv {
            Some((pk, pv)) => (Tensor::cat(&[pk, k], 2)?, Tensor::cat(&[pv, v], 2)?),
            None => (k.clone(), v.clone()),
        };
        self.kv = Some((k.clone(), v.clone()));
        Ok((k, v))
    }

    /// Keeps at most the last `n` positions (a window of `n` never looks further back).
    pub fn keep_last(&mut self, n: usize) -> Result<()> {
        if let Some((k, v)) = &self.kv {
            let stored = k.dim(2)?;
            if stored > n {
                let cut = stored - n;
                self.kv = Some((k.narrow(2, cut, n)?.contiguous()?, v.narrow(2, cut, n)?.contiguous()?));
                self.dropped += cut;
            }
        }
        Ok(())
    }

    /// The position of the oldest cached key.
    pub fn first_position(&self) -> usize {
        self.dropped
    }

    /// Number of positions seen (cached or already let go).
    pub fn len(&self) -> usize {
        if let Some(recurrent) = &self.recurrent {
            return recurrent.positions;
        }
        self.dropped + self.kv.as_ref().map_or(0, |(k, _)| k.dim(2).unwrap_or(0))
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The caches of the layers one model (or one cluster stage) runs.
#[derive(Clone)]
pub struct KvCache {
    pub layers: Vec<LayerCache>,
}

impl KvCache {
    pub fn new(num_layers: usize) -> Self {
        Self {
            layers: vec![LayerCache::default(); num_layers],
        }
    }

    /// Positions already processed.
    pub fn position(&self) -> usize {
        self.layers.first().map_or(0, LayerCache::len)
    }

    /// Forgets everything (a new conversation).
    pub fn clear(&mut self) {
        for layer in &mut self.layers {
            *layer = LayerCache::default();
        }
    }
}
