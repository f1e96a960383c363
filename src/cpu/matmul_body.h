/* The matmul algorithm, once, for any vector width: included by one file per variant
 * (matmul_portable.c, matmul_avx2.c, matmul_avx512.c) after it defines
 *   MM_NAME                 the variant's entry point (a vkg_mm_fn, matmul_variant.h)
 *   vf, VL                  its vector type of VL floats (cpu/vec_*.h)
 *   MR, NV                  the register block: MR rows x NR = NV * VL columns of sums
 *   DOT_RB, DOT_SUMS        the dot-product path's register blocks: up to DOT_RB rows, up to
 *                           DOT_SUMS vectors of sums
 *   vzero, vload, vstore, vset1, vadd, vmadd(a, b, c) = a * b + c (fused or not), sfma (the
 *                           same on one float), vsum_halves (a vector's lanes added by halves),
 *                           vload_f16/vload_bf16 (VL 16-bit values widened),
 *   x4_f16, x4_bf16, s_f16, s_bf16 (four / one 16-bit values widened)
 * Every path but the dot products adds each element's products one at a time in k order from 0
 * through vmadd or sfma; the dot products keep 16 such sums per element, k % 16 apart, then add
 * them by halves (kernel_matmul.c states the contract).
 *
 * Three paths:
 *   - few rows (M <= VKG_MM_FEW_ROWS) with B's columns contiguous ([K, N], GPT-2's Conv1D
 *     weights as stored, which a model opened for the CPU executor holds transposed; decoding:
 *     the work is reading B): B is read in place, row by row over wide blocks
 *     of columns with software prefetch (sums in L1, rows of A VKG_MM_PASS_ROWS at a time);
 *   - up to VKG_MM_DOT_ROWS rows with B's k contiguous ([N, K]: Hugging Face's Linear weights,
 *     every Llama-family matmul, every tied LM head; decoding, one sequence or a batch of them):
 *     dot products, B read in place a vector of consecutive k at a time and multiplied by A's
 *     row as it lies, sums in registers (AVX-512: 4 rows x 4 columns), one horizontal sum per
 *     element (not k order: summing in k order needs B's columns transposed into vector lanes,
 *     shuffles that all go to x86's one shuffle port and held the decode to 15 GB/s);
 *   - everything else: per output tile (TILE_M x TILE_N, the parallel units) and per block of
 *     VKG_MM_KC k, B is packed into strips of NR columns (widened to f32, transposed by 4 x 4
 *     register blocks when its k is contiguous), and a micro-kernel adds one block of k to
 *     MR x NR sums held in registers, reading MR rows of A in place: each B value loaded serves
 *     MR rows and each A value NR columns, and each packed strip of B serves all the tile's rows
 *     (TILE_M: a GPT-2 forward's every row up to T = 256). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define NR (NV * VL)
#define TILE_M VKG_CPU_MATMUL_TILE_M
#define TILE_N VKG_CPU_MATMUL_TILE_N
#define KC VKG_MM_KC
#define PASS_ROWS VKG_MM_PASS_ROWS
#define PREFETCH_K 64 /* k ahead that packing prefetches a column whose k is contiguous */
#define BAND 16       /* columns whose k is contiguous that packing reads side by side */
#define ALIGNED __attribute__((aligned(64)))
#define INLINE static inline __attribute__((always_inline))

_Static_assert(TILE_N % NR == 0, "tiles hold whole strips of columns (a tile's last row strip may be short)");
_Static_assert(VKG_MM_FEW_ROWS <= TILE_M && VKG_MM_DOT_ROWS <= TILE_M, "the few-rows paths have one row tile");

/* ---- B's elements as floats (T, a VKG_MM_* type, is a constant at every call) ---------------- */

INLINE float b_one(int T, const void *b, size_t i) {
    if (T == VKG_MM_F16) return s_f16(((const uint16_t *)b)[i]);
    if (T == VKG_MM_BF16) return s_bf16(((const uint16_t *)b)[i]);
    return ((const float *)b)[i];
}

INLINE vf b_vec(int T, const void *b, size_t i) {
    if (T == VKG_MM_F16) return vload_f16((const uint16_t *)b + i);
    if (T == VKG_MM_BF16) return vload_bf16((const uint16_t *)b + i);
    return vload((const float *)b + i);
}

INLINE mm_x4 b_x4(int T, const void *b, size_t i) {
    if (T == VKG_MM_F16) return x4_f16((const uint16_t *)b + i);
    if (T == VKG_MM_BF16) return x4_bf16((const uint16_t *)b + i);
    mm_x4 x;
    memcpy(&x, (const float *)b + i, sizeof x);
    return x;
}

INLINE const void *b_at(int T, const void *b, size_t i) {
    return T == VKG_MM_F32 ? (const void *)((const float *)b + i) : (const void *)((const uint16_t *)b + i);
}

/* ---- the epilogue ------------------------------------------------------------------------------ */

/* One element of the epilogue: act(s (+ b)), then + r (RES 1) or times silu(r) (RES 2, the
 * SwiGLU gate). */
#define MM_EPILOGUE_ELEMENT(j) \
    do { \
        float x_ = s[j]; \
        if (BIAS) x_ += b[j]; \
        x_ = vkg_cpu_activation(ACT, x_); \
        if (RES == 1) x_ += r[j]; \
        if (RES == 2) x_ = vkg_cpu_activation(VKG_UNARY_SILU, r[j]) * x_; \
        c[j] = x_; \
    } while (0)

