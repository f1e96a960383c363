/* The public model API (vkgraph_model.h), used as a program outside the library would use it:
 * the installed headers only.  Contexts against the golden files of tests/data/gpt2-tiny (from
 * the independent NumPy implementation, tools/gpt2_reference.py) on the CPU and on Vulkan:
 * prefill, decode one token at a time, truncate and reset, logits of every position, attention
 * of any layer; generation with its streaming callback and pending token against recomputed
 * greedy choices; the timings' counts; the facts; the errors; the model's graph; the writer of
 * random checkpoints.
 *
 * Tolerances as in test_gpt2.c: logits 1e-4, probabilities 1e-5 absolute. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "support/test_util.h"
#include "vkgraph_model.h"
#include "vkgraph_npy.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LOGIT_TOL 1e-4
#define PROB_TOL 1e-5

enum { T = 12, V = 512, H = 4, L = 2, CTX = 32 };

typedef struct fixture {
    const char *device;
    vkg_device *dev;
    vkg_model *model;
    int32_t ids[64];
    float *logits;   /* golden [T, V]        */
    float *attn;     /* golden [L, H, T, T]  */
} fixture;

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

static int setup(void **state, const char *device) {
    fixture *f = calloc(1, sizeof *f);
    if (!f) return -1;
    f->device = device;
    if (test_open_model(device, "gpt2-tiny", &f->dev, &f->model) != 0) {
        free(f);
        return -1;
    }
    if (test_read_ids("gpt2-tiny", f->ids, 64) != T) return -1;
    f->logits = read_npy("gpt2-tiny/logits.npy", (int64_t)T * V);
    f->attn = read_npy("gpt2-tiny/attention.npy", (int64_t)L * H * T * T);
    *state = f;
    return 0;
}
static int setup_cpu(void **state) { return setup(state, "cpu"); }
static int setup_vulkan(void **state) { return setup(state, "vulkan"); }

static int teardown(void **state) {
    fixture *f = *state;
    const int rc = test_close_model(f->dev, f->model);
    free(f->logits);
    free(f->attn);
    free(f);
    return rc;
}

static void expect_close(const float *got, const float *want, size_t n, double tol, const char *what) {
    double worst = test_max_abs_diff(got, want, n);
    if (!(worst <= tol)) fail_msg("%s: max |diff| %g > %g", what, worst, tol);
}

static vkg_context *context(fixture *f, int n_ctx, vkg_logits_mode logits, int attention_layer) {
    vkg_context_options o;
    vkg_context_options_default(&o);
    o.n_ctx = n_ctx;
    o.logits = logits;
    o.attention_layer = attention_layer;
    vkg_context *ctx = NULL;
    vkg_error err = {0};
    if (vkg_context_new(f->model, &o, &ctx, &err) != VKG_OK) fail_msg("%s", err.message);
    return ctx;
}

static void check(vkg_status st, const vkg_error *err) {
    if (st != VKG_OK) fail_msg("%s", err->message);
}

/* Query row q of layer l, head h in the golden file, keys 0..keys-1. */
static const float *golden_row(const fixture *f, int l, int h, int q) {
    return f->attn + (((size_t)l * H + (size_t)h) * T + (size_t)q) * T;
}

