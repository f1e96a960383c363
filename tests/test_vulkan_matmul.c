/* The matmul shaders against the CPU reference kernel (src/cpu/kernel_matmul.c), on hand-made
 * one-step plans: shapes of 1, primes and non-multiples of every tile, transposed operands,
 * broadcast batches, element offsets inside bindings, a binding at a non-zero byte offset, every
 * epilogue (bias, each activation, residual, residual aliasing C), and the matrix-vector paths, each under
 * several tunings (texel register blocks, shared-memory tiles, split-K matrix-vector, the texel
 * matrix-vector shader's slices, texels per invocation and barriers, and the row blocks, spans
 * and workgroups of the one whose lanes share rows). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/kernels.h"
#include "support/test_util.h"
#include "support/vk_test.h"
#include "vulkan/vk_session.h"

typedef struct mm_case {
    uint32_t M, N, K, batch0, batch1;
    int trans_a, trans_b;
    int broadcast_b;      /* B shared by every batch entry (strides 0)                     */
    uint32_t flags;       /* VKG_MATMUL_*                                                  */
    int residual_in_c;    /* R is C itself: C holds the residual beforehand                */
    int padded;           /* leading dimensions and offsets rounded up to multiples of 4:
                             the layouts the vec4 texel shaders take                       */
    uint32_t activation;  /* the epilogue's VKG_UNARY_* activation; 0 (copy): none         */
} mm_case;

enum { C_OFF = 5, BIAS_OFF = 2, R_OFF = 1 };

/* The B region starts with a 256-byte pad, bound at byte offset 256, to exercise binding offsets. */
#define B_BIND_OFFSET 256

static uint32_t round4(uint32_t v, int padded) { return padded ? (v + 3) / 4 * 4 : v; }

