// 110 bytes per 256 values: hmask[32], qs[64], scales[12], d. Value l of
// sub-block j: 2 low bits from qs (bits 2 (j % 4) of byte 32 (j / 4) + l),
// bit 2 = bit j of hmask[l]; 6-bit signed scales per 16 values;
// weight = d scale (q - 4).
const BLOCK_BYTES: u32 = 110u;

// Scale i (0..16) of the 12 packed bytes at `s`, signed.
fn q3_scale(s: u32, i: u32) -> f32 {
    let low = (byte_at(s + i % 8u) >> (4u * (i / 8u))) & 0xfu;
    let high = (byte_at(s + 8u + i % 4u) >> (2u * (i / 4u))) & 3u;
    return f32(i32(low | (high << 4u)) - 32);
}

fn load_unit(row: u32, u: u32) {
    let o = row * P.row_bytes + (u / 8u) * BLOCK_BYTES;
    let j = u % 8u;
    let d = f16_at(o + 108u);
    let scales = vec2<f32>(d * q3_scale(o + 96u, 2u * j), d * q3_scale(o + 96u, 2u * j + 1u));
    let qs = o + 32u + 32u * (j / 4u);
    let shift = 2u * (j % 4u);
    for (var k = 0u; k < 8u; k++) {
        let low = word_at(qs + 4u * k);
        let mask = word_at(o + 4u * k);
        for (var i = 0u; i < 4u; i++) {
            let value = ((low >> (8u * i + shift)) & 3u) | (((mask >> (8u * i + j)) & 1u) << 2u);
            w[4u * k + i] = scales[k / 4u] * f32(i32(value) - 4);
        }
    }
}
