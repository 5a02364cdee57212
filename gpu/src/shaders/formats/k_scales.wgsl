// Q4_K's and Q5_K's 12 bytes of packed 6-bit scales and mins.

// The 6-bit scale and min of sub-block j from the 12 bytes at `s`.
fn k_scale_min(s: u32, j: u32) -> vec2<u32> {
    if (j < 4u) {
        return vec2<u32>(byte_at(s + j) & 63u, byte_at(s + j + 4u) & 63u);
    }
    let packed = byte_at(s + j + 4u);
    let scale = (packed & 0xfu) | ((byte_at(s + j - 4u) >> 6u) << 4u);
    let min = (packed >> 4u) | ((byte_at(s + j) >> 6u) << 4u);
    return vec2<u32>(scale, min);
}
