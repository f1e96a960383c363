/* The vector of the AVX-512 CPU kernel variants (matmul_avx512.c, attention_avx512.c): 16 floats,
 * fused multiply-adds.  Included after <immintrin.h> in files built with AVX-512 F and FMA. */
#ifndef VKG_CPU_VEC_AVX512_H
#define VKG_CPU_VEC_AVX512_H

typedef __m512 vf;
enum { VL = 16 };

static inline vf vzero(void) { return _mm512_setzero_ps(); }
static inline vf vload(const float *p) { return _mm512_loadu_ps(p); }
static inline void vstore(float *p, vf x) { _mm512_storeu_ps(p, x); }
static inline vf vset1(float x) { return _mm512_set1_ps(x); }
static inline vf vmul(vf a, vf b) { return _mm512_mul_ps(a, b); }
static inline vf vmadd(vf a, vf b, vf c) { return _mm512_fmadd_ps(a, b, c); }
/* Keeps x in a register: the compiler may not move its computation across this point. */
static inline void vkeep(vf *x) { __asm__("" : "+v"(*x)); }

#endif
