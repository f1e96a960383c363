/* Tests of the CPU matmul kernel (src/cpu/kernel_matmul.c), called directly with hand-built
 * parameter blocks, for every variant this machine runs (the portable one always): against values
 * worked out by hand; bit for bit against the naive reference in support/cpu_reference summed the
 * variant's way (unfused for the portable variant, fmaf for the others) over shapes, layouts,
 * batches, epilogues, 16-bit B, the few-rows paths and any split of the unit range over threads;
 * and within float rounding of the product computed in double. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/kernels.h"
#include "cpu/matmul_variant.h"
#include "cpu/threadpool.h"
#include "io/safetensors.h"
#include "support/cpu_reference.h"
#include "vkgraph.h"

/* The variants under test: every one this machine runs. */
static int variants[VKG_CPU_MATMUL_VARIANTS], n_variants;

static int find_variants(void **state) {
    (void)state;
    n_variants = 0;
    for (int v = 0; v < VKG_CPU_MATMUL_VARIANTS; v++)
        if (vkg_cpu_matmul_variant_runs(v)) variants[n_variants++] = v;
    printf("matmul variants on this CPU:");
    for (int i = 0; i < n_variants; i++) printf(" %s", vkg_cpu_matmul_variant_name(variants[i]));
    printf(" (best: %s)\n", vkg_cpu_matmul_variant_name(vkg_cpu_matmul_best_variant()));
    return n_variants >= 1 && variants[0] == VKG_CPU_MATMUL_PORTABLE ? 0 : -1;
}

static void test_matmul_variants_known(void **state) {
    (void)state;
    assert_true(vkg_cpu_matmul_variant_runs(VKG_CPU_MATMUL_PORTABLE));
    assert_true(vkg_cpu_matmul_variant_runs(vkg_cpu_matmul_best_variant()));
    assert_false(vkg_cpu_matmul_variant_runs(VKG_CPU_MATMUL_VARIANTS));
    assert_false(vkg_cpu_matmul_variant_runs(-1));
    assert_string_equal(vkg_cpu_matmul_variant_name(VKG_CPU_MATMUL_AVX512), "avx512");
    /* a better variant that runs is always the one chosen */
    for (int i = 0; i < n_variants; i++) assert_true(variants[i] <= vkg_cpu_matmul_best_variant());
}

/* 1 when /proc/cpuinfo's first flags line lists every flag named (space-separated); -1 when it
 * cannot be read. */
static int cpuinfo_has(const char *flags) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return -1;
    static char line[8192];
    int found = -1;
    while (found < 0 && fgets(line, sizeof line, f))
        if (!strncmp(line, "flags", 5)) found = 1;
    fclose(f);
    if (found < 0) return -1;
    char want[256];
    snprintf(want, sizeof want, "%s", flags);
    for (char *save = NULL, *w = strtok_r(want, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
        char word[64];
        snprintf(word, sizeof word, " %s", w); /* a whole flag: " fma" followed by a space or newline */
        const char *at = line;
        int here = 0;
        while (!here && (at = strstr(at, word)) != NULL) {
            at += strlen(word);
            here = *at == ' ' || *at == '\n';
        }
        if (!here) return 0;
    }
    return 1;
}

/* The variants' CPU features, read from cpuid and xgetbv, are those Linux reports (it lists AVX
 * and AVX-512 only where it saves their registers). */
static void test_cpu_features_match_linux(void **state) {
    (void)state;
#if defined(__x86_64__)
    const int avx2 = cpuinfo_has("avx2 fma f16c"), avx512 = cpuinfo_has("avx512f avx512bw avx512dq avx512vl");
    if (avx2 < 0) skip();
    printf("cpuinfo: avx2+fma+f16c %d, avx512 f/bw/dq/vl %d; variants avx2 %d, avx512 %d\n", avx2, avx512,
           vkg_cpu_matmul_variant_runs(VKG_CPU_MATMUL_AVX2), vkg_cpu_matmul_variant_runs(VKG_CPU_MATMUL_AVX512));
    assert_int_equal(vkg_cpu_matmul_variant_runs(VKG_CPU_MATMUL_AVX2), avx2);
    assert_int_equal(vkg_cpu_matmul_variant_runs(VKG_CPU_MATMUL_AVX512), avx2 && avx512);
#else
    skip();
#endif
}

