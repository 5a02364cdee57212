// Reading GGML blocks as stored: the weights are a byte string bound as
// words, and a block's fields sit at any byte offset.

// Byte `o` of the weights.
fn byte_at(o: u32) -> u32 {
    return (W[o >> 2u] >> ((o & 3u) << 3u)) & 0xffu;
}

// The little-endian u16 at even byte offset `o`.
fn half_at(o: u32) -> u32 {
    return (W[o >> 2u] >> ((o & 2u) << 3u)) & 0xffffu;
}

// The f16 at even byte offset `o`, as f32.
fn f16_at(o: u32) -> f32 {
    return unpack2x16float(half_at(o)).x;
}

// The little-endian u32 at any byte offset `o`.
fn word_at(o: u32) -> u32 {
    let shift = (o & 3u) << 3u;
    let low = W[o >> 2u];
    if (shift == 0u) {
        return low;
    }
    return (low >> shift) | (W[(o >> 2u) + 1u] << (32u - shift));
}

// Byte `i` (0..4) of `word` as a signed value.
fn signed_byte(word: u32, i: u32) -> f32 {
    return f32(bitcast<i32>(word << (24u - 8u * i)) >> 24u);
}

// The 32 values of 16 bytes of nibbles at `o` (value i < 16 the low nibble of
// byte i, value i + 16 its high nibble) into `q`.
fn split_nibbles(o: u32) {
    for (var k = 0u; k < 4u; k++) {
        let word = word_at(o + 4u * k);
        for (var i = 0u; i < 4u; i++) {
            let b = (word >> (8u * i)) & 0xffu;
            q[4u * k + i] = b & 0xfu;
            q[16u + 4u * k + i] = b >> 4u;
        }
    }
}

// The IQ4 formats' 16-value grid (ggml's kvalues_iq4nl).
var<private> IQ4_VALUES: array<f32, 16> = array<f32, 16>(-127.0, -104.0, -83.0, -65.0, -49.0, -35.0, -22.0, -10.0, 1.0, 13.0, 25.0, 38.0, 53.0, 69.0, 89.0, 113.0);
