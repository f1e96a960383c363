/* Saving and loading a context's state, on the CPU and on Vulkan: the next logits after a load
 * are the saved context's bit for bit, generation goes on with the same tokens, and states that
 * do not fit are refused without changing the context.  Also the logits of chosen rows and the
 * load progress callback with its cancel. */
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

enum { V = 512, CTX = 32 };

typedef struct fixture {
    vkg_device *dev;
    vkg_model *model;
    int32_t ids[64];
    int n_ids;
} fixture;

static int setup(void **state, const char *device) {
    fixture *f = calloc(1, sizeof *f);
    if (!f) return -1;
    if (test_open_model(device, "gpt2-tiny", &f->dev, &f->model) != 0) {
        free(f);
        return -1;
    }
    f->n_ids = test_read_ids("gpt2-tiny", f->ids, 64);
    if (f->n_ids < 12) return -1;
    *state = f;
    return 0;
}
static int setup_cpu(void **state) { return setup(state, "cpu"); }
static int setup_vulkan(void **state) { return setup(state, "vulkan"); }

static int teardown(void **state) {
    fixture *f = *state;
    const int rc = test_close_model(f->dev, f->model);
    free(f);
    return rc;
}

static void check(vkg_status st, const vkg_error *err) {
    if (st != VKG_OK) fail_msg("%s", err->message);
}

static vkg_context *context(fixture *f, int n_ctx, vkg_logits_mode mode) {
    vkg_context_options o;
    vkg_context_options_default(&o);
    o.n_ctx = n_ctx;
    o.logits = mode;
    vkg_context *ctx = NULL;
    vkg_error err = {0};
    check(vkg_context_new(f->model, &o, &ctx, &err), &err);
    return ctx;
}

typedef struct tokens {
    int32_t id[16];
    int n;
} tokens;

static int collect(void *user, int32_t id, const char *text, size_t len) {
    (void)text;
    (void)len;
    tokens *t = user;
    if (id != VKG_NO_TOKEN && t->n < 16) t->id[t->n++] = id;
    return 0;
}

static void sampled(vkg_context *ctx, tokens *out) {
    vkg_generate_options g;
    vkg_generate_options_default(&g);
    g.max_tokens = 6;
    g.ignore_eos = 1;
    g.sampling.temperature = 1.3f;
    g.sampling.top_k = 50;
    g.sampling.top_p = 0.95f;
    g.sampling.repeat_penalty = 1.2f;
    g.sampling.seed = 9;
    memset(out, 0, sizeof *out);
    vkg_error err = {0};
    check(vkg_context_generate(ctx, &g, collect, out, NULL, &err), &err);
}

static void test_save_load(void **state) {
    fixture *f = *state;
    vkg_error err = {0};
    float *a = malloc(V * sizeof *a), *b = malloc(V * sizeof *b), *c = malloc(V * sizeof *c);

    /* The saved context: a prompt, a token, and a sampled stretch (the sampler's stream moves). */
    vkg_context *saved = context(f, CTX - 8, VKG_LOGITS_LAST);
    check(vkg_context_prefill(saved, f->ids, 8, &err), &err);
    check(vkg_context_decode(saved, f->ids[8], &err), &err);
    tokens first;
    sampled(saved, &first);
    check(vkg_context_decode(saved, f->ids[9], &err), &err); /* the pending token and ids[9] go in */
    void *data = NULL;
    size_t bytes = 0;
    check(vkg_context_state_save(saved, &data, &bytes, &err), &err);
    char *dir = test_tmpdir("state");
    char path[512];
    snprintf(path, sizeof path, "%s/ctx.state", dir);
    check(vkg_context_state_save_file(saved, path, &err), &err);

    /* Loaded from memory into a context of another size, and from the file. */
    vkg_context *mem = context(f, CTX - 8, VKG_LOGITS_LAST), *file = context(f, CTX, VKG_LOGITS_LAST);
    check(vkg_context_state_load(mem, data, bytes, &err), &err);
    check(vkg_context_state_load_file(file, path, &err), &err);
    assert_int_equal(vkg_context_length(mem), vkg_context_length(saved));
    int na, nb;
    const int32_t *ta = vkg_context_tokens(saved, &na), *tb = vkg_context_tokens(mem, &nb);
    assert_int_equal(na, nb);
    assert_memory_equal(ta, tb, (size_t)na * sizeof *ta);

    /* The prediction after the last token comes back, and the next one is the same bit for bit. */
    check(vkg_context_get_logits(saved, a, V, &err), &err);
    check(vkg_context_get_logits(mem, b, V, &err), &err);
    assert_memory_equal(a, b, V * sizeof *a);
    check(vkg_context_decode(saved, f->ids[10], &err), &err);
    check(vkg_context_decode(mem, f->ids[10], &err), &err);
    check(vkg_context_decode(file, f->ids[10], &err), &err);
    check(vkg_context_get_logits(saved, a, V, &err), &err);
    check(vkg_context_get_logits(mem, b, V, &err), &err);
    check(vkg_context_get_logits(file, c, V, &err), &err);
    assert_memory_equal(a, b, V * sizeof *a);
    assert_memory_equal(a, c, V * sizeof *a);

    /* The cache matters: the same token alone predicts something else. */
    vkg_context *alone = context(f, CTX, VKG_LOGITS_LAST);
    check(vkg_context_decode(alone, f->ids[10], &err), &err);
    check(vkg_context_get_logits(alone, c, V, &err), &err);
    assert_true(memcmp(a, c, V * sizeof *a) != 0);

    /* Generation goes on with the same tokens: the sampler's stream was saved too. */
    tokens ga, gb;
    sampled(saved, &ga);
    sampled(mem, &gb);
    assert_int_equal(ga.n, 6);
    assert_memory_equal(ga.id, gb.id, sizeof ga.id);

    vkg_context_free(alone);
    vkg_context_free(mem);
    vkg_context_free(file);
    vkg_context_free(saved);
    free(data);
    test_remove_tree(dir);
    free(dir);
    free(a);
    free(b);
    free(c);
}

