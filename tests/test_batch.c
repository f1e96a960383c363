/* Batches of sequences (vkg_batch_*), on the CPU and on Vulkan, for GPT-2 and the Llama family
 * (grouped-query attention; Qwen3's q/k norms; Mistral with a sliding window shorter than the
 * prompts): sequences
 * at different positions joining and leaving mid-way, batches of 1, 2, 3 and 8 (and 12 of Llama
 * on the CPU), each
 * sequence's logits against the same sequence run alone through a plain context (bit for bit
 * on the CPU; on Vulkan within attention's conformance threshold, same argmax away from ties);
 * prompts prefilled in chunks while others decode; a copied cache prefix against a prefill of
 * the whole prompt, and so a truncated sequence fed again; watched prompts' every row against a
 * plain context's; the batched steps
 * on the CPU against Vulkan; logits that overflow failing
 * their sequence alone; and the errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "support/batch_check.h"
#include "support/poked_model.h"
#include "support/test_util.h"
#include "vkgraph_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { CTX = 32 };

typedef struct fixture {
    batch_check c;            /* the model, its vocabulary, CPU or not */
    vkg_device *dev;
    char *dir;                /* a random model written for the test; NULL for gpt2-tiny */
} fixture;

static void check(vkg_status st, const vkg_error *err) {
    if (st != VKG_OK) fail_msg("%s", err->message);
}

/* Writes a random Llama-family model of `shape` into a fresh folder; window > 0 sets Mistral's
 * sliding_window to it (the tiny shape has none). */
static char *random_model(const char *shape, int window) {
    char *dir = test_tmpdir("batch");
    vkg_random_model_options o;
    vkg_random_model_options_default(&o);
    o.shape = shape;
    o.n_positions = 1024; /* room for test_long_cache */
    vkg_error err = {0};
    check(vkg_random_model_write(dir, &o, &err), &err);
    if (window) {
        char path[512];
        snprintf(path, sizeof path, "%s/config.json", dir);
        size_t len = 0;
        char *text = test_read_file(path, &len);
        const char *key = "\"sliding_window\": null";
        char *at = strstr(text, key);
        if (!at) fail_msg("no %s in %s", key, path);
        FILE *f = fopen(path, "wb");
        assert_non_null(f);
        fprintf(f, "%.*s\"sliding_window\": %d%s", (int)(at - text), text, window, at + strlen(key));
        fclose(f);
        free(text);
    }
    return dir;
}

static int setup_threads(void **state, const char *device, const char *shape, int window, int threads) {
    fixture *f = calloc(1, sizeof *f);
    if (!f) return -1;
    f->c.cpu = strcmp(device, "cpu") == 0;
    vkg_device_options o = {.cpu_threads = threads, .quiet = 1, .validation = !f->c.cpu};
    vkg_error err = {0};
    if (vkg_device_open(device, &o, &f->dev, &err) != VKG_OK) {
        fprintf(stderr, "cannot open %s: %s\n", device, err.message);
        free(f);
        return -1;
    }
    if (shape) f->dir = random_model(shape, window);
    if (vkg_model_open(f->dir ? f->dir : test_data_path("gpt2-tiny"), f->dev, NULL, &f->c.model, &err) != VKG_OK) {
        fprintf(stderr, "%s\n", err.message);
        return -1;
    }
    vkg_model_info info;
    if (vkg_model_get_info(f->c.model, &info, &err) != VKG_OK) return -1;
    f->c.V = info.n_vocab;
    f->c.n_ctx = CTX;
    *state = f;
    return 0;
}
static int setup(void **state, const char *device, const char *shape, int window) {
    return setup_threads(state, device, shape, window, 2);
}
static int setup_gpt2_cpu(void **state) { return setup(state, "cpu", NULL, 0); }
static int setup_gpt2_vulkan(void **state) { return setup(state, "vulkan", NULL, 0); }
static int setup_llama_cpu(void **state) { return setup(state, "cpu", "llama-tiny", 0); }
static int setup_llama_vulkan(void **state) { return setup(state, "vulkan", "llama-tiny", 0); }
static int setup_qwen3_cpu(void **state) { return setup(state, "cpu", "qwen3-tiny", 0); }
static int setup_qwen3_vulkan(void **state) { return setup(state, "vulkan", "qwen3-tiny", 0); }
static int setup_mistral_cpu(void **state) { return setup(state, "cpu", "mistral-tiny", 5); }
static int setup_mistral_vulkan(void **state) { return setup(state, "vulkan", "mistral-tiny", 5); }
static int setup_llama_cpu3(void **state) { return setup_threads(state, "cpu", "llama-tiny", 0, 3); }
static int setup_mistral_cpu3(void **state) { return setup_threads(state, "cpu", "mistral-tiny", 5, 3); }

