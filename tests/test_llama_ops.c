/* The Llama-family kernels against double-precision references written from transformers'
 * definitions: the RoPE inverse frequencies (default, linear, llama3) and cos/sin table
 * (src/models/rope.c), the rope kernel at positions up to 32768, RMS norm, SwiGLU (element-wise
 * and in the matmul epilogue), fused attention with grouped heads and a sliding window (every CPU
 * variant), the builders' refusals, and the attention layer with rotary positions, grouped heads,
 * a sliding window and a KV cache over two runs on the CPU and on Vulkan. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "cpu/kernels.h"
#include "graph/graph_build.h"
#include "graph/plan.h"
#include "models/layers.h"
#include "models/rope.h"
#include "support/test_util.h"
#include "support/vk_test.h"
#include "vkgraph.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void fill(float *x, size_t n, uint64_t seed) {
    vkg_rng r;
    vkg_rng_seed(&r, seed);
    vkg_rng_fill_normal(&r, x, n, 1.0f);
}

static void expect_close(const float *got, const double *want, size_t n, double tol, const char *what) {
    for (size_t i = 0; i < n; i++)
        if (!(got[i] == want[i] || fabs(got[i] - want[i]) <= tol * (1.0 + fabs(want[i]))))
            fail_msg("%s[%zu]: %.9g, the reference %.9g", what, i, (double)got[i], want[i]);
}

/* ---- inverse frequencies and the table ---------------------------------------------------- */

static void test_rope_inv_freq(void **state) {
    (void)state;
    double f[64], attn = 0;
    vkg_error err;
    /* default: theta^(-2i / dim), written as exp of a log here */
    vkg_rope_config c = {.type = VKG_ROPE_DEFAULT, .theta = 10000.0, .dim = 64};
    assert_int_equal(vkg_rope_inv_freq(&c, f, &attn, &err), VKG_OK);
    assert_true(attn == 1.0);
    for (int i = 0; i < 32; i++) assert_true(fabs(f[i] - exp(-log(10000.0) * (2.0 * i) / 64.0)) <= 1e-14 * f[i]);
    /* linear: divided by the factor */
    double g[64];
    c.type = VKG_ROPE_LINEAR, c.factor = 4.0;
    assert_int_equal(vkg_rope_inv_freq(&c, g, &attn, &err), VKG_OK);
    for (int i = 0; i < 32; i++) assert_true(fabs(g[i] - f[i] / 4.0) <= 1e-15 * f[i]);
    /* llama3, Llama 3.2's facts: wavelengths under 8192 / 4 kept, over 8192 / 1 divided by 32,
     * between them (1 - s) f / 32 + s f with s = (8192 / wavelength - 1) / 3 */
    vkg_rope_config l3 = {.type = VKG_ROPE_LLAMA3, .theta = 500000.0, .dim = 64, .factor = 32.0,
                          .low_freq_factor = 1.0, .high_freq_factor = 4.0, .original_max_position_embeddings = 8192};
    c = (vkg_rope_config){.type = VKG_ROPE_DEFAULT, .theta = 500000.0, .dim = 64};
    assert_int_equal(vkg_rope_inv_freq(&c, f, &attn, &err), VKG_OK);
    assert_int_equal(vkg_rope_inv_freq(&l3, g, &attn, &err), VKG_OK);
    int kept = 0, scaled = 0, blended = 0;
    for (int i = 0; i < 32; i++) {
        const double wavelen = 2.0 * 3.14159265358979323846 / f[i];
        double want;
        if (wavelen < 2048.0) want = f[i], kept++;
        else if (wavelen > 8192.0) want = f[i] / 32.0, scaled++;
        else {
            const double s = (8192.0 / wavelen - 1.0) / 3.0;
            want = (1.0 - s) * f[i] / 32.0 + s * f[i];
            blended++;
        }
        assert_true(fabs(g[i] - want) <= 1e-14 * want);
    }
    assert_true(kept > 0 && scaled > 0 && blended > 0); /* all three bands exercised */
    /* yarn, Qwen's long-context setting (theta 10^6, heads of 128, factor 4 over 32768): index i
     * kept below floor(d(32)), divided by 4 above ceil(d(1)), d(r) = 128 ln(32768 / (2 pi r)) /
     * (2 ln 10^6), a linear ramp between; cos and sin scaled by 0.1 ln 4 + 1 */
    vkg_rope_config y = {.type = VKG_ROPE_YARN, .theta = 1e6, .dim = 128, .factor = 4.0,
                         .original_max_position_embeddings = 32768};
    const double two_pi = 2.0 * 3.14159265358979323846;
    const double low = floor(128.0 * log(32768.0 / (32.0 * two_pi)) / (2.0 * log(1e6)));
    const double high = ceil(128.0 * log(32768.0 / two_pi) / (2.0 * log(1e6)));
    c = (vkg_rope_config){.type = VKG_ROPE_DEFAULT, .theta = 1e6, .dim = 128};
    assert_int_equal(vkg_rope_inv_freq(&c, f, &attn, &err), VKG_OK);
    assert_int_equal(vkg_rope_inv_freq(&y, g, &attn, &err), VKG_OK);
    assert_true(fabs(attn - (0.1 * log(4.0) + 1.0)) < 1e-15);
    kept = scaled = blended = 0;
    for (int i = 0; i < 64; i++) {
        const double ramp = i <= low ? 0.0 : i >= high ? 1.0 : (i - low) / (high - low);
        kept += ramp == 0.0, scaled += ramp == 1.0, blended += ramp > 0.0 && ramp < 1.0;
        const double want = f[i] / 4.0 * ramp + f[i] * (1.0 - ramp);
        assert_true(fabs(g[i] - want) <= 1e-14 * want);
    }
    assert_true(kept > 0 && scaled > 0 && blended > 0);
    /* the attention factor: given, or from mscale over mscale_all_dim (DeepSeek's) */
    y.mscale = 0.707, y.mscale_all_dim = 0.707;
    assert_int_equal(vkg_rope_inv_freq(&y, g, &attn, &err), VKG_OK);
    assert_true(attn == 1.0);
    y.attention_factor = 1.5;
    assert_int_equal(vkg_rope_inv_freq(&y, g, &attn, &err), VKG_OK);
    assert_true(attn == 1.5);
    y.attention_factor = -1.0;
    assert_int_equal(vkg_rope_inv_freq(&y, g, &attn, &err), VKG_ERR_INVALID_ARGUMENT);
    /* dynamic: the default's frequencies (its base grows only past the model's context) */
    c = (vkg_rope_config){.type = VKG_ROPE_DYNAMIC, .theta = 1e6, .dim = 128, .factor = 2.0};
    assert_int_equal(vkg_rope_inv_freq(&c, g, &attn, &err), VKG_OK);
    for (int i = 0; i < 64; i++) assert_true(g[i] == f[i]);
    assert_true(attn == 1.0);
    /* refusals */
    vkg_rope_type t;
    assert_int_equal(vkg_rope_type_parse("longrope", &t, &err), VKG_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.message, "longrope"));
    assert_non_null(strstr(err.message, "yarn")); /* among the supported */
    assert_int_equal(vkg_rope_type_parse(NULL, &t, &err), VKG_OK);
    assert_int_equal(t, VKG_ROPE_DEFAULT);
    assert_int_equal(vkg_rope_type_parse("llama3", &t, &err), VKG_OK);
    assert_int_equal(t, VKG_ROPE_LLAMA3);
    c.dim = 63;
    assert_int_equal(vkg_rope_inv_freq(&c, f, &attn, &err), VKG_ERR_INVALID_ARGUMENT);
    c.dim = 64, c.theta = 1.0;
    assert_int_equal(vkg_rope_inv_freq(&c, f, &attn, &err), VKG_ERR_INVALID_ARGUMENT);
    l3.high_freq_factor = 1.0;
    assert_int_equal(vkg_rope_inv_freq(&l3, f, &attn, &err), VKG_ERR_INVALID_ARGUMENT);
    c = (vkg_rope_config){.type = VKG_ROPE_LINEAR, .theta = 10000.0, .dim = 64, .factor = 0.5};
    assert_int_equal(vkg_rope_inv_freq(&c, f, &attn, &err), VKG_ERR_INVALID_ARGUMENT);
}