static void test_facts(void **state) {
    fixture *f = *state;
    vkg_model_info info;
    vkg_error err = {0};
    check(vkg_model_get_info(f->model, &info, &err), &err);
    assert_string_equal(info.architecture, "gpt2");
    assert_int_equal(info.n_layer, L);
    assert_int_equal(info.n_head, H);
    assert_int_equal(info.n_kv_head, H);
    assert_int_equal(info.n_embd, 32);
    assert_int_equal(info.n_ctx, CTX);
    assert_int_equal(info.n_vocab, V);
    assert_int_equal(info.n_inner, 128);
    /* wte + wpe + 2 layers of (2 LN + c_attn + c_proj + 2 LN + c_fc + c_proj) + ln_f, tied head */
    const int64_t C = 32, I = 128;
    const int64_t layer = 4 * C + (C * 3 * C + 3 * C) + (C * C + C) + (C * I + I) + (I * C + C);
    assert_int_equal(info.n_params, V * C + CTX * C + L * layer + 2 * C);
    assert_int_equal(info.bos_token, 511);
    assert_int_equal(info.eos_token, 511);
    assert_int_equal(info.tied_head, 1);
    assert_int_equal(info.random_weights, 1); /* the folder holds RANDOM-WEIGHTS.txt */
    assert_int_equal(info.dtype, VKG_WEIGHTS_F32);
    /* held as the device reads faster: [out, in] on the CPU (its dot products) and on lavapipe */
    assert_int_equal(info.weights_transposed, vkg_device_prefers_transposed_weights(f->dev));
    if (strcmp(f->device, "cpu") == 0) assert_int_equal(info.weights_transposed, 1);
    assert_ptr_equal(vkg_model_device(f->model), f->dev);
    assert_null(vkg_model_tokenizer(f->model)); /* the folder has no tokenizer files */
}

/* An f32 checkpoint converted to f16 at open: the facts say so, and the logits stay near the
 * golden f32 ones (f16 keeps 11 bits of each weight; the arithmetic is f32). */
static void test_converted_to_f16(void **state) {
    fixture *f = *state;
    vkg_error err = {0};
    vkg_model_options mo;
    vkg_model_options_default(&mo);
    mo.dtype = VKG_WEIGHTS_F16;
    vkg_model *m = NULL;
    check(vkg_model_open(test_data_path("gpt2-tiny"), f->dev, &mo, &m, &err), &err);
    vkg_model_info info;
    check(vkg_model_get_info(m, &info, &err), &err);
    assert_int_equal(info.dtype, VKG_WEIGHTS_F16);
    vkg_context_options o;
    vkg_context_options_default(&o);
    o.n_ctx = T;
    o.logits = VKG_LOGITS_ALL;
    vkg_context *ctx = NULL;
    check(vkg_context_new(m, &o, &ctx, &err), &err);
    check(vkg_context_prefill(ctx, f->ids, T, &err), &err);
    float *logits = malloc(sizeof(float) * T * V);
    assert_non_null(logits);
    check(vkg_context_get_logits(ctx, logits, (size_t)T * V, &err), &err);
    const double nmse = test_nmse(logits, f->logits, (size_t)T * V);
    assert_true(nmse > 0 && nmse < 1e-4); /* rounded, so not equal; but close */
    free(logits);
    vkg_context_free(ctx);
    vkg_model_free(m);
}

/* One prefill with every position's logits and every layer's attention: the golden files. */
static void test_prefill_golden(void **state) {
    fixture *f = *state;
    vkg_context *ctx = context(f, T, VKG_LOGITS_ALL, VKG_ALL_LAYERS);
    vkg_error err = {0};
    check(vkg_context_prefill(ctx, f->ids, T, &err), &err);
    assert_int_equal(vkg_context_length(ctx), T);
    float *logits = malloc(sizeof(float) * T * V), *attn = malloc(sizeof(float) * H * T * T);
    check(vkg_context_get_logits(ctx, logits, (size_t)T * V, &err), &err);
    expect_close(logits, f->logits, (size_t)T * V, LOGIT_TOL, "every position's logits");
    for (int l = 0; l < L; l++) {
        check(vkg_context_get_attention(ctx, l, attn, (size_t)H * T * T, &err), &err);
        expect_close(attn, f->attn + (size_t)l * H * T * T, (size_t)H * T * T, PROB_TOL, "attention");
    }
    /* The wrong size is refused, naming what the last feed holds. */
    assert_int_equal(vkg_context_get_logits(ctx, logits, V, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "floats"));
    free(logits);
    free(attn);
    vkg_context_free(ctx);
}

/* A prefill of 5, then one token at a time: after each feed the prediction is the golden row,
 * and the decode step's attention is the golden query row over the keys cached so far. */
