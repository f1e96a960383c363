/* Whole graphs on the Vulkan executor, compiled for the device and compared with the independent
 * reference interpreter (tests/support/ref_eval.c): an MLP block, causal attention over heads,
 * embeddings with invalid ids, boolean and additive masks, a KV cache written at a runtime index
 * over two runs, profiling, the staging path, other shader tunings (tiled matmul, row
 * workgroups of one and of many subgroups), and attention whose scores exceed one binding.  The
 * validation layer must stay silent throughout. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/random_graph.h"
#include "support/ref_eval.h"
#include "support/vk_test.h"
#include "vkgraph.h"

#define MAX_IN 8

/* One graph and what to feed it. */
typedef struct gcase {
    vkg_graph *g;
    int n_in;
    vkg_tensor in[MAX_IN];
    void *data[MAX_IN];        /* owned */
    size_t bytes[MAX_IN];
    int n_idx;
    vkg_tensor idx[MAX_IN];
    int32_t idx_val[MAX_IN];
    float *consts[16];         /* owned constant data */
    int n_consts;
    uint64_t seed;
} gcase;

static void gc_init(gcase *gc, uint64_t seed) {
    memset(gc, 0, sizeof *gc);
    gc->g = vkg_graph_new();
    assert_non_null(gc->g);
    gc->seed = seed;
}

static void gc_free(gcase *gc) {
    for (int i = 0; i < gc->n_in; i++) free(gc->data[i]);
    for (int i = 0; i < gc->n_consts; i++) free(gc->consts[i]);
    vkg_graph_free(gc->g);
}

static vkg_tensor gc_input(gcase *gc, const char *name, int ndim, const int64_t *shape, float scale) {
    vkg_tensor t = vkg_input(gc->g, name, VKG_F32, ndim, shape);
    size_t n = (size_t)vkg_shape_numel(ndim, shape);
    float *x = malloc(n * sizeof *x);
    assert_non_null(x);
    vk_test_fill(x, n, gc->seed++, scale);
    gc->in[gc->n_in] = t, gc->data[gc->n_in] = x, gc->bytes[gc->n_in] = n * sizeof *x;
    gc->n_in++;
    return t;
}

static vkg_tensor gc_ids(gcase *gc, const char *name, int ndim, const int64_t *shape, const int32_t *ids) {
    vkg_tensor t = vkg_input(gc->g, name, VKG_I32, ndim, shape);
    size_t n = (size_t)vkg_shape_numel(ndim, shape);
    int32_t *x = malloc(n * sizeof *x);
    assert_non_null(x);
    memcpy(x, ids, n * sizeof *x);
    gc->in[gc->n_in] = t, gc->data[gc->n_in] = x, gc->bytes[gc->n_in] = n * sizeof *x;
    gc->n_in++;
    return t;
}

static vkg_tensor gc_const(gcase *gc, const char *name, int ndim, const int64_t *shape, float scale, float bias) {
    size_t n = (size_t)vkg_shape_numel(ndim, shape);
    float *x = malloc(n * sizeof *x);
    assert_non_null(x);
    vk_test_fill(x, n, gc->seed++, scale);
    for (size_t i = 0; i < n; i++) x[i] += bias;
    gc->consts[gc->n_consts++] = x;
    return vkg_constant(gc->g, name, VKG_F32, ndim, shape, x);
}

static void gc_index(gcase *gc, vkg_tensor t, int32_t value) {
    for (int i = 0; i < gc->n_idx; i++)
        if (gc->idx[i] == t) {
            gc->idx_val[i] = value;
            return;
        }
    gc->idx[gc->n_idx] = t, gc->idx_val[gc->n_idx] = value;
    gc->n_idx++;
}

/* With a value, the largest binding check_graph compiles for (0: the device's), and whether it
 * leaves ops unfused; and the steps of each kernel family the last plan split an op into. */
static uint64_t max_binding_bytes;
static int unfused;
static int split_steps[VKG_KERNEL_COUNT];

/* Compiles gc for d, runs it `runs` times (state carried over, the indices the same each run
 * unless index_step adds to them), and compares every output and state with the reference. */
