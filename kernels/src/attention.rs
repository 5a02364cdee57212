//! Attention of one new position (a decode step) over the cached keys and
//! values, for every query head at once, reading the cache where it lies.
//!
//! The cache is cut into blocks of positions, and one work item takes one
//! block of one kv head for all the query heads that share it, in up to
//! [`ROWS_PER_TILE`] new positions at once (a prompt's rows): each key and
//! value is read once per item, and a long context keeps every thread busy.
//! An item leaves, per query head and row, its scores' maximum, the sum of
//! their exponentials and the exponential-weighted sum of its values; a
//! last pass merges the blocks' results into the softmax-weighted sum.
//!
//! The cache may hold f32 or f16 values ([`StoredValue`]); a work item
//! widens an f16 block into f32 scratch once (F16C where the CPU has it)
//! and computes on that, so both precisions share one set of kernels and
//! an f16 cache reads half the bytes.
//!
//! With AVX-512 (AVX2), scores are computed 16 (8) positions at a time and
//! summed across lanes in one transposition, the exponentials are a vector
//! polynomial, and the weighted sum of values keeps its accumulators in
//! registers. (On an AVX2 host, computing them one key at a time with
//! libm's `expf` had taken a fifth of an F32 prompt's time.) Both read keys
//! and values row after row, the order they lie in: during a decode step the weights stream through the caches, so the
//! cache of keys and values comes from memory, and the hardware prefetcher
//! only keeps up with reads in order (column-wise reads were slower:
//! docs/benchmarks.md, "Tuning constants").

use super::cpu::Level;
use super::dense::dot;
use super::elementwise::exp_shifted;
use super::pool::Pool;
use super::values::StoredValue;
#[cfg(test)]
use half::f16;

/// Cached positions per work item: few enough that a block's keys stay in
/// L1 while each query head of its group reads them.
const POSITIONS_PER_ITEM: usize = 64;

/// Where the cached keys and values of one layer lie: `kv_heads` blocks of
/// `len` positions × `head_dim` values, block `h` starting at `h · head_stride`.
pub struct CachedKv<'a, T: StoredValue = f32> {
    pub keys: &'a [T],
    pub values: &'a [T],
    pub kv_heads: usize,
    pub head_stride: usize,
    pub len: usize,
    pub head_dim: usize,
}

/// `out[h] = softmax(scale · q[h] · Kᵀ) · V` for each query head `h`
/// (`q` and `out`: heads × head_dim), query heads sharing kv heads in
/// groups (`heads / kv_heads` per kv head). With `softcap`, scores become
/// `cap · tanh(score / cap)` first.
#[allow(clippy::too_many_arguments)]
pub fn decode_attention<T: StoredValue>(
    q: &[f32],
    kv: &CachedKv<T>,
    heads: usize,
    scale: f32,
    softcap: Option<f32>,
    out: &mut [f32],
    level: Level,
    pool: &Pool,
) {
    decode_attention_streams(q, std::slice::from_ref(kv), heads, scale, softcap, out, level, pool)
}

/// One decode step of several sequences in one job for the pool: row `i`
/// of `q` and `out` (each `kvs.len() × heads × head_dim`) attends over
/// `kvs[i]`, to the last bit as [`decode_attention`] of that row alone
/// (the same blocks, merged in the same order).
#[allow(clippy::too_many_arguments)]
pub fn decode_attention_streams<T: StoredValue>(
    q: &[f32],
    kvs: &[CachedKv<T>],
    heads: usize,
    scale: f32,
    softcap: Option<f32>,
    out: &mut [f32],
    level: Level,
    pool: &Pool,
) {
    let Some(first_kv) = kvs.first() else { return };
    let (d, kv_heads) = (first_kv.head_dim, first_kv.kv_heads);
    let width = heads * d;
    assert!(q.len() == kvs.len() * width && out.len() == q.len(), "{} rows of queries", kvs.len());
    for kv in kvs {
        assert!(kv.head_dim == d && kv.kv_heads == kv_heads && kv.len >= 1, "caches of one layer");
        assert!(
            heads.is_multiple_of(kv_heads)
                && (kv_heads - 1) * kv.head_stride + kv.len * d <= kv.keys.len().min(kv.values.len()),
            "cache too short"
        );
    }
    let group = heads / kv_heads;
    let record = Partial::len(d);
    let blocks_of = |i: usize| kvs[i].len.div_ceil(POSITIONS_PER_ITEM);
    // Row i's items (kv_heads × its blocks) and records (× group) follow those of the rows before it.
    let mut first_item = Vec::with_capacity(kvs.len() + 1);
    first_item.push(0);
    for i in 0..kvs.len() {
        first_item.push(first_item[i] + kv_heads * blocks_of(i));
    }
    let mut partials = vec![0f32; first_item[kvs.len()] * group * record];
    let sink = Sink(partials.as_mut_ptr());
    pool.run(first_item[kvs.len()], &|range| {
        Scratch::with_thread_own(|scratch| {
            for item in range {
                let i = first_item.partition_point(|&first| first <= item) - 1;
                let (kv, blocks) = (&kvs[i], blocks_of(i));
                let (kv_head, block) = ((item - first_item[i]) / blocks, (item - first_item[i]) % blocks);
                let first = block * POSITIONS_PER_ITEM;
                let n = POSITIONS_PER_ITEM.min(kv.len - first);
                let at = i * width + kv_head * group * d;
                scratch.queries.clear();
                scratch.queries.extend_from_slice(&q[at..at + group * d]);
                scratch.visible.clear();
                scratch.visible.resize(group, n);
                let block_kv = BlockKv::of(kv, kv_head * kv.head_stride + first * d, n);
                attend_block(&block_kv, scale, softcap, scratch, level);
                // SAFETY: this item's records, written by this item only.
                unsafe { sink.records(item * group * record, group * record) }.copy_from_slice(&scratch.records);
            }
        })
    });
    for (i, row_out) in out.chunks_exact_mut(width).enumerate() {
        let blocks = blocks_of(i);
        for h in 0..heads {
            let (kv_head, g) = (h / group, h % group);
            let at = |b: usize| ((first_item[i] + kv_head * blocks + b) * group + g) * record;
            let parts = (0..blocks).map(|b| Partial::of(&partials, at(b), d));
            merge(parts, &mut row_out[h * d..(h + 1) * d]);
        }
    }
}

