//! Functions applied value by value: the exponential as a vector polynomial
//! (libm's `expf` is a call per value; AVX-512 and AVX2 forms), the
//! SiLU-gated product of a gated MLP, `silu(gate) · up`, in one pass
//! instead of three, the Zipformer's Swoosh activations and its sigmoid-
//! and tanh-gated products. (The last two have no AVX-512 form: on such a
//! CPU they take the AVX2 one, as their cost is the exponential's.)

use super::cpu::Level;

/// `out[i] = silu(gate[i]) · up[i]` with `silu(g) = g / (1 + e^-g)`.
pub fn silu_mul(gate: &[f32], up: &[f32], out: &mut [f32], level: Level) {
    assert!(gate.len() == up.len() && up.len() == out.len(), "lengths disagree");
    #[cfg(target_arch = "x86_64")]
    if level == Level::Avx512Vnni {
        // SAFETY: `Level` is only this high when the CPU has AVX-512.
        return unsafe { silu_mul_avx512(gate, up, out) };
    }
    #[cfg(target_arch = "x86_64")]
    if level == Level::Avx2 {
        // SAFETY: `Level` is only this high when the CPU has AVX2 and FMA.
        return unsafe { silu_mul_avx2(gate, up, out) };
    }
    let _ = level;
    for ((o, &g), &u) in out.iter_mut().zip(gate).zip(up) {
        *o = g / (1.0 + (-g).exp()) * u;
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,fma")]
unsafe fn silu_mul_avx512(gate: &[f32], up: &[f32], out: &mut [f32]) {
    use std::arch::x86_64::*;
    let n = out.len();
    for at in (0..n).step_by(16) {
        let mask = lanes_within(n, at);
        let g = _mm512_maskz_loadu_ps(mask, gate.as_ptr().add(at));
        let u = _mm512_maskz_loadu_ps(mask, up.as_ptr().add(at));
        let e = exp_avx512(_mm512_sub_ps(_mm512_setzero_ps(), g));
        let silu = _mm512_div_ps(g, _mm512_add_ps(_mm512_set1_ps(1.0), e));
        _mm512_mask_storeu_ps(out.as_mut_ptr().add(at), mask, _mm512_mul_ps(silu, u));
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn silu_mul_avx2(gate: &[f32], up: &[f32], out: &mut [f32]) {
    use std::arch::x86_64::*;
    let (n, whole) = (out.len(), out.len() / 8 * 8);
    for at in (0..whole).step_by(8) {
        let g = _mm256_loadu_ps(gate.as_ptr().add(at));
        let u = _mm256_loadu_ps(up.as_ptr().add(at));
        let e = exp_avx2(_mm256_sub_ps(_mm256_setzero_ps(), g));
        let silu = _mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0), e));
        _mm256_storeu_ps(out.as_mut_ptr().add(at), _mm256_mul_ps(silu, u));
    }
    for i in whole..n {
        out[i] = gate[i] / (1.0 + (-gate[i]).exp()) * up[i];
    }
}

/// `values[i] ← softplus(values[i] − shift) − slope · values[i] − offset`,
/// with `softplus(z) = log(1 + eᶻ)`: the Zipformer's SwooshL (shift 4,
/// slope 0.08, offset 0.035) and SwooshR (shift 1, offset 0.313261687).
pub fn swoosh(values: &mut [f32], shift: f32, slope: f32, offset: f32, level: Level) {
    #[cfg(target_arch = "x86_64")]
    if level >= Level::Avx2 {
        // SAFETY: `Level` is only this high when the CPU has AVX2 and FMA.
        return unsafe { swoosh_avx2(values, shift, slope, offset) };
    }
    let _ = level;
    for v in values {
        let z = *v - shift;
        *v = z.max(0.0) + (-z.abs()).exp().ln_1p() - slope * *v - offset;
    }
}

/// The function that gates values in [`gated`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// `σ(g) = 1 / (1 + e⁻ᵍ)`.
    Sigmoid,
    /// `tanh(g) = 2σ(2g) − 1`.
    Tanh,
}

