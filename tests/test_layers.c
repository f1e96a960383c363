/* The shared model layers (src/models/layers.c) against references in double precision written
 * from their definitions, on the CPU and on Vulkan: grouped-query attention (4 query heads over
 * 2 key/value heads) with and without a KV cache, RMS norm, the gated MLP; and the plan: the
 * grouped attention is still one fused step. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "models/layers.h"
#include "support/vk_test.h"
#include "vkgraph.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { H = 4, HKV = 2, D = 8, MAXT = 12 };

/* Causal attention of queries at positions p0..p0+T-1 over keys 0..p0+T-1: query head h reads
 * key/value head h / (nh / nkv).  q [T, nh*D], k and v [p0+T, nkv*D]; out [T, nh*D]; probs
 * (may be NULL) [nh, T, p0+T]. */
static void ref_attention(const float *q, const float *k, const float *v, int T, int p0, int nh, int nkv,
                          double scale, double *out, double *probs) {
    const int L = p0 + T, G = nh / nkv;
    for (int h = 0; h < nh; h++)
        for (int t = 0; t < T; t++) {
            double s[MAXT], m = -INFINITY, sum = 0;
            const int kv = h / G, seen = p0 + t + 1;
            for (int j = 0; j < seen; j++) {
                double dot = 0;
                for (int d = 0; d < D; d++) dot += (double)q[t * nh * D + h * D + d] * k[j * nkv * D + kv * D + d];
                s[j] = dot * scale;
                if (s[j] > m) m = s[j];
            }
            for (int j = 0; j < seen; j++) sum += (s[j] = exp(s[j] - m));
            for (int d = 0; d < D; d++) {
                double acc = 0;
                for (int j = 0; j < seen; j++) acc += s[j] / sum * v[j * nkv * D + kv * D + d];
                out[t * nh * D + h * D + d] = acc;
            }
            if (probs)
                for (int j = 0; j < L; j++) probs[((size_t)h * T + t) * L + j] = j < seen ? s[j] / sum : 0.0;
        }
}

static void expect_close(const float *got, const double *want, size_t n, double tol, const char *what) {
    for (size_t i = 0; i < n; i++)
        if (fabs(got[i] - want[i]) > tol * (1.0 + fabs(want[i])))
            fail_msg("%s[%zu]: %.7g, the reference %.7g", what, i, (double)got[i], want[i]);
}


static vkg_plan *compile(vkg_device *dev, const vkg_graph *g) {
    vkg_error err;
    if (vkg_graph_status(g) != VKG_OK) fail_msg("graph: %s", vkg_graph_error(g));
    vkg_compile_options co;
    vkg_compile_options_default(&co);
    vkg_device_compile_options(dev, &co);
    vkg_plan *p = NULL;
    if (vkg_plan_compile(g, &co, &p, &err) != VKG_OK) fail_msg("%s", err.message);
    return p;
}

/* The plan's text dump contains `what` (1) or not (0). */
static int plan_has(const vkg_plan *p, const char *what) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    assert_int_equal(vkg_plan_dump(p, f, VKG_DUMP_TEXT), VKG_OK);
    fclose(f);
    const int has = strstr(text, what) != NULL;
    free(text);
    return has;
}

static void fill(float *x, size_t n, uint64_t seed) {
    vkg_rng r;
    vkg_rng_seed(&r, seed);
    vkg_rng_fill_normal(&r, x, n, 1.0f);
}

/* Two runs of T = 3 tokens through one plan over a cache of 8 positions: the second run's
 * queries see the first run's keys, read back from the cache.  Keys and values side by side in
 * one input [T, 2 Hkv D] (a fused k/v projection) go into the cache in one step, a view of the
 * input; apart, they are copied side by side first ("attn.kv.concat"). */
