// Writing cached keys or values as f16, two to a word.

fn store_pair(pair: u32, values: vec2<f32>) {
    cache[pair] = pack2x16float(values);
}