/* n values of B as 16-bit numbers (VKG_MATMUL_B_F16 or _BF16 in flags) rounded from random floats
 * in [-scale, scale), or as floats (flags without either). */
static void *random_b(vkg_rng *rng, size_t n, float scale, uint32_t flags) {
    float *f = ref_checked_floats(rng, n, scale);
    if (!(flags & (VKG_MATMUL_B_F16 | VKG_MATMUL_B_BF16))) return f;
    uint16_t *h = malloc((n ? n : 1) * sizeof *h);
    assert_non_null(h);
    for (size_t i = 0; i < n; i++) h[i] = flags & VKG_MATMUL_B_F16 ? vkg_f32_to_f16(f[i]) : vkg_f32_to_bf16(f[i]);
    free(f);
    return h;
}

/* The reference results of one product, summed each way (index: fused), each computed when first
 * asked for. */
typedef struct expected {
    float *want[2];
} expected;

static void expected_free(expected *e) { free(e->want[0]), free(e->want[1]); }

/* Runs variant v on pool (NULL: one call) into C (c_n floats, zeroed first) and asserts it is bit
 * for bit the reference summed the variant's way. */
static void expect_exact(expected *e, int v, vkg_threadpool *pool, const vkg_matmul_params *p, const float *A,
                         const void *B, float *C, size_t c_n, const float *bias, const float *R) {
    const int fused = ref_matmul_fused(v);
    if (!e->want[fused]) {
        assert_non_null(e->want[fused] = calloc(c_n ? c_n : 1, sizeof(float)));
        ref_matmul(p, fused, A, B, e->want[fused], bias, R);
    }
    memset(C, 0, c_n * sizeof *C);
    ref_run_matmul_kernel(pool, v, p, A, B, C, bias, R);
    if (memcmp(C, e->want[fused], c_n * sizeof *C) != 0)
        fail_msg("variant %s differs from the reference (%ux%ux%u)", vkg_cpu_matmul_variant_name(v), p->M, p->N, p->K);
}

/* expect_exact for one run. */
static void expect_exact_once(int v, vkg_threadpool *pool, const vkg_matmul_params *p, const float *A, const void *B,
                              float *C, size_t c_n, const float *bias, const float *R) {
    expected e = {{NULL, NULL}};
    expect_exact(&e, v, pool, p, A, B, C, c_n, bias, R);
    expected_free(&e);
}

static void test_matmul_by_hand(void **state) {
    (void)state;
    for (int i = 0; i < n_variants; i++) {
        const int v = variants[i];
        /* [[1,2,3],[4,5,6]] @ [[1,0],[0,1],[1,1]] = [[4,5],[10,11]]; + bias [0.5, -1]. */
        const float A[] = {1, 2, 3, 4, 5, 6}, B[] = {1, 0, 0, 1, 1, 1}, bias[] = {0.5f, -1};
        float C[4];
        vkg_matmul_params p = ref_matmul_params(2, 2, 3);
        ref_run_matmul_kernel(NULL, v, &p, A, B, C, bias, NULL);
        assert_true(C[0] == 4 && C[1] == 5 && C[2] == 10 && C[3] == 11);
        p.flags = VKG_MATMUL_BIAS;
        ref_run_matmul_kernel(NULL, v, &p, A, B, C, bias, NULL);
        assert_true(C[0] == 4.5f && C[1] == 4 && C[2] == 10.5f && C[3] == 10);
        /* the same B in f16 and bf16 (every value exact in both) */
        const uint16_t B16[] = {0x3c00, 0, 0, 0x3c00, 0x3c00, 0x3c00}, Bb16[] = {0x3f80, 0, 0, 0x3f80, 0x3f80, 0x3f80};
        p.flags = VKG_MATMUL_B_F16;
        ref_run_matmul_kernel(NULL, v, &p, A, B16, C, NULL, NULL);
        assert_true(C[0] == 4 && C[1] == 5 && C[2] == 10 && C[3] == 11);
        p.flags = VKG_MATMUL_B_BF16 | VKG_MATMUL_BIAS;
        ref_run_matmul_kernel(NULL, v, &p, A, Bb16, C, bias, NULL);
        assert_true(C[0] == 4.5f && C[1] == 4 && C[2] == 10.5f && C[3] == 10);

        /* [1] @ [1, -1] -> gelu -> [0.841192, -0.158808] -> + R [10, 20]. */
        const float one[] = {1}, row[] = {1, -1}, R[] = {10, 20};
        float y[2];
        p = ref_matmul_params(1, 2, 1);
        p.flags = VKG_MATMUL_RESIDUAL;
        p.activation = VKG_UNARY_GELU;
        ref_run_matmul_kernel(NULL, v, &p, one, row, y, NULL, R);
        ref_assert_close(y[0], 10.841192, 1e-5);
        ref_assert_close(y[1], 19.841192, 1e-5);
    }
}

