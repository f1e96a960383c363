/* Every op through the public API, end to end: build a graph, compile it, run it on the "cpu"
 * device, read the outputs, and compare with values worked out by hand or with properties the op
 * must have.  Each graph runs under four option sets (default, fuse = 0, in_place = 0, both 0)
 * and every check applies to each; the four must also agree with one another. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vkgraph.h"
#include "support/ref_eval.h"

#define DIMS(...) (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__}
#define IN(g, name, ...) vkg_input(g, name, VKG_F32, DIMS(__VA_ARGS__))
#define CONST(g, name, data, ...) vkg_constant(g, name, VKG_F32, DIMS(__VA_ARGS__), data)

enum { N_SETS = 4, MAX_OUTS = 4 };
static const struct { const char *name; int fuse, in_place; } option_sets[N_SETS] = {
    {"default", 1, 1}, {"fuse=0", 0, 1}, {"in_place=0", 1, 0}, {"fuse=0 in_place=0", 0, 0},
};

/* A value for an input or a runtime index. */
typedef struct feed {
    vkg_tensor t;
    const void *data; /* NULL: t is a runtime index set to index */
    int32_t index;
} feed;

typedef struct runs {
    int n_outs;
    float *out[N_SETS][MAX_OUTS]; /* out[set][k]: output k under option set `set` */
    vkg_memory_stats stats[N_SETS];
} runs;

static int64_t numel(const vkg_graph *g, vkg_tensor t) { return vkg_tensor_numel(g, t); }

static void run_once(vkg_device *dev, const vkg_graph *g, int set, const feed *feeds, int n_feeds,
                     const vkg_tensor *outs, int n_outs, runs *r) {
    vkg_compile_options opts;
    vkg_compile_options_default(&opts);
    vkg_device_compile_options(dev, &opts);
    opts.fuse = option_sets[set].fuse;
    opts.in_place = option_sets[set].in_place;
    vkg_plan *p = NULL;
    vkg_session *s = NULL;
    vkg_error err = {0};
    vkg_status st = vkg_plan_compile(g, &opts, &p, &err);
    if (st == VKG_OK) st = vkg_session_new(dev, p, &s, &err);
    for (int i = 0; i < n_feeds && st == VKG_OK; i++)
        st = feeds[i].data ? vkg_session_set_input(s, feeds[i].t, feeds[i].data, (size_t)numel(g, feeds[i].t) * 4, &err)
                           : vkg_session_set_index(s, feeds[i].t, feeds[i].index, &err);
    if (st == VKG_OK) st = vkg_session_run(s, &err);
    for (int k = 0; k < n_outs && st == VKG_OK; k++) {
        r->out[set][k] = malloc((size_t)numel(g, outs[k]) * sizeof(float));
        assert_non_null(r->out[set][k]);
        st = vkg_session_get_output(s, outs[k], r->out[set][k], (size_t)numel(g, outs[k]) * sizeof(float), &err);
    }
    if (st != VKG_OK) fprintf(stderr, "%s: %s\n", option_sets[set].name, err.message);
    assert_int_equal(st, VKG_OK);
    vkg_plan_memory(p, &r->stats[set]);
    vkg_session_free(s);
    vkg_plan_free(p);
}

/* Runs g under every option set and checks that they agree. */
static runs run_sets(vkg_device *dev, const vkg_graph *g, const feed *feeds, int n_feeds, const vkg_tensor *outs,
                     int n_outs) {
    assert_int_equal(vkg_graph_status(g), VKG_OK);
    runs r = {.n_outs = n_outs};
    for (int set = 0; set < N_SETS; set++) run_once(dev, g, set, feeds, n_feeds, outs, n_outs, &r);
    for (int set = 1; set < N_SETS; set++)
        for (int k = 0; k < n_outs; k++) {
            int64_t bad = ref_compare(r.out[set][k], r.out[0][k], numel(g, outs[k]), 1e-5, 1e-6);
            if (bad >= 0)
                fprintf(stderr, "%s: output %d element %lld is %g, default gives %g\n", option_sets[set].name, k,
                        (long long)bad, r.out[set][k][bad], r.out[0][k][bad]);
            assert_true(bad < 0);
        }
    return r;
}

static void runs_free(runs *r) {
    for (int set = 0; set < N_SETS; set++)
        for (int k = 0; k < r->n_outs; k++) free(r->out[set][k]);
}

/* Marks outs[k] as the output "o<k>". */
static void mark_outputs(vkg_graph *g, const vkg_tensor *outs, int n) {
    for (int k = 0; k < n; k++) {
        char name[16];
        snprintf(name, sizeof name, "o%d", k);
        assert_int_equal(vkg_output(g, name, outs[k]), VKG_OK);
    }
}

static void assert_close(const float *got, const float *want, int n, double tol) {
    for (int i = 0; i < n; i++) {
        if (!(fabs((double)got[i] - (double)want[i]) <= tol)) {
            fprintf(stderr, "element %d: got %.7g, want %.7g\n", i, got[i], want[i]);
            fail();
        }
    }
}

/* ---- matmul -------------------------------------------------------------------------------- */

