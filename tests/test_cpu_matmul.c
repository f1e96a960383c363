/* Tests of the CPU matmul kernel (src/cpu/kernel_matmul.c), called directly with hand-built
 * parameter blocks: against values worked out by hand, and bit for bit against the naive
 * reference in support/cpu_reference over shapes, layouts, batches, epilogues, the few-rows
 * paths and any split of the unit range over threads. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/kernels.h"
#include "cpu/threadpool.h"
#include "support/cpu_reference.h"
#include "vkgraph.h"

static void test_matmul_by_hand(void **state) {
    (void)state;
    /* [[1,2,3],[4,5,6]] @ [[1,0],[0,1],[1,1]] = [[4,5],[10,11]]; + bias [0.5, -1]. */
    const float A[] = {1, 2, 3, 4, 5, 6}, B[] = {1, 0, 0, 1, 1, 1}, bias[] = {0.5f, -1};
    float C[4];
    vkg_matmul_params p = ref_matmul_params(2, 2, 3);
    ref_run_matmul_kernel(NULL, &p, A, B, C, bias, NULL);
    assert_true(C[0] == 4 && C[1] == 5 && C[2] == 10 && C[3] == 11);
    p.flags = VKG_MATMUL_BIAS;
    ref_run_matmul_kernel(NULL, &p, A, B, C, bias, NULL);
    assert_true(C[0] == 4.5f && C[1] == 4 && C[2] == 10.5f && C[3] == 10);

    /* [1] @ [1, -1] -> gelu -> [0.841192, -0.158808] -> + R [10, 20]. */
    const float one[] = {1}, row[] = {1, -1}, R[] = {10, 20};
    float y[2];
    p = ref_matmul_params(1, 2, 1);
    p.flags = VKG_MATMUL_RESIDUAL;
    p.activation = VKG_UNARY_GELU;
    ref_run_matmul_kernel(NULL, &p, one, row, y, NULL, R);
    ref_assert_close(y[0], 10.841192, 1e-5);
    ref_assert_close(y[1], 19.841192, 1e-5);
}

/* Every shape and layout agrees bit for bit with the naive reference (same sums, same order). */
static void test_matmul_shapes_and_transposes(void **state) {
    (void)state;
    static const uint32_t shapes[][3] = {{1, 1, 1},  {1, 7, 13},   {7, 13, 31}, {13, 31, 7},
                                         {31, 7, 13}, {33, 65, 17}, {65, 33, 100}, {3, 129, 300},
                                         {1, 200, 513}, {70, 3, 5},  {8, 16, 0}};
    vkg_rng rng;
    vkg_rng_seed(&rng, 7);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        uint32_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
        for (int layout = 0; layout < 4; layout++) {
            const uint32_t off = 3; /* every operand starts a few elements into its buffer */
            float *A = ref_checked_floats(&rng, off + (size_t)M * K, 1);
            float *B = ref_checked_floats(&rng, off + (size_t)K * N, 1);
            float *C = calloc(off + (size_t)M * N, sizeof *C), *want = calloc(off + (size_t)M * N, sizeof *want);
            vkg_matmul_params p = ref_matmul_params(M, N, K);
            p.a_offset = p.b_offset = p.c_offset = off;
            if (layout & 1) p.a_stride_m = 1, p.a_stride_k = M;  /* A stored as [K, M] */
            if (layout & 2) p.b_stride_k = 1, p.b_stride_n = K;  /* B stored as [N, K] */
            ref_run_matmul_kernel(NULL, &p, A, B, C, NULL, NULL);
            ref_matmul(&p, A, B, want, NULL, NULL);
            assert_memory_equal(C, want, (off + (size_t)M * N) * sizeof *C);
            free(A), free(B), free(C), free(want);
        }
    }
}

