// 136 bytes per 256 values: d, scales_h (u16), scales_l[4], codes[128].
// Sub-block j: 6-bit scale ls (stored + 32), codes[16 j..16 j + 16] split as
// IQ4_NL's; weight = d (ls - 32) IQ4_VALUES[q].
const BLOCK_BYTES: u32 = 136u;
fn load_unit(row: u32, u: u32) {
    let o = row * P.row_bytes + (u / 8u) * BLOCK_BYTES;
    let j = u % 8u;
    let d = f16_at(o);
    let low = (byte_at(o + 4u + j / 2u) >> (4u * (j % 2u))) & 0xfu;
    let high = (half_at(o + 2u) >> (2u * j)) & 3u;
    let scale = d * f32(i32(low | (high << 4u)) - 32);
    split_nibbles(o + 8u + 16u * j);
    for (var i = 0u; i < 32u; i++) {
        w[i] = scale * IQ4_VALUES[q[i]];
    }
}