/* Shapes dividing no tile or register block (1, primes, one past and one short of the tile and
 * block sizes, K past several blocks of k), each layout of A and B, f32 and 16-bit B: bit for bit
 * the reference, and within rounding of the double product. */
static void test_matmul_shapes_and_transposes(void **state) {
    (void)state;
    static const uint32_t shapes[][3] = {{1, 1, 1},    {1, 7, 13},     {7, 13, 31},   {13, 31, 7},   {31, 7, 13},
                                         {33, 65, 17}, {65, 33, 100},  {3, 129, 300}, {1, 200, 513}, {70, 3, 5},
                                         {8, 16, 0},   {97, 131, 257}, {96, 128, 256}, {95, 127, 1025},
                                         {17, 33, 1},  {191, 257, 19}, {12, 32, 16},  {13, 31, 600},
                                         /* about the 256 x 96 tiles, 48-column strips, 128-k blocks */
                                         {257, 97, 129}, {255, 49, 127}, {9, 47, 385}, {264, 95, 20}};
    static const uint32_t types[] = {0, VKG_MATMUL_B_F16, VKG_MATMUL_B_BF16};
    vkg_rng rng;
    vkg_rng_seed(&rng, 7);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const uint32_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
        for (int layout = 0; layout < 4; layout++)
            for (size_t t = 0; t < 3; t++) {
                if (t && layout != 2 && s % 3) continue; /* 16-bit B: every shape with B [N, K], a third with all */
                const uint32_t off = 3; /* every operand starts a few elements into its buffer */
                float *A = ref_checked_floats(&rng, off + (size_t)M * K, 1);
                void *B = random_b(&rng, off + (size_t)K * N, 1, types[t]);
                const size_t c_n = off + (size_t)M * N;
                float *C = calloc(c_n, sizeof *C);
                vkg_matmul_params p = ref_matmul_params(M, N, K);
                p.a_offset = p.b_offset = p.c_offset = off;
                p.flags = types[t];
                if (layout & 1) p.a_stride_m = 1, p.a_stride_k = M; /* A stored as [K, M] */
                if (layout & 2) p.b_stride_k = 1, p.b_stride_n = K; /* B stored as [N, K] */
                expected e = {{NULL, NULL}};
                for (int i = 0; i < n_variants; i++) {
                    expect_exact(&e, variants[i], NULL, &p, A, B, C, c_n, NULL, NULL);
                    ref_matmul_check_f64(&p, A, B, C, NULL, NULL, 1);
                }
                expected_free(&e);
                free(A), free(B), free(C);
            }
    }
}

/* Batches: A broadcast over b0 (stride 0), B per entry, or B broadcast and strided in both
 * dimensions (neither k nor n contiguous). */
