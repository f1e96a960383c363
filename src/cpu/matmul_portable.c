/* The portable matmul variant: plain C with GNU vectors of 4 floats (SSE on x86-64, NEON on
 * arm64, scalar code elsewhere), products and sums rounded separately (this file is built with
 * -ffp-contract=off), so every element is exactly the naive float sum in k order.  It runs on
 * any CPU and is the one the tests hold bit for bit to the naive reference. */
#include "cpu/matmul_variant.h"
#include "base/half.h"

#include "cpu/vec_portable.h"

/* DOT_RB, DOT_SUMS: the dot-product path's register blocks, up to 2 rows, 8 vectors of sums (an
 * element's 16 partial sums take 4): 1 row x 2 columns or 2 rows x 1 */
enum { MR = 4, NV = 2, DOT_RB = 2, DOT_SUMS = 8 };
#define MM_NAME vkg_mm_portable

static inline float sfma(float a, float b, float c) { return a * b + c; }
static inline float s_f16(uint16_t h) { return vkg_f16_to_f32(h); }
static inline float s_bf16(uint16_t h) { return vkg_bf16_to_f32(h); }
/* Four 16-bit values widened by vkg_f16_to_f32's / vkg_bf16_to_f32's operations on every lane at
 * once (vector integer operations, where converting one element at a time cost more than the
 * dot-product path's multiply-adds). */
typedef uint32_t mm_u4 __attribute__((vector_size(16)));
static inline vf bits_to_vf(mm_u4 u) {
    vf v;
    memcpy(&v, &u, sizeof v);
    return v;
}
static inline vf vload_f16(const uint16_t *p) {
    const mm_u4 h = {p[0], p[1], p[2], p[3]};
    const vf v = bits_to_vf((h & 0x7FFFu) << 13) * 0x1p112f; /* exact: the exponent rebiased */
    mm_u4 u;
    memcpy(&u, &v, sizeof u);
    u |= (mm_u4)(v >= 65536.0f) & 0x7F800000u; /* inf and nan */
    return bits_to_vf(u | (h & 0x8000u) << 16);
}
static inline vf vload_bf16(const uint16_t *p) {
    const mm_u4 h = {p[0], p[1], p[2], p[3]};
    return bits_to_vf(h << 16);
}
static inline mm_x4 x4_f16(const uint16_t *p) { return vload_f16(p); }
static inline mm_x4 x4_bf16(const uint16_t *p) { return vload_bf16(p); }

#include "cpu/matmul_body.h"