static int teardown(void **state) {
    fixture *f = *state;
    vkg_model_free(f->c.model);
    const uint64_t messages = vkg_device_validation_errors(f->dev);
    vkg_device_free(f->dev);
    if (f->dir) {
        test_remove_tree(f->dir);
        free(f->dir);
    }
    free(f);
    if (messages) fprintf(stderr, "%llu validation messages\n", (unsigned long long)messages);
    return messages ? -1 : 0;
}

/* n sequences all joining at step 0 with prompts of different lengths (so at different
 * positions), decoding the same number of steps: batches of exactly n. */
/* n sequences joining at once: their prompts (2 to 7 tokens; 1-token ones decode) run in one
 * prefill pass, each over its own cache, then every step decodes them all. */
static void together(fixture *f, int n, int n_seq) {
    batch_seq plans[BATCH_MAX_SEQ];
    memset(plans, 0, sizeof plans);
    for (int i = 0; i < n; i++) {
        batch_make_prompt(&plans[i], i, 1 + (i * 3) % 7, f->c.V);
        plans[i].steps = 6;
    }
    batch_run_schedule(&f->c, plans, n, n_seq);
}

static void test_batch_of_1(void **state) { together(*state, 1, 1); }
static void test_batch_of_2(void **state) { together(*state, 2, 2); }
static void test_batch_of_3(void **state) { together(*state, 3, 4); }
static void test_batch_of_8(void **state) { together(*state, 8, 8); }
/* More rows than the CPU matmul's pass of 8 over each block of a [N, K] weight (matmul_body.h,
 * few_rows_block): 12 rows in two passes, each row's bits those of one row alone; the prefill pass
 * holds 47 prompt tokens, more than each 32-position cache. */
static void test_batch_of_12(void **state) { together(*state, 12, 12); }

/* Sequences joining and leaving while others run, reusing the slots of those that left, in a
 * context of 4 slots: the step's batch grows and shrinks (1 to 4 rows, padded rows between). */
static void test_join_and_leave(void **state) {
    fixture *f = *state;
    batch_seq plans[7];
    memset(plans, 0, sizeof plans);
    const int join[7] = {0, 1, 1, 3, 4, 8, 8}, steps[7] = {9, 2, 6, 3, 5, 1, 3}, len[7] = {3, 1, 6, 2, 5, 4, 1};
    for (int i = 0; i < 7; i++) {
        batch_make_prompt(&plans[i], i + 5, len[i], f->c.V);
        plans[i].join = join[i];
        plans[i].steps = steps[i];
    }
    batch_run_schedule(&f->c, plans, 7, 4);
}

/* Chunked prefill: prompts of up to 17 tokens in chunks of 4 (a step runs 4 prompt tokens at
 * most), joining while others decode, so a prompt runs over several steps beside decoding
 * sequences, and short prompts share a step's chunk; each sequence's logits as those of the
 * sequence alone fed its prompt in the same chunks. */