/// Rows of queries handled per pass of [`prefill_attention`] (bounds the
/// blocks' records kept at once).
const ROWS_PER_PASS: usize = 32;

/// Rows of queries one work item takes over its block of positions: the
/// block is read (and widened) once for all their query heads.
const ROWS_PER_TILE: usize = 16;

/// The attention of `t` new positions, the last `t` of the cache, each
/// computed exactly as [`decode_attention`] computes a step at that
/// position: row `i` (of `q` and `out`, each `t × heads × head_dim`) sees
/// the first `kv.len − t + i + 1` cached positions. So a prompt read in one
/// piece or in several, and a token read in a prefill or in a decode step,
/// get the same values to the last bit: a query's result depends only on
/// the positions it sees, never on the other rows read with it.
#[allow(clippy::too_many_arguments)]
pub fn prefill_attention<T: StoredValue>(
    q: &[f32],
    kv: &CachedKv<T>,
    t: usize,
    heads: usize,
    scale: f32,
    softcap: Option<f32>,
    out: &mut [f32],
    level: Level,
    pool: &Pool,
) {
    let d = kv.head_dim;
    let width = heads * d;
    assert!(
        t >= 1 && t <= kv.len && q.len() == t * width && out.len() == t * width,
        "{t} rows for a cache of {}",
        kv.len
    );
    assert!(
        heads.is_multiple_of(kv.kv_heads)
            && (kv.kv_heads - 1) * kv.head_stride + kv.len * d <= kv.keys.len().min(kv.values.len()),
        "cache too short"
    );
    let group = heads / kv.kv_heads;
    let record = Partial::len(d);
    let mut partials = Vec::new();
    for pass in (0..t).step_by(ROWS_PER_PASS) {
        let rows = ROWS_PER_PASS.min(t - pass);
        // Positions row r (of this pass) sees, and the blocks they fill.
        let seen = |r: usize| kv.len - t + 1 + pass + r;
        let blocks_of = |r: usize| seen(r).div_ceil(POSITIONS_PER_ITEM);
        // Records of row r: kv_heads × its blocks × group, after those of the rows before it.
        let mut first_record = Vec::with_capacity(rows + 1);
        first_record.push(0);
        for r in 0..rows {
            first_record.push(first_record[r] + kv.kv_heads * blocks_of(r) * group);
        }
        // Items of tile k: kv_heads × the blocks its last row sees, after those of the tiles before it.
        let tiles = rows.div_ceil(ROWS_PER_TILE);
        let last_row = |k: usize| (ROWS_PER_TILE * (k + 1)).min(rows) - 1;
        let mut first_item = Vec::with_capacity(tiles + 1);
        first_item.push(0);
        for k in 0..tiles {
            first_item.push(first_item[k] + kv.kv_heads * blocks_of(last_row(k)));
        }
        // Every record is written before it is read: only new room is zeroed.
        partials.resize(first_record[rows] * record, 0f32);
        let sink = Sink(partials.as_mut_ptr());
        pool.run(first_item[tiles], &|range| {
            Scratch::with_thread_own(|scratch| {
                for item in range {
                    let k = first_item.partition_point(|&first| first <= item) - 1;
                    let blocks = blocks_of(last_row(k));
                    let (kv_head, block) = ((item - first_item[k]) / blocks, (item - first_item[k]) % blocks);
                    let first = block * POSITIONS_PER_ITEM;
                    // The tile's rows that see some of this block, and how much of it each sees.
                    let tile_rows = (ROWS_PER_TILE * k..=last_row(k)).filter(|&r| seen(r) > first);
                    scratch.queries.clear();
                    scratch.visible.clear();
                    for r in tile_rows.clone() {
                        let at = (pass + r) * width + kv_head * group * d;
                        scratch.queries.extend_from_slice(&q[at..at + group * d]);
                        let visible = POSITIONS_PER_ITEM.min(seen(r) - first);
                        scratch.visible.extend(std::iter::repeat_n(visible, group));
                    }
                    let n = POSITIONS_PER_ITEM.min(seen(last_row(k)) - first);
                    let block_kv = BlockKv::of(kv, kv_head * kv.head_stride + first * d, n);
                    attend_block(&block_kv, scale, softcap, scratch, level);
                    for (r, records) in tile_rows.zip(scratch.records.chunks_exact(group * record)) {
                        let at = (first_record[r] + (kv_head * blocks_of(r) + block) * group) * record;
                        // SAFETY: row r's records of this block, written by this item only.
                        unsafe { sink.records(at, records.len()) }.copy_from_slice(records);
                    }
                }
            })
        });
        for r in 0..rows {
            let blocks = blocks_of(r);
            let row_out = &mut out[(pass + r) * width..(pass + r + 1) * width];
            for h in 0..heads {
                let (kv_head, g) = (h / group, h % group);
                let at = |b: usize| (first_record[r] + (kv_head * blocks + b) * group + g) * record;
                let parts = (0..blocks).map(|b| Partial::of(&partials, at(b), d));
                merge(parts, &mut row_out[h * d..(h + 1) * d]);
            }
        }
    }
}