static void test_matmul_batch_broadcast(void **state) {
    (void)state;
    enum { B0 = 2, B1 = 3, M = 5, N = 6, K = 7 };
    vkg_rng rng;
    vkg_rng_seed(&rng, 11);
    float *A = ref_checked_floats(&rng, B1 * M * K, 1), *B = ref_checked_floats(&rng, 2 * B0 * B1 * K * N, 1);
    float C[B0 * B1 * M * N], one[M * N];
    for (int i = 0; i < n_variants; i++) {
        const int v = variants[i];
        vkg_matmul_params p = ref_matmul_params(M, N, K);
        p.batch0 = B0, p.batch1 = B1;
        p.a_stride_b0 = 0, p.a_stride_b1 = M * K; /* A is shared by every b0 */
        p.b_stride_b0 = B1 * K * N, p.b_stride_b1 = K * N;
        p.c_stride_b0 = B1 * M * N, p.c_stride_b1 = M * N;
        expect_exact_once(v, NULL, &p, A, B, C, B0 * B1 * M * N, NULL, NULL);

        /* Batch entry (1, 2) is the plain product of A[2] and B[1, 2]. */
        vkg_matmul_params single = ref_matmul_params(M, N, K);
        ref_run_matmul_kernel(NULL, v, &single, A + 2 * M * K, B + (1 * B1 + 2) * K * N, one, NULL, NULL);
        assert_memory_equal(one, C + (1 * B1 + 2) * M * N, sizeof one);

        /* B broadcast over b1, its k 2N apart and n 2 apart (every other element). */
        p.b_stride_b1 = 0, p.b_stride_k = 2 * N, p.b_stride_n = 2, p.b_stride_b0 = 2 * K * N;
        expect_exact_once(v, NULL, &p, A, B, C, B0 * B1 * M * N, NULL, NULL);
        ref_matmul_check_f64(&p, A, B, C, NULL, NULL, 1);
    }
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
    float *A = ref_checked_floats(&rng, 2 * M * K, 1), *B = ref_checked_floats(&rng, K * N, 1);
    float *bias = ref_checked_floats(&rng, N + 5, 1), *R = ref_checked_floats(&rng, 2 + M * R_STRIDE, 1);
    static const uint32_t flag_sets[] = {0, VKG_MATMUL_BIAS, VKG_MATMUL_RESIDUAL, VKG_MATMUL_BIAS | VKG_MATMUL_RESIDUAL};
    for (int i = 0; i < n_variants; i++)
        for (int rows = 0; rows < 2; rows++) /* M rows: the tiles; 3 rows: the few-rows path */
            for (size_t f = 0; f < 4; f++) {
                const uint32_t flags = flag_sets[f];
                for (size_t a = 0; a < N_ACTIVATIONS; a++) {
                    float C[2 * M * N];
                    vkg_matmul_params p = ref_matmul_params(rows ? 3 : M, N, K);
                    p.flags = flags, p.activation = activations[a], p.bias_offset = 5, p.r_offset = 2,
                    p.r_stride_m = R_STRIDE;
                    expect_exact_once(variants[i], NULL, &p, A, B, C, p.M * N, bias, R);
                    ref_matmul_check_f64(&p, A, B, C, bias, R, 1);
                    if (flags == VKG_MATMUL_BIAS) { /* against the activation in double */
                        float plain[2 * M * N];
                        p.activation = VKG_UNARY_COPY;
                        ref_run_matmul_kernel(NULL, variants[i], &p, A, B, plain, bias, NULL);
                        for (uint32_t e = 0; e < p.M * N; e++)
                            ref_assert_close(C[e], ref_activation(activations[a], plain[e]), 1e-6);
                    }
                }
            }
    free(A), free(B), free(bias), free(R);
}

/* R is C itself: C = A @ B + C, on the tiles and on both few-rows paths. */
static void test_matmul_in_place_residual(void **state) {
    (void)state;
    static const uint32_t shapes[][3] = {{31, 70, 9}, {3, 70, 9}, {100, 130, 300}};
    vkg_rng rng;
    vkg_rng_seed(&rng, 5);
    for (size_t s = 0; s < 3; s++)
        for (int bt = 0; bt < 2; bt++)
            for (int i = 0; i < n_variants; i++) {
                const uint32_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
                float *A = ref_checked_floats(&rng, (size_t)M * K, 1), *B = ref_checked_floats(&rng, (size_t)K * N, 1);
                float *C = ref_checked_floats(&rng, (size_t)M * N, 1), *old = malloc((size_t)M * N * sizeof *old);
                float *want = malloc((size_t)M * N * sizeof *want);
                assert_true(old && want);
                memcpy(old, C, (size_t)M * N * sizeof *C);
                vkg_matmul_params p = ref_matmul_params(M, N, K);
                p.flags = VKG_MATMUL_RESIDUAL | VKG_MATMUL_BIAS;
                p.activation = VKG_UNARY_GELU;
                if (bt) p.b_stride_k = 1, p.b_stride_n = K;
                ref_matmul(&p, ref_matmul_fused(variants[i]), A, B, want, old, old);
                ref_run_matmul_kernel(NULL, variants[i], &p, A, B, C, old, C);
                assert_memory_equal(C, want, (size_t)M * N * sizeof *C);
                ref_matmul_check_f64(&p, A, B, C, old, old, 1);
                free(A), free(B), free(C), free(old), free(want);
            }
}

