/* matmul on the CPU:
 *   C[b, m, n] = sum_k A[b, m, k] * B[b, k, n]   (+ bias[n])  (gelu)  (+ R[b, m, n])
 * b a batch entry (b0, b1) of batch0 x batch1; M rows, N columns, K the reduction.
 * A and B are read through strides (transposes and broadcast batches cost nothing); C and R are
 * row-major with unit column stride.
 *
 * How it is made fast, from the outside in:
 *   - the output is cut into tiles of TILE_M x TILE_N of one batch entry: the parallel units;
 *     a tile's sums live in a local array until the epilogue writes C (so R may be C itself);
 *   - k is walked in chunks of KC; for each chunk the tile's columns are taken in strips of NR:
 *     a strip of B is read in place when its columns are contiguous, else gathered ("packed")
 *     into a small contiguous buffer, zero-padded to NR columns at the tile's right edge;
 *   - a micro-kernel adds one chunk of k to a block of MR rows x NR columns held in vector
 *     registers, so every B value loaded serves MR rows (leftover rows go one at a time).
 * Every element is summed from 0 in k order whatever path computed it, so the result does not
 * depend on the tiling, on the path, or on how tiles are spread over threads. */
#include "cpu/kernels.h"

#include <string.h>

#define TILE_M VKG_CPU_MATMUL_TILE_M
#define TILE_N VKG_CPU_MATMUL_TILE_N
enum { MR = 4, NR = 8, KC = 256 };

/* Four floats in one SSE/NEON register: a GNU C vector type, so the micro-kernel's sums stay in
 * registers at -O2 instead of round-tripping through memory.  Lanes are independent IEEE
 * single-precision operations, exactly what scalar code would do per element. */
typedef float f32x4 __attribute__((vector_size(16)));
enum { NV = NR / 4 };

/* One batch entry's operands: the element (m, k) of A is a[m * a_sm + k * a_sk], and so on. */
typedef struct batch_view {
    const float *a, *b, *r;
    float *c;
    size_t a_sm, a_sk, b_sk, b_sn, c_sm, r_sm;
} batch_view;

static batch_view view_of_batch(const vkg_matmul_params *p, const float *A, const float *B,
                                float *C, const float *R, size_t batch) {
    size_t b0 = batch / p->batch1, b1 = batch % p->batch1;
    batch_view v;
    v.a = A + p->a_offset + b0 * p->a_stride_b0 + b1 * p->a_stride_b1;
    v.b = B + p->b_offset + b0 * p->b_stride_b0 + b1 * p->b_stride_b1;
    v.c = C + p->c_offset + b0 * p->c_stride_b0 + b1 * p->c_stride_b1;
    v.r = (p->flags & VKG_MATMUL_RESIDUAL)
              ? R + p->r_offset + b0 * p->r_stride_b0 + b1 * p->r_stride_b1
              : NULL;
    v.a_sm = p->a_stride_m;
    v.a_sk = p->a_stride_k;
    v.b_sk = p->b_stride_k;
    v.b_sn = p->b_stride_n;
    v.c_sm = p->c_stride_m;
    v.r_sm = p->r_stride_m;
    return v;
}

/* acc[i, 0:NR] += sum over k < kc of a[i * a_sm + k * a_sk] * b[k * b_sk + 0:NR], for ROWS rows
 * (MR or 1; a compile-time constant at each call so the loops unroll into registers).  acc rows
 * are acc_stride floats apart. */
static inline __attribute__((always_inline)) void
micro_kernel(int ROWS, float *acc, size_t acc_stride, const float *a, size_t a_sm, size_t a_sk,
             const float *b, size_t b_sk, size_t kc) {
    f32x4 sum[MR][NV];
#pragma GCC unroll 4
    for (int i = 0; i < ROWS; i++)
#pragma GCC unroll 4
        for (int j = 0; j < NV; j++) memcpy(&sum[i][j], acc + i * acc_stride + 4 * j, sizeof sum[i][j]);
    for (size_t k = 0; k < kc; k++) {
        f32x4 bk[NV];
        memcpy(bk, b + k * b_sk, sizeof bk);
        const float *ak = a + k * a_sk;
#pragma GCC unroll 4
        for (int i = 0; i < ROWS; i++) {
            float aik = ak[i * a_sm];
#pragma GCC unroll 4
            for (int j = 0; j < NV; j++) sum[i][j] += aik * bk[j];
        }
    }
#pragma GCC unroll 4
    for (int i = 0; i < ROWS; i++)
#pragma GCC unroll 4
        for (int j = 0; j < NV; j++) memcpy(acc + i * acc_stride + 4 * j, &sum[i][j], sizeof sum[i][j]);
}

