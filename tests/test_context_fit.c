/* Contexts whose length is left to the model (n_ctx 0) on a model trained for more positions than
 * one binding holds of a layer's cache: a random Qwen3 of 1048576 positions, whose KV cache (2 x 2
 * heads x 32 floats a position) is 1 GiB a layer against the 128 MiB one binding spans. Such a
 * cache is written and read a few heads at a time (a head's keys, 128 MiB here, are never cut), so
 * on the CPU the context holds the model's whole length; on lavapipe, whose attention loop walks a
 * prompt row's keys reliably up to 32768 iterations, the context and the batch context take the
 * largest half, quarter, ... that fits.  Either way they compute what a context of a few positions
 * computes; so too from a length other than the model's.  Asked for the whole length, lavapipe
 * refuses it, saying why; a decode plan compiled with vkg_model_compile_fitted takes at least the
 * size a context takes.  With so many layers that their caches no longer fit the memory a session
 * is checked against, the context halves again, and asked for twice what it took is refused with
 * the sizes: on the CPU, whose memory is the host's (on lavapipe a cache stops at 16384 positions
 * before a tiny model's caches fill its 2 GiB heap). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "support/test_util.h"
#include "vkgraph_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { POSITIONS = 1 << 20, SHORT = 64, N_PROMPT = 5 };

static const int32_t prompt[N_PROMPT] = {3, 14, 15, 92, 6};

typedef struct fixture {
    vkg_device *dev;
    vkg_model *model;
    char *dir;
    int cpu;
    int V;
} fixture;

static void check(vkg_status st, const vkg_error *err) {
    if (st != VKG_OK) fail_msg("%s", err->message);
}

static int setup(void **state, const char *device) {
    fixture *f = calloc(1, sizeof *f);
    if (!f) return -1;
    f->cpu = strcmp(device, "cpu") == 0;
    vkg_device_options o = {.cpu_threads = 2, .quiet = 1, .validation = !f->cpu};
    vkg_error err = {0};
    if (vkg_device_open(device, &o, &f->dev, &err) != VKG_OK) {
        fprintf(stderr, "cannot open %s: %s\n", device, err.message);
        free(f);
        return -1;
    }
    f->dir = test_tmpdir("context_fit");
    vkg_random_model_options ro;
    vkg_random_model_options_default(&ro);
    ro.shape = "qwen3-tiny"; /* 2 layers, 4 heads over 2 of 32 */
    ro.n_positions = POSITIONS;
    vkg_model_info info;
    if (vkg_random_model_write(f->dir, &ro, &err) != VKG_OK ||
        vkg_model_open(f->dir, f->dev, NULL, &f->model, &err) != VKG_OK ||
        vkg_model_get_info(f->model, &info, &err) != VKG_OK) {
        fprintf(stderr, "%s\n", err.message);
        return -1;
    }
    if (info.n_ctx != POSITIONS || info.n_kv_head != 2 || info.head_dim != 32) {
        fprintf(stderr, "the model has %d positions, %d KV heads of %d\n", info.n_ctx, info.n_kv_head, info.head_dim);
        return -1;
    }
    f->V = info.n_vocab;
    *state = f;
    return 0;
}

static int setup_cpu(void **state) { return setup(state, "cpu"); }
static int setup_vulkan(void **state) { return setup(state, "vulkan"); }

static int teardown(void **state) {
    fixture *f = *state;
    vkg_model_free(f->model);
    test_remove_tree(f->dir);
    free(f->dir);
    if (f->cpu || vkg_device_validation_errors(f->dev) == 0) {
        vkg_device_free(f->dev);
        free(f);
        return 0;
    }
    fprintf(stderr, "Vulkan validation reported %llu messages\n", (unsigned long long)vkg_device_validation_errors(f->dev));
    vkg_device_free(f->dev);
    free(f);
    return -1;
}

