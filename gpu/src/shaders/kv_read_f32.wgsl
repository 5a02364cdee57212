// Reading cached keys and values as f32, one to a word.

fn key_pair(pair: u32) -> vec2<f32> {
    return vec2<f32>(bitcast<f32>(K[2u * pair]), bitcast<f32>(K[2u * pair + 1u]));
}

fn value_at(index: u32) -> f32 {
    return bitcast<f32>(V[index]);
}