static void test_matmul_by_hand(void **state) {
    vkg_device *dev = *state;
    static const float A[6] = {1, 2, 3, 4, 5, 6}, B[6] = {7, 8, 9, 10, 11, 12};
    static const float At[6] = {1, 4, 2, 5, 3, 6}, Bt[6] = {7, 9, 11, 8, 10, 12}, bias[2] = {1, -1};
    static const float want[4] = {58, 64, 139, 154}, want_bias[4] = {59, 63, 140, 153};
    vkg_graph *g = vkg_graph_new();
    vkg_tensor a = IN(g, "a", 2, 3), b = CONST(g, "b", B, 3, 2);
    vkg_tensor at = IN(g, "at", 3, 2), bt = CONST(g, "bt", Bt, 2, 3), z = CONST(g, "bias", bias, 2);
    vkg_tensor outs[4] = {
        vkg_matmul(g, a, b, VKG_NONE, 0),
        vkg_matmul(g, at, b, VKG_NONE, VKG_TRANSPOSE_A),
        vkg_matmul(g, at, bt, VKG_NONE, VKG_TRANSPOSE_A | VKG_TRANSPOSE_B),
        vkg_matmul(g, a, bt, z, VKG_TRANSPOSE_B),
    };
    mark_outputs(g, outs, 4);
    feed feeds[2] = {{a, A, 0}, {at, At, 0}};
    runs r = run_sets(dev, g, feeds, 2, outs, 4);
    for (int set = 0; set < N_SETS; set++)
        for (int k = 0; k < 4; k++) assert_close(r.out[set][k], k == 3 ? want_bias : want, 4, 1e-4);
    runs_free(&r);
    vkg_graph_free(g);
}

/* Batch dimensions broadcast numpy-style, also through views, checked against the reference. */
static void test_matmul_batch_broadcast(void **state) {
    vkg_device *dev = *state;
    float a_data[2 * 1 * 2 * 3], b_data[3 * 3 * 2], x_data[2 * 2 * 3], w[3 * 2] = {1, 0, 0, 1, 1, 1};
    vkg_rng rng;
    vkg_rng_seed(&rng, 7);
    vkg_rng_fill_normal(&rng, a_data, 12, 1.0f);
    vkg_rng_fill_normal(&rng, b_data, 18, 1.0f);
    vkg_rng_fill_normal(&rng, x_data, 12, 1.0f);
    vkg_graph *g = vkg_graph_new();
    vkg_tensor a = IN(g, "a", 2, 1, 2, 3), b = IN(g, "b", 3, 3, 2), x = IN(g, "x", 2, 2, 3);
    vkg_tensor xt = vkg_transpose(g, x, 1, 2);
    vkg_tensor outs[3] = {
        vkg_matmul(g, a, b, VKG_NONE, 0),                                  /* [2, 3, 2, 2] */
        vkg_matmul(g, x, CONST(g, "w", w, 3, 2), VKG_NONE, 0),              /* a shared weight */
        vkg_matmul(g, xt, xt, VKG_NONE, VKG_TRANSPOSE_A),                  /* x @ x^T through a view */
    };
    int64_t shape[VKG_MAX_DIMS];
    assert_int_equal(vkg_tensor_shape(g, outs[0], shape), 4);
    assert_true(shape[0] == 2 && shape[1] == 3 && shape[2] == 2 && shape[3] == 2);
    mark_outputs(g, outs, 3);
    feed feeds[3] = {{a, a_data, 0}, {b, b_data, 0}, {x, x_data, 0}};
    runs r = run_sets(dev, g, feeds, 3, outs, 3);
    /* by hand: batch (1, 2) of the first product is a[1, 0] @ b[2] */
    for (int m = 0; m < 2; m++)
        for (int n = 0; n < 2; n++) {
            double acc = 0;
            for (int k = 0; k < 3; k++) acc += a_data[6 + m * 3 + k] * b_data[12 + k * 2 + n];
            assert_float_equal(r.out[0][0][(1 * 3 + 2) * 4 + m * 2 + n], acc, 1e-5);
        }
    /* x[1] @ w: columns x0 + x2 and x1 + x2 */
    assert_float_equal(r.out[0][1][4 + 2], x_data[9] + x_data[11], 1e-5);
    assert_float_equal(r.out[0][1][4 + 3], x_data[10] + x_data[11], 1e-5);
    ref_inputs in;
    float **ref;
    assert_int_equal(ref_inputs_init(&in, g), 0);
    ref_inputs_set(&in, a, a_data);
    ref_inputs_set(&in, b, b_data);
    ref_inputs_set(&in, x, x_data);
    assert_int_equal(ref_eval(g, &in, &ref), 0);
    for (int set = 0; set < N_SETS; set++)
        for (int k = 0; k < 3; k++)
            assert_true(ref_compare(r.out[set][k], ref[outs[k]], numel(g, outs[k]), 1e-5, 1e-5) < 0);
    ref_free(g, ref);
    ref_inputs_free(&in);
    runs_free(&r);
    vkg_graph_free(g);
}

/* ---- element-wise -------------------------------------------------------------------------- */