/// `out[i] = values[i] · gate(gates[i])`.
pub fn gated(values: &[f32], gates: &[f32], out: &mut [f32], gate: Gate, level: Level) {
    assert!(values.len() == gates.len() && gates.len() == out.len(), "lengths disagree");
    #[cfg(target_arch = "x86_64")]
    if level >= Level::Avx2 {
        // SAFETY: `Level` is only this high when the CPU has AVX2 and FMA.
        return unsafe { gated_avx2(values, gates, out, gate) };
    }
    let _ = level;
    for ((o, &v), &g) in out.iter_mut().zip(values).zip(gates) {
        *o = v * match gate {
            Gate::Sigmoid => 1.0 / (1.0 + (-g).exp()),
            Gate::Tanh => g.tanh(),
        };
    }
}

/// `log(1 + eᶻ)` as `max(z, 0) + log(1 + e)` with `e = e^−|z|` in (0, 1]:
/// `log(1 + e) = 2 atanh(s)`, `s = e / (2 + e) ≤ 1/3`, by its series to
/// `s¹⁵` (error below 1e-9), exact in relative terms however small `e` is.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn softplus_avx2(z: std::arch::x86_64::__m256) -> std::arch::x86_64::__m256 {
    use std::arch::x86_64::*;
    let magnitude = _mm256_andnot_ps(_mm256_set1_ps(-0.0), z);
    let e = exp_avx2(_mm256_sub_ps(_mm256_setzero_ps(), magnitude));
    let s = _mm256_div_ps(e, _mm256_add_ps(_mm256_set1_ps(2.0), e));
    let s2 = _mm256_mul_ps(s, s);
    let mut series = _mm256_set1_ps(1.0 / 15.0);
    for odd in [13.0f32, 11.0, 9.0, 7.0, 5.0, 3.0, 1.0] {
        series = _mm256_fmadd_ps(series, s2, _mm256_set1_ps(1.0 / odd));
    }
    let log1p = _mm256_mul_ps(_mm256_add_ps(s, s), series);
    _mm256_add_ps(_mm256_max_ps(z, _mm256_setzero_ps()), log1p)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn swoosh_avx2(values: &mut [f32], shift: f32, slope: f32, offset: f32) {
    use std::arch::x86_64::*;
    let (n, whole) = (values.len(), values.len() / 8 * 8);
    let (shift_v, slope_v, offset_v) = (_mm256_set1_ps(shift), _mm256_set1_ps(slope), _mm256_set1_ps(offset));
    for at in (0..whole).step_by(8) {
        let v = _mm256_loadu_ps(values.as_ptr().add(at));
        let soft = softplus_avx2(_mm256_sub_ps(v, shift_v));
        let y = _mm256_sub_ps(_mm256_fnmadd_ps(slope_v, v, soft), offset_v);
        _mm256_storeu_ps(values.as_mut_ptr().add(at), y);
    }
    swoosh(&mut values[whole..n], shift, slope, offset, Level::Plain);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn gated_avx2(values: &[f32], gates: &[f32], out: &mut [f32], gate: Gate) {
    use std::arch::x86_64::*;
    let (n, whole) = (out.len(), out.len() / 8 * 8);
    let one = _mm256_set1_ps(1.0);
    for at in (0..whole).step_by(8) {
        let v = _mm256_loadu_ps(values.as_ptr().add(at));
        let g = _mm256_loadu_ps(gates.as_ptr().add(at));
        let y = match gate {
            Gate::Sigmoid => {
                let e = exp_avx2(_mm256_sub_ps(_mm256_setzero_ps(), g));
                _mm256_div_ps(v, _mm256_add_ps(one, e))
            }
            Gate::Tanh => {
                let e = exp_avx2(_mm256_mul_ps(_mm256_set1_ps(-2.0), g));
                let sigmoid = _mm256_div_ps(one, _mm256_add_ps(one, e));
                _mm256_mul_ps(v, _mm256_fmsub_ps(_mm256_set1_ps(2.0), sigmoid, one))
            }
        };
        _mm256_storeu_ps(out.as_mut_ptr().add(at), y);
    }
    gated(&values[whole..n], &gates[whole..n], &mut out[whole..n], gate, Level::Plain);
}

/// `row ← softmax(row)`: `e^(x − max)` over their sum.
pub fn softmax(row: &mut [f32], level: Level) {
    let max = row.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
    if row.is_empty() || max == f32::NEG_INFINITY {
        return;
    }
    let scale = 1.0 / exp_shifted(row, max, level);
    row.iter_mut().for_each(|v| *v *= scale);
}

/// Replaces each value `v` by `e^(v − shift)`; returns their sum.
pub(crate) fn exp_shifted(values: &mut [f32], shift: f32, level: Level) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if level == Level::Avx512Vnni {
        // SAFETY: `Level` is only this high when the CPU has AVX-512.
        return unsafe { exp_shifted_avx512(values, shift) };
    }
    #[cfg(target_arch = "x86_64")]
    if level == Level::Avx2 {
        // SAFETY: `Level` is only this high when the CPU has AVX2 and FMA.
        return unsafe { exp_shifted_avx2(values, shift) };
    }
    let _ = level;
    let mut sum = 0.0;
    for v in values.iter_mut() {
        *v = (*v - shift).exp();
        sum += *v;
    }
    sum
}