/* ---- the rope kernel ---------------------------------------------------------------------- */

/* x rotated at position pos as Hugging Face's rotate_half does, all in double. */
static void ref_rotate(const float *x, size_t stride, int D, double pos, const double *inv_freq, double *y) {
    for (int i = 0; i < D / 2; i++) {
        const double a = pos * inv_freq[i], c = cos(a), s = sin(a);
        const double x1 = x[i * stride], x2 = x[(i + D / 2) * stride];
        y[i] = x1 * c - x2 * s;
        y[i + D / 2] = x2 * c + x1 * s;
    }
}

/* Heads of 64 (theta 10000) and 128 (Qwen3's theta 1e6) at positions up to 32768 over a table of
 * 32769 rows: within f32 rounding of the double rotation (1e-6 relative to the row's size); an
 * angle formed in f32 would be off by up to ~1e-3 there.  x strided (a head of a token-major
 * projection); positions past the table give NaN. */
static void test_rope_far_positions(void **state) {
    (void)state;
    enum { P = 32769, ROWS = 6 };
    static const int32_t pos[ROWS] = {0, 1, 4095, 20000, 32767, 32768};
    const struct { int D; double theta; } heads[2] = {{64, 10000.0}, {128, 1000000.0}};
    for (int h = 0; h < 2; h++) {
        const int D = heads[h].D;
        double inv[64], attn;
        vkg_error err;
        const vkg_rope_config c = {.type = VKG_ROPE_DEFAULT, .theta = heads[h].theta, .dim = D};
        assert_int_equal(vkg_rope_inv_freq(&c, inv, &attn, &err), VKG_OK);
        float *table = malloc((size_t)P * D * sizeof *table);
        assert_non_null(table);
        vkg_rope_fill_table(inv, D / 2, attn, P, table);
        /* x: 3 heads of D interleaved per token, the rope reads head 1 of each (stride 3 D per t) */
        float x[ROWS * 3 * 128], out[ROWS * 128];
        fill(x, sizeof x / sizeof *x, 11 + (uint64_t)h);
        for (int r = 0; r < ROWS; r++) {
            /* one row at a time: its position through the runtime index */
            const int32_t index = pos[r];
            vkg_rope_params p = {.T = 1, .D = (uint32_t)D, .batch0 = 1, .batch1 = 1, .x_offset = (uint32_t)(r * 3 * D + D),
                                 .x_stride_t = (uint32_t)(3 * D), .x_stride_d = 1, .positions = P, .dyn_index = 0,
                                 .out_offset = (uint32_t)(r * D), .rotated = 1};
            vkg_cpu_rope(&p, x, table, out, &index, NULL, NULL, 0, 1);
            double want[128], size = 0;
            ref_rotate(x + r * 3 * D + D, 1, D, (double)pos[r], inv, want);
            for (int i = 0; i < D; i++) size = fmax(size, fabs(want[i]));
            for (int i = 0; i < D; i++)
                if (!(fabs(out[r * D + i] - want[i]) <= 1e-6 * size))
                    fail_msg("D %d position %d element %d: %.9g, the reference %.9g", D, pos[r], i,
                             (double)out[r * D + i], want[i]);
        }
        /* every row in one call, each at its own position (row_positions): the same bits */
        float rows_out[ROWS * 128];
        const vkg_rope_params pr = {.T = ROWS, .D = (uint32_t)D, .batch0 = 1, .batch1 = 1, .x_offset = (uint32_t)D,
                                    .x_stride_t = (uint32_t)(3 * D), .x_stride_d = 1, .positions = P,
                                    .dyn_index = VKG_NO_INDEX, .rotated = 1, .row_positions = 1};
        vkg_cpu_rope(&pr, x, table, rows_out, NULL, pos, NULL, 0, ROWS);
        assert_memory_equal(rows_out, out, (size_t)ROWS * D * sizeof *out);
        /* the row past the table: NaN, nothing read outside it */
        const int32_t past = P;
        vkg_rope_params p = {.T = 1, .D = (uint32_t)D, .batch0 = 1, .batch1 = 1, .x_stride_t = (uint32_t)D, .x_stride_d = 1,
                             .positions = P, .dyn_index = 0, .rotated = 1};
        vkg_cpu_rope(&p, x, table, out, &past, NULL, NULL, 0, 1);
        for (int i = 0; i < D; i++) assert_true(isnan(out[i]));
        free(table);
    }
}

