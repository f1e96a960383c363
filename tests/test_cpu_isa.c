/* The CPU kernels' instruction set, capped for the whole process (vkg_cpu_set_max_isa): the one
 * in use and the CPU device's name follow the cap, an unknown name is refused, and a model's
 * all-position logits under each set this CPU runs are the same bits for AVX2 and AVX-512 (GPT-2
 * and a Llama-family model with grouped-query attention: matmuls, attention, norms), the
 * portable variant's (no fused multiply-adds) within rounding of them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "cpu/kernels.h"
#include "support/test_util.h"
#include "vkgraph.h"
#include "vkgraph_model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { T = 24 };

static void set_isa(const char *isa) {
    vkg_error err = {0};
    if (vkg_cpu_set_max_isa(isa, &err) != VKG_OK) fail_msg("%s", err.message);
}

static void test_names_and_refusal(void **state) {
    (void)state;
    const char *best = vkg_cpu_isa();
    set_isa("portable");
    assert_string_equal(vkg_cpu_isa(), "portable");
    vkg_device *cpu = test_open_cpu();
    assert_non_null(cpu);
    if (!strstr(vkg_device_name(cpu), ", portable)")) fail_msg("device name '%s'", vkg_device_name(cpu));
    vkg_device_free(cpu);
    /* A cap above what the CPU has gives the CPU's best. */
    set_isa("avx512");
    assert_string_equal(vkg_cpu_isa(), best);
    vkg_error err = {0};
    assert_int_equal(vkg_cpu_set_max_isa("avx3", &err), VKG_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "'avx3'"));
    assert_string_equal(vkg_cpu_isa(), best); /* a refused name changes nothing */
    set_isa(NULL);
    assert_string_equal(vkg_cpu_isa(), best);
}

/* The logits of every position of ids[0..T) under the cap isa, [T, V] (the caller frees them). */
static float *logits_under(const char *isa, const char *dir, size_t *n) {
    set_isa(isa);
    vkg_device *cpu = test_open_cpu();
    assert_non_null(cpu);
    vkg_error err = {0};
    vkg_model *m = NULL;
    if (vkg_model_open(dir, cpu, NULL, &m, &err) != VKG_OK) fail_msg("%s", err.message);
    vkg_model_info info;
    assert_int_equal(vkg_model_get_info(m, &info, &err), VKG_OK);
    vkg_context_options o;
    vkg_context_options_default(&o);
    o.n_ctx = o.n_batch = T;
    o.logits = VKG_LOGITS_ALL;
    vkg_context *ctx = NULL;
    if (vkg_context_new(m, &o, &ctx, &err) != VKG_OK) fail_msg("%s", err.message);
    int32_t ids[T];
    for (int i = 0; i < T; i++) ids[i] = (int32_t)((7 + 13 * i) % info.n_vocab);
    if (vkg_context_prefill(ctx, ids, T, &err) != VKG_OK) fail_msg("%s", err.message);
    *n = (size_t)T * (size_t)info.n_vocab;
    float *out = malloc(*n * sizeof *out);
    assert_non_null(out);
    assert_int_equal(vkg_context_get_logits(ctx, out, *n, &err), VKG_OK);
    vkg_context_free(ctx);
    vkg_model_free(m);
    vkg_device_free(cpu);
    set_isa(NULL);
    return out;
}

static void compare_variants(const char *dir) {
    size_t n = 0, n2 = 0, n1 = 0;
    float *best = logits_under("native", dir, &n);
    if (vkg_cpu_matmul_variant_runs(VKG_CPU_MATMUL_AVX2)) {
        float *avx2 = logits_under("avx2", dir, &n2);
        assert_int_equal(n2, n);
        if (memcmp(avx2, best, n * sizeof *best) != 0)
            fail_msg("%s: AVX2's logits differ from %s's", dir, vkg_cpu_isa());
        free(avx2);
    }
    float *portable = logits_under("portable", dir, &n1);
    assert_int_equal(n1, n);
    double err = 0, ref = 0;
    for (size_t i = 0; i < n; i++) {
        assert_true(isfinite(portable[i]) && isfinite(best[i]));
        err += ((double)portable[i] - best[i]) * ((double)portable[i] - best[i]);
        ref += (double)best[i] * best[i];
    }
    if (!(ref > 0 && err / ref < 1e-10)) fail_msg("%s: portable against fused, NMSE %g", dir, ref > 0 ? err / ref : 0);
    if (strcmp(vkg_cpu_isa(), "portable") != 0 && err == 0)
        fail_msg("%s: the portable variant gave the fused one's bits: did the cap take effect?", dir);
    free(best), free(portable);
}

static void test_gpt2_logits(void **state) {
    (void)state;
    compare_variants(test_data_path("gpt2-tiny"));
}

static void test_llama_logits(void **state) {
    (void)state;
    char *dir = test_tmpdir("cpu_isa");
    assert_non_null(dir);
    vkg_random_model_options o;
    vkg_random_model_options_default(&o); /* llama-tiny: 4 query heads over 2, rotary positions */
    vkg_error err = {0};
    if (vkg_random_model_write(dir, &o, &err) != VKG_OK) fail_msg("%s", err.message);
    compare_variants(dir);
    assert_int_equal(test_remove_tree(dir), 0);
    free(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names_and_refusal),
        cmocka_unit_test(test_gpt2_logits),
        cmocka_unit_test(test_llama_logits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