/// [`exp_shifted`] 16 values at a time.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,fma")]
unsafe fn exp_shifted_avx512(values: &mut [f32], shift: f32) -> f32 {
    use std::arch::x86_64::*;
    let (m, n) = (_mm512_set1_ps(shift), values.len());
    let mut sum = _mm512_setzero_ps();
    for at in (0..n).step_by(16) {
        let k = lanes_within(n, at);
        let p = values.as_mut_ptr().add(at);
        let e = exp_avx512(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, p), m));
        _mm512_mask_storeu_ps(p, k, e);
        sum = _mm512_mask_add_ps(sum, k, sum, e);
    }
    _mm512_reduce_add_ps(sum)
}

/// [`exp_shifted`] 8 values at a time.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn exp_shifted_avx2(values: &mut [f32], shift: f32) -> f32 {
    use std::arch::x86_64::*;
    let (m, n) = (_mm256_set1_ps(shift), values.len());
    let mut sum = _mm256_setzero_ps();
    for at in (0..n).step_by(8) {
        let k = eight_lanes_within(n, at);
        let p = values.as_mut_ptr().add(at);
        let e = _mm256_and_ps(exp_avx2(_mm256_sub_ps(_mm256_maskload_ps(p, k), m)), _mm256_castsi256_ps(k));
        _mm256_maskstore_ps(p, k, e);
        sum = _mm256_add_ps(sum, e);
    }
    let mut lanes = [0f32; 8];
    _mm256_storeu_ps(lanes.as_mut_ptr(), sum);
    lanes.iter().sum()
}

/// The lanes of an 8-lane access at `at` that fall inside `len` values.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn eight_lanes_within(len: usize, at: usize) -> std::arch::x86_64::__m256i {
    use std::arch::x86_64::*;
    let left = (len - at).min(8) as i32;
    _mm256_cmpgt_epi32(_mm256_set1_epi32(left), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7))
}

/// The lanes of a 16-lane load at `at` that fall inside `len` values.
#[cfg(target_arch = "x86_64")]
pub(crate) fn lanes_within(len: usize, at: usize) -> std::arch::x86_64::__mmask16 {
    let left = len - at;
    if left >= 16 {
        0xFFFF
    } else {
        ((1u32 << left) - 1) as u16
    }
}