/* 1, 2 and 3 threads (3: units split unevenly) give the bits of one call, for every variant,
 * tiles and few rows, f32 and f16 B. */
static void test_matmul_threads_bit_identical(void **state) {
    (void)state;
    static const uint32_t shapes[][3] = {{37, 70, 300}, {1, 200, 64}, {64, 128, 32}, {200, 300, 40}, {5, 1000, 300},
                                         {270, 150, 140}};
    vkg_rng rng;
    vkg_rng_seed(&rng, 9);
    vkg_threadpool *pools[3];
    for (int t = 0; t < 3; t++) assert_non_null(pools[t] = vkg_threadpool_new(t + 1));
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int f16 = 0; f16 < 2; f16++) {
            const uint32_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
            const size_t c_n = 2 * (size_t)M * N;
            float *A = ref_checked_floats(&rng, 2 * (size_t)M * K, 1);
            void *B = random_b(&rng, (size_t)K * N, 1, f16 ? VKG_MATMUL_B_F16 : 0);
            float *bias = ref_checked_floats(&rng, N, 1), *R = ref_checked_floats(&rng, c_n, 1);
            float *one = malloc(c_n * sizeof *one), *C = malloc(c_n * sizeof *C);
            assert_true(one && C);
            vkg_matmul_params p = ref_matmul_params(M, N, K);
            p.batch1 = 2, p.a_stride_b1 = M * K, p.c_stride_b1 = M * N, p.r_stride_b1 = M * N;
            p.flags = VKG_MATMUL_BIAS | VKG_MATMUL_RESIDUAL | (f16 ? VKG_MATMUL_B_F16 : 0);
            p.activation = VKG_UNARY_GELU_ERF;
            for (int i = 0; i < n_variants; i++) {
                expect_exact_once(variants[i], NULL, &p, A, B, one, c_n, bias, R);
                for (int t = 0; t < 3; t++) {
                    memset(C, 0, c_n * sizeof *C);
                    ref_run_matmul_kernel(pools[t], variants[i], &p, A, B, C, bias, R);
                    assert_memory_equal(C, one, c_n * sizeof *C);
                }
            }
            free(A), free(B), free(bias), free(R), free(one), free(C);
        }
    for (int t = 0; t < 3; t++) vkg_threadpool_free(pools[t]);
}

/* One product of the few-rows sweep below: batch1 = 2 entries (A and B per entry), an offset
 * on every operand, B stored [K, N] or (transposed) [N, K], A [M, K] or [K, M], B's type and
 * the given epilogue; run whole, and over pools of 1, 2 and 3 threads, each bit-identical to the
 * reference. */
static void few_rows_case(vkg_rng *rng, vkg_threadpool *const pools[3], uint32_t M, uint32_t N, uint32_t K,
                          int b_transposed, int a_transposed, uint32_t flags, uint32_t activation) {
    const uint32_t off = 5, B1 = 2;
    size_t a_n = off + (size_t)B1 * M * K, b_n = off + (size_t)B1 * K * N, c_n = off + (size_t)B1 * M * N;
    float *A = ref_checked_floats(rng, a_n, 1);
    void *B = random_b(rng, b_n, 1, flags);
    float *bias = ref_checked_floats(rng, off + N, 1), *R = ref_checked_floats(rng, c_n, 1);
    float *C = calloc(c_n, sizeof *C);
    assert_non_null(C);
    vkg_matmul_params p = ref_matmul_params(M, N, K);
    p.batch1 = B1, p.flags = flags, p.activation = activation;
    p.a_offset = p.b_offset = p.c_offset = p.r_offset = p.bias_offset = off;
    p.a_stride_b1 = M * K, p.b_stride_b1 = K * N, p.c_stride_b1 = p.r_stride_b1 = M * N;
    if (a_transposed) p.a_stride_m = 1, p.a_stride_k = M;
    if (b_transposed) p.b_stride_k = 1, p.b_stride_n = K;
    expected e = {{NULL, NULL}};
    for (int i = 0; i < n_variants; i++)
        for (int t = -1; t < 3; t++) expect_exact(&e, variants[i], t < 0 ? NULL : pools[t], &p, A, B, C, c_n, bias, R);
    expected_free(&e);
    ref_matmul_check_f64(&p, A, B, C, bias, R, 1);
    free(A), free(B), free(bias), free(R), free(C);
}

