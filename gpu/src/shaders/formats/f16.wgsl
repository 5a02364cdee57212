const BLOCK_BYTES: u32 = 0u;
fn load_unit(row: u32, u: u32) {
    let first = row * P.cols + u * 32u;
    let n = min(32u, P.cols - u * 32u);
    for (var i = 0u; i < 32u; i++) {
        let e = first + i;
        let pair = unpack2x16float(W[e >> 1u]);
        w[i] = select(0.0, select(pair.x, pair.y, (e & 1u) == 1u), i < n);
    }
}
