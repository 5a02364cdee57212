//! GGML's block layouts, decoded one 32-value sub-block at a time.
//!
//! The source of truth is ggml's `ggml-common.h` (the `block_*` structs) and
//! the `dequantize_row_*` functions of `ggml-quants.c`; every layout here is
//! checked against the `gguf` Python package's dequantization by the
//! fixtures of `tests/fixtures/generate_ggml_blocks.py`.
//!
//! A decoded sub-block gives each of its 32 values as an unsigned integer
//! `q` and the numbers that turn `q` into the weight:
//!
//! | format | values per block | bytes | weight of sub-block `j` |
//! |---|---|---|---|
//! | Q4_0 | 32 | 18 | `d · (q − 8)`, `q` < 16 |
//! | Q4_1 | 32 | 20 | `d · q + m` |
//! | Q5_0 | 32 | 22 | `d · (q − 16)`, `q` < 32 |
//! | Q5_1 | 32 | 24 | `d · q + m` |
//! | Q8_0 | 32 | 34 | `d · q`, `q` signed |
//! | Q4_K | 256 | 144 | `d · sc_j · q − dmin · mn_j`, 6-bit `sc`, `mn` |
//! | Q5_K | 256 | 176 | as Q4_K, `q` < 32 |
//! | Q6_K | 256 | 210 | `d · sc_h · (q − 32)`, `q` < 64, signed 8-bit `sc` per 16 values |
//! | IQ4_NL | 32 | 18 | `d · IQ4_VALUES[q]`, `q` < 16 |
//! | IQ4_XS | 256 | 136 | `d · ls_j · IQ4_VALUES[q]`, signed 6-bit `ls` (stored `+ 32`) |
//! | Q3_K | 256 | 110 | `d · sc_h · (q − 4)`, `q` < 8, signed 6-bit `sc` per 16 values |
//! | Q2_K | 256 | 84 | `d · sc_h · q − dmin · mn_h`, `q` < 4, 4-bit `sc`, `mn` per 16 values |
//!
//! (`sc_h`: the scale of the 16 values `h`.)

use half::f16;

/// The GGML block formats Cake's kernels multiply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(non_camel_case_types)]
pub enum GgmlFormat {
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q8_0,
    Q4_K,
    Q5_K,
    Q6_K,
    IQ4_NL,
    IQ4_XS,
    Q3_K,
    Q2_K,
}

/// Values per sub-block (and per activation block).
pub const SUB_BLOCK: usize = 32;
/// Values per K-quant super-block.
pub const SUPER_BLOCK: usize = 256;

impl GgmlFormat {
    /// Every format, in the order of the table above.
    pub const ALL: [GgmlFormat; 12] = [
        Self::Q4_0,
        Self::Q4_1,
        Self::Q5_0,
        Self::Q5_1,
        Self::Q8_0,
        Self::Q4_K,
        Self::Q5_K,
        Self::Q6_K,
        Self::IQ4_NL,
        Self::IQ4_XS,
        Self::Q3_K,
        Self::Q2_K,
    ];

    /// Values of one GGML block.
    pub fn block_values(self) -> usize {
        if self.is_k_quant() {
            SUPER_BLOCK
        } else {
            SUB_BLOCK
        }
    }

    /// Bytes of one GGML block.
    pub fn block_bytes(self) -> usize {
        match self {
            Self::Q4_0 => 18,
            Self::Q4_1 => 20,
            Self::Q5_0 => 22,
            Self::Q5_1 => 24,
            Self::Q8_0 => 34,
            Self::Q4_K => 144,
            Self::Q5_K => 176,
            Self::Q6_K => 210,
            Self::IQ4_NL => 18,
            Self::IQ4_XS => 136,
            Self::Q3_K => 110,
            Self::Q2_K => 84,
        }
    }