static void test_chunked_prefill(void **state) {
    fixture *f = *state;
    batch_seq plans[6];
    memset(plans, 0, sizeof plans);
    const int join[6] = {0, 0, 1, 3, 4, 9}, steps[6] = {8, 3, 6, 4, 5, 2}, len[6] = {13, 2, 9, 4, 2, 17};
    for (int i = 0; i < 6; i++) {
        batch_make_prompt(&plans[i], i + 2, len[i], f->c.V);
        plans[i].join = join[i];
        plans[i].steps = steps[i];
    }
    plans[0].watch = plans[5].watch = 1; /* 13 and 17 tokens: 3 and 4 passes, every row compared */
    f->c.prefill_chunk = 4;
    /* 13 and 17 tokens take 3 and 4 steps; 9 takes 2, or 3 behind another prompt's chunk */
    assert_true(batch_run_schedule(&f->c, plans, 6, 6) >= 2 + 3 + 1);
}

/* Sequences past the first 512 keys of their cache, on 3 threads: alone, a decode step of
 * llama-tiny's has one unit per key/value head, 2, which 3 threads do not share evenly, so the
 * executor splits each unit's keys into chunks over the threads (2 of 512 keys, the first empty
 * under Mistral's window of 5); a batch of 3 steps through 6 units, whole.  The same bits, as
 * everywhere. */
static void test_long_cache(void **state) {
    fixture *f = *state;
    batch_seq plans[3];
    memset(plans, 0, sizeof plans);
    const int len[3] = {560, 640, 5};
    for (int i = 0; i < 3; i++) {
        batch_make_prompt(&plans[i], i, len[i], f->c.V);
        plans[i].steps = 4;
    }
    f->c.n_ctx = 700;
    batch_run_schedule(&f->c, plans, 3, 3);
}

/* A batch context of n_seq slots of CTX positions (prefill_chunk 0: the default). */
static vkg_batch_context *small_batch(const fixture *f, int n_seq, int prefill_chunk) {
    vkg_batch_options o;
    vkg_batch_options_default(&o);
    o.n_seq = n_seq;
    o.n_ctx = CTX;
    if (prefill_chunk) o.prefill_chunk = prefill_chunk;
    vkg_batch_context *b = NULL;
    vkg_error err = {0};
    check(vkg_batch_context_new(f->c.model, &o, &b, &err), &err);
    return b;
}

/* Prompt i of n tokens run alone, then `steps` greedy tokens (batch_run_alone). */
static void run_alone(const fixture *f, batch_seq *p, int i, int n, int steps) {
    memset(p, 0, sizeof *p);
    batch_make_prompt(p, i, n, f->c.V);
    p->steps = steps;
    batch_run_alone(&f->c, p);
}

/* Logits of a prompt whose rows were summed over other passes than the sequence alone's: the
 * same arithmetic per row, within rounding (NMSE 1e-10 on the CPU, attention's 5e-4 on Vulkan). */
static void expect_near(const fixture *f, const float *got, const float *want, const char *what) {
    const double e = test_nmse(got, want, (size_t)f->c.V);
    if (e > (f->c.cpu ? 1e-10 : 5e-4)) fail_msg("%s: NMSE %g against a prefill of the whole prompt", what, e);
}

/* A prompt's first 5 tokens cached in sequence 0, copied to sequence 2, the rest added there:
 * the logits of a prefill of the whole prompt alone, and so are the next token's. */
