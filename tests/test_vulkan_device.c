/* The Vulkan device layer: opening and describing devices, the device list, the on-disk pipeline
 * cache (a damaged, truncated or foreign file is ignored and does no harm; no_pipeline_cache
 * writes nothing), the run timeout (timeout_ms) failing cleanly and the session recovering, a
 * run that goes to the queue in pieces giving the same bits, the executor's own barrier check
 * catching a plan that lacks a barrier, and a device whose per-stage limits a shader passes
 * refused by name. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/end_now.h"
#include "support/test_util.h"
#include "support/vk_test.h"
#include "vulkan/pipelines.h"
#include "vulkan/vk_session.h"

static void test_open_and_limits(void **state) {
    (void)state;
    vkg_device *d = vk_test_open();
    assert_false(vkg_device_is_cpu(d));
    assert_non_null(strstr(vkg_device_name(d), "(vulkan:"));
    vkg_vk_context *c = vk_test_context(d);
    assert_true(d->alignment >= 4 && (d->alignment & (d->alignment - 1)) == 0);
    assert_true(d->alignment >= c->props.limits.minStorageBufferOffsetAlignment);
    assert_true(d->max_binding_bytes > 0 && d->max_binding_bytes % d->alignment == 0);
    assert_true(d->max_binding_bytes <= c->props.limits.maxStorageBufferRange);
    assert_true(c->subgroup.subgroupSize >= 1);
    assert_int_equal(vkg_vk_tuning_check(c, &c->tuning, NULL), VKG_OK);

    vkg_compile_options opts;
    vkg_compile_options_default(&opts);
    vkg_device_compile_options(d, &opts);
    assert_true(opts.max_binding_bytes <= d->max_binding_bytes);
    assert_int_equal(opts.alignment % d->alignment, 0);

    /* a tuning outside the device's limits is refused with a message, not handed to the driver */
    vkg_vk_tuning bad = c->tuning;
    bad.row_wg = c->props.limits.maxComputeWorkGroupInvocations + 1;
    vkg_error err = {0};
    assert_int_equal(vkg_vk_tuning_check(c, &bad, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "row_wg"));
    vk_test_close(d);
}

static void test_bad_index(void **state) {
    (void)state;
    vkg_device_options opts = {.quiet = 1};
    vkg_device *d = NULL;
    vkg_error err = {0};
    vkg_status st = vkg_device_open("vulkan", &opts, &d, &err);
    if (st == VKG_ERR_NO_DEVICE) vk_test_no_vulkan(err.message); /* else "vulkan:99" would fail for that */
    vkg_device_free(d);
    d = NULL;
    st = vkg_device_open("vulkan:99", &opts, &d, &err);
    if (st == VKG_OK) {   /* a machine with a hundred devices */
        vkg_device_free(d);
        skip();
    }
    assert_int_equal(st, VKG_ERR_NO_DEVICE);
    assert_null(d);
    assert_non_null(strstr(err.message, "vulkan:99"));
}

/* The default device ("auto", NULL) is the best Vulkan GPU; where the best Vulkan device renders
 * in software (lavapipe, as in CI), the CPU executor, which runs faster. */
static void test_auto_passes_software_over(void **state) {
    (void)state;
    vkg_device_options opts = {.quiet = 1};
    vkg_device *vk = NULL, *dflt = NULL;
    vkg_error err = {0};
    if (vkg_device_open("vulkan", &opts, &vk, &err) != VKG_OK) vk_test_no_vulkan(err.message);
    const int software = vkg_device_is_software(vk);
    assert_int_equal(vkg_device_open(NULL, &opts, &dflt, &err), VKG_OK);
    assert_int_equal(vkg_device_is_cpu(dflt), software);
    if (!software) assert_string_equal(vkg_device_name(dflt), vkg_device_name(vk));
    assert_int_equal(vkg_device_is_software(dflt), 0);
    vkg_device_free(dflt);
    vkg_device_free(vk);
}