/* The model's positions, or a half, quarter, ... of them: a power of two here. */
static void assert_fraction(int n_ctx) {
    assert_true(n_ctx >= 256 && n_ctx <= POSITIONS);
    assert_int_equal(POSITIONS % n_ctx, 0);
    assert_int_equal(n_ctx & (n_ctx - 1), 0);
}
static void assert_halved(int n_ctx) {
    assert_fraction(n_ctx);
    assert_true(n_ctx < POSITIONS);
}

/* What a context left to the model takes: on the CPU all of it (2 GiB of caches, 8 GiB for a
 * batch of 4, zeroed as they are touched, within this machine class's memory), on lavapipe less. */
static void assert_fitted(const fixture *f, int n_ctx) {
    if (f->cpu) assert_int_equal(n_ctx, POSITIONS);
    else assert_halved(n_ctx);
}

/* The logits after the prompt, then after one more token, in a context of model m of n_ctx
 * positions (0: left to the model); *size gets the context's length. */
static float *run_model(fixture *f, vkg_model *m, int n_ctx, int *size) {
    vkg_context_options o;
    vkg_context_options_default(&o);
    o.n_ctx = n_ctx;
    vkg_context *ctx = NULL;
    vkg_error err = {0};
    check(vkg_context_new(m, &o, &ctx, &err), &err);
    *size = vkg_context_size(ctx);
    float *logits = malloc(2 * (size_t)f->V * sizeof *logits);
    assert_non_null(logits);
    check(vkg_context_prefill(ctx, prompt, N_PROMPT, &err), &err);
    check(vkg_context_get_logits(ctx, logits, (size_t)f->V, &err), &err);
    check(vkg_context_decode(ctx, 7, &err), &err);
    check(vkg_context_get_logits(ctx, logits + f->V, (size_t)f->V, &err), &err);
    vkg_context_free(ctx);
    return logits;
}
static float *run_context(fixture *f, int n_ctx, int *size) { return run_model(f, f->model, n_ctx, size); }

/* got computes what want does: bit for bit on the CPU. */
static void assert_same_logits(const fixture *f, const float *got, const float *want) {
    if (f->cpu) assert_memory_equal(got, want, 2 * (size_t)f->V * sizeof *got);
    else assert_true(test_nmse(got, want, 2 * (size_t)f->V) < 1e-10);
}

static void test_context_takes_what_fits(void **state) {
    fixture *f = *state;
    int fitted = 0, short_len = 0;
    float *got = run_context(f, 0, &fitted), *want = run_context(f, SHORT, &short_len);
    assert_int_equal(short_len, SHORT);
    assert_fitted(f, fitted);
    /* The cache's length changes where its rows lie, not what is computed over them. */
    assert_same_logits(f, got, want);
    free(got);
    free(want);
}

/* A length to fit from other than the model's (a chat's generation_config max_length): the CPU
 * takes all of it, lavapipe its half (a prompt row's walk over 40000 keys passes the 32768 loop
 * iterations it runs reliably, over 20000 not).  Outside 0 .. the model's context it is
 * refused. */
static void test_context_fits_from(void **state) {
    fixture *f = *state;
    vkg_context_options o;
    vkg_context_options_default(&o);
    o.n_ctx_fit = 40000;
    vkg_context *ctx = NULL;
    vkg_error err = {0};
    check(vkg_context_new(f->model, &o, &ctx, &err), &err);
    assert_int_equal(vkg_context_size(ctx), f->cpu ? 40000 : 20000);
    vkg_context_free(ctx);
    const int bad[] = {-1, POSITIONS + 1};
    for (int i = 0; i < 2; i++) {
        o.n_ctx_fit = bad[i];
        ctx = NULL;
        assert_int_equal(vkg_context_new(f->model, &o, &ctx, &err), VKG_ERR_INVALID_ARGUMENT);
        assert_null(ctx);
        assert_non_null(strstr(err.message, "n_ctx_fit"));
    }
}