/// A thread's buffers across its work items: the item's queries (each
/// `head_dim` values) and how many of the block's positions each sees,
/// the records it leaves, its scores, and an f16 block widened to f32.
#[derive(Default)]
struct Scratch {
    queries: Vec<f32>,
    visible: Vec<usize>,
    records: Vec<f32>,
    scores: Vec<f32>,
    keys: Vec<f32>,
    values: Vec<f32>,
}

impl Scratch {
    /// Calls `f` with this thread's buffers, kept from job to job (a decode
    /// step runs a job per layer: fresh buffers would be zeroed each time).
    fn with_thread_own<R>(f: impl FnOnce(&mut Scratch) -> R) -> R {
        thread_local! {
            static OWN: std::cell::RefCell<Scratch> = std::cell::RefCell::default();
        }
        OWN.with(|own| f(&mut own.borrow_mut()))
    }
}

/// One block of cached positions of one kv head: `n` rows of `d` values.
struct BlockKv<'a, T> {
    keys: &'a [T],
    values: &'a [T],
    n: usize,
    d: usize,
}

impl<'a, T: StoredValue> BlockKv<'a, T> {
    /// The `n` positions of `kv` from value `start` on.
    fn of(kv: &'a CachedKv<T>, start: usize, n: usize) -> Self {
        let d = kv.head_dim;
        Self { keys: &kv.keys[start..start + n * d], values: &kv.values[start..start + n * d], n, d }
    }
}

/// What one block leaves for one query head, stored as `[max, sum, acc…]`:
/// the largest score, `Σ exp(score - max)`, and `Σ exp(score - max) · value`.
struct Partial<'a> {
    max: f32,
    sum: f32,
    acc: &'a [f32],
}

impl<'a> Partial<'a> {
    /// Values one record takes for a head dimension `d`.
    fn len(d: usize) -> usize {
        d + 2
    }

    fn of(records: &'a [f32], at: usize, d: usize) -> Self {
        Self { max: records[at], sum: records[at + 1], acc: &records[at + 2..at + 2 + d] }
    }
}

struct Sink(*mut f32);
// SAFETY: each work item writes its own records.
unsafe impl Sync for Sink {}

impl Sink {
    /// SAFETY: in bounds, and used by one thread at a time.
    #[allow(clippy::mut_from_ref)]
    unsafe fn records(&self, at: usize, len: usize) -> &mut [f32] {
        std::slice::from_raw_parts_mut(self.0.add(at), len)
    }
}

/// Writes into `scratch.records` a [`Partial`] record per query of
/// `scratch.queries` over the first `scratch.visible[i]` positions of the
/// block (each at most `kv.n`). The block is widened once for all queries.
fn attend_block<T: StoredValue>(
    kv: &BlockKv<T>,
    scale: f32,
    softcap: Option<f32>,
    scratch: &mut Scratch,
    level: Level,
) {
    let Scratch { queries, visible, records, scores, keys, values } = scratch;
    let (n, d) = (kv.n, kv.d);
    records.clear();
    records.resize(visible.len() * Partial::len(d), 0.0);
    #[cfg(target_arch = "x86_64")]
    if level == Level::Avx512Vnni {
        // SAFETY: `Level` is only this high when the CPU has AVX-512.
        let kv = unsafe {
            BlockKv { keys: avx512::widened(kv.keys, keys), values: avx512::widened(kv.values, values), n, d }
        };
        scores.resize(visible.len() * n, 0.0);
        // SAFETY: as above.
        unsafe { avx512::scores(queries, &kv, scores) };
        weigh_scores(visible, n, scale, softcap, scores, records, level);
        // SAFETY: as above.
        return unsafe { avx512::weighted_values(scores, &kv, records) };
    }
    #[cfg(target_arch = "x86_64")]
    if level == Level::Avx2 && d.is_multiple_of(8) {
        scores.resize(visible.len() * n, 0.0);
        // SAFETY (both): `Level` is only this high when the CPU has AVX2, FMA and F16C.
        unsafe { avx2::scores(queries, kv, scores) };
        weigh_scores(visible, n, scale, softcap, scores, records, level);
        return unsafe { avx2::weighted_values(scores, kv, records) };
    }
    let kv = BlockKv { keys: T::as_f32(kv.keys, keys), values: T::as_f32(kv.values, values), n, d };
    scores.clear();
    for q in queries.chunks_exact(d) {
        scores.extend(kv.keys.chunks_exact(d).map(|key| dot(q, key, level)));
    }
    weigh_scores(visible, n, scale, softcap, scores, records, level);
    weighted_values(scores, &kv, records);
}

/// Turns `scores` (queries × n, each `q · key j`) into each query's
/// `exp(score − max)` over the positions it sees (zero beyond them), and
/// writes each query's max and sum into its record.
fn weigh_scores(
    visible: &[usize],
    n: usize,
    scale: f32,
    softcap: Option<f32>,
    scores: &mut [f32],
    records: &mut [f32],
    level: Level,
) {
    let record = records.len() / visible.len();
    for (i, row) in scores.chunks_exact_mut(n).enumerate() {
        let (seen, unseen) = row.split_at_mut(visible[i]);
        let max = scaled_max(seen, scale, softcap, level);
        records[i * record] = max;
        records[i * record + 1] = exp_shifted(seen, max, level);
        unseen.fill(0.0);
    }
}

