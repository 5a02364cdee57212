// The gated MLP's activation: Y = act(gate) · up, act = SiLU (kind 0) or
// GELU with the tanh approximation (kind 1).

struct Params {
    len: u32,
    kind: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<storage, read> gate: array<f32>;
@group(0) @binding(1) var<storage, read> up: array<f32>;
@group(0) @binding(2) var<storage, read_write> Y: array<f32>;
@group(0) @binding(3) var<uniform> P: Params;

@compute @workgroup_size(64)
fn main(
    @builtin(workgroup_id) group: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let i = thread_index(group, groups, lid);
    if (i >= P.len) {
        return;
    }
    let g = gate[i];
    var activated: f32;
    if (P.kind == 0u) {
        activated = g / (1.0 + exp(-g));
    } else {
        let inner = 0.7978845608028654 * (g + 0.044715 * g * g * g);
        activated = 0.5 * g * (1.0 + tanh(inner));
    }
    Y[i] = activated * up[i];
}
