const BLOCK_BYTES: u32 = 0u;
fn load_unit(row: u32, u: u32) {
    let first = row * P.cols + u * 32u;
    let n = min(32u, P.cols - u * 32u);
    for (var i = 0u; i < 32u; i++) {
        w[i] = select(0.0, bitcast<f32>(W[first + i]), i < n);
    }
}
