/* matmul on the CPU:
 *   C[b, m, n] = sum_k A[b, m, k] * B[b, k, n]   (+ bias[n])  (gelu)  (+ R[b, m, n])
 * b a batch entry (b0, b1) of batch0 x batch1; M rows, N columns, K the reduction.
 * A and B are read through strides (transposes and broadcast batches cost nothing); C and R are
 * row-major with unit column stride.
 *
 * The contract every path keeps: each element is summed in float from 0 in k order
 * (sum = 0; sum += a[k] * b[k] for k = 0..K-1), so the result does not depend on the path, the
 * tiling, or how units are spread over threads.  Vector lanes are always different elements,
 * never partial sums of one element.
 *
 * Two families of paths:
 *   - few rows (M <= SMALL_M, decoding one token or a few): the work is reading B, so B is
 *     streamed once in the order it lies in memory, and a thread's consecutive units are merged
 *     into one run of columns.  B with contiguous columns (b_stride_n == 1) is walked row by row
 *     over wide column blocks; B with contiguous k (b_stride_k == 1: B is the transpose of a
 *     row-major [N, K] matrix, e.g. GPT-2's tied output head) is read as 4 columns x 4 k blocks
 *     transposed in registers, so each lane is one column's running sum;
 *   - otherwise the output is cut into tiles of TILE_M x TILE_N (the parallel units); k is
 *     walked in chunks of KC; for each chunk the tile's columns are taken in strips of NR: a
 *     strip of B is read in place when its columns are contiguous, else gathered ("packed") into
 *     a small contiguous buffer; a micro-kernel adds one chunk of k to a block of MR rows x NR
 *     columns held in vector registers, so every B value loaded serves MR rows. */
#include "cpu/kernels.h"

#include <string.h>

#define TILE_M VKG_CPU_MATMUL_TILE_M
#define TILE_N VKG_CPU_MATMUL_TILE_N
enum {
    MR = 4, NR = 8, KC = 256,
    SMALL_M = 4,     /* up to this many rows, the streaming paths; must be <= TILE_M      */
    STREAM_W = 1024  /* columns per block of the streaming path with contiguous columns:
                        4 KiB of each row of B read in one go, SMALL_M x 4 KiB of sums    */
};

/* Four floats in one SSE/NEON register: a GNU C vector type, so the sums stay in registers at
 * -O2 instead of round-tripping through memory.  Lanes are independent IEEE single-precision
 * operations, exactly what scalar code would do per element. */
typedef float f32x4 __attribute__((vector_size(16)));
typedef int i32x4 __attribute__((vector_size(16)));
enum { NV = NR / 4 };

#if defined(__clang__)
#define SHUFFLE4(x, y, i0, i1, i2, i3) __builtin_shufflevector(x, y, i0, i1, i2, i3)
#else
#define SHUFFLE4(x, y, i0, i1, i2, i3) __builtin_shuffle(x, y, (i32x4){i0, i1, i2, i3})
#endif

/* r[q] holds element q of four rows r[0..3]; afterwards r[q] holds element q of each row, lane
 * j from row j.  Pure data movement: no arithmetic, so nothing about the sums changes. */
static inline __attribute__((always_inline)) void transpose4(f32x4 r[4]) {
    f32x4 lo01 = SHUFFLE4(r[0], r[1], 0, 4, 1, 5), lo23 = SHUFFLE4(r[2], r[3], 0, 4, 1, 5);
    f32x4 hi01 = SHUFFLE4(r[0], r[1], 2, 6, 3, 7), hi23 = SHUFFLE4(r[2], r[3], 2, 6, 3, 7);
    r[0] = SHUFFLE4(lo01, lo23, 0, 1, 4, 5);
    r[1] = SHUFFLE4(lo01, lo23, 2, 3, 6, 7);
    r[2] = SHUFFLE4(hi01, hi23, 0, 1, 4, 5);
    r[3] = SHUFFLE4(hi01, hi23, 2, 3, 6, 7);
}

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