/* One row: c[j] = act(s[j] (+ b[j])), then + r[j] or times silu(r[j]) (ACT, BIAS, RES constants at each call, so the
 * loop is straight-line code the compiler vectorizes: the same operations on every element, in
 * the same order as one at a time).  r may be c: element j is read before it is written, and no
 * element depends on another, which the pragmas tell the compiler.  The exact GELU calls libm's
 * erfc, which no compiler vectorizes: its loop is left to the compiler as it is (clang's pragma
 * demands vectorization and warns where it cannot). */
INLINE void epilogue_row(uint32_t ACT, int BIAS, int RES, float *c, const float *s, const float *b, const float *r,
                         size_t cols) {
    if (ACT == VKG_UNARY_GELU_ERF) {
        for (size_t j = 0; j < cols; j++) MM_EPILOGUE_ELEMENT(j);
        return;
    }
    VKG_CPU_INDEPENDENT_LOOP
    for (size_t j = 0; j < cols; j++) MM_EPILOGUE_ELEMENT(j);
}
#undef MM_EPILOGUE_ELEMENT

/* res: 0 none, 1 + R, 2 times silu(R) */
#define MM_EPILOGUE_ACT(act) \
    case act: \
        if (bias && res == 2) epilogue_row(act, 1, 2, c, s, bias, r, cols); \
        else if (bias && res == 1) epilogue_row(act, 1, 1, c, s, bias, r, cols); \
        else if (bias) epilogue_row(act, 1, 0, c, s, bias, r, cols); \
        else if (res == 2) epilogue_row(act, 0, 2, c, s, bias, r, cols); \
        else if (res == 1) epilogue_row(act, 0, 1, c, s, bias, r, cols); \
        else epilogue_row(act, 0, 0, c, s, bias, r, cols); \
        break;

/* The epilogue, in order: + bias[n], the activation, + R[m, n] (or times silu(R[m, n])); R is
 * read before C is written (R may be C).  acc[i * acc_stride + j] is the sum of element
 * (m0 + i, n0 + j). */
static void store(const vkg_matmul_params *p, const vkg_mm_view *v, const float *bias_all, size_t m0, size_t rows,
                  size_t n0, size_t cols, const float *acc, size_t acc_stride) {
    const float *bias = p->flags & VKG_MATMUL_BIAS ? bias_all + p->bias_offset + n0 : NULL;
    const int res = !v->r ? 0 : (p->flags & VKG_MATMUL_GATE) ? 2 : 1;
    for (size_t i = 0; i < rows; i++) {
        float *c = v->c + (m0 + i) * v->c_sm + n0;
        const float *r = v->r ? v->r + (m0 + i) * v->r_sm + n0 : NULL;
        const float *s = acc + i * acc_stride;
        switch (p->activation) {
#define VKG_ACTIVATION(NAME, name, code, epilogue) MM_EPILOGUE_ACT(VKG_UNARY_##NAME)
#include "params/unary_ops.def" /* every activation */
        default: /* VKG_UNARY_COPY: none (the plan check admits no other) */
            if (bias && res == 2) epilogue_row(VKG_UNARY_COPY, 1, 2, c, s, bias, r, cols);
            else if (bias && res == 1) epilogue_row(VKG_UNARY_COPY, 1, 1, c, s, bias, r, cols);
            else if (bias) epilogue_row(VKG_UNARY_COPY, 1, 0, c, s, bias, r, cols);
            else if (res == 2) epilogue_row(VKG_UNARY_COPY, 0, 2, c, s, bias, r, cols);
            else if (res == 1) epilogue_row(VKG_UNARY_COPY, 0, 1, c, s, bias, r, cols);
            else epilogue_row(VKG_UNARY_COPY, 0, 0, c, s, bias, r, cols);
            break;
        }
    }
}

/* ---- few rows, B's columns contiguous: B streamed row by row ------------------------------- */

/* acc[i * W + j] = sum over k < K of a[i * a_sm + k * a_sk] * B(k, j), j < W, for ROWS rows
 * (ROWS and T constants at each call); B(k, j) is element k * b_sk + j of b.  Four rows of B at
 * a time: each sum is loaded once, gets its four products in k order and is stored once; the
 * next four rows are prefetched meanwhile, a cache line at a time. */