/* [b0 2, b1 3, T 5, D 8] in place, at offset 4 + index 2: every row at its own position; the rows
 * of b1 = 2 (past `rotated`) are copied as they are, as a projection's values are. */
static void test_rope_in_place_batches(void **state) {
    (void)state;
    enum { B0 = 2, B1 = 3, T = 5, D = 8, P = 16, N = B0 * B1 * T * D };
    double inv[D / 2], attn;
    vkg_error err;
    const vkg_rope_config c = {.type = VKG_ROPE_DEFAULT, .theta = 100.0, .dim = D};
    assert_int_equal(vkg_rope_inv_freq(&c, inv, &attn, &err), VKG_OK);
    float table[P * D], x[N], orig[N];
    vkg_rope_fill_table(inv, D / 2, attn, P, table);
    fill(x, N, 5);
    memcpy(orig, x, sizeof x);
    const int32_t index = 2;
    vkg_rope_params p = {.T = T, .D = D, .batch0 = B0, .batch1 = B1, .x_stride_t = D, .x_stride_d = 1,
                         .x_stride_b1 = T * D, .x_stride_b0 = B1 * T * D, .positions = P, .pos_offset = 4, .dyn_index = 0,
                         .rotated = 2};
    vkg_cpu_rope(&p, x, table, x, &index, NULL, NULL, 0, 7);
    vkg_cpu_rope(&p, x, table, x, &index, NULL, NULL, 7, B0 * B1 * T); /* cut anywhere */
    for (int r = 0; r < B0 * B1 * T; r++) {
        double want[D];
        if (r / T % B1 == 2) {
            for (int i = 0; i < D; i++) want[i] = orig[r * D + i];
        } else {
            ref_rotate(orig + r * D, 1, D, 6.0 + r % T, inv, want);
        }
        expect_close(x + r * D, want, D, 1e-6, "rope in place");
    }
}

/* ---- RMS norm and SwiGLU -------------------------------------------------------------------- */

static void test_rms_norm(void **state) {
    (void)state;
    const uint32_t widths[] = {1, 3, 576, 2053};
    for (size_t w = 0; w < sizeof widths / sizeof *widths; w++) {
        const uint32_t C = widths[w], R = 3;
        float *x = malloc(R * C * sizeof *x), *y = malloc(R * C * sizeof *y), *gamma = malloc(C * sizeof *gamma);
        double *want = malloc(R * C * sizeof *want);
        assert_true(x && y && gamma && want);
        fill(x, R * C, 21 + w);
        fill(gamma, C, 22 + w);
        for (uint32_t i = 0; i < C; i++) x[C + i] += 20.0f; /* a row with a large mean: no mean is taken */
        for (int with_gamma = 0; with_gamma < 2; with_gamma++) {
            vkg_layernorm_params p = {.rows = R, .cols = C, .eps = 1e-6f,
                                      .flags = VKG_LAYERNORM_RMS | (with_gamma ? VKG_LAYERNORM_GAMMA : 0u)};
            vkg_cpu_layernorm(&p, x, y, gamma, NULL, 0, R);
            for (uint32_t r = 0; r < R; r++) {
                double ss = 0;
                for (uint32_t i = 0; i < C; i++) ss += (double)x[r * C + i] * x[r * C + i];
                const double inv = 1.0 / sqrt(ss / C + 1e-6);
                for (uint32_t i = 0; i < C; i++) want[r * C + i] = x[r * C + i] * inv * (with_gamma ? gamma[i] : 1.0);
            }
            expect_close(y, want, R * C, 2e-6, "rms_norm");
        }
        /* in place gives the same */
        vkg_layernorm_params p = {.rows = R, .cols = C, .eps = 1e-6f, .flags = VKG_LAYERNORM_RMS | VKG_LAYERNORM_GAMMA};
        vkg_cpu_layernorm(&p, x, x, gamma, NULL, 0, R);
        assert_memory_equal(x, y, R * C * sizeof *x);
        free(x), free(y), free(gamma), free(want);
    }
}

