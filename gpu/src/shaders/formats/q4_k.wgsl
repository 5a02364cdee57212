// 144 bytes per 256 values: d, dmin, scales[12], nibbles[128].
// Sub-block j: 6-bit scale and min from the packed scales; its nibbles are
// the low (j even) or high (j odd) halves of nibbles[32 (j / 2)..][..32];
// weight = d scale q - dmin min.
const BLOCK_BYTES: u32 = 144u;

fn load_unit(row: u32, u: u32) {
    let o = row * P.row_bytes + (u / 8u) * BLOCK_BYTES;
    let j = u % 8u;
    let sm = k_scale_min(o + 4u, j);
    let scale = f16_at(o) * f32(sm.x);
    let min = f16_at(o + 2u) * f32(sm.y);
    let nibbles = o + 16u + 32u * (j / 2u);
    let shift = 4u * (j % 2u);
    for (var k = 0u; k < 8u; k++) {
        let word = word_at(nibbles + 4u * k);
        for (var i = 0u; i < 4u; i++) {
            w[4u * k + i] = scale * f32((word >> (8u * i + shift)) & 0xfu) - min;
        }
    }
}
