/* GPT-2 as a graph, run on the CPU executor: logits and attention against golden files from the
 * independent NumPy implementation (tools/gpt2_reference.py), the KV cache against full forward
 * passes, and generation with and without the cache.
 *
 * Tolerances: the golden files are float64 results rounded to float32; the library computes in
 * float32, so logits (of size ~1) agree to 1e-4 and probabilities to 1e-5 absolute.  Runs of the
 * same weights through different plans (cached chunks, decode steps) agree to 1e-4. */
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

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LOGIT_TOL 1e-4
#define PROB_TOL 1e-5

static vkg_device *cpu;

static int open_cpu(void **state) {
    (void)state;
    vkg_device_options o = {.cpu_threads = 2, .quiet = 1};
    vkg_error err = {0};
    if (vkg_device_open("cpu", &o, &cpu, &err) != VKG_OK) {
        fprintf(stderr, "cannot open the CPU device: %s\n", err.message);
        return -1;
    }
    return 0;
}

static int close_cpu(void **state) {
    (void)state;
    vkg_device_free(cpu);
    return 0;
}

static vkg_gpt2 *load(const char *dir) {
    vkg_gpt2 *m = NULL;
    vkg_error err = {0};
    if (vkg_gpt2_load(dir, &m, &err) != VKG_OK) fail_msg("loading %s: %s", dir, err.message);
    return m;
}

static float *read_npy(const char *rel, int64_t expect_numel) {
    float *data = NULL;
    int ndim = 0;
    int64_t shape[VKG_NPY_MAX_DIMS];
    vkg_error err = {0};
    if (vkg_npy_read_f32(test_data_path(rel), &data, &ndim, shape, &err) != VKG_OK) fail_msg("%s", err.message);
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    assert_int_equal(n, expect_numel);
    return data;
}

/* Every position's logits [n, V] from one forward pass without a cache. */
static float *full_logits(const vkg_gpt2 *m, const int32_t *ids, int n) {
    float *logits = malloc((size_t)n * (size_t)m->config.vocab_size * sizeof *logits);
    assert_non_null(logits);
    vkg_error err = {0};
    if (vkg_decoder_forward(&m->decoder, cpu, ids, n, 1, logits, VKG_NO_ATTENTION, NULL, &err) != VKG_OK)
        fail_msg("%s", err.message);
    return logits;
}

static void expect_close(const float *got, const float *want, size_t n, double tol, const char *what) {
    double d = test_max_abs_diff(got, want, n);
    if (!(d <= tol)) fail_msg("%s: max |difference| %g exceeds %g", what, d, tol);
}

/* ---- golden files ------------------------------------------------------------------------------ */

