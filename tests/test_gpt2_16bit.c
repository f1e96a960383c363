/* GPT-2 with 16-bit weight matrices (f16 and bf16), end to end: folders `vkgraph gpt2-random
 * --dtype f16|bf16` writes load as stored, never widened (half the weight bytes, in memory and
 * in the plan); the CPU executor's logits at every position match the independent NumPy
 * implementation (tools/gpt2_reference.py, which reads the same 16-bit values) to nmse 1e-6; an
 * F32 folder converted at load (`--dtype f16`) is the F16 folder bit for bit; the Vulkan
 * executor (lavapipe here, with the validation layer) matches the CPU; and a plan compiled for a
 * device without 16-bit storage (the weights widened to f32 by the executor) gives exactly the
 * logits of the model widened at load, on both executors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "models/gpt2.h"
#include "models/model_run.h"
#include "models/gpt2_random.h"
#include "support/test_util.h"
#include "support/vk_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NMSE_MAX 1e-6
#define T 12

static vkg_device *cpu, *gpu;
static char *tmp;
static const int32_t ids[T] = {3, 60, 17, 0, 41, 63, 5, 5, 22, 9, 50, 1};

/* The default tiny model but wider, so that a matmul crosses tiles: 2 layers, 4 heads, n_embd 64,
 * 16 positions, 96 tokens. */
static const char *write_model(const char *name, vkg_st_dtype dtype) {
    static char d[3][512];
    static int next;
    char *dir = d[next++ % 3];
    snprintf(dir, 512, "%s/%s", tmp, name);
    vkg_gpt2_random_options o;
    vkg_gpt2_random_options_default(&o);
    o.config.n_embd = 64;
    o.config.vocab_size = 96;
    o.config.bos_token_id = o.config.eos_token_id = 95;
    o.dtype = dtype;
    vkg_error err = {0};
    if (vkg_gpt2_write_random(dir, &o, &err) != VKG_OK) fail_msg("%s", err.message);
    return dir;
}

static vkg_gpt2 *load_as(const char *dir, int dtype) {
    vkg_gpt2_load_options o;
    vkg_gpt2_load_options_default(&o);
    o.dtype = dtype;
    vkg_gpt2 *m = NULL;
    vkg_error err = {0};
    if (vkg_gpt2_load_with(dir, &o, &m, &err) != VKG_OK) fail_msg("%s", err.message);
    return m;
}

static float *logits_on(vkg_device *d, const vkg_gpt2 *m) {
    float *out = malloc((size_t)T * (size_t)m->config.vocab_size * sizeof *out);
    vkg_error err = {0};
    if (vkg_decoder_forward(&m->decoder, d, ids, T, 1, out, VKG_NO_ATTENTION, NULL, &err) != VKG_OK)
        fail_msg("%s", err.message);
    return out;
}

static uint64_t constant_bytes(const vkg_gpt2 *m) {
    vkg_forward_options o;
    vkg_forward_options_default(&o, T);
    vkg_forward_graph gg;
    vkg_error err = {0};
    if (vkg_decoder_build(&m->decoder, &o, &gg, &err) != VKG_OK) fail_msg("%s", err.message);
    vkg_plan *p = NULL;
    if (vkg_plan_compile(gg.graph, NULL, &p, &err) != VKG_OK) fail_msg("%s", err.message);
    vkg_memory_stats ms;
    vkg_plan_memory(p, &ms);
    vkg_plan_free(p);
    vkg_forward_graph_free(&gg);
    return ms.constant_bytes;
}

static int setup(void **state) {
    (void)state;
    tmp = test_tmpdir("gpt2-16bit");
    return tmp ? vk_test_pair_setup(&cpu, &gpu) : -1;
}

static int teardown(void **state) {
    (void)state;
    int rc = test_remove_tree(tmp);
    free(tmp);
    return vk_test_pair_teardown(&cpu, &gpu) == 0 && rc == 0 ? 0 : -1;
}

/* As stored: f16 and bf16 matrices stay 16-bit; the model's block and the plan's constants are
 * about half the f32 model's (the f32 vectors are a few percent of the weights). */