/// Multiplies each score by `scale` (then caps it, with `softcap`);
/// returns their maximum.
fn scaled_max(scores: &mut [f32], scale: f32, softcap: Option<f32>, level: Level) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if level == Level::Avx512Vnni && softcap.is_none() {
        // SAFETY: `Level` is only this high when the CPU has AVX-512.
        return unsafe { avx512::scaled_max(scores, scale) };
    }
    #[cfg(target_arch = "x86_64")]
    if level == Level::Avx2 && softcap.is_none() {
        // SAFETY: `Level` is only this high when the CPU has AVX2.
        return unsafe { avx2::scaled_max(scores, scale) };
    }
    let mut max = f32::NEG_INFINITY;
    for s in scores.iter_mut() {
        *s *= scale;
        if let Some(cap) = softcap {
            *s = cap * (*s / cap).tanh();
        }
        max = max.max(*s);
    }
    max
}

/// Each query head's `acc = Σ_j weights[g][j] · value j`, into its record.
fn weighted_values(weights: &[f32], kv: &BlockKv<f32>, records: &mut [f32]) {
    let (n, d) = (kv.n, kv.d);
    for (g, row) in weights.chunks_exact(n).enumerate() {
        let at = g * Partial::len(d) + 2;
        let acc = &mut records[at..at + d];
        acc.fill(0.0);
        for (j, &weight) in row.iter().enumerate() {
            for (a, &v) in acc.iter_mut().zip(&kv.values[j * d..(j + 1) * d]) {
                *a += weight * v;
            }
        }
    }
}