static void test_matmul_batch_broadcast(void **state) {
    (void)state;
    enum { B0 = 2, B1 = 3, M = 5, N = 6, K = 7 };
    vkg_rng rng;
    vkg_rng_seed(&rng, 11);
    float *A = ref_checked_floats(&rng, B1 * M * K, 1), *B = ref_checked_floats(&rng, B0 * B1 * K * N, 1);
    float C[B0 * B1 * M * N], want[B0 * B1 * M * N], one[M * N];
    vkg_matmul_params p = ref_matmul_params(M, N, K);
    p.batch0 = B0, p.batch1 = B1;
    p.a_stride_b0 = 0, p.a_stride_b1 = M * K; /* A is shared by every b0 */
    p.b_stride_b0 = B1 * K * N, p.b_stride_b1 = K * N;
    p.c_stride_b0 = B1 * M * N, p.c_stride_b1 = M * N;
    ref_run_matmul_kernel(NULL, &p, A, B, C, NULL, NULL);
    ref_matmul(&p, A, B, want, NULL, NULL);
    assert_memory_equal(C, want, sizeof C);

    /* Batch entry (1, 2) is the plain product of A[2] and B[1, 2]. */
    vkg_matmul_params single = ref_matmul_params(M, N, K);
    ref_run_matmul_kernel(NULL, &single, A + 2 * M * K, B + (1 * B1 + 2) * K * N, one, NULL, NULL);
    assert_memory_equal(one, C + (1 * B1 + 2) * M * N, sizeof one);
    free(A), free(B);
}

/* Every activation the epilogue applies, in the order of the epilogues in matmul tests. */
static const uint32_t activations[] = {VKG_UNARY_COPY, VKG_UNARY_GELU, VKG_UNARY_GELU_ERF, VKG_UNARY_QUICK_GELU,
                                       VKG_UNARY_SILU, VKG_UNARY_RELU};
#define N_ACTIVATIONS (sizeof activations / sizeof activations[0])

static void test_matmul_epilogues(void **state) {
    (void)state;
    enum { M = 13, N = 31, K = 7, R_STRIDE = 40 };
    vkg_rng rng;
    vkg_rng_seed(&rng, 3);
    float *A = ref_checked_floats(&rng, M * K, 1), *B = ref_checked_floats(&rng, K * N, 1);
    float *bias = ref_checked_floats(&rng, N + 5, 1), *R = ref_checked_floats(&rng, 2 + M * R_STRIDE, 1);
    static const uint32_t flag_sets[] = {0, VKG_MATMUL_BIAS, VKG_MATMUL_RESIDUAL,
                                         VKG_MATMUL_BIAS | VKG_MATMUL_RESIDUAL};
    for (size_t f = 0; f < 4; f++) {
        const uint32_t flags = flag_sets[f];
        for (size_t a = 0; a < N_ACTIVATIONS; a++) {
            float C[M * N], want[M * N];
            vkg_matmul_params p = ref_matmul_params(M, N, K);
            p.flags = flags, p.activation = activations[a], p.bias_offset = 5, p.r_offset = 2, p.r_stride_m = R_STRIDE;
            ref_run_matmul_kernel(NULL, &p, A, B, C, bias, R);
            ref_matmul(&p, A, B, want, bias, R);
            assert_memory_equal(C, want, sizeof C);
            if (flags == VKG_MATMUL_BIAS) { /* against the activation in double */
                float plain[M * N];
                p.activation = VKG_UNARY_COPY;
                ref_run_matmul_kernel(NULL, &p, A, B, plain, bias, NULL);
                for (int i = 0; i < M * N; i++) ref_assert_close(C[i], ref_activation(activations[a], plain[i]), 1e-6);
            }
        }
    }
    free(A), free(B), free(bias), free(R);
}

/* R is C itself: C = A @ B + C. */
static void test_matmul_in_place_residual(void **state) {
    (void)state;
    enum { M = 31, N = 70, K = 9 };
    vkg_rng rng;
    vkg_rng_seed(&rng, 5);
    float *A = ref_checked_floats(&rng, M * K, 1), *B = ref_checked_floats(&rng, K * N, 1);
    float *C = ref_checked_floats(&rng, M * N, 1), old[M * N], want[M * N];
    memcpy(old, C, sizeof old);
    vkg_matmul_params p = ref_matmul_params(M, N, K);
    p.flags = VKG_MATMUL_RESIDUAL;
    ref_matmul(&p, A, B, want, NULL, old);
    ref_run_matmul_kernel(NULL, &p, A, B, C, NULL, C);
    assert_memory_equal(C, want, sizeof want);
    free(A), free(B), free(C);
}