static void check_graph(vkg_device *d, gcase *gc, int runs, int32_t index_step, double rtol, double atol,
                        uint64_t *step_ns_sum) {
    assert_int_equal(vkg_graph_status(gc->g), VKG_OK);
    vkg_compile_options opts;
    vkg_compile_options_default(&opts);
    vkg_device_compile_options(d, &opts);
    if (max_binding_bytes) opts.max_binding_bytes = max_binding_bytes;
    if (unfused) opts.fuse = 0, opts.in_place = 0;
    vkg_plan *plan = NULL;
    vkg_error err = {0};
    if (vkg_plan_compile(gc->g, &opts, &plan, &err) != VKG_OK) fail_msg("compile: %s", err.message);
    memset(split_steps, 0, sizeof split_steps);
    for (int i = 0; i < plan->n_steps; i++)
        split_steps[plan->steps[i].kernel] += strchr(plan->steps[i].label, '[') != NULL;
    vkg_session *s = NULL;
    if (vkg_session_new(d, plan, &s, &err) != VKG_OK) fail_msg("session: %s", err.message);
    if (step_ns_sum) assert_int_equal(vkg_session_enable_profiling(s, 1, &err), VKG_OK);

    const vkg_graph *g = gc->g;
    float **prev_state = calloc((size_t)g->n_nodes, sizeof *prev_state);
    assert_non_null(prev_state);
    for (int run = 0; run < runs; run++) {
        for (int i = 0; i < gc->n_in; i++)
            if (vkg_session_set_input(s, gc->in[i], gc->data[i], gc->bytes[i], &err) != VKG_OK)
                fail_msg("set_input: %s", err.message);
        for (int i = 0; i < gc->n_idx; i++)
            assert_int_equal(vkg_session_set_index(s, gc->idx[i], gc->idx_val[i] + run * index_step, &err), VKG_OK);
        if (vkg_session_run(s, &err) != VKG_OK) fail_msg("run: %s", err.message);

        ref_inputs in;
        assert_int_equal(ref_inputs_init(&in, g), 0);
        for (int i = 0; i < gc->n_in; i++) ref_inputs_set(&in, gc->in[i], gc->data[i]);
        for (int i = 0; i < gc->n_idx; i++) ref_inputs_set_index(&in, gc->idx[i], gc->idx_val[i] + run * index_step);
        for (int t = 0; t < g->n_nodes; t++)
            if (prev_state[t]) ref_inputs_set(&in, t, prev_state[t]);
        float **want = NULL;
        assert_int_equal(ref_eval(g, &in, &want), 0);

        for (int t = 0; t < g->n_nodes; t++) {
            const vkg_node *n = &g->nodes[t];
            if (!n->output_name && n->op != VKG_OP_STATE) continue;
            size_t count = (size_t)vkg_tensor_numel(g, t);
            float *got = malloc(count * sizeof *got + 4);
            assert_non_null(got);
            const float *ref;
            if (n->op == VKG_OP_STATE) {
                assert_int_equal(vkg_session_get_state(s, t, got, count * sizeof *got, &err), VKG_OK);
                ref = ref_final_state(g, want, t);
                free(prev_state[t]);
                prev_state[t] = malloc(count * sizeof *got);
                assert_non_null(prev_state[t]);
                memcpy(prev_state[t], ref, count * sizeof *got);
            } else {
                if (vkg_session_get_output(s, vkg_find(g, n->output_name), got, count * sizeof *got, &err) != VKG_OK)
                    fail_msg("get_output %s: %s", n->output_name, err.message);
                ref = want[t];
            }
            int64_t bad = ref_compare(got, ref, (int64_t)count, rtol, atol);
            if (bad >= 0)
                fail_msg("run %d, %s '%s' element %lld: got %.9g, want %.9g", run,
                         n->op == VKG_OP_STATE ? "state" : "output", n->output_name ? n->output_name : n->name,
                         (long long)bad, got[bad], ref[bad]);
            free(got);
        }
        ref_free(g, want);
        ref_inputs_free(&in);
    }
    if (step_ns_sum) {
        /* the device's profile holds the duration of every step of every run */
        FILE *f = tmpfile();
        assert_non_null(f);
        assert_int_equal(vkg_device_profile_print(d, VKG_PROFILE_STEPS, f), VKG_OK);
        *step_ns_sum = (uint64_t)ftell(f);
        fclose(f);
    }
    for (int t = 0; t < g->n_nodes; t++) free(prev_state[t]);
    free(prev_state);
    vkg_session_free(s);
    vkg_plan_free(plan);
}

/* --- graphs ---------------------------------------------------------------------------------- */