/// `out = Σ_b exp(max_b - max) · acc_b / Σ_b exp(max_b - max) · sum_b`.
fn merge<'a>(parts: impl Iterator<Item = Partial<'a>> + Clone, out: &mut [f32]) {
    let max = parts.clone().fold(f32::NEG_INFINITY, |m, p| m.max(p.max));
    out.fill(0.0);
    let mut total = 0.0;
    for part in parts {
        let weight = (part.max - max).exp();
        total += weight * part.sum;
        for (o, &a) in out.iter_mut().zip(part.acc) {
            *o += weight * a;
        }
    }
    out.iter_mut().for_each(|o| *o /= total);
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::{BlockKv, Partial, StoredValue};
    use crate::elementwise::lanes_within;
    use std::arch::x86_64::*;

    /// `out[i · n + j] = query i · key j` for each query (`queries`: rows
    /// of `d` values) and each key of the block. Each product is summed
    /// lane-wise, then across its lanes by [`sum_each`], the same way in
    /// every path, so a score never depends on which path computed it.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,fma,f16c")]
    pub(super) unsafe fn scores(queries: &[f32], kv: &BlockKv<f32>, out: &mut [f32]) {
        let (n, d) = (kv.n, kv.d);
        let count = queries.len() / d;
        assert!(out.len() == count * n && kv.keys.len() >= n * d);
        let query = |i: usize| &queries[i * d..(i + 1) * d];
        let mut i = 0;
        if d == 64 {
            // Two queries at a time: each key is loaded once for both.
            while i + 2 <= count {
                let (a, b) = (HeldQuery::<4>::load(query(i)), HeldQuery::<4>::load(query(i + 1)));
                let (row_a, row_b) = out[i * n..(i + 2) * n].split_at_mut(n);
                pair_scores(&a, &b, kv, row_a, row_b);
                i += 2;
            }
        }
        for i in i..count {
            let row = &mut out[i * n..(i + 1) * n];
            match d {
                64 => scores_with(&HeldQuery::<4>::load(query(i)), kv, row),
                128 => scores_with(&HeldQuery::<8>::load(query(i)), kv, row),
                _ => scores_with(&AnyQuery(query(i)), kv, row),
            }
        }
    }

    /// The scores of two queries of 64 values, 8 keys at a time: 16
    /// accumulators (8 per query) summed across lanes by one [`sum_each`].
    #[inline(always)]
    unsafe fn pair_scores(a: &HeldQuery<4>, b: &HeldQuery<4>, kv: &BlockKv<f32>, out_a: &mut [f32], out_b: &mut [f32]) {
        let (n, d, keys) = (kv.n, kv.d, kv.keys.as_ptr());
        for j in (0..n).step_by(8) {
            let count = 8.min(n - j);
            let mut acc = [_mm512_setzero_ps(); 16];
            for k in 0..count {
                let key = keys.add((j + k) * d);
                let (mut x, mut y) = (_mm512_setzero_ps(), _mm512_setzero_ps());
                for c in 0..4 {
                    let part = _mm512_loadu_ps(key.add(16 * c));
                    x = _mm512_fmadd_ps(a.0[c], part, x);
                    y = _mm512_fmadd_ps(b.0[c], part, y);
                }
                (acc[k], acc[8 + k]) = (x, y);
            }
            let sums = sum_each(&acc);
            let m = ((1u16 << count) - 1) as __mmask8;
            _mm256_mask_storeu_ps(out_a.as_mut_ptr().add(j), m, _mm512_castps512_ps256(sums));
            _mm256_mask_storeu_ps(
                out_b.as_mut_ptr().add(j),
                m,
                _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(sums))),
            );
        }
    }

    #[inline(always)]
    unsafe fn scores_with(q: &impl Query, kv: &BlockKv<f32>, out: &mut [f32]) {
        let (n, d, keys) = (kv.n, kv.d, kv.keys.as_ptr());
        let mut j = 0;
        while j + 16 <= n {
            let mut acc = [_mm512_setzero_ps(); 16];
            // Key by key, so the keys are read in the order they lie.
            for (i, a) in acc.iter_mut().enumerate() {
                *a = q.products(keys.add((j + i) * d), *a);
            }
            _mm512_storeu_ps(out.as_mut_ptr().add(j), sum_each(&acc));
            j += 16;
        }
        if j < n {
            // The same sums as a whole group of 16, so a key's score does
            // not depend on how many keys follow it.
            let mut acc = [_mm512_setzero_ps(); 16];
            for (i, a) in acc.iter_mut().take(n - j).enumerate() {
                *a = q.products(keys.add((j + i) * d), *a);
            }
            _mm512_mask_storeu_ps(out.as_mut_ptr().add(j), lanes_within(n, j), sum_each(&acc));
        }
    }

    /// A query head, and its lane-wise products with a key: the same
    /// operations in the same order in both forms, so they agree to the bit.
    trait Query {
        /// `acc` plus the lane-wise products of the query with the key at `key`.
        unsafe fn products(&self, key: *const f32, acc: __m512) -> __m512;
    }

    /// A query of `16 · C` values held in registers.
    struct HeldQuery<const C: usize>([__m512; C]);

    impl<const C: usize> HeldQuery<C> {
        #[inline(always)]
        unsafe fn load(q: &[f32]) -> Self {
            assert_eq!(q.len(), 16 * C);
            Self(std::array::from_fn(|c| _mm512_loadu_ps(q.as_ptr().add(16 * c))))
        }
    }

    impl<const C: usize> Query for HeldQuery<C> {
        #[inline(always)]
        unsafe fn products(&self, key: *const f32, mut acc: __m512) -> __m512 {
            for (c, q) in self.0.iter().enumerate() {
                acc = _mm512_fmadd_ps(*q, _mm512_loadu_ps(key.add(16 * c)), acc);
            }
            acc
        }
    }

    /// A query of any size, read from memory.
    struct AnyQuery<'a>(&'a [f32]);

    impl Query for AnyQuery<'_> {
        #[inline(always)]
        unsafe fn products(&self, key: *const f32, mut acc: __m512) -> __m512 {
            let d = self.0.len();
            for c in (0..d).step_by(16) {
                let m = lanes_within(d, c);
                let (q, k) = (_mm512_maskz_loadu_ps(m, self.0.as_ptr().add(c)), _mm512_maskz_loadu_ps(m, key.add(c)));
                acc = _mm512_fmadd_ps(q, k, acc);
            }
            acc
        }
    }

    /// `values` as f32: borrowed when they are, else widened into `scratch`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,f16c")]
    pub(super) unsafe fn widened<'s, T: StoredValue>(values: &'s [T], scratch: &'s mut Vec<f32>) -> &'s [f32] {
        if !T::WIDENS {
            return T::as_f32(values, scratch);
        }
        let n = values.len();
        scratch.resize(n, 0.0);
        for at in (0..n).step_by(16) {
            let m = lanes_within(n, at);
            _mm512_mask_storeu_ps(scratch.as_mut_ptr().add(at), m, T::load16(values.as_ptr().add(at), m));
        }
        scratch
    }

    /// Lane `i` of the result is the sum of the 16 lanes of `v[i]`: each
    /// lane's sum depends on its own vector alone.
    #[target_feature(enable = "avx512f")]
    unsafe fn sum_each(v: &[__m512; 16]) -> __m512 {
        // Within each 128-bit lane: [a0+a2, b0+b2, a1+a3, b1+b3].
        let pairs = |a, b| _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b));
        // Within each 128-bit lane: the lane's sums of a, b, c, d.
        let quads = |ab: __m512, cd: __m512| {
            let (x, y) = (_mm512_castps_pd(ab), _mm512_castps_pd(cd));
            _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(x, y)), _mm512_castpd_ps(_mm512_unpackhi_pd(x, y)))
        };
        let r: [__m512; 4] =
            std::array::from_fn(|k| quads(pairs(v[4 * k], v[4 * k + 1]), pairs(v[4 * k + 2], v[4 * k + 3])));
        // Adds 128-bit lanes 0+1 and 2+3 of `a`, then of `b`.
        let halves = |a, b| _mm512_add_ps(_mm512_shuffle_f32x4::<0x88>(a, b), _mm512_shuffle_f32x4::<0xDD>(a, b));
        halves(halves(r[0], r[1]), halves(r[2], r[3]))
    }

    /// [`super::scaled_max`] without a cap, 16 scores at a time.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn scaled_max(scores: &mut [f32], scale: f32) -> f32 {
        let (scale, n) = (_mm512_set1_ps(scale), scores.len());
        let mut max = _mm512_set1_ps(f32::NEG_INFINITY);
        for at in (0..n).step_by(16) {
            let k = lanes_within(n, at);
            let p = scores.as_mut_ptr().add(at);
            let scaled = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, p), scale);
            _mm512_mask_storeu_ps(p, k, scaled);
            max = _mm512_mask_max_ps(max, k, max, scaled);
        }
        _mm512_reduce_max_ps(max)
    }

    /// [`super::weighted_values`] in panels of 64 columns × 4 queries: the
    /// 16 accumulators stay in registers while the value rows are read in
    /// the order they lie, each once for the 4 queries (fewer than 4 repeat
    /// the last and drop the repeats).
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,fma,f16c")]
    pub(super) unsafe fn weighted_values(weights: &[f32], kv: &BlockKv<f32>, records: &mut [f32]) {
        let (n, d) = (kv.n, kv.d);
        let group = weights.len() / n;
        let record = Partial::len(d);
        assert!(kv.values.len() >= n * d && records.len() >= group * record);
        for panel in (0..d).step_by(64) {
            let width = 64.min(d - panel);
            let lanes: [Option<__mmask16>; 4] =
                std::array::from_fn(|k| (16 * k < width).then(|| lanes_within(width, 16 * k)));
            for g0 in (0..group).step_by(4) {
                let heads: [usize; 4] = std::array::from_fn(|h| (g0 + h).min(group - 1));
                let mut acc = [[_mm512_setzero_ps(); 4]; 4];
                for j in 0..n {
                    let row = kv.values.as_ptr().add(j * d + panel);
                    let v: [__m512; 4] = std::array::from_fn(|k| match lanes[k] {
                        Some(m) => _mm512_maskz_loadu_ps(m, row.add(16 * k)),
                        None => _mm512_setzero_ps(),
                    });
                    for (acc, &g) in acc.iter_mut().zip(&heads) {
                        let w = _mm512_set1_ps(*weights.get_unchecked(g * n + j));
                        for (a, &v) in acc.iter_mut().zip(&v) {
                            *a = _mm512_fmadd_ps(w, v, *a);
                        }
                    }
                }
                for (acc, &g) in acc.iter().zip(&heads).take(group - g0) {
                    for (k, (a, m)) in acc.iter().zip(lanes).enumerate() {
                        if let Some(m) = m {
                            _mm512_mask_storeu_ps(records.as_mut_ptr().add(g * record + 2 + panel + 16 * k), m, *a);
                        }
                    }
                }
            }
        }
    }
}

