/* The vector of the portable CPU kernel variants (matmul_portable.c, attention_portable.c): a GNU
 * vector of 4 floats (SSE on x86-64, NEON on arm64, scalar code elsewhere).  Products and sums
 * are rounded separately where the including file is built with -ffp-contract=off. */
#ifndef VKG_CPU_VEC_PORTABLE_H
#define VKG_CPU_VEC_PORTABLE_H

#include <string.h>

typedef float vf __attribute__((vector_size(16)));
enum { VL = 4 };

static inline vf vzero(void) { return (vf){0, 0, 0, 0}; }
static inline vf vload(const float *p) {
    vf x;
    memcpy(&x, p, sizeof x);
    return x;
}
static inline void vstore(float *p, vf x) { memcpy(p, &x, sizeof x); }
static inline vf vset1(float x) { return (vf){x, x, x, x}; }
static inline vf vmul(vf a, vf b) { return a * b; }
static inline vf vmadd(vf a, vf b, vf c) { return a * b + c; }
static inline vf vadd(vf a, vf b) { return a + b; }
/* The sum of x's lanes by halves: lane t + lane t + 2, then t + 1 (every variant's order, for the
 * same bits whatever the width). */
static inline float vsum_halves(vf x) { return (x[0] + x[2]) + (x[1] + x[3]); }
/* Keeps x in a register across a loop the compiler would otherwise reorder (none needed here). */
static inline void vkeep(vf *x) { (void)x; }

#endif
