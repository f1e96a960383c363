/* Naive references for the CPU kernels, written straight from the formulas in the headers under
 * shaders/params: one output element at a time, no tiling, no threads.  The matmul reference sums
 * in the same k order as the kernel (float, from 0), so the two agree bit for bit; the row
 * references for softmax and layernorm work in double. */
#ifndef VKG_TEST_CPU_REFERENCE_H
#define VKG_TEST_CPU_REFERENCE_H

#include <stddef.h>

#include "params/matmul.h"
#include "vkgraph.h"

/* n floats uniform in [-scale, scale) (malloc'd; NULL when out of memory). */
float *ref_random_floats(vkg_rng *rng, size_t n, float scale);

/* The parameters of a plain row-major A [M, K] @ B [K, N] -> C [M, N], one batch entry, no
 * epilogue (R, when a flag adds it, row-major [M, N] too). */
vkg_matmul_params ref_matmul_params(uint32_t M, uint32_t N, uint32_t K);

/* C as vkg_matmul_params defines it, epilogue included (R may be C). */
void ref_matmul(const vkg_matmul_params *p, const float *A, const float *B, float *C,
                const float *bias, const float *R);

/* y = softmax(x) over n entries, in double; entries with keep[j] == 0 get 0 (keep may be NULL). */
void ref_softmax_row(const float *x, const int *keep, size_t n, double *y);

/* y = (x - mean) / sqrt(var + eps) over n entries, in double (biased variance). */
void ref_layernorm_row(const float *x, size_t n, double eps, double *y);

/* gelu (tanh approximation) in double. */
double ref_gelu(double x);

#endif
