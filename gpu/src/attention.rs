//! Keys and values in VRAM (f16) and causal attention over them, where
//! spans of positions may also see each other both ways.

use crate::batch::{groups_of_64, Batch};
use crate::buffer::GpuTensor;
use crate::device::Gpu;
use crate::shader::Kernel;
use anyhow::{bail, Result};

/// The largest head the attention kernel takes.
pub const MAX_HEAD_DIM: usize = 512;

/// What a cache keeps keys and values in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KvPrecision {
    /// Half the memory (what llama.cpp keeps; for quantized models).
    F16,
    /// Exact (for models computed in f32 throughout).
    F32,
}

impl KvPrecision {
    fn bytes(self) -> u64 {
        match self {
            Self::F16 => 2,
            Self::F32 => 4,
        }
    }
}

/// One layer's cache: keys and values of up to `capacity` positions per
/// kv head, laid out `(kv_heads, capacity, head_dim)`.
#[derive(Debug)]
pub struct GpuKvCache {
    keys: wgpu::Buffer,
    values: wgpu::Buffer,
    pub precision: KvPrecision,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub capacity: usize,
    /// Positions written so far.
    pub len: usize,
}

impl GpuKvCache {
    /// Bytes of VRAM a cache of this shape takes.
    pub fn bytes_for(precision: KvPrecision, kv_heads: usize, head_dim: usize, capacity: usize) -> u64 {
        2 * precision.bytes() * (kv_heads * head_dim * capacity) as u64
    }
}

/// The most spans of mutually seeing positions one attention call takes.
pub const MAX_MUTUAL_SPANS: usize = 8;

/// The shape and options of one attention call.
#[derive(Debug, Clone, Copy)]
pub struct AttentionShape<'a> {
    pub tokens: usize,
    pub heads: usize,
    /// Multiplies the scores (usually `1 / sqrt(head_dim)`).
    pub scale: f32,
    /// Scores become `cap · tanh(score / cap)` (Gemma 2).
    pub softcap: Option<f32>,
    /// Only the last `window` positions are seen (sliding-window layers).
    pub window: Option<usize>,
    /// Spans of positions that see each other both ways, besides the ones
    /// before them (one picture's tokens in Gemma 3); each must be cached
    /// whole. At most [`MAX_MUTUAL_SPANS`].
    pub mutual: &'a [std::ops::Range<usize>],
}

impl Gpu {
    /// An empty cache for `capacity` positions.
    pub fn kv_cache(
        &self,
        precision: KvPrecision,
        kv_heads: usize,
        head_dim: usize,
        capacity: usize,
    ) -> Result<GpuKvCache> {
        if !head_dim.is_multiple_of(2) || head_dim > MAX_HEAD_DIM || kv_heads == 0 {
            bail!("a GPU key/value cache takes even heads of at most {MAX_HEAD_DIM} values, not {kv_heads}×{head_dim}");
        }
        let half = GpuKvCache::bytes_for(precision, kv_heads, head_dim, capacity) / 2;
        Ok(GpuKvCache {
            keys: self.storage("keys", half, true)?,
            values: self.storage("values", half, true)?,
            precision,
            kv_heads,
            head_dim,
            capacity,
            len: 0,
        })
    }
}

impl Gpu {
    /// A cache with room for `capacity` positions holding the first `keep`
    /// of `cache`'s (growing a full cache, or a prompt's cached prefix).
    pub fn kv_copy(&self, cache: &GpuKvCache, keep: usize, capacity: usize) -> Result<GpuKvCache> {
        if keep > cache.len || keep > capacity {
            bail!("cannot keep {keep} of {} cached positions in room for {capacity}", cache.len);
        }
        let mut copy = self.kv_cache(cache.precision, cache.kv_heads, cache.head_dim, capacity)?;
        let row = cache.precision.bytes() * cache.head_dim as u64;
        let mut encoder = self.device.create_command_encoder(&Default::default());
        for head in 0..cache.kv_heads as u64 {
            for (from, to) in [(&cache.keys, &copy.keys), (&cache.values, &copy.values)] {
                let (source, target) = (head * cache.capacity as u64 * row, head * capacity as u64 * row);
                encoder.copy_buffer_to_buffer(from, source, to, target, keep as u64 * row);
            }
        }
        self.queue.submit([encoder.finish()]);
        self.check()?;
        copy.len = keep;
        Ok(copy)
    }
}