static void test_prefix_copy(void **state) {
    fixture *f = *state;
    batch_seq p;
    run_alone(f, &p, 3, 8, 2);
    vkg_batch_context *b = small_batch(f, 3, 0);
    vkg_error err = {0};
    float *got = malloc((size_t)f->c.V * sizeof *got);
    assert_non_null(got);
    check(vkg_batch_add(b, 0, p.prompt, 5, &err), &err);
    check(vkg_batch_step(b, &err), &err);
    check(vkg_batch_seq_copy(b, 0, 2, 5, &err), &err);
    assert_int_equal(vkg_batch_seq_length(b, 2), 5);
    assert_int_equal(vkg_batch_get_logits(b, 2, got, (size_t)f->c.V, &err), VKG_ERR_INVALID_ARGUMENT);
    check(vkg_batch_add(b, 2, p.prompt + 5, 3, &err), &err);
    check(vkg_batch_step(b, &err), &err);
    check(vkg_batch_get_logits(b, 2, got, (size_t)f->c.V, &err), &err);
    expect_near(f, got, p.alone, "copied prefix"); /* a prefill of 8 against one of 5 then 3 */
    assert_int_equal(batch_argmax(got, f->c.V), p.tokens[0]);
    /* the source runs on beside its copy, untouched */
    check(vkg_batch_add(b, 2, &p.tokens[0], 1, &err), &err);
    check(vkg_batch_add(b, 0, p.prompt + 5, 1, &err), &err);
    check(vkg_batch_step(b, &err), &err);
    check(vkg_batch_get_logits(b, 2, got, (size_t)f->c.V, &err), &err);
    assert_true(test_nmse(got, p.alone + f->c.V, (size_t)f->c.V) < (f->c.cpu ? 1e-10 : 5e-4));
    assert_int_equal(vkg_batch_seq_length(b, 0), 6);
    free(got);
    free(p.alone);
    vkg_batch_context_free(b);
}

/* Prompt caching within a slot: sequence 0 fed a prompt of 8 tokens, its first greedy token
 * queued, truncated back to 5 tokens (the queued token dropped) and fed the prompt's last 3
 * again: the logits of a prefill of the whole prompt (within rounding, as a copied prefix);
 * truncating past the length is refused. */
static void test_truncate(void **state) {
    fixture *f = *state;
    const size_t V = (size_t)f->c.V;
    batch_seq p;
    run_alone(f, &p, 4, 8, 1);
    vkg_batch_context *b = small_batch(f, 2, 0);
    vkg_error err = {0};
    float *got = malloc(V * sizeof *got);
    assert_non_null(got);
    check(vkg_batch_add(b, 0, p.prompt, 8, &err), &err);
    check(vkg_batch_step(b, &err), &err);
    check(vkg_batch_add(b, 0, &p.tokens[0], 1, &err), &err);
    assert_int_equal(vkg_batch_seq_truncate(b, 0, 9, &err), VKG_ERR_INVALID_ARGUMENT); /* past its 8 tokens */
    assert_int_equal(vkg_batch_seq_truncate(b, 1, 1, &err), VKG_ERR_INVALID_ARGUMENT); /* past an empty one */
    check(vkg_batch_seq_truncate(b, 0, 5, &err), &err);
    assert_int_equal(vkg_batch_seq_length(b, 0), 5);
    assert_int_equal(vkg_batch_seq_queued(b, 0), 0);
    assert_int_equal(vkg_batch_get_logits(b, 0, got, V, &err), VKG_ERR_INVALID_ARGUMENT);
    check(vkg_batch_add(b, 0, p.prompt + 5, 3, &err), &err);
    check(vkg_batch_step(b, &err), &err);
    check(vkg_batch_get_logits(b, 0, got, V, &err), &err);
    expect_near(f, got, p.alone, "truncated and fed again");
    assert_int_equal(batch_argmax(got, f->c.V), p.tokens[0]);
    free(got);
    free(p.alone);
    vkg_batch_context_free(b);
}

/* What a prompt watcher saw: rows [0, seen) of the prompt, in calls passes. */
typedef struct watched {
    int seen, calls;
} watched;

static void count_rows(void *user, int seq, int32_t first, int rows, const float *logits) {
    (void)logits;
    watched *w = user;
    assert_int_equal(seq, 1);
    assert_int_equal(first, w->seen); /* passes in order, none skipped */
    w->seen += rows;
    w->calls++;
}

/* A watched prompt's passes (vkg_batch_seq_watch_prompt; their rows are compared with a plain
 * context's in test_chunked_prefill): 13 tokens in chunks of 4 beside a decoding sequence are
 * three passes of 4 rows (the 13th token, alone, decodes); once the sequence is removed its slot
 * is not watched; a slot outside the context is refused. */
