// Workgroup-wide sum and max for row kernels (one workgroup per row).  Include after the
// layout(local_size_x_id = VKG_SPEC_WG_X) declaration.  A workgroup of one subgroup needs no shared memory
// and no barrier (the test is uniform, so the barriers of the other path stay legal); on llvmpipe
// barriers are costly, so its row workgroups are one subgroup wide.
//
// Each subgroup reduces with subgroup arithmetic, its first active invocation leaves the result in
// shared memory, and every invocation then combines the per-subgroup results in the same order,
// so all get the identical value.  Nothing assumes a subgroup size: a workgroup of one subgroup or
// of many (8, 32 or 64 wide, or a partial last subgroup) takes the same path.
#ifndef VKG_REDUCE_GLSL
#define VKG_REDUCE_GLSL

#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

shared float vkg_partial[gl_WorkGroupSize.x];   // at most one entry per subgroup is used

// Subgroups in this workgroup.  Counted from the sizes rather than read from gl_NumSubgroups:
// llvmpipe (Mesa 22) reports gl_NumSubgroups rounded down when the workgroup ends in a partial
// subgroup, which would drop that subgroup's share of every sum.
uint vkg_subgroups() {
    return max(gl_NumSubgroups, (gl_WorkGroupSize.x + gl_SubgroupSize - 1u) / gl_SubgroupSize);
}

float vkg_workgroup_sum(float v) {
    float s = subgroupAdd(v);
    if (gl_WorkGroupSize.x <= gl_SubgroupSize) return s;   // one subgroup: no barrier needed
    if (subgroupElect()) vkg_partial[gl_SubgroupID] = s;
    barrier();
    float total = 0.0;
    for (uint i = 0; i < vkg_subgroups(); i++) total += vkg_partial[i];
    barrier();   // vkg_partial may be reused by the next reduction
    return total;
}

float vkg_workgroup_max(float v) {
    float m = subgroupMax(v);
    if (gl_WorkGroupSize.x <= gl_SubgroupSize) return m;
    if (subgroupElect()) vkg_partial[gl_SubgroupID] = m;
    barrier();
    float total = vkg_partial[0];
    for (uint i = 1; i < vkg_subgroups(); i++) total = max(total, vkg_partial[i]);
    barrier();
    return total;
}

#endif