static double silu(double z) { return z / (1.0 + exp(-z)); }

/* silu(gate) * up element-wise, with the limits: silu(-inf) = -0, silu(+inf) = inf, NaN stays. */
static void test_swiglu_binary(void **state) {
    (void)state;
    enum { N = 64 };
    float gate[N], up[N], out[N];
    fill(gate, N, 31);
    fill(up, N, 32);
    for (int i = 0; i < N; i++) gate[i] *= 6.0f;
    gate[0] = INFINITY, gate[1] = -INFINITY, gate[2] = NAN, up[3] = INFINITY;
    vkg_binary_params p = {.op = VKG_BINARY_SWIGLU, .shape = {1, 1, 1, N}, .a_strides = {0, 0, 0, 1},
                           .b_strides = {0, 0, 0, 1}};
    vkg_cpu_binary(&p, gate, up, out, 0, N);
    double want[N];
    for (int i = 0; i < N; i++) want[i] = silu(gate[i]) * up[i];
    assert_true(out[0] == (up[0] > 0 ? INFINITY : -INFINITY));
    assert_true(out[1] == 0.0f && isnan(out[2]));
    expect_close(out + 3, want + 3, N - 3, 1e-6, "swiglu");
}

/* C = silu(R) * (A @ B^T + bias): the up projection's epilogue with the gate as R, every variant. */
static void test_swiglu_epilogue(void **state) {
    (void)state;
    enum { M = 5, N = 37, K = 29 };
    float a[M * K], b[N * K], bias[N], r[M * N], c[M * N];
    fill(a, M * K, 41);
    fill(b, N * K, 42);
    fill(bias, N, 43);
    fill(r, M * N, 44);
    double want[M * N];
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double s = bias[n];
            for (int k = 0; k < K; k++) s += (double)a[m * K + k] * b[n * K + k];
            want[m * N + n] = silu(r[m * N + n]) * s;
        }
    vkg_matmul_params p = {.M = M, .N = N, .K = K, .batch0 = 1, .batch1 = 1, .a_stride_m = K, .a_stride_k = 1,
                           .b_stride_k = 1, .b_stride_n = K, .c_stride_m = N, .r_stride_m = N,
                           .flags = VKG_MATMUL_BIAS | VKG_MATMUL_RESIDUAL | VKG_MATMUL_GATE, .activation = VKG_UNARY_COPY};
    for (int v = 0; v < VKG_CPU_MATMUL_VARIANTS; v++) {
        memset(c, 0, sizeof c);
        vkg_cpu_matmul_with(v, &p, a, b, c, bias, r, 0, vkg_cpu_matmul_units(&p));
        expect_close(c, want, M * N, 1e-5, vkg_cpu_matmul_variant_name(v));
    }
    /* in place over the gate (R = C), as the planner may place it */
    memcpy(c, r, sizeof c);
    vkg_cpu_matmul(&p, a, b, c, bias, c, 0, vkg_cpu_matmul_units(&p));
    expect_close(c, want, M * N, 1e-5, "in place");
}

/* ---- fused attention: grouped heads and a sliding window ---------------------------------- */

/* Query rows (kv, g, t) at positions p0 + t over keys 0 .. S-1 of kv, causal within `window`
 * (0: none): q [HKV, G, T, D], k and v [HKV, S, D]. */
static void ref_gqa(const float *q, const float *k, const float *v, int hkv, int G, int T, int S, int D, int p0,
                    int window, double scale, double *out) {
    double *s = malloc((size_t)S * sizeof *s);
    assert_non_null(s);
    for (int h = 0; h < hkv; h++)
        for (int g = 0; g < G; g++)
            for (int t = 0; t < T; t++) {
                const float *qr = q + (((size_t)h * G + g) * T + t) * D;
                const int last = p0 + t, first = window ? last - window + 1 : 0;
                double m = -INFINITY, sum = 0;
                for (int j = 0; j < S; j++) {
                    s[j] = -INFINITY;
                    if (j > last || j < first) continue;
                    double dot = 0;
                    for (int d = 0; d < D; d++) dot += (double)qr[d] * k[((size_t)h * S + j) * D + d];
                    s[j] = dot * scale;
                    m = fmax(m, s[j]);
                }
                for (int j = 0; j < S; j++) sum += s[j] == -INFINITY ? 0.0 : (s[j] = exp(s[j] - m));
                double *o = out + (((size_t)h * G + g) * T + t) * D;
                for (int d = 0; d < D; d++) {
                    double acc = 0;
                    for (int j = 0; j < S; j++)
                        if (s[j] != -INFINITY) acc += s[j] / sum * v[((size_t)h * S + j) * D + d];
                    o[d] = sum == 0 ? 0.0 : acc;
                }
            }
    free(s);
}

/* Prompts (T = 37 after 11 cached keys) and decoding (T = 1), SmolLM2's 3 query heads per
 * key/value head and Qwen3's heads of 128, without and with a window of 7; every CPU variant
 * and the plain reference, and cut into units anywhere. */