static void test_watched_prompt(void **state) {
    fixture *f = *state;
    int32_t prompt[13];
    for (int i = 0; i < 13; i++) prompt[i] = (7 + 31 * i) % f->c.V;
    vkg_batch_context *b = small_batch(f, 2, 4);
    vkg_error err = {0};
    watched w = {0};
    check(vkg_batch_add(b, 0, prompt, 1, &err), &err);
    check(vkg_batch_seq_watch_prompt(b, 1, count_rows, &w, &err), &err);
    check(vkg_batch_add(b, 1, prompt, 13, &err), &err);
    for (int step = 0; vkg_batch_seq_queued(b, 1) > 0; step++) {
        assert_true(step < 5);
        check(vkg_batch_step(b, &err), &err);
        if (vkg_batch_seq_queued(b, 0) == 0) check(vkg_batch_add(b, 0, prompt + 1, 1, &err), &err);
    }
    assert_int_equal(w.calls, 3);
    assert_int_equal(w.seen, 12);
    check(vkg_batch_seq_remove(b, 1, &err), &err);
    check(vkg_batch_add(b, 1, prompt, 5, &err), &err);
    check(vkg_batch_step(b, &err), &err);
    assert_int_equal(w.calls, 3);
    assert_int_equal(vkg_batch_seq_watch_prompt(b, 2, count_rows, &w, &err), VKG_ERR_INVALID_ARGUMENT);
    vkg_batch_context_free(b);
}

/* Bad ids, every slot taken, a full cache, logits before any run, bad copies: clear errors, and
 * the context still works after them. */