/* lavapipe: a row of keys longer than its attention loop runs reliably. */
static void test_context_asked_for_all_refused(void **state) {
    fixture *f = *state;
    vkg_context_options o;
    vkg_context_options_default(&o);
    o.n_ctx = POSITIONS;
    vkg_context *ctx = NULL;
    vkg_error err = {0};
    assert_int_equal(vkg_context_new(f->model, &o, &ctx, &err), VKG_ERR_UNSUPPORTED);
    assert_null(ctx);
    assert_non_null(strstr(err.message, "loop iterations"));
}

static void test_batch_takes_what_fits(void **state) {
    fixture *f = *state;
    vkg_batch_options o;
    vkg_batch_options_default(&o);
    o.n_seq = 4;
    vkg_batch_context *b = NULL;
    vkg_error err = {0};
    check(vkg_batch_context_new(f->model, &o, &b, &err), &err);
    const int fitted = vkg_batch_n_ctx(b);
    assert_fitted(f, fitted);
    /* Sequence 2 runs the prompt and one more token as the short context does. */
    int short_len = 0;
    float *want = run_context(f, SHORT, &short_len), *got = malloc((size_t)f->V * sizeof *got);
    assert_non_null(got);
    check(vkg_batch_add(b, 2, prompt, N_PROMPT, &err), &err);
    check(vkg_batch_step(b, &err), &err);
    check(vkg_batch_get_logits(b, 2, got, (size_t)f->V, &err), &err);
    if (f->cpu) assert_memory_equal(got, want, (size_t)f->V * sizeof *got);
    else assert_true(test_nmse(got, want, (size_t)f->V) < 1e-10);
    const int32_t next = 7;
    check(vkg_batch_add(b, 2, &next, 1, &err), &err);
    check(vkg_batch_step(b, &err), &err);
    check(vkg_batch_get_logits(b, 2, got, (size_t)f->V, &err), &err);
    if (f->cpu) assert_memory_equal(got, want + f->V, (size_t)f->V * sizeof *got);
    else assert_true(test_nmse(got, want + f->V, (size_t)f->V) < 1e-10);
    free(got);
    free(want);
    vkg_batch_context_free(b);
    if (f->cpu) return;
    o.n_ctx = POSITIONS;
    assert_int_equal(vkg_batch_context_new(f->model, &o, &b, &err), VKG_ERR_UNSUPPORTED);
    assert_null(b);
}

/* A decode plan compiled for the device takes the largest half, quarter, ... of the model's
 * positions that fits, as a context left to the model does, and says so in o.n_ctx.  With no size
 * to start from, or a limit no size mends (bindings of 4 KiB), it fails with the reason and leaves
 * nothing behind. */
static void test_compile_fitted(void **state) {
    fixture *f = *state;
    vkg_model_graph_options o;
    vkg_model_graph_options_default(&o, 1);
    o.n_ctx = POSITIONS;
    vkg_compile_options opts;
    vkg_compile_options_default(&opts);
    vkg_device_compile_options(f->dev, &opts);
    vkg_graph *g = NULL;
    vkg_plan *p = NULL;
    vkg_error err = {0};
    check(vkg_model_compile_fitted(f->model, &o, &opts, &g, &p, &err), &err);
    assert_non_null(g);
    assert_non_null(p);
    assert_fraction(o.n_ctx);
    if (f->cpu) assert_int_equal(o.n_ctx, POSITIONS);
    /* A context's prefill plans take their share of the limits too (lavapipe's loop lengths), so
     * the decode plan alone fits at least the context's size. */
    int ctx_size = 0;
    free(run_context(f, 0, &ctx_size));
    assert_true(o.n_ctx >= ctx_size);
    vkg_plan_free(p);
    vkg_graph_free(g);
    /* Bindings of 64 MiB hold a head's keys of half the positions: the CPU's plan takes those. */
    o.n_ctx = POSITIONS;
    const uint64_t binding = opts.max_binding_bytes;
    opts.max_binding_bytes = (64u << 20) + opts.alignment;
    check(vkg_model_compile_fitted(f->model, &o, &opts, &g, &p, &err), &err);
    assert_halved(o.n_ctx);
    if (f->cpu) assert_int_equal(o.n_ctx, POSITIONS / 2);
    vkg_plan_free(p);
    vkg_graph_free(g);
    opts.max_binding_bytes = binding;

    o.n_ctx = 0;
    assert_int_equal(vkg_model_compile_fitted(f->model, &o, &opts, &g, &p, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "n_ctx is 0"));
    o.n_ctx = POSITIONS;
    opts.max_binding_bytes = 4096;
    assert_int_equal(vkg_model_compile_fitted(f->model, &o, &opts, &g, &p, &err), VKG_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.message, "the least tried"));
    assert_null(g);
    assert_null(p);
    assert_int_equal(o.n_ctx, 256);
}

