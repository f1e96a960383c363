/* The AVX2 attention variant (x86-64 with AVX2 and FMA, as the matmul's AVX2 variant needs):
 * vectors of 8 floats, 8 vectors of scores in registers, fused multiply-adds.  Only this
 * file is built with those instructions (CMakeLists.txt); kernel_attention.c calls it only on a
 * CPU that has them. */
#include "cpu/attention_variant.h"

#if defined(VKG_MATMUL_X86)
#include <immintrin.h>

typedef __m256 vf;
enum { VL = 8, SCORE_ACC = 8, CH = 4, PV_ROWS = 2 };
#define ATTN_NAME vkg_attn_avx2

static inline vf vzero(void) { return _mm256_setzero_ps(); }
static inline vf vload(const float *p) { return _mm256_loadu_ps(p); }
static inline void vstore(float *p, vf x) { _mm256_storeu_ps(p, x); }
static inline vf vset1(float x) { return _mm256_set1_ps(x); }
static inline vf vmul(vf a, vf b) { return _mm256_mul_ps(a, b); }
static inline vf vmadd(vf a, vf b, vf c) { return _mm256_fmadd_ps(a, b, c); }
static inline void vkeep(vf *x) { __asm__("" : "+v"(*x)); }

#include "cpu/attention_body.h"
#endif
