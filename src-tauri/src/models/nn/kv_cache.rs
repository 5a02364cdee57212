//! Keys and values of past positions, per layer, owned by one conversation.
//!
//! The model itself is immutable; each sequence being generated owns a
//! [`KvCache`], so several conversations (or cluster stages) can share one
//! loaded model.
//!
//! On the CPU, a model with weights in GGML types below f32 (quantized, or
//! F16 GGUF) keeps keys and values computed in f32 in f16, as llama.cpp
//! does by default: half the memory, and half the bytes a long context's
//! attention reads per step.
//! Other models keep them as computed: an f32 model is the exact
//! computation the quantized ones are measured against.
//! `CAKE_KV_CACHE=f32` or `=f16` overrides this.

use super::cpu_values::with_all_cpu_values;
use anyhow::Result;
use cake_gpu::attention::GpuKvCache;
use cake_gpu::Gpu;
use cake_kernels::attention::CachedKv;
use cake_kernels::values::StoredValue;
use candle_core::{DType, Device, Tensor};
use half::f16;
use std::sync::Arc;
use std::sync::OnceLock;

/// The precision f32 keys and values are kept in on the CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KvPrecision {
    F16,
    #[default]
    F32,
}

impl KvPrecision {
    /// F16 for weights in GGML types below f32, else F32, unless
    /// `CAKE_KV_CACHE` says `f16` or `f32` (read once).
    pub fn for_weights(ggml_below_f32: bool) -> Self {
        static CHOSEN: OnceLock<Option<KvPrecision>> = OnceLock::new();
        let chosen = CHOSEN.get_or_init(|| match std::env::var("CAKE_KV_CACHE").ok().as_deref() {
            Some("f32") => Some(KvPrecision::F32),
            Some("f16") => Some(KvPrecision::F16),
            _ => None,
        });
        chosen.unwrap_or(if ggml_below_f32 { KvPrecision::F16 } else { KvPrecision::F32 })
    }

    /// `f16` or `f32`.
    pub fn name(self) -> &'static str {
        match self {
            KvPrecision::F16 => "f16",
            KvPrecision::F32 => "f32",
        }
    }

    /// The dtype a cache keeps keys and values computed as `computed` on `device` in.
    fn stored_dtype(self, computed: DType, device: &Device) -> DType {
        match (self, computed, device) {
            (KvPrecision::F16, DType::F32, Device::Cpu) => DType::F16,
            _ => computed,
        }
    }
}