INLINE void stream_rows(int ROWS, int T, const float *a, size_t a_sm, size_t a_sk, const void *b,
                        size_t b_sk, size_t K, size_t W, float *acc) {
    const size_t esize = T == VKG_MM_F32 ? 4 : 2;
    memset(acc, 0, (size_t)ROWS * W * sizeof(float));
    size_t k = 0;
    for (; k + 4 <= K; k += 4) {
        float as[PASS_ROWS][4];
        vf av[PASS_ROWS][4];
#pragma GCC unroll 4
        for (int i = 0; i < ROWS; i++)
#pragma GCC unroll 4
            for (int q = 0; q < 4; q++) {
                as[i][q] = a[i * a_sm + (k + q) * a_sk];
                av[i][q] = vset1(as[i][q]);
            }
        const size_t r0 = k * b_sk, r1 = r0 + b_sk, r2 = r1 + b_sk, r3 = r2 + b_sk;
        const int prefetch = k + 8 <= K;
        size_t j = 0;
        for (; j + VL <= W; j += VL) {
            if (prefetch && j * esize % 64 == 0) {
                __builtin_prefetch(b_at(T, b, r0 + 4 * b_sk + j));
                __builtin_prefetch(b_at(T, b, r1 + 4 * b_sk + j));
                __builtin_prefetch(b_at(T, b, r2 + 4 * b_sk + j));
                __builtin_prefetch(b_at(T, b, r3 + 4 * b_sk + j));
            }
            vf x0 = b_vec(T, b, r0 + j), x1 = b_vec(T, b, r1 + j);
            vf x2 = b_vec(T, b, r2 + j), x3 = b_vec(T, b, r3 + j);
#pragma GCC unroll 4
            for (int i = 0; i < ROWS; i++) {
                vf s = vload(acc + i * W + j);
                s = vmadd(av[i][0], x0, s);
                s = vmadd(av[i][1], x1, s);
                s = vmadd(av[i][2], x2, s);
                s = vmadd(av[i][3], x3, s);
                vstore(acc + i * W + j, s);
            }
        }
        for (; j < W; j++) {
            float x0 = b_one(T, b, r0 + j), x1 = b_one(T, b, r1 + j);
            float x2 = b_one(T, b, r2 + j), x3 = b_one(T, b, r3 + j);
            for (int i = 0; i < ROWS; i++) {
                float s = acc[i * W + j];
                s = sfma(as[i][0], x0, s);
                s = sfma(as[i][1], x1, s);
                s = sfma(as[i][2], x2, s);
                s = sfma(as[i][3], x3, s);
                acc[i * W + j] = s;
            }
        }
    }
    for (; k < K; k++)
        for (int i = 0; i < ROWS; i++) {
            const float aik = a[i * a_sm + k * a_sk];
            const vf av = vset1(aik);
            size_t j = 0;
            for (; j + VL <= W; j += VL)
                vstore(acc + i * W + j, vmadd(av, b_vec(T, b, k * b_sk + j), vload(acc + i * W + j)));
            for (; j < W; j++) acc[i * W + j] = sfma(aik, b_one(T, b, k * b_sk + j), acc[i * W + j]);
        }
}

INLINE void stream_any_rows(int T, size_t rows, const float *a, size_t a_sm, size_t a_sk, const void *b,
                            size_t b_sk, size_t K, size_t W, float *acc) {
    switch (rows) {
    case 1: stream_rows(1, T, a, a_sm, a_sk, b, b_sk, K, W, acc); break;
    case 2: stream_rows(2, T, a, a_sm, a_sk, b, b_sk, K, W, acc); break;
    case 3: stream_rows(3, T, a, a_sm, a_sk, b, b_sk, K, W, acc); break;
    default: stream_rows(4, T, a, a_sm, a_sk, b, b_sk, K, W, acc); break;
    }
}

/* ---- few rows, each column of B with its k contiguous: dot products --------------------------- */

/* A [N, K] B (Hugging Face's Linear weights, a tied head's [V, C] table) has each column's k
 * contiguous, so a column is one run of memory and an element a dot product: a vector of VL
 * consecutive weights is loaded (16-bit ones widened by one conversion: F16C's vcvtph2ps, or
 * bf16's zero-extension and shift), multiplied by the VL matching values of A's row, loaded as
 * they lie, and added into vector sums held in registers; one horizontal sum per element at the
 * end.  Summing in k order instead needs the columns transposed into vector lanes, 8 x 8 blocks
 * of 16-bit values through a dozen shuffles, all on x86's one shuffle port (port 5): that
 * transposition, measured as this path's alternative, held the decode of Llama-family models to
 * 15 GB/s of weights where memory gives 25-30; the dot products need no shuffle but the one
 * horizontal sum per element.
 *
 * Each element is split over DOT_LANES = 16 partial sums whatever the vector width (element k of
 * the row into sum k % 16, one fused or unfused multiply-add at a time in k order), which are then
 * added by halves (sum t + sum t + 8, then t + 4, t + 2, t + 1): AVX2 and AVX-512 give the same
 * bits, and neither the rows nor the columns that share a register block change any element's
 * arithmetic, so a row's result does not depend on M.  That is what a batch of sequences decoded
 * together needs (model_batch.c): every decode step's rows, 1 to VKG_BATCH_MAX_SEQ of them, take
 * this path (VKG_MM_DOT_ROWS), in passes of VKG_MM_DOT_PASS rows over each block of B. */
enum {
    DOT_LANES = VKG_MM_DOT_LANES,
    DV = DOT_LANES / VL, /* vectors of one element's partial sums */
    DOT_MAX_COLS = 4,
    /* bytes ahead of each band's reads that are prefetched: on 2 threads with one row and f16
       weights beyond any cache, about a fifth faster than without (4096 and 8192 did no
       better), the hardware prefetchers alone running behind the bands' reads */
    DOT_PREFETCH = 2048
};
_Static_assert(DOT_LANES % VL == 0, "an element's partial sums fill whole vectors");
_Static_assert(DOT_RB >= 1 && (int)DOT_RB <= (int)VKG_MM_DOT_PASS && (int)DOT_RB * (int)DV <= (int)DOT_SUMS,
               "a register block holds a column");