/* The few-rows paths (decoding: M = 1 and a handful) against the reference, bit for bit: every
 * column remainder (N mod 4, 8, 16, 32, a tile; N below and N mod a register block's columns for
 * the bands of columns with k contiguous), k remainders (K mod 16 for those: the zero-padded
 * last partial sums) and the prefetch boundary, both B layouts, f32, f16 and bf16 B, every
 * epilogue, the row-pass boundaries (M = 4, 5, 8, 9), the first M that takes the tiles with B's
 * columns contiguous (9) and with its k contiguous (65), and more. */
static void test_matmul_few_rows_exact(void **state) {
    (void)state;
    static const uint32_t Ms[] = {1, 2, 3, 4, 5, 8, 9, 17}, Ns[] = {1, 7, 8, 9, 13, 33, 1000}, Ks[] = {1, 5, 64, 77, 300};
    static const uint32_t types[] = {0, VKG_MATMUL_B_F16, VKG_MATMUL_B_BF16};
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
                                  (combo & 1 ? VKG_MATMUL_BIAS : 0) | (combo & 2 ? VKG_MATMUL_RESIDUAL : 0) |
                                      types[combo / 2 % 3],
                                  activations[combo % N_ACTIVATIONS]);
    /* Wider than one block of the contiguous-columns path (2048 columns at 4 rows). */
    few_rows_case(&rng, pools, 5, 4500, 9, 0, 0, VKG_MATMUL_BIAS | VKG_MATMUL_RESIDUAL, VKG_UNARY_COPY);
    few_rows_case(&rng, pools, 1, 8200, 6, 0, 1, VKG_MATMUL_B_F16, VKG_UNARY_GELU);
    few_rows_case(&rng, pools, 16, 33, 77, 1, 1, VKG_MATMUL_BIAS, VKG_UNARY_SILU);
    /* a long K on the dot-product path (columns with k contiguous) */
    few_rows_case(&rng, pools, 3, 40, 2100, 1, 0, VKG_MATMUL_B_BF16, VKG_UNARY_COPY);
    /* the dot-product path's passes of 8 rows over blocks of B (a block of 128 KiB here: 300
       columns of 300 f16 k are about 1.5 blocks), up to its last M (64), and the first M past it (65) */
    few_rows_case(&rng, pools, 12, 300, 300, 1, 0, VKG_MATMUL_B_F16 | VKG_MATMUL_BIAS, VKG_UNARY_SILU);
    few_rows_case(&rng, pools, 23, 70, 33, 1, 1, VKG_MATMUL_RESIDUAL, VKG_UNARY_COPY);
    few_rows_case(&rng, pools, 64, 97, 77, 1, 0, VKG_MATMUL_B_BF16 | VKG_MATMUL_RESIDUAL, VKG_UNARY_GELU);
    few_rows_case(&rng, pools, 65, 97, 77, 1, 0, VKG_MATMUL_B_BF16 | VKG_MATMUL_RESIDUAL, VKG_UNARY_GELU);
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
    for (int i = 0; i < n_variants; i++)
        for (int bt = 0; bt < 2; bt++) {
            vkg_matmul_params p = ref_matmul_params(M, N, K);
            p.batch1 = B1, p.a_stride_b1 = M * K, p.c_stride_b1 = M * N; /* B shared by both entries */
            if (bt) p.b_stride_k = 1, p.b_stride_n = K;
            size_t units = vkg_cpu_matmul_units(&p);
            vkg_cpu_matmul_with(variants[i], &p, A, B, whole, NULL, NULL, 0, units);
            for (size_t step = 1; step <= 7; step += 3) {
                memset(cut, 0, B1 * M * N * sizeof(float));
                for (size_t u = 0; u < units; u += step)
                    vkg_cpu_matmul_with(variants[i], &p, A, B, cut, NULL, NULL, u, u + step < units ? u + step : units);
                assert_memory_equal(cut, whole, B1 * M * N * sizeof(float));
            }
        }
    free(A), free(B), free(whole), free(cut);
}