static void run_case(vkg_device *d, const mm_case *mc) {
    const uint32_t M = mc->M, N = mc->N, K = mc->K, nb = mc->batch0 * mc->batch1;
    const int pad = mc->padded;
    /* A [nb][M][lda] (or [nb][K][lda] transposed), B [nb][K][ldb] (or [nb][N][ldb] transposed) */
    uint32_t lda = mc->trans_a ? round4(M, pad) : round4(K, pad), a_rows = mc->trans_a ? K : M;
    uint32_t ldb = mc->trans_b ? round4(K, pad) : round4(N, pad), b_rows = mc->trans_b ? N : K;
    uint32_t a_off = pad ? 4 : 3, b_off = pad ? 4 : 0;
    vkg_matmul_params p = {0};
    p.M = M, p.N = N, p.K = K, p.batch0 = mc->batch0, p.batch1 = mc->batch1;
    p.a_offset = a_off;
    p.a_stride_m = mc->trans_a ? 1 : lda;
    p.a_stride_k = mc->trans_a ? lda : 1;
    p.a_stride_b1 = a_rows * lda, p.a_stride_b0 = a_rows * lda * mc->batch1;
    p.b_offset = b_off;
    p.b_stride_k = mc->trans_b ? 1 : ldb;
    p.b_stride_n = mc->trans_b ? ldb : 1;
    p.b_stride_b1 = mc->broadcast_b ? 0 : b_rows * ldb;
    p.b_stride_b0 = mc->broadcast_b ? 0 : b_rows * ldb * mc->batch1;
    p.c_offset = C_OFF, p.c_stride_m = N, p.c_stride_b1 = M * N, p.c_stride_b0 = M * N * mc->batch1;
    p.bias_offset = BIAS_OFF;
    p.r_offset = mc->residual_in_c ? C_OFF : R_OFF;
    p.r_stride_m = N, p.r_stride_b1 = M * N, p.r_stride_b0 = M * N * mc->batch1;
    p.flags = mc->flags;
    p.activation = mc->activation;

    size_t na = a_off + (size_t)nb * a_rows * lda, nbm = b_off + (size_t)(mc->broadcast_b ? 1 : nb) * b_rows * ldb;
    size_t nc = C_OFF + (size_t)nb * M * N, nbias = BIAS_OFF + N, nr = R_OFF + (size_t)nb * M * N;
    float *a = malloc(na * 4), *b = calloc(B_BIND_OFFSET / 4 + nbm, 4), *c = malloc(nc * 4), *want = malloc(nc * 4);
    float *bias = malloc(nbias * 4), *r = malloc(nr * 4);
    assert_true(a && b && c && want && bias && r);
    vk_test_fill(a, na, 1 + M, 1.0f);
    vk_test_fill(b + B_BIND_OFFSET / 4, nbm, 2 + N, 1.0f);
    vk_test_fill(bias, nbias, 3, 0.5f);
    vk_test_fill(r, nr, 4, 1.0f);
    vk_test_fill(c, nc, 5, 1.0f);   /* the residual when it lives in C; else overwritten */
    memcpy(want, c, nc * 4);
    vkg_cpu_matmul(&p, a, b + B_BIND_OFFSET / 4, want, bias, mc->residual_in_c ? want : r, 0, vkg_cpu_matmul_units(&p));
    vk_test_plan tp;
    vk_test_plan_init(&tp);
    int ra = vk_test_region(&tp, VKG_REGION_INPUT, na * 4, NULL);
    int rb = vk_test_region(&tp, VKG_REGION_CONSTANT, B_BIND_OFFSET + nbm * 4, b);
    int rc = vk_test_region(&tp, VKG_REGION_OUTPUT, nc * 4, NULL);
    int rbias = vk_test_region(&tp, VKG_REGION_CONSTANT, nbias * 4, bias);
    int rr = vk_test_region(&tp, VKG_REGION_INPUT, nr * 4, NULL);
    vkg_step *s = vk_test_step(&tp, VKG_KERNEL_MATMUL);
    s->params.matmul = p;
    vk_test_bind(&tp, s, 0, ra, 0);
    vk_test_bind(&tp, s, 1, rb, 0);
    s->bind[1].offset = B_BIND_OFFSET, s->bind[1].bytes = nbm * 4;
    vk_test_bind(&tp, s, 2, rc, 1);
    if (mc->flags & VKG_MATMUL_BIAS) vk_test_bind(&tp, s, 3, rbias, 0);
    if (mc->flags & VKG_MATMUL_RESIDUAL) vk_test_bind(&tp, s, 4, mc->residual_in_c ? rc : rr, 0);

    /* the texel path takes the vec4 shaders exactly for the padded layouts, the matrix-vector ones
     * up to 8 rows */
    vkg_vk_context *ctx = vk_test_context(d);
    vkg_vk_shader sh;
    uint32_t spec[VKG_VK_MAX_SPEC], n_spec, groups[3];
    assert_int_equal(vkg_vk_step_shader(ctx, s, &sh, spec, &n_spec, groups, NULL), VKG_OK);
    if (ctx->tuning.matmul_texel && ctx->tuning.matvec_texel && M <= 8 && pad && !mc->trans_b)
        assert_int_equal(sh, VKG_SH_MATVEC_TEXEL);
    else if (ctx->tuning.matmul_texel && ctx->tuning.matvec_texelt && M <= 8 && pad && mc->trans_b && !mc->trans_a &&
             K % 4 == 0)
        assert_int_equal(sh, VKG_SH_MATVEC_TEXELT);
    else if (ctx->tuning.matmul_texel)
        assert_int_equal(sh, !pad ? VKG_SH_MATMUL_TEXEL : mc->trans_b ? VKG_SH_MATMUL_TEXEL4T : VKG_SH_MATMUL_TEXEL4);
    else
        assert_int_equal(sh, M == 1 ? VKG_SH_MATVEC : VKG_SH_MATMUL_TILED);

    void *host[16] = {0};
    host[ra] = a, host[rc] = c, host[rr] = r;
    vk_test_run(d, &tp.plan, host, NULL);
    double e = test_nmse(c, want, nc);
    if (!(e < 1e-10))
        fail_msg("matmul %ux%ux%u batch %ux%u ta %d tb %d bcast %d flags %u act %u alias %d padded %d: nmse %g "
                 "(c[%d] %g want %g)", M, N, K, mc->batch0, mc->batch1, mc->trans_a, mc->trans_b, mc->broadcast_b,
                 mc->flags, mc->activation, mc->residual_in_c, pad, e, C_OFF, c[C_OFF], want[C_OFF]);
    free(a), free(b), free(c), free(want), free(bias), free(r);
}