/* Columns of a register block of R rows (<= DOT_RB, the variant's): as many as its DOT_SUMS vector
 * sums hold, 1 to 4. */
#define DOT_COLS(R) \
    (DOT_SUMS / ((R) * DV) < 1 ? 1 : DOT_SUMS / ((R) * DV) > DOT_MAX_COLS ? DOT_MAX_COLS : DOT_SUMS / ((R) * DV))

/* One element's DV vectors of partial sums, added by halves (the order the top of this section
 * gives; vsum_halves carries it on within a vector). */
INLINE float dot_sum(vf x[DV]) {
#pragma GCC unroll 4
    for (int h = DV / 2; h >= 1; h /= 2)
#pragma GCC unroll 4
        for (int d = 0; d < h; d++) x[d] = vadd(x[d], x[d + h]);
    return vsum_halves(x[0]);
}

/* out[i * out_sm + c * out_sn] = the dot product of row i of A (a[i * a_sm + k * a_sk]) and column c
 * of B (element c * b_cn + k of b) over k < K, for i < ROWS, c < COLS (ROWS, COLS, T and AC
 * constants at each call; AC 1 when A's k is contiguous, a_sk == 1, else each 16 k of the one row
 * are gathered first).  Each B vector loaded serves the ROWS rows, each A vector the COLS columns.
 * The last K % 16 k go through zero-padded copies: 0 * 0 added to a partial sum leaves it as it is. */
