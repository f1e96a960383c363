// out[i, :] = table[ids[i], :] for the ids whose row lies in this step's row range; the step
// with zero_invalid set writes zeros for ids outside [0, vocab).  See params/embedding.h.
// Include after params/embedding.h, common.glsl and, for a 16-bit table, matmul_b16.glsl (which
// declares binding 1 and LOAD_B).
#ifndef VKG_EMBEDDING_GLSL
#define VKG_EMBEDDING_GLSL

layout(local_size_x_id = VKG_SPEC_WG_X) in;

layout(std430, binding = 0) readonly buffer Ids { int ids[]; };
#ifndef LOAD_B
layout(std430, binding = 1) readonly buffer Table { float table[]; };
#define LOAD_B(i) table[i]
#endif
layout(std430, binding = 2) writeonly buffer O { float o[]; };

void main() {
    uint stride = vkg_group_count() * gl_WorkGroupSize.x;
    for (uint e = vkg_group_index() * gl_WorkGroupSize.x + gl_LocalInvocationID.x; e < p.n_ids * p.dim; e += stride) {
        uint i = e / p.dim, j = e % p.dim;
        int id = ids[p.ids_offset + i];
        uint out_at = p.out_offset + i * p.dim + j;
        if (id >= 0 && uint(id) >= p.row_begin && uint(id) - p.row_begin < p.row_count)
            o[out_at] = LOAD_B(p.table_offset + (uint(id) - p.row_begin) * p.dim + j);
        else if (p.zero_invalid != 0u && (id < 0 || uint(id) >= p.vocab))
            o[out_at] = 0.0;
    }
}

#endif