/* packed[k, j] = B[k0 + k, n + j] for k < kc, j < cols; zero for cols <= j < NR. */
static void pack_strip(const batch_view *v, size_t k0, size_t kc, size_t n, size_t cols,
                       float packed[KC][NR]) {
    for (size_t k = 0; k < kc; k++) {
        const float *brow = v->b + (k0 + k) * v->b_sk + n * v->b_sn;
        for (size_t j = 0; j < NR; j++) packed[k][j] = j < cols ? brow[j * v->b_sn] : 0.0f;
    }
}

/* acc[0:rows, 0:cols] = A[m0:m0+rows, :] @ B[:, n0:n0+cols]; acc rows are TILE_N apart and have
 * room for whole strips of NR. */
static void tile_product(const batch_view *v, uint32_t K, size_t m0, size_t rows, size_t n0,
                         size_t cols, float acc[TILE_M][TILE_N]) {
    memset(acc, 0, sizeof(float) * TILE_M * TILE_N);
    float packed[KC][NR];
    for (size_t k0 = 0; k0 < K; k0 += KC) {
        size_t kc = K - k0 < KC ? K - k0 : KC;
        for (size_t j = 0; j < cols; j += NR) {
            size_t strip_cols = cols - j < NR ? cols - j : NR;
            const float *b;
            size_t b_sk;
            if (v->b_sn == 1 && strip_cols == NR) {
                b = v->b + k0 * v->b_sk + n0 + j;
                b_sk = v->b_sk;
            } else {
                pack_strip(v, k0, kc, n0 + j, strip_cols, packed);
                b = &packed[0][0];
                b_sk = NR;
            }
            const float *a = v->a + m0 * v->a_sm + k0 * v->a_sk;
            size_t i = 0;
            for (; i + MR <= rows; i += MR)
                micro_kernel(MR, &acc[i][j], TILE_N, a + i * v->a_sm, v->a_sm, v->a_sk, b, b_sk, kc);
            for (; i < rows; i++)
                micro_kernel(1, &acc[i][j], TILE_N, a + i * v->a_sm, v->a_sm, v->a_sk, b, b_sk, kc);
        }
    }
}

/* Epilogue, in order: + bias[n], gelu, + R[m, n]; R is read before C is written (R may be C). */
static void store_tile(const vkg_matmul_params *p, const batch_view *v, const float *bias,
                       size_t m0, size_t rows, size_t n0, size_t cols,
                       float acc[TILE_M][TILE_N]) {
    for (size_t i = 0; i < rows; i++) {
        float *c = v->c + (m0 + i) * v->c_sm + n0;
        const float *r = v->r ? v->r + (m0 + i) * v->r_sm + n0 : NULL;
        for (size_t j = 0; j < cols; j++) {
            float x = acc[i][j];
            if (p->flags & VKG_MATMUL_BIAS) x += bias[p->bias_offset + n0 + j];
            if (p->flags & VKG_MATMUL_GELU) x = vkg_cpu_gelu(x);
            if (r) x += r[j];
            c[j] = x;
        }
    }
}

static size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }

size_t vkg_cpu_matmul_units(const vkg_matmul_params *p) {
    return (size_t)p->batch0 * p->batch1 * ceil_div(p->M, TILE_M) * ceil_div(p->N, TILE_N);
}

/* Units run batch-major, then column tile, then row tile: neighbouring units (usually on the same
 * thread) share a K x TILE_N panel of B, which stays in cache. */
void vkg_cpu_matmul(const vkg_matmul_params *p, const float *A, const float *B, float *C,
                    const float *bias, const float *R, size_t begin, size_t end) {
    size_t tiles_m = ceil_div(p->M, TILE_M), tiles_n = ceil_div(p->N, TILE_N);
    float acc[TILE_M][TILE_N];
    for (size_t unit = begin; unit < end; unit++) {
        size_t batch = unit / (tiles_m * tiles_n);
        size_t m0 = unit % tiles_m * TILE_M;
        size_t n0 = unit % (tiles_m * tiles_n) / tiles_m * TILE_N;
        size_t rows = p->M - m0 < TILE_M ? p->M - m0 : TILE_M;
        size_t cols = p->N - n0 < TILE_N ? p->N - n0 : TILE_N;
        batch_view v = view_of_batch(p, A, B, C, R, batch);
        tile_product(&v, p->K, m0, rows, n0, cols, acc);
        store_tile(p, &v, bias, m0, rows, n0, cols, acc);
    }
}
