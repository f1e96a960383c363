/* GPT-2 on the Vulkan executor (lavapipe on machines without a GPU): logits and attention agree
 * with the CPU executor and with the golden files, and decoding with the KV cache on the GPU
 * matches full passes.  Where no Vulkan device opens they fail, or, with
 * VKG_TEST_ALLOW_NO_VULKAN=1, are skipped (see support/vk_test.h).
 *
 * Tolerances: both executors compute in float32 with different summation orders; logits agree to
 * 1e-4 absolute (about 1e-5 relative) and probabilities to 1e-5. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "vkgraph_npy.h"
#include "models/gpt2.h"
#include "models/model_run.h"
#include "models/sampling.h"
#include "support/test_util.h"
#include "support/vk_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LOGIT_TOL 1e-4
#define PROB_TOL 1e-5

static vkg_device *cpu, *gpu;

static int setup(void **state) {
    (void)state;
    return vk_test_pair_setup(&cpu, &gpu);
}

static int teardown(void **state) {
    (void)state;
    return vk_test_pair_teardown(&cpu, &gpu);
}

static void expect_close(const float *got, const float *want, size_t n, double tol, const char *what) {
    double d = test_max_abs_diff(got, want, n);
    if (!(d <= tol)) fail_msg("%s: max |difference| %g exceeds %g", what, d, tol);
}

/* Every position's logits [T, V] and every layer's attention [L, H, T, T] on dev. */
static void run_all(vkg_device *dev, const vkg_gpt2 *m, const int32_t *ids, int T, float *logits, float *attn) {
    const size_t V = (size_t)m->config.vocab_size, H = (size_t)m->config.n_head;
    vkg_forward_options o;
    vkg_forward_options_default(&o, T);
    o.all_logits = 1;
    o.attention_layer = VKG_ALL_LAYERS;
    vkg_runner r;
    vkg_error err = {0};
    if (vkg_runner_new(&m->decoder, dev, &o, &r, &err) != VKG_OK) fail_msg("%s", err.message);
    if (vkg_runner_run(&r, ids, 0, &err) != VKG_OK) fail_msg("%s", err.message);
    assert_int_equal(vkg_runner_logits(&r, logits, (size_t)T * V, &err), VKG_OK);
    for (int l = 0; l < m->config.n_layer; l++)
        assert_int_equal(vkg_runner_attention(&r, l, attn + (size_t)l * H * T * T, H * T * T, &err), VKG_OK);
    vkg_runner_free(&r);
}

static void compare_executors(const char *model) {
    vkg_gpt2 *m = NULL;
    vkg_error err = {0};
    if (vkg_gpt2_load(test_data_path(model), &m, &err) != VKG_OK) fail_msg("%s", err.message);
    const int32_t ids[12] = {17, 301, 5, 88, 511, 0, 42, 255, 256, 3, 99, 400};
    const int T = 12;
    const size_t V = (size_t)m->config.vocab_size, AN = (size_t)m->config.n_layer * m->config.n_head * T * T;
    float *lc = malloc(T * V * sizeof *lc), *lg = malloc(T * V * sizeof *lg);
    float *ac = malloc(AN * sizeof *ac), *ag = malloc(AN * sizeof *ag);
    run_all(cpu, m, ids, T, lc, ac);
    run_all(gpu, m, ids, T, lg, ag);
    expect_close(lg, lc, T * V, LOGIT_TOL, "Vulkan logits against the CPU's");
    expect_close(ag, ac, AN, PROB_TOL, "Vulkan attention against the CPU's");
    char rel[256];
    snprintf(rel, sizeof rel, "%s/logits.npy", model);
    float *want = NULL;
    int nd;
    int64_t shape[VKG_NPY_MAX_DIMS];
    assert_int_equal(vkg_npy_read_f32(test_data_path(rel), &want, &nd, shape, &err), VKG_OK);
    expect_close(lg, want, T * V, LOGIT_TOL, "Vulkan logits against the golden file");
    free(want);
    snprintf(rel, sizeof rel, "%s/attention.npy", model);
    assert_int_equal(vkg_npy_read_f32(test_data_path(rel), &want, &nd, shape, &err), VKG_OK);
    expect_close(ag, want, AN, PROB_TOL, "Vulkan attention against the golden file");
    free(want);
    free(lc);
    free(lg);
    free(ac);
    free(ag);
    vkg_gpt2_free(m);
}

static void test_executors_agree(void **state) {
    (void)state;
    if (!gpu) skip(); /* VKG_TEST_ALLOW_NO_VULKAN, and the setup said so */
    compare_executors("gpt2-tiny");
    compare_executors("gpt2-tiny-variant");
}

/* Decoding token by token on the GPU: each step's logits are the CPU full pass's at that position,
 * and greedy continuations agree. */
static void test_decode_on_gpu(void **state) {
    (void)state;
    if (!gpu) skip();
    vkg_gpt2 *m = NULL;
    vkg_error err = {0};
    if (vkg_gpt2_load(test_data_path("gpt2-tiny"), &m, &err) != VKG_OK) fail_msg("%s", err.message);
    const size_t V = 512;
    int32_t seq[20] = {17, 301, 5, 88, 511};
    const int np = 5, n = 10;
    vkg_generator gen;
    if (vkg_generator_new(&m->decoder, gpu, np + n, &gen, &err) != VKG_OK) fail_msg("%s", err.message);
    assert_int_equal(vkg_generator_feed(&gen, seq, np, &err), VKG_OK);
    float *full = malloc((np + n) * V * sizeof *full);
    for (int i = 0; i < n; i++) {
        seq[np + i] = vkg_argmax(gen.logits, (int)V);
        if (vkg_decoder_forward(&m->decoder, cpu, seq, np + i, 1, full, VKG_NO_ATTENTION, NULL, &err) != VKG_OK)
            fail_msg("%s", err.message);
        expect_close(gen.logits, full + (size_t)(np + i - 1) * V, V, LOGIT_TOL, "GPU decode against the CPU pass");
        assert_int_equal(seq[np + i], vkg_argmax(full + (size_t)(np + i - 1) * V, (int)V));
        if (i + 1 < n) assert_int_equal(vkg_generator_feed(&gen, &seq[np + i], 1, &err), VKG_OK);
    }
    free(full);
    vkg_generator_free(&gen);
    vkg_gpt2_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_executors_agree),
        cmocka_unit_test(test_decode_on_gpu),
    };
    return vk_test_exit_status(cmocka_run_group_tests(tests, setup, teardown));
}