static void test_devices_print(void **state) {
    (void)state;
    FILE *f = tmpfile();
    assert_non_null(f);
    vkg_error err = {0};
    vkg_status st = vkg_devices_print(f, &err);
    if (st == VKG_ERR_NO_DEVICE) {
        fclose(f);
        vk_test_no_vulkan(err.message);
    }
    assert_int_equal(st, VKG_OK);
    long n = ftell(f);
    assert_true(n > 0);
    char *text = calloc((size_t)n + 1, 1);
    assert_non_null(text);
    rewind(f);
    assert_int_equal(fread(text, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    const char *expect[] = {"vulkan:0", "(default)", "type", "driver", "Vulkan API version", "subgroup size",
                            "max shared memory", "maxStorageBufferRange", "minStorageBufferOffsetAlignment",
                            "maxComputeWorkGroupInvocations", "memory heap 0", "shaderFloat16", "16-bit storage",
                            "cooperative matrix"};
    for (size_t i = 0; i < sizeof expect / sizeof expect[0]; i++)
        if (!strstr(text, expect[i])) fail_msg("'%s' missing from:\n%s", expect[i], text);
    free(text);
}

/* --- the pipeline cache ------------------------------------------------------------------------ */

static void spill(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    fclose(f);
}

/* Opens a device (reading whatever cache file is there), runs a binary add through a fresh
 * pipeline, checks the sums, and closes (writing the cache).  path, when non-NULL, receives the
 * cache file's path. */
static void use_device_with(vkg_device_options opts, char *path, size_t size, VkPhysicalDeviceProperties *props) {
    vkg_device *d = vk_test_open_with(opts);
    vkg_vk_context *c = vk_test_context(d);
    if (path) assert_true(vkg_vk_cache_path(&c->props, path, size));
    if (props) *props = c->props;
    enum { N = 100 };
    float a[N], b[N], out[N];
    vk_test_fill(a, N, 1, 1.0f);
    vk_test_fill(b, N, 2, 1.0f);
    vk_test_plan tp;
    vk_test_plan_init(&tp);
    int ra = vk_test_region(&tp, VKG_REGION_INPUT, sizeof a, NULL);
    int rb = vk_test_region(&tp, VKG_REGION_CONSTANT, sizeof b, b);
    int ro = vk_test_region(&tp, VKG_REGION_OUTPUT, sizeof out, NULL);
    vkg_step *s = vk_test_step(&tp, VKG_KERNEL_BINARY);
    vkg_binary_params *p = &s->params.binary;
    p->op = VKG_BINARY_ADD;
    p->shape[0] = p->shape[1] = p->shape[2] = 1, p->shape[3] = N;
    p->a_strides[3] = p->b_strides[3] = 1;
    vk_test_bind(&tp, s, 0, ra, 0);
    vk_test_bind(&tp, s, 1, rb, 0);
    vk_test_bind(&tp, s, 2, ro, 1);
    void *host[16] = {0};
    host[ra] = a, host[ro] = out;
    vk_test_run(d, &tp.plan, host, NULL);
    for (int i = 0; i < N; i++) assert_true(out[i] == a[i] + b[i]);
    vk_test_close(d);
}

static void use_device(char *path, size_t size, VkPhysicalDeviceProperties *props) {
    use_device_with((vkg_device_options){0}, path, size, props);
}

static void test_pipeline_cache(void **state) {
    (void)state;
    /* Kept in a static buffer: nothing to free when the test stops early (fails or skips). */
    static char dir[512];
    char *made = test_tmpdir("vkcache");
    assert_non_null(made);
    snprintf(dir, sizeof dir, "%s", made);
    free(made);
    assert_int_equal(setenv("XDG_CACHE_HOME", dir, 1), 0);
    char path[1024];
    VkPhysicalDeviceProperties props;
    use_device(path, sizeof path, &props);
    assert_non_null(strstr(path, dir));

    /* What was written is intact and ours. */
    size_t n = 0, payload_bytes = 0;
    uint8_t *good = (uint8_t *)test_read_file(path, &n);
    assert_non_null(good);
    const uint8_t *payload = vkg_vk_cache_payload(&props, good, n, &payload_bytes);
    assert_non_null(payload);
    assert_true(payload_bytes >= 32);

    /* Damaged files: each is rejected by the check, then the device works with it in place. */
    uint8_t noise[4096];
    vkg_rng r;
    vkg_rng_seed(&r, 42);
    for (size_t i = 0; i < sizeof noise; i++) noise[i] = (uint8_t)vkg_rng_next(&r);
    uint8_t *foreign = malloc(payload_bytes);
    assert_non_null(foreign);
    memcpy(foreign, payload, payload_bytes);
    foreign[16] ^= 0x5a;   /* pipelineCacheUUID */
    uint8_t *huge_header = malloc(payload_bytes);
    assert_non_null(huge_header);
    memcpy(huge_header, payload, payload_bytes);
    huge_header[0] = 0xff, huge_header[1] = 0xff;   /* headerSize beyond the data */
    uint8_t *flipped = malloc(n);
    assert_non_null(flipped);
    memcpy(flipped, good, n);
    flipped[n - 1] ^= 1;   /* a bit of the payload: the hash no longer matches */

    for (int kind = 0; kind < 6; kind++) {
        size_t len = 0;
        switch (kind) {
        case 0: spill(path, noise, sizeof noise), len = sizeof noise; break;
        case 1: spill(path, good, n / 2), len = n / 2; break;
        case 2: assert_int_equal(vkg_vk_cache_write_file(path, foreign, payload_bytes, NULL), VKG_OK); break;
        case 3: assert_int_equal(vkg_vk_cache_write_file(path, huge_header, payload_bytes, NULL), VKG_OK); break;
        case 4: spill(path, flipped, n), len = n; break;
        case 5: spill(path, "", 0); break;
        }
        size_t got_n = 0, pb = 0;
        uint8_t *now = (uint8_t *)test_read_file(path, &got_n);
        assert_non_null(now);
        if (len) assert_int_equal(got_n, len);
        assert_null(vkg_vk_cache_payload(&props, now, got_n, &pb));
        free(now);
        /* Opening a device over random bytes and over another device's cache (the two a driver
         * would be most likely to trip on): it works, and writes a good file on closing. */
        if (kind != 0 && kind != 2) continue;
        use_device(NULL, 0, NULL);
        now = (uint8_t *)test_read_file(path, &got_n);
        assert_non_null(now);
        assert_non_null(vkg_vk_cache_payload(&props, now, got_n, &pb));
        free(now);
    }

    /* Disabled: nothing written. */
    assert_int_equal(remove(path), 0);
    use_device_with((vkg_device_options){.no_pipeline_cache = 1}, NULL, 0, NULL);
    assert_int_equal(access(path, F_OK), -1);

    free(good), free(foreign), free(huge_header), free(flipped);
    assert_int_equal(test_remove_tree(dir), 0);
}

/* --- timeout ----------------------------------------------------------------------------------- */

/* Host memory an abandoned session's work may still read (test_timeout): kept to the end. */
static float *kept_a, *kept_b;

static void test_timeout(void **state) {
    (void)state;
    vkg_device *d = vk_test_open();
    /* about 0.13 GFLOP: milliseconds even on a fast GPU, far more on a software one */
    enum { M = 128, N = 256, K = 2048 };
    float *a = malloc(sizeof(float) * M * K), *b = malloc(sizeof(float) * K * N);
    float *c = calloc((size_t)M * N, sizeof(float));
    assert_true(a && b && c);
    vk_test_fill(a, (size_t)M * K, 1, 1.0f);
    vk_test_fill(b, (size_t)K * N, 2, 1.0f);
    vkg_matmul_params p = {.M = M, .N = N, .K = K, .batch0 = 1, .batch1 = 1, .a_stride_m = K, .a_stride_k = 1,
                           .b_stride_k = N, .b_stride_n = 1, .c_stride_m = N};

    vk_test_plan tp;
    vk_test_plan_init(&tp);
    int ra = vk_test_region(&tp, VKG_REGION_CONSTANT, sizeof(float) * M * K, a);
    int rb = vk_test_region(&tp, VKG_REGION_CONSTANT, sizeof(float) * K * N, b);
    int rc = vk_test_region(&tp, VKG_REGION_OUTPUT, sizeof(float) * M * N, NULL);
    vkg_step *s = vk_test_step(&tp, VKG_KERNEL_MATMUL);
    s->params.matmul = p;
    vk_test_bind(&tp, s, 0, ra, 0);
    vk_test_bind(&tp, s, 1, rb, 0);
    vk_test_bind(&tp, s, 2, rc, 1);

    void *session = NULL;
    vkg_error err = {0};
    assert_int_equal(d->ops->session_new(d->impl, &tp.plan, NULL, NULL, &session, &err), VKG_OK);
    vkg_vk_context *ctx = vk_test_context(d);
    const uint64_t timeout = ctx->timeout_ns; /* what the options gave: the default, 60 s */
    assert_true(timeout == 60000000000ull);
    ctx->timeout_ns = 1000000; /* as timeout_ms = 1 would set it */
    vkg_status st = d->ops->run(session, NULL, &err);
    ctx->timeout_ns = timeout;
    if (st == VKG_OK) {
        fprintf(stderr, "the device ran 0.5 GFLOP within 1 ms: timeout not exercised\n");
    } else {
        assert_int_equal(st, VKG_ERR_TIMEOUT);
        assert_non_null(strstr(err.message, "timeout_ms"));
    }
    /* The session waits for the late run before touching memory, and runs again normally. */
    assert_int_equal(d->ops->read(session, rc, 0, c, sizeof(float) * M * N, &err), VKG_OK);
    assert_int_equal(d->ops->read(session, rc, 0, NULL, sizeof(float) * M * N, &err), VKG_OK);
    assert_int_equal(d->ops->run(session, NULL, &err), VKG_OK);
    assert_int_equal(d->ops->read(session, rc, 0, c, sizeof(float) * M * N, &err), VKG_OK);
    for (int e = 0; e < 64; e++) {   /* spot checks in double */
        int m = (e * 37) % M, n = (e * 101) % N;
        double want = 0;
        for (int k = 0; k < K; k++) want += (double)a[m * K + k] * b[k * N + n];
        assert_true(fabs(c[m * N + n] - want) <= 1e-4 * (1 + fabs(want)));
    }
    d->ops->session_free(session);

    /* A run that times out and is never waited for: freeing the session still waits for it. */
    assert_int_equal(d->ops->session_new(d->impl, &tp.plan, NULL, NULL, &session, &err), VKG_OK);
    ctx->timeout_ns = 1000000;
    st = d->ops->run(session, NULL, &err);
    ctx->timeout_ns = timeout;
    assert_true(st == VKG_OK || st == VKG_ERR_TIMEOUT);
    d->ops->session_free(session);
    assert_false(vkg_device_has_abandoned_work(d));

    free(a), free(b), free(c);

    /* The same with the timeout still short when the session is freed, and 16 times the work
     * (2.1 GFLOP): the run has not finished by then, so the session is abandoned, and the device
     * says that the host memory it was given (the operands, imported where they lie on a
     * host-memory device) must stay; closing it then neither waits nor destroys the device
     * under the running work. */
    enum { M2 = 4 * M, N2 = 4 * N };
    float *a2 = calloc((size_t)M2 * K, sizeof(float)), *b2 = calloc((size_t)K * N2, sizeof(float));
    assert_true(a2 && b2);
    vk_test_plan_init(&tp);
    p.M = M2, p.N = N2, p.b_stride_k = N2, p.c_stride_m = N2;
    ra = vk_test_region(&tp, VKG_REGION_CONSTANT, sizeof(float) * M2 * K, a2);
    rb = vk_test_region(&tp, VKG_REGION_CONSTANT, sizeof(float) * K * N2, b2);
    rc = vk_test_region(&tp, VKG_REGION_OUTPUT, sizeof(float) * M2 * N2, NULL);
    s = vk_test_step(&tp, VKG_KERNEL_MATMUL);
    s->params.matmul = p;
    vk_test_bind(&tp, s, 0, ra, 0);
    vk_test_bind(&tp, s, 1, rb, 0);
    vk_test_bind(&tp, s, 2, rc, 1);
    assert_int_equal(d->ops->session_new(d->impl, &tp.plan, NULL, NULL, &session, &err), VKG_OK);
    ctx->timeout_ns = 1000000;
    st = d->ops->run(session, NULL, &err);
    d->ops->session_free(session);
    ctx->timeout_ns = timeout;
    if (vkg_device_has_abandoned_work(d)) {
        assert_int_equal(st, VKG_ERR_TIMEOUT);
        kept_a = a2, kept_b = b2; /* for the rest of the process, as a model keeps its weights */
    } else {
        fprintf(stderr, "the device ran 2.1 GFLOP within 2 ms: abandoning a session not exercised\n");
        free(a2), free(b2);
    }
    vk_test_close(d);
}

/* --- a run in pieces ----------------------------------------------------------------------------- */

/* Three chained matmuls (x W, then (x W) W, ...) and an add: with the tuning's submit_work at
 * each matmul's multiply-adds the plan goes to the queue as three submissions (the add joins the
 * last), at twice them as two, at a step's worth less as three again (a costlier step alone), and
 * every way the output is the same bits as one submission's, timed or not. */
static void test_run_in_pieces(void **state) {
    (void)state;
    vkg_device *d = vk_test_open();
    vkg_vk_context *ctx = vk_test_context(d);
    const vkg_vk_tuning saved = ctx->tuning;
    enum { M = 5, K = 67 };   /* sizes that divide no tile */
    float x[M * K], w[K * K], want[M * K], got[M * K];
    vk_test_fill(x, M * K, 11, 1.0f);
    vk_test_fill(w, K * K, 12, 0.2f);
    vk_test_plan tp;
    vk_test_plan_init(&tp);
    const int rx = vk_test_region(&tp, VKG_REGION_CONSTANT, sizeof x, x);
    const int rw = vk_test_region(&tp, VKG_REGION_CONSTANT, sizeof w, w);
    const int r[3] = {vk_test_region(&tp, VKG_REGION_ARENA, sizeof x, NULL),
                      vk_test_region(&tp, VKG_REGION_ARENA, sizeof x, NULL),
                      vk_test_region(&tp, VKG_REGION_ARENA, sizeof x, NULL)};
    const int rout = vk_test_region(&tp, VKG_REGION_OUTPUT, sizeof x, NULL);
    for (int i = 0; i < 3; i++) {
        vkg_step *s = vk_test_step(&tp, VKG_KERNEL_MATMUL);
        s->params.matmul = (vkg_matmul_params){.M = M, .N = K, .K = K, .batch0 = 1, .batch1 = 1, .a_stride_m = K,
                                               .a_stride_k = 1, .b_stride_k = K, .b_stride_n = 1, .c_stride_m = K};
        vk_test_bind(&tp, s, 0, i == 0 ? rx : r[i - 1], 0);
        vk_test_bind(&tp, s, 1, rw, 0);
        vk_test_bind(&tp, s, 2, r[i], 1);
    }
    vkg_step *add = vk_test_step(&tp, VKG_KERNEL_BINARY);
    vkg_binary_params *bp = &add->params.binary;
    bp->op = VKG_BINARY_ADD;
    bp->shape[0] = bp->shape[1] = bp->shape[2] = 1, bp->shape[3] = M * K;
    bp->a_strides[3] = bp->b_strides[3] = 1;
    vk_test_bind(&tp, add, 0, r[2], 0);
    vk_test_bind(&tp, add, 1, rx, 0);
    vk_test_bind(&tp, add, 2, rout, 1);

    const uint64_t step = (uint64_t)M * K * K;   /* one matmul's multiply-adds */
    const struct { uint64_t work; int pieces; } cases[] = {
        {UINT64_MAX, 1}, {step, 3}, {2 * step, 2}, {step - 1, 3}, {1, 3},
    };
    vkg_error err = {0};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        ctx->tuning.submit_work = cases[c].work;
        void *session = NULL;
        if (d->ops->session_new(d->impl, &tp.plan, NULL, NULL, &session, &err) != VKG_OK) fail_msg("%s", err.message);
        const vkg_vk_session *vs = session;
        assert_int_equal(vs->n_segments, cases[c].pieces);
        assert_int_equal(vs->segment_first[vs->n_segments], 4);
        for (int timed = 0; timed < 2; timed++) {
            uint64_t begin[4] = {0}, end[4] = {0};
            vkg_step_times times = {.begin_ns = begin, .end_ns = end};
            assert_int_equal(d->ops->run(session, timed ? &times : NULL, &err), VKG_OK);
            assert_int_equal(d->ops->read(session, rout, 0, got, sizeof got, &err), VKG_OK);
            if (c == 0 && !timed) memcpy(want, got, sizeof got);
            assert_memory_equal(got, want, sizeof got);
            for (int i = 0; timed && i < 4; i++) {   /* the steps in order, on one clock */
                assert_true(begin[i] <= end[i]);
                if (i > 0) assert_true(end[i - 1] <= begin[i]);
            }
        }
        d->ops->session_free(session);
    }
    ctx->tuning = saved;
    /* and against the product itself, in double */
    double ref[M * K], cur[M * K];
    for (int i = 0; i < M * K; i++) cur[i] = x[i];
    for (int l = 0; l < 3; l++) {
        for (int m = 0; m < M; m++)
            for (int n = 0; n < K; n++) {
                double sum = 0;
                for (int k = 0; k < K; k++) sum += cur[m * K + k] * w[k * K + n];
                ref[m * K + n] = sum;
            }
        memcpy(cur, ref, sizeof cur);
    }
    for (int i = 0; i < M * K; i++) assert_true(fabs(want[i] - (cur[i] + x[i])) <= 1e-4 * (1 + fabs(cur[i])));
    assert_int_equal(vkg_device_validation_errors(d), 0);
    vk_test_close(d);
}

/* --- barriers ---------------------------------------------------------------------------------- */

/* x -> step 0: y = x + x -> step 1: z = y + x.  Step 1 reads what step 0 wrote. */
static void two_step_plan(vk_test_plan *tp, int *rx, int *ry, int *rz, int barrier) {
    enum { N = 64 };
    vk_test_plan_init(tp);
    *rx = vk_test_region(tp, VKG_REGION_INPUT, N * 4, NULL);
    *ry = vk_test_region(tp, VKG_REGION_ARENA, N * 4, NULL);
    *rz = vk_test_region(tp, VKG_REGION_OUTPUT, N * 4, NULL);
    for (int i = 0; i < 2; i++) {
        vkg_step *s = vk_test_step(tp, VKG_KERNEL_BINARY);
        vkg_binary_params *p = &s->params.binary;
        p->op = VKG_BINARY_ADD;
        p->shape[0] = p->shape[1] = p->shape[2] = 1, p->shape[3] = N;
        p->a_strides[3] = p->b_strides[3] = 1;
        vk_test_bind(tp, s, 0, i == 0 ? *rx : *ry, 0);
        vk_test_bind(tp, s, 1, *rx, 0);
        vk_test_bind(tp, s, 2, i == 0 ? *ry : *rz, 1);
        s->barrier = i == 0 || barrier;
    }
}

static void test_barrier_check(void **state) {
    (void)state;
    vk_test_plan tp;
    int rx, ry, rz;
    two_step_plan(&tp, &rx, &ry, &rz, 1);
    assert_int_equal(vkg_plan_step_hazard(&tp.plan, 1, 0), 1);   /* read after write */
    assert_int_equal(vkg_plan_step_hazard(&tp.plan, 1, 1), 0);   /* after a barrier: none */
    /* two readers of x, writing different regions: no hazard */
    tp.steps[1].bind[0].region = rx;
    assert_int_equal(vkg_plan_step_hazard(&tp.plan, 1, 0), 0);
    /* write after read: step 1 overwrites x, which step 0 read */
    tp.steps[1].bind[2].region = rx;
    assert_int_equal(vkg_plan_step_hazard(&tp.plan, 1, 0), 1);
    /* disjoint byte ranges of one region do not conflict */
    tp.steps[1].bind[0] = (vkg_binding){.region = ry, .offset = 128, .bytes = 128};
    tp.steps[1].bind[1] = (vkg_binding){.region = ry, .offset = 128, .bytes = 128};
    tp.steps[1].bind[2] = (vkg_binding){.region = ry, .offset = 128, .bytes = 128, .writes = 1};
    tp.steps[0].bind[2] = (vkg_binding){.region = ry, .offset = 0, .bytes = 128, .writes = 1};
    assert_int_equal(vkg_plan_step_hazard(&tp.plan, 1, 0), 0);

    /* A plan without the flag still runs correctly; the executor says so once. */
    vkg_device *d = vk_test_open();
    two_step_plan(&tp, &rx, &ry, &rz, 0);
    float x[64], z[64];
    vk_test_fill(x, 64, 9, 1.0f);
    void *host[16] = {0};
    host[rx] = x, host[rz] = z;
    uint64_t before = vkg_device_validation_errors(d);
    vk_test_run(d, &tp.plan, host, NULL);
    assert_int_equal(vkg_device_validation_errors(d) - before, 1);
    d->validation_errors = before;   /* the one expected message */
    for (int i = 0; i < 64; i++) assert_true(z[i] == (x[i] + x[i]) + x[i]);

    /* Profiling gives each step a span on the host clock, the second after the first, inside the
     * host's window around the run. */
    two_step_plan(&tp, &rx, &ry, &rz, 1);
    uint64_t begin[2] = {0, 0}, end[2] = {0, 0};
    vkg_step_times times = {.begin_ns = begin, .end_ns = end};
    uint64_t before_run = vkg_clock_ns();
    vk_test_run(d, &tp.plan, host, &times);
    uint64_t after_run = vkg_clock_ns();
    assert_non_null(times.clock);
    if (vk_test_context(d)->timestamp_valid_bits) {
        assert_true(end[1] > begin[0]);
        assert_true(begin[0] <= end[0] && end[0] <= begin[1] && begin[1] <= end[1]);
        /* calibration may place the GPU a little off the host's window: allow its 1 ms */
        assert_true(begin[0] + 1000000 >= before_run && end[1] <= after_run + 1000000);
        /* Without VK_EXT_calibrated_timestamps the run is placed inside the submit-to-fence window. */
        const int calibrated = vk_test_context(d)->calibrated;
        vk_test_context(d)->calibrated = 0;
        before_run = vkg_clock_ns();
        vk_test_run(d, &tp.plan, host, &times);
        after_run = vkg_clock_ns();
        vk_test_context(d)->calibrated = calibrated;
        assert_non_null(strstr(times.clock, "submit-to-fence window"));
        assert_true(before_run <= begin[0] && begin[0] <= end[0] && end[0] <= begin[1] && begin[1] <= end[1]);
        assert_true(end[1] <= after_run && end[1] > begin[0]);
    }
    for (int i = 0; i < 64; i++) assert_true(z[i] == (x[i] + x[i]) + x[i]);
    vk_test_close(d);
}

/* A plan of one step copying the first element of region r (an arena of `bytes`) onto itself. */
static vkg_step *one_copy(vk_test_plan *tp, uint64_t bytes, int *r) {
    vk_test_plan_init(tp);
    *r = vk_test_region(tp, VKG_REGION_ARENA, bytes, NULL);
    vkg_step *s = vk_test_step(tp, VKG_KERNEL_UNARY);
    s->params.unary.dyn_index = VKG_NO_INDEX;
    for (int i = 0; i < 4; i++) s->params.unary.shape[i] = 1;
    vk_test_bind(tp, s, 0, *r, 0);
    vk_test_bind(tp, s, 1, *r, 1);
    s->bind[0].bytes = s->bind[1].bytes = 4;
    return s;
}

/* A region larger than the device's largest allocation is refused with a message that says so;
 * nothing is allocated and the device stays usable. */
static void test_region_too_large(void **state) {
    (void)state;
    vkg_device *d = vk_test_open();
    vk_test_plan tp;
    int big;
    vkg_step *s = one_copy(&tp, vk_test_context(d)->max_allocation + 4096, &big);
    void *session = NULL;
    vkg_error err = {0};
    assert_int_equal(d->ops->session_new(d->impl, &tp.plan, NULL, NULL, &session, &err), VKG_ERR_UNSUPPORTED);
    assert_null(session);
    assert_non_null(strstr(err.message, "MiB"));
    /* still usable */
    s->bind[0].region = s->bind[1].region = vk_test_region(&tp, VKG_REGION_ARENA, 64, NULL);
    tp.regions[big].bytes = 64;
    void *host[16] = {0};
    vk_test_run(d, &tp.plan, host, NULL);
    vk_test_close(d);
}

/* A device that allows a shader fewer buffers per stage than it binds is refused by name before
 * the driver sees the layout (Vulkan promises 4 storage buffers; a rope that writes the cache
 * binds 6). */
static void test_stage_limits(void **state) {
    (void)state;
    vkg_device *d = vk_test_open();
    VkPhysicalDeviceLimits *limits = &vk_test_context(d)->props.limits;
    const uint32_t storage = limits->maxPerStageDescriptorStorageBuffers;
    vk_test_plan tp;
    int r;
    one_copy(&tp, 64, &r);
    limits->maxPerStageDescriptorStorageBuffers = 1;
    void *session = NULL;
    vkg_error err = {0};
    assert_int_equal(d->ops->session_new(d->impl, &tp.plan, NULL, NULL, &session, &err), VKG_ERR_UNSUPPORTED);
    assert_null(session);
    if (!strstr(err.message, "allows 1,")) fail_msg("%s", err.message);
    limits->maxPerStageDescriptorStorageBuffers = storage;
    void *host[16] = {0};
    vk_test_run(d, &tp.plan, host, NULL);
    vk_test_close(d);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_open_and_limits),
        cmocka_unit_test(test_bad_index),
        cmocka_unit_test(test_auto_passes_software_over),
        cmocka_unit_test(test_devices_print),
        cmocka_unit_test(test_pipeline_cache),
        cmocka_unit_test(test_timeout),
        cmocka_unit_test(test_run_in_pieces),
        cmocka_unit_test(test_barrier_check),
        cmocka_unit_test(test_region_too_large),
        cmocka_unit_test(test_stage_limits),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    if (kept_a) vkg_end_now(failed); /* test_timeout left work running on the driver's threads */
    return failed;
}
