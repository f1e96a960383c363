/* The CPU matmul at full GPT-2 scale (Release builds only: the `scale` label): the tied head of a
 * T = 1024 forward, [1024, 768] @ wte^T with wte [50257, 768] (k contiguous), f32 and f16
 * weights, for every variant this machine runs: 2 threads bit for bit 1 thread, and rows across
 * the tiles within float rounding of the double product. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/kernels.h"
#include "cpu/threadpool.h"
#include "io/safetensors.h"
#include "support/cpu_reference.h"
#include "vkgraph.h"

static void test_matmul_tied_head_t1024(void **state) {
    (void)state;
    enum { M = 1024, N = 50257, K = 768 };
    vkg_rng rng;
    vkg_rng_seed(&rng, 51);
    float *A = ref_checked_floats(&rng, (size_t)M * K, 1), *W = ref_checked_floats(&rng, (size_t)N * K, 0.05f);
    uint16_t *W16 = malloc((size_t)N * K * sizeof *W16);
    float *C = malloc((size_t)M * N * sizeof *C), *C1 = malloc((size_t)M * N * sizeof *C1);
    assert_true(W16 && C && C1);
    for (size_t i = 0; i < (size_t)N * K; i++) W16[i] = vkg_f32_to_f16(W[i]);
    vkg_threadpool *one = vkg_threadpool_new(1), *two = vkg_threadpool_new(2);
    assert_true(one && two);
    for (int f16 = 0; f16 < 2; f16++) {
        vkg_matmul_params p = ref_matmul_params(M, N, K);
        p.b_stride_k = 1, p.b_stride_n = K;
        p.flags = f16 ? VKG_MATMUL_B_F16 : 0;
        const void *B = f16 ? (const void *)W16 : (const void *)W;
        for (int v = 0; v < VKG_CPU_MATMUL_VARIANTS; v++) {
            if (!vkg_cpu_matmul_variant_runs(v)) continue;
            ref_run_matmul_kernel(two, v, &p, A, B, C, NULL, NULL);
            ref_matmul_check_f64(&p, A, B, C, NULL, NULL, 127);
            ref_run_matmul_kernel(one, v, &p, A, B, C1, NULL, NULL);
            assert_memory_equal(C, C1, (size_t)M * N * sizeof *C);
        }
    }
    vkg_threadpool_free(one);
    vkg_threadpool_free(two);
    free(A), free(W), free(W16), free(C), free(C1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matmul_tied_head_t1024),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