/// The vector exponentials' constants: `ln 2` split in two (355/512, so
/// that `n · LN2_HIGH` is exact, and the rest), the inputs below and above
/// which f32's `e^x` is 0 and infinity, and the Taylor coefficients of
/// `e^r` from `1/7!` down to `1`, in the order Horner's rule takes them.
#[cfg(target_arch = "x86_64")]
const LN2_HIGH: f32 = 0.693_359_4;
#[cfg(target_arch = "x86_64")]
const LN2_LOW: f32 = -2.121_944_4e-4;
#[cfg(target_arch = "x86_64")]
const EXP_LOWEST: f32 = -104.0;
#[cfg(target_arch = "x86_64")]
const EXP_HIGHEST: f32 = 89.0;
#[cfg(target_arch = "x86_64")]
const EXP_TAYLOR: [f32; 8] = [1.0 / 5040.0, 1.0 / 720.0, 1.0 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0, 1.0];

/// `e^x` to float precision: `x = n · ln 2 + r` with `|r| ≤ ln 2 / 2`,
/// `e^r` by its Taylor series to `r⁷` (error below 1e-8), scaled by `2ⁿ`.
/// Below -104 the result is 0, above 89 infinity, as in f32.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,fma")]
unsafe fn exp_avx512(x: std::arch::x86_64::__m512) -> std::arch::x86_64::__m512 {
    use std::arch::x86_64::*;
    let x = _mm512_max_ps(x, _mm512_set1_ps(EXP_LOWEST));
    let x = _mm512_min_ps(x, _mm512_set1_ps(EXP_HIGHEST));
    let n = _mm512_roundscale_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(_mm512_mul_ps(
        x,
        _mm512_set1_ps(std::f32::consts::LOG2_E),
    ));
    let r = _mm512_fnmadd_ps(n, _mm512_set1_ps(LN2_HIGH), x);
    let r = _mm512_fnmadd_ps(n, _mm512_set1_ps(LN2_LOW), r);
    let mut p = _mm512_set1_ps(EXP_TAYLOR[0]);
    for c in &EXP_TAYLOR[1..] {
        p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(*c));
    }
    _mm512_scalef_ps(p, n)
}