INLINE void dot_group(int ROWS, int COLS, int T, int AC, const float *a, size_t a_sm, size_t a_sk, const void *b,
                      size_t b_cn, size_t K, float *out, size_t out_sm, size_t out_sn) {
    vf s[DOT_RB][DOT_MAX_COLS][DV];
#pragma GCC unroll 8
    for (int i = 0; i < ROWS; i++)
#pragma GCC unroll 4
        for (int c = 0; c < COLS; c++)
#pragma GCC unroll 4
            for (int d = 0; d < DV; d++) s[i][c][d] = vzero();
    size_t k = 0;
    for (; k + DOT_LANES <= K; k += DOT_LANES) {
        float ag[DOT_LANES];
        if (!AC)
            for (int q = 0; q < DOT_LANES; q++) ag[q] = a[(k + q) * a_sk];
#pragma GCC unroll 4
        for (int c = 0; c < COLS; c++) /* (past B's end near its last columns: a prefetch never faults) */
            __builtin_prefetch((const void *)((uintptr_t)b_at(T, b, c * b_cn + k) + DOT_PREFETCH));
#pragma GCC unroll 4
        for (int d = 0; d < DV; d++) {
            vf x[DOT_MAX_COLS];
#pragma GCC unroll 4
            for (int c = 0; c < COLS; c++) x[c] = b_vec(T, b, c * b_cn + k + d * VL);
#pragma GCC unroll 8
            for (int i = 0; i < ROWS; i++) {
                vf y = AC ? vload(a + i * a_sm + k + d * VL) : vload(ag + d * VL);
                vkeep(&y); /* one load of A for the COLS columns: the compiler would otherwise fold a
                              load into each multiply-add, and the loads, not the multiply-adds,
                              would bound AVX2's 3 x 2 block */
#pragma GCC unroll 4
                for (int c = 0; c < COLS; c++) s[i][c][d] = vmadd(y, x[c], s[i][c][d]);
            }
        }
    }
    if (k < K) {
        const size_t n = K - k;
        float at[DOT_RB][DOT_LANES];
#pragma GCC unroll 8
        for (int i = 0; i < ROWS; i++)
            for (size_t q = 0; q < DOT_LANES; q++) at[i][q] = q < n ? a[i * a_sm + (k + q) * a_sk] : 0.0f;
#pragma GCC unroll 4
        for (int c = 0; c < COLS; c++) {
            float bt[DOT_LANES];
            for (size_t q = 0; q < DOT_LANES; q++) bt[q] = q < n ? b_one(T, b, c * b_cn + k + q) : 0.0f;
#pragma GCC unroll 4
            for (int d = 0; d < DV; d++) {
                const vf x = vload(bt + d * VL);
#pragma GCC unroll 8
                for (int i = 0; i < ROWS; i++) s[i][c][d] = vmadd(vload(at[i] + d * VL), x, s[i][c][d]);
            }
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < ROWS; i++)
#pragma GCC unroll 4
        for (int c = 0; c < COLS; c++) out[i * out_sm + c * out_sn] = dot_sum(s[i][c]);
}

/* The columns [j, j + COLS) (c at j + c * cn, cn 0 for one column) of acc[i * W + j] for ROWS rows
 * (<= VKG_MM_DOT_PASS), in register blocks of RB rows (DOT_RB or fewer) and then the REST: the
 * block after the first reads the same columns again from L1. */
INLINE void dot_rows_at(int ROWS, int RB, int REST, int COLS, int T, const float *a, size_t a_sm, const void *b,
                        size_t b_sn, size_t K, size_t W, float *acc, size_t j, size_t cn) {
    for (int r = 0; r + RB <= ROWS; r += RB)
        dot_group(RB, COLS, T, 1, a + r * a_sm, a_sm, 1, b_at(T, b, j * b_sn), cn * b_sn, K, acc + r * W + j, W, cn);
    if (REST)
        dot_group(REST, COLS, T, 1, a + (ROWS - REST) * a_sm, a_sm, 1, b_at(T, b, j * b_sn), cn * b_sn, K,
                  acc + (ROWS - REST) * W + j, W, cn);
}

/* acc[i * W + j] = the dot product of row i of A (k contiguous) and column j of B (element j * b_sn
 * + k of b), i < ROWS (<= VKG_MM_DOT_PASS, a constant at each call), j < W.  A register block's
 * COLS columns are W / COLS apart, so each of them walks a band of consecutive columns, one long
 * run of memory that the prefetchers follow: neighbouring columns instead (COLS runs interleaved
 * in the same pages) read at two thirds of the speed, one row of f16 weights beyond any cache. */
INLINE void dot_rows(int ROWS, int T, const float *a, size_t a_sm, const void *b, size_t b_sn, size_t K, size_t W,
                     float *acc) {
    /* as few register blocks as DOT_RB allows, as even as they can be (4 rows: 2 + 2, not 3 + 1,
       whose one-row block converts as much of B for a third of the multiply-adds) */
    const int groups = (ROWS + DOT_RB - 1) / DOT_RB, RB = (ROWS + groups - 1) / groups, REST = ROWS % RB,
              COLS = DOT_COLS(RB);
    const size_t band = W / COLS;
    for (size_t j = 0; j < band; j++) dot_rows_at(ROWS, RB, REST, COLS, T, a, a_sm, b, b_sn, K, W, acc, j, band);
    for (size_t j = band * COLS; j < W; j++) dot_rows_at(ROWS, RB, REST, 1, T, a, a_sm, b, b_sn, K, W, acc, j, 0);
}

/* dot_rows for any rows (<= VKG_MM_DOT_PASS).  An A whose k is not contiguous (no model's graph has
 * one) goes one element at a time. */
INLINE void dot_any_rows(int T, size_t rows, const float *a, size_t a_sm, size_t a_sk, const void *b, size_t b_sn,
                         size_t K, size_t W, float *acc) {
    if (a_sk != 1) {
        for (size_t i = 0; i < rows; i++)
            for (size_t j = 0; j < W; j++)
                dot_group(1, 1, T, 0, a + i * a_sm, 0, a_sk, b_at(T, b, j * b_sn), 0, K, acc + i * W + j, 0, 0);
        return;
    }
    switch (rows) {
    case 1: dot_rows(1, T, a, a_sm, b, b_sn, K, W, acc); break;
    case 2: dot_rows(2, T, a, a_sm, b, b_sn, K, W, acc); break;
    case 3: dot_rows(3, T, a, a_sm, b, b_sn, K, W, acc); break;
    case 4: dot_rows(4, T, a, a_sm, b, b_sn, K, W, acc); break;
    case 5: dot_rows(5, T, a, a_sm, b, b_sn, K, W, acc); break;
    case 6: dot_rows(6, T, a, a_sm, b, b_sn, K, W, acc); break;
    case 7: dot_rows(7, T, a, a_sm, b, b_sn, K, W, acc); break;
    default: dot_rows(8, T, a, a_sm, b, b_sn, K, W, acc); break;
    }
}
_Static_assert(VKG_MM_DOT_PASS == 8, "dot_any_rows has a case for every count of rows in a pass");

/* One pass of `rows` rows of A from a over columns [n0, n0 + W) of B: stream_rows when B's
 * columns are contiguous, else (its k is) the dot products. */
INLINE void few_rows_pass(int T, const vkg_mm_view *v, size_t rows, const float *a, size_t n0, size_t K, size_t W,
                          float *acc) {
    if (v->b_sn == 1)
        stream_any_rows(T, rows, a, v->a_sm, v->a_sk, b_at(T, v->b, n0), v->b_sk, K, W, acc);
    else
        dot_any_rows(T, rows, a, v->a_sm, v->a_sk, b_at(T, v->b, n0 * v->b_sn), v->b_sn, K, W, acc);
}

/* Columns [n_lo, n_hi) of all M rows of one batch entry, in blocks of columns, a pass of rows at a
 * time over each block: PASS_ROWS rows when B's columns are contiguous (M <= VKG_MM_FEW_ROWS),
 * else VKG_MM_DOT_PASS (M <= VKG_MM_DOT_ROWS).  A block is as wide as the sums allow (the longer
 * each run or band read from B); on the dot-product path with more rows than one pass, at most
 * VKG_MM_DOT_BLOCK bytes of B, read from memory by the first pass and from L2 by the others. */
static void few_rows_block(const vkg_matmul_params *p, const vkg_mm_view *v, const float *bias, size_t n_lo,
                           size_t n_hi) {
    float acc[VKG_MM_STREAM_SUMS] ALIGNED;
    const int dot = v->b_sn != 1;
    const size_t pass_max = dot ? VKG_MM_DOT_PASS : PASS_ROWS;
    const size_t pass_rows = p->M < pass_max ? p->M : pass_max;
    size_t width = VKG_MM_STREAM_SUMS / pass_rows / 16 * 16; /* whole cache lines */
    if (dot && p->M > pass_rows) {
        const size_t esize = v->b_type == VKG_MM_F32 ? 4 : 2;
        const size_t cached = VKG_MM_DOT_BLOCK / ((size_t)p->K * esize + 1) / 16 * 16;
        width = cached < 16 ? 16 : cached < width ? cached : width;
    }
    for (size_t n0 = n_lo; n0 < n_hi; n0 += width) {
        const size_t W = n_hi - n0 < width ? n_hi - n0 : width;
        for (size_t m0 = 0; m0 < p->M; m0 += pass_rows) {
            const size_t rows = p->M - m0 < pass_rows ? p->M - m0 : pass_rows;
            const float *a = v->a + m0 * v->a_sm;
            switch (v->b_type) {
            case VKG_MM_F16: few_rows_pass(VKG_MM_F16, v, rows, a, n0, p->K, W, acc); break;
            case VKG_MM_BF16: few_rows_pass(VKG_MM_BF16, v, rows, a, n0, p->K, W, acc); break;
            default: few_rows_pass(VKG_MM_F32, v, rows, a, n0, p->K, W, acc); break;
            }
            store(p, v, bias, m0, rows, n0, W, acc, W);
        }
    }
}

/* Units [begin, end) on the few-rows paths: one row tile per batch entry, so consecutive units are
 * consecutive column tiles; each batch entry's run of them is done as one run of columns. */
static void few_rows(const vkg_matmul_params *p, const float *A, const void *B, float *C, const float *bias,
                     const float *R, size_t begin, size_t end) {
    const size_t tiles_n = (p->N + TILE_N - 1) / TILE_N;
    for (size_t unit = begin; unit < end;) {
        const size_t batch = unit / tiles_n, first = unit % tiles_n;
        const size_t last = end - batch * tiles_n < tiles_n ? end - batch * tiles_n : tiles_n;
        const size_t n_lo = first * TILE_N, n_hi = last * TILE_N < p->N ? last * TILE_N : p->N;
        const vkg_mm_view v = vkg_mm_view_of_batch(p, A, B, C, R, batch);
        few_rows_block(p, &v, bias, n_lo, n_hi);
        unit += last - first;
    }
}

/* ---- packed tiles ---------------------------------------------------------------------------- */

/* acc[i * acc_stride + 0:NR] (+)= sum over k < kc of a[i * a_sm + k] * pb[k * NR + 0:NR], i < ROWS
 * (a constant at each call, so the sums unroll into registers); first: the sums start from 0.  A
 * is read in place, one row per register row: each value is broadcast straight from memory into
 * its multiply-adds, and a row's cache line serves 16 k in turn. */
INLINE void micro(int ROWS, size_t kc, const float *a, size_t a_sm, const float *pb, float *acc,
                  size_t acc_stride, int first) {
    vf s[MR][NV];
    const float *ar[MR];
#pragma GCC unroll 16
    for (int i = 0; i < ROWS; i++) {
        ar[i] = a + i * a_sm;
#pragma GCC unroll 4
        for (int j = 0; j < NV; j++) s[i][j] = first ? vzero() : vload(acc + i * acc_stride + j * VL);
    }
    for (size_t k = 0; k < kc; k++) {
        vf x[NV];
#pragma GCC unroll 4
        for (int j = 0; j < NV; j++) x[j] = vload(pb + k * NR + j * VL);
#pragma GCC unroll 16
        for (int i = 0; i < ROWS; i++) {
            const vf ai = vset1(ar[i][k]);
#pragma GCC unroll 4
            for (int j = 0; j < NV; j++) s[i][j] = vmadd(ai, x[j], s[i][j]);
        }
    }
#pragma GCC unroll 16
    for (int i = 0; i < ROWS; i++)
#pragma GCC unroll 4
        for (int j = 0; j < NV; j++) vstore(acc + i * acc_stride + j * VL, s[i][j]);
}

/* rows <= MR: a micro-kernel unrolled for each count of rows (MR is an enum constant, so each
 * n >= MR case is dead code the compiler drops; a short strip never touches rows past its own). */
#define MM_ROWS_CASE(n) \
    if (n < MR && rows == n) { \
        micro(n < MR ? n : MR, kc, a, a_sm, pb, acc, acc_stride, first); \
        return; \
    }

_Static_assert(MR <= 12, "micro_any_rows has a case for every short strip");

static void micro_any_rows(size_t rows, size_t kc, const float *a, size_t a_sm, const float *pb, float *acc,
                           size_t acc_stride, int first) {
    MM_ROWS_CASE(1)
    MM_ROWS_CASE(2)
    MM_ROWS_CASE(3)
    MM_ROWS_CASE(4)
    MM_ROWS_CASE(5)
    MM_ROWS_CASE(6)
    MM_ROWS_CASE(7)
    MM_ROWS_CASE(8)
    MM_ROWS_CASE(9)
    MM_ROWS_CASE(10)
    MM_ROWS_CASE(11)
    micro(MR, kc, a, a_sm, pb, acc, acc_stride, first);
}

/* Rows [m0, m0 + rows) (rows <= MR) x k [k0, k0 + kc) of an A whose k is not contiguous, copied
 * into rows of kc: element (i, k) at pa[i * kc + k], so that the micro-kernel reads it as it
 * reads an A with contiguous k. */
static void pack_a_rows(const vkg_mm_view *v, size_t m0, size_t rows, size_t k0, size_t kc, float *pa) {
    const float *a = v->a + m0 * v->a_sm + k0 * v->a_sk;
    for (size_t k = 0; k < kc; k++)
        for (size_t i = 0; i < rows; i++) pa[i * kc + k] = a[i * v->a_sm + k * v->a_sk];
}

/* Columns [n0, n0 + cols) x k [k0, k0 + kc) of B (cols <= NR), widened to f32, into one strip:
 * element (k, j) at pb[k * NR + j], columns past cols zero. */
INLINE void pack_b_typed(int T, const vkg_mm_view *v, size_t k0, size_t kc, size_t n, size_t w, float *dst) {
    const void *b = v->b;
    const size_t sk = v->b_sk, sn = v->b_sn;
    if (sn == 1 && w == NR) {
        for (size_t k = 0; k < kc; k++)
#pragma GCC unroll 4
            for (int j = 0; j < NV; j++) vstore(dst + k * NR + j * VL, b_vec(T, b, (k0 + k) * sk + n + j * VL));
    } else if (sk == 1) {
        /* Column j's k run starts at element (n + j) * sn.  A band of BAND columns advances
         * together, 4 k at a time, and each of its columns is prefetched a few cache lines
         * ahead: the hardware follows that many streams poorly, and more of them at once (a
         * whole strip's 48) read slower still from memory, as a prompt's pass over the tied head does. */
        const size_t esize = T == VKG_MM_F32 ? 4 : 2, groups = w / 4 * 4;
        for (size_t g0 = 0; g0 < groups; g0 += BAND) {
            const size_t g1 = groups - g0 < BAND ? groups : g0 + BAND;
            for (size_t k = 0; k + 4 <= kc; k += 4) {
                if (k * esize % 64 == 0 && k + PREFETCH_K < kc)
                    for (size_t j = g0; j < g1; j++) __builtin_prefetch(b_at(T, b, (n + j) * sn + k0 + k + PREFETCH_K));
                for (size_t g = g0; g < g1; g += 4) {
                    const size_t c0 = (n + g) * sn + k0 + k;
                    mm_x4 r[4] = {b_x4(T, b, c0), b_x4(T, b, c0 + sn), b_x4(T, b, c0 + 2 * sn), b_x4(T, b, c0 + 3 * sn)};
                    transpose4(r);
#pragma GCC unroll 4
                    for (int q = 0; q < 4; q++) memcpy(dst + (k + q) * NR + g, &r[q], sizeof r[q]);
                }
            }
        }
        for (size_t k = kc / 4 * 4; k < kc; k++)
            for (size_t g = 0; g < groups; g++) dst[k * NR + g] = b_one(T, b, (n + g) * sn + k0 + k);
        for (size_t g = groups; g < NR; g++)
            for (size_t k = 0; k < kc; k++) dst[k * NR + g] = g < w ? b_one(T, b, (n + g) * sn + k0 + k) : 0.0f;
    } else {
        for (size_t k = 0; k < kc; k++)
            for (size_t j = 0; j < NR; j++) dst[k * NR + j] = j < w ? b_one(T, b, (k0 + k) * sk + (n + j) * sn) : 0.0f;
    }
}

static void pack_b(const vkg_mm_view *v, size_t k0, size_t kc, size_t n0, size_t cols, float *pb) {
    switch (v->b_type) {
    case VKG_MM_F16: pack_b_typed(VKG_MM_F16, v, k0, kc, n0, cols, pb); break;
    case VKG_MM_BF16: pack_b_typed(VKG_MM_BF16, v, k0, kc, n0, cols, pb); break;
    default: pack_b_typed(VKG_MM_F32, v, k0, kc, n0, cols, pb); break;
    }
}

/* Prefetches into L2 part `part` of `parts` of the cache lines that pack_b will read for columns
 * [n0, n0 + cols) x k [k0, k0 + kc): while one strip's products run, the next strip's B arrives
 * (its rows are a page or more apart, beyond the hardware prefetchers' reach). */
static void prefetch_b(const vkg_mm_view *v, size_t k0, size_t kc, size_t n0, size_t cols, size_t part,
                       size_t parts) {
    const size_t esize = v->b_type == VKG_MM_F32 ? 4 : 2;
    const char *b = v->b;
    if (v->b_sk == 1) { /* cols runs of kc elements, n0 + j at (n0 + j) * b_sn */
        const size_t lo = cols * part / parts, hi = cols * (part + 1) / parts;
        for (size_t j = lo; j < hi; j++)
            for (size_t off = 0; off < kc * esize; off += 64)
                __builtin_prefetch(b + ((n0 + j) * v->b_sn + k0) * esize + off, 0, 2);
    } else if (v->b_sn == 1) { /* kc runs of cols elements */
        const size_t lo = kc * part / parts, hi = kc * (part + 1) / parts;
        for (size_t k = lo; k < hi; k++)
            for (size_t off = 0; off < cols * esize; off += 64)
                __builtin_prefetch(b + ((k0 + k) * v->b_sk + n0) * esize + off, 0, 2);
    }
}

/* Prefetches rows [m0, m0 + rows) x k [k0, k0 + kc) of an A, a cache line at a time (rows of A
 * are far apart: the hardware prefetchers see short runs only). */
static void prefetch_a_rows(const vkg_mm_view *v, size_t m0, size_t rows, size_t k0, size_t kc) {
    if (v->a_sk != 1) return;
    for (size_t i = 0; i < rows; i++)
        for (size_t k = 0; k < kc; k += 16) __builtin_prefetch(v->a + (m0 + i) * v->a_sm + k0 + k);
}

/* Units [begin, end): output tiles, batch-major, then column tile, then row tile, so that a
 * contiguous run of units (what a thread gets) holds whole columns of tiles: a last row tile of a
 * few rows (T = 257: one) then costs every thread alike, where row-major order gave one thread
 * all the full tiles and the other the short ones, twice the time of T = 256.  A tile's rows
 * (all of M up to TILE_M: every row of a GPT-2 forward's matmuls up to T = 256) share each packed
 * strip of B, so B is packed once per TILE_M rows; A is read in place (k contiguous) or copied a
 * strip at a time.  Per block of k, per strip of NR columns, that strip of B is packed (it stays in
 * L1 while every row strip gets its products) and the next strip's B is prefetched meanwhile; the
 * sums wait in acc, in k order across blocks, and after the last block each MR x NR block of them
 * goes through the epilogue at once, while it is in L1.  (A few rows come here only with a B
 * that has neither its columns nor its k contiguous; up to VKG_MM_DOT_ROWS rows never with its k
 * contiguous.) */
static void tiles(const vkg_matmul_params *p, const float *A, const void *B, float *C, const float *bias,
                  const float *R, size_t begin, size_t end) {
    const size_t tiles_m = (p->M + TILE_M - 1) / TILE_M, tiles_n = (p->N + TILE_N - 1) / TILE_N;
    float acc[TILE_M * TILE_N] ALIGNED;
    float pa[MR * KC] ALIGNED;
    float pb[KC * NR] ALIGNED;
    const int prefetch_a = (double)(p->M < TILE_M ? p->M : TILE_M) * p->K * sizeof(float) > VKG_MM_A_CACHED;
    for (size_t unit = begin; unit < end; unit++) {
        const size_t batch = unit / (tiles_m * tiles_n), in_batch = unit % (tiles_m * tiles_n);
        const size_t n0 = in_batch / tiles_m * TILE_N, m0 = in_batch % tiles_m * TILE_M;
        const size_t rows = p->M - m0 < TILE_M ? p->M - m0 : TILE_M;
        const size_t cols = p->N - n0 < TILE_N ? p->N - n0 : TILE_N;
        const vkg_mm_view v = vkg_mm_view_of_batch(p, A, B, C, R, batch);
        if (p->K == 0) memset(acc, 0, sizeof acc);
        for (size_t k0 = 0; k0 < p->K; k0 += KC) {
            const size_t kc = p->K - k0 < KC ? p->K - k0 : KC;
            for (size_t t = 0; t < cols; t += NR) {
                const size_t w = cols - t < NR ? cols - t : NR;
                pack_b(&v, k0, kc, n0 + t, w, pb);
                /* the strip after this one (the next NR columns, else the next block of k) is
                 * fetched into L2 a part per row strip while this one's products run; not with
                 * few rows, where one strip's products are too short a time to cover it */
                const int next_cols = t + NR < cols, next_k = !next_cols && k0 + kc < p->K;
                const int prefetch_b_next = p->M > VKG_MM_FEW_ROWS && (next_cols || next_k);
                const size_t nk0 = next_k ? k0 + kc : k0, nt = next_cols ? t + NR : 0;
                const size_t nkc = p->K - nk0 < KC ? p->K - nk0 : KC;
                const size_t nw = cols - nt < NR ? cols - nt : NR, strips = (rows + MR - 1) / MR;
                for (size_t s = 0; s < rows; s += MR) {
                    const size_t r = rows - s < MR ? rows - s : MR;
                    if (prefetch_b_next) prefetch_b(&v, nk0, nkc, n0 + nt, nw, s / MR, strips);
                    float *sums = acc + s * TILE_N + t;
                    /* the first strip of columns brings this block of A in: the next row strip's
                     * part of it is fetched while this one's products run, when A is too big to
                     * stay in L2 from one tile to the next */
                    if (prefetch_a && t == 0 && s + MR < rows)
                        prefetch_a_rows(&v, m0 + s + MR, rows - s - MR < MR ? rows - s - MR : MR, k0, kc);
                    if (v.a_sk == 1) {
                        micro_any_rows(r, kc, v.a + (m0 + s) * v.a_sm + k0, v.a_sm, pb, sums, TILE_N, k0 == 0);
                    } else {
                        pack_a_rows(&v, m0 + s, r, k0, kc, pa);
                        micro_any_rows(r, kc, pa, kc, pb, sums, TILE_N, k0 == 0);
                    }
                    /* the last block of k: these sums are whole; C gets them while they are in L1 */
                    if (k0 + kc == p->K) store(p, &v, bias, m0 + s, r, n0 + t, w, sums, TILE_N);
                }
            }
        }
        if (p->K == 0) store(p, &v, bias, m0, rows, n0, cols, acc, TILE_N);
    }
}

void MM_NAME(const vkg_matmul_params *p, const float *A, const void *B, float *C, const float *bias,
             const float *R, size_t begin, size_t end) {
    if (p->b_stride_n == 1 ? p->M <= VKG_MM_FEW_ROWS : vkg_mm_dot_path(p))
        few_rows(p, A, B, C, bias, R, begin, end);
    else
        tiles(p, A, B, C, bias, R, begin, end);
}
