const BLOCK_BYTES: u32 = 0u;
fn load_unit(row: u32, u: u32) {
    let first = row * P.cols + u * 32u;
    let n = min(32u, P.cols - u * 32u);
    for (var i = 0u; i < 32u; i++) {
        let e = first + i;
        let bits = (W[e >> 1u] >> ((e & 1u) << 4u)) << 16u;
        w[i] = select(0.0, bitcast<f32>(bits), i < n);
    }
}
