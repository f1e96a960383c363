#include "support/cpu_reference.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/kernels.h"
#include "cpu/matmul_variant.h"
#include "io/safetensors.h"

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
    int variant;
    const float *A, *bias, *R;
    const void *B;
    float *C;
} matmul_job;

static void matmul_range(void *ctx, size_t begin, size_t end) {
    const matmul_job *j = ctx;
    vkg_cpu_matmul_with(j->variant, j->p, j->A, j->B, j->C, j->bias, j->R, begin, end);
}

void ref_run_matmul_kernel(vkg_threadpool *pool, int variant, const vkg_matmul_params *p, const float *A,
                           const void *B, float *C, const float *bias, const float *R) {
    matmul_job job = {p, variant, A, bias, R, B, C};
    if (pool)
        vkg_threadpool_for(pool, vkg_cpu_matmul_units(p), matmul_range, &job);
    else
        matmul_range(&job, 0, vkg_cpu_matmul_units(p));
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

float ref_matmul_b(const vkg_matmul_params *p, const void *B, size_t i) {
    if (p->flags & VKG_MATMUL_B_F16) return vkg_f16_to_f32(((const uint16_t *)B)[i]);
    if (p->flags & VKG_MATMUL_B_BF16) return vkg_bf16_to_f32(((const uint16_t *)B)[i]);
    return ((const float *)B)[i];
}

int ref_matmul_fused(int variant) { return variant != VKG_CPU_MATMUL_PORTABLE; }

/* The element index of (m, k) of A, (k, n) of B, (m, n) of C and R, in batch entry b. */
static size_t a_index(const vkg_matmul_params *p, size_t b, size_t m, size_t k) {
    return p->a_offset + b / p->batch1 * p->a_stride_b0 + b % p->batch1 * p->a_stride_b1 + m * p->a_stride_m +
           k * p->a_stride_k;
}
static size_t b_index(const vkg_matmul_params *p, size_t b, size_t k, size_t n) {
    return p->b_offset + b / p->batch1 * p->b_stride_b0 + b % p->batch1 * p->b_stride_b1 + k * p->b_stride_k +
           n * p->b_stride_n;
}
static size_t c_index(const vkg_matmul_params *p, size_t b, size_t m, size_t n) {
    return p->c_offset + b / p->batch1 * p->c_stride_b0 + b % p->batch1 * p->c_stride_b1 + m * p->c_stride_m + n;
}
static size_t r_index(const vkg_matmul_params *p, size_t b, size_t m, size_t n) {
    return p->r_offset + b / p->batch1 * p->r_stride_b0 + b % p->batch1 * p->r_stride_b1 + m * p->r_stride_m + n;
}

void ref_matmul(const vkg_matmul_params *p, int fused, const float *A, const void *B, float *C,
                const float *bias, const float *R) {
    for (size_t b = 0; b < (size_t)p->batch0 * p->batch1; b++)
        for (size_t m = 0; m < p->M; m++)
            for (size_t n = 0; n < p->N; n++) {
                /* one sum, or (the dot-product path) VKG_MM_DOT_LANES: product k into sum k % lanes,
                   then sum t + sum t + lanes / 2, and so on by halves */
                const size_t lanes = vkg_mm_dot_path(p) ? VKG_MM_DOT_LANES : 1;
                float part[VKG_MM_DOT_LANES] = {0};
                for (size_t k = 0; k < p->K; k++) {
                    const float x = A[a_index(p, b, m, k)], y = ref_matmul_b(p, B, b_index(p, b, k, n));
                    float *s = &part[k % lanes];
                    *s = fused ? fmaf(x, y, *s) : *s + x * y;
                }
                for (size_t h = lanes / 2; h >= 1; h /= 2)
                    for (size_t t = 0; t < h; t++) part[t] = part[t] + part[t + h];
                float acc = part[0];
                if (p->flags & VKG_MATMUL_BIAS) acc += bias[p->bias_offset + n];
                /* The activation function itself is checked against double precision in test_cpu_kernels. */
                acc = vkg_cpu_activation(p->activation, acc);
                if (p->flags & VKG_MATMUL_RESIDUAL) acc += R[r_index(p, b, m, n)];
                C[c_index(p, b, m, n)] = acc;
            }
}

void ref_matmul_check_f64(const vkg_matmul_params *p, const float *A, const void *B, const float *C,
                          const float *bias, const float *R, size_t row_step) {
    const double eps = 1.0 / (1 << 23);
    for (size_t b = 0; b < (size_t)p->batch0 * p->batch1; b++)
        for (size_t m = 0; m < p->M; m++) {
            if (m % row_step != 0 && m + 1 != p->M) continue;
            for (size_t n = 0; n < p->N; n++) {
                double sum = 0.0, mag = 0.0;
                for (size_t k = 0; k < p->K; k++) {
                    const double t = (double)A[a_index(p, b, m, k)] * ref_matmul_b(p, B, b_index(p, b, k, n));
                    sum += t, mag += fabs(t);
                }
                if (p->flags & VKG_MATMUL_BIAS) sum += bias[p->bias_offset + n], mag += fabs(bias[p->bias_offset + n]);
                double want = ref_activation(p->activation, sum);
                /* the sums' rounding (times the activations' slope, at most 1.13), then the float
                   activation's own few ulps */
                double tol = (p->K + 4) * eps * mag * 1.2 + 8 * eps * fabs(want) + 1e-30;
                if (p->flags & VKG_MATMUL_RESIDUAL) {
                    const double r = R[r_index(p, b, m, n)];
                    want += r, tol += eps * (fabs(r) + fabs(want));
                }
                const double got = C[c_index(p, b, m, n)];
                if (!(fabs(got - want) <= tol))
                    fail_msg("batch %zu (%zu, %zu): %.9g, want %.9g within %.3g", b, m, n, got, want, tol);
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
