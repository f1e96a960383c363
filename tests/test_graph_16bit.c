/* 16-bit constants (VKG_F16, VKG_BF16) through the public API: accepted as constants only, shown
 * in dumps, read where they may be (matmul's b, an embedding table) and refused with a message
 * everywhere else; the plan holds them at 2 bytes and flags the steps that read them.  On the CPU
 * a matmul or embedding over 16-bit weights is bit for bit the same one over the weights widened
 * to f32 beforehand (same values, same sums in the same order); on Vulkan it matches the CPU
 * through every shader family that can read them: texel buffers (lavapipe's default), and the
 * storage-buffer shaders GPUs take (shared-memory tiles, split-K matrix-vector), forced here by
 * the tuning. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/half.h"
#include "graph/plan.h"
#include "support/test_util.h"
#include "support/vk_test.h"
#include "vkgraph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static vkg_device *cpu, *gpu;

static int setup(void **state) {
    (void)state;
    return vk_test_pair_setup(&cpu, &gpu);
}

static int teardown(void **state) {
    (void)state;
    return vk_test_pair_teardown(&cpu, &gpu);
}

static void expect_refused(vkg_graph *g, vkg_tensor t, const char *part1, const char *part2) {
    assert_int_equal(t, VKG_NONE);
    assert_int_not_equal(vkg_graph_status(g), VKG_OK);
    const char *m = vkg_graph_error(g);
    if (!strstr(m, part1) || (part2 && !strstr(m, part2))) fail_msg("message \"%s\" lacks \"%s\" / \"%s\"", m, part1, part2 ? part2 : "");
}

static void test_dtype_table(void **state) {
    (void)state;
    assert_int_equal(vkg_dtype_size(VKG_F32), 4);
    assert_int_equal(vkg_dtype_size(VKG_I32), 4);
    assert_int_equal(vkg_dtype_size(VKG_F16), 2);
    assert_int_equal(vkg_dtype_size(VKG_BF16), 2);
    assert_int_equal(vkg_dtype_size((vkg_dtype)9), 0);
    assert_string_equal(vkg_dtype_name(VKG_F16), "f16");
    assert_string_equal(vkg_dtype_name(VKG_BF16), "bf16");
    assert_string_equal(vkg_dtype_name((vkg_dtype)-1), "?");
}

/* Where a 16-bit tensor may not go, the builder says so, naming the dtype. */
static void test_refused_where_unreadable(void **state) {
    (void)state;
    static const uint16_t w[64];
    const int64_t s88[2] = {8, 8}, s8[1] = {8};
    struct { const char *what; int which; } cases[] = {{"input", 0}, {"add", 1}, {"matmul a", 2}, {"matmul bias", 3},
                                                       {"layernorm gamma", 4}, {"concat", 5}, {"copy", 6},
                                                       {"softmax", 7}, {"gelu", 8}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        vkg_graph *g = vkg_graph_new();
        vkg_tensor x = vkg_input(g, "x", VKG_F32, 2, s88);
        vkg_tensor h = vkg_constant(g, "h", VKG_F16, 2, s88, w), hb = vkg_constant(g, "hb", VKG_BF16, 1, s8, w);
        assert_int_not_equal(h, VKG_NONE);
        switch (cases[i].which) {
        case 0: expect_refused(g, vkg_input(g, "y", VKG_F16, 2, s88), "f16 is for constants", NULL); break;
        case 1: expect_refused(g, vkg_add(g, x, h), "is f16", "matmul's b"); break;
        case 2: expect_refused(g, vkg_matmul(g, h, x, VKG_NONE, 0), "operand a ('h') is f16", NULL); break;
        case 3: expect_refused(g, vkg_matmul(g, x, h, hb, 0), "operand bias ('hb') is bf16", NULL); break;
        case 4: expect_refused(g, vkg_layernorm(g, x, hb, VKG_NONE, 1e-5f), "gamma ('hb') is bf16", NULL); break;
        case 5: expect_refused(g, vkg_concat(g, h, h, 0), "concat", "16-bit"); break;
        case 6: expect_refused(g, vkg_copy(g, h), "copy", "is f16"); break;
        case 7: expect_refused(g, vkg_softmax(g, h), "softmax", "is f16"); break;
        default: expect_refused(g, vkg_gelu(g, h), "gelu", "is f16"); break;
        }
        vkg_graph_free(g);
    }
    /* A view of a 16-bit weight as an output would need a copy: refused at compile time. */
    vkg_graph *g = vkg_graph_new();
    vkg_tensor h = vkg_constant(g, "h", VKG_F16, 2, s88, w);
    const int64_t flat[1] = {64};
    vkg_output(g, "flat", vkg_reshape(g, h, 1, flat));
    vkg_plan *p = NULL;
    vkg_error err = {0};
    assert_int_equal(vkg_plan_compile(g, NULL, &p, &err), VKG_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.message, "16-bit tensors are read in place only"));
    vkg_graph_free(g);
}

