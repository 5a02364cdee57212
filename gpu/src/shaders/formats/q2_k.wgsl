// 84 bytes per 256 values: scales[16] (scale low nibble, min high nibble,
// one per 16 values), qs[64] (2-bit values as Q3_K's), d, dmin;
// weight = d scale q - dmin min.
const BLOCK_BYTES: u32 = 84u;
fn load_unit(row: u32, u: u32) {
    let o = row * P.row_bytes + (u / 8u) * BLOCK_BYTES;
    let j = u % 8u;
    let d = f16_at(o + 80u);
    let dmin = f16_at(o + 82u);
    let qs = o + 16u + 32u * (j / 4u);
    let shift = 2u * (j % 4u);
    for (var k = 0u; k < 8u; k++) {
        let sm = byte_at(o + 2u * j + k / 4u);
        let scale = d * f32(sm & 0xfu);
        let min = dmin * f32(sm >> 4u);
        let word = word_at(qs + 4u * k);
        for (var i = 0u; i < 4u; i++) {
            w[4u * k + i] = scale * f32((word >> (8u * i + shift)) & 3u) - min;
        }
    }
}