    /// Whether blocks are 256-value super-blocks with per-sub-block scales
    /// (IQ4_XS too).
    pub fn is_k_quant(self) -> bool {
        matches!(self, Self::Q4_K | Self::Q5_K | Self::Q6_K | Self::IQ4_XS | Self::Q3_K | Self::Q2_K)
    }

    /// Byte offsets of the f16 scales (`d`, and `m` or `dmin`) in a block;
    /// every other byte of a block may hold anything.
    pub fn f16_offsets(self) -> &'static [usize] {
        match self {
            Self::Q4_0 | Self::Q5_0 | Self::Q8_0 | Self::IQ4_NL | Self::IQ4_XS => &[0],
            Self::Q4_1 | Self::Q5_1 | Self::Q4_K | Self::Q5_K => &[0, 2],
            Self::Q6_K => &[208],
            Self::Q3_K => &[108],
            Self::Q2_K => &[80, 82],
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Q4_0 => "Q4_0",
            Self::Q4_1 => "Q4_1",
            Self::Q5_0 => "Q5_0",
            Self::Q5_1 => "Q5_1",
            Self::Q8_0 => "Q8_0",
            Self::Q4_K => "Q4_K",
            Self::Q5_K => "Q5_K",
            Self::Q6_K => "Q6_K",
            Self::IQ4_NL => "IQ4_NL",
            Self::IQ4_XS => "IQ4_XS",
            Self::Q3_K => "Q3_K",
            Self::Q2_K => "Q2_K",
        }
    }
}

pub(crate) fn read_f16(bytes: &[u8]) -> f16 {
    f16::from_le_bytes([bytes[0], bytes[1]])
}

/// One 32-value block of Q4_0/Q4_1/Q5_0/Q5_1: `weight = d · q + m`
/// (the offsets of Q4_0 and Q5_0, `−8d` and `−16d`, are exact in f16).
pub(crate) struct LinearBlock {
    pub d: f16,
    pub m: f16,
    pub q: ValueWords,
}

/// The scale `d` and offset `m` of a block of Q4_0, Q4_1, Q5_0 or Q5_1,
/// and the bytes after them.
#[inline]
pub(crate) fn linear_scales(format: GgmlFormat, block: &[u8]) -> (f16, f16, &[u8]) {
    let d = read_f16(block);
    match format {
        GgmlFormat::Q4_0 => (d, f16::from_f32(-8.0 * d.to_f32()), &block[2..]),
        GgmlFormat::Q5_0 => (d, f16::from_f32(-16.0 * d.to_f32()), &block[2..]),
        GgmlFormat::Q4_1 | GgmlFormat::Q5_1 => (d, read_f16(&block[2..]), &block[4..]),
        other => unreachable!("{other:?} is not a 32-value linear format"),
    }
}

/// Decodes a 32-value block of Q4_0, Q4_1, Q5_0 or Q5_1.
pub(crate) fn linear_block(format: GgmlFormat, block: &[u8]) -> LinearBlock {
    let (d, m, rest) = linear_scales(format, block);
    let (high, nibbles) = match format {
        // Q5: 32 high bits (little-endian u32), then the nibbles.
        GgmlFormat::Q5_0 | GgmlFormat::Q5_1 => (u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]), &rest[4..20]),
        _ => (0, &rest[..16]),
    };
    let mut q = split_nibbles(nibbles);
    for (k, q) in q.iter_mut().enumerate() {
        // Bits 4k..4k + 4 of `high` to bit 4 of the word's 4 bytes.
        let bits = (high >> (4 * k)) & 0xF;
        *q |= ((bits & 1) | (bits & 2) << 7 | (bits & 4) << 14 | (bits & 8) << 21) << 4;
    }
    LinearBlock { d, m, q }
}

/// The 32 values of 16 bytes of nibbles as the 32-value formats store
/// them: value `i` < 16 is the low nibble of byte `i`, value `i + 16` its
/// high nibble.
fn split_nibbles(bytes: &[u8]) -> ValueWords {
    let words = le_words::<4>(bytes);
    std::array::from_fn(|k| if k < 4 { words[k] & LOW_NIBBLES } else { (words[k - 4] >> 4) & LOW_NIBBLES })
}

