/* The vector of the AVX2 CPU kernel variants (matmul_avx2.c, attention_avx2.c): 8 floats, fused
 * multiply-adds.  Included after <immintrin.h> in files built with AVX2 and FMA. */
#ifndef VKG_CPU_VEC_AVX2_H
#define VKG_CPU_VEC_AVX2_H

typedef __m256 vf;
enum { VL = 8 };

static inline vf vzero(void) { return _mm256_setzero_ps(); }
static inline vf vload(const float *p) { return _mm256_loadu_ps(p); }
static inline void vstore(float *p, vf x) { _mm256_storeu_ps(p, x); }
static inline vf vset1(float x) { return _mm256_set1_ps(x); }
static inline vf vmul(vf a, vf b) { return _mm256_mul_ps(a, b); }
static inline vf vmadd(vf a, vf b, vf c) { return _mm256_fmadd_ps(a, b, c); }
static inline vf vadd(vf a, vf b) { return _mm256_add_ps(a, b); }
/* The sum of x's lanes by halves: lane t + lane t + 4, then t + 2, t + 1 (every variant's order,
 * for the same bits whatever the width). */
static inline float vsum_halves(vf x) {
    __m128 q = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    q = _mm_add_ps(q, _mm_movehl_ps(q, q));
    return _mm_cvtss_f32(_mm_add_ss(q, _mm_movehdup_ps(q)));
}
/* Keeps x in a register: the compiler may not move its computation across this point. */
static inline void vkeep(vf *x) { __asm__("" : "+v"(*x)); }

#endif