/* 1 when the line of text starting with prefix holds needle. */
static int line_has(const char *text, const char *prefix, const char *needle) {
    const char *line = test_line_with(text, prefix), *end = strchr(line, '\n');
    const char *hit = strstr(line, needle);
    return hit && (!end || hit < end);
}

/* The plan holds a 16-bit B at 2 bytes an element, flags its matmul, and dumps say f16. */
static void test_plan_and_dumps(void **state) {
    (void)state;
    static uint16_t w[24 * 40];
    vkg_graph *g = vkg_graph_new();
    const int64_t xs[2] = {5, 24}, ws[2] = {24, 40}, ts[2] = {40, 24}, is[1] = {3};
    vkg_tensor x = vkg_input(g, "x", VKG_F32, 2, xs);
    vkg_tensor b = vkg_constant(g, "w", VKG_F16, 2, ws, w), t = vkg_constant(g, "table", VKG_BF16, 2, ts, w);
    vkg_output(g, "y", vkg_matmul(g, x, b, VKG_NONE, 0));
    vkg_output(g, "e", vkg_embedding(g, t, vkg_input(g, "ids", VKG_I32, 1, is)));
    assert_int_equal(vkg_graph_status(g), VKG_OK);
    vkg_plan *p = NULL;
    vkg_error err = {0};
    if (vkg_plan_compile(g, NULL, &p, &err) != VKG_OK) fail_msg("%s", err.message);
    vkg_memory_stats ms;
    vkg_plan_memory(p, &ms);
    assert_int_equal(ms.constant_bytes, 2 * (24 * 40) * 2);
    int matmuls = 0, embeddings = 0;
    for (int i = 0; i < p->n_steps; i++) {
        if (p->steps[i].kernel == VKG_KERNEL_MATMUL) {
            assert_true(p->steps[i].params.matmul.flags & VKG_MATMUL_B_F16);
            assert_int_equal(p->steps[i].bind[1].bytes, 24 * 40 * 2);
            matmuls++;
        }
        if (p->steps[i].kernel == VKG_KERNEL_EMBEDDING) {
            assert_int_equal(p->steps[i].params.embedding.flags, VKG_EMBEDDING_TABLE_BF16);
            embeddings++;
        }
    }
    assert_int_equal(matmuls, 1);
    assert_int_equal(embeddings, 1);
    test_capture cap;
    vkg_graph_dump(g, test_capture_begin(&cap), VKG_DUMP_TEXT);
    const char *text = test_capture_end(&cap);
    assert_true(line_has(text, "%1 ", " f16 "));
    assert_true(line_has(text, "%2 ", " bf16 "));
    free((void *)text);
    vkg_plan_dump(p, test_capture_begin(&cap), VKG_DUMP_TEXT);
    text = test_capture_end(&cap);
    assert_non_null(strstr(text, "1920 bytes f16"));
    assert_non_null(strstr(text, "1920 bytes bf16"));
    free((void *)text);
    vkg_plan_dump(p, test_capture_begin(&cap), VKG_DUMP_JSON);
    text = test_capture_end(&cap);
    assert_non_null(strstr(text, "\"dtype\": \"f16\""));
    free((void *)text);
    /* Compiled for a device that cannot read 16 bits, the same weights are held as f32. */
    vkg_plan_free(p);
    vkg_compile_options co;
    vkg_compile_options_default(&co);
    co.read_16bit = 0;
    if (vkg_plan_compile(g, &co, &p, &err) != VKG_OK) fail_msg("%s", err.message);
    vkg_plan_memory(p, &ms);
    assert_int_equal(ms.constant_bytes, 2 * (24 * 40) * 4);
    vkg_plan_dump(p, test_capture_begin(&cap), VKG_DUMP_TEXT);
    text = test_capture_end(&cap);
    assert_non_null(strstr(text, "3840 bytes f16 as f32"));
    free((void *)text);
    vkg_plan_free(p);
    vkg_graph_free(g);
}

/* One matmul's shapes: x [batch, M, K] @ w ([K, N], or [N, K] transposed), w a constant. */
typedef struct mm_case { int64_t batch, M, N, K; int transpose_b; } mm_case;

