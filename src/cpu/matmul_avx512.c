/* The AVX-512 matmul variant (x86-64 with AVX-512 F/BW/DQ/VL, FMA and F16C: Intel since
 * Skylake-SP, AMD Zen 4): vectors of 16 floats, 8 x 48 sums in registers, fused multiply-adds.
 * Only this file is built with those instructions (CMakeLists.txt); kernel_matmul.c calls it only
 * on a CPU that has them. */
#include "cpu/matmul_variant.h"

#if defined(VKG_MATMUL_X86)
#include <immintrin.h>

#include "cpu/matmul_x86.h"

#include "cpu/vec_avx512.h"

/* DOT_RB, DOT_SUMS: the dot-product path's register block, 4 rows x 4 columns of sums (16 of the
 * 32 registers; each of the 4 B vectors loaded serves 4 rows, each of the 4 A vectors 4 columns:
 * with 64 rows, the time of the packed tiles, where 8 rows x 3 columns, A read from memory for
 * every product, took 1.5 times as long) */
enum { MR = 8, NV = 3, DOT_RB = 4, DOT_SUMS = 16 };
#define MM_NAME vkg_mm_avx512

static inline vf widen_f16(__m256i h) { return _mm512_cvtph_ps(h); }
static inline vf widen_bf16(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }
static inline vf vload_f16(const uint16_t *p) { return widen_f16(_mm256_loadu_si256((const __m256i *)p)); }
static inline vf vload_bf16(const uint16_t *p) { return widen_bf16(_mm256_loadu_si256((const __m256i *)p)); }
#include "cpu/matmul_body.h"
#endif