static void test_attention_gqa_window(void **state) {
    (void)state;
    const struct { int hkv, G, T, S, D, p0; } shapes[] = {{3, 3, 37, 48, 64, 11}, {2, 2, 1, 50, 128, 49},
                                                          {1, 4, 9, 40, 64, 0}};
    for (size_t sh = 0; sh < sizeof shapes / sizeof *shapes; sh++) {
        const int hkv = shapes[sh].hkv, G = shapes[sh].G, T = shapes[sh].T, S = shapes[sh].S, D = shapes[sh].D;
        const size_t nq = (size_t)hkv * G * T * D, nk = (size_t)hkv * S * D;
        float *q = malloc(nq * sizeof *q), *k = malloc(nk * sizeof *k), *v = malloc(nk * sizeof *v);
        float *o = malloc(nq * sizeof *o);
        double *want = malloc(nq * sizeof *want);
        assert_true(q && k && v && o && want);
        fill(q, nq, 51 + sh), fill(k, nk, 52 + sh), fill(v, nk, 53 + sh);
        for (int window = 0; window <= 7; window += 7) {
            const float scale = 1.0f / sqrtf((float)D);
            ref_gqa(q, k, v, hkv, G, T, S, D, shapes[sh].p0, window, scale, want);
            /* the causal offset in the index, as a KV cache gives it */
            const int32_t index = shapes[sh].p0;
            vkg_attention_params p = {.T = (uint32_t)T, .S = (uint32_t)S, .D = (uint32_t)D, .Dv = (uint32_t)D,
                                      .batch0 = (uint32_t)hkv, .batch1 = (uint32_t)G,
                                      .q_stride_t = (uint32_t)D, .q_stride_b1 = (uint32_t)(T * D),
                                      .q_stride_b0 = (uint32_t)(G * T * D), .k_stride_s = (uint32_t)D,
                                      .k_stride_b0 = (uint32_t)(S * D), .v_stride_s = (uint32_t)D,
                                      .v_stride_b0 = (uint32_t)(S * D), .o_stride_t = (uint32_t)D,
                                      .o_stride_b1 = (uint32_t)(T * D), .o_stride_b0 = (uint32_t)(G * T * D),
                                      .q_stride_d = 1, .k_stride_d = 1, .v_stride_d = 1, .o_stride_d = 1,
                                      .scale = scale, .mask_kind = VKG_ATTENTION_MASK_CAUSAL, .dyn_index = 0,
                                      .window = (uint32_t)window};
            const size_t units = vkg_cpu_attention_rows(&p);
            for (int variant = -1; variant < VKG_CPU_MATMUL_VARIANTS; variant++) {
                memset(o, 0, nq * sizeof *o);
                if (variant < 0) {
                    vkg_cpu_attention_reference(&p, q, k, v, o, &index, 0, units);
                } else {
                    vkg_cpu_attention_with(variant, &p, q, k, v, o, &index, 0, units / 3);
                    vkg_cpu_attention_with(variant, &p, q, k, v, o, &index, units / 3, units);
                }
                expect_close(o, want, nq, 2e-5, variant < 0 ? "reference" : vkg_cpu_matmul_variant_name(variant));
            }
        }
        free(q), free(k), free(v), free(o), free(want);
    }
}

/* ---- the builders' refusals ----------------------------------------------------------------- */

