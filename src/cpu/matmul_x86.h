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

/* r[j] holds elements k .. k + 7 of row j (j < 8) in each 128-bit lane of an integer vector of
 * 16-bit values; afterwards r[q] holds element k + q of rows 0 .. 7, row j at position j, in each
 * lane.  P is the intrinsics' prefix for r's width (_mm or _mm256).  Pure data movement: three
 * rounds of interleaving 16-, 32- and 64-bit pieces of pairs. */
#define MM_X86_TRANSPOSE8_16(P, r) \
    do { \
        __typeof__(r[0]) t_[8], u_[8]; \
        for (int j_ = 0; j_ < 8; j_ += 2) { \
            t_[j_] = P##_unpacklo_epi16(r[j_], r[j_ + 1]);     /* rows j_, j_ + 1: k 0-3 */ \
            t_[j_ + 1] = P##_unpackhi_epi16(r[j_], r[j_ + 1]); /* k 4-7 */ \
        } \
        for (int h_ = 0; h_ < 8; h_ += 4) \
            for (int j_ = 0; j_ < 2; j_++) { /* rows h_ .. h_ + 3: k 4 j_ + {0, 1}, then + {2, 3} */ \
                u_[h_ + 2 * j_] = P##_unpacklo_epi32(t_[h_ + j_], t_[h_ + j_ + 2]); \
                u_[h_ + 2 * j_ + 1] = P##_unpackhi_epi32(t_[h_ + j_], t_[h_ + j_ + 2]); \
            } \
        for (int q_ = 0; q_ < 4; q_++) { /* rows 0 .. 7: k 2 q_, 2 q_ + 1 */ \
            r[2 * q_] = P##_unpacklo_epi64(u_[q_], u_[q_ + 4]); \
            r[2 * q_ + 1] = P##_unpackhi_epi64(u_[q_], u_[q_ + 4]); \
        } \
    } while (0)

/* r[j] holds elements k .. k + 7 of row j (j < 8) in each 256-bit half of a float vector; after
 * two rounds of interleaving, r[h + q] (h = 0, 4; q < 4) holds element k + q of rows h .. h + 3
 * in the low 128 bits of each half and element k + q + 4 in the high 128 bits.  P is the prefix
 * for r's width (_mm256 or _mm512); each variant joins the 128-bit pieces its own way. */
#define MM_X86_INTERLEAVE8_F32(P, r) \
    do { \
        __typeof__(r[0]) t_[8]; \
        for (int j_ = 0; j_ < 8; j_ += 2) { /* rows j_, j_ + 1: k 0, 1 | 4, 5, then k 2, 3 | 6, 7 */ \
            t_[j_] = P##_unpacklo_ps(r[j_], r[j_ + 1]); \
            t_[j_ + 1] = P##_unpackhi_ps(r[j_], r[j_ + 1]); \
        } \
        for (int h_ = 0; h_ < 8; h_ += 4) \
            for (int j_ = 0; j_ < 2; j_++) { /* rows h_ .. h_ + 3: k 0 | 4, 1 | 5, 2 | 6, 3 | 7 */ \
                r[h_ + 2 * j_] = P##_shuffle_ps(t_[h_ + j_], t_[h_ + j_ + 2], 0x44); \
                r[h_ + 2 * j_ + 1] = P##_shuffle_ps(t_[h_ + j_], t_[h_ + j_ + 2], 0xee); \
            } \
    } while (0)

#endif
