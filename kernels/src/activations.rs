//! Activations quantized to 8 bits, once per product.
//!
//! Each row of `k` values is cut into blocks of [`BLOCK`]; a block keeps its
//! scale `d = max|x| / 127`, its values `round(x / d)` as `i8`, and `d · Σq`,
//! which folds a weight block's offset (Q4_1's `m`) into one multiply.

use super::cpu::Level;

/// Values per quantization block, for weights and activations alike.
pub const BLOCK: usize = 32;

/// Rows of activations in 8-bit blocks. The buffers are reused from one
/// product to the next.
#[derive(Default)]
pub struct QuantizedActivations {
    pub rows: usize,
    /// Values per row (a multiple of [`BLOCK`]).
    pub k: usize,
    /// `rows × k` quantized values.
    pub qs: Vec<i8>,
    /// Per block (`rows × k / BLOCK`): the scale `d`.
    pub scales: Vec<f32>,
    /// Per block: `d · Σq`.
    pub scaled_sums: Vec<f32>,
    /// Per block: `Σq`.
    pub sums: Vec<i32>,
    /// Per half block (16 values): `Σq`, for weights with a scale per 16 values.
    pub half_sums: Vec<i32>,
}

impl QuantizedActivations {
    /// Quantizes `x`, `rows` rows of `k` values each (`k` a multiple of
    /// [`BLOCK`]), replacing what was held.
    pub fn quantize(&mut self, x: &[f32], rows: usize, k: usize) {
        self.quantize_at(x, rows, k, Level::detected());
    }

    /// [`Self::quantize`] with the kernels of `level` (all give the same bits).
    pub fn quantize_at(&mut self, x: &[f32], rows: usize, k: usize, level: Level) {
        assert!(
            k.is_multiple_of(BLOCK) && x.len() == rows * k,
            "{rows} rows of {k} values do not make {} values in blocks of {BLOCK}",
            x.len()
        );
        let blocks = rows * k / BLOCK;
        self.rows = rows;
        self.k = k;
        self.qs.resize(rows * k, 0);
        self.scales.resize(blocks, 0.0);
        self.scaled_sums.resize(blocks, 0.0);
        self.sums.resize(blocks, 0);
        self.half_sums.resize(2 * blocks, 0);
        let chunks = x.chunks_exact(BLOCK).zip(self.qs.chunks_exact_mut(BLOCK)).zip(self.half_sums.chunks_exact_mut(2));
        let per_block = self.scales.iter_mut().zip(self.scaled_sums.iter_mut()).zip(self.sums.iter_mut());
        for (((values, qs), half_sums), ((scale, scaled_sum), block_sum)) in chunks.zip(per_block) {
            let values: &[f32; BLOCK] = values.try_into().expect("whole blocks");
            let qs: &mut [i8; BLOCK] = qs.try_into().expect("whole blocks");
            let half_sums: &mut [i32; 2] = half_sums.try_into().expect("two halves");
            let d = match level {
                #[cfg(target_arch = "x86_64")]
                // SAFETY: `Level` is only this high when the CPU has AVX-512.
                Level::Avx512Vnni => unsafe { quantize_block_avx512(values, qs, half_sums) },
                #[cfg(target_arch = "x86_64")]
                // SAFETY: `Level` is only this high when the CPU has AVX2.
                Level::Avx2 => unsafe { quantize_block_avx2(values, qs, half_sums) },
                _ => quantize_block(values, qs, half_sums),
            };
            let sum = half_sums[0] + half_sums[1];
            *scale = d;
            *scaled_sum = d * sum as f32;
            *block_sum = sum;
        }
    }

    /// Blocks per row.
    pub fn blocks_per_row(&self) -> usize {
        self.k / BLOCK
    }
}

/// One block's scale `d = max|x| / 127`, its values `round(x / d)` in `qs`
/// and the sums of their halves in `half_sums`.
fn quantize_block(values: &[f32; BLOCK], qs: &mut [i8; BLOCK], half_sums: &mut [i32; 2]) -> f32 {
    let amax = values.iter().fold(0f32, |m, v| m.max(v.abs()));
    let d = amax / 127.0;
    let inverse = if d > 0.0 { 1.0 / d } else { 0.0 };
    for (q, v) in qs.iter_mut().zip(values) {
        *q = round_small(v * inverse) as i8;
    }
    for (sum, half) in half_sums.iter_mut().zip(qs.chunks_exact(BLOCK / 2)) {
        *sum = half.iter().map(|&q| q as i32).sum();
    }
    d
}

/// [`quantize_block`] in two vectors: the same maximum, scale and rounding
/// (to nearest, ties to even, as the CPU's default conversion does).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn quantize_block_avx512(values: &[f32; BLOCK], qs: &mut [i8; BLOCK], half_sums: &mut [i32; 2]) -> f32 {
    use std::arch::x86_64::*;
    let low = _mm512_loadu_ps(values.as_ptr());
    let high = _mm512_loadu_ps(values.as_ptr().add(16));
    let amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(low), _mm512_abs_ps(high)));
    let d = amax / 127.0;
    let inverse = _mm512_set1_ps(if d > 0.0 { 1.0 / d } else { 0.0 });
    for (half, v) in [low, high].into_iter().enumerate() {
        let bytes = _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(v, inverse)));
        _mm_storeu_si128(qs.as_mut_ptr().add(16 * half) as *mut __m128i, bytes);
        // Summed as stored, so no value outside an i8 (from a NaN) can overflow the sum.
        half_sums[half] = _mm512_reduce_add_epi32(_mm512_cvtepi8_epi32(bytes));
    }
    d
}