/* x [T, C] -> ln -> fc (+b, gelu) -> proj (+b) -> + x */
static void build_mlp(gcase *gc, int64_t T, int64_t C) {
    vkg_graph *g = gc->g;
    vkg_tensor x = gc_input(gc, "x", 2, (int64_t[]){T, C}, 1.0f);
    vkg_tensor gamma = gc_const(gc, "ln.g", 1, (int64_t[]){C}, 0.2f, 1.0f);
    vkg_tensor beta = gc_const(gc, "ln.b", 1, (int64_t[]){C}, 0.2f, 0.0f);
    vkg_tensor w1 = gc_const(gc, "fc.w", 2, (int64_t[]){C, 4 * C}, 0.3f, 0.0f);
    vkg_tensor b1 = gc_const(gc, "fc.b", 1, (int64_t[]){4 * C}, 0.1f, 0.0f);
    vkg_tensor w2 = gc_const(gc, "proj.w", 2, (int64_t[]){4 * C, C}, 0.2f, 0.0f);
    vkg_tensor b2 = gc_const(gc, "proj.b", 1, (int64_t[]){C}, 0.1f, 0.0f);
    vkg_tensor h = vkg_layernorm(g, x, gamma, beta, 1e-5f);
    h = vkg_gelu(g, vkg_matmul(g, h, w1, b1, 0));
    h = vkg_matmul(g, h, w2, b2, 0);
    vkg_output(g, "y", vkg_add(g, h, x));
}

/* Causal self-attention over H heads: x [T, C] -> y [T, C]. */
static void build_attention(gcase *gc, int64_t T, int64_t C, int64_t H) {
    vkg_graph *g = gc->g;
    int64_t hd = C / H;
    vkg_tensor x = gc_input(gc, "x", 2, (int64_t[]){T, C}, 1.0f);
    vkg_tensor wqkv = gc_const(gc, "attn.w", 2, (int64_t[]){C, 3 * C}, 0.3f, 0.0f);
    vkg_tensor bqkv = gc_const(gc, "attn.b", 1, (int64_t[]){3 * C}, 0.1f, 0.0f);
    vkg_tensor wo = gc_const(gc, "proj.w", 2, (int64_t[]){C, C}, 0.3f, 0.0f);
    vkg_tensor qkv = vkg_matmul(g, x, wqkv, bqkv, 0);
    vkg_tensor heads[3];
    for (int i = 0; i < 3; i++) {
        vkg_tensor part = vkg_slice(g, qkv, 1, i * C, C);
        part = vkg_reshape(g, part, 3, (int64_t[]){T, H, hd});
        heads[i] = vkg_permute(g, part, (int[]){1, 0, 2});   /* [H, T, hd] */
    }
    vkg_tensor att = vkg_matmul(g, heads[0], heads[1], VKG_NONE, VKG_TRANSPOSE_B);  /* [H, T, T] */
    att = vkg_scale(g, att, 1.0f / sqrtf((float)hd));
    att = vkg_mask_causal(g, att, 0, VKG_NONE);
    att = vkg_softmax(g, att);
    vkg_output(g, "att", att);
    vkg_tensor y = vkg_matmul(g, att, heads[2], VKG_NONE, 0);                       /* [H, T, hd] */
    y = vkg_reshape(g, vkg_permute(g, y, (int[]){1, 0, 2}), 2, (int64_t[]){T, C});
    vkg_output(g, "y", vkg_matmul(g, y, wo, VKG_NONE, 0));
}

/* Grouped-query attention with its probabilities as outputs, as `vkgraph attention` builds it:
 * q [2, G, Tq, D] against keys [2, 1, Tk, D] shared by the G heads, scaled and masked causally
 * (query i at position i + offset + a runtime index) within a sliding window (0: none).  With Tq = Tk, the probabilities
 * [2, G, T, T] are outputs, again viewed as [2 G, T, T] (a copy), squared (a two-input op) and
 * multiplied by values [2, 1, T, D]; else (rows of keys longer than a binding, which neither a
 * softmax nor a product with V can cut) the masked scores and their square. */
static void build_grouped_probs(gcase *gc, int64_t G, int64_t Tq, int64_t Tk, int64_t D, int32_t offset,
                                uint32_t window, vkg_tensor *index) {
    vkg_graph *g = gc->g;
    vkg_tensor q = gc_input(gc, "q", 4, (int64_t[]){2, G, Tq, D}, 1.0f);
    vkg_tensor k = gc_input(gc, "k", 4, (int64_t[]){2, 1, Tk, D}, 1.0f);
    *index = vkg_index(g, "cached");
    vkg_tensor att = vkg_matmul(g, q, k, VKG_NONE, VKG_TRANSPOSE_B); /* [2, G, Tq, Tk] */
    att = vkg_mask_causal_window(g, vkg_scale(g, att, 0.35f), offset, *index, window);
    if (Tq == Tk) {
        att = vkg_softmax(g, att);
        vkg_output(g, "att.heads", vkg_reshape(g, att, 3, (int64_t[]){2 * G, Tq, Tk}));
        vkg_output(g, "y", vkg_matmul(g, att, gc_input(gc, "v", 4, (int64_t[]){2, 1, Tk, D}, 1.0f), VKG_NONE, 0));
    }
    vkg_output(g, "att", att);
    vkg_output(g, "att.squared", vkg_mul(g, att, att));
}

