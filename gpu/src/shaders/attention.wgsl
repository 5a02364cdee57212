// Causal attention of new queries over an f16 key/value cache, one
// workgroup per (query, head); a query inside one of the spans also sees
// the keys after it up to the span's end (one picture's tokens in Gemma 3
// see each other both ways). Keys come in tiles of 64, one per thread;
// the softmax runs online (a running maximum and sum), and each thread keeps
// the output values d = lid, lid + 64, ... of the head.

struct Params {
    tokens: u32,      // new queries
    heads: u32,
    kv_heads: u32,
    head_dim: u32,    // at most 512
    capacity: u32,    // positions per head in the cache
    first: u32,       // the first query's position
    window: u32,      // 0, or the sliding window's length
    spans: u32,       // how many spans `span` holds (at most 8)
    scale: f32,
    softcap: f32,     // 0: none
    _pad1: u32,
    _pad2: u32,
    span: array<vec4<u32>, 4>,  // [start, end) of positions, two spans to a vector
}

@group(0) @binding(0) var<storage, read> Q: array<f32>;
@group(0) @binding(1) var<storage, read> K: array<u32>;
@group(0) @binding(2) var<storage, read> V: array<u32>;
@group(0) @binding(3) var<storage, read_write> O: array<f32>;
@group(0) @binding(4) var<uniform> P: Params;

const WG: u32 = 64u;
const NONE: f32 = -3.0e38;

var<workgroup> query: array<f32, 512>;
var<workgroup> probs: array<f32, 64>;
var<workgroup> partial: array<f32, 64>;

//INCLUDE_PRECISION//




fn reduce_max(lid: u32) -> f32 {
    for (var stride = 32u; stride > 0u; stride >>= 1u) {
        if (lid < stride) {
            partial[lid] = max(partial[lid], partial[lid + stride]);
        }
        workgroupBarrier();
    }
    let result = partial[0];
    workgroupBarrier();
    return result;
}

fn reduce_sum(lid: u32) -> f32 {
    for (var stride = 32u; stride > 0u; stride >>= 1u) {
        if (lid < stride) {
            partial[lid] += partial[lid + stride];
        }
        workgroupBarrier();
    }
    let result = partial[0];
    workgroupBarrier();
    return result;
}

// The last key position `pos` sees: its own, or its span's last.
fn last_seen(pos: u32) -> u32 {
    for (var i = 0u; i < P.spans; i++) {
        let pair = P.span[i / 2u];
        var range = pair.xy;
        if (i % 2u == 1u) {
            range = pair.zw;
        }
        if (pos >= range.x && pos < range.y) {
            return range.y - 1u;
        }
    }
    return pos;
}

@compute @workgroup_size(64)
fn main(
    @builtin(workgroup_id) group: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let id = group_index(group, groups);
    if (id >= P.tokens * P.heads) {
        return;
    }
    let token = id / P.heads;
    let head = id % P.heads;
    let kv_head = head / (P.heads / P.kv_heads);
    let pos = P.first + token;
    let last = last_seen(pos);
    var start = 0u;
    if (P.window > 0u && pos + 1u > P.window) {
        start = pos + 1u - P.window;
    }
    let q_base = (token * P.heads + head) * P.head_dim;
    for (var d = lid; d < P.head_dim; d += WG) {
        query[d] = Q[q_base + d];
    }
    workgroupBarrier();
    let head_base = kv_head * P.capacity;
    var running_max = NONE;
    var running_sum = 0.0;
    var acc = array<f32, 8>(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
    for (var tile = start; tile <= last; tile += WG) {
        let key = tile + lid;
        var score = NONE;
        if (key <= last) {
            let first_pair = ((head_base + key) * P.head_dim) / 2u;
            var dot = 0.0;
            for (var d = 0u; d < P.head_dim; d += 2u) {
                let pair = key_pair(first_pair + d / 2u);
                dot += query[d] * pair.x + query[d + 1u] * pair.y;
            }
            score = dot * P.scale;
            if (P.softcap > 0.0) {
                score = P.softcap * tanh(score / P.softcap);
            }
        }
        partial[lid] = score;
        workgroupBarrier();
        let new_max = max(running_max, reduce_max(lid));
        var p = 0.0;
        if (key <= last) {
            p = exp(score - new_max);
        }
        probs[lid] = p;
        partial[lid] = p;
        workgroupBarrier();
        let tile_sum = reduce_sum(lid);
        let correction = exp(running_max - new_max);
        running_sum = running_sum * correction + tile_sum;
        running_max = new_max;
        let keys = min(WG, last + 1u - tile);
        for (var k = 0u; k < 8u; k++) {
            let d = lid + k * WG;
            if (d < P.head_dim) {
                var a = acc[k] * correction;
                for (var j = 0u; j < keys; j++) {
                    a += probs[j] * value_at((head_base + tile + j) * P.head_dim + d);
                }
                acc[k] = a;
            }
        }
        workgroupBarrier();
    }
    for (var k = 0u; k < 8u; k++) {
        let d = lid + k * WG;
        if (d < P.head_dim) {
            O[q_base + d] = acc[k] / running_sum;
        }
    }
}
