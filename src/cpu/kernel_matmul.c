/* matmul on the CPU:
 *   C[b, m, n] = sum_k A[b, m, k] * B[b, k, n]   (+ bias[n])  (activation)  (+ R[b, m, n])
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
 *   - few rows (M <= FEW_ROWS, decoding one token or a few): the work is reading B, so B is
 *     read from memory once, in long runs, with software prefetch, and a thread's consecutive
 *     units are merged into one run of columns; rows of A go a few at a time over a block of B
 *     while it is in cache.  B with contiguous columns (b_stride_n == 1) is walked row by row
 *     over wide column blocks; B with contiguous k (b_stride_k == 1: B is the transpose of a
 *     row-major [N, K] matrix, e.g. GPT-2's tied output head) is read as 4 columns x 4 k blocks
 *     transposed in registers, so each lane is one column's running sum;
 *   - otherwise the output is cut into tiles of TILE_M x TILE_N (the parallel units); k is
 *     walked in chunks of KC; for each chunk the tile's columns are taken in strips of NR: a
 *     strip of B is read in place when its columns are contiguous, else gathered ("packed") into
 *     a small contiguous buffer (by 4 x 4 register transposes when k is contiguous); a
 *     micro-kernel adds one chunk of k to a block of MR rows x NR columns held in vector
 *     registers, so every B value loaded serves MR rows. */
#include "cpu/kernels.h"

#include "core/half.h"

#include <string.h>