impl Batch<'_> {
    /// Appends `tokens` positions of keys and values `(tokens, kv_heads,
    /// head_dim)` to `cache`.
    pub fn kv_append(
        &mut self,
        cache: &mut GpuKvCache,
        keys: &GpuTensor,
        values: &GpuTensor,
        tokens: usize,
    ) -> Result<()> {
        let width = cache.kv_heads * cache.head_dim;
        if keys.len() < tokens * width || values.len() < tokens * width {
            bail!("{tokens} positions of keys and values need {} values each", tokens * width);
        }
        if cache.len + tokens > cache.capacity {
            bail!("the GPU cache holds {} positions; {} more do not fit", cache.capacity, tokens);
        }
        let params =
            [tokens as u32, cache.kv_heads as u32, cache.head_dim as u32, cache.capacity as u32, cache.len as u32];
        let threads = tokens * width / 2;
        let kernel = Kernel::KvStore(cache.precision);
        self.dispatch(kernel, &[&keys.buffer, &cache.keys], &params, groups_of_64(threads), 1);
        self.dispatch(kernel, &[&values.buffer, &cache.values], &params, groups_of_64(threads), 1);
        cache.len += tokens;
        Ok(())
    }

    /// Attention of the last `shape.tokens` cached positions' queries `q`
    /// `(tokens, heads, head_dim)` over the cache: `out` has `q`'s shape.
    pub fn attention(
        &mut self,
        q: &GpuTensor,
        cache: &GpuKvCache,
        shape: AttentionShape,
        out: &GpuTensor,
    ) -> Result<()> {
        let AttentionShape { tokens, heads, scale, softcap, window, mutual } = shape;
        let len = tokens * heads * cache.head_dim;
        if q.len() < len || out.len() < len {
            bail!("attention over {len} query values got tensors of {} and {}", q.len(), out.len());
        }
        if heads % cache.kv_heads != 0 {
            bail!("{heads} query heads cannot share {} kv heads", cache.kv_heads);
        }
        if tokens > cache.len {
            bail!("{tokens} queries but only {} cached positions", cache.len);
        }
        if mutual.len() > MAX_MUTUAL_SPANS {
            bail!(
                "{} spans of mutually seeing positions in one attention call; at most {MAX_MUTUAL_SPANS}",
                mutual.len()
            );
        }
        if let Some(span) = mutual.iter().find(|span| span.is_empty() || span.end > cache.len) {
            bail!("a span of mutually seeing positions {span:?} is not within the {} cached", cache.len);
        }
        let first = cache.len - tokens;
        let mut params = vec![
            tokens as u32,
            heads as u32,
            cache.kv_heads as u32,
            cache.head_dim as u32,
            cache.capacity as u32,
            first as u32,
            window.unwrap_or(0) as u32,
            mutual.len() as u32,
            scale.to_bits(),
            softcap.unwrap_or(0.0).to_bits(),
            0,
            0,
        ];
        let mut spans = [0u32; 2 * MAX_MUTUAL_SPANS];
        for (slot, span) in spans.chunks_exact_mut(2).zip(mutual) {
            slot.copy_from_slice(&[span.start as u32, span.end as u32]);
        }
        params.extend(spans);
        let buffers = [&q.buffer, &cache.keys, &cache.values, &out.buffer];
        self.dispatch(Kernel::Attention(cache.precision), &buffers, &params, (tokens * heads) as u32, 1);
        Ok(())
    }
}