/* Epilogue, in order: + bias[n], gelu, + R[m, n]; R is read before C is written (R may be C).
 * acc[i * acc_stride + j] is the sum of element (m0 + i, n0 + j). */
static void store_block(const vkg_matmul_params *p, const batch_view *v, const float *bias,
                        size_t m0, size_t rows, size_t n0, size_t cols, const float *acc,
                        size_t acc_stride) {
    for (size_t i = 0; i < rows; i++) {
        float *c = v->c + (m0 + i) * v->c_sm + n0;
        const float *r = v->r ? v->r + (m0 + i) * v->r_sm + n0 : NULL;
        const float *sums = acc + i * acc_stride;
        for (size_t j = 0; j < cols; j++) {
            float x = sums[j];
            if (p->flags & VKG_MATMUL_BIAS) x += bias[p->bias_offset + n0 + j];
            if (p->flags & VKG_MATMUL_GELU) x = vkg_cpu_gelu(x);
            if (r) x += r[j];
            c[j] = x;
        }
    }
}

/* ---- few rows, contiguous columns: B streamed row by row ------------------------------------ */

/* acc[i * STREAM_W + j] = sum over k of a[i * a_sm + k * a_sk] * b[k * b_sk + j], j < cols, for
 * ROWS rows (a compile-time constant at each call).  Four rows of B at a time: each sum is
 * loaded once, gets its four products in k order, and is stored once. */
static inline __attribute__((always_inline)) void
stream_rows(int ROWS, const float *a, size_t a_sm, size_t a_sk, const float *b, size_t b_sk,
            size_t K, size_t cols, float *acc) {
    for (int i = 0; i < ROWS; i++) memset(acc + i * STREAM_W, 0, cols * sizeof(float));
    size_t k = 0;
    for (; k + 4 <= K; k += 4) {
        float ak[SMALL_M][4];
        for (int i = 0; i < ROWS; i++)
            for (int q = 0; q < 4; q++) ak[i][q] = a[i * a_sm + (k + q) * a_sk];
        const float *b0 = b + k * b_sk, *b1 = b0 + b_sk, *b2 = b1 + b_sk, *b3 = b2 + b_sk;
        size_t j = 0;
        for (; j + 4 <= cols; j += 4) {
            f32x4 r0, r1, r2, r3;
            memcpy(&r0, b0 + j, sizeof r0), memcpy(&r1, b1 + j, sizeof r1);
            memcpy(&r2, b2 + j, sizeof r2), memcpy(&r3, b3 + j, sizeof r3);
#pragma GCC unroll 4
            for (int i = 0; i < ROWS; i++) {
                f32x4 s;
                memcpy(&s, acc + i * STREAM_W + j, sizeof s);
                s += ak[i][0] * r0;
                s += ak[i][1] * r1;
                s += ak[i][2] * r2;
                s += ak[i][3] * r3;
                memcpy(acc + i * STREAM_W + j, &s, sizeof s);
            }
        }
        for (; j < cols; j++)
            for (int i = 0; i < ROWS; i++) {
                float s = acc[i * STREAM_W + j];
                s += ak[i][0] * b0[j];
                s += ak[i][1] * b1[j];
                s += ak[i][2] * b2[j];
                s += ak[i][3] * b3[j];
                acc[i * STREAM_W + j] = s;
            }
    }
    for (; k < K; k++) {
        const float *bk = b + k * b_sk;
        for (int i = 0; i < ROWS; i++) {
            float aik = a[i * a_sm + k * a_sk];
            for (size_t j = 0; j < cols; j++) acc[i * STREAM_W + j] += aik * bk[j];
        }
    }
}