static void test_builder_refusals(void **state) {
    (void)state;
    static const float data[16 * 8];
    vkg_graph *g = vkg_graph_new();
    vkg_tensor x = vkg_input(g, "x", VKG_F32, 3, (int64_t[]){4, 5, 7});      /* odd head width */
    vkg_tensor table = vkg_constant(g, "t", VKG_F32, 2, (int64_t[]){16, 7}, data);
    assert_int_equal(vkg_rope(g, x, table, 0, VKG_NONE), VKG_NONE);
    assert_non_null(strstr(vkg_graph_error(g), "D even"));
    vkg_graph_free(g);

    g = vkg_graph_new();
    x = vkg_input(g, "x", VKG_F32, 3, (int64_t[]){4, 5, 8});
    table = vkg_constant(g, "t", VKG_F32, 2, (int64_t[]){16, 6}, data);
    assert_int_equal(vkg_rope(g, x, table, 0, VKG_NONE), VKG_NONE);
    assert_non_null(strstr(vkg_graph_error(g), "must be [P, 8]"));
    vkg_graph_free(g);

    /* vkg_rope_heads: 1 to n heads rotated; positions an i32 [T], not beside a runtime index */
    static const struct { int64_t rotated; int positions; const char *why; } heads[] = {
        {0, 0, "1 to n of its heads"}, {5, 0, "1 to n of its heads"}, {2, 1, "i32 tensor [5]"},
        {2, 2, "i32 tensor [5]"}, {2, 3, "in place of a dyn_offset"}};
    for (size_t i = 0; i < sizeof heads / sizeof *heads; i++) {
        g = vkg_graph_new();
        x = vkg_input(g, "x", VKG_F32, 3, (int64_t[]){4, 5, 8});
        table = vkg_constant(g, "t", VKG_F32, 2, (int64_t[]){16, 8}, data);
        vkg_tensor pos = heads[i].positions == 1   ? vkg_input(g, "p", VKG_I32, 1, (int64_t[]){4})
                         : heads[i].positions == 2 ? vkg_input(g, "p", VKG_F32, 1, (int64_t[]){5})
                         : heads[i].positions == 3 ? vkg_input(g, "p", VKG_I32, 1, (int64_t[]){5})
                                                   : VKG_NONE;
        vkg_tensor dyn = heads[i].positions == 3 ? vkg_index(g, "pos") : VKG_NONE;
        assert_int_equal(vkg_rope_heads(g, x, table, 0, dyn, pos, heads[i].rotated), VKG_NONE);
        if (!strstr(vkg_graph_error(g), heads[i].why)) fail_msg("case %zu: %s", i, vkg_graph_error(g));
        vkg_graph_free(g);
    }

    g = vkg_graph_new();
    vkg_tensor a = vkg_input(g, "a", VKG_F32, 2, (int64_t[]){3, 4}), b = vkg_input(g, "b", VKG_F32, 2, (int64_t[]){3, 1});
    assert_int_equal(vkg_swiglu(g, a, b), VKG_NONE);
    assert_non_null(strstr(vkg_graph_error(g), "one shape"));
    vkg_graph_free(g);

    g = vkg_graph_new();
    a = vkg_input(g, "a", VKG_F32, 2, (int64_t[]){3, 4});
    vkg_tensor w = vkg_constant(g, "w", VKG_F32, 1, (int64_t[]){3}, data);
    assert_int_equal(vkg_rms_norm(g, a, w, 1e-6f), VKG_NONE);
    assert_non_null(strstr(vkg_graph_error(g), "weight"));
    vkg_graph_free(g);

    g = vkg_graph_new();
    a = vkg_input(g, "a", VKG_F32, 2, (int64_t[]){3, 4});
    assert_int_equal(vkg_rms_norm(g, a, VKG_NONE, -1.0f), VKG_NONE);
    vkg_graph_free(g);

    /* vkg_write_rows: x [R, G, A, D] into a state [P >= R G, A, S, D], R indices one after
     * another; a decode step's 3 rows of k and v (G = 2) into a cache of 3 slots is taken */
    static const struct { int64_t planes, x0, heads; int indices, apart; const char *why; } rows[] = {
        {6, 3, 4, 3, 0, NULL},   {5, 3, 4, 3, 0, "P >= rows G"}, {6, 2, 4, 3, 0, "one index for each row"},
        {6, 3, 2, 3, 0, "[rows, G, A, D]"}, {6, 3, 4, 2, 0, "one index for each row"},
        {6, 3, 4, 3, 1, "made one after another"}};
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        g = vkg_graph_new();
        vkg_tensor cache = vkg_state(g, "cache", 4, (int64_t[]){rows[i].planes, 4, 16, 8});
        x = vkg_input(g, "x", VKG_F32, 4, (int64_t[]){rows[i].x0, 2, rows[i].heads, 8});
        vkg_tensor first = vkg_index(g, "pos.0");
        if (rows[i].apart) vkg_input(g, "between", VKG_I32, 1, (int64_t[]){1});
        for (int r = 1; r < rows[i].indices; r++) vkg_index(g, r == 1 ? "pos.1" : "pos.2");
        const vkg_tensor written = vkg_write_rows(g, cache, x, first, 3);
        if (!rows[i].why) {
            assert_int_not_equal(written, VKG_NONE);
        } else {
            assert_int_equal(written, VKG_NONE);
            if (!strstr(vkg_graph_error(g), rows[i].why)) fail_msg("case %zu: %s", i, vkg_graph_error(g));
        }
        vkg_graph_free(g);
    }
}

/* A runtime index that puts a row past the rope table gives that row NaN (on every executor:
 * the kernels never read outside the table), the rows before it their rotation. */
static void test_rope_index_refused(void **state) {
    (void)state;
    enum { T = 3, D = 4, P = 10 };
    vkg_device_options o = {.quiet = 1};
    vkg_device *dev = NULL;
    vkg_error err;
    if (vkg_device_open("cpu", &o, &dev, &err) != VKG_OK) fail_msg("%s", err.message);
    static float table[P * D];
    for (int i = 0; i < P * D; i++) table[i] = i % D < D / 2 ? 1.0f : 0.0f; /* cos 1, sin 0: y = x */
    vkg_graph *g = vkg_graph_new();
    vkg_tensor x = vkg_input(g, "x", VKG_F32, 2, (int64_t[]){T, D});
    vkg_tensor pos = vkg_index(g, "pos");
    vkg_tensor y = vkg_rope(g, x, vkg_constant(g, "cos_sin", VKG_F32, 2, (int64_t[]){P, D}, table), 1, pos);
    assert_int_equal(vkg_output(g, "y", y), VKG_OK);
    vkg_plan *p = NULL;
    vkg_session *s = test_session_for(dev, g, &p);
    float x_data[T * D], got[T * D];
    for (int i = 0; i < T * D; i++) x_data[i] = 1.0f;
    assert_int_equal(vkg_session_set_input(s, x, x_data, sizeof x_data, &err), VKG_OK);
    assert_int_equal(vkg_session_set_index(s, pos, P - T, &err), VKG_OK); /* rows at P - 2, P - 1, P */
    if (vkg_session_run(s, &err) != VKG_OK) fail_msg("%s", err.message);
    assert_int_equal(vkg_session_get_output(s, y, got, sizeof got, &err), VKG_OK);
    for (int i = 0; i < T * D; i++) {
        if (i < (T - 1) * D) assert_true(got[i] == 1.0f);
        else assert_true(isnan(got[i]));
    }
    vkg_session_free(s);
    vkg_plan_free(p);
    vkg_graph_free(g);
    vkg_device_free(dev);
}