static void test_broadcasting(void **state) {
    vkg_device *dev = *state;
    static const float x23[6] = {1, 2, 3, 4, 5, 6}, v3[3] = {10, 20, 30}, c21[2] = {1, 2};
    static const float x413[12] = {0, 1, 2, 10, 11, 12, 20, 21, 22, 30, 31, 32}, y23[6] = {100, 200, 300, 400, 500, 600};
    vkg_graph *g = vkg_graph_new();
    vkg_tensor a = IN(g, "a", 2, 3), b = CONST(g, "b", v3, 3), c = CONST(g, "c", c21, 2, 1);
    vkg_tensor d = CONST(g, "d", v3, 1, 3), e = IN(g, "e", 4, 1, 3), f = CONST(g, "f", y23, 2, 3);
    vkg_tensor outs[4] = {vkg_add(g, a, b), vkg_add(g, c, d), vkg_add(g, e, f), vkg_mul(g, b, a)};
    mark_outputs(g, outs, 4);
    int64_t shape[VKG_MAX_DIMS];
    assert_int_equal(vkg_tensor_shape(g, outs[2], shape), 3);
    assert_true(shape[0] == 4 && shape[1] == 2 && shape[2] == 3);
    feed feeds[2] = {{a, x23, 0}, {e, x413, 0}};
    runs r = run_sets(dev, g, feeds, 2, outs, 4);
    static const float want0[6] = {11, 22, 33, 14, 25, 36}, want1[6] = {11, 21, 31, 12, 22, 32};
    static const float want3[6] = {10, 40, 90, 40, 100, 180};
    float want2[24];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 2; j++)
            for (int k = 0; k < 3; k++) want2[(i * 2 + j) * 3 + k] = x413[i * 3 + k] + y23[j * 3 + k];
    for (int set = 0; set < N_SETS; set++) {
        assert_close(r.out[set][0], want0, 6, 0);
        assert_close(r.out[set][1], want1, 6, 0);
        assert_close(r.out[set][2], want2, 24, 0);
        assert_close(r.out[set][3], want3, 6, 0);
    }
    runs_free(&r);
    vkg_graph_free(g);
}

static void test_unary(void **state) {
    vkg_device *dev = *state;
    static const float x[5] = {1, -1, 0, 2, -3};
    vkg_graph *g = vkg_graph_new();
    vkg_tensor in = IN(g, "x", 5);
    vkg_tensor outs[3] = {vkg_gelu(g, in), vkg_relu(g, in), vkg_scale(g, in, -2.5f)};
    mark_outputs(g, outs, 3);
    feed feeds[1] = {{in, x, 0}};
    runs r = run_sets(dev, g, feeds, 1, outs, 3);
    static const float gelu[5] = {0.841192f, -0.158808f, 0.0f, 1.954598f, -0.0036374f};
    static const float relu[5] = {1, 0, 0, 2, 0}, scaled[5] = {-2.5f, 2.5f, 0, -5, 7.5f};
    for (int set = 0; set < N_SETS; set++) {
        assert_close(r.out[set][0], gelu, 5, 2e-6);
        assert_close(r.out[set][1], relu, 5, 0);
        assert_close(r.out[set][2], scaled, 5, 0);
    }
    runs_free(&r);
    vkg_graph_free(g);
}

/* gelu_erf, quick_gelu and silu alone, and an activation after a matmul: fused into its epilogue
 * by default, a step of its own without fusion (the plan's label says which). */
static void test_activations(void **state) {
    vkg_device *dev = *state;
    static const float x[5] = {1, -1, 0, 2, -3}, one[1] = {1};
    vkg_graph *g = vkg_graph_new();
    vkg_tensor in = IN(g, "x", 5), row = CONST(g, "row", x, 1, 5), ones = IN(g, "one", 1, 1);
    vkg_tensor outs[4] = {vkg_gelu_erf(g, in), vkg_quick_gelu(g, in), vkg_silu(g, in),
                          vkg_gelu_erf(g, vkg_matmul(g, ones, row, VKG_NONE, 0))};
    mark_outputs(g, outs, 4);
    feed feeds[2] = {{in, x, 0}, {ones, one, 0}};
    runs r = run_sets(dev, g, feeds, 2, outs, 4);
    /* 0.5 x erfc(-x / sqrt 2), x / (1 + exp(-1.702 x)), x / (1 + exp(-x)), in double */
    static const float gelu_erf[5] = {0.8413447f, -0.1586553f, 0.0f, 1.9545f, -0.004049694f};
    static const float quick[5] = {0.8457958f, -0.1542042f, 0.0f, 1.935659f, -0.01807131f};
    static const float silu[5] = {0.7310586f, -0.2689414f, 0.0f, 1.761594f, -0.1422776f};
    for (int set = 0; set < N_SETS; set++) {
        assert_close(r.out[set][0], gelu_erf, 5, 1e-6);
        assert_close(r.out[set][1], quick, 5, 1e-6);
        assert_close(r.out[set][2], silu, 5, 1e-6);
        assert_close(r.out[set][3], gelu_erf, 5, 1e-6);
    }
    runs_free(&r);

    /* The plan names the fused activation. */
    vkg_plan *p = NULL;
    vkg_error err = {0};
    assert_int_equal(vkg_plan_compile(g, NULL, &p, &err), VKG_OK);
    char text[4096] = "";
    FILE *f = fmemopen(text, sizeof text - 1, "w");
    assert_non_null(f);
    assert_int_equal(vkg_plan_dump(p, f, VKG_DUMP_TEXT), VKG_OK);
    fclose(f);
    assert_non_null(strstr(text, "matmul+gelu_erf"));
    assert_int_equal(vkg_plan_step_count(p), 4);
    vkg_plan_free(p);
    vkg_graph_free(g);
}

