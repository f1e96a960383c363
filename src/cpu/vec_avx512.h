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
static inline vf vadd(vf a, vf b) { return _mm512_add_ps(a, b); }
/* The sum of x's lanes by halves: lane t + lane t + 8, then t + 4, t + 2, t + 1 (every variant's
 * order, for the same bits whatever the width). */
static inline float vsum_halves(vf x) {
    const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(x), _mm512_extractf32x8_ps(x, 1));
    __m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    q = _mm_add_ps(q, _mm_movehl_ps(q, q));
    return _mm_cvtss_f32(_mm_add_ss(q, _mm_movehdup_ps(q)));
}
/* Keeps x in a register: the compiler may not move its computation across this point. */
static inline void vkeep(vf *x) { __asm__("" : "+v"(*x)); }

#endif
