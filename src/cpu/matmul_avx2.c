/* The AVX2 matmul variant (x86-64 with AVX2, FMA and F16C: every Intel core since Haswell, every
 * AMD Zen): vectors of 8 floats, 6 x 16 sums in registers, fused multiply-adds.  Only this file
 * is built with those instructions (CMakeLists.txt); kernel_matmul.c calls it only on a CPU that
 * has them. */
#include "cpu/matmul_variant.h"

#if defined(VKG_MATMUL_X86)
#include <immintrin.h>

#include "cpu/matmul_x86.h"

#include "cpu/vec_avx2.h"

/* DOT_RB, DOT_SUMS: the dot-product path's register blocks, up to 3 rows, 12 vectors of sums (of
 * the 16 registers; an element's 16 partial sums take 2): 1 row x 4 columns, 2 x 3, 3 x 2.  Each
 * 16 k of a 3 x 2 block loads 4 vectors of B and 6 of A for 12 multiply-adds, where 4 rows x 1
 * column loaded 10 for 8: GPT-2's 8-row decode step's matmuls (f16) 1.3 to 1.4 times as fast. */
enum { MR = 6, NV = 2, DOT_RB = 3, DOT_SUMS = 12 };
#define MM_NAME vkg_mm_avx2

static inline vf widen_f16(__m128i h) { return _mm256_cvtph_ps(h); }
static inline vf widen_bf16(__m128i h) { return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)); }
static inline vf vload_f16(const uint16_t *p) { return widen_f16(_mm_loadu_si128((const __m128i *)p)); }
static inline vf vload_bf16(const uint16_t *p) { return widen_bf16(_mm_loadu_si128((const __m128i *)p)); }
#include "cpu/matmul_body.h"
#endif