/// The kernels of [`attend_block`] with AVX2, for head dimensions that are
/// multiples of 8: scores 8 keys at a time, summed across lanes in one
/// transposition; the exponentials as a vector polynomial; the weighted sum
/// of values with its accumulators in registers.
#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{BlockKv, Partial};
    use crate::elementwise::eight_lanes_within as lanes_within;
    use crate::values::StoredValue;
    use std::arch::x86_64::*;

    /// `out[i · n + j] = query i · key j` for each query (`queries`: rows
    /// of `d` values) and each key of the block, read as stored (a half
    /// precision key is widened as it is loaded, once for up to 3 queries).
    /// Each key's products are summed lane-wise in column order, then
    /// across lanes by [`sum_each`]: a score depends on its query and key
    /// alone.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn scores<T: StoredValue>(queries: &[f32], kv: &BlockKv<T>, out: &mut [f32]) {
        let (n, d) = (kv.n, kv.d);
        let count = queries.len() / d;
        assert!(d.is_multiple_of(8) && out.len() == count * n && kv.keys.len() >= n * d);
        for first in (0..count).step_by(3) {
            match count - first {
                1 => scores_of::<1, T>(queries, first, kv, out),
                2 => scores_of::<2, T>(queries, first, kv, out),
                _ => scores_of::<3, T>(queries, first, kv, out),
            }
        }
    }

    /// Queries `first..first + Q` of [`scores`], 4 keys at a time: 4 × Q
    /// accumulators, each key loaded once per column vector for all Q.
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    unsafe fn scores_of<const Q: usize, T: StoredValue>(
        queries: &[f32],
        first: usize,
        kv: &BlockKv<T>,
        out: &mut [f32],
    ) {
        let (n, d, keys) = (kv.n, kv.d, kv.keys.as_ptr());
        let query = queries.as_ptr().add(first * d);
        for j in (0..n).step_by(4) {
            let here = 4.min(n - j);
            let mut acc = [[_mm256_setzero_ps(); 4]; Q];
            for c in (0..d).step_by(8) {
                let q: [__m256; Q] = std::array::from_fn(|i| _mm256_loadu_ps(query.add(i * d + c)));
                for k in 0..here {
                    let key = T::load8(keys.add((j + k) * d + c));
                    for (acc, q) in acc.iter_mut().zip(&q) {
                        acc[k] = _mm256_fmadd_ps(*q, key, acc[k]);
                    }
                }
            }
            for (i, acc) in acc.iter().enumerate() {
                let mut sums = [0f32; 4];
                _mm_storeu_ps(sums.as_mut_ptr(), sum_each(acc));
                out[(first + i) * n + j..][..here].copy_from_slice(&sums[..here]);
            }
        }
    }

    /// Lane `i` of the result is the sum of the 8 lanes of `v[i]`: each
    /// lane's sum depends on its own vector alone.
    #[target_feature(enable = "avx2")]
    unsafe fn sum_each(v: &[__m256; 4]) -> __m128 {
        // Per 128-bit half: the half's sums of each vector.
        let halves = _mm256_hadd_ps(_mm256_hadd_ps(v[0], v[1]), _mm256_hadd_ps(v[2], v[3]));
        _mm_add_ps(_mm256_castps256_ps128(halves), _mm256_extractf128_ps::<1>(halves))
    }

    /// [`super::scaled_max`] without a cap, 8 scores at a time.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn scaled_max(scores: &mut [f32], scale: f32) -> f32 {
        let (scale, n) = (_mm256_set1_ps(scale), scores.len());
        let lowest = _mm256_set1_ps(f32::NEG_INFINITY);
        let mut max = lowest;
        for at in (0..n).step_by(8) {
            let k = lanes_within(n, at);
            let p = scores.as_mut_ptr().add(at);
            let scaled = _mm256_mul_ps(_mm256_maskload_ps(p, k), scale);
            _mm256_maskstore_ps(p, k, scaled);
            max = _mm256_max_ps(max, _mm256_blendv_ps(lowest, scaled, _mm256_castsi256_ps(k)));
        }
        let mut lanes = [0f32; 8];
        _mm256_storeu_ps(lanes.as_mut_ptr(), max);
        lanes.iter().fold(f32::NEG_INFINITY, |m, &l| m.max(l))
    }

    /// [`super::weighted_values`] in panels of 16 columns × up to 4 queries:
    /// the accumulators stay in registers while the value rows are read in
    /// the order they lie, each once for the panel's queries.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn weighted_values<T: StoredValue>(weights: &[f32], kv: &BlockKv<T>, records: &mut [f32]) {
        let (n, d) = (kv.n, kv.d);
        let group = weights.len() / n;
        assert!(d.is_multiple_of(8) && kv.values.len() >= n * d && records.len() >= group * Partial::len(d));
        for panel in (0..d).step_by(16) {
            let mut g0 = 0;
            while g0 < group {
                match group - g0 {
                    1 => panel_sums::<1, T>(weights, kv, records, panel, g0),
                    2 => panel_sums::<2, T>(weights, kv, records, panel, g0),
                    3 => panel_sums::<3, T>(weights, kv, records, panel, g0),
                    _ => panel_sums::<4, T>(weights, kv, records, panel, g0),
                }
                g0 += 4;
            }
        }
    }

    /// Queries `g0..g0 + Q`, columns `panel..panel + 16` (or 8 at the end of
    /// an odd number of 8-column vectors) of [`weighted_values`].
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    unsafe fn panel_sums<const Q: usize, T: StoredValue>(
        weights: &[f32],
        kv: &BlockKv<T>,
        records: &mut [f32],
        panel: usize,
        g0: usize,
    ) {
        let (n, d) = (kv.n, kv.d);
        let vectors = if d - panel >= 16 { 2 } else { 1 };
        let mut acc = [[_mm256_setzero_ps(); 2]; Q];
        for j in 0..n {
            let row = kv.values.as_ptr().add(j * d + panel);
            let v = [T::load8(row), if vectors == 2 { T::load8(row.add(8)) } else { _mm256_setzero_ps() }];
            for (q, acc) in acc.iter_mut().enumerate() {
                let w = _mm256_set1_ps(*weights.get_unchecked((g0 + q) * n + j));
                for (a, &v) in acc.iter_mut().zip(&v) {
                    *a = _mm256_fmadd_ps(w, v, *a);
                }
            }
        }
        for (q, acc) in acc.iter().enumerate() {
            let at = records.as_mut_ptr().add((g0 + q) * Partial::len(d) + 2 + panel);
            for (k, a) in acc.iter().enumerate().take(vectors) {
                _mm256_storeu_ps(at.add(8 * k), *a);
            }
        }
    }
}