static void test_errors(void **state) {
    fixture *f = *state;
    vkg_batch_options o;
    vkg_batch_options_default(&o);
    o.n_seq = 2;
    o.n_ctx = 6;
    vkg_batch_context *b = NULL;
    vkg_error err = {0};
    o.n_seq = 0;
    assert_int_equal(vkg_batch_context_new(f->c.model, &o, &b, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "1 to 64"));
    o.n_seq = 2;
    o.prefill_chunk = -1;
    assert_int_equal(vkg_batch_context_new(f->c.model, &o, &b, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "prefill chunk of -1 tokens"));
    o.prefill_chunk = 0;
    o.n_ctx = 100000;
    assert_int_equal(vkg_batch_context_new(f->c.model, &o, &b, &err), VKG_ERR_INVALID_ARGUMENT);
    o.n_ctx = 6;
    check(vkg_batch_context_new(f->c.model, &o, &b, &err), &err);
    const int32_t ids[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    float *logits = malloc((size_t)f->c.V * sizeof *logits);
    assert_non_null(logits);
    assert_int_equal(vkg_batch_add(b, 2, ids, 1, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "sequence id 2 is outside 0..1"));
    assert_int_equal(vkg_batch_add(b, -1, ids, 1, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_int_equal(vkg_batch_add(NULL, 0, ids, 1, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_int_equal(vkg_batch_add(b, 0, ids, 0, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_int_equal(vkg_batch_step(b, &err), VKG_OK); /* nothing queued: nothing runs */
    assert_int_equal(vkg_batch_get_logits(b, 0, logits, (size_t)f->c.V, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "has run nothing"));
    const int32_t bad = f->c.V;
    assert_int_equal(vkg_batch_add(b, 0, &bad, 1, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "outside the vocabulary"));
    int s0 = -1, s1 = -1, s2 = -1;
    check(vkg_batch_seq_claim(b, &s0, &err), &err);
    check(vkg_batch_seq_claim(b, &s1, &err), &err);
    assert_int_equal(s0, 0);
    assert_int_equal(s1, 1);
    assert_int_equal(vkg_batch_seq_claim(b, &s2, &err), VKG_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.message, "all 2 sequence slots are in use"));
    check(vkg_batch_add(b, 0, ids, 4, &err), &err);
    assert_int_equal(vkg_batch_add(b, 0, ids, 3, &err), VKG_ERR_INVALID_ARGUMENT); /* 4 queued + 3 > 6 */
    assert_non_null(strstr(err.message, "pass the end of its cache of 6 positions"));
    check(vkg_batch_add(b, 0, ids, 2, &err), &err);
    check(vkg_batch_add(b, 1, ids, 1, &err), &err);
    check(vkg_batch_step(b, &err), &err);
    assert_int_equal(vkg_batch_seq_length(b, 0), 6);
    assert_int_equal(vkg_batch_add(b, 0, ids, 1, &err), VKG_ERR_INVALID_ARGUMENT); /* full */
    /* the full sequence sits below a stepping one: its padding row leaves its logits alone */
    float *before = malloc((size_t)f->c.V * sizeof *before);
    assert_non_null(before);
    check(vkg_batch_get_logits(b, 0, before, (size_t)f->c.V, &err), &err);
    check(vkg_batch_add(b, 1, ids, 1, &err), &err);
    check(vkg_batch_step(b, &err), &err);
    check(vkg_batch_get_logits(b, 0, logits, (size_t)f->c.V, &err), &err);
    assert_memory_equal(before, logits, (size_t)f->c.V * sizeof *logits);
    assert_int_equal(vkg_batch_get_logits(b, 0, logits, 3, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_int_equal(vkg_batch_seq_copy(b, 0, 0, 1, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_int_equal(vkg_batch_seq_copy(b, 1, 0, 3, &err), VKG_ERR_INVALID_ARGUMENT); /* 1 holds 2 */
    /* removing frees the slot at once */
    check(vkg_batch_seq_remove(b, 1, &err), &err);
    assert_int_equal(vkg_batch_seq_length(b, 1), 0);
    check(vkg_batch_seq_claim(b, &s2, &err), &err);
    assert_int_equal(s2, 1);
    check(vkg_batch_add(b, 1, ids, 3, &err), &err);
    check(vkg_batch_step(b, &err), &err);
    assert_int_equal(vkg_batch_seq_length(b, 1), 3);
    free(before);
    free(logits);
    vkg_batch_context_free(b);
}

/* The same steps of 5 sequences (prompts of 1 to 9 tokens, then 4 tokens each, all given) on the
 * CPU and on Vulkan: every logit of every step within attention's conformance threshold, so the
 * batched plans agree across executors as the one-sequence plans do.  steps_out: [4 + 1, 5, V]. */
static void batch_steps(const char *device, const char *dir, float *steps_out, int V) {
    vkg_device_options o = {.cpu_threads = 2, .quiet = 1, .validation = strcmp(device, "cpu") != 0};
    vkg_device *dev = NULL;
    vkg_model *m = NULL;
    vkg_batch_context *b = NULL;
    vkg_error err = {0};
    check(vkg_device_open(device, &o, &dev, &err), &err);
    check(vkg_model_open(dir, dev, NULL, &m, &err), &err);
    vkg_batch_options bo;
    vkg_batch_options_default(&bo);
    bo.n_seq = 5;
    bo.n_ctx = CTX;
    check(vkg_batch_context_new(m, &bo, &b, &err), &err);
    for (int t = 0; t <= 4; t++) {
        for (int i = 0; i < 5; i++) {
            batch_seq p;
            batch_make_prompt(&p, i, t == 0 ? 1 + 2 * i : 1, V);
            if (t > 0) p.prompt[0] = (int32_t)((t * 53 + i * 7) % V);
            check(vkg_batch_add(b, i, p.prompt, p.n_prompt, &err), &err);
        }
        check(vkg_batch_step(b, &err), &err);
        for (int i = 0; i < 5; i++)
            check(vkg_batch_get_logits(b, i, steps_out + ((size_t)t * 5 + (size_t)i) * (size_t)V, (size_t)V, &err),
                  &err);
    }
    vkg_batch_context_free(b);
    vkg_model_free(m);
    const uint64_t messages = vkg_device_validation_errors(dev);
    vkg_device_free(dev);
    assert_int_equal(messages, 0);
}

static void cpu_against_vulkan(const char *dir, int V) {
    const size_t n = (size_t)5 * 5 * (size_t)V;
    float *cpu = malloc(n * sizeof *cpu), *vk = malloc(n * sizeof *vk);
    assert_non_null(cpu);
    assert_non_null(vk);
    batch_steps("cpu", dir, cpu, V);
    batch_steps("vulkan", dir, vk, V);
    for (size_t row = 0; row < 25; row++) {
        const double e = test_nmse(vk + row * (size_t)V, cpu + row * (size_t)V, (size_t)V);
        if (e > 5e-4) fail_msg("step %zu sequence %zu: NMSE %g between Vulkan and the CPU", row / 5, row % 5, e);
    }
    free(cpu);
    free(vk);
}

static void test_gpt2_cpu_against_vulkan(void **state) {
    (void)state;
    cpu_against_vulkan(test_data_path("gpt2-tiny"), 512);
}

static void test_llama_cpu_against_vulkan(void **state) {
    (void)state;
    char *dir = random_model("llama-tiny", 0);
    cpu_against_vulkan(dir, 128);
    test_remove_tree(dir);
    free(dir);
}

/* Token 7's embedding and those of positions 1 and 2 all 3e38 (finite; the head untied): token 7
 * at position 1 or 2 sums to Inf, anything else stays finite.  The sequence that meets it fails
 * alone, in a prefill or a decode step, saying where; the sequences beside it go on as if it were
 * not there, and its slot serves again once removed. */
static void overflow_fails_one(const char *device) {
    char *dir = test_tmpdir("overflow");
    const test_poke pokes[2] = {{"wte.weight", 7 * 32, 32, 3e38f}, {"wpe.weight", 32, 64, 3e38f}};
    test_write_poked_gpt2(dir, VKG_ST_F32, 1, pokes, 2);
    const int cpu = strcmp(device, "cpu") == 0;
    vkg_device_options dopts = {.cpu_threads = 2, .quiet = 1, .validation = !cpu};
    vkg_device *dev = NULL;
    vkg_model *m = NULL;
    vkg_error err = {0};
    check(vkg_device_open(device, &dopts, &dev, &err), &err);
    check(vkg_model_open(dir, dev, NULL, &m, &err), &err);
    batch_check c = {.model = m, .cpu = cpu, .V = 64, .n_ctx = 16};
    vkg_batch_options o;
    vkg_batch_options_default(&o);
    o.n_seq = 3;
    o.n_ctx = c.n_ctx;
    vkg_batch_context *b = NULL;
    check(vkg_batch_context_new(m, &o, &b, &err), &err);
    batch_seq a;
    memset(&a, 0, sizeof a);
    a.n_prompt = 3;
    a.prompt[0] = 1, a.prompt[1] = 2, a.prompt[2] = 3;
    a.steps = 2;
    batch_run_alone(&c, &a);
    const int32_t bad_prompt[3] = {4, 7, 5}, c_prompt[2] = {6, 2}, seven = 7;
    check(vkg_batch_add(b, 0, a.prompt, 3, &err), &err);
    check(vkg_batch_add(b, 1, bad_prompt, 3, &err), &err);
    check(vkg_batch_add(b, 2, c_prompt, 2, &err), &err);
    check(vkg_batch_step(b, &err), &err);
    float got[64];
    check(vkg_batch_get_logits(b, 0, got, 64, &err), &err);
    batch_compare(&c, got, a.alone, 0, 0);
    assert_int_equal(vkg_batch_get_logits(b, 1, got, 64, &err), VKG_ERR_NOT_FINITE);
    if (!strstr(err.message, "sequence 1: gpt2: the model's outputs overflowed: logits at position 2 are not finite"))
        fail_msg("message: %s", err.message);
    check(vkg_batch_get_logits(b, 2, got, 64, &err), &err);
    /* a decode step: sequence 2 meets token 7, sequence 0 goes on beside it */
    check(vkg_batch_add(b, 0, &a.tokens[0], 1, &err), &err);
    check(vkg_batch_add(b, 2, &seven, 1, &err), &err);
    assert_int_equal(vkg_batch_add(b, 1, &seven, 1, &err), VKG_ERR_NOT_FINITE);
    assert_non_null(strstr(err.message, "remove the sequence"));
    check(vkg_batch_step(b, &err), &err);
    check(vkg_batch_get_logits(b, 0, got, 64, &err), &err);
    batch_compare(&c, got, a.alone + 64, 0, 1);
    assert_int_equal(vkg_batch_get_logits(b, 2, got, 64, &err), VKG_ERR_NOT_FINITE);
    assert_non_null(strstr(err.message, "sequence 2: gpt2: the model's outputs overflowed: logits at position 2"));
    /* removed, the slot serves a new sequence */
    check(vkg_batch_seq_remove(b, 1, &err), &err);
    int slot = -1;
    check(vkg_batch_seq_claim(b, &slot, &err), &err);
    assert_int_equal(slot, 1);
    check(vkg_batch_add(b, 1, a.prompt, 3, &err), &err);
    check(vkg_batch_step(b, &err), &err);
    check(vkg_batch_get_logits(b, 1, got, 64, &err), &err);
    batch_compare(&c, got, a.alone, 1, 0);
    free(a.alone);
    vkg_batch_context_free(b);
    vkg_model_free(m);
    const uint64_t messages = vkg_device_validation_errors(dev);
    vkg_device_free(dev);
    test_remove_tree(dir);
    free(dir);
    assert_int_equal(messages, 0);
}
static void test_overflow_cpu(void **state) { (void)state; overflow_fails_one("cpu"); }
static void test_overflow_vulkan(void **state) { (void)state; overflow_fails_one("vulkan"); }

#define BATCH_TESTS(setup)                                                                                             \
    cmocka_unit_test_setup_teardown(test_batch_of_1, setup, teardown),                                                 \
        cmocka_unit_test_setup_teardown(test_batch_of_2, setup, teardown),                                             \
        cmocka_unit_test_setup_teardown(test_batch_of_3, setup, teardown),                                             \
        cmocka_unit_test_setup_teardown(test_batch_of_8, setup, teardown),                                             \
        cmocka_unit_test_setup_teardown(test_join_and_leave, setup, teardown),                                         \
        cmocka_unit_test_setup_teardown(test_chunked_prefill, setup, teardown),                                        \
        cmocka_unit_test_setup_teardown(test_prefix_copy, setup, teardown),                                            \
        cmocka_unit_test_setup_teardown(test_watched_prompt, setup, teardown),                                         \
        cmocka_unit_test_setup_teardown(test_truncate, setup, teardown)

int main(void) {
    const struct CMUnitTest tests[] = {
        BATCH_TESTS(setup_gpt2_cpu),
        BATCH_TESTS(setup_gpt2_vulkan),
        BATCH_TESTS(setup_llama_cpu),
        BATCH_TESTS(setup_llama_vulkan),
        BATCH_TESTS(setup_qwen3_cpu),
        BATCH_TESTS(setup_qwen3_vulkan),
        cmocka_unit_test_setup_teardown(test_batch_of_12, setup_llama_cpu, teardown),
        cmocka_unit_test_setup_teardown(test_long_cache, setup_llama_cpu3, teardown),
        cmocka_unit_test_setup_teardown(test_long_cache, setup_mistral_cpu3, teardown),
        cmocka_unit_test_setup_teardown(test_join_and_leave, setup_mistral_cpu, teardown),
        cmocka_unit_test_setup_teardown(test_join_and_leave, setup_mistral_vulkan, teardown),
        cmocka_unit_test_setup_teardown(test_chunked_prefill, setup_mistral_cpu, teardown),
        cmocka_unit_test_setup_teardown(test_chunked_prefill, setup_mistral_vulkan, teardown),
        cmocka_unit_test_setup_teardown(test_errors, setup_gpt2_cpu, teardown),
        cmocka_unit_test_setup_teardown(test_errors, setup_gpt2_vulkan, teardown),
        cmocka_unit_test(test_overflow_cpu),
        cmocka_unit_test(test_overflow_vulkan),
        cmocka_unit_test(test_gpt2_cpu_against_vulkan),
        cmocka_unit_test(test_llama_cpu_against_vulkan),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
