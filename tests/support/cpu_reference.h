/* Naive references for the CPU kernels, written straight from the formulas in the headers under
 * shaders/params: one output element at a time, no tiling, no threads.  The matmul reference sums
 * in the same k order as the kernel (float, from 0) and applies the kernels' own activation
 * function (checked on its own against ref_activation), so the two agree bit for bit; the row
 * references for softmax and layernorm work in double.  Also the few CMocka helpers that the
 * CPU kernel tests share (checked random inputs, a tolerance assertion, the matmul kernel run
 * over all its units). */
#ifndef VKG_TEST_CPU_REFERENCE_H
#define VKG_TEST_CPU_REFERENCE_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <math.h>

#include "cpu/threadpool.h"
#include "params/matmul.h"
#include "vkgraph.h"

/* n floats uniform in [-scale, scale) (malloc'd; NULL when out of memory). */
float *ref_random_floats(vkg_rng *rng, size_t n, float scale);

/* ref_random_floats that fails the running test instead of returning NULL. */
float *ref_checked_floats(vkg_rng *rng, size_t n, float scale);

/* Fails the running test (at the caller's line) unless |got - want| <= tol, compared in double. */
#define ref_assert_close(got, want, tol) assert_true(fabs((double)(got) - (double)(want)) <= (tol))

/* The kernel under test, variant `variant` of the matmul (VKG_CPU_MATMUL_*), over all its units,
 * spread over pool (NULL: one call on this thread). */
void ref_run_matmul_kernel(vkg_threadpool *pool, int variant, const vkg_matmul_params *p, const float *A,
                           const void *B, float *C, const float *bias, const float *R);

/* The parameters of a plain row-major A [M, K] @ B [K, N] -> C [M, N], one batch entry, no
 * epilogue (R, when a flag adds it, row-major [M, N] too). */
vkg_matmul_params ref_matmul_params(uint32_t M, uint32_t N, uint32_t K);

/* Element i of B as a float (widened when params flags say B is f16 or bf16). */
float ref_matmul_b(const vkg_matmul_params *p, const void *B, size_t i);

/* C as vkg_matmul_params defines it, epilogue included (R may be C), summed in float in k order
 * from 0: sum = sum + a * b with fused == 0 (what the portable variant promises), sum = fmaf(a,
 * b, sum) with fused == 1 (the fused variants).  ref_matmul_fused says which a variant is.  Where
 * the kernel takes its dot-product path (vkg_mm_dot_path: B's k contiguous, a few rows), the sum
 * is split as that path splits it: product k into partial sum k % VKG_MM_DOT_LANES, each in k
 * order, then the partial sums added by halves (kernel_matmul.c). */
void ref_matmul(const vkg_matmul_params *p, int fused, const float *A, const void *B, float *C,
                const float *bias, const float *R);
int ref_matmul_fused(int variant);

/* Fails the running test unless every element of C in rows m % row_step == 0 (and the last row) is
 * within float rounding of the product computed in double: |C - exact| <= (K + 4) * 2^-23 *
 * (sum_k |a b| + |bias|) * 1.2 (the activations' slope is at most 1.13) + 2^-23 * |R|, the
 * epilogue in double.  R must not be C. */
void ref_matmul_check_f64(const vkg_matmul_params *p, const float *A, const void *B, const float *C,
                          const float *bias, const float *R, size_t row_step);

/* y = softmax(x) over n entries, in double; entries with keep[j] == 0 get 0 (keep may be NULL). */
void ref_softmax_row(const float *x, const int *keep, size_t n, double *y);

/* y = (x - mean) / sqrt(var + eps) over n entries, in double (biased variance). */
void ref_layernorm_row(const float *x, size_t n, double eps, double *y);

/* The activation op (a VKG_UNARY_* activation code, params/activation.h) in double, straight from
 * its formula, limits at +-inf included. */
double ref_activation(uint32_t op, double x);

#endif