/* GPT-2 124M's matmuls (d = 768): the QKV, output, MLP projections with B [K, N] and the tied
 * head with B [N, K] (k contiguous), at decode (1 row), a short prompt (7), a tile and a bit (97),
 * f32 and f16 weights, with their epilogues, on 2 threads: rows checked against the double
 * product, whole results against 1 thread bit for bit. */
static void test_matmul_gpt2_shapes(void **state) {
    (void)state;
    static const struct {
        uint32_t N, K;
        int transposed;
        uint32_t flags, activation;
    } ops[] = {{2304, 768, 0, VKG_MATMUL_BIAS, VKG_UNARY_COPY},
               {768, 768, 0, VKG_MATMUL_BIAS | VKG_MATMUL_RESIDUAL, VKG_UNARY_COPY},
               {3072, 768, 0, VKG_MATMUL_BIAS, VKG_UNARY_GELU},
               {768, 3072, 0, VKG_MATMUL_BIAS | VKG_MATMUL_RESIDUAL, VKG_UNARY_COPY},
               {50257, 768, 1, 0, VKG_UNARY_COPY}};
    static const uint32_t Ms[] = {1, 7, 97};
    vkg_threadpool *one = vkg_threadpool_new(1), *two = vkg_threadpool_new(2);
    assert_true(one && two);
    vkg_rng rng;
    vkg_rng_seed(&rng, 31);
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++)
        for (int f16 = 0; f16 < 2; f16++) {
            const uint32_t N = ops[o].N, K = ops[o].K, flags = ops[o].flags | (f16 ? VKG_MATMUL_B_F16 : 0);
            void *B = random_b(&rng, (size_t)K * N, 0.05f, flags);
            float *A = ref_checked_floats(&rng, 97 * (size_t)K, 1), *bias = ref_checked_floats(&rng, N, 0.1f);
            float *R = ref_checked_floats(&rng, 97 * (size_t)N, 1);
            float *C = malloc(97 * (size_t)N * sizeof *C), *C1 = malloc(97 * (size_t)N * sizeof *C1);
            float *Cf = malloc(97 * (size_t)N * sizeof *Cf);
            assert_true(C && C1 && Cf);
            for (size_t m = 0; m < sizeof Ms / sizeof Ms[0]; m++) {
                if (N > 10000 && Ms[m] == 7) continue; /* the head: decode and two row tiles */
                vkg_matmul_params p = ref_matmul_params(Ms[m], N, K);
                p.flags = flags, p.activation = ops[o].activation;
                if (ops[o].transposed) p.b_stride_k = 1, p.b_stride_n = K;
                const size_t bytes = (size_t)Ms[m] * N * sizeof *C;
                int fused_seen = 0;
                for (int i = 0; i < n_variants; i++) {
                    ref_run_matmul_kernel(two, variants[i], &p, A, B, C, bias, R);
                    /* the fused variants promise the same bits: the double product is checked
                       once for them (in Cf), once for the unfused one */
                    if (ref_matmul_fused(variants[i]) && fused_seen++)
                        assert_memory_equal(C, Cf, bytes);
                    else
                        ref_matmul_check_f64(&p, A, B, C, bias, R, 48);
                    if (ref_matmul_fused(variants[i])) memcpy(Cf, C, bytes);
                    ref_run_matmul_kernel(one, variants[i], &p, A, B, C1, bias, R);
                    assert_memory_equal(C, C1, bytes);
                }
            }
            free(A), free(B), free(bias), free(R), free(C), free(C1), free(Cf);
        }
    vkg_threadpool_free(one);
    vkg_threadpool_free(two);
}

/* The fused variants promise each other's bits (the same fma chain per element; on the
 * dot-product path, B [N, K], the same 16 partial sums whatever the vector width). */