/* Scores, probabilities and the ops on them larger than one binding run in blocks (batch
 * entries, then rows and columns; a softmax's rows and a causal mask's boxes keep their
 * positions and windows): bindings of 4 alignments (the least a device may have) take a head's
 * 29 x 29 scores in blocks of rows, and a row of 197 keys in two.  Fused and not, on the Vulkan
 * device and on the CPU executor, against the reference. */
/* Grouped-query attention over a KV cache as the attention layers build it: keys and values kv
 * [2, Hkv, T, D] written at a runtime position into the cache [2, Hkv, S, D], then queries q
 * [Hkv, G, T, D] against its keys and values (views [Hkv, 1, S, D]), scaled and masked causally
 * from that position. */
static void build_cache_attention(gcase *gc, int64_t Hkv, int64_t G, int64_t T, int64_t S, int64_t D,
                                  vkg_tensor *index) {
    vkg_graph *g = gc->g;
    vkg_tensor cache = vkg_state(g, "kv_cache", 4, (int64_t[]){2, Hkv, S, D});
    *index = vkg_index(g, "pos");
    vkg_tensor kv = gc_input(gc, "kv", 4, (int64_t[]){2, Hkv, T, D}, 1.0f);
    vkg_tensor q = gc_input(gc, "q", 4, (int64_t[]){Hkv, G, T, D}, 1.0f);
    vkg_tensor written = vkg_write_at(g, cache, kv, 2, 0, *index), half[2];
    for (int h = 0; h < 2; h++)
        half[h] = vkg_reshape(g, vkg_slice(g, written, 0, h, 1), 4, (int64_t[]){Hkv, 1, S, D});
    vkg_tensor att = vkg_matmul(g, q, half[0], VKG_NONE, VKG_TRANSPOSE_B); /* [Hkv, G, T, S] */
    att = vkg_softmax(g, vkg_mask_causal(g, vkg_scale(g, att, 0.35f), 0, *index));
    vkg_output(g, "y", vkg_matmul(g, att, half[1], VKG_NONE, 0));
}

static void test_split_bindings(void **state) {
    vkg_device *devs[2] = {vk_test_device(state), NULL};
    vkg_error err = {0};
    vkg_device_options o = {.cpu_threads = 2, .quiet = 1};
    if (vkg_device_open("cpu", &o, &devs[1], &err) != VKG_OK) fail_msg("cpu: %s", err.message);
    for (int i = 0; i < 4; i++) {
        vkg_compile_options opts;
        vkg_compile_options_default(&opts);
        vkg_device_compile_options(devs[i / 2], &opts);
        max_binding_bytes = 4 * (uint64_t)opts.alignment; /* the least a device may have */
        unfused = i % 2;
        for (int long_rows = 0; long_rows < 2; long_rows++) {
            gcase gc;
            gc_init(&gc, 11);
            vkg_tensor index;
            /* 5 queries at positions 182 to 186 over 197 keys, each seeing the last 40: the mask
             * and the window cut the second half of a row */
            if (long_rows) build_grouped_probs(&gc, 3, 5, 197, 4, 180, 40, &index);
            else build_grouped_probs(&gc, 3, 29, 29, 4, -3, 7, &index);
            gc_index(&gc, index, 2);
            check_graph(devs[i / 2], &gc, 1, 0, 1e-4, 1e-5, NULL);
            /* every family this graph has was split */
            assert_true(split_steps[VKG_KERNEL_MATMUL] > 0 && split_steps[VKG_KERNEL_UNARY] > 0 &&
                        split_steps[VKG_KERNEL_BINARY] > 0);
            assert_true(split_steps[VKG_KERNEL_SOFTMAX] > 0 || long_rows);
            gc_free(&gc);
        }
    }
    max_binding_bytes = 0, unfused = 0;
    vkg_device_free(devs[1]);
    assert_int_equal(vkg_device_validation_errors(devs[0]), 0);
}

/* A KV cache larger than one binding (bindings of a head's keys and a half, 2 KiB here) is written
 * a key or value head at a time and attended over a key/value head at a time, on three runs that
 * fill it; fused (the attention kernel) and not (its matmuls and softmax), on the Vulkan device
 * and on the CPU executor, against the reference. */
