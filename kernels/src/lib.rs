//! Cake's CPU kernels for the hot path of generation: products of quantized weight
//! matrices with activations.
//!
//! candle's GGML kernels have no SIMD path for Q4_1 and choose their AVX code
//! when the binary is compiled, so a portable build multiplies in scalar code.
//! These kernels choose at run time ([`cpu::Level`]) between AVX-512 VNNI,
//! AVX2 and plain Rust. Weights are repacked once, at load, into tiles of 16
//! rows ([`packed`]) so that one SIMD instruction advances 16 output rows;
//! activations are quantized to 8 bits once per product ([`activations`]).
//! Work is split over a pool of threads that stay warm between products
//! ([`pool`]). Dense f32 weights get a streaming product for the few
//! activation rows of decoding ([`dense`]), a decode step's attention
//! reads the cached keys and values in place ([`attention`]), and the gated
//! MLP's activation is one vectorised pass ([`elementwise`]).
//!
//! Every quantized SIMD path computes exactly what the plain one does and is
//! tested against it on random inputs, odd sizes included; the dense paths
//! agree with a double-precision product to rounding.

/// Runs `$kernel::<N>` for the row groups `$groups` over all activation
/// rows, `$max` rows at a time; `rest` must list every shorter remainder
/// (1 to `$max - 1`), each of which gets its own instantiation. The kernel
/// gets row group `g`'s tiles (or, with `groups f`, `f(g)`).
macro_rules! over_tokens {
    (groups $row_group:expr, $kernel:ident, $groups:expr, $acts:expr, $out:expr, max $max:expr, rest [$($n:literal),*]) => {{
        for g in $groups {
            let row_tiles = $row_group(g);
            let mut t = 0;
            while t < $acts.rows {
                match $acts.rows - t {
                    $($n => $kernel::<$n>(row_tiles, $acts, t, g, $out),)*
                    _ => $kernel::<{ $max }>(row_tiles, $acts, t, g, $out),
                }
                t += $max;
            }
        }
    }};
    ($kernel:ident, $tiles:expr, $groups:expr, $acts:expr, $out:expr, max $max:expr, rest [$($n:literal),*]) => {{
        let blocks = $acts.blocks_per_row();
        over_tokens!(groups |g: usize| &$tiles[g * blocks..(g + 1) * blocks], $kernel, $groups, $acts, $out, max $max, rest [$($n),*])
    }};
}

pub mod activations;
pub mod attention;
pub mod cpu;
pub mod dense;
pub mod elementwise;
pub mod ggml_blocks;
pub mod matmul;
pub mod memory;
pub mod packed;
mod plain;
pub mod pool;
pub mod values;
#[cfg(target_arch = "x86_64")]
mod x86_avx2;
#[cfg(target_arch = "x86_64")]
mod x86_avx512;
