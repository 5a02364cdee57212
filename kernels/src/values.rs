//! The element types kernels read from memory: f32, or f16 and bf16
//! widened as they are read (a KV cache, or F16 and BF16 weights in a
//! mapped file).

use half::slice::HalfFloatSliceExt;
use half::{bf16, f16};

/// A value type kernels read where it lies.
pub trait StoredValue: Copy + Send + Sync + 'static {
    /// Whether reading it takes a conversion (false for f32).
    const WIDENS: bool;

    /// `values` as f32: borrowed when they are, else widened into `scratch`.
    fn as_f32<'s>(values: &'s [Self], scratch: &'s mut Vec<f32>) -> &'s [f32];

    /// One value as f32.
    fn widen(self) -> f32;

    /// The 8 values from `at` as f32.
    ///
    /// # Safety
    /// The CPU has AVX2 and F16C, and the 8 values are readable.
    #[cfg(target_arch = "x86_64")]
    unsafe fn load8(at: *const Self) -> std::arch::x86_64::__m256;

    /// The 16 values from `at` as f32, lanes outside `mask` zero.
    ///
    /// # Safety
    /// The CPU has AVX-512 (F, BW, VL) and F16C, and the lanes in `mask`
    /// are readable.
    #[cfg(target_arch = "x86_64")]
    unsafe fn load16(at: *const Self, mask: std::arch::x86_64::__mmask16) -> std::arch::x86_64::__m512;

    /// The values' bits, when they are bf16 (which some kernels multiply as they are).
    fn bf16_bits(_values: &[Self]) -> Option<&[u16]> {
        None
    }
}

impl StoredValue for f32 {
    const WIDENS: bool = false;

    fn as_f32<'s>(values: &'s [f32], _: &'s mut Vec<f32>) -> &'s [f32] {
        values
    }

    fn widen(self) -> f32 {
        self
    }

    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn load8(at: *const f32) -> std::arch::x86_64::__m256 {
        std::arch::x86_64::_mm256_loadu_ps(at)
    }

    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn load16(at: *const f32, mask: std::arch::x86_64::__mmask16) -> std::arch::x86_64::__m512 {
        std::arch::x86_64::_mm512_maskz_loadu_ps(mask, at)
    }
}

impl StoredValue for f16 {
    const WIDENS: bool = true;

    fn as_f32<'s>(values: &'s [f16], scratch: &'s mut Vec<f32>) -> &'s [f32] {
        widened(values, scratch)
    }

    fn widen(self) -> f32 {
        self.to_f32()
    }

    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn load8(at: *const f16) -> std::arch::x86_64::__m256 {
        use std::arch::x86_64::*;
        _mm256_cvtph_ps(_mm_loadu_si128(at as *const __m128i))
    }

    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn load16(at: *const f16, mask: std::arch::x86_64::__mmask16) -> std::arch::x86_64::__m512 {
        use std::arch::x86_64::*;
        _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask, at as *const i16))
    }
}

impl StoredValue for bf16 {
    const WIDENS: bool = true;

    fn as_f32<'s>(values: &'s [bf16], scratch: &'s mut Vec<f32>) -> &'s [f32] {
        widened(values, scratch)
    }

    fn widen(self) -> f32 {
        self.to_f32()
    }

    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn load8(at: *const bf16) -> std::arch::x86_64::__m256 {
        use std::arch::x86_64::*;
        let halves = _mm256_cvtepu16_epi32(_mm_loadu_si128(at as *const __m128i));
        _mm256_castsi256_ps(_mm256_slli_epi32::<16>(halves))
    }

    fn bf16_bits(values: &[bf16]) -> Option<&[u16]> {
        // SAFETY: `bf16` is a transparent wrapper of its `u16` bits.
        Some(unsafe { std::slice::from_raw_parts(values.as_ptr() as *const u16, values.len()) })
    }

    /// A bf16 is the top half of an f32: widen to 32 bits and shift.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn load16(at: *const bf16, mask: std::arch::x86_64::__mmask16) -> std::arch::x86_64::__m512 {
        use std::arch::x86_64::*;
        let halves = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(mask, at as *const i16));
        _mm512_castsi512_ps(_mm512_slli_epi32::<16>(halves))
    }
}

/// `values` as f32 into `into` (same length), 8 at a time: the `half`
/// crate's slice conversion calls a function per 8 values on x86.
///
/// # Safety
/// The CPU has AVX2 and F16C.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,f16c")]
pub(crate) unsafe fn widen_into<W: StoredValue>(values: &[W], into: &mut [f32]) {
    use std::arch::x86_64::*;
    let whole = values.len() / 8 * 8;
    for i in (0..whole).step_by(8) {
        _mm256_storeu_ps(into.as_mut_ptr().add(i), W::load8(values.as_ptr().add(i)));
    }
    for i in whole..values.len() {
        into[i] = values[i].widen();
    }
}

/// Half-precision `values` widened into `scratch`.
fn widened<'s, H>(values: &[H], scratch: &'s mut Vec<f32>) -> &'s [f32]
where
    [H]: HalfFloatSliceExt,
{
    scratch.resize(values.len(), 0.0);
    values.convert_to_f32_slice(scratch);
    scratch
}
