// 176 bytes per 256 values: d, dmin, scales[12], high bits[32], nibbles[128].
// As Q4_K, with bit j of high[l] as bit 4 of value l of sub-block j.
const BLOCK_BYTES: u32 = 176u;

fn load_unit(row: u32, u: u32) {
    let o = row * P.row_bytes + (u / 8u) * BLOCK_BYTES;
    let j = u % 8u;
    let sm = k_scale_min(o + 4u, j);
    let scale = f16_at(o) * f32(sm.x);
    let min = f16_at(o + 2u) * f32(sm.y);
    let nibbles = o + 48u + 32u * (j / 2u);
    let shift = 4u * (j % 2u);
    for (var k = 0u; k < 8u; k++) {
        let word = word_at(nibbles + 4u * k);
        let high = word_at(o + 16u + 4u * k);
        for (var i = 0u; i < 4u; i++) {
            let value = ((word >> (8u * i + shift)) & 0xfu) | (((high >> (8u * i + j)) & 1u) << 4u);
            w[4u * k + i] = scale * f32(value) - min;
        }
    }
}
