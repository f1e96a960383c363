/* The AVX-512 matmul variant (x86-64 with AVX-512 F/BW/DQ/VL, FMA and F16C: Intel since
 * Skylake-SP, AMD Zen 4): vectors of 16 floats, 8 x 48 sums in registers, fused multiply-adds.
 * Only this file is built with those instructions (CMakeLists.txt); kernel_matmul.c calls it only
 * on a CPU that has them. */
#include "cpu/matmul_variant.h"

#if defined(VKG_MATMUL_X86)
#include <immintrin.h>

#include "cpu/matmul_x86.h"

#include "cpu/vec_avx512.h"

enum { MR = 8, NV = 3 };
#define MM_NAME vkg_mm_avx512

static inline vf widen_f16(__m256i h) { return _mm512_cvtph_ps(h); }
static inline vf widen_bf16(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }
static inline vf vload_f16(const uint16_t *p) { return widen_f16(_mm256_loadu_si256((const __m256i *)p)); }
static inline vf vload_bf16(const uint16_t *p) { return widen_bf16(_mm256_loadu_si256((const __m256i *)p)); }
/* x[q] lane j = element j * sn + q of b (T a VKG_MM_* type; 16-bit values widened), j < 16, q < 8:
 * rows j and j + 8 share a register through the transposition, one in each half (16-bit: each
 * 128-bit lane). */
static inline void b_cols8(int T, const void *b, size_t sn, vf x[8]) {
    if (T == VKG_MM_F32) {
        const float *f = b;
        __m512 r[8];
        for (int j = 0; j < 8; j++) /* row j in the low half, row j + 8 in the high one */
            r[j] = _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_loadu_ps(f + j * sn)),
                                      _mm256_loadu_ps(f + (j + 8) * sn), 1);
        MM_X86_INTERLEAVE8_F32(_mm512, r);
        /* rows 0-3, 4-7, 8-11, 12-15 of k q from the 128-bit lanes 0 and 2 of r[q] and r[q + 4],
         * of k q + 4 from their lanes 1 and 3 */
        const __m512i lo = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
        const __m512i hi = _mm512_setr_epi32(4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
        for (int q = 0; q < 4; q++) {
            x[q] = _mm512_permutex2var_ps(r[q], lo, r[q + 4]);
            x[q + 4] = _mm512_permutex2var_ps(r[q], hi, r[q + 4]);
        }
        return;
    }
    const uint16_t *h = b;
    __m256i r[8];
    for (int j = 0; j < 8; j++)
        r[j] = _mm256_loadu2_m128i((const __m128i *)(h + (j + 8) * sn), (const __m128i *)(h + j * sn));
    MM_X86_TRANSPOSE8_16(_mm256, r);
    for (int q = 0; q < 8; q++) x[q] = T == VKG_MM_F16 ? widen_f16(r[q]) : widen_bf16(r[q]);
}

#include "cpu/matmul_body.h"
#endif
