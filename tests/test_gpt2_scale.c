/* GPT-2 at the scale users run it: a model of GPT-2 124M's shapes (12 layers, 12 heads, 768
 * wide, 1024 positions, 50257 tokens; random weights) at T = 1, 64, 480, 512 and 1024 tokens,
 * logits at every position, on the CPU executor and on Vulkan, each checked against the
 * independent NumPy implementation (tools/gpt2_reference.py, float64) and against each other;
 * then a prefill of 1000 tokens and decoding to 1024 with the KV cache against the same rows;
 * the pass of 1024 tokens once more on Vulkan in pieces, each within a timeout the whole exceeds;
 * and GPT-2 XL's width and heads at T = 1024.
 *
 * Too slow under the sanitizers, so it runs in the Release leg of the test command only (see
 * CMakeLists.txt).  The bar: NMSE <= 1e-6 and the same argmax at every position.  Where the
 * reference's best two logits lie within ARGMAX_TIE of each other, either choice is right (both
 * executors round float32 sums in their own order); the test says how often that happened. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "vkgraph_npy.h"
#include "models/gpt2.h"
#include "models/model_run.h"
#include "models/gpt2_random.h"
#include "models/sampling.h"
#include "support/test_util.h"
#include "support/vk_test.h"
#include "base/clock.h"
#include "vulkan/context.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define NMSE_MAX 1e-6
#define ARGMAX_TIE 1e-4
#define T_MAX 1024
#define PREFILL 1000

static char *dir;
static vkg_gpt2 *model;
static int32_t ids[T_MAX];
static float *reference;   /* [T_MAX, V] from NumPy */
static size_t V;
static vkg_device *cpu, *gpu;

/* The NumPy reference over ids (dir/reference.npy). */
static void run_reference(void) { reference = test_numpy_logits(dir, ids, T_MAX, (int64_t)V); }

static int setup(void **state) {
    (void)state;
    dir = test_tmpdir("gpt2scale");
    vkg_gpt2_random_options o;
    vkg_gpt2_random_options_default(&o);
    o.config.n_layer = 12, o.config.n_head = 12, o.config.n_embd = 768;
    o.config.n_positions = T_MAX, o.config.vocab_size = 50257;
    o.config.bos_token_id = o.config.eos_token_id = 50256;
    o.seed = 124;
    vkg_error err = {0};
    if (vkg_gpt2_write_random(dir, &o, &err) != VKG_OK || vkg_gpt2_load(dir, &model, &err) != VKG_OK) {
        fprintf(stderr, "%s\n", err.message);
        return -1;
    }
    V = (size_t)model->config.vocab_size;
    vkg_rng rng;
    vkg_rng_seed(&rng, 2024);
    for (int i = 0; i < T_MAX; i++) ids[i] = (int32_t)(vkg_rng_next(&rng) % V);
    vkg_device_options co = {.quiet = 1};
    if (vkg_device_open("cpu", &co, &cpu, &err) != VKG_OK) return -1;
    return 0;
}

static void remove_model_dir(void) { assert_int_equal(test_remove_tree(dir), 0); }

static int teardown(void **state) {
    (void)state;
    vkg_device_free(cpu);
    vkg_gpt2_free(model);
    free(reference);
    if (dir) remove_model_dir();
    free(dir);
    return 0;
}

/* rows x V logits against the reference rows [first, first + rows): NMSE over all of them and
 * the argmax of every row.  Returns how many rows were ties. */
static int expect_rows(const float *got, size_t first, size_t rows, const char *what) {
    return test_expect_logits(got, reference + first * V, first, rows, V, NMSE_MAX, ARGMAX_TIE, what);
}

static float *forward(vkg_device *d, int T) {
    float *logits = malloc((size_t)T * V * sizeof *logits);
    assert_non_null(logits);
    vkg_error err = {0};
    if (vkg_decoder_forward(&model->decoder, d, ids, T, 1, logits, VKG_NO_ATTENTION, NULL, &err) != VKG_OK)
        fail_msg("%s, T = %d: %s", vkg_device_name(d), T, err.message);
    return logits;
}

/* A run longer than the device's timeout is fine while each of its submissions is shorter: the
 * forward pass that gave `want` in `took` ns again, with the timeout at half of that (its compile
 * and upload included) and the plan in pieces of 2^32 multiply-adds (its largest step, the tied
 * head over every position, about 30% of it), gives the same bits. */
static void run_in_pieces(const float *want, int T, uint64_t took) {
    vkg_vk_context *c = vk_test_context(gpu);
    const vkg_vk_tuning tuning = c->tuning;
    const uint64_t timeout = c->timeout_ns;
    c->tuning.submit_work = (uint64_t)1 << 32;
    c->timeout_ns = took / 2;
    float *got = forward(gpu, T);
    c->tuning = tuning, c->timeout_ns = timeout;
    assert_memory_equal(got, want, (size_t)T * V * sizeof *got);
    free(got);
}

/* Every prompt length on both executors: each against the reference's first T rows (a causal
 * model's prefix), and Vulkan against the CPU. */