static void check_golden(const char *dir_rel) {
    char path[1100];
    snprintf(path, sizeof path, "%s", test_data_path(dir_rel));
    vkg_gpt2 *m = load(path);
    int32_t ids[64];
    const int T = test_read_ids(dir_rel, ids, 64), V = m->config.vocab_size, H = m->config.n_head, L = m->config.n_layer;
    assert_int_equal(T, 12);
    snprintf(path, sizeof path, "%s/logits.npy", dir_rel);
    float *want_logits = read_npy(path, (int64_t)T * V);
    snprintf(path, sizeof path, "%s/attention.npy", dir_rel);
    float *want_attn = read_npy(path, (int64_t)L * H * T * T);

    /* Every layer's attention and every position's logits from one run. */
    vkg_forward_options o;
    vkg_forward_options_default(&o, T);
    o.all_logits = 1;
    o.attention_layer = VKG_ALL_LAYERS;
    vkg_runner r;
    vkg_error err = {0};
    if (vkg_runner_new(&m->decoder, cpu, &o, &r, &err) != VKG_OK) fail_msg("%s", err.message);
    assert_int_equal(vkg_runner_run(&r, ids, 0, &err), VKG_OK);
    float *logits = malloc((size_t)T * V * sizeof *logits), *attn = malloc((size_t)H * T * T * sizeof *attn);
    assert_int_equal(vkg_runner_logits(&r, logits, (size_t)T * V, &err), VKG_OK);
    expect_close(logits, want_logits, (size_t)T * V, LOGIT_TOL, "logits against the golden file");
    for (int l = 0; l < L; l++) {
        assert_int_equal(vkg_runner_attention(&r, l, attn, (size_t)H * T * T, &err), VKG_OK);
        expect_close(attn, want_attn + (size_t)l * H * T * T, (size_t)H * T * T, PROB_TOL, "attention");
    }
    vkg_runner_free(&r);

    /* The default: the last position's logits only, and one layer's attention. */
    float *last = malloc((size_t)V * sizeof *last);
    if (vkg_decoder_forward(&m->decoder, cpu, ids, T, 0, last, 1, attn, &err) != VKG_OK) fail_msg("%s", err.message);
    expect_close(last, want_logits + (size_t)(T - 1) * V, (size_t)V, LOGIT_TOL, "last logits");
    expect_close(attn, want_attn + (size_t)H * T * T, (size_t)H * T * T, PROB_TOL, "layer 1 attention");
    /* Attention without logits: the same probabilities from a plan without the later layers. */
    if (vkg_decoder_forward(&m->decoder, cpu, ids, T, 0, NULL, 0, attn, &err) != VKG_OK) fail_msg("%s", err.message);
    expect_close(attn, want_attn, (size_t)H * T * T, PROB_TOL, "layer 0 attention without logits");
    free(last);
    free(logits);
    free(attn);
    free(want_logits);
    free(want_attn);
    vkg_gpt2_free(m);
}

static void test_golden(void **state) {
    (void)state;
    check_golden("gpt2-tiny");
}

/* BF16, "transformer." names, an untied head and the attn.bias buffers, against its own golden. */
static void test_golden_variant(void **state) {
    (void)state;
    check_golden("gpt2-tiny-variant");
    vkg_gpt2 *m = load(test_data_path("gpt2-tiny-variant"));
    assert_true(m->transformer_prefix);
    assert_false(m->tied_head);
    assert_ptr_not_equal(m->lm_head, m->wte);
    assert_int_equal(m->dtype, VKG_ST_BF16);
    vkg_gpt2_free(m);
}

/* ---- the KV cache ------------------------------------------------------------------------------ */

/* Prefill in chunks of 4 tokens into one session (pos 0, 4, 8) gives every position's logits and
 * attention rows of one full pass. */
static void test_cache_chunks_equal_full_pass(void **state) {
    (void)state;
    vkg_gpt2 *m = load(test_data_path("gpt2-tiny"));
    int32_t ids[12];
    const int T = test_read_ids("gpt2-tiny", ids, 12), V = m->config.vocab_size, H = m->config.n_head, S = 12, C = 4;
    float *want = full_logits(m, ids, T);
    float *want_attn = read_npy("gpt2-tiny/attention.npy", 2LL * H * T * T);
    vkg_forward_options o;
    vkg_forward_options_default(&o, C);
    o.cache_len = S;
    o.all_logits = 1;
    o.attention_layer = 1;
    vkg_runner r;
    vkg_error err = {0};
    if (vkg_runner_new(&m->decoder, cpu, &o, &r, &err) != VKG_OK) fail_msg("%s", err.message);
    float *logits = malloc((size_t)C * V * sizeof *logits), *attn = malloc((size_t)H * C * S * sizeof *attn);
    for (int start = 0; start < T; start += C) {
        if (vkg_runner_run(&r, ids + start, start, &err) != VKG_OK) fail_msg("%s", err.message);
        assert_int_equal(vkg_runner_logits(&r, logits, (size_t)C * V, &err), VKG_OK);
        expect_close(logits, want + (size_t)start * V, (size_t)C * V, LOGIT_TOL, "chunk logits");
        /* Rows [H, C, S] of the cache: keys not yet written get weight exactly 0. */
        assert_int_equal(vkg_runner_attention(&r, 1, attn, (size_t)H * C * S, &err), VKG_OK);
        for (int h = 0; h < H; h++)
            for (int i = 0; i < C; i++)
                for (int j = 0; j < S; j++) {
                    float got = attn[((size_t)h * C + i) * S + j];
                    float exp_ = want_attn[(((size_t)H + h) * T + start + i) * T + j];
                    if (j > start + i) assert_true(got == 0.0f);
                    else assert_true(fabs(got - exp_) <= PROB_TOL);
                }
    }
    /* A run past the cache is refused. */
    assert_int_equal(vkg_runner_run(&r, ids, 10, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "do not fit the KV cache of 12 positions"));
    vkg_runner_free(&r);
    free(logits);
    free(attn);
    free(want);
    free(want_attn);
    vkg_gpt2_free(m);
}

