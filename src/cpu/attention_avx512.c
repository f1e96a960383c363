/* The AVX-512 attention variant (x86-64 with AVX-512 F/BW/DQ/VL and FMA, as the matmul's AVX-512
 * variant needs): vectors of 16 floats, 16 vectors of scores in registers, fused multiply-adds.  Only this file is built with those instructions (CMakeLists.txt);
 * kernel_attention.c calls it only on a CPU that has them. */
#include "cpu/attention_variant.h"

#if defined(VKG_MATMUL_X86)
#include <immintrin.h>

typedef __m512 vf;
enum { VL = 16, SCORE_ACC = 16, CH = 4, PV_ROWS = 4 };
#define ATTN_NAME vkg_attn_avx512

static inline vf vzero(void) { return _mm512_setzero_ps(); }
static inline vf vload(const float *p) { return _mm512_loadu_ps(p); }
static inline void vstore(float *p, vf x) { _mm512_storeu_ps(p, x); }
static inline vf vset1(float x) { return _mm512_set1_ps(x); }
static inline vf vmul(vf a, vf b) { return _mm512_mul_ps(a, b); }
static inline vf vmadd(vf a, vf b, vf c) { return _mm512_fmadd_ps(a, b, c); }
static inline void vkeep(vf *x) { __asm__("" : "+v"(*x)); }

#include "cpu/attention_body.h"
#endif