static const mm_case cases[] = {
    /* any layout: the float texel shader (texel path) or tiles (GPU path) */
    {1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0},
    {7, 13, 5, 1, 1, 0, 0, 0, VKG_MATMUL_BIAS, 0, 0, 0},
    {64, 64, 64, 1, 1, 0, 0, 0, 0, 0, 0, 0},
    {65, 130, 33, 1, 1, 0, 0, 0, VKG_MATMUL_BIAS | VKG_MATMUL_RESIDUAL, 0, 0, VKG_UNARY_GELU},
    {17, 9, 40, 2, 3, 1, 0, 1, 0, 0, 0, VKG_UNARY_GELU_ERF},
    {9, 17, 23, 3, 1, 0, 1, 0, VKG_MATMUL_RESIDUAL, 1, 0, 0},
    {31, 5, 70, 1, 2, 1, 1, 0, VKG_MATMUL_BIAS | VKG_MATMUL_RESIDUAL, 1, 0, 0},
    /* vec4 layouts, with k, n and m tails */
    {64, 64, 64, 1, 1, 0, 0, 0, 0, 0, 1, 0},
    {37, 50, 29, 1, 1, 0, 0, 0, VKG_MATMUL_BIAS, 0, 1, VKG_UNARY_SILU},
    {37, 50, 31, 2, 2, 0, 1, 0, VKG_MATMUL_RESIDUAL, 1, 1, 0},
    {13, 19, 6, 3, 1, 0, 1, 1, VKG_MATMUL_BIAS, 0, 1, VKG_UNARY_RELU},
    {70, 9, 130, 1, 1, 0, 0, 1, VKG_MATMUL_RESIDUAL, 0, 1, 0},
    /* M past a workgroup of tall blocks (mm_tm_tall rows per invocation), with a partial one */
    {130, 37, 29, 1, 1, 0, 0, 0, VKG_MATMUL_BIAS | VKG_MATMUL_RESIDUAL, 0, 1, VKG_UNARY_GELU},
    {131, 20, 36, 2, 1, 0, 1, 0, VKG_MATMUL_RESIDUAL, 1, 1, 0},
    /* M == 1: matrix-vector (padded with B along n: matvec_texel.glsl, K tails of 1 to 3 rows, a
     * partial last texel of columns) */
    {1, 300, 77, 1, 1, 0, 0, 0, VKG_MATMUL_BIAS, 0, 0, VKG_UNARY_QUICK_GELU},
    {1, 37, 100, 2, 3, 0, 1, 0, 0, 0, 0, 0},
    {1, 70, 9, 1, 1, 1, 0, 0, VKG_MATMUL_RESIDUAL, 1, 0, 0},
    {1, 300, 77, 1, 1, 0, 0, 0, VKG_MATMUL_BIAS, 0, 1, VKG_UNARY_GELU_ERF},
    {1, 37, 101, 2, 3, 0, 1, 0, VKG_MATMUL_RESIDUAL, 1, 1, VKG_UNARY_GELU},
    {1, 129, 3, 1, 1, 0, 0, 1, 0, 0, 1, 0},
    {1, 1, 1, 1, 1, 0, 0, 0, VKG_MATMUL_BIAS, 0, 1, 0},
    {1, 768, 769, 1, 1, 0, 0, 0, VKG_MATMUL_BIAS | VKG_MATMUL_RESIDUAL, 0, 1, VKG_UNARY_GELU},
    {1, 2301, 66, 2, 1, 0, 0, 0, VKG_MATMUL_RESIDUAL, 1, 1, 0},
    /* 2 to 8 rows, the same shader (a batch's decode step) */
    {3, 300, 77, 1, 1, 0, 0, 0, VKG_MATMUL_BIAS, 0, 1, VKG_UNARY_GELU},
    {8, 37, 101, 2, 1, 0, 0, 0, VKG_MATMUL_RESIDUAL, 1, 1, 0},
    /* M == 1 padded with B along k and K % 4 == 0: matvec_texelt.glsl (one texel per row, so most
     * lanes walk nothing; fewer rows than a block; batches with B shared; a partial last span) */
    {1, 3, 4, 1, 1, 0, 1, 0, VKG_MATMUL_BIAS, 0, 1, 0},
    {1, 37, 100, 2, 3, 0, 1, 0, VKG_MATMUL_RESIDUAL, 0, 1, VKG_UNARY_SILU},
    {1, 130, 12, 3, 1, 0, 1, 1, VKG_MATMUL_BIAS | VKG_MATMUL_RESIDUAL, 1, 1, VKG_UNARY_GELU},
    {1, 300, 768, 1, 1, 0, 1, 0, VKG_MATMUL_BIAS, 0, 1, VKG_UNARY_GELU},
};

static void run_all_cases(vkg_device *d) {
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(d, &cases[i]);
}

static void test_default_tuning(void **state) {
    vkg_device *d = vk_test_device(state);
    run_all_cases(d);
}

static void set_tuning(vkg_vk_context *c, int texel, uint32_t wg_x, uint32_t wg_y, uint32_t tm, uint32_t tn,
                       uint32_t bk, uint32_t mv_wg, uint32_t mv_cols, uint32_t mv_tn) {
    c->tuning.matmul_texel = texel;
    c->tuning.mm_wg_x = wg_x, c->tuning.mm_wg_y = wg_y, c->tuning.mm_tm = tm, c->tuning.mm_tn = tn;
    c->tuning.mm_bk = bk, c->tuning.mv_wg = mv_wg, c->tuning.mv_cols = mv_cols, c->tuning.mv_tn = mv_tn;
}

