// 22 bytes: d, 32 high bits, 16 bytes of nibbles; weight = d (q - 16).
const BLOCK_BYTES: u32 = 22u;
fn load_unit(row: u32, u: u32) {
    let o = row * P.row_bytes + u * BLOCK_BYTES;
    let d = f16_at(o);
    let high = word_at(o + 2u);
    split_nibbles(o + 6u);
    for (var i = 0u; i < 32u; i++) {
        w[i] = d * (f32(q[i] | (((high >> i) & 1u) << 4u)) - 16.0);
    }
}
