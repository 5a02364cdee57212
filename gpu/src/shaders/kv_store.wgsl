// Writes new keys or values (tokens, kv_heads, head_dim; f32) into a cache
// of f16 or f32 values laid out (kv_heads, capacity, head_dim), at
// positions first.. . Two values per thread.

struct Params {
    tokens: u32,
    kv_heads: u32,
    head_dim: u32,
    capacity: u32,
    first: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<storage, read> X: array<f32>;
@group(0) @binding(1) var<storage, read_write> cache: array<u32>;
@group(0) @binding(2) var<uniform> P: Params;

//INCLUDE_PRECISION//

@compute @workgroup_size(64)
fn main(
    @builtin(workgroup_id) group: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let pairs = P.head_dim / 2u;
    let id = thread_index(group, groups, lid);
    if (id >= P.tokens * P.kv_heads * pairs) {
        return;
    }
    let d = 2u * (id % pairs);
    let head = (id / pairs) % P.kv_heads;
    let token = id / (pairs * P.kv_heads);
    let read_at = (token * P.kv_heads + head) * P.head_dim + d;
    let pair = ((head * P.capacity + P.first + token) * P.head_dim + d) / 2u;
    store_pair(pair, vec2<f32>(X[read_at], X[read_at + 1u]));
}