/* Columns [n_lo, n_hi) of all M (<= SMALL_M) rows, B with b_sn == 1. */
static void few_rows_contiguous_n(const vkg_matmul_params *p, const batch_view *v,
                                  const float *bias, size_t n_lo, size_t n_hi) {
    float acc[SMALL_M * STREAM_W];
    for (size_t n0 = n_lo; n0 < n_hi; n0 += STREAM_W) {
        size_t cols = n_hi - n0 < STREAM_W ? n_hi - n0 : STREAM_W;
        const float *b = v->b + n0;
        switch (p->M) {
        case 1: stream_rows(1, v->a, v->a_sm, v->a_sk, b, v->b_sk, p->K, cols, acc); break;
        case 2: stream_rows(2, v->a, v->a_sm, v->a_sk, b, v->b_sk, p->K, cols, acc); break;
        case 3: stream_rows(3, v->a, v->a_sm, v->a_sk, b, v->b_sk, p->K, cols, acc); break;
        default: stream_rows(4, v->a, v->a_sm, v->a_sk, b, v->b_sk, p->K, cols, acc); break;
        }
        store_block(p, v, bias, 0, p->M, n0, cols, acc, STREAM_W);
    }
}

/* ---- few rows, contiguous k: columns of B are rows in memory ------------------------------- */

/* For G groups of 4 columns, column 4g + j starting at col[4g + j] (its k = 0 element, k
 * contiguous): out[i * out_stride + 4g + j] = sum over k of a[i * a_sm + k * a_sk] * col[..][k],
 * for ROWS rows.  Per 4 k, each group's 4 x 4 block of B is transposed in registers so lane j
 * is column j; a sum lives in its lane for all of K. */
static inline __attribute__((always_inline)) void
columns_by_k(int ROWS, int G, const float *a, size_t a_sm, size_t a_sk, const float *const *col,
             size_t K, float *out, size_t out_stride) {
    f32x4 sum[SMALL_M][4];
    for (int i = 0; i < ROWS; i++)
        for (int g = 0; g < G; g++) sum[i][g] = (f32x4){0, 0, 0, 0};
    size_t k = 0;
    for (; k + 4 <= K; k += 4) {
        float ak[SMALL_M][4];
        for (int i = 0; i < ROWS; i++)
            for (int q = 0; q < 4; q++) ak[i][q] = a[i * a_sm + (k + q) * a_sk];
#pragma GCC unroll 4
        for (int g = 0; g < G; g++) {
            f32x4 r[4];
            for (int j = 0; j < 4; j++) memcpy(&r[j], col[4 * g + j] + k, sizeof r[j]);
            transpose4(r);
#pragma GCC unroll 4
            for (int i = 0; i < ROWS; i++) {
                f32x4 s = sum[i][g];
                s += ak[i][0] * r[0];
                s += ak[i][1] * r[1];
                s += ak[i][2] * r[2];
                s += ak[i][3] * r[3];
                sum[i][g] = s;
            }
        }
    }
    for (; k < K; k++)
        for (int g = 0; g < G; g++) {
            const float *const *c4 = col + 4 * g;
            f32x4 bk = {c4[0][k], c4[1][k], c4[2][k], c4[3][k]};
            for (int i = 0; i < ROWS; i++) sum[i][g] += a[i * a_sm + k * a_sk] * bk;
        }
    for (int i = 0; i < ROWS; i++)
        for (int g = 0; g < G; g++) memcpy(out + i * out_stride + 4 * g, &sum[i][g], sizeof sum[i][g]);
}

/* One call of columns_by_k with ROWS = M; G, 4 or 1, a constant at each call. */
#define COLUMNS_BY_K(G_)                                                                    \
    switch (p->M) {                                                                         \
    case 1: columns_by_k(1, (G_), v->a, v->a_sm, v->a_sk, col, p->K, out, TILE_N); break;   \
    case 2: columns_by_k(2, (G_), v->a, v->a_sm, v->a_sk, col, p->K, out, TILE_N); break;   \
    case 3: columns_by_k(3, (G_), v->a, v->a_sm, v->a_sk, col, p->K, out, TILE_N); break;   \
    default: columns_by_k(4, (G_), v->a, v->a_sm, v->a_sk, col, p->K, out, TILE_N); break;  \
    }

/* Columns [n_lo, n_hi) of all M (<= SMALL_M) rows, B with b_sk == 1.  Columns go 16 at a time
 * (four independent chains of additions per row), then 4 at a time; a last partial group of 4
 * repeats its last column in the unused lanes, whose sums are dropped. */