static void test_split_cache(void **state) {
    vkg_device *devs[2] = {vk_test_device(state), NULL};
    vkg_error err = {0};
    vkg_device_options o = {.cpu_threads = 2, .quiet = 1};
    if (vkg_device_open("cpu", &o, &devs[1], &err) != VKG_OK) fail_msg("cpu: %s", err.message);
    enum { HKV = 3, G = 2, T = 4, S = 37, D = 8 }; /* a head's keys: 37 x 8 floats, 1184 bytes */
    for (int i = 0; i < 4; i++) {
        vkg_compile_options opts;
        vkg_compile_options_default(&opts);
        vkg_device_compile_options(devs[i / 2], &opts);
        max_binding_bytes = 2048 + (uint64_t)opts.alignment;
        unfused = i % 2;
        gcase gc;
        gc_init(&gc, 12);
        vkg_tensor index;
        build_cache_attention(&gc, HKV, G, T, S, D, &index);
        gc_index(&gc, index, 3);
        check_graph(devs[i / 2], &gc, 3, T, 1e-4, 1e-5, NULL);
        /* the write in 2 planes x 3 heads; the attention in 3 heads, or its two products, scale
         * and mask */
        assert_int_equal(split_steps[VKG_KERNEL_UNARY], unfused ? 4 * HKV : 2 * HKV);
        if (unfused) assert_int_equal(split_steps[VKG_KERNEL_MATMUL], 2 * HKV);
        else assert_int_equal(split_steps[VKG_KERNEL_ATTENTION], HKV);
        gc_free(&gc);
    }
    max_binding_bytes = 0, unfused = 0;
    vkg_device_free(devs[1]);
    assert_int_equal(vkg_device_validation_errors(devs[0]), 0);
}

static void test_mlp(void **state) {
    vkg_device *d = vk_test_device(state);
    gcase gc;
    gc_init(&gc, 1);
    build_mlp(&gc, 5, 24);
    check_graph(d, &gc, 1, 0, 1e-4, 1e-5, NULL);
    gc_free(&gc);
    /* a row count and width that are not multiples of any tile or workgroup */
    gc_init(&gc, 2);
    build_mlp(&gc, 37, 44);
    check_graph(d, &gc, 1, 0, 1e-4, 1e-5, NULL);
    gc_free(&gc);
    assert_int_equal(vkg_device_validation_errors(d), 0);
}

static void test_attention(void **state) {
    vkg_device *d = vk_test_device(state);
    gcase gc;
    gc_init(&gc, 3);
    build_attention(&gc, 7, 32, 4);
    check_graph(d, &gc, 1, 0, 1e-4, 1e-5, NULL);
    gc_free(&gc);
    gc_init(&gc, 4);
    build_attention(&gc, 1, 16, 2);   /* one token: matrix-vector products */
    check_graph(d, &gc, 1, 0, 1e-4, 1e-5, NULL);
    gc_free(&gc);
    assert_int_equal(vkg_device_validation_errors(d), 0);
}

static void test_embedding_and_masks(void **state) {
    vkg_device *d = vk_test_device(state);
    gcase gc;
    gc_init(&gc, 5);
    vkg_graph *g = gc.g;
    int32_t ids[6] = {3, 0, 49, -1, 50, 7};   /* -1 and 50 are outside [0, 50): zero rows */
    vkg_tensor table = gc_const(&gc, "wte", 2, (int64_t[]){50, 16}, 1.0f, 0.0f);
    vkg_tensor id = gc_ids(&gc, "ids", 2, (int64_t[]){2, 3}, ids);
    vkg_tensor pos = gc_const(&gc, "wpe", 2, (int64_t[]){3, 16}, 1.0f, 0.0f);
    vkg_output(g, "emb", vkg_add(g, vkg_embedding(g, table, id), pos));

    vkg_tensor scores = gc_input(&gc, "scores", 3, (int64_t[]){2, 5, 9}, 3.0f);
    float keep[5 * 9];
    for (int i = 0; i < 5 * 9; i++) keep[i] = (i * 7 % 3) != 0 ? 1.0f : 0.0f;
    for (int j = 0; j < 9; j++) keep[2 * 9 + j] = 0.0f;   /* a fully blocked row: zeros */
    gc.consts[gc.n_consts] = malloc(sizeof keep);
    memcpy(gc.consts[gc.n_consts], keep, sizeof keep);
    vkg_tensor mask = vkg_constant(g, "keep", VKG_F32, 2, (int64_t[]){5, 9}, gc.consts[gc.n_consts++]);
    vkg_output(g, "bool", vkg_softmax(g, vkg_mask(g, vkg_scale(g, scores, 0.5f), mask, VKG_MASK_BOOL)));
    vkg_tensor add = gc_const(&gc, "bias", 3, (int64_t[]){1, 1, 9}, 2.0f, 0.0f);
    vkg_output(g, "additive", vkg_softmax(g, vkg_mask(g, vkg_scale(g, scores, 0.25f), add, VKG_MASK_ADDITIVE)));
    vkg_output(g, "relu", vkg_relu(g, vkg_mul(g, scores, add)));
    check_graph(d, &gc, 1, 0, 1e-5, 1e-6, NULL);
    gc_free(&gc);
    assert_int_equal(vkg_device_validation_errors(d), 0);
}