static void test_matmul_threads_bit_identical(void **state) {
    (void)state;
    static const uint32_t shapes[][3] = {{37, 70, 300}, {1, 200, 64}, {64, 128, 32}};
    vkg_rng rng;
    vkg_rng_seed(&rng, 9);
    for (size_t s = 0; s < 3; s++) {
        uint32_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
        float *A = ref_checked_floats(&rng, 2 * (size_t)M * K, 1), *B = ref_checked_floats(&rng, (size_t)K * N, 1);
        float *bias = ref_checked_floats(&rng, N, 1), *R = ref_checked_floats(&rng, 2 * (size_t)M * N, 1);
        float *C[4];
        vkg_matmul_params p = ref_matmul_params(M, N, K);
        p.batch1 = 2, p.a_stride_b1 = M * K, p.c_stride_b1 = M * N, p.r_stride_b1 = M * N;
        p.flags = VKG_MATMUL_BIAS | VKG_MATMUL_RESIDUAL;
        p.activation = VKG_UNARY_GELU_ERF;
        for (int threads = 0; threads <= 3; threads++) {
            C[threads] = calloc(2 * (size_t)M * N, sizeof(float));
            vkg_threadpool *pool = threads ? vkg_threadpool_new(threads) : NULL;
            ref_run_matmul_kernel(pool, &p, A, B, C[threads], bias, R);
            vkg_threadpool_free(pool);
            if (threads) assert_memory_equal(C[threads], C[0], 2 * (size_t)M * N * sizeof(float));
        }
        for (int i = 0; i < 4; i++) free(C[i]);
        free(A), free(B), free(bias), free(R);
    }
}

/* One product of the few-rows sweep below: batch1 = 2 entries (A and B per entry), an offset
 * on every operand, B stored [K, N] or (transposed) [N, K], A [M, K] or [K, M], and the given
 * epilogue; run whole, and over pools of 1, 2 and 3 threads, each bit-identical to ref_matmul. */
static void few_rows_case(vkg_rng *rng, vkg_threadpool *const pools[3], uint32_t M, uint32_t N,
                          uint32_t K, int b_transposed, int a_transposed, uint32_t flags, uint32_t activation) {
    const uint32_t off = 5, B1 = 2;
    size_t a_n = off + (size_t)B1 * M * K, b_n = off + (size_t)B1 * K * N, c_n = off + (size_t)B1 * M * N;
    float *A = ref_checked_floats(rng, a_n, 1), *B = ref_checked_floats(rng, b_n, 1);
    float *bias = ref_checked_floats(rng, off + N, 1), *R = ref_checked_floats(rng, c_n, 1);
    float *C = calloc(c_n, sizeof *C), *want = calloc(c_n, sizeof *want);
    assert_non_null(C), assert_non_null(want);
    vkg_matmul_params p = ref_matmul_params(M, N, K);
    p.batch1 = B1, p.flags = flags, p.activation = activation;
    p.a_offset = p.b_offset = p.c_offset = p.r_offset = p.bias_offset = off;
    p.a_stride_b1 = M * K, p.b_stride_b1 = K * N, p.c_stride_b1 = p.r_stride_b1 = M * N;
    if (a_transposed) p.a_stride_m = 1, p.a_stride_k = M;
    if (b_transposed) p.b_stride_k = 1, p.b_stride_n = K;
    ref_matmul(&p, A, B, want, bias, R);
    for (int t = -1; t < 3; t++) {
        memset(C, 0, c_n * sizeof *C);
        ref_run_matmul_kernel(t < 0 ? NULL : pools[t], &p, A, B, C, bias, R);
        assert_memory_equal(C, want, c_n * sizeof *C);
    }
    free(A), free(B), free(bias), free(R), free(C), free(want);
}

/* The few-rows paths (decoding: M = 1 and a handful) against the naive reference, bit for bit:
 * every column remainder (N mod 4, mod 8, mod a tile), k remainders and the prefetch boundary,
 * both B layouts, every epilogue, the row-pass boundaries (M = 4, 5, 8, 16) and the first M
 * that takes the tiled path (17). */
