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
#include <string.h>

#include "params/attention.h"
#include "params/binary.h"
#include "params/embedding.h"
#include "params/layernorm.h"
#include "params/rope.h"
#include "params/matmul.h"
#include "params/softmax.h"
#include "params/unary.h"

/* The activations of params/unary_ops.def, as the shaders compute them (shaders/common.glsl),
 * except that the exact GELU takes Phi from libm's erfc in double, where the shader needs its own
 * approximation. */

/* The bits of a float and back (memcpy: no aliasing rules broken; compiles to a register move). */
static inline uint32_t vkg_cpu_float_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}
static inline float vkg_cpu_bits_float(uint32_t u) {
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* Before a loop whose iterations are independent though its pointers may be equal (an output
 * written in place over an input, element j read before it is written): vectorize it without the
 * compiler's overlap check, which an in-place call fails, sending it down the scalar loop. */
#if defined(__clang__)
#define VKG_CPU_INDEPENDENT_LOOP _Pragma("clang loop vectorize(assume_safety)")
#else
#define VKG_CPU_INDEPENDENT_LOOP _Pragma("GCC ivdep")
#endif

/* e^x in float, within about 1 ulp (Cephes' expf): x = n ln 2 + r with |r| <= ln 2 / 2 (ln 2 in
 * two parts, so r is exact), e^r by its degree-7 minimax polynomial, times 2^n built in two halves
 * (so that n = 128 and the subnormal range need no branch).  +inf above 88.7228, 0 below -103.97,
 * NaN stays NaN.  Only +, *, compares and integer moves, without branches: the same bits whether
 * the compiler vectorizes a loop of it or not (every CPU kernel's exp, e.g. in matmul epilogues
 * and softmax). */
static inline float vkg_cpu_exp(float x) {
    const float hi = 88.72283935546875f, lo = -103.97208404541015625f, round = 12582912.0f; /* 1.5 * 2^23 */
    float xc = x > hi ? hi : x;
    xc = xc < lo ? lo : xc; /* a NaN passes both */
    const float shifted = xc * 1.44269504088896341f + round; /* n in the low mantissa bits */
    const float n = shifted - round;
    const int32_t ni = (int32_t)(vkg_cpu_float_bits(shifted) - vkg_cpu_float_bits(round));
    float r = xc - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float q = 1.9875691500e-4f;
    q = q * r + 1.3981999507e-3f;
    q = q * r + 8.3334519073e-3f;
    q = q * r + 4.1665795894e-2f;
    q = q * r + 1.6666665459e-1f;
    q = q * r + 5.0000001201e-1f;
    const float e = q * r * r + r + 1.0f;
    const int32_t h = ni / 2; /* ni in [-150, 128]: both halves are normal powers of 2 */
    const float s1 = vkg_cpu_bits_float((uint32_t)(ni - h + 127) << 23), s2 = vkg_cpu_bits_float((uint32_t)(h + 127) << 23);
    const float y = e * s1 * s2;
    return x > hi ? INFINITY : x < lo ? 0.0f : y;
}

/* 1 / (1 + exp(-z)): exp overflowing to +inf gives 0 and underflowing gives 1, never a NaN. */
static inline float vkg_cpu_sigmoid(float z) { return 1.0f / (1.0f + vkg_cpu_exp(-z)); }

/* x * gate for a gate in [0, 1]: a gate of 0 (x far negative) gives -0, where x = -inf would give
 * -inf * 0 = NaN. */
static inline float vkg_cpu_gated(float x, float gate) { return gate == 0.0f ? -0.0f : x * gate; }

/* Phi(x) = erfc(-x / sqrt 2) / 2, in double: erfc keeps its relative accuracy in the far negative
 * tail where 1 + erf(x / sqrt 2) cancels, and x / sqrt 2 rounded to float would cost 1e-5 there. */
static inline float vkg_cpu_normal_cdf(float x) { return (float)(0.5 * erfc(-0.70710678118654752 * (double)x)); }

/* The activation op (a VKG_UNARY_* activation code of params/unary_ops.def); any other op leaves
 * x as it is.  A switch over every code: a new activation without its case here does not compile. */
static inline float vkg_cpu_activation(uint32_t op, float x) {
    switch ((vkg_unary_op)op) {
    case VKG_UNARY_COPY:
    case VKG_UNARY_SCALE:
    case VKG_UNARY_CAUSAL: return x;
    case VKG_UNARY_RELU: return x > 0.0f ? x : 0.0f; /* NaN -> 0, as the shader */
    case VKG_UNARY_GELU_ERF: return vkg_cpu_gated(x, vkg_cpu_normal_cdf(x));
    /* 0.5 (1 + tanh(u)) = sigmoid(2 u): the tanh GELU without 1 + tanh(u) cancelling for u << 0 */
    case VKG_UNARY_GELU: return vkg_cpu_gated(x, vkg_cpu_sigmoid(1.5957691216057308f * (x + 0.044715f * x * x * x)));
    case VKG_UNARY_QUICK_GELU: return vkg_cpu_gated(x, vkg_cpu_sigmoid(1.702f * x));
    case VKG_UNARY_SILU: return vkg_cpu_gated(x, vkg_cpu_sigmoid(x));
    }
    return x;
}

/* 1 for the codes vkg_cpu_activation computes (COPY included: no activation). */
static inline int vkg_cpu_is_activation(uint32_t op) {
#define VKG_ACTIVATION(NAME, name, code, epilogue) if (op == VKG_UNARY_##NAME) return 1;
#include "params/unary_ops.def"
    return op == VKG_UNARY_COPY;
}

/* The runtime index a dyn_index field names: indices[dyn_index], or 0 for VKG_NO_INDEX. */
static inline int64_t vkg_cpu_dyn_index(const int32_t *indices, uint32_t dyn_index) {
    return dyn_index == VKG_NO_INDEX ? 0 : (int64_t)indices[dyn_index];
}

/* matmul: units are output tiles of VKG_CPU_MATMUL_TILE_M rows x VKG_CPU_MATMUL_TILE_N columns
 * of one batch entry.  Each C element is acc = sum over k = 0..K-1 in that order (kernel_matmul.c
 * states what each variant guarantees), then the epilogue (+bias, activation, +R); R may be C.
 * B's elements are floats, or 16-bit values when params flags say so (VKG_MATMUL_B_F16/BF16). */
/* 256 rows: one packed strip of B serves a GPT-2 forward's every row up to T = 256; 96 columns:
 * two strips of the AVX-512 variant's 48, six of AVX2's 16. */
#define VKG_CPU_MATMUL_TILE_M 256u
#define VKG_CPU_MATMUL_TILE_N 96u
size_t vkg_cpu_matmul_units(const vkg_matmul_params *p);
void vkg_cpu_matmul(const vkg_matmul_params *p, const float *A, const void *B, float *C,
                    const float *bias, const float *R, size_t begin, size_t end);

/* The variants of the matmul kernel, slowest first.  vkg_cpu_matmul runs the best one this CPU
 * runs; vkg_cpu_matmul_with runs the one asked for (the portable one where that one cannot run),
 * for tests and benchmarks. */
enum { VKG_CPU_MATMUL_PORTABLE, VKG_CPU_MATMUL_AVX2, VKG_CPU_MATMUL_AVX512, VKG_CPU_MATMUL_VARIANTS };
const char *vkg_cpu_matmul_variant_name(int variant);
int vkg_cpu_matmul_variant_runs(int variant); /* built for this architecture and this CPU has it */
int vkg_cpu_matmul_best_variant(void);
void vkg_cpu_matmul_with(int variant, const vkg_matmul_params *p, const float *A, const void *B, float *C,
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

/* rope: units are rows (b0, b1, t), params/rope.h. */
size_t vkg_cpu_rope_units(const vkg_rope_params *p);
void vkg_cpu_rope(const vkg_rope_params *p, const float *x, const float *table, float *out, const int32_t *indices,
                  const int32_t *positions, float *cache, size_t row_begin, size_t row_end);

/* embedding: units are ids (one output row each).  The table holds floats, or 16-bit elements
 * with VKG_EMBEDDING_TABLE_F16 / _BF16 (widened exactly). */
void vkg_cpu_embedding(const vkg_embedding_params *p, const int32_t *ids, const void *table,
                       float *out, size_t id_begin, size_t id_end);

/* attention: rows are query rows (b0, b1, t), units the groups of up to VKG_ATTN_GROUP of them
 * that read the same keys and values (a batch entry's rows, or with grouped-query attention the
 * rows of the query heads of one key/value head), so that a step's threads never split a group
 * and read its keys twice (cut by rows into the pool's pieces, a decode step of Qwen2.5-0.5B, 7
 * query heads a key/value head, would read each head's cache four times).  vkg_cpu_attention runs
 * a range of units with the fastest variant this CPU runs (the matmul's instruction sets:
 * VKG_CPU_MATMUL_* codes); vkg_cpu_attention_with runs a range of rows with the one asked for (the
 * portable one where that one cannot run), vkg_cpu_attention_reference with the plain one key at
 * a time loop; kernel_attention.c states what they share and how they differ. */
size_t vkg_cpu_attention_rows(const vkg_attention_params *p);
size_t vkg_cpu_attention_units(const vkg_attention_params *p);
double vkg_cpu_attention_unit_cost(const vkg_attention_params *p); /* element operations a unit */
void vkg_cpu_attention(const vkg_attention_params *p, const float *q, const float *k, const float *v, float *out,
                       const int32_t *indices, size_t unit_begin, size_t unit_end);
void vkg_cpu_attention_with(int variant, const vkg_attention_params *p, const float *q, const float *k,
                            const float *v, float *out, const int32_t *indices, size_t row_begin, size_t row_end);
void vkg_cpu_attention_reference(const vkg_attention_params *p, const float *q, const float *k, const float *v,
                                 float *out, const int32_t *indices, size_t row_begin, size_t row_end);
/* A step with fewer units than threads to share them (a decode step: a unit per key/value head)
 * can also split each unit's keys into chunks of VKG_ATTN_CHUNK (attention_variant.h), giving
 * the bits of vkg_cpu_attention, which folds the same chunks in the same order on one thread:
 * vkg_cpu_attention_chunks says how many chunks the longest row reaches (0: the rows are run
 * by the reference, unsplit), vkg_cpu_attention_state_floats how large `state` must be for
 * them; vkg_cpu_attention_chunk computes units (chunk, unit) of chunks x units, chunk-major,
 * each into its place of state; then vkg_cpu_attention_merge folds each unit's chunks in key
 * order into its rows' outputs (units as vkg_cpu_attention's). */
size_t vkg_cpu_attention_chunks(const vkg_attention_params *p, const int32_t *indices);
size_t vkg_cpu_attention_state_floats(const vkg_attention_params *p, size_t chunks);
void vkg_cpu_attention_chunk(const vkg_attention_params *p, const float *q, const float *k, const float *v,
                             float *out, const int32_t *indices, float *state, size_t unit_begin, size_t unit_end);
void vkg_cpu_attention_merge(const vkg_attention_params *p, const float *q, const float *k, const float *v,
                             float *out, const int32_t *indices, size_t chunks, float *state, size_t unit_begin,
                             size_t unit_end);

#endif