/* ---- attention ----------------------------------------------------------------------------- */

/* The lesson's example: one query against three keys. */
static void test_softmax_lesson(void **state) {
    vkg_device *dev = *state;
    static const float Q[2] = {1, 0}, K[6] = {1, 0, 0, 1, 0.7f, 0.7f}, V[6] = {10, 0, 0, 10, 5, 5};
    vkg_graph *g = vkg_graph_new();
    vkg_tensor q = IN(g, "Q", 1, 2), k = CONST(g, "K", K, 3, 2), v = CONST(g, "V", V, 3, 2);
    vkg_tensor scores = vkg_matmul(g, q, k, VKG_NONE, VKG_TRANSPOSE_B);
    vkg_tensor weights = vkg_softmax(g, vkg_scale(g, scores, 1.0f / sqrtf(2.0f)));
    vkg_tensor outs[2] = {weights, vkg_matmul(g, weights, v, VKG_NONE, 0)};
    mark_outputs(g, outs, 2);
    feed feeds[1] = {{q, Q, 0}};
    runs r = run_sets(dev, g, feeds, 1, outs, 2);
    for (int set = 0; set < N_SETS; set++) {
        const float *w = r.out[set][0], *o = r.out[set][1];
        assert_float_equal(w[0] + w[1] + w[2], 1.0, 1e-6);
        assert_float_equal(roundf(w[0] * 1000) / 1000, 0.434, 1e-6);
        assert_float_equal(roundf(w[1] * 1000) / 1000, 0.214, 1e-6);
        assert_float_equal(roundf(w[2] * 1000) / 1000, 0.351, 1e-6);
        assert_float_equal(roundf(o[0] * 10) / 10, 6.1, 1e-6);
        assert_float_equal(roundf(o[1] * 10) / 10, 3.9, 1e-6);
    }
    runs_free(&r);
    vkg_graph_free(g);
}

/* Causal masks with offsets 0 and 2: weight exactly 0 above the (shifted) diagonal, rows sum to
 * 1; the masked scores themselves hold -inf there. */
static void test_causal(void **state) {
    vkg_device *dev = *state;
    float x[3 * 5];
    vkg_rng rng;
    vkg_rng_seed(&rng, 3);
    vkg_rng_fill_normal(&rng, x, 15, 1.0f);
    for (int offset = 0; offset <= 2; offset += 2) {
        vkg_graph *g = vkg_graph_new();
        vkg_tensor in = IN(g, "scores", 3, 5), masked = vkg_mask_causal(g, in, offset, VKG_NONE);
        vkg_tensor outs[2] = {vkg_softmax(g, vkg_scale(g, masked, 0.5f)), vkg_copy(g, masked)};
        assert_int_equal(vkg_output(g, "weights", outs[0]), VKG_OK);
        assert_int_equal(vkg_output(g, "masked", outs[1]), VKG_OK);
        feed feeds[1] = {{in, x, 0}};
        runs r = run_sets(dev, g, feeds, 1, outs, 2);
        for (int set = 0; set < N_SETS; set++)
            for (int i = 0; i < 3; i++) {
                double sum = 0;
                for (int j = 0; j < 5; j++) {
                    float w = r.out[set][0][i * 5 + j], m = r.out[set][1][i * 5 + j];
                    if (j > i + offset) {
                        assert_true(w == 0.0f);
                        assert_true(isinf(m) && m < 0);
                    } else {
                        assert_true(w > 0.0f);
                        assert_true(m == x[i * 5 + j]);
                    }
                    sum += w;
                }
                assert_float_equal(sum, 1.0, 1e-6);
            }
        runs_free(&r);
        vkg_graph_free(g);
    }
}

/* The offset can come from a runtime index: one plan, several positions. */
static void test_causal_runtime_index(void **state) {
    vkg_device *dev = *state;
    static const float x[2 * 6] = {0};
    vkg_graph *g = vkg_graph_new();
    vkg_tensor in = IN(g, "scores", 2, 6), p = vkg_index(g, "pos");
    vkg_tensor outs[1] = {vkg_softmax(g, vkg_mask_causal(g, in, 1, p))};
    mark_outputs(g, outs, 1);
    for (int32_t pos = 0; pos <= 4; pos += 2) {
        feed feeds[2] = {{in, x, 0}, {p, NULL, pos}};
        runs r = run_sets(dev, g, feeds, 2, outs, 1);
        for (int set = 0; set < N_SETS; set++)
            for (int i = 0; i < 2; i++) {
                int visible = i + 2 + pos < 6 ? i + 2 + pos : 6; /* columns j <= i + 1 + pos */
                for (int j = 0; j < 6; j++)
                    assert_float_equal(r.out[set][0][i * 6 + j], j < visible ? 1.0f / (float)visible : 0.0f, 1e-6);
            }
        runs_free(&r);
    }
    vkg_graph_free(g);
}

/* A boolean mask gives weight exactly 0; a row masked entirely gives zeros, not NaN; an
 * additive mask shifts the scores. */