static void test_matmul_few_rows_exact(void **state) {
    (void)state;
    static const uint32_t Ms[] = {1, 2, 3, 4, 5, 8, 17}, Ns[] = {1, 7, 8, 9, 13, 33, 1000},
                          Ks[] = {1, 5, 64, 77, 300};
    vkg_threadpool *pools[3];
    for (int t = 0; t < 3; t++) assert_non_null(pools[t] = vkg_threadpool_new(t + 1));
    vkg_rng rng;
    vkg_rng_seed(&rng, 21);
    unsigned combo = 0;
    for (size_t m = 0; m < sizeof Ms / sizeof Ms[0]; m++)
        for (size_t n = 0; n < sizeof Ns / sizeof Ns[0]; n++)
            for (size_t k = 0; k < sizeof Ks / sizeof Ks[0]; k++)
                for (int bt = 0; bt < 2; bt++, combo++)
                    few_rows_case(&rng, pools, Ms[m], Ns[n], Ks[k], bt, combo % 3 == 0,
                                  (combo & 1 ? VKG_MATMUL_BIAS : 0) | (combo & 2 ? VKG_MATMUL_RESIDUAL : 0),
                                  activations[combo % N_ACTIVATIONS]);
    /* Wider than one block of the contiguous-columns path (2048 columns at 4 rows). */
    few_rows_case(&rng, pools, 5, 4500, 9, 0, 0, VKG_MATMUL_BIAS | VKG_MATMUL_RESIDUAL, VKG_UNARY_COPY);
    few_rows_case(&rng, pools, 1, 8200, 6, 0, 1, 0, VKG_UNARY_GELU);
    few_rows_case(&rng, pools, 16, 33, 77, 1, 1, VKG_MATMUL_BIAS, VKG_UNARY_SILU);
    for (int t = 0; t < 3; t++) vkg_threadpool_free(pools[t]);
}

/* With one row, the parallel units still cover the columns; and any cut of the unit range
 * gives the same bits as one call (runs that start and end mid-batch, single units). */
static void test_matmul_few_rows_any_split(void **state) {
    (void)state;
    enum { M = 3, N = 1000, K = 70, B1 = 2 };
    vkg_matmul_params one_row = ref_matmul_params(1, 50257, 768);
    assert_int_equal(vkg_cpu_matmul_units(&one_row), (50257 + VKG_CPU_MATMUL_TILE_N - 1) / VKG_CPU_MATMUL_TILE_N);
    vkg_rng rng;
    vkg_rng_seed(&rng, 23);
    float *A = ref_checked_floats(&rng, B1 * M * K, 1), *B = ref_checked_floats(&rng, K * N, 1);
    float *whole = calloc(B1 * M * N, sizeof(float)), *cut = calloc(B1 * M * N, sizeof(float));
    for (int bt = 0; bt < 2; bt++) {
        vkg_matmul_params p = ref_matmul_params(M, N, K);
        p.batch1 = B1, p.a_stride_b1 = M * K, p.c_stride_b1 = M * N; /* B shared by both entries */
        if (bt) p.b_stride_k = 1, p.b_stride_n = K;
        size_t units = vkg_cpu_matmul_units(&p);
        vkg_cpu_matmul(&p, A, B, whole, NULL, NULL, 0, units);
        for (size_t step = 1; step <= 7; step += 3) {
            memset(cut, 0, B1 * M * N * sizeof(float));
            for (size_t u = 0; u < units; u += step)
                vkg_cpu_matmul(&p, A, B, cut, NULL, NULL, u, u + step < units ? u + step : units);
            assert_memory_equal(cut, whole, B1 * M * N * sizeof(float));
        }
    }
    free(A), free(B), free(whole), free(cut);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matmul_by_hand),
        cmocka_unit_test(test_matmul_shapes_and_transposes),
        cmocka_unit_test(test_matmul_batch_broadcast),
        cmocka_unit_test(test_matmul_epilogues),
        cmocka_unit_test(test_matmul_in_place_residual),
        cmocka_unit_test(test_matmul_threads_bit_identical),
        cmocka_unit_test(test_matmul_few_rows_exact),
        cmocka_unit_test(test_matmul_few_rows_any_split),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