/* Runs y = x @ w (+ bias) on dev with w as given (f32 data or 16-bit bits), into y. */
static void run_matmul(vkg_device *dev, const mm_case *c, vkg_dtype dt, const void *w, const float *x,
                       const float *bias, float *y) {
    vkg_graph *g = vkg_graph_new();
    const int64_t xs[3] = {c->batch, c->M, c->K}, ws[2] = {c->transpose_b ? c->N : c->K, c->transpose_b ? c->K : c->N};
    const int64_t bs[1] = {c->N};
    vkg_tensor xt = vkg_input(g, "x", VKG_F32, 3, xs);
    vkg_tensor wt = vkg_constant(g, "w", dt, 2, ws, w), bt = vkg_constant(g, "bias", VKG_F32, 1, bs, bias);
    vkg_tensor yt = vkg_matmul(g, xt, wt, bt, c->transpose_b ? VKG_TRANSPOSE_B : 0);
    vkg_output(g, "y", yt);
    vkg_compile_options co;
    vkg_compile_options_default(&co);
    vkg_device_compile_options(dev, &co);
    vkg_plan *p = NULL;
    vkg_session *s = NULL;
    vkg_error err = {0};
    size_t nx = (size_t)(c->batch * c->M * c->K), ny = (size_t)(c->batch * c->M * c->N);
    if (vkg_plan_compile(g, &co, &p, &err) != VKG_OK || vkg_session_new(dev, p, &s, &err) != VKG_OK ||
        vkg_session_set_input(s, xt, x, nx * 4, &err) != VKG_OK || vkg_session_run(s, &err) != VKG_OK ||
        vkg_session_get_output(s, yt, y, ny * 4, &err) != VKG_OK)
        fail_msg("%s", err.message);
    vkg_session_free(s);
    vkg_plan_free(p);
    vkg_graph_free(g);
}

/* On lavapipe, where A's rows are whole vec4s (K % 4 == 0) and B's whole texels of eight
 * elements, B is read eight elements per texel: along n {2, 17, 72, 40} and {1, 9, 136, 44}
 * (partial workgroups of columns, rows past M), along k (K % 8 == 0) {1, 16, 130, 64},
 * {1, 40, 96, 72}, {3, 20, 128, 64}, {2, 9, 40, 24}, and M == 1 along k through the shader whose
 * lanes share rows {1, 1, 256, 128}, {1, 1, 8, 3} (one texel per row: most lanes walk nothing,
 * fewer rows than a block), {3, 1, 64, 130} (batches, a partial last span) and {1, 1, 768, 300};
 * with M past a workgroup of tall blocks (16 rows per invocation) {1, 130, 64, 40} along k and
 * {1, 129, 72, 24} along n; the others take texels of four or single elements, or (M == 1 along
 * n) the matrix-vector shader. */
static const mm_case mm_cases[] = {
    {1, 1, 37, 19, 0},  {1, 1, 37, 19, 1},  {1, 3, 64, 33, 0},   {1, 16, 130, 64, 1}, {1, 17, 70, 48, 0},
    {1, 40, 96, 72, 1}, {2, 33, 65, 31, 0}, {3, 20, 128, 64, 1}, {1, 1, 256, 128, 1}, {1, 1, 256, 128, 0},
    {2, 17, 72, 40, 0}, {1, 9, 136, 44, 0}, {2, 9, 40, 24, 1},   {1, 1, 8, 3, 1},     {3, 1, 64, 130, 1},
    {1, 1, 768, 300, 1},    {1, 130, 64, 40, 1}, {1, 129, 72, 24, 0},
};

/* Every case in f16 and bf16: the CPU's result over 16-bit w is its result over w widened, bit for
 * bit; Vulkan's agrees with the CPU's (nmse 1e-10 here: small sums). */
static void check_matmuls(vkg_device *vk) {
    vkg_rng rng;
    vkg_rng_seed(&rng, 16);
    for (size_t i = 0; i < sizeof mm_cases / sizeof mm_cases[0]; i++)
        for (int bf = 0; bf < 2; bf++) {
            const mm_case *c = &mm_cases[i];
            size_t nw = (size_t)(c->K * c->N), nx = (size_t)(c->batch * c->M * c->K), ny = (size_t)(c->batch * c->M * c->N);
            float *wide = malloc(nw * 4), *x = malloc(nx * 4), *bias = malloc((size_t)c->N * 4);
            float *want = malloc(ny * 4), *got = malloc(ny * 4);
            uint16_t *w16 = malloc(nw * 2);
            vkg_rng_fill_normal(&rng, x, nx, 1.0f);
            vkg_rng_fill_normal(&rng, bias, (size_t)c->N, 1.0f);
            vkg_rng_fill_normal(&rng, wide, nw, 1.0f);
            for (size_t k = 0; k < nw; k++) {
                w16[k] = bf ? vkg_f32_to_bf16(wide[k]) : vkg_f32_to_f16(wide[k]);
                wide[k] = bf ? vkg_bf16_to_f32(w16[k]) : vkg_f16_to_f32(w16[k]);
            }
            const vkg_dtype dt = bf ? VKG_BF16 : VKG_F16;
            if (!vk) {
                run_matmul(cpu, c, VKG_F32, wide, x, bias, want);
                run_matmul(cpu, c, dt, w16, x, bias, got);
                if (memcmp(want, got, ny * 4) != 0)
                    fail_msg("CPU, case %zu (%s): 16-bit B differs from B widened", i, vkg_dtype_name(dt));
            } else {
                run_matmul(cpu, c, dt, w16, x, bias, want);
                run_matmul(vk, c, dt, w16, x, bias, got);
                double e = test_nmse(got, want, ny);
                if (!(e <= 1e-10)) fail_msg("Vulkan, case %zu (%s): nmse %.3e against the CPU", i, vkg_dtype_name(dt), e);
            }
            free(wide), free(x), free(bias), free(want), free(got), free(w16);
        }
}