/* The square pattern of a prefill from position 0, sliced inside the graph. */
static void test_cache_attention_keys(void **state) {
    (void)state;
    vkg_gpt2 *m = load(test_data_path("gpt2-tiny"));
    int32_t ids[12];
    const int T = test_read_ids("gpt2-tiny", ids, 12), H = m->config.n_head;
    float *want_attn = read_npy("gpt2-tiny/attention.npy", 2LL * H * T * T);
    vkg_forward_options o;
    vkg_forward_options_default(&o, T);
    o.cache_len = 32;
    o.attention_layer = VKG_ALL_LAYERS;
    o.attention_keys = T;
    vkg_runner r;
    vkg_error err = {0};
    if (vkg_runner_new(&m->decoder, cpu, &o, &r, &err) != VKG_OK) fail_msg("%s", err.message);
    assert_int_equal(vkg_runner_run(&r, ids, 0, &err), VKG_OK);
    float *attn = malloc((size_t)H * T * T * sizeof *attn);
    for (int l = 0; l < 2; l++) {
        assert_int_equal(vkg_runner_attention(&r, l, attn, (size_t)H * T * T, &err), VKG_OK);
        expect_close(attn, want_attn + (size_t)l * H * T * T, (size_t)H * T * T, PROB_TOL, "sliced attention");
    }
    vkg_runner_free(&r);
    free(attn);
    free(want_attn);
    vkg_gpt2_free(m);
}

/* Token-by-token decoding: after each token, the logits of the full pass at that position. */
static void test_decode_equals_full_pass(void **state) {
    (void)state;
    vkg_gpt2 *m = load(test_data_path("gpt2-tiny"));
    int32_t ids[12];
    const int T = test_read_ids("gpt2-tiny", ids, 12), V = m->config.vocab_size;
    float *want = full_logits(m, ids, T);
    vkg_generator gen;
    vkg_error err = {0};
    if (vkg_generator_new(&m->decoder, cpu, T, &gen, &err) != VKG_OK) fail_msg("%s", err.message);
    for (int i = 0; i < T; i++) {
        assert_int_equal(vkg_generator_feed(&gen, &ids[i], 1, &err), VKG_OK);
        expect_close(gen.logits, want + (size_t)i * V, (size_t)V, LOGIT_TOL, "decode logits");
    }
    assert_int_equal(gen.length, T);
    /* Full: one more token is refused, with the cache's size in the message. */
    assert_int_equal(vkg_generator_feed(&gen, ids, 1, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "12 positions"));
    /* After a reset the same prompt gives the same prediction, fed all at once. */
    assert_int_equal(vkg_generator_reset(&gen, &err), VKG_OK);
    assert_int_equal(vkg_generator_feed(&gen, ids, 5, &err), VKG_OK);
    expect_close(gen.logits, want + 4 * (size_t)V, (size_t)V, LOGIT_TOL, "logits after a reset");
    vkg_generator_free(&gen);
    free(want);
    vkg_gpt2_free(m);
}

/* ---- generation -------------------------------------------------------------------------------- */