/// The low nibble of each byte of a little-endian word.
pub(crate) const LOW_NIBBLES: u32 = 0x0F0F_0F0F;

/// A sub-block's 32 values as 8 little-endian words, value `4k + i` in byte
/// `i` of word `k`: the decoders and the packers of `packed` move 4 values at
/// a time, a quarter of the work of going value by value (which was most of
/// a first load's repack).
pub(crate) type ValueWords = [u32; 8];

/// The first 32 bytes of `bytes` as [`ValueWords`].
pub(crate) fn value_words(bytes: &[u8]) -> ValueWords {
    le_words::<8>(bytes)
}

/// The first `4 · N` bytes of `bytes` as `N` little-endian words.
pub(crate) fn le_words<const N: usize>(bytes: &[u8]) -> [u32; N] {
    let mut words = [0u32; N];
    for (word, chunk) in words.iter_mut().zip(bytes[..4 * N].chunks_exact(4)) {
        *word = u32::from_le_bytes(chunk.try_into().expect("4 bytes"));
    }
    words
}

/// The values of [`ValueWords`], one per byte.
pub(crate) fn value_bytes(words: ValueWords) -> [u8; SUB_BLOCK] {
    let mut bytes = [0u8; SUB_BLOCK];
    for (chunk, word) in bytes.chunks_exact_mut(4).zip(words) {
        chunk.copy_from_slice(&word.to_le_bytes());
    }
    bytes
}

/// The 16 values of IQ4_NL's and IQ4_XS's 4-bit codes (ggml's
/// `kvalues_iq4nl`): a non-linear grid, denser near zero.
pub const IQ4_VALUES: [i8; 16] = [-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113];

/// An IQ4_NL block: `d`, then 16 bytes of codes; `weight = d · IQ4_VALUES[q]`.
pub(crate) fn iq4_nl_block(block: &[u8]) -> (f16, ValueWords) {
    (read_f16(block), split_nibbles(&block[2..18]))
}

/// IQ4_XS's super-block scale `d`.
pub(crate) fn iq4_xs_scale(block: &[u8]) -> f16 {
    read_f16(block)
}

/// Sub-block `j` (0..8) of an IQ4_XS super-block: its signed scale
/// `ls − 32` and codes; `weight = d · (ls − 32) · IQ4_VALUES[q]`.
///
/// Layout: `d`, `scales_h` (u16), `scales_l[4]`, `qs[128]`. The 6-bit `ls`
/// of sub-block `j` has its low 4 bits in nibble `j % 2` of `scales_l[j / 2]`
/// and its top 2 in bits `2j, 2j + 1` of `scales_h`; its codes are
/// `qs[16j..16j + 16]`, split as IQ4_NL's.
pub(crate) fn iq4_xs_block(block: &[u8], j: usize) -> (i8, ValueWords) {
    let scales_h = u16::from_le_bytes([block[2], block[3]]);
    let low = (block[4 + j / 2] >> (4 * (j % 2))) & 0x0F;
    let high = ((scales_h >> (2 * j)) & 3) as u8;
    let ls = (low | (high << 4)) as i8 - 32;
    (ls, split_nibbles(&block[8 + 16 * j..8 + 16 * j + 16]))
}

/// One Q8_0 block: `weight = d · q`.
pub(crate) fn q8_0_block(block: &[u8]) -> (f16, [i8; SUB_BLOCK]) {
    let mut q = [0i8; SUB_BLOCK];
    for (q, &byte) in q.iter_mut().zip(&block[2..34]) {
        *q = byte as i8;
    }
    (read_f16(block), q)
}

/// Sub-block `j` of a Q4_K or Q5_K super-block:
/// `weight = d · scale · q − dmin · min`.
pub(crate) struct KBlock {
    pub scale: u8,
    pub min: u8,
    pub q: ValueWords,
}