static void test_forward_every_length(void **state) {
    (void)state;
    static const int lengths[] = {1, 64, 480, 512, 1024};
    gpu = vk_test_open();
    if (!reference) run_reference();
    for (size_t i = 0; i < sizeof lengths / sizeof lengths[0]; i++) {
        int T = lengths[i];
        char what[96];
        float *lc = forward(cpu, T);
        const uint64_t t0 = vkg_clock_ns();
        float *lg = forward(gpu, T);
        const uint64_t took = vkg_clock_ns() - t0;
        snprintf(what, sizeof what, "T = %d, CPU executor", T);
        expect_rows(lc, 0, (size_t)T, what);
        snprintf(what, sizeof what, "T = %d, Vulkan", T);
        expect_rows(lg, 0, (size_t)T, what);
        double e = test_nmse(lg, lc, (size_t)T * V);
        if (!(e <= NMSE_MAX)) fail_msg("T = %d: Vulkan against the CPU: NMSE %.3e exceeds %.0e", T, e, NMSE_MAX);
        free(lc);
        if (T == T_MAX) run_in_pieces(lg, T, took);
        free(lg);
    }
    vk_test_close(gpu);
    gpu = NULL;
}

/* A 1000-token prompt in one prefill pass, then 24 tokens decoded one by one up to the context's
 * end, on each executor: every prediction equals the reference's row at that position. */
static void prefill_then_decode(vkg_device *d) {
    vkg_generator gen;
    vkg_error err = {0};
    if (vkg_generator_new(&model->decoder, d, T_MAX, &gen, &err) != VKG_OK) fail_msg("%s", err.message);
    if (vkg_generator_feed(&gen, ids, PREFILL, &err) != VKG_OK) fail_msg("%s", err.message);
    char what[96];
    snprintf(what, sizeof what, "%.20s prefill of %d", vkg_device_is_cpu(d) ? "CPU executor" : "Vulkan", PREFILL);
    expect_rows(gen.logits, PREFILL - 1, 1, what);
    float *decoded = malloc((size_t)(T_MAX - PREFILL) * V * sizeof *decoded);
    assert_non_null(decoded);
    for (int pos = PREFILL; pos < T_MAX; pos++) {
        if (vkg_generator_feed(&gen, &ids[pos], 1, &err) != VKG_OK) fail_msg("position %d: %s", pos, err.message);
        memcpy(decoded + (size_t)(pos - PREFILL) * V, gen.logits, V * sizeof *decoded);
    }
    /* rows PREFILL .. T_MAX - 2 predict from the decoded tokens; the last row is position 1023 */
    snprintf(what, sizeof what, "%.20s decode %d..%d", vkg_device_is_cpu(d) ? "CPU executor" : "Vulkan", PREFILL,
             T_MAX - 1);
    expect_rows(decoded, PREFILL, (size_t)(T_MAX - PREFILL), what);
    /* the cache is full: one more token is refused, not written past the end */
    assert_int_equal(vkg_generator_feed(&gen, ids, 1, &err), VKG_ERR_INVALID_ARGUMENT);
    free(decoded);
    vkg_generator_free(&gen);
}

static void test_prefill_then_decode_cpu(void **state) {
    (void)state;
    if (!reference) run_reference();
    prefill_then_decode(cpu);
}

static void test_prefill_then_decode_vulkan(void **state) {
    (void)state;
    if (!reference) run_reference();
    gpu = vk_test_open();
    prefill_then_decode(gpu);
    vk_test_close(gpu);
    gpu = NULL;
}

/* GPT-2 XL's width and heads (1600 wide, 25 heads of 64; two layers, to keep it short) at
 * T = 1024: every position against the NumPy reference on both executors.  Its tied head of
 * 50257 x 1600 floats needs three bindings on Vulkan. */
static void test_xl_width(void **state) {
    (void)state;
    vkg_gpt2 *big = model;
    float *big_reference = reference;
    char *big_dir = dir;
    dir = test_tmpdir("gpt2xl");
    vkg_gpt2_random_options o;
    vkg_gpt2_random_options_default(&o);
    o.config.n_layer = 2, o.config.n_head = 25, o.config.n_embd = 1600;
    o.config.n_positions = T_MAX, o.config.vocab_size = (int)V;
    o.config.bos_token_id = o.config.eos_token_id = 50256;
    o.seed = 1600;
    vkg_error err = {0};
    if (vkg_gpt2_write_random(dir, &o, &err) != VKG_OK || vkg_gpt2_load(dir, &model, &err) != VKG_OK)
        fail_msg("%s", err.message);
    reference = NULL;
    run_reference();
    gpu = vk_test_open();
    float *lc = forward(cpu, T_MAX), *lg = forward(gpu, T_MAX);
    expect_rows(lc, 0, T_MAX, "XL width, T = 1024, CPU executor");
    expect_rows(lg, 0, T_MAX, "XL width, T = 1024, Vulkan");
    free(lc);
    free(lg);
    vk_test_close(gpu);
    gpu = NULL;
    vkg_gpt2_free(model);
    free(reference);
    remove_model_dir();
    free(dir);
    model = big, reference = big_reference, dir = big_dir;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forward_every_length),
        cmocka_unit_test(test_prefill_then_decode_cpu),
        cmocka_unit_test(test_prefill_then_decode_vulkan),
        cmocka_unit_test(test_xl_width),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
