// Rotary position embedding, one invocation per output pair (i, i + D/2) of a row: it reads both
// inputs before writing both outputs, so in place is safe.  See params/rope.h.  With ROPE_CACHE
// defined, the variant that also stores the keys and values into the cache (binding 5): a shader
// of its own, so that the plain one declares no write it never does.
// Include after params/rope.h and common.glsl.
#ifndef VKG_ROPE_GLSL
#define VKG_ROPE_GLSL

layout(local_size_x_id = VKG_SPEC_WG_X) in;

layout(std430, binding = 0) readonly buffer X { float x_in[]; };
layout(std430, binding = 1) readonly buffer C { float table[]; };
layout(std430, binding = 2) writeonly buffer O { float x_out[]; };
layout(std430, binding = 3) readonly buffer I { int indices[]; };
layout(std430, binding = 4) readonly buffer P { int positions[]; };
#ifdef ROPE_CACHE
layout(std430, binding = 5) writeonly buffer K { float cache[]; };
#endif

// Stores the pair (i, i + D/2) of row (b1, t) in out at o, and in the cache where the row goes there.
void store(uint o, uint b1, uint t, uint i, uint half_d, float lo, float hi) {
    x_out[o + i] = lo;
    x_out[o + i + half_d] = hi;
#ifdef ROPE_CACHE
    if (p.cache_heads == 0u || b1 < p.cache_first) return;
    uint j = b1 - p.cache_first;
    uint at = p.cache_offset + (j / p.cache_heads) * p.cache_stride_g + (j % p.cache_heads) * p.cache_stride_a +
              t * p.cache_stride_t;
    // uint arithmetic wraps, so a negative index times the stride still lands on the right row.
    if (p.cache_index != VKG_NO_INDEX)
        at += uint(indices[p.cache_index + (p.cache_rows != 0u ? t : 0u)]) * p.cache_dyn_stride;
    cache[at + i] = lo;
    cache[at + i + half_d] = hi;
#endif
}

void main() {
    uint half_d = p.D / 2u;
    uint total = p.batch0 * p.batch1 * p.T * half_d;
    uint stride = vkg_group_count() * gl_WorkGroupSize.x;
    int base = p.pos_offset + (p.dyn_index != VKG_NO_INDEX ? indices[p.dyn_index] : 0);
    for (uint e = vkg_group_index() * gl_WorkGroupSize.x + gl_LocalInvocationID.x; e < total; e += stride) {
        uint i = e % half_d, r = e / half_d;
        uint t = r % p.T, b = r / p.T, b1 = b % p.batch1, b0 = b / p.batch1;
        uint xr = p.x_offset + b0 * p.x_stride_b0 + b1 * p.x_stride_b1 + t * p.x_stride_t;
        uint o = p.out_offset + r * p.D;
        float a = x_in[xr + i * p.x_stride_d], bb = x_in[xr + (i + half_d) * p.x_stride_d];
        if (b1 >= p.rotated) {
            store(o, b1, t, i, half_d, a, bb);
            continue;
        }
        int pos = base + (p.row_positions != 0u ? positions[p.positions_offset + t] : int(t));
        if (pos < 0 || pos >= int(p.positions)) {   // no table row: NaN, never a stray read
            store(o, b1, t, i, half_d, vkg_nan(), vkg_nan());
            continue;
        }
        uint row = p.table_offset + uint(pos) * p.D;
        float c = table[row + i], s = table[row + half_d + i];
        store(o, b1, t, i, half_d, a * c - bb * s, bb * c + a * s);
    }
}

#endif