static void few_rows_contiguous_k(const vkg_matmul_params *p, const batch_view *v,
                                  const float *bias, size_t n_lo, size_t n_hi) {
    float acc[SMALL_M * TILE_N];
    for (size_t n0 = n_lo; n0 < n_hi; n0 += TILE_N) {
        size_t cols = n_hi - n0 < TILE_N ? n_hi - n0 : TILE_N;
        for (size_t j = 0; j < cols;) {
            const float *col[16];
            float *out = acc + j;
            if (cols - j >= 16) {
                for (int c = 0; c < 16; c++) col[c] = v->b + (n0 + j + c) * v->b_sn;
                COLUMNS_BY_K(4)
                j += 16;
            } else {
                size_t last = cols - j < 4 ? cols - j - 1 : 3;
                for (size_t c = 0; c < 4; c++) col[c] = v->b + (n0 + j + (c < last ? c : last)) * v->b_sn;
                COLUMNS_BY_K(1)
                j += last + 1;
            }
        }
        store_block(p, v, bias, 0, p->M, n0, cols, acc, TILE_N);
    }
}

/* Units [begin, end) when M <= SMALL_M: one row tile per batch entry, so consecutive units are
 * consecutive column tiles; each batch entry's run of them is done as one run of columns. */
static void few_rows(const vkg_matmul_params *p, const float *A, const float *B, float *C,
                     const float *bias, const float *R, size_t begin, size_t end) {
    size_t tiles_n = (p->N + TILE_N - 1) / TILE_N;
    for (size_t unit = begin; unit < end;) {
        size_t batch = unit / tiles_n, first = unit % tiles_n;
        size_t last = end - batch * tiles_n < tiles_n ? end - batch * tiles_n : tiles_n;
        size_t n_lo = first * TILE_N, n_hi = last * TILE_N < p->N ? last * TILE_N : p->N;
        batch_view v = view_of_batch(p, A, B, C, R, batch);
        if (v.b_sn == 1)
            few_rows_contiguous_n(p, &v, bias, n_lo, n_hi);
        else
            few_rows_contiguous_k(p, &v, bias, n_lo, n_hi);
        unit += last - first;
    }
}

/* ---- tiles ----------------------------------------------------------------------------------- */

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

/* packed[k, j] = B[k0 + k, n + j] for k < kc, j < cols; zero for cols <= j < NR.  A whole strip
 * with contiguous k is moved as 4 x 4 blocks transposed in registers; anything else one element
 * at a time. */
static void pack_strip(const batch_view *v, size_t k0, size_t kc, size_t n, size_t cols,
                       float packed[KC][NR]) {
    size_t k = 0;
    if (v->b_sk == 1 && cols == NR) {
        const float *col0 = v->b + k0 + n * v->b_sn;
        for (; k + 4 <= kc; k += 4)
            for (size_t g = 0; g < NR; g += 4) {
                f32x4 r[4];
                for (size_t j = 0; j < 4; j++) memcpy(&r[j], col0 + (g + j) * v->b_sn + k, sizeof r[j]);
                transpose4(r);
                for (size_t q = 0; q < 4; q++) memcpy(&packed[k + q][g], &r[q], sizeof r[q]);
            }
    }
    for (; k < kc; k++) {
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

static size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }

size_t vkg_cpu_matmul_units(const vkg_matmul_params *p) {
    return (size_t)p->batch0 * p->batch1 * ceil_div(p->M, TILE_M) * ceil_div(p->N, TILE_N);
}

/* Units run batch-major, then column tile, then row tile: neighbouring units (usually on the same
 * thread) share a K x TILE_N panel of B, which stays in cache. */
void vkg_cpu_matmul(const vkg_matmul_params *p, const float *A, const float *B, float *C,
                    const float *bias, const float *R, size_t begin, size_t end) {
    if (p->M <= SMALL_M && (p->b_stride_n == 1 || p->b_stride_k == 1)) {
        few_rows(p, A, B, C, bias, R, begin, end);
        return;
    }
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
        store_block(p, &v, bias, m0, rows, n0, cols, &acc[0][0], TILE_N);
    }
}