/* A KV cache: each run writes one new key row at position pos (a runtime index) and attends
 * over positions 0..pos; over three runs the state fills up. */
static void test_kv_cache(void **state) {
    vkg_device *d = vk_test_device(state);
    gcase gc;
    gc_init(&gc, 6);
    vkg_graph *g = gc.g;
    const int64_t H = 2, Tmax = 6, hd = 8;
    vkg_tensor cache = vkg_state(g, "k_cache", 3, (int64_t[]){H, Tmax, hd});
    vkg_tensor pos = vkg_index(g, "pos");
    vkg_tensor k = gc_input(&gc, "k", 3, (int64_t[]){H, 1, hd}, 1.0f);
    vkg_tensor q = gc_input(&gc, "q", 3, (int64_t[]){H, 1, hd}, 1.0f);
    vkg_tensor kc = vkg_write_at(g, cache, k, 1, 0, pos);
    vkg_tensor att = vkg_matmul(g, q, kc, VKG_NONE, VKG_TRANSPOSE_B);   /* [H, 1, Tmax] */
    att = vkg_softmax(g, vkg_mask_causal(g, att, 0, pos));
    vkg_output(g, "att", att);
    gc_index(&gc, pos, 0);
    check_graph(d, &gc, 3, 1, 1e-5, 1e-6, NULL);
    gc_free(&gc);
    assert_int_equal(vkg_device_validation_errors(d), 0);
}

static void test_profile_and_staging(void **state) {
    vkg_device *d = vk_test_device(state);
    vkg_vk_tuning saved = vk_test_context(d)->tuning;
    vk_test_context(d)->tuning.force_staging = 1;
    gcase gc;
    gc_init(&gc, 7);
    build_mlp(&gc, 9, 16);
    uint64_t printed = 0;
    check_graph(d, &gc, 2, 0, 1e-4, 1e-5, &printed);
    assert_true(printed > 0);
    gc_free(&gc);

    gc_init(&gc, 8);
    vkg_graph *g = gc.g;
    vkg_tensor cache = vkg_state(g, "cache", 2, (int64_t[]){4, 8});
    vkg_tensor pos = vkg_index(g, "pos");
    vkg_tensor x = gc_input(&gc, "x", 2, (int64_t[]){1, 8}, 1.0f);
    vkg_tensor c2 = vkg_write_at(g, cache, x, 0, 0, pos);
    vkg_output(g, "sum", vkg_scale(g, c2, 2.0f));
    gc_index(&gc, pos, 0);
    check_graph(d, &gc, 4, 1, 0, 0, NULL);
    /* a state set, then reset: zeros filled on the device, read back through staging */
    vkg_compile_options opts;
    vkg_compile_options_default(&opts);
    vkg_device_compile_options(d, &opts);
    vkg_plan *plan = NULL;
    vkg_session *s = NULL;
    vkg_error err = {0};
    assert_int_equal(vkg_plan_compile(g, &opts, &plan, &err), VKG_OK);
    assert_int_equal(vkg_session_new(d, plan, &s, &err), VKG_OK);
    float values[32], back[32];
    for (int i = 0; i < 32; i++) values[i] = (float)i + 0.5f;
    assert_int_equal(vkg_session_set_state(s, cache, values, sizeof values, &err), VKG_OK);
    assert_int_equal(vkg_session_get_state(s, cache, back, sizeof back, &err), VKG_OK);
    assert_memory_equal(back, values, sizeof values);
    assert_int_equal(vkg_session_reset_state(s, &err), VKG_OK);
    assert_int_equal(vkg_session_get_state(s, cache, back, sizeof back, &err), VKG_OK);
    for (int i = 0; i < 32; i++) assert_true(back[i] == 0.0f);
    vkg_session_free(s);
    vkg_plan_free(plan);
    gc_free(&gc);
    vk_test_context(d)->tuning = saved;
    assert_int_equal(vkg_device_validation_errors(d), 0);
}

