// 18 bytes: d, 16 bytes of nibbles; weight = d (q - 8).
const BLOCK_BYTES: u32 = 18u;
fn load_unit(row: u32, u: u32) {
    let o = row * P.row_bytes + u * BLOCK_BYTES;
    let d = f16_at(o);
    split_nibbles(o + 2u);
    for (var i = 0u; i < 32u; i++) {
        w[i] = d * (f32(q[i]) - 8.0);
    }
}
