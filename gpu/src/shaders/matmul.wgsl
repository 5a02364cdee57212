// Y = X Wᵀ for a weight matrix stored in one of the GGUF types: each
// workgroup makes one output row for up to TILE tokens, its threads taking
// turns over the row's 32-value units, each unit decoded once for all tokens.
// The format's `load_unit(row, u)` (included below) decodes unit `u` of
// `row` into `w`.

struct Params {
    rows: u32,       // rows of this weight buffer
    cols: u32,       // values per row (the activations' width)
    tokens: u32,     // activation rows
    row_bytes: u32,  // bytes per stored row (block formats)
    out_width: u32,  // values per output row (all of the matrix's rows)
    first_row: u32,  // this buffer's first row in the output
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<storage, read> W: array<u32>;
@group(0) @binding(1) var<storage, read> X: array<f32>;
@group(0) @binding(2) var<storage, read_write> Y: array<f32>;
@group(0) @binding(3) var<uniform> P: Params;

const WG: u32 = 64u;
const TILE: u32 = 4u;

var<private> w: array<f32, 32>;
var<private> q: array<u32, 32>;
var<workgroup> partial: array<f32, 256>;

//INCLUDE_FORMAT//

@compute @workgroup_size(64)
fn main(
    @builtin(workgroup_id) group: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let row = group.x + group.y * groups.x;
    let t0 = group.z * TILE;
    if (row >= P.rows) {
        return;
    }
    let nt = min(TILE, P.tokens - t0);
    let units = (P.cols + 31u) / 32u;
    var acc = array<f32, 4>(0.0, 0.0, 0.0, 0.0);
    for (var u = lid; u < units; u += WG) {
        load_unit(row, u);
        let base = u * 32u;
        let n = min(32u, P.cols - base);
        for (var t = 0u; t < nt; t++) {
            let x0 = (t0 + t) * P.cols + base;
            var sum = 0.0;
            for (var i = 0u; i < n; i++) {
                sum += w[i] * X[x0 + i];
            }
            acc[t] += sum;
        }
    }
    for (var t = 0u; t < TILE; t++) {
        partial[t * WG + lid] = acc[t];
    }
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride >>= 1u) {
        if (lid < stride) {
            for (var t = 0u; t < TILE; t++) {
                partial[t * WG + lid] += partial[t * WG + lid + stride];
            }
        }
        workgroupBarrier();
    }
    if (lid < nt) {
        Y[(t0 + lid) * P.out_width + P.first_row + row] = partial[lid * WG];
    }
}
