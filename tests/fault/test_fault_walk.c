/* Every host allocation, device allocation, memory map, Vulkan call and fence wait that loading
 * GPT-2 and running logits, generate and attention make (on the tiny model, on the CPU and on
 * Vulkan), and a CPU attention step whose keys split over 2 threads (the one allocation whose
 * failure must not fail the run: its chunk states), is made to fail, one at a time
 * (src/fault/fault.h): each run must end with an error
 * status and a message, or with exactly the output of the run without a fault; nothing may
 * crash, and LeakSanitizer (this test runs in the sanitizer build) sees every error path free
 * what it took.  A fence wait that times out ends in VKG_ERR_TIMEOUT; a fence that never
 * signals leaves the device lost (later runs fail at once), and freeing it does not hang. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/backend.h"
#include "fault/fault.h"
#include "models/gpt2.h"
#include "models/model_run.h"
#include "vulkan/context.h"
#include "vkgraph.h"

#define MAX_IDS 64
#define GEN_TOKENS 3

static char model_dir[1024];
static int32_t ids[MAX_IDS];
static int n_ids;
static char cache_dir[256];

/* What one run does; the device is opened by the run when `own_device` is set, else given. */
typedef struct job {
    const char *name;
    const char *device;     /* "cpu" or "vulkan" */
    int what;               /* 0 load, 1 logits, 2 generate, 3 attention, 4 open the device only,
                               5 attention over a long cache on 2 threads (split_attention) */
    int own_device;
    int staging;            /* Vulkan: reach device-local buffers through staging copies */
    vkg_device *dev;        /* when !own_device */
    const vkg_gpt2 *model;  /* loaded outside the run, except for `what` 0 */
} job;

/* The output of a run: floats (logits, attention, a count) and how many. */
typedef struct output {
    float *v;
    size_t n;
} output;

static vkg_status open_device_threads(const char *spec, int threads, vkg_device **dev, vkg_error *err) {
    vkg_device_options o = {.cpu_threads = threads, .quiet = 1};
    return vkg_device_open(spec, &o, dev, err);
}

static vkg_status open_device(const char *spec, vkg_device **dev, vkg_error *err) {
    return open_device_threads(spec, 1, dev, err);
}

/* One query row against SPLIT_KEYS keys, built from ops (one fused attention step): a single
 * unit on 2 threads, so the CPU executor splits its keys into 3 chunks, their states in a buffer
 * of the session grown at the run.  The output is the row's SPLIT_D values. */
enum { SPLIT_D = 16, SPLIT_KEYS = 1100 };