static void test_decode_golden(void **state) {
    fixture *f = *state;
    const int layer = 1;
    vkg_context *ctx = context(f, CTX, VKG_LOGITS_LAST, layer);
    vkg_error err = {0};
    float logits[V], attn[H * T];
    check(vkg_context_prefill(ctx, f->ids, 5, &err), &err);
    check(vkg_context_get_logits(ctx, logits, V, &err), &err);
    expect_close(logits, f->logits + 4 * V, V, LOGIT_TOL, "logits after the prefill");
    for (int i = 5; i < T; i++) {
        check(vkg_context_decode(ctx, f->ids[i], &err), &err);
        assert_int_equal(vkg_context_length(ctx), i + 1);
        check(vkg_context_get_logits(ctx, logits, V, &err), &err);
        expect_close(logits, f->logits + (size_t)i * V, V, LOGIT_TOL, "decode logits");
        check(vkg_context_get_attention(ctx, layer, attn, (size_t)H * (size_t)(i + 1), &err), &err);
        for (int h = 0; h < H; h++)
            expect_close(attn + (size_t)h * (size_t)(i + 1), golden_row(f, layer, h, i), (size_t)(i + 1), PROB_TOL,
                         "decode attention");
    }
    /* Only the layer asked for is kept. */
    assert_int_equal(vkg_context_get_attention(ctx, 0, attn, (size_t)H * T, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "not asked for"));
    vkg_context_free(ctx);
}

static void test_truncate_reset(void **state) {
    fixture *f = *state;
    vkg_context *ctx = context(f, CTX, VKG_LOGITS_LAST, VKG_NO_ATTENTION);
    vkg_error err = {0};
    float logits[V];
    check(vkg_context_prefill(ctx, f->ids, T, &err), &err);
    /* Keep 4 tokens: the next feed writes position 4 and sees only positions 0..4. */
    check(vkg_context_truncate(ctx, 4, &err), &err);
    assert_int_equal(vkg_context_length(ctx), 4);
    assert_int_equal(vkg_context_get_logits(ctx, logits, V, &err), VKG_ERR_INVALID_ARGUMENT);
    check(vkg_context_decode(ctx, f->ids[4], &err), &err);
    check(vkg_context_get_logits(ctx, logits, V, &err), &err);
    expect_close(logits, f->logits + 4 * V, V, LOGIT_TOL, "logits after truncating to 4");
    assert_int_equal(vkg_context_truncate(ctx, 6, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "cannot keep 6 tokens of a cache holding 5"));
    /* Reset: an empty cache, then the first tokens again. */
    check(vkg_context_reset(ctx, &err), &err);
    assert_int_equal(vkg_context_length(ctx), 0);
    check(vkg_context_prefill(ctx, f->ids, 3, &err), &err);
    check(vkg_context_get_logits(ctx, logits, V, &err), &err);
    expect_close(logits, f->logits + 2 * V, V, LOGIT_TOL, "logits after a reset");
    vkg_context_free(ctx);
}

/* A context made for 5-token feeds: that plan, then a one-token plan made on the first decode,
 * then a plan for a 3-token feed, all over one cache; and one made for attention alone, whose
 * plan stops at the layer asked for. */
static void test_feed_sizes(void **state) {
    fixture *f = *state;
    vkg_context_options o;
    vkg_context_options_default(&o);
    o.n_batch = 5;
    vkg_context *ctx = NULL;
    vkg_error err = {0};
    check(vkg_context_new(f->model, &o, &ctx, &err), &err);
    float logits[V];
    check(vkg_context_prefill(ctx, f->ids, 5, &err), &err);
    check(vkg_context_get_logits(ctx, logits, V, &err), &err);
    expect_close(logits, f->logits + 4 * V, V, LOGIT_TOL, "the 5-token plan");
    check(vkg_context_decode(ctx, f->ids[5], &err), &err);
    check(vkg_context_get_logits(ctx, logits, V, &err), &err);
    expect_close(logits, f->logits + 5 * V, V, LOGIT_TOL, "the one-token plan");
    check(vkg_context_prefill(ctx, f->ids + 6, 3, &err), &err);
    check(vkg_context_get_logits(ctx, logits, V, &err), &err);
    expect_close(logits, f->logits + 8 * V, V, LOGIT_TOL, "a 3-token plan");
    vkg_context_free(ctx);
    o.n_batch = CTX + 1;
    assert_int_equal(vkg_context_new(f->model, &o, &ctx, &err), VKG_ERR_INVALID_ARGUMENT);

    vkg_context_options_default(&o);
    o.n_ctx = o.n_batch = T;
    o.logits = VKG_LOGITS_NONE;
    o.attention_layer = 0;
    check(vkg_context_new(f->model, &o, &ctx, &err), &err);
    check(vkg_context_prefill(ctx, f->ids, T, &err), &err);
    float *attn = malloc(sizeof(float) * H * T * T);
    check(vkg_context_get_attention(ctx, 0, attn, (size_t)H * T * T, &err), &err);
    expect_close(attn, f->attn, (size_t)H * T * T, PROB_TOL, "layer 0 alone");
    assert_int_equal(vkg_context_get_logits(ctx, logits, V, &err), VKG_ERR_INVALID_ARGUMENT);
    free(attn);
    vkg_context_free(ctx);
}

