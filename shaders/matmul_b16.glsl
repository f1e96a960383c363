// Binding 1 (matmul's B, or an embedding table) of 16-bit elements, widened to f32 as read
// (params/matmul.h: VKG_MATMUL_B_F16 / _BF16; params/embedding.h: VKG_EMBEDDING_TABLE_*).  Which
// of the two 16-bit formats is a specialization constant, so the choice costs nothing per
// element.  Widening is exact: every f16 and bf16 value is an f32.
//   B_STORAGE_16BIT: a storage buffer of uint16_t (needs storageBuffer16BitAccess); LOAD_B(i)
//                    gives element i.
//   B_TEXEL_16BIT:   a uniform texel buffer viewed as R16_UINT or R16G16B16A16_UINT; FETCH_B(i)
//                    gives element i of the former, FETCH_B4(i) texel i (elements 4i..4i+3) of
//                    the latter.
//   B_TEXEL_16BIT_X8: a uniform texel buffer viewed as R32G32B32A32_UINT, eight elements per
//                    texel; vkg_widen16x8(texelFetch(B, i), v) gives texel i as two vec4s.
#ifndef VKG_MATMUL_B16_GLSL
#define VKG_MATMUL_B16_GLSL

layout(constant_id = VKG_SPEC_WIDEN_BF16) const bool WIDEN_BF16 = false;

float vkg_widen16(uint h) { return WIDEN_BF16 ? uintBitsToFloat(h << 16) : unpackHalf2x16(h).x; }
vec4 vkg_widen16x4(uvec4 h) {
    return WIDEN_BF16 ? uintBitsToFloat(h << 16) : vec4(unpackHalf2x16(h.x | (h.y << 16)), unpackHalf2x16(h.z | (h.w << 16)));
}

#ifdef B_STORAGE_16BIT
#extension GL_EXT_shader_16bit_storage : require
layout(std430, binding = 1) readonly buffer B16 { uint16_t b16_data[]; };
#define LOAD_B(i) vkg_widen16(uint(b16_data[i]))
#endif

#ifdef B_TEXEL_16BIT
layout(binding = 1) uniform usamplerBuffer B;
#define FETCH_B(i) vkg_widen16(texelFetch(B, i).x)
#define FETCH_B4(i) vkg_widen16x4(texelFetch(B, i))
#endif

#ifdef B_TEXEL_16BIT_X8
layout(binding = 1) uniform usamplerBuffer B;
void vkg_widen16x8(uvec4 h, out vec4 v[2]) {
    if (WIDEN_BF16) {
        v[0] = uintBitsToFloat(uvec4(h.x << 16, h.x & 0xffff0000u, h.y << 16, h.y & 0xffff0000u));
        v[1] = uintBitsToFloat(uvec4(h.z << 16, h.z & 0xffff0000u, h.w << 16, h.w & 0xffff0000u));
    } else {
        v[0] = vec4(unpackHalf2x16(h.x), unpackHalf2x16(h.y));
        v[1] = vec4(unpackHalf2x16(h.z), unpackHalf2x16(h.w));
    }
}
#endif

#endif
