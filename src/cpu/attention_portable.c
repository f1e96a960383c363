/* The portable attention variant: plain C with GNU vectors of 4 floats (SSE on x86-64, NEON on
 * arm64, scalar code elsewhere), products and sums rounded separately (this file is built with
 * -ffp-contract=off): each score is exactly the reference's float dot product.  It runs on any
 * CPU. */
#include "cpu/attention_variant.h"

typedef float vf __attribute__((vector_size(16)));
enum { VL = 4, SCORE_ACC = 8, CH = 4, PV_ROWS = 2 };
#define ATTN_NAME vkg_attn_portable

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
static inline void vkeep(vf *x) { (void)x; }

#include "cpu/attention_body.h"