typedef struct collected {
    int32_t ids[64];
    int n, stop_after;
    size_t text_bytes;
} collected;

static int collect(void *user, int32_t id, const char *text, size_t len) {
    collected *c = user;
    (void)text;
    if (id != VKG_NO_TOKEN) c->ids[c->n++] = id;
    c->text_bytes += len;
    return c->stop_after && c->n >= c->stop_after;
}

/* The greedy next token after ids[0..n), from a fresh one-pass context. */
static int32_t recomputed_choice(fixture *f, const int32_t *ids, int n) {
    vkg_context *ctx = context(f, n, VKG_LOGITS_LAST, VKG_NO_ATTENTION);
    vkg_error err = {0};
    float logits[V];
    check(vkg_context_prefill(ctx, ids, n, &err), &err);
    check(vkg_context_get_logits(ctx, logits, V, &err), &err);
    vkg_context_free(ctx);
    return vkg_argmax(logits, V);
}

static void test_generate_greedy(void **state) {
    fixture *f = *state;
    vkg_context *ctx = context(f, CTX, VKG_LOGITS_LAST, VKG_NO_ATTENTION);
    vkg_generate_options o;
    vkg_generate_options_default(&o);
    o.max_tokens = 5;
    o.ignore_eos = 1;
    o.prompt = f->ids;
    o.n_prompt = 4;
    collected c = {0};
    vkg_generate_result res;
    vkg_error err = {0};
    check(vkg_context_generate(ctx, &o, collect, &c, &res, &err), &err);
    assert_int_equal(res.generated, 5);
    assert_int_equal(c.n, 5);
    assert_int_equal(res.reason, VKG_STOP_MAX_TOKENS);
    assert_int_equal(c.text_bytes, 0); /* no tokenizer: ids only */
    /* Every choice is the argmax of a full recomputation over what came before. */
    int32_t seq[16];
    memcpy(seq, f->ids, 4 * sizeof *seq);
    for (int i = 0; i < 5; i++) {
        assert_int_equal(c.ids[i], recomputed_choice(f, seq, 4 + i));
        seq[4 + i] = c.ids[i];
    }
    /* The last token chosen waits: in the context's tokens, not yet in the cache. */
    int n = 0;
    const int32_t *tokens = vkg_context_tokens(ctx, &n);
    assert_int_equal(n, 9);
    assert_int_equal(vkg_context_length(ctx), 8);
    assert_memory_equal(tokens, seq, 9 * sizeof *seq);
    vkg_context_timings t;
    check(vkg_context_get_timings(ctx, &t, &err), &err);
    assert_int_equal(t.prefill_passes, 1);
    assert_int_equal(t.prefill_tokens, 4);
    assert_int_equal(t.decode_steps, 4);
    assert_int_equal(t.samples, 5);
    assert_true(t.setup_s > 0 && t.prefill_s > 0 && t.decode_s > 0);

    /* A next turn feeds the pending token with its own in one pass; a callback that returns
     * nonzero stops after its token. */
    collected c2 = {.stop_after = 1};
    o.prompt = f->ids + 9;
    o.n_prompt = 2;
    check(vkg_context_generate(ctx, &o, collect, &c2, &res, &err), &err);
    assert_int_equal(res.reason, VKG_STOP_CALLBACK);
    assert_int_equal(res.generated, 1);
    check(vkg_context_get_timings(ctx, &t, &err), &err);
    assert_int_equal(t.prefill_passes, 2);
    assert_int_equal(t.prefill_tokens, 4 + 3);
    memcpy(seq + 9, f->ids + 9, 2 * sizeof *seq);
    assert_int_equal(c2.ids[0], recomputed_choice(f, seq, 11));
    vkg_context_free(ctx);
}

