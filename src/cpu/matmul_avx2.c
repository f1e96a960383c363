/* The AVX2 matmul variant (x86-64 with AVX2, FMA and F16C: every Intel core since Haswell, every
 * AMD Zen): vectors of 8 floats, 6 x 16 sums in registers, fused multiply-adds.  Only this file
 * is built with those instructions (CMakeLists.txt); kernel_matmul.c calls it only on a CPU that
 * has them. */
#include "cpu/matmul_variant.h"

#if defined(VKG_MATMUL_X86)
#include <immintrin.h>

#include "cpu/matmul_x86.h"

#include "cpu/vec_avx2.h"

enum { MR = 6, NV = 2 };
#define MM_NAME vkg_mm_avx2

static inline vf widen_f16(__m128i h) { return _mm256_cvtph_ps(h); }
static inline vf widen_bf16(__m128i h) { return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)); }
static inline vf vload_f16(const uint16_t *p) { return widen_f16(_mm_loadu_si128((const __m128i *)p)); }
static inline vf vload_bf16(const uint16_t *p) { return widen_bf16(_mm_loadu_si128((const __m128i *)p)); }
/* x[q] lane j = element j * sn + q of b (T a VKG_MM_* type; 16-bit values widened), j < 8, q < 8. */
static inline void b_cols8(int T, const void *b, size_t sn, vf x[8]) {
    if (T == VKG_MM_F32) {
        const float *f = b;
        __m256 r[8];
        for (int j = 0; j < 8; j++) r[j] = _mm256_loadu_ps(f + j * sn);
        MM_X86_INTERLEAVE8_F32(_mm256, r);
        for (int q = 0; q < 4; q++) { /* rows 0 .. 7: k q, then k q + 4 */
            x[q] = _mm256_permute2f128_ps(r[q], r[q + 4], 0x20);
            x[q + 4] = _mm256_permute2f128_ps(r[q], r[q + 4], 0x31);
        }
        return;
    }
    const uint16_t *h = b;
    __m128i r[8];
    for (int j = 0; j < 8; j++) r[j] = _mm_loadu_si128((const __m128i *)(h + j * sn));
    MM_X86_TRANSPOSE8_16(_mm, r);
    for (int q = 0; q < 8; q++) x[q] = T == VKG_MM_F16 ? widen_f16(r[q]) : widen_bf16(r[q]);
}

#include "cpu/matmul_body.h"
#endif
