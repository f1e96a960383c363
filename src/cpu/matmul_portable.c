/* The portable matmul variant: plain C with GNU vectors of 4 floats (SSE on x86-64, NEON on
 * arm64, scalar code elsewhere), products and sums rounded separately (this file is built with
 * -ffp-contract=off), so every element is exactly the naive float sum in k order.  It runs on
 * any CPU and is the one the tests hold bit for bit to the naive reference. */
#include "cpu/matmul_variant.h"
#include "base/half.h"

#include "cpu/vec_portable.h"

enum { MR = 4, NV = 2 };
#define MM_NAME vkg_mm_portable

static inline float sfma(float a, float b, float c) { return a * b + c; }
static inline float s_f16(uint16_t h) { return vkg_f16_to_f32(h); }
static inline float s_bf16(uint16_t h) { return vkg_bf16_to_f32(h); }
static inline vf vload_f16(const uint16_t *p) { return (vf){s_f16(p[0]), s_f16(p[1]), s_f16(p[2]), s_f16(p[3])}; }
static inline vf vload_bf16(const uint16_t *p) {
    return (vf){s_bf16(p[0]), s_bf16(p[1]), s_bf16(p[2]), s_bf16(p[3])};
}
static inline mm_x4 x4_f16(const uint16_t *p) { return vload_f16(p); }
static inline mm_x4 x4_bf16(const uint16_t *p) { return vload_bf16(p); }

#include "cpu/matmul_body.h"