static void test_masks(void **state) {
    vkg_device *dev = *state;
    static const float x[3 * 4] = {1, 2, 3, 4, 0, 0, 0, 0, 5, 1, 2, 9};
    static const float keep[3 * 4] = {1, 0, 1, 1, 1, 1, 0, 1, 0, 0, 0, 0};
    static const float add[4] = {0, 0.69314718f, 0, -1e30f};
    vkg_graph *g = vkg_graph_new();
    vkg_tensor in = IN(g, "scores", 3, 4);
    vkg_tensor outs[3] = {
        vkg_softmax(g, vkg_mask(g, in, CONST(g, "keep", keep, 3, 4), VKG_MASK_BOOL)),
        vkg_softmax(g, vkg_mask(g, vkg_scale(g, in, 0.0f), CONST(g, "add", add, 4), VKG_MASK_ADDITIVE)),
        vkg_softmax(g, vkg_mask_causal(g, in, -1, VKG_NONE)), /* row 0 sees nothing */
    };
    mark_outputs(g, outs, 3);
    feed feeds[1] = {{in, x, 0}};
    runs r = run_sets(dev, g, feeds, 1, outs, 3);
    for (int set = 0; set < N_SETS; set++) {
        const float *b = r.out[set][0], *a = r.out[set][1], *c = r.out[set][2];
        assert_true(b[1] == 0.0f && b[6] == 0.0f);
        for (int j = 0; j < 4; j++) assert_true(b[8 + j] == 0.0f && c[j] == 0.0f);
        assert_float_equal(b[0] + b[2] + b[3], 1.0, 1e-6);
        assert_float_equal(b[4], 1.0f / 3.0f, 1e-6);
        /* additive on zero scores: weights 1 : 2 : 1 : 0 */
        assert_float_equal(a[0], 0.25, 1e-6);
        assert_float_equal(a[1], 0.5, 1e-6);
        assert_float_equal(a[3], 0.0, 1e-6);
        assert_float_equal(c[4], 1.0, 1e-6); /* row 1 sees column 0 only */
    }
    runs_free(&r);
    vkg_graph_free(g);
}

/* ---- layernorm, embedding ------------------------------------------------------------------ */

static void test_layernorm(void **state) {
    vkg_device *dev = *state;
    float x[3 * 8];
    static const float gamma[8] = {1, 2, 3, 4, -1, -2, 0.5f, 0}, beta[8] = {0, 1, 0, 1, 0, 1, 0, 1};
    static const float hand[4] = {1, 2, 3, 4};
    vkg_rng rng;
    vkg_rng_seed(&rng, 11);
    vkg_rng_fill_normal(&rng, x, 24, 3.0f);
    vkg_graph *g = vkg_graph_new();
    vkg_tensor in = IN(g, "x", 3, 8), h = IN(g, "h", 4);
    vkg_tensor outs[3] = {
        vkg_layernorm(g, in, VKG_NONE, VKG_NONE, 1e-5f),
        vkg_layernorm(g, in, CONST(g, "gamma", gamma, 8), CONST(g, "beta", beta, 8), 1e-5f),
        vkg_layernorm(g, h, VKG_NONE, VKG_NONE, 0.0f),
    };
    mark_outputs(g, outs, 3);
    feed feeds[2] = {{in, x, 0}, {h, hand, 0}};
    runs r = run_sets(dev, g, feeds, 2, outs, 3);
    static const float hand_want[4] = {-1.3416408f, -0.4472136f, 0.4472136f, 1.3416408f};
    for (int set = 0; set < N_SETS; set++) {
        for (int row = 0; row < 3; row++) {
            const float *y = r.out[set][0] + row * 8, *z = r.out[set][1] + row * 8;
            double mean = 0, var = 0;
            for (int j = 0; j < 8; j++) mean += y[j];
            mean /= 8;
            for (int j = 0; j < 8; j++) var += (y[j] - mean) * (y[j] - mean);
            assert_float_equal(mean, 0.0, 1e-6);
            assert_float_equal(var / 8, 1.0, 1e-4); /* biased variance, eps small beside it */
            for (int j = 0; j < 8; j++) assert_float_equal(z[j], gamma[j] * y[j] + beta[j], 1e-5);
        }
        assert_close(r.out[set][2], hand_want, 4, 1e-6);
    }
    runs_free(&r);
    vkg_graph_free(g);
}

static void test_embedding(void **state) {
    vkg_device *dev = *state;
    static const float table[4 * 3] = {0, 1, 2, 10, 11, 12, 20, 21, 22, 30, 31, 32};
    static const int32_t id_data[5] = {2, -1, 4, 0, 3};
    vkg_graph *g = vkg_graph_new();
    vkg_tensor ids = vkg_input(g, "ids", VKG_I32, DIMS(5));
    vkg_tensor outs[1] = {vkg_embedding(g, CONST(g, "wte", table, 4, 3), ids)};
    mark_outputs(g, outs, 1);
    feed feeds[1] = {{ids, id_data, 0}};
    runs r = run_sets(dev, g, feeds, 1, outs, 1);
    static const float want[15] = {20, 21, 22, 0, 0, 0, 0, 0, 0, 0, 1, 2, 30, 31, 32};
    for (int set = 0; set < N_SETS; set++) assert_close(r.out[set][0], want, 15, 0);
    runs_free(&r);
    vkg_graph_free(g);
}

/* ---- data movement ------------------------------------------------------------------------- */