/* n tokens after the prompt with the cache. */
static void generate_cached(const vkg_gpt2 *m, const vkg_sampling_options *so, const int32_t *prompt, int np,
                            int32_t *out, int n) {
    vkg_generator gen;
    vkg_sampler s;
    vkg_error err = {0};
    assert_int_equal(vkg_sampler_init(&s, so, m->config.vocab_size, &err), VKG_OK);
    if (vkg_generator_new(&m->decoder, cpu, np + n, &gen, &err) != VKG_OK) fail_msg("%s", err.message);
    assert_int_equal(vkg_generator_feed(&gen, prompt, np, &err), VKG_OK);
    for (int i = 0; i < n; i++) {
        /* no penalty: no context needed */
        assert_int_equal(vkg_sampler_next(&s, gen.logits, NULL, 0, &out[i], &err), VKG_OK);
        assert_int_equal(vkg_generator_feed(&gen, &out[i], 1, &err), VKG_OK);
    }
    vkg_generator_free(&gen);
    vkg_sampler_free(&s);
}

static void test_greedy_cache_equals_recompute(void **state) {
    (void)state;
    vkg_gpt2 *m = load(test_data_path("gpt2-tiny"));
    const int V = m->config.vocab_size;
    int32_t seq[24] = {17, 301, 5, 88};
    const int np = 4, n = 12;
    vkg_sampling_options so;
    vkg_sampling_options_default(&so);
    so.temperature = 0.0f;
    int32_t cached[12];
    generate_cached(m, &so, seq, np, cached, n);
    /* Without the cache: a full pass over the whole sequence for every new token. */
    float *last = malloc((size_t)V * sizeof *last);
    vkg_error err = {0};
    for (int i = 0; i < n; i++) {
        if (vkg_decoder_forward(&m->decoder, cpu, seq, np + i, 0, last, VKG_NO_ATTENTION, NULL, &err) != VKG_OK)
            fail_msg("%s", err.message);
        seq[np + i] = vkg_argmax(last, V);
        assert_int_equal(seq[np + i], cached[i]);
    }
    free(last);
    vkg_gpt2_free(m);
}

static void test_same_seed_same_ids(void **state) {
    (void)state;
    vkg_gpt2 *m = load(test_data_path("gpt2-tiny"));
    const int32_t prompt[3] = {42, 7, 300};
    vkg_sampling_options so;
    vkg_sampling_options_default(&so);
    so.temperature = 1.5f;
    so.top_k = 50;
    so.seed = 1234;
    int32_t a[16], b[16], c[16];
    generate_cached(m, &so, prompt, 3, a, 16);
    generate_cached(m, &so, prompt, 3, b, 16);
    assert_memory_equal(a, b, sizeof a);
    so.seed = 1235;
    generate_cached(m, &so, prompt, 3, c, 16);
    assert_true(memcmp(a, c, sizeof a) != 0); /* 16 draws from ~50 tokens: equal by chance ~never */
    vkg_gpt2_free(m);
}

/* ---- limits ------------------------------------------------------------------------------------ */