/* The keys and values a rope step rotates go into the KV cache from that step ("rope+write": no
 * write step of their own), into slot 1 of 2 at the runtime position, the rest of the cache kept,
 * on the CPU and on Vulkan; a position that would put a row past the cache is refused before the
 * run on both. */
static void rope_writes_the_cache(const char *device) {
    enum { T = 3, H = 4, HKV = 2, B1 = H + 2 * HKV, D = 4, S = 8, P = 16, CACHE = 4 * HKV * S * D };
    vkg_device *dev = vk_test_open_named(device);
    vkg_error err;
    static float table[P * D], x_data[T * B1 * D], before[CACHE], cache[CACHE], heads[B1 * T * D];
    fill(table, P * D, 1);
    fill(x_data, T * B1 * D, 2);
    fill(before, CACHE, 3);
    vkg_graph *g = vkg_graph_new();
    vkg_tensor x = vkg_input(g, "x", VKG_F32, 2, (int64_t[]){T, B1 * D});
    x = vkg_permute(g, vkg_reshape(g, x, 3, (int64_t[]){T, B1, D}), (const int[]){1, 0, 2});
    vkg_tensor pos = vkg_index(g, "pos");
    vkg_tensor table_t = vkg_constant(g, "cos_sin", VKG_F32, 2, (int64_t[]){P, D}, table);
    vkg_tensor y = vkg_rope_heads(g, x, table_t, 0, pos, VKG_NONE, H + HKV);
    vkg_tensor kv = vkg_reshape(g, vkg_slice(g, y, 0, H, 2 * HKV), 4, (int64_t[]){2, HKV, T, D});
    vkg_tensor state = vkg_state(g, "cache", 4, (int64_t[]){4, HKV, S, D});
    vkg_tensor written = vkg_write_at_block(g, state, kv, 2, 0, pos, 0, 2);
    assert_int_equal(vkg_output(g, "heads", y), VKG_OK);
    assert_int_equal(vkg_output(g, "cache_after", vkg_copy(g, written)), VKG_OK);
    vkg_plan *p = NULL;
    vkg_session *s = test_session_for(dev, g, &p);
    int fused = 0;
    for (int i = 0; i < vkg_plan_step_count(p); i++) {
        fused += !strcmp(p->steps[i].label, "rope+write");
        assert_string_not_equal(p->steps[i].label, "write_at");
    }
    assert_int_equal(fused, 1);
    assert_int_equal(vkg_session_set_input(s, vkg_find(g, "x"), x_data, sizeof x_data, &err), VKG_OK);
    assert_int_equal(vkg_session_set_state(s, state, before, sizeof before, &err), VKG_OK);
    assert_int_equal(vkg_session_set_index(s, pos, 2, &err), VKG_OK);
    if (vkg_session_run(s, &err) != VKG_OK) fail_msg("%s", err.message);
    assert_int_equal(vkg_session_get_output(s, y, heads, sizeof heads, &err), VKG_OK);
    assert_int_equal(vkg_session_get_output(s, vkg_find(g, "cache_after"), cache, sizeof cache, &err), VKG_OK);
    for (int plane = 0; plane < 4; plane++)
        for (int h = 0; h < HKV; h++)
            for (int r = 0; r < S; r++)
                for (int i = 0; i < D; i++) {
                    const size_t at = (((size_t)plane * HKV + h) * S + r) * D + i;
                    const int row = r - 2; /* the run's rows at positions 2, 3, 4 */
                    const float want = plane >= 2 && row >= 0 && row < T
                                           ? heads[((size_t)(H + (plane - 2) * HKV + h) * T + row) * D + i]
                                           : before[at];
                    if (cache[at] != want) fail_msg("cache [%d, %d, %d, %d]: %g, want %g", plane, h, r, i, cache[at], want);
                }
    assert_int_equal(vkg_session_set_index(s, pos, S - T + 1, &err), VKG_OK); /* refused on every device */
    assert_int_equal(vkg_session_run(s, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "'pos' holds 6"));
    vkg_session_free(s);
    vkg_plan_free(p);
    vkg_graph_free(g);
    vk_test_close_any(dev);
}
static void test_rope_writes_the_cache_cpu(void **state) { (void)state; rope_writes_the_cache("cpu"); }
static void test_rope_writes_the_cache_vulkan(void **state) { (void)state; rope_writes_the_cache("vulkan"); }

/* ---- the attention layer: rope, grouped heads, a window, a KV cache ------------------------- */

enum { LH = 6, LHKV = 2, LD = 8, LT = 5, LS = 16, LRUNS = 2, LWIN = 6 };

/* The layer as transformers computes it: q and k rotated at their positions, then causal
 * attention within the window over the keys so far. */
