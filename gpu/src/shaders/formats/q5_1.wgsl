// 24 bytes: d, m, 32 high bits, 16 bytes of nibbles; weight = d q + m.
const BLOCK_BYTES: u32 = 24u;
fn load_unit(row: u32, u: u32) {
    let o = row * P.row_bytes + u * BLOCK_BYTES;
    let d = f16_at(o);
    let m = f16_at(o + 2u);
    let high = word_at(o + 4u);
    split_nibbles(o + 8u);
    for (var i = 0u; i < 32u; i++) {
        w[i] = d * f32(q[i] | (((high >> i) & 1u) << 4u)) + m;
    }
}
