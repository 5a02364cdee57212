// 210 bytes per 256 values: ql[128] (low nibbles), qh[64] (2 high bits each),
// scales[16] (signed, one per 16 values), d. Sub-block j = 4 half + s takes
// the low (s < 2) or high nibble of ql[64 half + 32 (s % 2) + l] and bits 2s,
// 2s + 1 of qh[32 half + l]; weight = d scale (q - 32).
const BLOCK_BYTES: u32 = 210u;
fn load_unit(row: u32, u: u32) {
    let o = row * P.row_bytes + (u / 8u) * BLOCK_BYTES;
    let j = u % 8u;
    let half = j / 4u;
    let s = j % 4u;
    let d = f16_at(o + 208u);
    let scales = word_at(o + 192u + 2u * j);
    let low_at = o + 64u * half + 32u * (s % 2u);
    let high_at = o + 128u + 32u * half;
    for (var k = 0u; k < 8u; k++) {
        let low = word_at(low_at + 4u * k);
        let high = word_at(high_at + 4u * k);
        let scale = d * signed_byte(scales, k / 4u);
        for (var i = 0u; i < 4u; i++) {
            let value = ((low >> (8u * i + 4u * (s / 2u))) & 0xfu) | (((high >> (8u * i + 2u * s)) & 3u) << 4u);
            w[4u * k + i] = scale * f32(i32(value) - 32);
        }
    }
}