/* The same seed gives the same tokens; the stream goes on across calls with the same options. */
static void test_generate_sampled(void **state) {
    fixture *f = *state;
    vkg_generate_options o;
    vkg_generate_options_default(&o);
    o.max_tokens = 6;
    o.ignore_eos = 1;
    o.sampling.temperature = 1.5f;
    o.sampling.top_k = 50;
    o.sampling.seed = 42;
    o.prompt = f->ids;
    o.n_prompt = 3;
    collected a = {0}, b = {0};
    vkg_error err = {0};
    for (int run = 0; run < 2; run++) {
        vkg_context *ctx = context(f, CTX, VKG_LOGITS_LAST, VKG_NO_ATTENTION);
        check(vkg_context_generate(ctx, &o, collect, run ? &b : &a, NULL, &err), &err);
        vkg_context_free(ctx);
    }
    assert_int_equal(a.n, 6);
    assert_memory_equal(a.ids, b.ids, 6 * sizeof a.ids[0]);
    /* A reset context is a new conversation: the same options draw the same tokens again (a
     * server's slot serves one request after another this way). */
    vkg_context *ctx = context(f, CTX, VKG_LOGITS_LAST, VKG_NO_ATTENTION);
    for (int run = 0; run < 2; run++) {
        collected c = {0};
        check(vkg_context_reset(ctx, &err), &err);
        check(vkg_context_generate(ctx, &o, collect, &c, NULL, &err), &err);
        assert_int_equal(c.n, 6);
        assert_memory_equal(a.ids, c.ids, 6 * sizeof a.ids[0]);
    }
    vkg_context_free(ctx);
    /* Options out of range are refused before anything runs. */
    ctx = context(f, CTX, VKG_LOGITS_LAST, VKG_NO_ATTENTION);
    o.sampling.min_p = 2.0f;
    assert_int_equal(vkg_context_generate(ctx, &o, collect, &a, NULL, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "min-p"));
    assert_int_equal(vkg_context_length(ctx), 0);
    vkg_context_free(ctx);
}

static void test_errors(void **state) {
    fixture *f = *state;
    vkg_error err = {0};
    vkg_model *m = NULL;
    vkg_model_options mo;
    vkg_model_options_default(&mo);
    mo.dtype = (vkg_weight_dtype)7;
    assert_int_equal(vkg_model_open(test_data_path("gpt2-tiny"), f->dev, &mo, &m, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "dtype 7"));
    assert_null(m);
    assert_int_equal(vkg_model_open(test_data_path("no-such-model"), f->dev, NULL, &m, &err), VKG_ERR_IO);
    assert_non_null(strstr(err.message, "no-such-model"));

    /* Without a device: facts, but no context. */
    assert_int_equal(vkg_model_open(test_data_path("gpt2-tiny"), NULL, NULL, &m, &err), VKG_OK);
    vkg_context *ctx = NULL;
    assert_int_equal(vkg_context_new(m, NULL, &ctx, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "without a device"));
    vkg_model_free(m);

    vkg_context_options co;
    vkg_context_options_default(&co);
    co.logits = VKG_LOGITS_NONE;
    assert_int_equal(vkg_context_new(f->model, &co, &ctx, &err), VKG_ERR_INVALID_ARGUMENT);
    co.logits = VKG_LOGITS_LAST;
    co.n_ctx = CTX + 1;
    assert_int_equal(vkg_context_new(f->model, &co, &ctx, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "n_positions"));

    ctx = context(f, 4, VKG_LOGITS_LAST, VKG_NO_ATTENTION);
    const int32_t bad[2] = {3, V};
    assert_int_equal(vkg_context_prefill(ctx, bad, 2, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "512 at position 1 is outside the vocabulary"));
    assert_int_equal(vkg_context_length(ctx), 0);
    assert_int_equal(vkg_context_prefill(ctx, f->ids, 5, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "pass the end of the context (4 positions)"));
    check(vkg_context_prefill(ctx, f->ids, 4, &err), &err);
    assert_int_equal(vkg_context_decode(ctx, 1, &err), VKG_ERR_INVALID_ARGUMENT);
    /* A full context stops a generation after the token its last logits give. */
    vkg_generate_options o;
    vkg_generate_options_default(&o);
    o.ignore_eos = 1;
    collected c = {0};
    vkg_generate_result res;
    check(vkg_context_generate(ctx, &o, collect, &c, &res, &err), &err);
    assert_int_equal(res.reason, VKG_STOP_CONTEXT_FULL);
    assert_int_equal(res.generated, 1);
    /* Stop strings need a tokenizer. */
    const char *stops[1] = {"x"};
    o.stops = stops;
    o.n_stops = 1;
    assert_int_equal(vkg_context_generate(ctx, &o, collect, &c, &res, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "no tokenizer"));
    vkg_context_free(ctx);
}

