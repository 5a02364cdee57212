// Y[r] = X[r] / sqrt(mean(X[r]²) + eps) · weight, one workgroup per row.

struct Params {
    width: u32,
    rows: u32,
    eps: f32,
    _pad: u32,
}

@group(0) @binding(0) var<storage, read> X: array<f32>;
@group(0) @binding(1) var<storage, read> weight: array<f32>;
@group(0) @binding(2) var<storage, read_write> Y: array<f32>;
@group(0) @binding(3) var<uniform> P: Params;

var<workgroup> partial: array<f32, 64>;

@compute @workgroup_size(64)
fn main(
    @builtin(workgroup_id) group: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let row = group_index(group, groups);
    if (row >= P.rows) {
        return;
    }
    let base = row * P.width;
    var sum = 0.0;
    for (var i = lid; i < P.width; i += 64u) {
        sum += X[base + i] * X[base + i];
    }
    partial[lid] = sum;
    workgroupBarrier();
    for (var stride = 32u; stride > 0u; stride >>= 1u) {
        if (lid < stride) {
            partial[lid] += partial[lid + stride];
        }
        workgroupBarrier();
    }
    let scale = inverseSqrt(partial[0] / f32(P.width) + P.eps);
    for (var i = lid; i < P.width; i += 64u) {
        Y[base + i] = X[base + i] * scale * weight[i];
    }
}