#[cfg(test)]
mod prefill_tests {
    use super::*;

    /// Every row of a prefill equals the decode step at its position, bit
    /// for bit, at every level and with one or several threads.
    #[test]
    fn prefill_rows_equal_decode_steps_bit_for_bit() {
        let (kv_heads, heads, d, capacity) = (3, 9, 64, 200);
        let value = |i: usize| ((i * 2654435761usize % 1000) as f32 - 500.0) / 300.0;
        let keys: Vec<f32> = (0..kv_heads * capacity * d).map(value).collect();
        let values: Vec<f32> = (0..kv_heads * capacity * d).map(|i| value(i + 7)).collect();
        for (len, t) in [(1, 1), (5, 5), (70, 70), (150, 33), (129, 2)] {
            let q: Vec<f32> = (0..t * heads * d).map(|i| value(i + 3)).collect();
            for level in Level::all_supported() {
                for pool in [Pool::new(1), Pool::new(3)] {
                    let kv = CachedKv {
                        keys: &keys,
                        values: &values,
                        kv_heads,
                        head_stride: capacity * d,
                        len,
                        head_dim: d,
                    };
                    let mut out = vec![f32::NAN; t * heads * d];
                    prefill_attention(&q, &kv, t, heads, 0.125, Some(30.0), &mut out, level, &pool);
                    for r in 0..t {
                        let step = CachedKv { len: len - t + r + 1, ..kv };
                        let mut expected = vec![0f32; heads * d];
                        decode_attention(
                            &q[r * heads * d..(r + 1) * heads * d],
                            &step,
                            heads,
                            0.125,
                            Some(30.0),
                            &mut expected,
                            level,
                            &pool,
                        );
                        assert_eq!(
                            &out[r * heads * d..(r + 1) * heads * d],
                            &expected[..],
                            "len {len}, t {t}, row {r}, {level:?}"
                        );
                    }
                }
            }
        }
    }

