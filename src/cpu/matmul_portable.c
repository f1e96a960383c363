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
/* x[q] lane j = element j * sn + q of b (T a VKG_MM_* type; 16-bit values widened), j < 4, q < 8. */
static inline void b_cols8(int T, const void *b, size_t sn, vf x[8]) {
    for (int q = 0; q < 8; q++) {
        float col[VL];
        for (int j = 0; j < VL; j++) {
            const size_t i = j * sn + q;
            col[j] = T == VKG_MM_F32 ? ((const float *)b)[i]
                     : T == VKG_MM_F16 ? s_f16(((const uint16_t *)b)[i]) : s_bf16(((const uint16_t *)b)[i]);
        }
        x[q] = vload(col);
    }
}
static inline mm_x4 x4_f16(const uint16_t *p) { return vload_f16(p); }
static inline mm_x4 x4_bf16(const uint16_t *p) { return vload_bf16(p); }

#include "cpu/matmul_body.h"