static void gqa_cached_on(const char *spec, int side_by_side) {
    enum { T = 3, S = 8, RUNS = 2, KW = HKV * D };
    vkg_device *dev = vk_test_open_named(spec);
    vkg_graph *g = vkg_graph_new();
    vkg_layers L = {.g = g};
    vkg_layers_prefix(&L, "h.0.");
    vkg_tensor q = vkg_input(g, "q", VKG_F32, 2, (int64_t[]){T, H * D});
    vkg_tensor k = vkg_input(g, side_by_side ? "kv" : "k", VKG_F32, 2, (int64_t[]){T, side_by_side ? 2 * KW : KW});
    vkg_tensor v = side_by_side ? k : vkg_input(g, "v", VKG_F32, 2, (int64_t[]){T, KW});
    const int64_t cache[4] = {2, HKV, S, D};
    const vkg_attention a = {.n_head = H, .n_kv_head = HKV, .head_dim = D, .scale = 0.3f, .causal = 1,
                             .mask = VKG_NONE, .rope = VKG_NONE,
                             .kv_cache = vkg_state(g, "h.0.kv_cache", 4, cache), .pos = vkg_index(g, "pos")};
    vkg_tensor out = vkg_layer_attention(&L, &a, q, 0, k, 0, v, side_by_side ? KW : 0, NULL);
    assert_int_equal(vkg_output(g, "out", out), VKG_OK);
    vkg_plan *p = compile(dev, g);
    assert_true(plan_has(p, "attention+scale+causal")); /* the groups broadcast into the fused step */
    assert_false(plan_has(p, "softmax"));
    assert_true(plan_has(p, "h.0.attn.kv_cache.write"));
    assert_int_equal(plan_has(p, "h.0.attn.kv.concat"), !side_by_side);
    vkg_session *s = NULL;
    vkg_error err;
    if (vkg_session_new(dev, p, &s, &err) != VKG_OK) fail_msg("%s", err.message);

    float qs[RUNS * T * H * D], ks[RUNS * T * KW], vs[RUNS * T * KW], kvs[T * 2 * KW], got[T * H * D];
    fill(qs, sizeof qs / sizeof *qs, 1);
    fill(ks, sizeof ks / sizeof *ks, 2);
    fill(vs, sizeof vs / sizeof *vs, 3);
    for (int r = 0; r < RUNS; r++) {
        const float *kr = ks + r * T * KW, *vr = vs + r * T * KW;
        assert_int_equal(vkg_session_set_input(s, q, qs + r * T * H * D, sizeof got, &err), VKG_OK);
        if (side_by_side) {
            for (int t = 0; t < T; t++) {
                memcpy(kvs + t * 2 * KW, kr + t * KW, KW * sizeof(float));
                memcpy(kvs + t * 2 * KW + KW, vr + t * KW, KW * sizeof(float));
            }
            assert_int_equal(vkg_session_set_input(s, k, kvs, sizeof kvs, &err), VKG_OK);
        } else {
            assert_int_equal(vkg_session_set_input(s, k, kr, T * KW * sizeof(float), &err), VKG_OK);
            assert_int_equal(vkg_session_set_input(s, v, vr, T * KW * sizeof(float), &err), VKG_OK);
        }
        assert_int_equal(vkg_session_set_index(s, a.pos, r * T, &err), VKG_OK);
        if (vkg_session_run(s, &err) != VKG_OK) fail_msg("%s", err.message);
        assert_int_equal(vkg_session_get_output(s, out, got, sizeof got, &err), VKG_OK);
        double want[T * H * D];
        ref_attention(qs + r * T * H * D, ks, vs, T, r * T, H, HKV, 0.3, want, NULL);
        expect_close(got, want, T * H * D, 1e-5, "grouped attention over the cache");
    }
    vkg_session_free(s);
    vkg_plan_free(p);
    vkg_graph_free(g);
    vk_test_close_any(dev);
}

/* Without a cache, the probabilities as an output [H, T, T]: head h's rows are those of key/value
 * head h / 2. */