#define TILE_M VKG_CPU_MATMUL_TILE_M
#define TILE_N VKG_CPU_MATMUL_TILE_N
enum {
    MR = 4, NR = 8, KC = 256,
    FEW_ROWS = 16,       /* up to this many rows, the streaming paths (measured as fast as
                            the tiles or faster up to 32 rows); must be <= TILE_M         */
    PASS_ROWS = 4,       /* rows of A per pass over a block of B on those paths          */
    STREAM_SUMS = 8192,  /* floats of running sums (32 KiB) of the path with contiguous
                            columns: the wider a block, the longer each run read from a
                            row of B (measured on one core: 4 KiB runs ~18 GB/s, 32 KiB
                            ~32 GB/s)                                                     */
    KGROUPS = 2,         /* groups of 4 columns at a time on the path with contiguous k:
                            measured faster than 1, 3, 4 or 8                             */
    PREFETCH_K = 64      /* on that path, how far ahead (in k) each column is prefetched:
                            the hardware does not follow 8 interleaved streams well       */
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

/* Epilogue, in order: + bias[n], the activation, + R[m, n]; R is read before C is written (R may be C).
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
            if (p->activation != VKG_UNARY_COPY) x = vkg_cpu_activation(p->activation, x);
            if (r) x += r[j];
            c[j] = x;
        }
    }
}

/* ---- few rows, contiguous columns: B streamed row by row ------------------------------------ */

/* acc[i * W + j] = sum over k of a[i * a_sm + k * a_sk] * b[k * b_sk + j], j < W, for ROWS rows
 * (a compile-time constant at each call).  Four rows of B at a time: each sum is loaded once,
 * gets its four products in k order, and is stored once; the next four rows are prefetched
 * meanwhile, a cache line per row every 16 columns. */
static inline __attribute__((always_inline)) void
stream_rows(int ROWS, const float *a, size_t a_sm, size_t a_sk, const float *b, size_t b_sk,
            size_t K, size_t W, float *acc) {
    memset(acc, 0, (size_t)ROWS * W * sizeof(float));
    size_t k = 0;
    for (; k + 4 <= K; k += 4) {
        /* Broadcast once here, not once per use in the loop below (SSE has no broadcast load). */
        float ak[PASS_ROWS][4];
        f32x4 akv[PASS_ROWS][4];
#pragma GCC unroll 4
        for (int i = 0; i < ROWS; i++)
#pragma GCC unroll 4
            for (int q = 0; q < 4; q++) {
                ak[i][q] = a[i * a_sm + (k + q) * a_sk];
                akv[i][q] = (f32x4){ak[i][q], ak[i][q], ak[i][q], ak[i][q]};
            }
        const float *b0 = b + k * b_sk, *b1 = b0 + b_sk, *b2 = b1 + b_sk, *b3 = b2 + b_sk;
        int prefetch = k + 8 <= K;
        size_t j = 0;
        for (; j + 4 <= W; j += 4) {
            if (prefetch && j % 16 == 0) {
                __builtin_prefetch(b0 + 4 * b_sk + j);
                __builtin_prefetch(b1 + 4 * b_sk + j);
                __builtin_prefetch(b2 + 4 * b_sk + j);
                __builtin_prefetch(b3 + 4 * b_sk + j);
            }
            f32x4 r0, r1, r2, r3;
            memcpy(&r0, b0 + j, sizeof r0), memcpy(&r1, b1 + j, sizeof r1);
            memcpy(&r2, b2 + j, sizeof r2), memcpy(&r3, b3 + j, sizeof r3);
#pragma GCC unroll 4
            for (int i = 0; i < ROWS; i++) {
                f32x4 s;
                memcpy(&s, acc + i * W + j, sizeof s);
                s += akv[i][0] * r0;
                s += akv[i][1] * r1;
                s += akv[i][2] * r2;
                s += akv[i][3] * r3;
                memcpy(acc + i * W + j, &s, sizeof s);
            }
        }
        for (; j < W; j++)
            for (int i = 0; i < ROWS; i++) {
                float s = acc[i * W + j];
                s += ak[i][0] * b0[j];
                s += ak[i][1] * b1[j];
                s += ak[i][2] * b2[j];
                s += ak[i][3] * b3[j];
                acc[i * W + j] = s;
            }
    }
    for (; k < K; k++) {
        const float *bk = b + k * b_sk;
        for (int i = 0; i < ROWS; i++) {
            float aik = a[i * a_sm + k * a_sk];
            for (size_t j = 0; j < W; j++) acc[i * W + j] += aik * bk[j];
        }
    }
}

/* Columns [n_lo, n_hi) of all M rows, B with b_sn == 1, in blocks as wide as the sums allow;
 * rows go PASS_ROWS at a time over each block (a block's rows of B stay in cache between
 * passes). */
static void few_rows_contiguous_n(const vkg_matmul_params *p, const batch_view *v,
                                  const float *bias, size_t n_lo, size_t n_hi) {
    float acc[STREAM_SUMS];
    size_t pass_rows = p->M < PASS_ROWS ? p->M : PASS_ROWS;
    size_t width = STREAM_SUMS / pass_rows / 16 * 16; /* whole cache lines when B is aligned */
    for (size_t n0 = n_lo; n0 < n_hi; n0 += width) {
        size_t W = n_hi - n0 < width ? n_hi - n0 : width;
        const float *b = v->b + n0;
        for (size_t m0 = 0; m0 < p->M; m0 += PASS_ROWS) {
            size_t rows = p->M - m0 < PASS_ROWS ? p->M - m0 : PASS_ROWS;
            const float *a = v->a + m0 * v->a_sm;
            switch (rows) {
            case 1: stream_rows(1, a, v->a_sm, v->a_sk, b, v->b_sk, p->K, W, acc); break;
            case 2: stream_rows(2, a, v->a_sm, v->a_sk, b, v->b_sk, p->K, W, acc); break;
            case 3: stream_rows(3, a, v->a_sm, v->a_sk, b, v->b_sk, p->K, W, acc); break;
            default: stream_rows(4, a, v->a_sm, v->a_sk, b, v->b_sk, p->K, W, acc); break;
            }
            store_block(p, v, bias, m0, rows, n0, W, acc, W);
        }
    }
}

/* ---- few rows, contiguous k: columns of B are rows in memory ------------------------------- */

/* For G groups of 4 columns, column c starting at col0 + c * col_stride (its k = 0 element, k
 * contiguous): out[i * out_stride + c] = sum over k of a[i * a_sm + k * a_sk] * column c [k],
 * for ROWS rows (ROWS and G compile-time constants at each call).  Per 4 k, each group's 4 x 4
 * block of B is transposed in registers so lane j is column j: a column's sum lives in one lane
 * for all of K.  Each column is prefetched PREFETCH_K ahead, a cache line every 16 k. */
static inline __attribute__((always_inline)) void
columns_by_k(int ROWS, int G, const float *a, size_t a_sm, size_t a_sk, const float *col0,
             size_t col_stride, size_t K, float *out, size_t out_stride) {
    f32x4 sum[PASS_ROWS][KGROUPS];
#pragma GCC unroll 4
    for (int i = 0; i < ROWS; i++)
#pragma GCC unroll 4
        for (int g = 0; g < G; g++) sum[i][g] = (f32x4){0, 0, 0, 0};
    size_t k = 0;
    for (; k + 4 <= K; k += 4) {
        float ak[PASS_ROWS][4];
#pragma GCC unroll 4
        for (int i = 0; i < ROWS; i++)
#pragma GCC unroll 4
            for (int q = 0; q < 4; q++) ak[i][q] = a[i * a_sm + (k + q) * a_sk];
        if (k % 16 == 0 && k + PREFETCH_K < K)
#pragma GCC unroll 16
            for (int c = 0; c < 4 * G; c++) __builtin_prefetch(col0 + c * col_stride + k + PREFETCH_K);
#pragma GCC unroll 4
        for (int g = 0; g < G; g++) {
            const float *q0 = col0 + 4 * g * col_stride + k;
            f32x4 r[4];
            memcpy(&r[0], q0, sizeof r[0]);
            memcpy(&r[1], q0 + col_stride, sizeof r[1]);
            memcpy(&r[2], q0 + 2 * col_stride, sizeof r[2]);
            memcpy(&r[3], q0 + 3 * col_stride, sizeof r[3]);
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
            const float *q0 = col0 + 4 * g * col_stride + k;
            f32x4 bk = {q0[0], q0[col_stride], q0[2 * col_stride], q0[3 * col_stride]};
            for (int i = 0; i < ROWS; i++) sum[i][g] += a[i * a_sm + k * a_sk] * bk;
        }
#pragma GCC unroll 4
    for (int i = 0; i < ROWS; i++)
#pragma GCC unroll 4
        for (int g = 0; g < G; g++) memcpy(out + i * out_stride + 4 * g, &sum[i][g], sizeof sum[i][g]);
}

/* columns_by_k for rows (1..PASS_ROWS) rows of A from a, G groups, sums to out (rows TILE_N
 * apart). */
static void columns_by_k_any_rows(const batch_view *v, size_t K, const float *a, size_t rows,
                                  int G, const float *col0, size_t col_stride, float *out) {
    size_t a_sm = v->a_sm, a_sk = v->a_sk;
    if (G == KGROUPS) {
        switch (rows) {
        case 1: columns_by_k(1, KGROUPS, a, a_sm, a_sk, col0, col_stride, K, out, TILE_N); break;
        case 2: columns_by_k(2, KGROUPS, a, a_sm, a_sk, col0, col_stride, K, out, TILE_N); break;
        case 3: columns_by_k(3, KGROUPS, a, a_sm, a_sk, col0, col_stride, K, out, TILE_N); break;
        default: columns_by_k(4, KGROUPS, a, a_sm, a_sk, col0, col_stride, K, out, TILE_N); break;
        }
    } else {
        switch (rows) {
        case 1: columns_by_k(1, 1, a, a_sm, a_sk, col0, col_stride, K, out, TILE_N); break;
        case 2: columns_by_k(2, 1, a, a_sm, a_sk, col0, col_stride, K, out, TILE_N); break;
        case 3: columns_by_k(3, 1, a, a_sm, a_sk, col0, col_stride, K, out, TILE_N); break;
        default: columns_by_k(4, 1, a, a_sm, a_sk, col0, col_stride, K, out, TILE_N); break;
        }
    }
}

/* Columns [n_lo, n_hi) of all M rows, B with b_sk == 1, in blocks of TILE_N columns; rows go
 * PASS_ROWS at a time over each block.  Columns go 4 * KGROUPS at a time, then 4 at a time;
 * each of the last (fewer than 4) columns is done alone as a group of 4 lanes that all read it
 * (a column stride of 0). */
static void few_rows_contiguous_k(const vkg_matmul_params *p, const batch_view *v,
                                  const float *bias, size_t n_lo, size_t n_hi) {
    float acc[PASS_ROWS * TILE_N], lone[PASS_ROWS * TILE_N];
    for (size_t n0 = n_lo; n0 < n_hi; n0 += TILE_N) {
        size_t cols = n_hi - n0 < TILE_N ? n_hi - n0 : TILE_N;
        const float *col = v->b + n0 * v->b_sn;
        for (size_t m0 = 0; m0 < p->M; m0 += PASS_ROWS) {
            size_t rows = p->M - m0 < PASS_ROWS ? p->M - m0 : PASS_ROWS;
            const float *a = v->a + m0 * v->a_sm;
            size_t j = 0;
            for (; j + 4 * KGROUPS <= cols; j += 4 * KGROUPS)
                columns_by_k_any_rows(v, p->K, a, rows, KGROUPS, col + j * v->b_sn, v->b_sn, acc + j);
            for (; j + 4 <= cols; j += 4)
                columns_by_k_any_rows(v, p->K, a, rows, 1, col + j * v->b_sn, v->b_sn, acc + j);
            for (; j < cols; j++) {
                columns_by_k_any_rows(v, p->K, a, rows, 1, col + j * v->b_sn, 0, lone);
                for (size_t i = 0; i < rows; i++) acc[i * TILE_N + j] = lone[i * TILE_N];
            }
            store_block(p, v, bias, m0, rows, n0, cols, acc, TILE_N);
        }
    }
}

/* Units [begin, end) when M <= FEW_ROWS: one row tile per batch entry, so consecutive units are
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

/* ---- 16-bit B: a plain loop until a fast path exists ---------------------------------------- */

/* Unit by unit as the tiles go, each sum from 0 in k order with B's element widened as read:
 * the f32 paths' contract, so the result equals that of B widened beforehand. */
static void tiles_b16(const vkg_matmul_params *p, const float *A, const uint16_t *B, float *C,
                      const float *bias, const float *R, size_t begin, size_t end) {
    size_t tiles_m = ceil_div(p->M, TILE_M), tiles_n = ceil_div(p->N, TILE_N);
    const int bf16 = (p->flags & VKG_MATMUL_B_BF16) != 0;
    float acc[TILE_M][TILE_N];
    for (size_t unit = begin; unit < end; unit++) {
        size_t batch = unit / (tiles_m * tiles_n), b0 = batch / p->batch1, b1 = batch % p->batch1;
        size_t m0 = unit % tiles_m * TILE_M, n0 = unit % (tiles_m * tiles_n) / tiles_m * TILE_N;
        size_t rows = p->M - m0 < TILE_M ? p->M - m0 : TILE_M, cols = p->N - n0 < TILE_N ? p->N - n0 : TILE_N;
        batch_view v = {.a = A + p->a_offset + b0 * p->a_stride_b0 + b1 * p->a_stride_b1,
                        .c = C + p->c_offset + b0 * p->c_stride_b0 + b1 * p->c_stride_b1,
                        .r = (p->flags & VKG_MATMUL_RESIDUAL) ? R + p->r_offset + b0 * p->r_stride_b0 + b1 * p->r_stride_b1
                                                              : NULL,
                        .a_sm = p->a_stride_m, .a_sk = p->a_stride_k, .b_sk = p->b_stride_k, .b_sn = p->b_stride_n,
                        .c_sm = p->c_stride_m, .r_sm = p->r_stride_m};
        const uint16_t *b = B + p->b_offset + b0 * p->b_stride_b0 + b1 * p->b_stride_b1;
        memset(acc, 0, sizeof acc);
        for (size_t k = 0; k < p->K; k++) {
            float bk[TILE_N]; /* row k of the tile's columns, widened once for all its rows */
            for (size_t j = 0; j < cols; j++) {
                uint16_t e = b[k * v.b_sk + (n0 + j) * v.b_sn];
                bk[j] = bf16 ? vkg_bf16_to_f32(e) : vkg_f16_to_f32(e);
            }
            for (size_t i = 0; i < rows; i++) {
                const float aik = v.a[(m0 + i) * v.a_sm + k * v.a_sk];
                for (size_t j = 0; j < cols; j++) acc[i][j] += aik * bk[j];
            }
        }
        store_block(p, &v, bias, m0, rows, n0, cols, &acc[0][0], TILE_N);
    }
}

/* Units run batch-major, then column tile, then row tile: neighbouring units (usually on the same
 * thread) share a K x TILE_N panel of B, which stays in cache. */
void vkg_cpu_matmul(const vkg_matmul_params *p, const float *A, const void *B_any, float *C,
                    const float *bias, const float *R, size_t begin, size_t end) {
    if (p->flags & (VKG_MATMUL_B_F16 | VKG_MATMUL_B_BF16)) {
        tiles_b16(p, A, B_any, C, bias, R, begin, end);
        return;
    }
    const float *B = B_any;
    if (p->M <= FEW_ROWS && (p->b_stride_n == 1 || p->b_stride_k == 1)) {
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