static void ref_layer(const float *qs, const float *ks, const float *vs, int run, const double *inv, double *out) {
    const int p0 = run * LT, n = p0 + LT, G = LH / LHKV;
    float *qh = malloc(sizeof(float) * LH * LT * LD), *kh = malloc(sizeof(float) * LHKV * n * LD);
    float *vh = malloc(sizeof(float) * LHKV * n * LD);
    double *o = malloc(sizeof(double) * LH * LT * LD), rot[LD];
    assert_true(qh && kh && vh && o);
    for (int t = 0; t < LT; t++)
        for (int h = 0; h < LH; h++) {
            ref_rotate(qs + ((size_t)p0 + t) * LH * LD + h * LD, 1, LD, p0 + t, inv, rot);
            for (int d = 0; d < LD; d++) qh[((size_t)h * LT + t) * LD + d] = (float)rot[d];
        }
    for (int j = 0; j < n; j++)
        for (int h = 0; h < LHKV; h++) {
            ref_rotate(ks + (size_t)j * LHKV * LD + h * LD, 1, LD, j, inv, rot);
            for (int d = 0; d < LD; d++) {
                kh[((size_t)h * n + j) * LD + d] = (float)rot[d];
                vh[((size_t)h * n + j) * LD + d] = vs[(size_t)j * LHKV * LD + h * LD + d];
            }
        }
    ref_gqa(qh, kh, vh, LHKV, G, LT, n, LD, p0, LWIN, 1.0 / sqrt((double)LD), o);
    for (int h = 0; h < LH; h++) /* back to tokens [T, H D] */
        for (int t = 0; t < LT; t++)
            for (int d = 0; d < LD; d++) out[(size_t)t * LH * LD + h * LD + d] = o[((size_t)h * LT + t) * LD + d];
    free(qh), free(kh), free(vh), free(o);
}

static void layer_on(const char *spec) {
    vkg_device *dev = vk_test_open_named(spec);
    vkg_error err;
    double inv[LD / 2], attn;
    const vkg_rope_config rc = {.type = VKG_ROPE_DEFAULT, .theta = 10000.0, .dim = LD};
    assert_int_equal(vkg_rope_inv_freq(&rc, inv, &attn, &err), VKG_OK);
    static float table[LS * LD];
    vkg_rope_fill_table(inv, LD / 2, attn, LS, table);
    vkg_graph *g = vkg_graph_new();
    vkg_layers L = {.g = g};
    vkg_layers_prefix(&L, "model.layers.0.");
    vkg_tensor q = vkg_input(g, "q", VKG_F32, 2, (int64_t[]){LT, LH * LD});
    vkg_tensor k = vkg_input(g, "k", VKG_F32, 2, (int64_t[]){LT, LHKV * LD});
    vkg_tensor v = vkg_input(g, "v", VKG_F32, 2, (int64_t[]){LT, LHKV * LD});
    const vkg_attention a = {.n_head = LH, .n_kv_head = LHKV, .head_dim = LD, .scale = 1.0f / sqrtf((float)LD),
                             .causal = 1, .mask = VKG_NONE, .window = LWIN,
                             .rope = vkg_constant(g, "rope.cos_sin", VKG_F32, 2, (int64_t[]){LS, LD}, table),
                             .kv_cache = vkg_state(g, "kv_cache", 4, (int64_t[]){2, LHKV, LS, LD}),
                             .pos = vkg_index(g, "pos")};
    vkg_tensor out = vkg_layer_attention(&L, &a, q, 0, k, 0, v, 0, NULL);
    assert_int_equal(vkg_output(g, "out", out), VKG_OK);
    vkg_plan *p = NULL;
    vkg_session *s = test_session_for(dev, g, &p);
    float qs[LRUNS * LT * LH * LD], ks[LRUNS * LT * LHKV * LD], vs[LRUNS * LT * LHKV * LD], got[LT * LH * LD];
    fill(qs, sizeof qs / sizeof *qs, 61), fill(ks, sizeof ks / sizeof *ks, 62), fill(vs, sizeof vs / sizeof *vs, 63);
    for (int r = 0; r < LRUNS; r++) {
        assert_int_equal(vkg_session_set_input(s, q, qs + r * LT * LH * LD, sizeof got, &err), VKG_OK);
        assert_int_equal(vkg_session_set_input(s, k, ks + r * LT * LHKV * LD, LT * LHKV * LD * sizeof(float), &err),
                         VKG_OK);
        assert_int_equal(vkg_session_set_input(s, v, vs + r * LT * LHKV * LD, LT * LHKV * LD * sizeof(float), &err),
                         VKG_OK);
        assert_int_equal(vkg_session_set_index(s, a.pos, r * LT, &err), VKG_OK);
        if (vkg_session_run(s, &err) != VKG_OK) fail_msg("%s", err.message);
        assert_int_equal(vkg_session_get_output(s, out, got, sizeof got, &err), VKG_OK);
        double want[LT * LH * LD];
        ref_layer(qs, ks, vs, r, inv, want);
        expect_close(got, want, LT * LH * LD, 1e-5, "attention with rope, groups and a window");
    }
    vkg_session_free(s);
    vkg_plan_free(p);
    vkg_graph_free(g);
    vk_test_close_any(dev);
}

static void test_layer_cpu(void **state) { (void)state; layer_on("cpu"); }
static void test_layer_vulkan(void **state) { (void)state; layer_on("vulkan"); }

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rope_inv_freq),        cmocka_unit_test(test_rope_far_positions),
        cmocka_unit_test(test_rope_in_place_batches), cmocka_unit_test(test_rms_norm),
        cmocka_unit_test(test_swiglu_binary),        cmocka_unit_test(test_swiglu_epilogue),
        cmocka_unit_test(test_attention_gqa_window), cmocka_unit_test(test_builder_refusals),
        cmocka_unit_test(test_rope_index_refused),   cmocka_unit_test(test_layer_cpu),
        cmocka_unit_test(test_layer_vulkan),
        cmocka_unit_test(test_rope_writes_the_cache_cpu), cmocka_unit_test(test_rope_writes_the_cache_vulkan),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