static void test_prompt_limits(void **state) {
    (void)state;
    vkg_gpt2 *m = load(test_data_path("gpt2-tiny"));
    int32_t ids[40] = {0};
    float logits[512];
    vkg_error err = {0};
    assert_int_equal(vkg_decoder_forward(&m->decoder, cpu, ids, 33, 0, logits, VKG_NO_ATTENTION, NULL, &err),
                     VKG_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "33 tokens, more than the model's context of 32 positions"));
    ids[3] = 512;
    assert_int_equal(vkg_decoder_check_ids(&m->decoder, ids, 5, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "token id 512 at position 3 is outside the vocabulary [0, 512)"));
    ids[3] = -1;
    assert_int_equal(vkg_decoder_forward(&m->decoder, cpu, ids, 5, 0, logits, VKG_NO_ATTENTION, NULL, &err),
                     VKG_ERR_INVALID_ARGUMENT);
    assert_int_equal(vkg_decoder_check_ids(&m->decoder, ids, 0, &err), VKG_ERR_INVALID_ARGUMENT);
    vkg_forward_options o;
    vkg_forward_options_default(&o, 4);
    o.attention_layer = 2;
    vkg_forward_graph gg;
    assert_int_equal(vkg_decoder_build(&m->decoder, &o, &gg, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "layer 2 does not exist"));
    o.attention_layer = VKG_NO_ATTENTION;
    o.no_logits = 1;
    assert_int_equal(vkg_decoder_build(&m->decoder, &o, &gg, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "neither logits nor attention"));
    /* Layer 0's attention alone leaves layer 1 and the head out of the plan. */
    o.attention_layer = 0;
    int steps[2];
    for (int k = 0; k < 2; k++) {
        o.no_logits = k == 0;
        assert_int_equal(vkg_decoder_build(&m->decoder, &o, &gg, &err), VKG_OK);
        vkg_plan *plan = NULL;
        assert_int_equal(vkg_plan_compile(gg.graph, NULL, &plan, &err), VKG_OK);
        steps[k] = vkg_plan_step_count(plan);
        vkg_plan_free(plan);
        vkg_forward_graph_free(&gg);
    }
    assert_true(2 * steps[0] < steps[1] + 4);
    o.no_logits = 0;
    o.attention_layer = VKG_NO_ATTENTION;
    o.cache_len = 3;
    assert_int_equal(vkg_decoder_build(&m->decoder, &o, &gg, &err), VKG_ERR_INVALID_ARGUMENT);
    vkg_gpt2_free(m);
}

/* GPT-2 124M's shapes compile with the default 128 MiB bindings (the tied head, 154 MB, is split).
 * Only compiled, never run, so every weight can point at one small buffer. */
static void test_gpt2_small_shapes_compile(void **state) {
    (void)state;
    static float dummy[4];
    vkg_gpt2 m;
    memset(&m, 0, sizeof m);
    vkg_gpt2_config_default(&m.config); /* GPT2Config()'s defaults are GPT-2 124M */
    vkg_gpt2_layer layers[12];
    for (int i = 0; i < 12; i++)
        layers[i] = (vkg_gpt2_layer){dummy, dummy, dummy, dummy, dummy, dummy, dummy, dummy, dummy, dummy, dummy, dummy};
    m.layers = layers;
    m.wte = m.wpe = m.ln_f_w = m.ln_f_b = m.lm_head = dummy;
    m.tied_head = 1;
    m.activation = VKG_GPT2_ACT_GELU_TANH;
    vkg_gpt2_decoder_init(&m);
    vkg_forward_options o;
    vkg_forward_options_default(&o, 1);
    o.cache_len = 1024;
    vkg_forward_graph gg;
    vkg_error err = {0};
    if (vkg_decoder_build(&m.decoder, &o, &gg, &err) != VKG_OK) fail_msg("%s", err.message);
    assert_int_equal(vkg_graph_constant_numel(gg.graph), 124439808); /* GPT-2 124M, head tied */
    vkg_plan *plan = NULL;
    if (vkg_plan_compile(gg.graph, NULL, &plan, &err) != VKG_OK) fail_msg("%s", err.message);
    vkg_memory_stats ms;
    vkg_plan_memory(plan, &ms);
    assert_true(ms.arena_bytes < (16u << 20)); /* one token's intermediates: a few MB */
    vkg_plan_free(plan);
    vkg_forward_graph_free(&gg);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden),
        cmocka_unit_test(test_golden_variant),
        cmocka_unit_test(test_cache_chunks_equal_full_pass),
        cmocka_unit_test(test_cache_attention_keys),
        cmocka_unit_test(test_decode_equals_full_pass),
        cmocka_unit_test(test_greedy_cache_equals_recompute),
        cmocka_unit_test(test_same_seed_same_ids),
        cmocka_unit_test(test_prompt_limits),
        cmocka_unit_test(test_gpt2_small_shapes_compile),
    };
    return cmocka_run_group_tests(tests, open_cpu, close_cpu);
}