/* A tokenizer given beside the model: bytes in, ids out and back; invalid UTF-8 names its byte
 * offset; stop strings cut the streamed text. */
static void test_tokenizer(void **state) {
    fixture *f = *state;
    char dir[1100];
    snprintf(dir, sizeof dir, "%s/../../data/gpt2-tokenizer", test_data_path(""));
    vkg_model_options mo;
    vkg_model_options_default(&mo);
    mo.tokenizer_dir = dir;
    vkg_model *m = NULL;
    vkg_error err = {0};
    check(vkg_model_open(test_data_path("gpt2-tiny"), f->dev, &mo, &m, &err), &err);
    const vkg_tokenizer *tok = vkg_model_tokenizer(m);
    assert_non_null(tok);
    assert_int_equal(vkg_tokenizer_vocab_size(tok), 50257);
    int32_t *ids = NULL;
    size_t n = 0;
    check(vkg_tokenizer_encode(tok, "Hello world", 11, &ids, &n, &err), &err);
    assert_int_equal(n, 2);
    assert_int_equal(ids[0], 15496);
    assert_int_equal(ids[1], 995);
    char *text = NULL;
    size_t len = 0;
    check(vkg_tokenizer_decode(tok, ids, n, &text, &len, &err), &err);
    assert_string_equal(text, "Hello world");
    free(text);
    free(ids);
    assert_int_equal(vkg_tokenizer_encode(tok, "ab\xff", 3, &ids, &n, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "byte 2"));
    vkg_model_free(m);
}