static void test_refusals(void **state) {
    fixture *f = *state;
    vkg_error err = {0};
    vkg_context *ctx = context(f, CTX, VKG_LOGITS_LAST);
    check(vkg_context_prefill(ctx, f->ids, 10, &err), &err);
    void *data = NULL;
    size_t bytes = 0;
    check(vkg_context_state_save(ctx, &data, &bytes, &err), &err);

    vkg_context *small = context(f, 4, VKG_LOGITS_LAST);
    check(vkg_context_prefill(small, f->ids, 2, &err), &err);
    assert_int_equal(vkg_context_state_load(small, data, bytes, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "do not fit"));
    assert_int_equal(vkg_context_length(small), 2); /* unchanged */
    assert_int_equal(vkg_context_state_load(ctx, data, bytes - 4, &err), VKG_ERR_FORMAT);
    assert_non_null(strstr(err.message, "cut short"));
    assert_int_equal(vkg_context_state_load(ctx, data, 10, &err), VKG_ERR_FORMAT);
    ((unsigned char *)data)[0] ^= 0xff;
    assert_int_equal(vkg_context_state_load(ctx, data, bytes, &err), VKG_ERR_FORMAT);
    assert_non_null(strstr(err.message, "magic"));
    assert_int_equal(vkg_context_length(ctx), 10);
    assert_int_equal(vkg_context_state_load_file(ctx, "/nonexistent/ctx.state", &err), VKG_ERR_IO);
    free(data);
    vkg_context_free(small);
    vkg_context_free(ctx);
}

static void test_logits_rows(void **state) {
    fixture *f = *state;
    vkg_error err = {0};
    vkg_context *all = context(f, CTX, VKG_LOGITS_ALL);
    check(vkg_context_prefill(all, f->ids, 5, &err), &err);
    float *every = malloc(5 * V * sizeof *every), *rows = malloc(3 * V * sizeof *rows);
    check(vkg_context_get_logits(all, every, 5 * V, &err), &err);
    check(vkg_context_get_logits_rows(all, (const int[]){3, -1, 0}, 3, rows, 3 * V, &err), &err);
    assert_memory_equal(rows, every + 3 * V, V * sizeof *rows);
    assert_memory_equal(rows + V, every + 4 * V, V * sizeof *rows);
    assert_memory_equal(rows + 2 * V, every, V * sizeof *rows);
    assert_int_equal(vkg_context_get_logits_rows(all, (const int[]){5}, 1, rows, V, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_int_equal(vkg_context_get_logits_rows(all, (const int[]){-6}, 1, rows, V, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_int_equal(vkg_context_get_logits_rows(all, (const int[]){0}, 1, rows, 2 * V, &err), VKG_ERR_INVALID_ARGUMENT);

    vkg_context *last = context(f, CTX, VKG_LOGITS_LAST);
    check(vkg_context_prefill(last, f->ids, 5, &err), &err);
    check(vkg_context_get_logits_rows(last, (const int[]){4}, 1, rows, V, &err), &err);
    check(vkg_context_get_logits(last, rows + V, V, &err), &err);
    assert_memory_equal(rows, rows + V, V * sizeof *rows);
    assert_int_equal(vkg_context_get_logits_rows(last, (const int[]){1}, 1, rows, V, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "VKG_LOGITS_ALL"));
    free(every);
    free(rows);
    vkg_context_free(all);
    vkg_context_free(last);
}

typedef struct progress_log {
    float seen[256];
    int n, cancel_at;
} progress_log;

static int on_progress(void *user, float fraction) {
    progress_log *p = user;
    if (p->n < 256) p->seen[p->n] = fraction;
    p->n++;
    return p->n != p->cancel_at;
}

static void test_progress(void **state) {
    fixture *f = *state;
    vkg_model_options o;
    vkg_model_options_default(&o);
    progress_log log = {.cancel_at = -1};
    o.progress = on_progress;
    o.progress_user = &log;
    vkg_model *m = NULL;
    vkg_error err = {0};
    check(vkg_model_open(test_data_path("gpt2-tiny"), f->dev, &o, &m, &err), &err);
    assert_true(log.n >= 3);
    assert_true(log.seen[0] == 0.0f);
    assert_true(log.seen[log.n - 1] == 1.0f);
    for (int i = 1; i < log.n; i++) assert_true(log.seen[i] >= log.seen[i - 1]);
    vkg_model_free(m);

    /* Cancelled on the third call: no model, a clear status, nothing leaked (the sanitizer build). */
    progress_log stop = {.cancel_at = 3};
    o.progress_user = &stop;
    m = (vkg_model *)&stop; /* overwritten with NULL */
    assert_int_equal(vkg_model_open(test_data_path("gpt2-tiny"), f->dev, &o, &m, &err), VKG_ERR_CANCELLED);
    assert_null(m);
    assert_non_null(strstr(err.message, "cancelled"));
    assert_int_equal(stop.n, 3);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_save_load, setup_cpu, teardown),
        cmocka_unit_test_setup_teardown(test_refusals, setup_cpu, teardown),
        cmocka_unit_test_setup_teardown(test_logits_rows, setup_cpu, teardown),
        cmocka_unit_test_setup_teardown(test_progress, setup_cpu, teardown),
        cmocka_unit_test_setup_teardown(test_save_load, setup_vulkan, teardown),
        cmocka_unit_test_setup_teardown(test_logits_rows, setup_vulkan, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