static void gqa_probs_on(const char *spec) {
    enum { T = 5 };
    vkg_device *dev = vk_test_open_named(spec);
    vkg_graph *g = vkg_graph_new();
    vkg_layers L = {.g = g};
    const int W = (H + 2 * HKV) * D;
    vkg_tensor qkv = vkg_input(g, "qkv", VKG_F32, 2, (int64_t[]){T, W}); /* one fused projection */
    const vkg_attention a = {.n_head = H, .n_kv_head = HKV, .head_dim = D, .scale = 1.0f / sqrtf((float)D), .causal = 1,
                             .mask = VKG_NONE, .rope = VKG_NONE, .kv_cache = VKG_NONE, .pos = VKG_NONE};
    vkg_tensor probs = VKG_NONE;
    vkg_tensor out = vkg_layer_attention(&L, &a, qkv, 0, qkv, H * D, qkv, (H + HKV) * D, &probs);
    assert_int_equal(vkg_output(g, "out", out), VKG_OK);
    assert_int_equal(vkg_output(g, "probs", probs), VKG_OK);
    int64_t shape[VKG_MAX_DIMS];
    assert_int_equal(vkg_tensor_shape(g, probs, shape), 3);
    assert_true(shape[0] == H && shape[1] == T && shape[2] == T);
    vkg_plan *p = compile(dev, g);
    vkg_session *s = NULL;
    vkg_error err;
    if (vkg_session_new(dev, p, &s, &err) != VKG_OK) fail_msg("%s", err.message);
    float x[T * W], got[T * H * D], got_p[H * T * T];
    fill(x, T * W, 7);
    assert_int_equal(vkg_session_set_input(s, qkv, x, sizeof x, &err), VKG_OK);
    if (vkg_session_run(s, &err) != VKG_OK) fail_msg("%s", err.message);
    assert_int_equal(vkg_session_get_output(s, out, got, sizeof got, &err), VKG_OK);
    assert_int_equal(vkg_session_get_output(s, probs, got_p, sizeof got_p, &err), VKG_OK);
    float q[T * H * D], k[T * HKV * D], v[T * HKV * D];
    for (int t = 0; t < T; t++) {
        memcpy(q + t * H * D, x + t * W, H * D * sizeof *q);
        memcpy(k + t * HKV * D, x + t * W + H * D, HKV * D * sizeof *k);
        memcpy(v + t * HKV * D, x + t * W + (H + HKV) * D, HKV * D * sizeof *v);
    }
    double want[T * H * D], want_p[H * T * T];
    ref_attention(q, k, v, T, 0, H, HKV, 1.0 / sqrt((double)D), want, want_p);
    expect_close(got, want, T * H * D, 1e-5, "grouped attention");
    expect_close(got_p, want_p, H * T * T, 1e-5, "grouped attention's probabilities");
    vkg_session_free(s);
    vkg_plan_free(p);
    vkg_graph_free(g);
    vk_test_close_any(dev);
}

/* RMS norm and the gated MLP, down(silu(gate(x)) * up(x)) with torch.nn.Linear weights. */
static void rmsnorm_mlp_on(const char *spec) {
    enum { T = 3, C = 16, I = 24 };
    vkg_device *dev = vk_test_open_named(spec);
    vkg_graph *g = vkg_graph_new();
    vkg_layers L = {.g = g};
    static float gamma[C], wg[I * C], wu[I * C], wd[C * I], x[T * C];
    fill(gamma, C, 11);
    fill(wg, I * C, 12);
    fill(wu, I * C, 13);
    fill(wd, C * I, 14);
    fill(x, T * C, 15);
    for (int i = 0; i < T * C; i++) x[i] = 3.0f * x[i] + 0.5f; /* far from unit RMS, and not centred */
    vkg_tensor in = vkg_input(g, "x", VKG_F32, 2, (int64_t[]){T, C});
    vkg_tensor n = vkg_layer_rmsnorm(&L, in, vkg_layers_weight(&L, "norm.weight", VKG_F32, C, 0, gamma), 1e-6f, "norm");
    const vkg_mlp m = {.gate_w = vkg_layers_weight(&L, "gate.weight", VKG_F32, I, C, wg), .gate_b = VKG_NONE,
                       .up_w = vkg_layers_weight(&L, "up.weight", VKG_F32, I, C, wu), .up_b = VKG_NONE,
                       .down_w = vkg_layers_weight(&L, "down.weight", VKG_F32, C, I, wd), .down_b = VKG_NONE,
                       .flags = VKG_TRANSPOSE_B, .act = vkg_silu, .gate_name = "gate", .act_name = "act",
                       .up_name = "up", .gated_name = "gated", .down_name = "down"};
    vkg_tensor y = vkg_layer_mlp(&L, n, &m);
    assert_int_equal(vkg_output(g, "norm", n), VKG_OK);
    assert_int_equal(vkg_output(g, "y", y), VKG_OK);
    vkg_plan *p = compile(dev, g);
    vkg_session *s = NULL;
    vkg_error err;
    if (vkg_session_new(dev, p, &s, &err) != VKG_OK) fail_msg("%s", err.message);
    assert_int_equal(vkg_session_set_input(s, in, x, sizeof x, &err), VKG_OK);
    if (vkg_session_run(s, &err) != VKG_OK) fail_msg("%s", err.message);
    float got_n[T * C], got_y[T * C];
    assert_int_equal(vkg_session_get_output(s, n, got_n, sizeof got_n, &err), VKG_OK);
    assert_int_equal(vkg_session_get_output(s, y, got_y, sizeof got_y, &err), VKG_OK);
    double want_n[T * C], want_y[T * C];
    for (int t = 0; t < T; t++) {
        double ms = 0;
        for (int c = 0; c < C; c++) ms += (double)x[t * C + c] * x[t * C + c];
        const double r = 1.0 / sqrt(ms / C + 1e-6);
        for (int c = 0; c < C; c++) want_n[t * C + c] = x[t * C + c] * r * gamma[c];
        double h[I];
        for (int i = 0; i < I; i++) {
            double a = 0, u = 0;
            for (int c = 0; c < C; c++) a += want_n[t * C + c] * wg[i * C + c], u += want_n[t * C + c] * wu[i * C + c];
            h[i] = a / (1.0 + exp(-a)) * u;
        }
        for (int c = 0; c < C; c++) {
            double acc = 0;
            for (int i = 0; i < I; i++) acc += h[i] * wd[c * I + i];
            want_y[t * C + c] = acc;
        }
    }
    expect_close(got_n, want_n, T * C, 1e-5, "rms norm");
    expect_close(got_y, want_y, T * C, 1e-4, "gated mlp");
    vkg_session_free(s);
    vkg_plan_free(p);
    vkg_graph_free(g);
    vk_test_close_any(dev);
}