/* vkg_session_copy_state: the first 2 of each row of 5 from one state [3, 5] into another, the
 * rest of the destination untouched; a state onto itself and blocks past the end refused. */
static void copy_state_case(vkg_device *d) {
    vkg_graph *g = vkg_graph_new();
    assert_non_null(g);
    vkg_tensor a = vkg_state(g, "a", 2, (int64_t[]){3, 5}), b = vkg_state(g, "b", 2, (int64_t[]){3, 5});
    vkg_output(g, "sum", vkg_add(g, a, b)); /* reads both, so both are the plan's */
    vkg_plan *plan = NULL;
    vkg_session *s = NULL;
    vkg_error err = {0};
    assert_int_equal(vkg_plan_compile(g, NULL, &plan, &err), VKG_OK);
    assert_int_equal(vkg_session_new(d, plan, &s, &err), VKG_OK);
    float from[15], to[15], got[15];
    for (int i = 0; i < 15; i++) from[i] = (float)i + 0.5f, to[i] = -1.0f - (float)i;
    assert_int_equal(vkg_session_set_state(s, a, from, sizeof from, &err), VKG_OK);
    assert_int_equal(vkg_session_set_state(s, b, to, sizeof to, &err), VKG_OK);
    assert_int_equal(vkg_session_copy_state(s, a, b, 5 * 4, 3, 2 * 4, &err), VKG_OK);
    assert_int_equal(vkg_session_get_state(s, b, got, sizeof got, &err), VKG_OK);
    for (int i = 0; i < 15; i++) assert_true(got[i] == (i % 5 < 2 ? from[i] : to[i]));
    assert_int_equal(vkg_session_copy_state(s, a, a, 5 * 4, 3, 2 * 4, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_int_equal(vkg_session_copy_state(s, a, b, 5 * 4, 4, 2 * 4, &err), VKG_ERR_INVALID_ARGUMENT);
    vkg_session_free(s);
    vkg_plan_free(plan);
    vkg_graph_free(g);
}

static void test_copy_state(void **state) {
    vkg_device *d = vk_test_device(state);
    copy_state_case(d);            /* states the host maps: a memcpy per block */
    vkg_vk_tuning saved = vk_test_context(d)->tuning;
    vk_test_context(d)->tuning.force_staging = 1;
    copy_state_case(d);            /* unmapped: buffer copies on the device */
    vk_test_context(d)->tuning = saved;
    assert_int_equal(vkg_device_validation_errors(d), 0);
}

/* The same graphs through the other shaders: tiled matmul (storage buffers, shared memory) with
 * split-K matrix-vector and row reductions in one subgroup; odd texel register blocks with row
 * reductions over subgroups of which the last is partial. */
static void test_other_tunings(void **state) {
    vkg_device *d = vk_test_device(state);
    vkg_vk_context *c = vk_test_context(d);
    vkg_vk_tuning saved = c->tuning;
    uint32_t sg = c->subgroup.subgroupSize;
    const struct { int texel; uint32_t row_wg, wg_x, wg_y, tm, tn, bk, mv_wg, mv_cols, mv_tn; } t[] = {
        {0, sg, 8, 8, 4, 4, 8, 64, 16, 4},
        {1, 2 * sg + sg / 2, 4, 8, 3, 12, 4, 8, 8, 4},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        c->tuning.matmul_texel = t[i].texel;
        c->tuning.row_wg = t[i].row_wg;
        c->tuning.mm_wg_x = t[i].wg_x, c->tuning.mm_wg_y = t[i].wg_y;
        c->tuning.mm_tm = t[i].tm, c->tuning.mm_tn = t[i].tn, c->tuning.mm_bk = t[i].bk;
        c->tuning.mv_wg = t[i].mv_wg, c->tuning.mv_cols = t[i].mv_cols, c->tuning.mv_tn = t[i].mv_tn;
        gcase gc;
        gc_init(&gc, 10 + i);
        build_attention(&gc, 11, 24, 3);
        check_graph(d, &gc, 1, 0, 1e-4, 1e-5, NULL);
        gc_free(&gc);
        gc_init(&gc, 20 + i);
        build_mlp(&gc, 1, 40);
        check_graph(d, &gc, 1, 0, 1e-4, 1e-5, NULL);
        gc_free(&gc);
    }
    c->tuning = saved;
    assert_int_equal(vkg_device_validation_errors(d), 0);
}

/* Random graphs (tests/support/random_graph.c: every op, views, splits, states, dead nodes),
 * compiled for the device with and without fusion and in-place reuse, and with small bindings
 * (operands split over several steps), against the reference interpreter. */
static double max_abs(const float *x, int64_t n) {
    double m = 0.0;
    for (int64_t i = 0; i < n; i++)
        if (isfinite(x[i]) && fabs(x[i]) > m) m = fabs(x[i]);
    return m;
}

static int run_random(vkg_device *d, const random_graph *rg, const vkg_compile_options *opts, float **ref,
                      uint64_t seed, int variant) {
    vkg_plan *plan = NULL;
    vkg_error err = {0};
    vkg_status st = vkg_plan_compile(rg->g, opts, &plan, &err);
    if (st == VKG_ERR_UNSUPPORTED) return 0;   /* e.g. a split the compiler cannot make */
    if (st != VKG_OK) fail_msg("seed %llu variant %d: compile: %s", (unsigned long long)seed, variant, err.message);
    vkg_session *s = NULL;
    if (vkg_session_new(d, plan, &s, &err) != VKG_OK)
        fail_msg("seed %llu variant %d: session: %s", (unsigned long long)seed, variant, err.message);
    for (int i = 0; i < rg->n_inputs; i++)
        assert_int_equal(vkg_session_set_input(s, rg->inputs[i], rg->input_data[i], rg->input_bytes[i], &err), VKG_OK);
    for (int i = 0; i < rg->n_indices; i++)
        assert_int_equal(vkg_session_set_index(s, rg->indices[i], rg->index_values[i], &err), VKG_OK);
    if (vkg_session_run(s, &err) != VKG_OK)
        fail_msg("seed %llu variant %d: run: %s", (unsigned long long)seed, variant, err.message);
    for (int i = 0; i < rg->n_outputs + rg->n_states; i++) {
        int is_state = i >= rg->n_outputs;
        vkg_tensor t = is_state ? rg->states[i - rg->n_outputs] : rg->outputs[i];
        int64_t n = vkg_tensor_numel(rg->g, t);
        float *got = malloc((size_t)n * sizeof *got);
        assert_non_null(got);
        st = is_state ? vkg_session_get_state(s, t, got, (size_t)n * 4, &err)
                      : vkg_session_get_output(s, t, got, (size_t)n * 4, &err);
        assert_int_equal(st, VKG_OK);
        const float *want = is_state ? ref_final_state(rg->g, ref, t) : ref[t];
        int64_t bad = ref_compare(got, want, n, 1e-4, 1e-4 * fmax(1.0, max_abs(want, n)));
        if (bad >= 0)
            fail_msg("seed %llu variant %d: %s '%s' element %lld: got %.9g, want %.9g", (unsigned long long)seed,
                     variant, is_state ? "state" : "output", vkg_tensor_name(rg->g, t), (long long)bad, got[bad],
                     want[bad]);
        free(got);
    }
    vkg_session_free(s);
    vkg_plan_free(plan);
    return 1;
}

static void test_random_graphs(void **state) {
    vkg_device *d = vk_test_device(state);
    int runs = 0;
    for (uint64_t seed = 1; seed <= 24; seed++) {
        random_graph rg;
        assert_int_equal(random_graph_build(&rg, seed, 6 + (int)(seed % 30)), 0);
        ref_inputs in;
        assert_int_equal(ref_inputs_init(&in, rg.g), 0);
        random_graph_ref_inputs(&rg, &in);
        float **ref = NULL;
        assert_int_equal(ref_eval(rg.g, &in, &ref), 0);
        ref_inputs_free(&in);
        for (int v = 0; v < 3; v++) {
            vkg_compile_options opts;
            vkg_compile_options_default(&opts);
            vkg_device_compile_options(d, &opts);
            if (v == 1) opts.fuse = 0, opts.in_place = 0;
            if (v == 2) opts.max_binding_bytes = 16 * opts.alignment;
            runs += run_random(d, &rg, &opts, ref, seed, v);
        }
        ref_free(rg.g, ref);
        random_graph_free(&rg);
    }
    assert_true(runs >= 48);
    assert_int_equal(vkg_device_validation_errors(d), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mlp),
        cmocka_unit_test(test_attention),
        cmocka_unit_test(test_embedding_and_masks),
        cmocka_unit_test(test_kv_cache),
        cmocka_unit_test(test_profile_and_staging),
        cmocka_unit_test(test_copy_state),
        cmocka_unit_test(test_other_tunings),
        cmocka_unit_test(test_random_graphs),
        cmocka_unit_test(test_split_bindings),
        cmocka_unit_test(test_split_cache),
    };
    return vk_test_exit_status(cmocka_run_group_tests(tests, vk_test_group_setup, vk_test_group_teardown));
}
