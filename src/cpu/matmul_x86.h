/* What the x86 matmul variants (matmul_avx2.c, matmul_avx512.c) share whatever their vector
 * width: fused scalar multiply-adds for the tails, and 16-bit to f32 widening of one element and
 * of four (F16C; bf16 by a shift).  Included after <immintrin.h>, in files built with FMA and
 * F16C. */
#ifndef VKG_CPU_MATMUL_X86_H
#define VKG_CPU_MATMUL_X86_H

#include <stdint.h>
#include <string.h>

static inline float sfma(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
static inline float s_f16(uint16_t h) { return _cvtsh_ss(h); }
static inline float s_bf16(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}
static inline mm_x4 x4_f16(const uint16_t *p) { return (mm_x4)_mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)p)); }
static inline mm_x4 x4_bf16(const uint16_t *p) {
    return (mm_x4)_mm_castsi128_ps(_mm_slli_epi32(_mm_cvtepu16_epi32(_mm_loadl_epi64((const __m128i *)p)), 16));
}

#endif