static void test_views(void **state) {
    vkg_device *dev = *state;
    float x[2 * 3 * 4];
    for (int i = 0; i < 24; i++) x[i] = (float)i;
    vkg_graph *g = vkg_graph_new();
    vkg_tensor in = IN(g, "x", 2, 3, 4);
    vkg_tensor perm = vkg_permute(g, in, (int[]){2, 0, 1});                  /* [4, 2, 3] */
    vkg_tensor outs[4] = {
        vkg_reshape(g, in, DIMS(-1, 8)),                                      /* [3, 8] */
        perm,
        vkg_slice(g, vkg_transpose(g, in, 0, 2), 0, 1, 2),                    /* [2, 3, 2] of [4, 3, 2] */
        vkg_add(g, vkg_concat(g, vkg_slice(g, in, 2, 0, 1), vkg_slice(g, in, 2, 3, 1), 2), vkg_copy(g, vkg_slice(g, in, 2, 1, 2))),
    };
    mark_outputs(g, outs, 4);
    feed feeds[1] = {{in, x, 0}};
    runs r = run_sets(dev, g, feeds, 1, outs, 4);
    for (int set = 0; set < N_SETS; set++) {
        assert_close(r.out[set][0], x, 24, 0); /* a reshape keeps the order */
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 2; j++)
                for (int k = 0; k < 3; k++) assert_true(r.out[set][1][(i * 2 + j) * 3 + k] == x[(j * 3 + k) * 4 + i]);
        /* transpose(0, 2)[a, b, c] = x[c, b, a]; slice a in [1, 3) */
        for (int a = 0; a < 2; a++)
            for (int b = 0; b < 3; b++)
                for (int c = 0; c < 2; c++) assert_true(r.out[set][2][(a * 3 + b) * 2 + c] == x[(c * 3 + b) * 4 + a + 1]);
        /* [x0 | x3] + [x1, x2] along the last axis */
        for (int row = 0; row < 6; row++) {
            assert_true(r.out[set][3][row * 2] == x[row * 4] + x[row * 4 + 1]);
            assert_true(r.out[set][3][row * 2 + 1] == x[row * 4 + 3] + x[row * 4 + 2]);
        }
    }
    runs_free(&r);
    vkg_graph_free(g);
}

/* write_at into a KV-cache-like state at a runtime position; the state is read through the handle
 * write_at returns, and with vkg_session_get_state, across two runs of one session. */
static void test_state_write_at(void **state) {
    vkg_device *dev = *state;
    static const float ones[4] = {1, 1, 1, 1}, rows[2][2] = {{1, 2}, {3, 4}};
    for (int set = 0; set < N_SETS; set++) {
        vkg_graph *g = vkg_graph_new();
        vkg_tensor cache = vkg_state(g, "cache", DIMS(4, 2)), x = IN(g, "x", 1, 2), pos = vkg_index(g, "pos");
        vkg_tensor after = vkg_write_at(g, cache, x, 0, 0, pos);
        vkg_tensor sum = vkg_matmul(g, CONST(g, "ones", ones, 1, 4), after, VKG_NONE, 0); /* column sums */
        assert_int_equal(vkg_output(g, "sum", sum), VKG_OK);
        vkg_compile_options opts;
        vkg_compile_options_default(&opts);
        vkg_device_compile_options(dev, &opts);
        opts.fuse = option_sets[set].fuse;
        opts.in_place = option_sets[set].in_place;
        vkg_plan *p = NULL;
        vkg_session *s = NULL;
        vkg_error err;
        assert_int_equal(vkg_plan_compile(g, &opts, &p, &err), VKG_OK);
        assert_int_equal(vkg_session_new(dev, p, &s, &err), VKG_OK);
        float out[2], cache_now[8];
        for (int run = 0; run < 2; run++) {
            assert_int_equal(vkg_session_set_input(s, x, rows[run], sizeof rows[run], &err), VKG_OK);
            assert_int_equal(vkg_session_set_index(s, pos, run, &err), VKG_OK);
            assert_int_equal(vkg_session_run(s, &err), VKG_OK);
            assert_int_equal(vkg_session_get_output(s, sum, out, sizeof out, &err), VKG_OK);
        }
        assert_true(out[0] == 4.0f && out[1] == 6.0f);
        assert_int_equal(vkg_session_get_state(s, cache, cache_now, sizeof cache_now, &err), VKG_OK);
        static const float want[8] = {1, 2, 3, 4, 0, 0, 0, 0};
        assert_close(cache_now, want, 8, 0);
        assert_int_equal(vkg_session_get_state(s, cache, cache_now, 4, &err), VKG_ERR_INVALID_ARGUMENT);
        /* a reset empties the cache: a run at position 3 sees only its own row */
        assert_int_equal(vkg_session_reset_state(s, &err), VKG_OK);
        assert_int_equal(vkg_session_set_index(s, pos, 3, &err), VKG_OK);
        assert_int_equal(vkg_session_run(s, &err), VKG_OK);
        assert_int_equal(vkg_session_get_output(s, sum, out, sizeof out, &err), VKG_OK);
        assert_true(out[0] == 3.0f && out[1] == 4.0f);
        assert_int_equal(vkg_session_get_state(s, cache, cache_now, sizeof cache_now, &err), VKG_OK);
        static const float want_reset[8] = {0, 0, 0, 0, 0, 0, 3, 4};
        assert_close(cache_now, want_reset, 8, 0);
        assert_int_equal(vkg_session_get_state(s, cache, NULL, sizeof cache_now, &err), VKG_OK); /* zeroes */
        assert_int_equal(vkg_session_get_state(s, cache, cache_now, sizeof cache_now, &err), VKG_OK);
        for (int i = 0; i < 8; i++) assert_true(cache_now[i] == 0.0f);
        vkg_session_free(s);
        vkg_plan_free(p);
        vkg_graph_free(g);
    }
}