/// Values `32j .. 32j + 32` of a super-block's 2-bit fields as Q3_K and
/// Q2_K store them in 64 bytes: value `32j + l` is bits `2(j % 4)`,
/// `2(j % 4) + 1` of byte `l + 32·(j / 4)`.
fn two_bit_values(qs: &[u8], j: usize) -> ValueWords {
    value_words(&qs[32 * (j / 4)..]).map(|word| (word >> (2 * (j % 4))) & 0x0303_0303)
}

/// Scale `i` (0..16) of Q3_K's 12 packed bytes, signed: its low 4 bits
/// are nibble `i / 8` of byte `i % 8`, its top 2 bits are bits
/// `2(i / 4)`, `2(i / 4) + 1` of byte `8 + i % 4`; stored plus 32.
fn q3_k_scale(scales: &[u8], i: usize) -> i8 {
    let low = (scales[i % 8] >> (4 * (i / 8))) & 0x0F;
    let high = (scales[8 + i % 4] >> (2 * (i / 4))) & 3;
    (low | (high << 4)) as i8 - 32
}

/// Sub-block `j` (0..8) of a Q3_K super-block: the signed scales of its
/// halves and its values `q` (< 8); `weight = d · scale[h] · (q − 4)`.
///
/// Layout: `hmask[32]`, `qs[64]`, `scales[12]`, `d`. The low 2 bits of `q`
/// are in `qs` (see [`two_bit_values`]); bit 2 of value `32j + l` is bit
/// `j` of `hmask[l]` (ggml subtracts 4 where that bit is clear).
pub(crate) fn q3_k_block(block: &[u8], j: usize) -> ([i8; 2], ValueWords) {
    let (hmask, qs, scales) = (&block[..32], &block[32..96], &block[96..108]);
    let mut q = two_bit_values(qs, j);
    for (q, mask) in q.iter_mut().zip(value_words(hmask)) {
        *q |= ((mask >> j) & 0x0101_0101) << 2;
    }
    ([q3_k_scale(scales, 2 * j), q3_k_scale(scales, 2 * j + 1)], q)
}

/// Q3_K's super-block scale.
pub(crate) fn q3_k_scale_d(block: &[u8]) -> f16 {
    read_f16(&block[108..])
}

/// Sub-block `j` (0..8) of a Q2_K super-block: the scale-and-min byte of
/// each half (scale in the low nibble, min in the high) and its values `q`
/// (< 4); `weight = d · scale · q − dmin · min`.
///
/// Layout: `scales[16]` (one byte per 16 values), `qs[64]` (see
/// [`two_bit_values`]), `d`, `dmin`.
pub(crate) fn q2_k_block(block: &[u8], j: usize) -> ([u8; 2], ValueWords) {
    ([block[2 * j], block[2 * j + 1]], two_bit_values(&block[16..80], j))
}

/// Q2_K's super-block scales: `(d, dmin)`.
pub(crate) fn q2_k_super_scales(block: &[u8]) -> (f16, f16) {
    (read_f16(&block[80..]), read_f16(&block[82..]))
}

/// The super-block scales of Q4_K and Q5_K: `(d, dmin)`.
pub(crate) fn k_super_scales(block: &[u8]) -> (f16, f16) {
    (read_f16(block), read_f16(&block[2..]))
}

/// The 6-bit scale and min of sub-block `j` from Q4_K/Q5_K's 12 packed bytes:
/// sub-blocks 0–3 keep theirs in the low 6 bits of bytes `j` and `j + 4`;
/// 4–7 in the nibbles of byte `j + 4` plus the top 2 bits of bytes `j − 4`
/// and `j`.
fn k_scale_min(scales: &[u8], j: usize) -> (u8, u8) {
    if j < 4 {
        (scales[j] & 63, scales[j + 4] & 63)
    } else {
        let scale = (scales[j + 4] & 0x0F) | ((scales[j - 4] >> 6) << 4);
        let min = (scales[j + 4] >> 4) | ((scales[j] >> 6) << 4);
        (scale, min)
    }
}