/// [`quantize_block`] in four vectors of 8, as [`quantize_block_avx512`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn quantize_block_avx2(values: &[f32; BLOCK], qs: &mut [i8; BLOCK], half_sums: &mut [i32; 2]) -> f32 {
    use std::arch::x86_64::*;
    let v: [__m256; 4] = std::array::from_fn(|i| _mm256_loadu_ps(values.as_ptr().add(8 * i)));
    let abs = |x| _mm256_andnot_ps(_mm256_set1_ps(-0.0), x);
    let most = _mm256_max_ps(_mm256_max_ps(abs(v[0]), abs(v[1])), _mm256_max_ps(abs(v[2]), abs(v[3])));
    let four = _mm_max_ps(_mm256_castps256_ps128(most), _mm256_extractf128_ps::<1>(most));
    let two = _mm_max_ps(four, _mm_movehl_ps(four, four));
    let amax = _mm_cvtss_f32(_mm_max_ss(two, _mm_shuffle_ps::<1>(two, two)));
    let d = amax / 127.0;
    let inverse = _mm256_set1_ps(if d > 0.0 { 1.0 / d } else { 0.0 });
    let ints: [__m256i; 4] = std::array::from_fn(|i| _mm256_cvtps_epi32(_mm256_mul_ps(v[i], inverse)));
    // Packing works within 128-bit lanes: groups of 4 values come out in the
    // order 0, 2, 4, 6, 1, 3, 5, 7 and are put back in order.
    let packed = _mm256_packs_epi16(_mm256_packs_epi32(ints[0], ints[1]), _mm256_packs_epi32(ints[2], ints[3]));
    let bytes = _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(qs.as_mut_ptr() as *mut __m256i, bytes);
    // Summed as stored, each 128-bit lane one half of the block.
    let pairs = _mm256_maddubs_epi16(_mm256_set1_epi8(1), bytes);
    let quads = _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
    let sums = _mm256_hadd_epi32(quads, quads);
    let sums = _mm256_hadd_epi32(sums, sums);
    half_sums[0] = _mm256_extract_epi32::<0>(sums);
    half_sums[1] = _mm256_extract_epi32::<4>(sums);
    d
}

/// `x` rounded to the nearest integer, ties to even, for `|x| < 2²²`.
/// Adding and removing 1.5 · 2²³ leaves no fraction bits, and it compiles to
/// plain vector adds, where `f32::round` is a library call per value.
#[inline]
fn round_small(x: f32) -> f32 {
    const SHIFT: f32 = 12_582_912.0;
    (x + SHIFT) - SHIFT
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_round_trip_within_half_a_step() {
        let x: Vec<f32> = (0..96).map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0).collect();
        let mut a = QuantizedActivations::default();
        a.quantize(&x, 1, 96);
        for (i, v) in x.iter().enumerate() {
            let d = a.scales[i / BLOCK];
            assert!((a.qs[i] as f32 * d - v).abs() <= d / 2.0 + 1e-6, "value {i}: {v} vs {}", a.qs[i] as f32 * d);
        }
        for b in 0..3 {
            let sum: i32 = a.qs[b * BLOCK..(b + 1) * BLOCK].iter().map(|&q| q as i32).sum();
            assert_eq!(a.scaled_sums[b], a.scales[b] * sum as f32);
            assert_eq!(a.sums[b], sum);
            assert_eq!(a.half_sums[2 * b] + a.half_sums[2 * b + 1], sum);
        }
    }

    #[test]
    fn small_values_round_to_the_nearest_integer_ties_to_even() {
        for (x, expected) in [
            (0.4, 0.0),
            (0.5, 0.0),
            (1.5, 2.0),
            (2.5, 2.0),
            (-2.5, -2.0),
            (-0.6, -1.0),
            (126.7, 127.0),
            (-127.0, -127.0),
        ] {
            assert_eq!(round_small(x), expected, "{x}");
        }
        for i in -1270..=1270 {
            let x = i as f32 / 10.0 + 0.013;
            assert_eq!(round_small(x), x.round(), "{x}");
        }
    }

    /// Every level quantizes to the same bits.
    #[test]
    fn every_level_quantizes_alike() {
        let x: Vec<f32> = (0..32 * 37)
            .map(|i| match i % 97 {
                0 => 0.0,
                5 => 2.5 * (1.0 + (i / 97) as f32),
                _ => ((i * 7919 % 1013) as f32 - 506.0) / (1.0 + (i % 13) as f32),
            })
            .collect();
        let mut plain = QuantizedActivations::default();
        plain.quantize_at(&x, 37, 32, Level::Plain);
        for level in Level::all_supported() {
            let mut a = QuantizedActivations::default();
            a.quantize_at(&x, 37, 32, level);
            assert_eq!((&a.qs, &a.sums, &a.half_sums), (&plain.qs, &plain.sums, &plain.half_sums), "{level:?}");
            assert_eq!((&a.scales, &a.scaled_sums), (&plain.scales, &plain.scaled_sums), "{level:?}");
        }
    }

    #[test]
    fn a_zero_block_has_zero_scale_and_values() {
        let mut a = QuantizedActivations::default();
        a.quantize(&[0.0; 32], 1, 32);
        assert_eq!((a.scales[0], a.scaled_sums[0]), (0.0, 0.0));
        assert!(a.qs.iter().all(|&q| q == 0));
    }
}