static vkg_status split_attention(vkg_device *dev, output *out, vkg_error *err) {
    static float q[SPLIT_D], kv[SPLIT_KEYS * SPLIT_D];
    for (int i = 0; i < SPLIT_D; i++) q[i] = (float)(i % 5) - 2.0f;
    for (int i = 0; i < SPLIT_KEYS * SPLIT_D; i++) kv[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
    vkg_graph *g = vkg_graph_new();
    if (!g) {
        snprintf(err->message, sizeof err->message, "out of memory making a graph");
        return VKG_ERR_OUT_OF_MEMORY;
    }
    vkg_tensor tq = vkg_input(g, "q", VKG_F32, 3, (const int64_t[]){1, 1, SPLIT_D});
    vkg_tensor tk = vkg_input(g, "k", VKG_F32, 3, (const int64_t[]){1, SPLIT_KEYS, SPLIT_D});
    vkg_tensor s = vkg_scale(g, vkg_matmul(g, tq, tk, VKG_NONE, VKG_TRANSPOSE_B), 0.25f);
    vkg_tensor o = vkg_matmul(g, vkg_softmax(g, vkg_mask_causal(g, s, SPLIT_KEYS - 1, VKG_NONE)), tk, VKG_NONE, 0);
    vkg_plan *plan = NULL;
    vkg_session *ses = NULL;
    vkg_status st = vkg_output(g, "o", o);
    if (st != VKG_OK) snprintf(err->message, sizeof err->message, "%s", vkg_graph_error(g)); /* the sticky error */
    if (st == VKG_OK) st = vkg_plan_compile(g, NULL, &plan, err);
    if (st == VKG_OK) st = vkg_session_new(dev, plan, &ses, err);
    if (st == VKG_OK) st = vkg_session_set_input(ses, tq, q, sizeof q, err);
    if (st == VKG_OK) st = vkg_session_set_input(ses, tk, kv, sizeof kv, err);
    if (st == VKG_OK) st = vkg_session_run(ses, err);
    if (st == VKG_OK) st = vkg_session_get_output(ses, o, out->v, SPLIT_D * sizeof(float), err);
    out->n = SPLIT_D;
    vkg_session_free(ses);
    vkg_plan_free(plan);
    vkg_graph_free(g);
    return st;
}

static vkg_status run_on(const job *j, vkg_device *dev, const vkg_gpt2 *m, output *out, vkg_error *err) {
    const int V = m->config.vocab_size, H = m->config.n_head;
    if (j->what == 1) {
        out->n = (size_t)V;
        return vkg_decoder_forward(&m->decoder, dev, ids, n_ids, 0, out->v, VKG_NO_ATTENTION, NULL, err);
    }
    if (j->what == 3) {
        out->n = (size_t)H * (size_t)n_ids * (size_t)n_ids;
        return vkg_decoder_forward(&m->decoder, dev, ids, n_ids, 0, NULL, 0, out->v, err);
    }
    /* generate: the prompt, then GEN_TOKENS greedy tokens; every step's logits are the output */
    vkg_generator gen;
    vkg_status st = vkg_generator_new(&m->decoder, dev, n_ids + GEN_TOKENS, &gen, err);
    if (st != VKG_OK) return st;
    st = vkg_generator_feed(&gen, ids, n_ids, err);
    out->n = 0;
    for (int t = 0; t < GEN_TOKENS && st == VKG_OK; t++) {
        memcpy(out->v + out->n, gen.logits, (size_t)V * sizeof(float));
        out->n += (size_t)V;
        int32_t best = 0;
        for (int k = 1; k < V; k++)
            if (gen.logits[k] > gen.logits[best]) best = k;
        st = vkg_generator_feed(&gen, &best, 1, err);
    }
    vkg_generator_free(&gen);
    return st;
}

static vkg_status run_job(const job *j, output *out, vkg_error *err) {
    memset(err, 0, sizeof *err);
    if (j->what == 0) {
        vkg_gpt2 *m = NULL;
        vkg_status st = vkg_gpt2_load(model_dir, &m, err);
        if (st != VKG_OK) return st;
        out->v[0] = (float)vkg_gpt2_parameter_count(m);
        /* a fingerprint of the weights read: wte's first element, as stored */
        out->v[1] = m->weight_dtype == VKG_F32 ? ((const float *)m->wte)[0] : (float)((const uint16_t *)m->wte)[0];
        out->n = 2;
        vkg_gpt2_free(m);
        return VKG_OK;
    }
    vkg_device *dev = j->dev;
    if (j->own_device) {
        vkg_status st = open_device_threads(j->device, j->what == 5 ? 2 : 1, &dev, err);
        if (st != VKG_OK) return st;
    }
    if (j->staging) ((vkg_vk_context *)dev->impl)->tuning.force_staging = 1;
    vkg_status st = VKG_OK;
    if (j->what == 4) {
        out->n = 1;
        out->v[0] = (float)vkg_device_is_cpu(dev);
    } else if (j->what == 5) {
        st = split_attention(dev, out, err);
    } else {
        st = run_on(j, dev, j->model, out, err);
    }
    if (j->own_device) vkg_device_free(dev);
    return st;
}

/* Walks n over every call of `kind` the job makes (*walked of them); returns how many runs ended
 * in an error. */
static int walk_calls(const job *j, vkg_fault_kind kind, uint64_t *walked) {
    const size_t cap = (size_t)1 << 20;
    output ref = {calloc(cap, sizeof(float)), 0}, got = {calloc(cap, sizeof(float)), 0};
    assert_non_null(ref.v);
    assert_non_null(got.v);
    vkg_error err;
    vkg_fault_arm(kind, 0);
    if (run_job(j, &ref, &err) != VKG_OK) fail_msg("%s without a fault: %s", j->name, err.message);
    const uint64_t calls = vkg_fault_calls(kind);
    *walked = calls;
    int errors = 0;
    for (uint64_t n = 1; n <= calls; n++) {
        vkg_fault_arm(kind, n);
        got.n = 0;
        vkg_status st = run_job(j, &got, &err);
        const int fired = vkg_fault_fired();
        vkg_fault_arm(kind, 0);
        if (st != VKG_OK) {
            errors++;
            if (!fired) fail_msg("%s, %s %llu: failed with no fault injected: %s", j->name, vkg_fault_kind_name(kind),
                                 (unsigned long long)n, err.message);
            if (!err.message[0]) fail_msg("%s, %s %llu: status %s without a message", j->name,
                                          vkg_fault_kind_name(kind), (unsigned long long)n, vkg_status_name(st));
            if (kind == VKG_FAULT_FENCE && st != VKG_ERR_TIMEOUT && st != VKG_ERR_DEVICE_LOST)
                fail_msg("%s, fence wait %llu: %s (expected a timeout): %s", j->name, (unsigned long long)n,
                         vkg_status_name(st), err.message);
        } else if (got.n != ref.n || memcmp(got.v, ref.v, ref.n * sizeof(float)) != 0) {
            fail_msg("%s, %s %llu failed, yet the run succeeded with a different output", j->name,
                     vkg_fault_kind_name(kind), (unsigned long long)n);
        }
    }
    printf("%-26s %-18s %5llu calls: %4d runs ended in an error, %4llu gave the same output\n", j->name,
           vkg_fault_kind_name(kind), (unsigned long long)calls, errors, (unsigned long long)calls - (uint64_t)errors);
    fflush(stdout);
    free(ref.v);
    free(got.v);
    return errors;
}

static int walk(const job *j, vkg_fault_kind kind) {
    uint64_t walked;
    return walk_calls(j, kind, &walked);
}

static vkg_gpt2 *load_model(void) {
    vkg_gpt2 *m = NULL;
    vkg_error err;
    if (vkg_gpt2_load(model_dir, &m, &err) != VKG_OK) fail_msg("%s", err.message);
    return m;
}

static void test_load(void **state) {
    (void)state;
    job j = {.name = "load GPT-2", .what = 0};
    assert_true(walk(&j, VKG_FAULT_HOST_ALLOC) > 0);
}

static void test_cpu(void **state) {
    (void)state;
    vkg_gpt2 *m = load_model();
    static const char *const names[] = {"", "cpu logits", "cpu generate", "cpu attention"};
    for (int what = 1; what <= 3; what++) {
        job j = {.name = names[what], .device = "cpu", .what = what, .own_device = 1, .model = m};
        assert_true(walk(&j, VKG_FAULT_HOST_ALLOC) > 0);
    }
    vkg_gpt2_free(m);
    /* the split attention's chunk states: refused, the step runs whole, with the same output
     * (every other allocation of the run fails it) */
    job j = {.name = "cpu split attention", .device = "cpu", .what = 5, .own_device = 1};
    uint64_t walked;
    const int errors = walk_calls(&j, VKG_FAULT_HOST_ALLOC, &walked);
    assert_true(errors > 0);
    assert_int_equal((uint64_t)errors + 1, walked);
}

/* Opening the Vulkan device, on its own: instance, device, queue, pool, each allocation. */
static void test_vulkan_open(void **state) {
    (void)state;
    job j = {.name = "vulkan open", .device = "vulkan", .what = 4, .own_device = 1};
    assert_true(walk(&j, VKG_FAULT_VULKAN) > 0);
    walk(&j, VKG_FAULT_HOST_ALLOC);
}

/* The first run on a fresh device builds the pipelines: every Vulkan call of that, and every
 * fence wait (a timeout marks the device lost: a fresh one each run). */
static void test_vulkan_fresh(void **state) {
    (void)state;
    vkg_gpt2 *m = load_model();
    job j = {.name = "vulkan logits (fresh)", .device = "vulkan", .what = 1, .own_device = 1, .model = m};
    assert_true(walk(&j, VKG_FAULT_VULKAN) > 0);
    static const char *const names[] = {"", "vulkan logits (fresh)", "vulkan generate (fresh)", "vulkan attention (fresh)"};
    for (int what = 1; what <= 3; what++) {
        j.name = names[what];
        j.what = what;
        assert_true(walk(&j, VKG_FAULT_FENCE) > 0);
        assert_true(walk(&j, VKG_FAULT_DEVICE_ALLOC) > 0);
        walk(&j, VKG_FAULT_MAP);
    }
    /* Uploads and reads through the staging buffer: its copies wait on fences of their own. */
    j = (job){.name = "vulkan logits (staging)", .device = "vulkan", .what = 1, .own_device = 1, .staging = 1,
              .model = m};
    assert_true(walk(&j, VKG_FAULT_FENCE) > 0);
    assert_true(walk(&j, VKG_FAULT_DEVICE_ALLOC) > 0);
    walk(&j, VKG_FAULT_MAP);
    vkg_gpt2_free(m);
}

/* On a device whose pipelines exist: every allocation and Vulkan call of a session. */
static void test_vulkan_warm(void **state) {
    (void)state;
    vkg_gpt2 *m = load_model();
    vkg_device *dev = NULL;
    vkg_error err;
    if (open_device("vulkan", &dev, &err) != VKG_OK) fail_msg("no Vulkan device: %s", err.message);
    static const char *const names[] = {"", "vulkan logits", "vulkan generate", "vulkan attention"};
    for (int what = 1; what <= 3; what++) {
        job j = {.name = names[what], .device = "vulkan", .what = what, .dev = dev, .model = m};
        output warm = {calloc((size_t)1 << 20, sizeof(float)), 0};
        assert_int_equal(run_job(&j, &warm, &err), VKG_OK); /* builds this job's pipelines */
        free(warm.v);
        assert_true(walk(&j, VKG_FAULT_HOST_ALLOC) > 0);
        assert_true(walk(&j, VKG_FAULT_VULKAN) > 0);
    }
    /* The same device through staging copies: their Vulkan calls and allocations too. */
    ((vkg_vk_context *)dev->impl)->tuning.force_staging = 1;
    job j = {.name = "vulkan logits (staging)", .device = "vulkan", .what = 1, .dev = dev, .model = m};
    assert_true(walk(&j, VKG_FAULT_HOST_ALLOC) > 0);
    assert_true(walk(&j, VKG_FAULT_VULKAN) > 0);
    vkg_device_free(dev);
    vkg_gpt2_free(m);
}

/* A fence that signals late (an injected timeout, the work in fact done): the run fails with
 * VKG_ERR_TIMEOUT, and the device works again once that fence is seen signalled.  A fence that
 * never signals (every wait from then on times out): the device then counts as lost, every
 * later run fails at once with VKG_ERR_DEVICE_LOST, and freeing the device returns. */
static void test_fence_timeouts(void **state) {
    (void)state;
    vkg_gpt2 *m = load_model();
    vkg_device *dev = NULL;
    vkg_error err;
    assert_int_equal(open_device("vulkan", &dev, &err), VKG_OK);
    float *logits = calloc((size_t)m->config.vocab_size, sizeof *logits);
    float *want = calloc((size_t)m->config.vocab_size, sizeof *want);
    const size_t bytes = (size_t)m->config.vocab_size * sizeof *logits;
    vkg_fault_arm(VKG_FAULT_FENCE, 0);
    assert_int_equal(vkg_decoder_forward(&m->decoder, dev, ids, n_ids, 0, want, VKG_NO_ATTENTION, NULL, &err), VKG_OK);
    const uint64_t waits = vkg_fault_calls(VKG_FAULT_FENCE);
    assert_true(waits >= 1);

    vkg_fault_arm(VKG_FAULT_FENCE, waits); /* the run's own wait */
    vkg_status st = vkg_decoder_forward(&m->decoder, dev, ids, n_ids, 0, logits, VKG_NO_ATTENTION, NULL, &err);
    vkg_fault_arm(VKG_FAULT_FENCE, 0);
    assert_int_equal(st, VKG_ERR_TIMEOUT);
    if (!strstr(err.message, "did not finish within") || !strstr(err.message, "lost"))
        fail_msg("unexpected message: %s", err.message);
    assert_int_equal(vkg_decoder_forward(&m->decoder, dev, ids, n_ids, 0, logits, VKG_NO_ATTENTION, NULL, &err), VKG_OK);
    assert_memory_equal(logits, want, bytes);

    vkg_fault_arm_from(VKG_FAULT_FENCE, waits); /* the run's wait and every one after it */
    st = vkg_decoder_forward(&m->decoder, dev, ids, n_ids, 0, logits, VKG_NO_ATTENTION, NULL, &err);
    assert_int_equal(st, VKG_ERR_TIMEOUT);
    st = vkg_decoder_forward(&m->decoder, dev, ids, n_ids, 0, logits, VKG_NO_ATTENTION, NULL, &err);
    assert_int_equal(st, VKG_ERR_DEVICE_LOST);
    if (!strstr(err.message, "lost earlier")) fail_msg("unexpected message: %s", err.message);
    vkg_device_free(dev); /* returns: every wait is bounded, a hung device is not waited idle */
    vkg_fault_arm(VKG_FAULT_FENCE, 0);
    free(logits);
    free(want);
    vkg_gpt2_free(m);
}

static int setup(void **state) {
    (void)state;
    const char *d = getenv("VKG_TEST_DATA");
    snprintf(model_dir, sizeof model_dir, "%s/gpt2-tiny", d ? d : "data");
    char path[1100];
    snprintf(path, sizeof path, "%s/ids.txt", model_dir);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    for (int v; n_ids < MAX_IDS && fscanf(f, "%d%*[, \n]", &v) == 1;) ids[n_ids++] = v;
    fclose(f);
    if (n_ids < 2) return -1;
    /* A private pipeline cache: fresh devices then skip recompiling the shaders. */
    snprintf(cache_dir, sizeof cache_dir, "/tmp/vkg-fault-XXXXXX");
    if (!mkdtemp(cache_dir)) return -1;
    setenv("XDG_CACHE_HOME", cache_dir, 1);
    unsetenv("VKG_PIPELINE_CACHE");
    return 0;
}

static int teardown(void **state) {
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", cache_dir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_load),
        cmocka_unit_test(test_cpu),
        cmocka_unit_test(test_vulkan_open),
        cmocka_unit_test(test_vulkan_fresh),
        cmocka_unit_test(test_vulkan_warm),
        cmocka_unit_test(test_fence_timeouts),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