/// Sub-block `j` (0..8) of a Q4_K (`high_bits = false`) or Q5_K super-block.
/// The nibbles of sub-blocks `2c` and `2c + 1` share 32 bytes (low and high
/// nibbles); Q5_K's 32 bytes of high bits give bit `j` of byte `l` to value
/// `l` of sub-block `j`.
pub(crate) fn k_block(format: GgmlFormat, block: &[u8], j: usize) -> KBlock {
    let (scale, min) = k_scale_min(&block[4..16], j);
    let (high, nibbles) = match format {
        GgmlFormat::Q4_K => (None, &block[16..144]),
        GgmlFormat::Q5_K => (Some(&block[16..48]), &block[48..176]),
        other => unreachable!("{other:?} is not Q4_K or Q5_K"),
    };
    // Four values at a time, one per byte of a word.
    let chunk = value_words(&nibbles[32 * (j / 2)..]);
    let high = high.map(value_words);
    let q = std::array::from_fn(|k| {
        let nibbles = (chunk[k] >> (4 * (j % 2))) & LOW_NIBBLES;
        nibbles | high.map_or(0, |h| ((h[k] >> j) & 0x0101_0101) << 4)
    });
    KBlock { scale, min, q }
}

/// Sub-block `j` (0..8) of a Q6_K super-block: the two signed scales of its
/// halves and its 6-bit values; `weight = d · scale[h] · (q − 32)`.
///
/// Layout: `ql[128]` (low nibbles), `qh[64]` (2 high bits each), `scales[16]`,
/// `d`. Each half of the super-block (128 values) uses 64 bytes of `ql` and 32
/// of `qh`; value `32s + l` of a half (`s` < 4, `l` < 32) takes the low
/// (s = 0, 1) or high (s = 2, 3) nibble of `ql[l + 32·(s % 2)]` and bits
/// `2s, 2s + 1` of `qh[l]`.
pub(crate) fn q6_k_block(block: &[u8], j: usize) -> ([i8; 2], ValueWords) {
    let (ql, qh, scales) = (&block[..128], &block[128..192], &block[192..208]);
    let (half, s) = (j / 4, j % 4);
    // Four values at a time, one per byte of a word.
    let low = value_words(&ql[64 * half + 32 * (s % 2)..]);
    let high = value_words(&qh[32 * half..]);
    let q = std::array::from_fn(|k| {
        ((low[k] >> (4 * (s / 2))) & LOW_NIBBLES) | (((high[k] >> (2 * s)) & 0x0303_0303) << 4)
    });
    // 16 scales, one per 16 values, in value order.
    ([scales[2 * j] as i8, scales[2 * j + 1] as i8], q)
}

/// Q6_K's super-block scale.
pub(crate) fn q6_k_scale(block: &[u8]) -> f16 {
    read_f16(&block[208..])
}

