// 34 bytes: d, 32 signed bytes; weight = d q.
const BLOCK_BYTES: u32 = 34u;
fn load_unit(row: u32, u: u32) {
    let o = row * P.row_bytes + u * BLOCK_BYTES;
    let d = f16_at(o);
    for (var k = 0u; k < 8u; k++) {
        let word = word_at(o + 2u + 4u * k);
        for (var i = 0u; i < 4u; i++) {
            w[4u * k + i] = d * signed_byte(word, i);
        }
    }
}