/* A transformer block: fusion and in-place change the steps and the memory, not the values. */
static void test_fusion_in_place_same(void **state) {
    vkg_device *dev = *state;
    enum { T = 5, C = 8, H = 16 };
    static float xs[T * C], w1[C * H], b1[H], w2[H * C], wq[C * C], g1[C], z1[C];
    vkg_rng rng;
    vkg_rng_seed(&rng, 5);
    vkg_rng_fill_normal(&rng, xs, T * C, 1.0f);
    vkg_rng_fill_normal(&rng, w1, C * H, 0.3f);
    vkg_rng_fill_normal(&rng, b1, H, 0.1f);
    vkg_rng_fill_normal(&rng, w2, H * C, 0.3f);
    vkg_rng_fill_normal(&rng, wq, C * C, 0.3f);
    vkg_rng_fill_normal(&rng, g1, C, 1.0f);
    vkg_rng_fill_normal(&rng, z1, C, 0.1f);
    vkg_graph *g = vkg_graph_new();
    vkg_tensor x = IN(g, "x", T, C);
    vkg_tensor h = vkg_layernorm(g, x, CONST(g, "g1", g1, C), CONST(g, "z1", z1, C), 1e-5f);
    vkg_tensor q = vkg_matmul(g, h, CONST(g, "wq", wq, C, C), VKG_NONE, 0);
    vkg_tensor att = vkg_softmax(g, vkg_mask_causal(g, vkg_scale(g, vkg_matmul(g, q, h, VKG_NONE, VKG_TRANSPOSE_B), 0.35f), 0, VKG_NONE));
    vkg_tensor x1 = vkg_add(g, x, vkg_matmul(g, att, h, VKG_NONE, 0));
    vkg_tensor m = vkg_gelu(g, vkg_add(g, vkg_matmul(g, x1, CONST(g, "w1", w1, C, H), VKG_NONE, 0), CONST(g, "b1", b1, H)));
    vkg_tensor outs[1] = {vkg_add(g, vkg_matmul(g, m, CONST(g, "w2", w2, H, C), VKG_NONE, 0), x1)};
    mark_outputs(g, outs, 1);
    feed feeds[1] = {{x, xs, 0}};
    runs r = run_sets(dev, g, feeds, 1, outs, 1);
    ref_inputs in;
    float **ref;
    assert_int_equal(ref_inputs_init(&in, g), 0);
    ref_inputs_set(&in, x, xs);
    assert_int_equal(ref_eval(g, &in, &ref), 0);
    for (int set = 0; set < N_SETS; set++) assert_true(ref_compare(r.out[set][0], ref[outs[0]], T * C, 1e-4, 1e-5) < 0);
    /* fusion removes steps; in-place reuse happens only when allowed */
    assert_true(r.stats[0].steps < r.stats[1].steps);
    assert_int_equal(r.stats[2].in_place_steps, 0);
    assert_int_equal(r.stats[3].in_place_steps, 0);
    assert_true(r.stats[1].in_place_steps > 0);
    for (int set = 0; set < N_SETS; set++)
        assert_true(r.stats[set].arena_bytes <= r.stats[set].naive_bytes &&
                    r.stats[set].arena_bytes >= r.stats[set].lower_bound_bytes);
    ref_free(g, ref);
    ref_inputs_free(&in);
    runs_free(&r);
    vkg_graph_free(g);
}

/* Two matmuls summed: each could take the add as its residual epilogue, only one may. */
static void test_sum_of_matmuls(void **state) {
    vkg_device *dev = *state;
    static const float x[2 * 3] = {1, 2, 3, 4, 5, 6}, w1[3 * 2] = {1, 0, 0, 1, 1, 1}, w2[3 * 2] = {2, 0, 0, 2, 0, 0};
    vkg_graph *g = vkg_graph_new();
    vkg_tensor in = IN(g, "x", 2, 3);
    vkg_tensor k1 = CONST(g, "w1", w1, 3, 2), k2 = CONST(g, "w2", w2, 3, 2);
    /* x @ w1 = [[4, 5], [10, 11]], x @ w2 = [[2, 4], [8, 10]]; each product read once */
    vkg_tensor outs[2] = {
        vkg_add(g, vkg_matmul(g, in, k1, VKG_NONE, 0), vkg_matmul(g, in, k2, VKG_NONE, 0)),
        vkg_add(g, vkg_gelu(g, vkg_matmul(g, in, k2, VKG_NONE, 0)), vkg_matmul(g, in, k1, VKG_NONE, 0)),
    };
    mark_outputs(g, outs, 2);
    feed feeds[1] = {{in, x, 0}};
    runs r = run_sets(dev, g, feeds, 1, outs, 2);
    static const float want[4] = {6, 9, 18, 21};
    for (int set = 0; set < N_SETS; set++) {
        assert_close(r.out[set][0], want, 4, 1e-5);
        assert_float_equal(r.out[set][1][0], 4.0 + 1.9545977, 1e-5);
    }
    runs_free(&r);
    vkg_graph_free(g);
}

