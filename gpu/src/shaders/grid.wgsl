// The workgroup's index in a 2-D grid that carries more than 65 535 groups.
fn group_index(group: vec3<u32>, groups: vec3<u32>) -> u32 {
    return group.x + group.y * groups.x;
}

// A thread's index over a 2-D grid of 64-thread groups.
fn thread_index(group: vec3<u32>, groups: vec3<u32>, lid: u32) -> u32 {
    return group_index(group, groups) * 64u + lid;
}
