// Reading cached keys and values as f16, two to a word.

fn key_pair(pair: u32) -> vec2<f32> {
    return unpack2x16float(K[pair]);
}

fn value_at(index: u32) -> f32 {
    let pair = unpack2x16float(V[index >> 1u]);
    return select(pair.x, pair.y, (index & 1u) == 1u);
}