static void test_cpu_matmul_equals_widened(void **state) {
    (void)state;
    check_matmuls(NULL);
}

/* Each way the Vulkan executor reads a 16-bit B: its default tuning, M == 1 along k without the
 * shader whose lanes share rows, texels of four elements only, then the storage-buffer shaders
 * with and without texel buffers for A (a GPU's path). */
static void test_vulkan_matmul_every_shader(void **state) {
    (void)state;
    if (!gpu) skip();
    vkg_vk_context *c = vk_test_context(gpu);
    const vkg_vk_tuning saved = c->tuning;
    check_matmuls(gpu);
    c->tuning.matvec_texelt = 0;
    check_matmuls(gpu);
    c->tuning.texel_16bit_x8 = 0;
    check_matmuls(gpu);
    c->tuning.texel_16bit = 0; /* B 16-bit: tiled and matrix-vector storage shaders */
    check_matmuls(gpu);
    c->tuning.matmul_texel = 0;
    check_matmuls(gpu);
    c->tuning = saved;
}

/* Embedding rows widened exactly, on both executors, ids out of range giving zero rows. */
static void test_embedding_exact(void **state) {
    (void)state;
    enum { V = 50, C = 37, N = 9 };
    static uint16_t table[V * C];
    static float wide[V * C];
    const int32_t ids[N] = {0, 49, 3, -1, 50, 7, 7, 20, 1};
    vkg_device *devs[2] = {cpu, gpu};
    for (int bf = 0; bf < 2; bf++)
        for (int d = 0; d < 2; d++) {
            if (!devs[d]) continue;
            vkg_rng rng;
            vkg_rng_seed(&rng, 7);
            for (int i = 0; i < V * C; i++) {
                float f = vkg_rng_normal(&rng);
                table[i] = bf ? vkg_f32_to_bf16(f) : vkg_f32_to_f16(f);
                wide[i] = bf ? vkg_bf16_to_f32(table[i]) : vkg_f16_to_f32(table[i]);
            }
            vkg_graph *g = vkg_graph_new();
            const int64_t ts[2] = {V, C}, is[1] = {N};
            vkg_tensor idt = vkg_input(g, "ids", VKG_I32, 1, is);
            vkg_tensor e = vkg_embedding(g, vkg_constant(g, "t", bf ? VKG_BF16 : VKG_F16, 2, ts, table), idt);
            vkg_output(g, "e", e);
            vkg_compile_options co;
            vkg_compile_options_default(&co);
            vkg_device_compile_options(devs[d], &co);
            vkg_plan *p = NULL;
            vkg_session *s = NULL;
            vkg_error err = {0};
            float out[N * C];
            if (vkg_plan_compile(g, &co, &p, &err) != VKG_OK || vkg_session_new(devs[d], p, &s, &err) != VKG_OK ||
                vkg_session_set_input(s, idt, ids, sizeof ids, &err) != VKG_OK || vkg_session_run(s, &err) != VKG_OK ||
                vkg_session_get_output(s, e, out, sizeof out, &err) != VKG_OK)
                fail_msg("%s", err.message);
            for (int i = 0; i < N; i++)
                for (int j = 0; j < C; j++) {
                    float want = ids[i] >= 0 && ids[i] < V ? wide[ids[i] * C + j] : 0.0f;
                    if (memcmp(&out[i * C + j], &want, 4) != 0)
                        fail_msg("%s, %s: row %d column %d is %g, expected %g", d ? "Vulkan" : "CPU", bf ? "bf16" : "f16", i,
                                 j, (double)out[i * C + j], (double)want);
                }
            vkg_session_free(s);
            vkg_plan_free(p);
            vkg_graph_free(g);
        }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dtype_table),
        cmocka_unit_test(test_refused_where_unreadable),
        cmocka_unit_test(test_plan_and_dumps),
        cmocka_unit_test(test_cpu_matmul_equals_widened),
        cmocka_unit_test(test_vulkan_matmul_every_shader),
        cmocka_unit_test(test_embedding_exact),
    };
    return vk_test_exit_status(cmocka_run_group_tests(tests, setup, teardown));
}
