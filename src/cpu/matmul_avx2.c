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

static inline vf vload_f16(const uint16_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }
static inline vf vload_bf16(const uint16_t *p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
}

#include "cpu/matmul_body.h"
#endif
