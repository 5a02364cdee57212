// Rotary position embedding in place over X (tokens, heads, head_dim): the
// first `rotary` values of each head turn by the angles of the token's row
// of the table (cos, sin pairs, computed on the CPU for every family's
// scaling). `neox`: value i pairs with i + rotary / 2; else 2i with 2i + 1.

struct Params {
    tokens: u32,
    heads: u32,
    head_dim: u32,
    rotary: u32,
    neox: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<storage, read_write> X: array<f32>;
@group(0) @binding(1) var<storage, read> table: array<f32>;
@group(0) @binding(2) var<uniform> P: Params;

@compute @workgroup_size(64)
fn main(
    @builtin(workgroup_id) group: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let half = P.rotary / 2u;
    let id = thread_index(group, groups, lid);
    if (id >= P.tokens * P.heads * half) {
        return;
    }
    let i = id % half;
    let head = id / half;
    let token = head / P.heads;
    let base = head * P.head_dim;
    let angle = (token * half + i) * 2u;
    let c = table[angle];
    let s = table[angle + 1u];
    var a = base + 2u * i;
    var b = a + 1u;
    if (P.neox == 1u) {
        a = base + i;
        b = a + half;
    }
    let x0 = X[a];
    let x1 = X[b];
    X[a] = x0 * c - x1 * s;
    X[b] = x1 * c + x0 * s;
}