/* The model's graph, run through the graph API: the golden logits. */
static void test_model_graph(void **state) {
    fixture *f = *state;
    vkg_model_graph_options o;
    vkg_model_graph_options_default(&o, T);
    o.logits = VKG_LOGITS_ALL;
    vkg_graph *g = NULL;
    vkg_error err = {0};
    check(vkg_model_build_graph(f->model, &o, &g, &err), &err);
    vkg_tensor ids = vkg_find(g, "ids"), positions = vkg_find(g, "positions"), logits = vkg_find(g, "logits");
    assert_true(ids != VKG_NONE && positions != VKG_NONE && logits != VKG_NONE);
    assert_int_equal(vkg_find(g, "pos"), VKG_NONE); /* no cache */
    vkg_plan *p = NULL;
    vkg_session *s = NULL;
    vkg_compile_options co;
    vkg_compile_options_default(&co);
    vkg_device_compile_options(f->dev, &co);
    check(vkg_plan_compile(g, &co, &p, &err), &err);
    check(vkg_session_new(f->dev, p, &s, &err), &err);
    int32_t pos[T];
    for (int i = 0; i < T; i++) pos[i] = i;
    check(vkg_session_set_input(s, ids, f->ids, sizeof pos, &err), &err);
    check(vkg_session_set_input(s, positions, pos, sizeof pos, &err), &err);
    check(vkg_session_run(s, &err), &err);
    float *out = malloc(sizeof(float) * T * V);
    check(vkg_session_get_output(s, logits, out, sizeof(float) * T * V, &err), &err);
    expect_close(out, f->logits, (size_t)T * V, LOGIT_TOL, "the model graph's logits");
    free(out);
    vkg_session_free(s);
    vkg_plan_free(p);
    vkg_graph_free(g);
    /* With a cache: the index and the states are there by name. */
    o.tokens = 1;
    o.n_ctx = CTX;
    check(vkg_model_build_graph(f->model, &o, &g, &err), &err);
    assert_true(vkg_find(g, "pos") != VKG_NONE && vkg_find(g, "h.1.kv_cache") != VKG_NONE);
    vkg_graph_free(g);
    /* A batch context's plans: a prefill into slot 2, and a step of 3 rows with an index each. */
    o.tokens = 4;
    o.seqs = 1;
    o.first_slot = 2;
    check(vkg_model_build_graph(f->model, &o, &g, &err), &err);
    assert_true(vkg_find(g, "pos") != VKG_NONE && vkg_find(g, "h.1.kv_cache.slots") != VKG_NONE);
    assert_int_equal(vkg_find(g, "h.1.kv_cache"), VKG_NONE);
    int64_t shape[VKG_MAX_DIMS];
    assert_int_equal(vkg_tensor_shape(g, vkg_find(g, "h.1.kv_cache.slots"), shape), 4);
    assert_int_equal(shape[0], 2 * 3);   /* the keys and the values of slots 0, 1 and 2 */
    assert_int_equal(shape[1], H);
    vkg_graph_free(g);
    o.tokens = o.seqs = 3;
    o.first_slot = 0;
    check(vkg_model_build_graph(f->model, &o, &g, &err), &err);
    assert_int_equal(vkg_find(g, "pos"), VKG_NONE);
    assert_true(vkg_find(g, "pos.2") != VKG_NONE && vkg_find(g, "h.0.kv_cache.slots") != VKG_NONE);
    assert_int_equal(vkg_tensor_shape(g, vkg_find(g, "logits"), shape), 2);
    assert_int_equal(shape[0], 3);   /* every row's */
    vkg_graph_free(g);
    /* plans that share the caches give one slot count: a state of one name at two sizes is refused */
    o.tokens = 1;
    o.seqs = 1;
    o.n_slots = 2;
    vkg_graph *g2 = NULL, *g3 = NULL;
    check(vkg_model_build_graph(f->model, &o, &g2, &err), &err);
    o.n_slots = 3;
    check(vkg_model_build_graph(f->model, &o, &g3, &err), &err);
    vkg_plan *p2 = NULL, *p3 = NULL;
    vkg_session *s2 = test_session_for(f->dev, g2, &p2), *s3 = NULL;
    vkg_compile_options c3;
    vkg_compile_options_default(&c3);
    vkg_device_compile_options(f->dev, &c3);
    check(vkg_plan_compile(g3, &c3, &p3, &err), &err);
    assert_int_equal(vkg_session_new_shared(f->dev, p3, s2, &s3, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "sessions share states of one name and size"));
    assert_null(s3);
    vkg_session_free(s2);
    vkg_plan_free(p2);
    vkg_plan_free(p3);
    vkg_graph_free(g2);
    vkg_graph_free(g3);
    o.n_slots = 0;
    o.tokens = 2;   /* a step over 3 sequences takes one token of each */
    o.seqs = 3;
    assert_int_equal(vkg_model_build_graph(f->model, &o, &g, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "a step over 3 sequences takes one token of each"));
    assert_null(g);
}