/* Layers of llama-tiny (2 x 2 heads x 16 floats a position) whose caches of half the model's
 * positions, 128 MiB a layer, fill the host's memory; 0 where it has so much that the model would
 * take minutes to write. */
static int memory_layers(void) {
    const uint64_t host = vkg_host_memory_bytes();
    return host > (64ull << 30) ? 0 : (int)(host / (128ull << 20)) + 1;
}

static void test_memory_takes_what_fits(void **state) {
    fixture *f = *state;
    const int layers = memory_layers();
    if (!layers) {
        fprintf(stderr, "skipped: %.0f GiB of host memory would take too many layers\n",
                (double)vkg_host_memory_bytes() / 1073741824.0);
        skip();
    }
    char *dir = test_tmpdir("context_fit_memory");
    vkg_random_model_options ro;
    vkg_random_model_options_default(&ro);
    ro.n_positions = POSITIONS;
    ro.n_layer = layers;
    vkg_model *m = NULL;
    vkg_error err = {0};
    check(vkg_random_model_write(dir, &ro, &err), &err);
    check(vkg_model_open(dir, f->dev, NULL, &m, &err), &err);
    int fitted = 0, short_len = 0;
    float *got = run_model(f, m, 0, &fitted), *want = run_model(f, m, SHORT, &short_len);
    assert_halved(fitted);
    assert_true(fitted < POSITIONS / 2);
    assert_same_logits(f, got, want);
    vkg_context_options o;
    vkg_context_options_default(&o);
    vkg_context *ctx = NULL;
    /* Twice the length is refused, for memory. */
    o.n_ctx = 2 * fitted;
    assert_int_equal(vkg_context_new(m, &o, &ctx, &err), VKG_ERR_OUT_OF_MEMORY);
    assert_null(ctx);
    assert_non_null(strstr(err.message, "this machine has"));
    free(got);
    free(want);
    vkg_model_free(m);
    test_remove_tree(dir);
    free(dir);
}

int main(void) {
    const struct CMUnitTest cpu[] = {
        cmocka_unit_test(test_context_takes_what_fits),
        cmocka_unit_test(test_context_fits_from),
        cmocka_unit_test(test_batch_takes_what_fits),
        cmocka_unit_test(test_compile_fitted),
        cmocka_unit_test(test_memory_takes_what_fits),
    };
    const struct CMUnitTest vulkan[] = {
        cmocka_unit_test(test_context_takes_what_fits),
        cmocka_unit_test(test_context_fits_from),
        cmocka_unit_test(test_context_asked_for_all_refused),
        cmocka_unit_test(test_batch_takes_what_fits),
        cmocka_unit_test(test_compile_fitted),
    };
    int failed = cmocka_run_group_tests_name("cpu", cpu, setup_cpu, teardown);
    failed += cmocka_run_group_tests_name("vulkan", vulkan, setup_vulkan, teardown);
    return failed;
}