static void test_loads_as_stored(void **state) {
    (void)state;
    vkg_gpt2 *f32 = load_as(write_model("f32", VKG_ST_F32), VKG_GPT2_DTYPE_AS_STORED);
    const uint64_t f32_constants = constant_bytes(f32);
    const vkg_st_dtype file[2] = {VKG_ST_F16, VKG_ST_BF16};
    const vkg_dtype held[2] = {VKG_F16, VKG_BF16};
    for (int i = 0; i < 2; i++) {
        vkg_gpt2 *m = load_as(write_model(i ? "bf16" : "f16", file[i]), VKG_GPT2_DTYPE_AS_STORED);
        assert_int_equal(m->weight_dtype, held[i]);
        double ratio = (double)constant_bytes(m) / (double)f32_constants;
        if (!(ratio > 0.5 && ratio < 0.53)) fail_msg("%s: plan constants %.3f of the f32 model's", vkg_dtype_name(held[i]), ratio);
        ratio = (double)m->weights_bytes / (double)f32->weights_bytes;
        if (!(ratio > 0.45 && ratio < 0.6)) fail_msg("%s: weights block %.3f of the f32 model's", vkg_dtype_name(held[i]), ratio);
        vkg_gpt2_free(m);
    }
    vkg_gpt2_free(f32);
}

/* The CPU executor with f16 and bf16 weights against NumPy reading the same files. */
static void test_cpu_against_numpy(void **state) {
    (void)state;
    const vkg_st_dtype file[2] = {VKG_ST_F16, VKG_ST_BF16};
    for (int i = 0; i < 2; i++) {
        const char *dir = write_model(i ? "bf16" : "f16", file[i]);
        vkg_gpt2 *m = load_as(dir, VKG_GPT2_DTYPE_AS_STORED);
        const size_t n = (size_t)T * (size_t)m->config.vocab_size;
        float *want = test_numpy_logits(dir, ids, T, m->config.vocab_size);
        float *got = logits_on(cpu, m);
        double e = test_nmse(got, want, n);
        if (!(e <= NMSE_MAX)) fail_msg("%s: CPU logits nmse %.3e against NumPy", vkg_st_dtype_name(file[i]), e);
        /* The f32 model's logits are farther away: the check tells the rounding apart. */
        vkg_gpt2 *f32 = load_as(write_model("f32", VKG_ST_F32), VKG_GPT2_DTYPE_AS_STORED);
        float *exact = logits_on(cpu, f32);
        if (!(test_nmse(exact, want, n) > 10 * e)) fail_msg("%s: f32 logits are as close as the 16-bit ones", vkg_st_dtype_name(file[i]));
        free(exact);
        vkg_gpt2_free(f32);
        free(got);
        free(want);
        vkg_gpt2_free(m);
    }
}

/* --dtype f16 / bf16 on an F32 folder rounds each matrix as the writer does: the 16-bit folder's
 * matrices bit for bit (its vectors stay f32, where the 16-bit file rounded them too). */
static void test_converted_at_load(void **state) {
    (void)state;
    const char *f32_dir = write_model("f32", VKG_ST_F32);
    const vkg_st_dtype file[2] = {VKG_ST_F16, VKG_ST_BF16};
    const vkg_dtype held[2] = {VKG_F16, VKG_BF16};
    for (int i = 0; i < 2; i++) {
        vkg_gpt2 *stored = load_as(write_model(i ? "bf16" : "f16", file[i]), VKG_GPT2_DTYPE_AS_STORED);
        vkg_gpt2 *converted = load_as(f32_dir, held[i]);
        assert_int_equal(converted->weight_dtype, held[i]);
        assert_int_equal(converted->weights_bytes, stored->weights_bytes);
        const size_t C = (size_t)stored->config.n_embd, V = (size_t)stored->config.vocab_size;
        assert_memory_equal(converted->wte, stored->wte, V * C * 2);
        for (int l = 0; l < stored->config.n_layer; l++) {
            assert_memory_equal(converted->layers[l].attn_w, stored->layers[l].attn_w, C * 3 * C * 2);
            assert_memory_equal(converted->layers[l].mlp_proj_w, stored->layers[l].mlp_proj_w, 4 * C * C * 2);
        }
        float *a = logits_on(cpu, stored), *b = logits_on(cpu, converted);
        /* only the vectors differ: by their rounding to 11 (f16) or 8 (bf16) significant bits */
        assert_true(test_nmse(b, a, (size_t)T * V) <= (i ? 1e-3 : 1e-5));
        free(a);
        free(b);
        vkg_gpt2_free(converted);
        vkg_gpt2_free(stored);
    }
}

/* Vulkan reads the 16-bit weights as stored (its plan holds them at 2 bytes) and agrees with the
 * CPU. */