/// [`exp_avx512`] with AVX2: the same reduction and polynomial; `2ⁿ` is
/// applied as two powers of two built in the exponent field (each within
/// the normal range), so results below `2⁻¹²⁶` round as f32 does.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn exp_avx2(x: std::arch::x86_64::__m256) -> std::arch::x86_64::__m256 {
    use std::arch::x86_64::*;
    let x = _mm256_max_ps(x, _mm256_set1_ps(EXP_LOWEST));
    let x = _mm256_min_ps(x, _mm256_set1_ps(EXP_HIGHEST));
    let n = _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(_mm256_mul_ps(
        x,
        _mm256_set1_ps(std::f32::consts::LOG2_E),
    ));
    let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(LN2_HIGH), x);
    let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(LN2_LOW), r);
    let mut p = _mm256_set1_ps(EXP_TAYLOR[0]);
    for c in &EXP_TAYLOR[1..] {
        p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(*c));
    }
    // n in [-150, 129]: halves in [-75, 65], each a normal power of two.
    let n = _mm256_cvtps_epi32(n);
    let half = _mm256_srai_epi32::<1>(n);
    let power = |k: __m256i| _mm256_castsi256_ps(_mm256_slli_epi32::<23>(_mm256_add_epi32(k, _mm256_set1_epi32(127))));
    _mm256_mul_ps(_mm256_mul_ps(p, power(half)), power(_mm256_sub_epi32(n, half)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn silu_mul_matches_double_precision_at_every_level() {
        let gate: Vec<f32> = (0..1037).map(|i| (i as f32 - 518.0) * 0.23).collect();
        let up: Vec<f32> = (0..1037).map(|i| ((i * 7919) % 201) as f32 / 50.0 - 2.0).collect();
        for level in Level::all_supported() {
            let mut out = vec![f32::NAN; gate.len()];
            silu_mul(&gate, &up, &mut out, level);
            for ((&g, &u), &o) in gate.iter().zip(&up).zip(&out) {
                let (g64, u64) = (g as f64, u as f64);
                let exact = g64 / (1.0 + (-g64).exp()) * u64;
                assert!(
                    (o as f64 - exact).abs() <= 1e-6 * exact.abs() + 1e-30,
                    "{level:?}: silu({g}) · {u} = {o}, not {exact}"
                );
            }
        }
    }

    #[test]
    fn swoosh_and_gates_match_double_precision_at_every_level() {
        let x: Vec<f32> = (0..2053).map(|i| (i as f32 - 1026.0) * 0.037).chain([-200.0, 95.0, 0.0]).collect();
        let gates: Vec<f32> = x.iter().map(|v| v * 0.7 - 0.3).collect();
        let softplus = |z: f64| z.max(0.0) + (-z.abs()).exp().ln_1p();
        for level in Level::all_supported() {
            for (shift, offset) in [(4.0f32, 0.035f32), (1.0, 0.313_261_7)] {
                let mut y = x.clone();
                swoosh(&mut y, shift, 0.08, offset, level);
                for (&v, &got) in x.iter().zip(&y) {
                    let v64 = v as f64;
                    let exact = softplus(v64 - shift as f64) - 0.08 * v64 - offset as f64;
                    let tolerance = 2e-7 * (exact.abs() + v64.abs() * 0.08 + 1.0);
                    assert!((got as f64 - exact).abs() <= tolerance, "{level:?}: swoosh({v}) = {got}, not {exact}");
                }
            }
            for gate in [Gate::Sigmoid, Gate::Tanh] {
                let mut out = vec![f32::NAN; x.len()];
                gated(&x, &gates, &mut out, gate, level);
                for ((&v, &g), &got) in x.iter().zip(&gates).zip(&out) {
                    let g64 = g as f64;
                    let factor = match gate {
                        Gate::Sigmoid => 1.0 / (1.0 + (-g64).exp()),
                        Gate::Tanh => g64.tanh(),
                    };
                    let exact = v as f64 * factor;
                    assert!(
                        (got as f64 - exact).abs() <= 3e-7 * (v as f64).abs() + 1e-30,
                        "{level:?}: {v} · {gate:?}({g}) = {got}, not {exact}"
                    );
                }
            }
        }
    }

    #[test]
    fn softmax_matches_double_precision_at_every_level() {
        let row: Vec<f32> = (0..1031).map(|i| ((i * 7919) % 613) as f32 * 0.05 - 15.0).chain([-1000.0, 30.0]).collect();
        let max = row.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
        let sum: f64 = row.iter().map(|&v| (v as f64 - max).exp()).sum();
        for level in Level::all_supported() {
            let mut got = row.clone();
            softmax(&mut got, level);
            for (&v, &p) in row.iter().zip(&got) {
                let exact = (v as f64 - max).exp() / sum;
                assert!(
                    (p as f64 - exact).abs() <= 1e-6 * exact + 1e-12,
                    "{level:?}: softmax of {v} = {p}, not {exact}"
                );
            }
        }
        let mut empty: [f32; 0] = [];
        softmax(&mut empty, Level::Plain);
    }

    /// The AVX2 exponential against f64 from the underflow to the overflow
    /// threshold: to 2 ulp where the result is normal, and denormal
    /// results within one denormal step.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn avx2_exponential_matches_double_precision() {
        if !Level::all_supported().contains(&Level::Avx2) {
            return;
        }
        let xs: Vec<f32> = (0..=40_000).map(|i| -110.0 + i as f32 * 0.005).collect();
        for chunk in xs.chunks_exact(8) {
            let mut got = [0f32; 8];
            // SAFETY: the CPU has AVX2 and FMA (checked above).
            unsafe {
                use std::arch::x86_64::*;
                _mm256_storeu_ps(got.as_mut_ptr(), exp_avx2(_mm256_loadu_ps(chunk.as_ptr())));
            }
            for (&x, &e) in chunk.iter().zip(&got) {
                let exact = (x as f64).exp();
                let ok = if exact > f32::MAX as f64 {
                    e == f32::INFINITY
                } else if exact >= f32::MIN_POSITIVE as f64 {
                    (e as f64 - exact).abs() <= 2.5e-7 * exact
                } else {
                    (e as f64 - exact).abs() <= 1.5e-45
                };
                assert!(ok, "exp({x}) = {e}, not {exact}");
            }
        }
    }
}
