#include "support/cpu_reference.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/kernels.h"

float *ref_random_floats(vkg_rng *rng, size_t n, float scale) {
    float *x = malloc((n ? n : 1) * sizeof *x);
    if (!x) return NULL;
    for (size_t i = 0; i < n; i++) x[i] = scale * (2.0f * vkg_rng_uniform(rng) - 1.0f);
    return x;
}

float *ref_checked_floats(vkg_rng *rng, size_t n, float scale) {
    float *x = ref_random_floats(rng, n, scale);
    assert_non_null(x);
    return x;
}

typedef struct matmul_job {
    const vkg_matmul_params *p;
    const float *A, *B, *bias, *R;
    float *C;
} matmul_job;

static void matmul_range(void *ctx, size_t begin, size_t end) {
    const matmul_job *j = ctx;
    vkg_cpu_matmul(j->p, j->A, j->B, j->C, j->bias, j->R, begin, end);
}

void ref_run_matmul_kernel(vkg_threadpool *pool, const vkg_matmul_params *p, const float *A,
                           const float *B, float *C, const float *bias, const float *R) {
    matmul_job job = {p, A, B, bias, R, C};
    if (pool)
        vkg_threadpool_for(pool, vkg_cpu_matmul_units(p), matmul_range, &job);
    else
        vkg_cpu_matmul(p, A, B, C, bias, R, 0, vkg_cpu_matmul_units(p));
}

vkg_matmul_params ref_matmul_params(uint32_t M, uint32_t N, uint32_t K) {
    vkg_matmul_params p;
    memset(&p, 0, sizeof p);
    p.M = M, p.N = N, p.K = K, p.batch0 = 1, p.batch1 = 1;
    p.a_stride_m = K, p.a_stride_k = 1;
    p.b_stride_k = N, p.b_stride_n = 1;
    p.c_stride_m = N, p.r_stride_m = N;
    return p;
}

static double sigmoid(double z) { return 1.0 / (1.0 + exp(-z)); }

double ref_activation(uint32_t op, double x) {
    if (isinf(x) && op != VKG_UNARY_COPY) return x > 0 ? x : 0.0; /* every activation's limits */
    switch (op) {
    case VKG_UNARY_GELU:
        return 0.5 * x * (1.0 + tanh(sqrt(2.0 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)));
    case VKG_UNARY_GELU_ERF: return 0.5 * x * erfc(-x / sqrt(2.0));
    case VKG_UNARY_QUICK_GELU: return x * sigmoid(1.702 * x);
    case VKG_UNARY_SILU: return x * sigmoid(x);
    case VKG_UNARY_RELU: return x > 0 ? x : 0.0;
    default: return x;
    }
}

void ref_matmul(const vkg_matmul_params *p, const float *A, const float *B, float *C,
                const float *bias, const float *R) {
    for (size_t b = 0; b < (size_t)p->batch0 * p->batch1; b++) {
        size_t b0 = b / p->batch1, b1 = b % p->batch1;
        for (size_t m = 0; m < p->M; m++)
            for (size_t n = 0; n < p->N; n++) {
                float acc = 0.0f;
                for (size_t k = 0; k < p->K; k++)
                    acc += A[p->a_offset + b0 * p->a_stride_b0 + b1 * p->a_stride_b1 + m * p->a_stride_m +
                             k * p->a_stride_k] *
                           B[p->b_offset + b0 * p->b_stride_b0 + b1 * p->b_stride_b1 + k * p->b_stride_k +
                             n * p->b_stride_n];
                if (p->flags & VKG_MATMUL_BIAS) acc += bias[p->bias_offset + n];
                /* The activation function itself is checked against double precision in test_cpu_kernels. */
                acc = vkg_cpu_activation(p->activation, acc);
                if (p->flags & VKG_MATMUL_RESIDUAL)
                    acc += R[p->r_offset + b0 * p->r_stride_b0 + b1 * p->r_stride_b1 + m * p->r_stride_m + n];
                C[p->c_offset + b0 * p->c_stride_b0 + b1 * p->c_stride_b1 + m * p->c_stride_m + n] = acc;
            }
    }
}

void ref_softmax_row(const float *x, const int *keep, size_t n, double *y) {
    double max = -INFINITY, sum = 0.0;
    for (size_t j = 0; j < n; j++)
        if ((!keep || keep[j]) && x[j] > max) max = x[j];
    for (size_t j = 0; j < n; j++) {
        y[j] = (!keep || keep[j]) && max > -INFINITY ? exp((double)x[j] - max) : 0.0;
        sum += y[j];
    }
    for (size_t j = 0; j < n; j++) y[j] = sum > 0 ? y[j] / sum : 0.0;
}

void ref_layernorm_row(const float *x, size_t n, double eps, double *y) {
    double mean = 0.0, var = 0.0;
    for (size_t j = 0; j < n; j++) mean += x[j];
    mean /= (double)n;
    for (size_t j = 0; j < n; j++) var += (x[j] - mean) * (x[j] - mean);
    var /= (double)n;
    for (size_t j = 0; j < n; j++) y[j] = (x[j] - mean) / sqrt(var + eps);
}