/// The weights of one GGML block, by the formulas above: the reference the
/// repacked tiles and the `gguf` package's values are checked against.
pub fn dequantize_block(format: GgmlFormat, block: &[u8], out: &mut [f32]) {
    assert_eq!(out.len(), format.block_values());
    match format {
        GgmlFormat::Q8_0 => {
            let (d, q) = q8_0_block(block);
            for (o, q) in out.iter_mut().zip(q) {
                *o = d.to_f32() * q as f32;
            }
        }
        GgmlFormat::Q4_0 | GgmlFormat::Q4_1 | GgmlFormat::Q5_0 | GgmlFormat::Q5_1 => {
            let b = linear_block(format, block);
            for (o, q) in out.iter_mut().zip(value_bytes(b.q)) {
                *o = b.d.to_f32() * q as f32 + b.m.to_f32();
            }
        }
        GgmlFormat::Q4_K | GgmlFormat::Q5_K => {
            let (d, dmin) = k_super_scales(block);
            for (j, out) in out.chunks_exact_mut(SUB_BLOCK).enumerate() {
                let b = k_block(format, block, j);
                let (scale, min) = (d.to_f32() * b.scale as f32, dmin.to_f32() * b.min as f32);
                for (o, q) in out.iter_mut().zip(value_bytes(b.q)) {
                    *o = scale * q as f32 - min;
                }
            }
        }
        GgmlFormat::Q6_K => {
            let d = q6_k_scale(block).to_f32();
            for (j, out) in out.chunks_exact_mut(SUB_BLOCK).enumerate() {
                let (scales, q) = q6_k_block(block, j);
                for (l, (o, q)) in out.iter_mut().zip(value_bytes(q)).enumerate() {
                    *o = d * scales[l / 16] as f32 * (q as i32 - 32) as f32;
                }
            }
        }
        GgmlFormat::IQ4_NL => {
            let (d, q) = iq4_nl_block(block);
            for (o, q) in out.iter_mut().zip(value_bytes(q)) {
                *o = d.to_f32() * IQ4_VALUES[q as usize] as f32;
            }
        }
        GgmlFormat::IQ4_XS => {
            let d = iq4_xs_scale(block).to_f32();
            for (j, out) in out.chunks_exact_mut(SUB_BLOCK).enumerate() {
                let (ls, q) = iq4_xs_block(block, j);
                let scale = d * ls as f32;
                for (o, q) in out.iter_mut().zip(value_bytes(q)) {
                    *o = scale * IQ4_VALUES[q as usize] as f32;
                }
            }
        }
        GgmlFormat::Q3_K => {
            let d = q3_k_scale_d(block).to_f32();
            for (j, out) in out.chunks_exact_mut(SUB_BLOCK).enumerate() {
                let (scales, q) = q3_k_block(block, j);
                for (l, (o, q)) in out.iter_mut().zip(value_bytes(q)).enumerate() {
                    *o = d * scales[l / 16] as f32 * (q as i32 - 4) as f32;
                }
            }
        }
        GgmlFormat::Q2_K => {
            let (d, dmin) = q2_k_super_scales(block);
            for (j, out) in out.chunks_exact_mut(SUB_BLOCK).enumerate() {
                let (scale_mins, q) = q2_k_block(block, j);
                for (l, (o, q)) in out.iter_mut().zip(value_bytes(q)).enumerate() {
                    let scale_min = scale_mins[l / 16];
                    let (scale, min) =
                        (d.to_f32() * (scale_min & 0x0F) as f32, dmin.to_f32() * (scale_min >> 4) as f32);
                    *o = scale * q as f32 - min;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packed::PackedMatrix;

    /// The fixture's raw blocks and the `gguf` package's values for them.
    fn fixture(format: GgmlFormat) -> (Vec<u8>, Vec<f32>) {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/ggml_blocks");
        let read = |ext: &str| {
            std::fs::read(dir.join(format!("{}.{ext}", format.name())))
                .unwrap_or_else(|e| panic!("{}: {e}", format.name()))
        };
        let values = read("values").chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
        (read("blocks"), values)
    }

    #[test]
    fn random_blocks_decode_as_the_gguf_package_dequantizes_them() {
        for format in GgmlFormat::ALL {
            let (blocks, expected) = fixture(format);
            let per_block = format.block_values();
            assert_eq!(blocks.len() / format.block_bytes() * per_block, expected.len());
            let mut values = vec![0f32; per_block];
            for (b, (block, expected)) in
                blocks.chunks_exact(format.block_bytes()).zip(expected.chunks_exact(per_block)).enumerate()
            {
                dequantize_block(format, block, &mut values);
                assert_eq!(values, expected, "{format:?} block {b}");
            }
            // The same blocks as a matrix of one block per row, through the tiles.
            let rows = blocks.len() / format.block_bytes();
            let packed = PackedMatrix::from_ggml(format, &blocks, rows, per_block).unwrap();
            assert_eq!(packed.dequantize(), expected, "{format:?} repacked");
        }
    }
}