static void test_tiled(void **state) {
    vkg_device *d = vk_test_device(state);
    vkg_vk_context *c = vk_test_context(d);
    vkg_vk_tuning saved = c->tuning;
    set_tuning(c, 0, 16, 4, 2, 3, 8, 64, 16, 4);
    run_all_cases(d);
    c->tuning = saved;
}

static void test_texel_odd_blocks(void **state) {
    vkg_device *d = vk_test_device(state);
    vkg_vk_tuning saved = vk_test_context(d)->tuning;
    set_tuning(vk_test_context(d), 1, 2, 3, 5, 12, 4, 5, 5, 12);
    run_all_cases(d);
    vk_test_context(d)->tuning = saved;
}

/* matvec_texel.glsl under other shapes: slices of k that get no rows (K < 4 x split), odd texels
 * per invocation, no barriers, a single slice, and texels halved for a minimum of workgroups; for
 * 1 row and for several (mvx_split_rows). */
static void test_matvec_texel_tunings(void **state) {
    vkg_device *d = vk_test_device(state);
    vkg_vk_context *c = vk_test_context(d);
    if (!c->tuning.matmul_texel || !c->tuning.matvec_texel) skip();
    vkg_vk_tuning saved = c->tuning;
    static const struct { uint32_t wg, split, split_rows, tn, min_groups; int sync; } tunings[] = {
        {24, 3, 6, 3, 1, 1}, {8, 1, 8, 1, 1, 0}, {64, 2, 8, 4, 8, 1}, {32, 4, 1, 2, 1, 0}};
    for (size_t i = 0; i < sizeof tunings / sizeof tunings[0]; i++) {
        c->tuning.mvx_wg = tunings[i].wg, c->tuning.mvx_split = tunings[i].split, c->tuning.mvx_tn = tunings[i].tn;
        c->tuning.mvx_split_rows = tunings[i].split_rows;
        c->tuning.mvx_min_groups = tunings[i].min_groups, c->tuning.mvx_sync = tunings[i].sync;
        assert_int_equal(vkg_vk_tuning_check(c, &c->tuning, NULL), VKG_OK);
        for (size_t j = 0; j < sizeof cases / sizeof cases[0]; j++)
            if (cases[j].M <= 8 && cases[j].padded && !cases[j].trans_b) run_case(d, &cases[j]);
    }
    c->tuning = saved;
}

/* matvec_texelt.glsl under other shapes: blocks of 3 rows in spans of 5, one span per workgroup;
 * three subgroups per workgroup taking 3 spans; more rows in a block than lanes (each lane stores
 * several); blocks of one row.  A workgroup that is not whole subgroups is refused by the tuning
 * check (a partial subgroup would leave its missing lanes' texels unread). */
static void test_matvec_texelt_tunings(void **state) {
    vkg_device *d = vk_test_device(state);
    vkg_vk_context *c = vk_test_context(d);
    if (!c->tuning.matmul_texel || !c->tuning.matvec_texelt) skip();
    vkg_vk_tuning saved = c->tuning;
    const uint32_t sg = vkg_vk_subgroup_size(c);
    c->tuning.mvt_wg = sg + sg / 2;
    assert_int_not_equal(vkg_vk_tuning_check(c, &c->tuning, NULL), VKG_OK);
    const struct { uint32_t wg, rows, blocks, spans; } tunings[] = {
        {sg, 3, 5, 1}, {3 * sg, 8, 2, 3}, {sg, 2 * sg, 2, 4}, {4 * sg, 1, 8, 2}};
    for (size_t i = 0; i < sizeof tunings / sizeof tunings[0]; i++) {
        c->tuning.mvt_wg = tunings[i].wg, c->tuning.mvt_rows = tunings[i].rows;
        c->tuning.mvt_blocks = tunings[i].blocks, c->tuning.mvt_spans = tunings[i].spans;
        assert_int_equal(vkg_vk_tuning_check(c, &c->tuning, NULL), VKG_OK);
        for (size_t j = 0; j < sizeof cases / sizeof cases[0]; j++)
            if (cases[j].M == 1 && cases[j].padded && cases[j].trans_b) run_case(d, &cases[j]);
    }
    c->tuning = saved;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_tuning),
        cmocka_unit_test(test_tiled),
        cmocka_unit_test(test_texel_odd_blocks),
        cmocka_unit_test(test_matvec_texel_tunings),
        cmocka_unit_test(test_matvec_texelt_tunings),
    };
    return vk_test_exit_status(cmocka_run_group_tests(tests, vk_test_group_setup, vk_test_group_teardown));
}
