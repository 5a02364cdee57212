//! Which SIMD instructions this CPU has, detected once at run time.

use std::sync::OnceLock;

/// The instruction sets the kernels have paths for, best last.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Plain Rust (any CPU).
    Plain,
    /// AVX2 with FMA and F16C (x86-64 since 2013).
    Avx2,
    /// AVX-512 (F, BW, VL) with VNNI dot products (Ice Lake, Zen 4 and later).
    Avx512Vnni,
}

impl Level {
    /// The best level this CPU runs, or the one `CAKE_KERNELS` asks for
    /// (`plain`, `avx2`), never above what the CPU has.
    pub fn detected() -> Level {
        static LEVEL: OnceLock<Level> = OnceLock::new();
        *LEVEL.get_or_init(|| {
            let best = best_supported();
            match std::env::var("CAKE_KERNELS").ok().as_deref() {
                Some("plain") => Level::Plain,
                Some("avx2") => best.min(Level::Avx2),
                _ => best,
            }
        })
    }

    /// Every level this CPU can run, for tests that compare them.
    pub fn all_supported() -> Vec<Level> {
        let best = best_supported();
        [Level::Plain, Level::Avx2, Level::Avx512Vnni].into_iter().filter(|l| *l <= best).collect()
    }

    pub fn name(self) -> &'static str {
        match self {
            Level::Plain => "plain",
            Level::Avx2 => "avx2",
            Level::Avx512Vnni => "avx512-vnni",
        }
    }
}

#[cfg(target_arch = "x86_64")]
fn best_supported() -> Level {
    let avx2 = is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") && is_x86_feature_detected!("f16c");
    let avx512 = avx2
        && is_x86_feature_detected!("avx512f")
        && is_x86_feature_detected!("avx512bw")
        && is_x86_feature_detected!("avx512vl")
        && is_x86_feature_detected!("avx512vnni");
    match (avx2, avx512) {
        (_, true) => Level::Avx512Vnni,
        (true, false) => Level::Avx2,
        _ => Level::Plain,
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn best_supported() -> Level {
    Level::Plain
}
