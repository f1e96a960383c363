/* The CPU kernels: one plain C function per kernel family, taking exactly the parameter block the
 * shader takes (the headers in shaders/params, whose comments define the semantics) and the base pointers of
 * its bindings (binding base = region base + binding offset; offsets and strides inside the
 * params count 4-byte elements from there).
 *
 * Each kernel computes a contiguous range [begin, end) of independent work units (rows, ids,
 * element runs or output tiles) and writes only the outputs of those units, so a caller may
 * split [0, units) over threads in any way and get bit-identical results: no unit's value
 * depends on how the range was cut.  vkg_cpu_<family>_units() says how many units there are.
 *
 * Pointers to bindings a step does not use (flags off, no mask, no runtime index) may be NULL.
 * Inputs and outputs may alias where the plan runs an op in place: every kernel reads an
 * element's inputs before it writes that element. */
#ifndef VKG_CPU_KERNELS_H
#define VKG_CPU_KERNELS_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "params/binary.h"
#include "params/embedding.h"
#include "params/layernorm.h"
#include "params/matmul.h"
#include "params/softmax.h"
#include "params/unary.h"

/* gelu, tanh approximation (GPT-2's): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). */
static inline float vkg_cpu_gelu(float x) {
    const float sqrt_2_over_pi = 0.7978845608028654f;
    return 0.5f * x * (1.0f + tanhf(sqrt_2_over_pi * (x + 0.044715f * x * x * x)));
}

/* The runtime index a dyn_index field names: indices[dyn_index], or 0 for VKG_NO_INDEX. */
static inline int64_t vkg_cpu_dyn_index(const int32_t *indices, uint32_t dyn_index) {
    return dyn_index == VKG_NO_INDEX ? 0 : (int64_t)indices[dyn_index];
}

/* matmul: units are output tiles of VKG_CPU_MATMUL_TILE_M rows x VKG_CPU_MATMUL_TILE_N columns
 * of one batch entry.  Each C element is acc = sum over k = 0..K-1 in that order, then the
 * epilogue (+bias, gelu, +R); R may be C itself. */
#define VKG_CPU_MATMUL_TILE_M 32u
#define VKG_CPU_MATMUL_TILE_N 64u
size_t vkg_cpu_matmul_units(const vkg_matmul_params *p);
void vkg_cpu_matmul(const vkg_matmul_params *p, const float *A, const float *B, float *C,
                    const float *bias, const float *R, size_t begin, size_t end);

/* binary and unary: units are elements of the 4-d shape, in row-major order. */
size_t vkg_cpu_binary_units(const vkg_binary_params *p);
void vkg_cpu_binary(const vkg_binary_params *p, const float *a, const float *b, float *out,
                    size_t begin, size_t end);
size_t vkg_cpu_unary_units(const vkg_unary_params *p);
void vkg_cpu_unary(const vkg_unary_params *p, const float *in, float *out, const int32_t *indices,
                   size_t begin, size_t end);

/* softmax and layernorm: units are rows. */
void vkg_cpu_softmax(const vkg_softmax_params *p, const float *in, float *out, const float *mask,
                     const int32_t *indices, size_t row_begin, size_t row_end);
void vkg_cpu_layernorm(const vkg_layernorm_params *p, const float *in, float *out,
                       const float *gamma, const float *beta, size_t row_begin, size_t row_end);

/* embedding: units are ids (one output row each). */
void vkg_cpu_embedding(const vkg_embedding_params *p, const int32_t *ids, const float *table,
                       float *out, size_t id_begin, size_t id_end);

#endif