    /// A step of several sequences, each over its own cache and length,
    /// gives each row what a decode step of that row alone gives.
    #[test]
    fn a_step_of_several_sequences_equals_each_alone() {
        let (kv_heads, heads, d, capacity) = (3, 9, 64, 200);
        let value = |i: usize| ((i * 2654435761usize % 1000) as f32 - 500.0) / 300.0;
        let lens = [1, 64, 65, 200, 3];
        let caches: Vec<(Vec<f32>, Vec<f32>)> = (0..lens.len())
            .map(|s| {
                let keys = (0..kv_heads * capacity * d).map(|i| value(i + 11 * s)).collect();
                let values = (0..kv_heads * capacity * d).map(|i| value(i + 13 * s + 7)).collect();
                (keys, values)
            })
            .collect();
        let kvs: Vec<CachedKv> = caches
            .iter()
            .zip(lens)
            .map(|((keys, values), len)| CachedKv {
                keys,
                values,
                kv_heads,
                head_stride: capacity * d,
                len,
                head_dim: d,
            })
            .collect();
        let width = heads * d;
        let q: Vec<f32> = (0..lens.len() * width).map(|i| value(i + 3)).collect();
        for level in Level::all_supported() {
            for pool in [Pool::new(1), Pool::new(3)] {
                let mut out = vec![f32::NAN; q.len()];
                decode_attention_streams(&q, &kvs, heads, 0.125, None, &mut out, level, &pool);
                for (i, kv) in kvs.iter().enumerate() {
                    let mut alone = vec![0f32; width];
                    let rows = i * width..(i + 1) * width;
                    decode_attention(&q[rows.clone()], kv, heads, 0.125, None, &mut alone, level, &pool);
                    assert_eq!(&out[rows], &alone[..], "sequence {i} of length {}, {level:?}", kv.len);
                }
            }
        }
    }

    /// An f16 cache gives exactly what an f32 cache holding the same
    /// (rounded) values gives, in decode steps and in prefills.
    #[test]
    fn an_f16_cache_equals_an_f32_cache_of_its_values() {
        let (kv_heads, heads, d, capacity) = (2, 6, 40, 150);
        let value = |i: usize| ((i * 2654435761usize % 1000) as f32 - 500.0) / 300.0;
        let keys: Vec<f16> = (0..kv_heads * capacity * d).map(|i| f16::from_f32(value(i))).collect();
        let values: Vec<f16> = (0..kv_heads * capacity * d).map(|i| f16::from_f32(value(i + 7))).collect();
        let wide = |v: &[f16]| v.iter().map(|x| x.to_f32()).collect::<Vec<f32>>();
        let (keys32, values32) = (wide(&keys), wide(&values));
        let pool = Pool::new(2);
        for (len, t) in [(1, 1), (130, 1), (130, 40)] {
            let q: Vec<f32> = (0..t * heads * d).map(|i| value(i + 3)).collect();
            for level in Level::all_supported() {
                let half =
                    CachedKv { keys: &keys, values: &values, kv_heads, head_stride: capacity * d, len, head_dim: d };
                let full = CachedKv {
                    keys: &keys32,
                    values: &values32,
                    kv_heads,
                    head_stride: capacity * d,
                    len,
                    head_dim: d,
                };
                let (mut got, mut expected) = (vec![0f32; t * heads * d], vec![0f32; t * heads * d]);
                prefill_attention(&q, &half, t, heads, 0.125, None, &mut got, level, &pool);
                prefill_attention(&q, &full, t, heads, 0.125, None, &mut expected, level, &pool);
                assert_eq!(got, expected, "len {len}, t {t}, {level:?}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shifted_exponentials_are_accurate_to_float_precision() {
        let scores: Vec<f32> = (0..=2100).map(|i| 3.0 - i as f32 * 0.05).collect();
        for level in Level::all_supported() {
            let mut shifted = scores.clone();
            let sum = exp_shifted(&mut shifted, 3.0, level);
            let mut exact_sum = 0f64;
            for (&s, &e) in scores.iter().zip(&shifted) {
                let exact = (s as f64 - 3.0).exp();
                exact_sum += exact;
                assert!(
                    (e as f64 - exact).abs() <= 3e-7 * exact + 1e-40,
                    "{level:?}: exp({}) = {e}, not {exact}",
                    s - 3.0
                );
            }
            assert!((sum as f64 - exact_sum).abs() <= 1e-6 * exact_sum, "{level:?}: sum {sum} vs {exact_sum}");
        }
    }

    /// Checks every level against a plain double-precision attention, for
    /// head sizes that fill and that do not fill 16 lanes, groups of 1 to 5
    /// query heads per kv head, and cache lengths inside one block of
    /// positions and across several (with a partial last one).
    #[test]
    fn matches_a_plain_double_precision_attention() {
        let value = |i: usize| ((i * 2654435761usize % 1000) as f32 - 500.0) / 300.0;
        for (heads, kv_heads, d) in [(6, 2, 20), (9, 3, 64), (5, 1, 32), (4, 4, 16), (4, 2, 128)] {
            for len in [1, 13, 16, 17, 64, 100, 150] {
                let head_stride = (len + 7) * d;
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
                                    let s: f64 = (0..d)
                                        .map(|c| q[h * d + c] as f64 * keys[base + j * d + c] as f64)
                                        .sum::<f64>()
                                        * 0.3;
                                    softcap.map_or(s, |cap| cap as f64 * (s / cap as f64).tanh())
                                })
                                .collect();
                            let max = scores.iter().cloned().fold(f64::MIN, f64::max);
                            scores.iter_mut().for_each(|s| *s = (*s - max).exp());
                            let total: f64 = scores.iter().sum();
                            for c in 0..d {
                                let expected: f64 =
                                    (0..len).map(|j| scores[j] / total * values[base + j * d + c] as f64).sum();
                                let got = out[h * d + c] as f64;
                                let at = format!("{heads}/{kv_heads} heads of {d}, {len} positions, head {h} value {c}, {level:?} {softcap:?}");
                                assert!((got - expected).abs() < 1e-5, "{at}: {got} vs {expected}");
                            }
                        }
                    }
                }
            }
        }
    }
}
