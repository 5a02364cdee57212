// 20 bytes: d, m, 16 bytes of nibbles; weight = d q + m.
const BLOCK_BYTES: u32 = 20u;
fn load_unit(row: u32, u: u32) {
    let o = row * P.row_bytes + u * BLOCK_BYTES;
    let d = f16_at(o);
    let m = f16_at(o + 2u);
    split_nibbles(o + 4u);
    for (var i = 0u; i < 32u; i++) {
        w[i] = d * f32(q[i]) + m;
    }
}
