// Writing cached keys or values as f32, one to a word.

fn store_pair(pair: u32, values: vec2<f32>) {
    cache[2u * pair] = bitcast<u32>(values.x);
    cache[2u * pair + 1u] = bitcast<u32>(values.y);
}