static void test_vulkan_against_cpu(void **state) {
    (void)state;
    if (!gpu) skip();
    const vkg_st_dtype file[2] = {VKG_ST_F16, VKG_ST_BF16};
    for (int i = 0; i < 2; i++) {
        vkg_gpt2 *m = load_as(write_model(i ? "bf16" : "f16", file[i]), VKG_GPT2_DTYPE_AS_STORED);
        float *want = logits_on(cpu, m), *got = logits_on(gpu, m);
        double e = test_nmse(got, want, (size_t)T * (size_t)m->config.vocab_size);
        if (!(e <= NMSE_MAX)) fail_msg("%s: Vulkan logits nmse %.3e against the CPU", vkg_st_dtype_name(file[i]), e);
        free(want);
        free(got);
        vkg_gpt2_free(m);
    }
}

/* All-position logits of m's T-token plan compiled for dev with read_16bit as given. */
static float *logits_read_16bit(vkg_device *dev, const vkg_gpt2 *m, int read_16bit, uint64_t *constants) {
    vkg_forward_options o;
    vkg_forward_options_default(&o, T);
    o.all_logits = 1;
    vkg_forward_graph gg;
    vkg_error err = {0};
    if (vkg_decoder_build(&m->decoder, &o, &gg, &err) != VKG_OK) fail_msg("%s", err.message);
    vkg_compile_options co;
    vkg_compile_options_default(&co);
    vkg_device_compile_options(dev, &co);
    co.read_16bit = read_16bit;
    vkg_plan *p = NULL;
    vkg_session *s = NULL;
    if (vkg_plan_compile(gg.graph, &co, &p, &err) != VKG_OK || vkg_session_new(dev, p, &s, &err) != VKG_OK)
        fail_msg("%s", err.message);
    int32_t positions[T];
    for (int i = 0; i < T; i++) positions[i] = i;
    const size_t n = (size_t)T * (size_t)m->config.vocab_size;
    float *out = malloc(n * sizeof *out);
    if (vkg_session_set_input(s, gg.ids, ids, sizeof ids, &err) != VKG_OK ||
        vkg_session_set_input(s, gg.positions, positions, sizeof positions, &err) != VKG_OK ||
        vkg_session_run(s, &err) != VKG_OK || vkg_session_get_output(s, gg.logits, out, n * sizeof *out, &err) != VKG_OK)
        fail_msg("%s", err.message);
    vkg_memory_stats ms;
    vkg_plan_memory(p, &ms);
    *constants = ms.constant_bytes;
    vkg_session_free(s);
    vkg_plan_free(p);
    vkg_forward_graph_free(&gg);
    return out;
}

/* The fallback of a device without 16-bit storage: the plan holds the weights as f32 (twice the
 * constant bytes) and the executor widens them once; the logits are those of the model widened
 * at load, bit for bit on each executor. */
static void test_widened_by_the_executor(void **state) {
    (void)state;
    const char *dir = write_model("f16", VKG_ST_F16);
    vkg_gpt2 *m = load_as(dir, VKG_GPT2_DTYPE_AS_STORED), *wide = load_as(dir, VKG_F32);
    vkg_device *devs[2] = {cpu, gpu};
    for (int d = 0; d < 2; d++) {
        if (!devs[d]) continue;
        uint64_t c16 = 0, c32 = 0, cw = 0;
        float *as_stored = logits_read_16bit(devs[d], m, 1, &c16);
        float *widened = logits_read_16bit(devs[d], m, 0, &c32);
        float *want = logits_read_16bit(devs[d], wide, 1, &cw);
        assert_true(c32 == cw && c16 < c32 * 6 / 10);
        const size_t n = (size_t)T * (size_t)m->config.vocab_size;
        assert_memory_equal(widened, want, n * sizeof *want);
        assert_true(test_nmse(as_stored, want, n) <= NMSE_MAX);
        free(as_stored);
        free(widened);
        free(want);
    }
    vkg_gpt2_free(wide);
    vkg_gpt2_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loads_as_stored),
        cmocka_unit_test(test_cpu_against_numpy),
        cmocka_unit_test(test_converted_at_load),
        cmocka_unit_test(test_vulkan_against_cpu),
        cmocka_unit_test(test_widened_by_the_executor),
    };
    return vk_test_exit_status(cmocka_run_group_tests(tests, setup, teardown));
}