static void test_matmul_fused_variants_agree(void **state) {
    (void)state;
    enum { M = 50, N = 300, K = 1030 };
    vkg_rng rng;
    vkg_rng_seed(&rng, 41);
    float *A = ref_checked_floats(&rng, M * K, 1), *B = ref_checked_floats(&rng, K * N, 1);
    float *first = malloc(M * N * sizeof(float)), *C = malloc(M * N * sizeof(float));
    assert_true(first && C);
    for (int bt = 0; bt < 2; bt++) {
        int seen = 0;
        for (int i = 0; i < n_variants; i++) {
            if (!ref_matmul_fused(variants[i])) continue;
            vkg_matmul_params p = ref_matmul_params(M, N, K);
            if (bt) p.b_stride_k = 1, p.b_stride_n = K;
            assert_int_equal(vkg_mm_dot_path(&p), bt);
            ref_run_matmul_kernel(NULL, variants[i], &p, A, B, seen ? C : first, NULL, NULL);
            if (seen++) assert_memory_equal(C, first, M * N * sizeof(float));
        }
    }
    free(A), free(B), free(first), free(C);
}

/* B [N, K] (a Linear weight, a tied head) with 1 to 64 rows: each row's bits are the same whatever
 * M, for every variant and B type (what a batch of sequences decoded together relies on:
 * model_batch.c), within float rounding of the double product.  The same with B [K, N] (k order
 * on every path, the few-rows one up to 8 rows, the tiles past it). */
static void test_matmul_rows_independent_of_m(void **state) {
    (void)state;
    enum { MAX_M = VKG_MM_DOT_ROWS, N = 203, K = 581 };
    static const uint32_t Ms[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 16, 17, 31, 33, 63};
    static const uint32_t types[] = {0, VKG_MATMUL_B_F16, VKG_MATMUL_B_BF16};
    vkg_threadpool *pool = vkg_threadpool_new(2);
    assert_non_null(pool);
    vkg_rng rng;
    vkg_rng_seed(&rng, 43);
    float *A = ref_checked_floats(&rng, (size_t)MAX_M * K, 1);
    float *all = malloc((size_t)MAX_M * N * sizeof(float)), *C = malloc((size_t)MAX_M * N * sizeof(float));
    assert_true(all && C);
    for (size_t t = 0; t < 3; t++) {
        void *B = random_b(&rng, (size_t)K * N, 1, types[t]);
        for (int bt = 0; bt < 2; bt++)
            for (int i = 0; i < n_variants; i++) {
                vkg_matmul_params p = ref_matmul_params(MAX_M, N, K);
                p.flags = types[t];
                if (bt) p.b_stride_k = 1, p.b_stride_n = K;
                ref_run_matmul_kernel(pool, variants[i], &p, A, B, all, NULL, NULL);
                if (bt) ref_matmul_check_f64(&p, A, B, all, NULL, NULL, 7);
                for (size_t m = 0; m < sizeof Ms / sizeof Ms[0]; m++) {
                    p.M = Ms[m];
                    if (bt && !vkg_mm_dot_path(&p)) fail_msg("M = %u does not take the dot-product path", Ms[m]);
                    ref_run_matmul_kernel(pool, variants[i], &p, A, B, C, NULL, NULL);
                    if (memcmp(C, all, (size_t)Ms[m] * N * sizeof *C) != 0)
                        fail_msg("variant %s, B %s, type %zu: %u rows differ from the same rows of %d",
                                 vkg_cpu_matmul_variant_name(variants[i]), bt ? "[N, K]" : "[K, N]", t, Ms[m], MAX_M);
                }
            }
        free(B);
    }
    vkg_threadpool_free(pool);
    free(A), free(all), free(C);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matmul_variants_known),
        cmocka_unit_test(test_cpu_features_match_linux),
        cmocka_unit_test(test_matmul_by_hand),
        cmocka_unit_test(test_matmul_shapes_and_transposes),
        cmocka_unit_test(test_matmul_batch_broadcast),
        cmocka_unit_test(test_matmul_epilogues),
        cmocka_unit_test(test_matmul_in_place_residual),
        cmocka_unit_test(test_matmul_threads_bit_identical),
        cmocka_unit_test(test_matmul_few_rows_exact),
        cmocka_unit_test(test_matmul_few_rows_any_split),
        cmocka_unit_test(test_matmul_gpt2_shapes),
        cmocka_unit_test(test_matmul_fused_variants_agree),
        cmocka_unit_test(test_matmul_rows_independent_of_m),
    };
    return cmocka_run_group_tests(tests, find_variants, NULL);
}