/* softmax(causal(scale(q k^T))) @ v becomes one fused attention step unless the probabilities are
 * an output; every option set (fused and not) must give the reference's values.  Shapes: heads
 * [B, H, T, D] with k and v broadcast over B, a prompt after `cached` keys (causal offset), and
 * one query against a cache of S rows, the offset given at run time. */
static void check_attention(vkg_device *dev, int64_t B, int64_t H, int64_t T, int64_t S, int64_t D, int32_t offset,
                            int runtime, int probs_out) {
    size_t nq = (size_t)(B * H * T * D), nkv = (size_t)(H * S * D);
    float *qs = malloc(nq * 4), *ks = malloc(nkv * 4), *vs = malloc(nkv * 4);
    assert_true(qs && ks && vs);
    vkg_rng rng;
    vkg_rng_seed(&rng, (uint64_t)(B * 1000 + T * 10 + S));
    vkg_rng_fill_normal(&rng, qs, nq, 1.0f);
    vkg_rng_fill_normal(&rng, ks, nkv, 1.0f);
    vkg_rng_fill_normal(&rng, vs, nkv, 1.0f);
    vkg_graph *g = vkg_graph_new();
    vkg_tensor q = IN(g, "q", B, H, T, D), k = IN(g, "k", 1, H, S, D), v = IN(g, "v", 1, H, S, D);
    vkg_tensor pos = runtime ? vkg_index(g, "pos") : VKG_NONE;
    vkg_tensor sc = vkg_scale(g, vkg_matmul(g, q, k, VKG_NONE, VKG_TRANSPOSE_B), 1.0f / sqrtf((float)D));
    vkg_tensor probs = vkg_softmax(g, vkg_mask_causal(g, sc, runtime ? 0 : offset, pos));
    vkg_tensor outs[2] = {vkg_matmul(g, probs, v, VKG_NONE, 0), probs};
    mark_outputs(g, outs, probs_out ? 2 : 1);
    feed feeds[4] = {{q, qs, 0}, {k, ks, 0}, {v, vs, 0}, {pos, NULL, offset}};
    runs r = run_sets(dev, g, feeds, runtime ? 4 : 3, outs, probs_out ? 2 : 1);
    ref_inputs in;
    float **ref;
    assert_int_equal(ref_inputs_init(&in, g), 0);
    ref_inputs_set(&in, q, qs);
    ref_inputs_set(&in, k, ks);
    ref_inputs_set(&in, v, vs);
    if (runtime) ref_inputs_set_index(&in, pos, offset);
    assert_int_equal(ref_eval(g, &in, &ref), 0);
    for (int set = 0; set < N_SETS; set++)
        assert_true(ref_compare(r.out[set][0], ref[outs[0]], (int64_t)nq, 1e-4, 1e-5) < 0);
    /* fused: one step; with the probabilities an output, scores, softmax+scale+causal and the
     * product; without fusion, five (matmul, scale, mask, softmax, matmul) */
    assert_int_equal(r.stats[0].steps, probs_out ? 3 : 1);
    assert_int_equal(r.stats[1].steps, 5);
    ref_free(g, ref);
    ref_inputs_free(&in);
    runs_free(&r);
    vkg_graph_free(g);
    free(qs);
    free(ks);
    free(vs);
}

static void test_fused_attention(void **state) {
    vkg_device *dev = *state;
    check_attention(dev, 1, 3, 7, 7, 8, 0, 0, 0);      /* a prompt from position 0            */
    check_attention(dev, 2, 2, 5, 9, 4, 4, 0, 0);      /* after 4 cached keys, k/v broadcast  */
    check_attention(dev, 1, 4, 1, 33, 16, 20, 1, 0);   /* decode: key 20 of 33, at run time   */
    check_attention(dev, 1, 2, 3, 6, 5, -2, 0, 0);     /* rows whose keys are all blocked     */
    check_attention(dev, 1, 3, 7, 7, 8, 0, 0, 1);      /* probabilities requested: unfused    */
}

static int open_cpu(void **state) {
    vkg_device *dev = NULL;
    vkg_error err;
    vkg_device_options opts = {.cpu_threads = 2, .quiet = 1};
    if (vkg_device_open("cpu", &opts, &dev, &err) != VKG_OK) {
        fprintf(stderr, "cpu device: %s\n", err.message);
        return -1;
    }
    *state = dev;
    return 0;
}

static int close_cpu(void **state) {
    vkg_device_free(*state);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matmul_by_hand),
        cmocka_unit_test(test_matmul_batch_broadcast),
        cmocka_unit_test(test_broadcasting),
        cmocka_unit_test(test_unary),
        cmocka_unit_test(test_activations),
        cmocka_unit_test(test_softmax_lesson),
        cmocka_unit_test(test_causal),
        cmocka_unit_test(test_causal_runtime_index),
        cmocka_unit_test(test_masks),
        cmocka_unit_test(test_layernorm),
        cmocka_unit_test(test_embedding),
        cmocka_unit_test(test_views),
        cmocka_unit_test(test_state_write_at),
        cmocka_unit_test(test_fusion_in_place_same),
        cmocka_unit_test(test_sum_of_matmuls),
        cmocka_unit_test(test_fused_attention),
    };
    return cmocka_run_group_tests(tests, open_cpu, close_cpu);
}