static void test_gqa_cached_cpu(void **state) {
    (void)state;
    gqa_cached_on("cpu", 0);
    gqa_cached_on("cpu", 1);
}
static void test_gqa_cached_vulkan(void **state) {
    (void)state;
    gqa_cached_on("vulkan", 0);
    gqa_cached_on("vulkan", 1);
}
static void test_gqa_probs_cpu(void **state) { (void)state; gqa_probs_on("cpu"); }
static void test_gqa_probs_vulkan(void **state) { (void)state; gqa_probs_on("vulkan"); }
static void test_rmsnorm_mlp_cpu(void **state) { (void)state; rmsnorm_mlp_on("cpu"); }
static void test_rmsnorm_mlp_vulkan(void **state) { (void)state; rmsnorm_mlp_on("vulkan"); }

/* Query heads that are not a multiple of the key/value heads are a shape error naming both. */
static void test_heads_not_a_multiple(void **state) {
    (void)state;
    vkg_graph *g = vkg_graph_new();
    vkg_layers L = {.g = g};
    vkg_tensor q = vkg_input(g, "q", VKG_F32, 2, (int64_t[]){2, 6 * D});
    vkg_tensor kv = vkg_input(g, "kv", VKG_F32, 2, (int64_t[]){2, 4 * D});
    const vkg_attention a = {.n_head = 6, .n_kv_head = 4, .head_dim = D, .scale = 1.0f, .causal = 1,
                             .mask = VKG_NONE, .rope = VKG_NONE, .kv_cache = VKG_NONE, .pos = VKG_NONE};
    assert_int_equal(vkg_layer_attention(&L, &a, q, 0, kv, 0, kv, 0, NULL), VKG_NONE);
    assert_int_equal(vkg_graph_status(g), VKG_ERR_SHAPE);
    assert_non_null(strstr(vkg_graph_error(g), "6 query heads"));
    assert_non_null(strstr(vkg_graph_error(g), "4 key/value heads"));
    vkg_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gqa_cached_cpu),     cmocka_unit_test(test_gqa_cached_vulkan),
        cmocka_unit_test(test_gqa_probs_cpu),      cmocka_unit_test(test_gqa_probs_vulkan),
        cmocka_unit_test(test_rmsnorm_mlp_cpu),    cmocka_unit_test(test_rmsnorm_mlp_vulkan),
        cmocka_unit_test(test_heads_not_a_multiple),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