/// A layer's cached keys and values where they lie, in the precision kept.
pub enum CacheView<'a> {
    F32(CachedKv<'a, f32>),
    F16(CachedKv<'a, f16>),
}

/// Several sequences' caches of one layer where they lie, all in one precision.
pub enum CacheViews<'a> {
    F32(Vec<CachedKv<'a, f32>>),
    F16(Vec<CachedKv<'a, f16>>),
}

/// Cached keys and values of one attention layer, shaped `(batch, kv_heads, seq, head_dim)`.
/// A sliding-window layer keeps only the positions its window can still
/// see; `dropped` counts those it let go.
pub struct LayerCache {
    kv: Option<KvBuffers>,
    dropped: usize,
    /// A linear-attention layer's state instead of keys and values.
    pub recurrent: Option<RecurrentState>,
    /// Keys and values in VRAM, for a layer the GPU runs (all positions:
    /// a sliding window masks older ones instead of dropping them).
    pub gpu: Option<GpuLayerKv>,
    precision: KvPrecision,
    /// Most positions the buffers get room for (the context's, or a
    /// sliding window's): growth stops there, so a cache never holds more
    /// than its plan counted.
    max_positions: usize,
}

impl Default for LayerCache {
    fn default() -> Self {
        Self {
            kv: None,
            dropped: 0,
            recurrent: None,
            gpu: None,
            precision: KvPrecision::default(),
            max_positions: usize::MAX,
        }
    }
}

/// A GPU layer's keys and values, and the GPU they are on.
pub struct GpuLayerKv {
    pub gpu: Arc<Gpu>,
    pub cache: GpuKvCache,
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

/// Keys and values in buffers with room for more positions, so that a
/// step writes only its own positions instead of copying the whole cache:
/// `(batch, kv_heads, capacity, head_dim)`, the first `stored` filled.
/// When full, capacity grows to a quarter more than needed ([`room_for`]):
/// doubling left up to half of a long conversation's cache unused.
struct KvBuffers {
    keys: Tensor,
    values: Tensor,
    stored: usize,
}

/// Capacity of a cache's first buffers, in positions (more if the first
/// step brings more).
const FIRST_CAPACITY: usize = 64;

/// The capacity given to buffers that must hold `positions`: a quarter
/// more, in whole blocks of 64 positions, but not beyond `max_positions`
/// unless `positions` itself is.
pub(crate) fn room_for(positions: usize, max_positions: usize) -> usize {
    (positions + positions / 4).max(FIRST_CAPACITY).next_multiple_of(64).min(max_positions).max(positions)
}

impl KvBuffers {
    /// Buffers for `capacity` positions holding `keys`/`values`'s
    /// positions `from..`, in `dtype`.
    fn holding(keys: &Tensor, values: &Tensor, from: usize, capacity: usize, dtype: DType) -> Result<Self> {
        let (b, heads, len, _) = keys.dims4()?;
        let kept = len - from;
        let empty = |like: &Tensor| Tensor::zeros((b, heads, capacity, like.dim(3)?), dtype, like.device());
        let mut buffers = Self { keys: empty(keys)?, values: empty(values)?, stored: 0 };
        buffers.append(&keys.narrow(2, from, kept)?, &values.narrow(2, from, kept)?)?;
        Ok(buffers)
    }

    fn capacity(&self) -> usize {
        self.keys.dims()[2]
    }

    /// The filled positions.
    fn filled(&self) -> Result<(Tensor, Tensor)> {
        Ok((self.keys.narrow(2, 0, self.stored)?, self.values.narrow(2, 0, self.stored)?))
    }

    /// Writes `k`/`v`'s positions after the filled ones (there must be room).
    fn append(&mut self, k: &Tensor, v: &Tensor) -> Result<()> {
        let dtype = self.keys.dtype();
        self.keys.slice_set(&k.to_dtype(dtype)?.contiguous()?, 2, self.stored)?;
        self.values.slice_set(&v.to_dtype(dtype)?.contiguous()?, 2, self.stored)?;
        self.stored += k.dim(2)?;
        Ok(())
    }
}

impl LayerCache {
    /// Appends this step's keys and values and returns everything cached so
    /// far: positions [`Self::first_position`]`..`[`Self::len`], in the
    /// precision kept (which may be below `k`'s).
    pub fn append(&mut self, k: &Tensor, v: &Tensor) -> Result<(Tensor, Tensor)> {
        let new = k.dim(2)?;
        let buffers = match self.kv.take() {
            None => {
                let dtype = self.precision.stored_dtype(k.dtype(), k.device());
                KvBuffers::holding(k, v, 0, room_for(new, self.max_positions), dtype)?
            }
            Some(buffers) if buffers.stored + new > buffers.capacity() => {
                let (keys, values) = buffers.filled()?;
                let dtype = keys.dtype();
                let room = room_for(buffers.stored + new, self.max_positions);
                let mut grown = KvBuffers::holding(&keys, &values, 0, room, dtype)?;
                grown.append(k, v)?;
                grown
            }
            Some(mut buffers) => {
                buffers.append(k, v)?;
                buffers
            }
        };
        let filled = buffers.filled()?;
        self.kv = Some(buffers);
        Ok(filled)
    }

    /// Keeps at most the last `n` positions (a window of `n` never looks further back).
    pub fn keep_last(&mut self, n: usize) -> Result<()> {
        if let Some(buffers) = &self.kv {
            if buffers.stored > n {
                let cut = buffers.stored - n;
                let (keys, values) = buffers.filled()?;
                self.kv = Some(KvBuffers::holding(&keys, &values, cut, buffers.capacity(), keys.dtype())?);
                self.dropped += cut;
            }
        }
        Ok(())
    }

    /// Forgets every position from `n` on; false (and nothing changed) when
    /// this layer cannot: a recurrent state holds no earlier states, and a
    /// sliding window may have let go of keys that position `n` needs.
    fn can_truncate(&self, n: usize) -> bool {
        if self.recurrent.is_some() || self.dropped > 0 {
            return self.len() == n;
        }
        n <= self.len()
    }

    /// A new cache holding copies of this one's first `n` positions; only
    /// after [`Self::can_truncate`] said yes.
    fn copy_prefix(&self, n: usize) -> Result<Self> {
        let kv = match &self.kv {
            Some(buffers) if buffers.stored.min(n - self.dropped) > 0 => {
                let kept = buffers.stored.min(n - self.dropped);
                let (keys, values) = buffers.filled()?;
                let room = room_for(kept, self.max_positions);
                let dtype = keys.dtype();
                Some(KvBuffers::holding(&keys.narrow(2, 0, kept)?, &values.narrow(2, 0, kept)?, 0, room, dtype)?)
            }
            _ => None,
        };
        let gpu = match &self.gpu {
            Some(kv) => Some(GpuLayerKv {
                gpu: kv.gpu.clone(),
                cache: kv.gpu.kv_copy(&kv.cache, n.min(kv.cache.len), room_for(n, usize::MAX))?,
            }),
            None => None,
        };
        Ok(Self {
            kv,
            dropped: self.dropped,
            recurrent: self.recurrent.clone(),
            gpu,
            precision: self.precision,
            max_positions: self.max_positions,
        })
    }

    /// Only after [`Self::can_truncate`] said yes.
    fn truncate(&mut self, n: usize) {
        if let Some(buffers) = &mut self.kv {
            buffers.stored = buffers.stored.min(n - self.dropped);
        }
        if let Some(kv) = &mut self.gpu {
            kv.cache.len = kv.cache.len.min(n);
        }
    }

    /// Calls `f` with the cached keys and values where they lie, when they
    /// are f32 or f16 on the CPU for one sequence; otherwise returns `None`.
    pub fn with_in_place<R>(&self, f: impl FnOnce(CacheView) -> R) -> Option<R> {
        Self::with_all_in_place(&[self], |views| match views {
            CacheViews::F32(mut kvs) => kvs.pop().map(|kv| f(CacheView::F32(kv))),
            CacheViews::F16(mut kvs) => kvs.pop().map(|kv| f(CacheView::F16(kv))),
        })
        .flatten()
    }

    /// [`Self::with_in_place`] for several sequences' caches of one layer
    /// at once (a decode step of several sequences): `None` unless every
    /// one is f32 on the CPU, or every one f16.
    pub fn with_all_in_place<R>(caches: &[&LayerCache], f: impl FnOnce(CacheViews) -> R) -> Option<R> {
        let mut shapes = Vec::with_capacity(caches.len());
        let (mut keys, mut values) = (Vec::with_capacity(caches.len()), Vec::with_capacity(caches.len()));
        for cache in caches {
            let buffers = cache.kv.as_ref()?;
            let (b, kv_heads, capacity, head_dim) = buffers.keys.dims4().ok()?;
            if b != 1 || buffers.values.dims4().ok()? != (b, kv_heads, capacity, head_dim) {
                return None;
            }
            shapes.push((kv_heads, capacity * head_dim, buffers.stored, head_dim));
            keys.push(&buffers.keys);
            values.push(&buffers.values);
        }
        let dtype = keys.first()?.dtype();
        if keys.iter().chain(&values).any(|t| t.dtype() != dtype) {
            return None;
        }
        fn views<'a, T: StoredValue>(
            shapes: &[(usize, usize, usize, usize)],
            keys: &[&'a [T]],
            values: &[&'a [T]],
        ) -> Vec<CachedKv<'a, T>> {
            (shapes.iter().zip(keys).zip(values))
                .map(|((&(kv_heads, head_stride, len, head_dim), keys), values)| CachedKv {
                    keys,
                    values,
                    kv_heads,
                    head_stride,
                    len,
                    head_dim,
                })
                .collect()
        }
        match dtype {
            DType::F32 => with_all_cpu_values(&keys, |keys| {
                with_all_cpu_values(&values, |values| f(CacheViews::F32(views(&shapes, keys, values))))
            }),
            DType::F16 => with_all_cpu_values(&keys, |keys| {
                with_all_cpu_values(&values, |values| f(CacheViews::F16(views(&shapes, keys, values))))
            }),
            _ => None,
        }
        .flatten()
    }

    /// What f32 keys and values are kept in.
    pub fn precision(&self) -> KvPrecision {
        self.precision
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
        if let Some(kv) = &self.gpu {
            return kv.cache.len;
        }
        self.dropped + self.kv.as_ref().map_or(0, |buffers| buffers.stored)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes this layer's buffers (or recurrent state) hold, room included.
    pub fn allocated_bytes(&self) -> u64 {
        let kv = self.kv.as_ref().map_or(0, |b| {
            [&b.keys, &b.values].iter().map(|t| (t.elem_count() * t.dtype().size_in_bytes()) as u64).sum()
        });
        let recurrent = self.recurrent.as_ref().map_or(0, |r| {
            (r.state.len() * 4 + r.conv_history.elem_count() * r.conv_history.dtype().size_in_bytes()) as u64
        });
        kv + recurrent
    }
}

/// The caches of the layers one model (or one cluster stage) runs.
pub struct KvCache {
    pub layers: Vec<LayerCache>,
}

impl KvCache {
    /// Caches for `num_layers` layers keeping f32 keys and values in `precision`.
    pub fn new(num_layers: usize, precision: KvPrecision) -> Self {
        Self::bounded(precision, vec![usize::MAX; num_layers])
    }

    /// Caches for layers that hold at most `max_positions[i]` positions each.
    pub fn bounded(precision: KvPrecision, max_positions: Vec<usize>) -> Self {
        let layer = |max_positions| LayerCache { precision, max_positions, ..LayerCache::default() };
        Self { layers: max_positions.into_iter().map(layer).collect() }
    }

    /// Bytes all layers' buffers hold.
    pub fn allocated_bytes(&self) -> u64 {
        self.layers.iter().map(LayerCache::allocated_bytes).sum()
    }

    /// Positions already processed.
    pub fn position(&self) -> usize {
        self.layers.first().map_or(0, LayerCache::len)
    }

    /// Keeps only the first `n` positions, if every layer can (see
    /// [`LayerCache::can_truncate`]); returns whether it did.
    pub fn truncate(&mut self, n: usize) -> bool {
        if !self.layers.iter().all(|layer| layer.can_truncate(n)) {
            return false;
        }
        for layer in &mut self.layers {
            layer.truncate(n);
        }
        true
    }

    /// A new cache holding copies of the first `n` positions, which a
    /// sequence starting with the same tokens would have computed; `None`
    /// where some layer cannot give them (as for [`Self::truncate`]).
    pub fn copy_prefix(&self, n: usize) -> Result<Option<Self>> {
        if !self.layers.iter().all(|layer| layer.can_truncate(n)) {
            return Ok(None);
        }
        let layers = self.layers.iter().map(|layer| layer.copy_prefix(n)).collect::<Result<_>>()?;
        Ok(Some(Self { layers }))
    }

    /// Forgets everything (a new conversation).
    pub fn clear(&mut self) {
        for layer in &mut self.layers {
            *layer =
                LayerCache { precision: layer.precision, max_positions: layer.max_positions, ..LayerCache::default() };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keys and values `(1, 2 heads, t, 4)` with distinct values.
    fn step(t: usize, first: f32) -> Tensor {
        let values: Vec<f32> = (0..2 * t * 4).map(|i| first + i as f32 / 8.0).collect();
        Tensor::from_vec(values, (1, 2, t, 4), &Device::Cpu).unwrap()
    }

    fn view_kind(layer: &LayerCache) -> Option<&'static str> {
        layer.with_in_place(|view| match view {
            CacheView::F32(_) => "f32",
            CacheView::F16(_) => "f16",
        })
    }

    #[test]
    fn an_f16_cache_keeps_f32_steps_in_f16_through_growth_and_clearing() {
        let mut cache = KvCache::new(1, KvPrecision::F16);
        let (k, _) = cache.layers[0].append(&step(3, 0.0), &step(3, 1.0)).unwrap();
        assert_eq!(k.dtype(), DType::F16);
        // Past the first capacity, so the buffers grow.
        let (k, v) = cache.layers[0].append(&step(FIRST_CAPACITY, 5.0), &step(FIRST_CAPACITY, 6.0)).unwrap();
        assert_eq!((k.dtype(), k.dim(2).unwrap()), (DType::F16, 3 + FIRST_CAPACITY));
        // The values are the steps' (exact in f16), in order.
        let first = v.narrow(2, 0, 3).unwrap().to_dtype(DType::F32).unwrap().flatten_all().unwrap();
        let expected = step(3, 1.0).flatten_all().unwrap();
        assert_eq!(first.to_vec1::<f32>().unwrap(), expected.to_vec1::<f32>().unwrap());
        assert_eq!(view_kind(&cache.layers[0]), Some("f16"));
        cache.clear();
        cache.layers[0].append(&step(1, 0.0), &step(1, 0.0)).unwrap();
        assert_eq!(view_kind(&cache.layers[0]), Some("f16"), "a cleared cache keeps its precision");
    }

    /// A bounded cache grows by a quarter until its bound, then holds
    /// exactly the bound's room: the bytes a plan counts for it.
    #[test]
    fn a_bounded_cache_never_takes_more_room_than_its_context() {
        let mut cache = KvCache::bounded(KvPrecision::F16, vec![200]);
        cache.layers[0].append(&step(100, 0.0), &step(100, 0.0)).unwrap();
        assert_eq!(cache.allocated_bytes(), 2 * 2 * 128 * 4 * 2, "room for 125 positions, in blocks of 64");
        for _ in 0..100 {
            cache.layers[0].append(&step(1, 0.0), &step(1, 0.0)).unwrap();
        }
        assert_eq!(cache.layers[0].len(), 200);
        assert_eq!(cache.allocated_bytes(), 2 * 2 * 200 * 4 * 2, "keys and values of 2 heads × 4, f16");
        cache.clear();
        cache.layers[0].append(&step(150, 0.0), &step(150, 0.0)).unwrap();
        cache.layers[0].append(&step(50, 0.0), &step(50, 0.0)).unwrap();
        assert_eq!(cache.allocated_bytes(), 2 * 2 * 200 * 4 * 2, "the bound outlives clearing");
    }

    #[test]
    fn an_f32_cache_keeps_f32_and_half_precision_steps_stay_as_computed() {
        let mut cache = KvCache::new(1, KvPrecision::F32);
        let (k, _) = cache.layers[0].append(&step(2, 0.0), &step(2, 0.0)).unwrap();
        assert_eq!(k.dtype(), DType::F32);
        assert_eq!(view_kind(&cache.layers[0]), Some("f32"));
        let mut half = KvCache::new(1, KvPrecision::F16);
        let computed_in_bf16 = step(2, 0.0).to_dtype(DType::BF16).unwrap();
        let (k, _) = half.layers[0].append(&computed_in_bf16, &computed_in_bf16).unwrap();
        assert_eq!(k.dtype(), DType::BF16, "only f32 steps are narrowed");
    }

    /// A copied prefix holds the first positions' values and grows on its
    /// own: appending to it leaves the original as it was. A window that
    /// has let positions go gives no prefix but its whole self.
    #[test]
    fn a_copied_prefix_is_the_first_positions_and_grows_apart() {
        let mut cache = KvCache::new(2, KvPrecision::F16);
        for layer in &mut cache.layers {
            layer.append(&step(10, 0.0), &step(10, 100.0)).unwrap();
        }
        let mut copy = cache.copy_prefix(6).unwrap().unwrap();
        assert_eq!(copy.position(), 6);
        let values = |cache: &KvCache, n: usize| {
            let (_, v) = cache.layers[1].kv.as_ref().unwrap().filled().unwrap();
            v.narrow(2, 0, n).unwrap().to_dtype(DType::F32).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap()
        };
        assert_eq!(values(&copy, 6), values(&cache, 6));
        for layer in &mut copy.layers {
            layer.append(&step(1, 50.0), &step(1, 50.0)).unwrap();
        }
        assert_eq!((copy.position(), cache.position()), (7, 10));
        assert_eq!(values(&copy, 6), values(&cache, 6), "the shared positions are unchanged");
        assert!(cache.copy_prefix(11).unwrap().is_none(), "no more than it holds");

        let mut window = KvCache::bounded(KvPrecision::F32, vec![8]);
        window.layers[0].append(&step(10, 0.0), &step(10, 0.0)).unwrap();
        window.layers[0].keep_last(8).unwrap();
        assert!(window.copy_prefix(6).unwrap().is_none(), "positions 0 and 1 are gone");
        assert_eq!(window.copy_prefix(10).unwrap().unwrap().layers[0].first_position(), 2);
    }
}