/* vkg_random_gpt2_options_default sets what vkgraph_model.h says it sets. */
static void test_random_defaults(void **state) {
    (void)state;
    vkg_random_gpt2_options o;
    memset(&o, 0x5a, sizeof o);
    vkg_random_gpt2_options_default(&o);
    assert_int_equal(o.n_layer, 2);
    assert_int_equal(o.n_head, 4);
    assert_int_equal(o.n_embd, 32);
    assert_int_equal(o.n_positions, 16);
    assert_int_equal(o.vocab_size, 64);
    assert_int_equal(o.bos_token, 63);
    assert_int_equal(o.eos_token, 63);
    assert_int_equal(o.n_inner, 0);
    assert_string_equal(o.activation, "gelu_new");
    assert_int_equal(o.scale_attn_weights, 1);
    assert_int_equal(o.scale_attn_by_inverse_layer_idx, 0);
    assert_int_equal(o.seed, 1);
    assert_int_equal(o.dtype, VKG_WEIGHTS_F32);
    assert_int_equal(o.prefix_transformer, 0);
    assert_int_equal(o.untied_lm_head, 0);
    assert_int_equal(o.attn_bias_buffers, 0);
}

/* A random checkpoint written through the API opens with the facts it was written with; f16 in
 * the file is converted at load. */
static void test_random_checkpoint(void **state) {
    fixture *f = *state;
    char *dir = test_tmpdir("model-api");
    assert_non_null(dir);
    vkg_random_gpt2_options o;
    vkg_random_gpt2_options_default(&o);
    o.n_layer = 3;
    o.n_head = 2;
    o.n_embd = 16;
    o.n_positions = 8;
    o.vocab_size = 40;
    o.bos_token = o.eos_token = 39;
    o.untied_lm_head = 1;
    o.dtype = VKG_WEIGHTS_F16;
    assert_true(vkg_gpt2_activation_supported("gelu_new") && !vkg_gpt2_activation_supported("swiglu"));
    vkg_error err = {0};
    check(vkg_random_gpt2_write(dir, &o, &err), &err);
    vkg_model *m = NULL;
    check(vkg_model_open(dir, f->dev, NULL, &m, &err), &err);
    vkg_model_info info;
    check(vkg_model_get_info(m, &info, &err), &err);
    assert_int_equal(info.dtype, VKG_WEIGHTS_F16); /* as stored, not widened */
    assert_int_equal(info.n_layer, 3);
    assert_int_equal(info.n_head, 2);
    assert_int_equal(info.n_ctx, 8);
    assert_int_equal(info.n_vocab, 40);
    assert_int_equal(info.tied_head, 0);
    assert_int_equal(info.random_weights, 0); /* the marker is the tool's to write */
    assert_int_equal(info.n_params, vkg_random_gpt2_parameter_count(&o));
    vkg_context *ctx = NULL;
    check(vkg_context_new(m, NULL, &ctx, &err), &err);
    assert_int_equal(vkg_context_size(ctx), 8);
    const int32_t ids[3] = {1, 2, 3};
    float logits[40];
    check(vkg_context_prefill(ctx, ids, 3, &err), &err);
    check(vkg_context_get_logits(ctx, logits, 40, &err), &err);
    for (int i = 0; i < 40; i++) assert_true(isfinite(logits[i]));
    vkg_context_free(ctx);
    vkg_model_free(m);
    char path[1200];
    snprintf(path, sizeof path, "%s/config.json", dir);
    remove(path);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    remove(path);
    remove(dir);
    free(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_facts),           cmocka_unit_test(test_prefill_golden),
        cmocka_unit_test(test_decode_golden),   cmocka_unit_test(test_truncate_reset),
        cmocka_unit_test(test_feed_sizes),
        cmocka_unit_test(test_generate_greedy), cmocka_unit_test(test_generate_sampled),
        cmocka_unit_test(test_errors),          cmocka_unit_test(test_tokenizer),
        cmocka_unit_test(test_converted_to_f16),
        cmocka_unit_test(test_model_graph),     cmocka_unit_test(test_random_checkpoint),
        cmocka_unit_test(test_random_defaults),
    };
    int failed = 0;
    fprintf(stderr, "--- on the CPU\n");
    failed += cmocka_run_group_tests_name("model API, cpu", tests, setup_cpu, teardown);
    fprintf(stderr, "--- on Vulkan\n");
    failed += cmocka_run_group_tests_name("model API, vulkan", tests, setup_vulkan, teardown);
    return failed;
}
