/* The element-wise, row and embedding shaders against the CPU executor, on hand-made one-step
 * plans run on both devices: broadcasting and strided operands, the mask op on raw bits, a
 * strided copy into a state at a runtime index, every activation at large |x| and at +-inf,
 * softmax with every mask kind (fully blocked rows give zeros), in place, layernorm of rows with a large mean, an embedding
 * split over two row ranges with invalid ids.  Row shaders run with workgroups of one subgroup,
 * of a partial last subgroup and of many subgroups, and with one workgroup per row or element
 * block as well as a few workgroups looping over all of them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/cpu_reference.h"
#include "support/test_util.h"
#include "support/vk_test.h"

typedef struct kcase {
    vk_test_plan tp;
    void *init[16];     /* per non-constant region: its contents before the run (owned) */
    float *consts[16];  /* owned constant data */
    int n_consts;
} kcase;

static vkg_device *open_cpu(void) {
    vkg_device_options opts = {.cpu_threads = 2, .quiet = 1};
    vkg_device *d = NULL;
    vkg_error err = {0};
    if (vkg_device_open("cpu", &opts, &d, &err) != VKG_OK) fail_msg("cpu device: %s", err.message);
    return d;
}

static void kc_init(kcase *kc) {
    memset(kc, 0, sizeof *kc);
    vk_test_plan_init(&kc->tp);
}

static void kc_free(kcase *kc) {
    for (int i = 0; i < 16; i++) free(kc->init[i]);
    for (int i = 0; i < kc->n_consts; i++) free(kc->consts[i]);
}

/* A region of n floats filled from seed (scale 0: a sentinel 1234.5 everywhere). */
static int kc_floats(kcase *kc, vkg_region_kind kind, size_t n, uint64_t seed, float scale) {
    float *x = malloc(n * sizeof *x);
    assert_non_null(x);
    if (scale == 0) {
        for (size_t i = 0; i < n; i++) x[i] = 1234.5f;
    } else {
        vk_test_fill(x, n, seed, scale);
    }
    if (kind == VKG_REGION_CONSTANT) {
        kc->consts[kc->n_consts++] = x;
        return vk_test_region(&kc->tp, kind, n * sizeof *x, x);
    }
    int r = vk_test_region(&kc->tp, kind, n * sizeof *x, NULL);
    kc->init[r] = x;
    return r;
}

static int kc_ints(kcase *kc, vkg_region_kind kind, const int32_t *v, size_t n) {
    int32_t *x = malloc(n * sizeof *x);
    assert_non_null(x);
    memcpy(x, v, n * sizeof *x);
    int r = vk_test_region(&kc->tp, kind, n * sizeof *x, NULL);
    kc->init[r] = x;
    return r;
}

/* Element-wise agreement: equal infinities, else |a - b| <= tol * (1 + |b|). */
static char g_label[128];

static void compare_floats(const float *got, const float *want, size_t n, double tol, int region) {
    for (size_t i = 0; i < n; i++) {
        if (isinf(want[i]) && got[i] == want[i]) continue;
        double d = fabs((double)got[i] - (double)want[i]);
        if (!(d <= tol * (1.0 + fabs((double)want[i]))))
            fail_msg("%s: region %d element %zu: vulkan %.9g, reference %.9g", g_label, region, i, got[i], want[i]);
    }
}

/* Runs the plan on both devices from the same initial contents and compares every region the
 * step may write. */
static void kc_check(kcase *kc, vkg_device *vk, vkg_device *cpu, double tol) {
    char *label = g_label;
    const vkg_step *st = &kc->tp.steps[0];
    if (st->kernel == VKG_KERNEL_SOFTMAX)
        snprintf(label, sizeof g_label, "softmax cols %u mask %u in-place %d", st->params.softmax.cols,
                 st->params.softmax.mask_kind, st->bind[1].region == st->bind[0].region);
    else if (st->kernel == VKG_KERNEL_UNARY)
        snprintf(label, sizeof g_label, "unary op %u", st->params.unary.op);
    else if (st->kernel == VKG_KERNEL_LAYERNORM)
        snprintf(label, sizeof g_label, "layernorm cols %u flags %u", st->params.layernorm.cols,
                 st->params.layernorm.flags);
    else
        snprintf(label, sizeof g_label, "%s", st->label);
    const vkg_plan *p = &kc->tp.plan;
    void *a[16] = {0}, *b[16] = {0};
    for (int r = 0; r < p->n_regions; r++) {
        if (!kc->init[r]) continue;
        a[r] = malloc(p->regions[r].bytes);
        b[r] = malloc(p->regions[r].bytes);
        assert_true(a[r] && b[r]);
        memcpy(a[r], kc->init[r], p->regions[r].bytes);
        memcpy(b[r], kc->init[r], p->regions[r].bytes);
    }
    vk_test_run(vk, p, a, NULL);
    vk_test_run(cpu, p, b, NULL);
    for (int r = 0; r < p->n_regions; r++) {
        if (a[r] && p->regions[r].kind != VKG_REGION_INDICES && p->regions[r].kind != VKG_REGION_INPUT)
            compare_floats(a[r], b[r], p->regions[r].bytes / 4, tol, r);
        free(a[r]);
        free(b[r]);
    }
}

static void set_shape(uint32_t shape[4], uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
    shape[0] = a, shape[1] = b, shape[2] = c, shape[3] = d;
}

/* --- binary -------------------------------------------------------------------------------------- */

static void binary_cases(vkg_device *vk, vkg_device *cpu) {
    for (uint32_t op = VKG_BINARY_ADD; op <= VKG_BINARY_MASK; op++) {
        kcase kc;
        kc_init(&kc);
        /* a is [2,3,4,5] read transposed in its last two axes; b [3,1,5] broadcast */
        int ra = kc_floats(&kc, VKG_REGION_INPUT, 7 + 120, 1, 2.0f);
        int rb = kc_floats(&kc, VKG_REGION_CONSTANT, 15, 2, 1.0f);
        if (op == VKG_BINARY_MASK)
            for (int i = 0; i < 15; i += 3) kc.consts[0][i] = 0.0f;   /* blocked entries */
        int ro = kc_floats(&kc, VKG_REGION_OUTPUT, 2 + 120, 0, 0);
        vkg_step *s = vk_test_step(&kc.tp, VKG_KERNEL_BINARY);
        vkg_binary_params *p = &s->params.binary;
        p->op = op;
        set_shape(p->shape, 2, 3, 4, 5);
        p->a_offset = 7;
        p->a_strides[0] = 60, p->a_strides[1] = 20, p->a_strides[2] = 1, p->a_strides[3] = 4;
        p->b_strides[0] = 0, p->b_strides[1] = 5, p->b_strides[2] = 0, p->b_strides[3] = 1;
        p->out_offset = 2;
        vk_test_bind(&kc.tp, s, 0, ra, 0);
        vk_test_bind(&kc.tp, s, 1, rb, 0);
        vk_test_bind(&kc.tp, s, 2, ro, 1);
        kc_check(&kc, vk, cpu, 0);
        kc_free(&kc);
    }
}

/* --- unary --------------------------------------------------------------------------------------- */

static void unary_cases(vkg_device *vk, vkg_device *cpu) {
    for (uint32_t op = VKG_UNARY_COPY; op <= VKG_UNARY_LAST; op++) {
        /* the activations (not copy, scale and the causal mask) are computed, not moved */
        const int computed = op != VKG_UNARY_COPY && op != VKG_UNARY_SCALE && op != VKG_UNARY_CAUSAL;
        for (int dyn = 0; dyn < (op == VKG_UNARY_COPY ? 3 : 2); dyn++) {
            kcase kc;
            kc_init(&kc);
            /* in [2, 3, 6, 7] read with its last two axes swapped; out a [2, 3, 10, 7] "cache" written
             * at row index[1] (+1 fixed), as a KV-cache write does, or (dyn 2) each of its two
             * planes at its own row, as a decode step's rows are */
            int ri = kc_floats(&kc, VKG_REGION_INPUT, 252, 3, computed ? 12.0f : 2.0f);
            int ro = kc_floats(&kc, VKG_REGION_STATE, 420, 0, 0);
            int32_t idx[3] = {5, 2, -1};
            int rx = kc_ints(&kc, VKG_REGION_INDICES, idx, 3);
            vkg_step *s = vk_test_step(&kc.tp, VKG_KERNEL_UNARY);
            vkg_unary_params *p = &s->params.unary;
            p->op = op;
            p->alpha = -0.75f;
            p->causal_offset = 1;
            p->dyn_index = dyn ? 1 : VKG_NO_INDEX;
            p->dyn_rows = dyn == 2; /* a copy, each i0 at its own index: index[1] = 2 and index[2] = -1 */
            set_shape(p->shape, 2, 3, 7, 6);
            p->in_strides[0] = 126, p->in_strides[1] = 42, p->in_strides[2] = 1, p->in_strides[3] = 7;
            p->out_offset = 7;
            p->out_strides[0] = 210, p->out_strides[1] = 70, p->out_strides[2] = 7, p->out_strides[3] = 1;
            p->out_dyn_stride = 7;
            vk_test_bind(&kc.tp, s, 0, ri, 0);
            vk_test_bind(&kc.tp, s, 1, ro, 1);
            vk_test_bind(&kc.tp, s, 2, rx, 0);
            kc_check(&kc, vk, cpu, computed && op != VKG_UNARY_RELU ? 1e-6 : 0);
            kc_free(&kc);
        }
    }
    /* every activation far into both tails, and at the infinities: finite, -0 and x, +-inf */
    static const uint32_t activations[] = {VKG_UNARY_GELU, VKG_UNARY_GELU_ERF, VKG_UNARY_QUICK_GELU, VKG_UNARY_SILU,
                                           VKG_UNARY_RELU};
    for (size_t a = 0; a < sizeof activations / sizeof activations[0]; a++) {
        kcase kc;
        kc_init(&kc);
        int ri = kc_floats(&kc, VKG_REGION_INPUT, 12, 1, 1.0f);
        float *x = kc.init[ri];
        const float big[12] = {-INFINITY, -1e30f, -100.0f, -30.0f, -9.0f, -1e-3f, 0.0f, 4.0f, 30.0f, 100.0f, 1e30f,
                               INFINITY};
        memcpy(x, big, sizeof big);
        int ro = kc_floats(&kc, VKG_REGION_OUTPUT, 12, 0, 0);
        vkg_step *s = vk_test_step(&kc.tp, VKG_KERNEL_UNARY);
        vkg_unary_params *p = &s->params.unary;
        p->op = activations[a];
        p->dyn_index = VKG_NO_INDEX;
        set_shape(p->shape, 1, 1, 1, 12);
        p->in_strides[3] = p->out_strides[3] = 1;
        vk_test_bind(&kc.tp, s, 0, ri, 0);
        vk_test_bind(&kc.tp, s, 1, ro, 1);
        kc_check(&kc, vk, cpu, 1e-6);
        kc_free(&kc);
    }
}

/* --- softmax and layernorm ----------------------------------------------------------------------- */

static void softmax_case(vkg_device *vk, vkg_device *cpu, uint32_t cols, uint32_t kind, int in_place, int dyn) {
    const uint32_t d0 = 2, dim1 = 3, dim2 = 5, rows = d0 * dim1 * dim2;
    kcase kc;
    kc_init(&kc);
    int ri = kc_floats(&kc, VKG_REGION_ARENA, 3 + (size_t)rows * cols, 4, 4.0f);
    int ro = in_place ? ri : kc_floats(&kc, VKG_REGION_OUTPUT, 1 + (size_t)rows * cols, 0, 0);
    /* mask [dim1, dim2, cols], broadcast over d0 */
    int rm = kc_floats(&kc, VKG_REGION_CONSTANT, 2 + (size_t)dim1 * dim2 * cols, 5, 3.0f);
    float *mask = kc.consts[kc.n_consts - 1];
    if (kind == VKG_SOFTMAX_MASK_BOOL) {
        for (size_t i = 0; i < (size_t)dim1 * dim2 * cols; i++) mask[2 + i] = (i % 3 == 1) ? 0.0f : 1.0f;
        for (uint32_t j = 0; j < cols; j++) mask[2 + cols + j] = 0.0f;   /* row (i1 0, i2 1) blocked */
    } else if (kind == VKG_SOFTMAX_MASK_ADDITIVE) {
        for (size_t i = 0; i < (size_t)dim1 * dim2 * cols; i += 4) mask[2 + i] = -INFINITY;
    }
    int32_t idx[2] = {0, 2};
    int rx = kc_ints(&kc, VKG_REGION_INDICES, idx, 2);
    vkg_step *s = vk_test_step(&kc.tp, VKG_KERNEL_SOFTMAX);
    vkg_softmax_params *p = &s->params.softmax;
    p->rows = rows, p->cols = cols, p->dim1 = dim1, p->dim2 = dim2;
    p->in_offset = 3, p->out_offset = in_place ? 3 : 1;
    p->scale = 0.7f;
    p->mask_kind = kind;
    p->causal_offset = -1;   /* row i2 = 0 (without the runtime index) sees nothing */
    p->dyn_index = dyn ? 1 : VKG_NO_INDEX;
    p->mask_offset = 2;
    p->mask_strides[0] = 0, p->mask_strides[1] = dim2 * cols, p->mask_strides[2] = cols, p->mask_strides[3] = 1;
    vk_test_bind(&kc.tp, s, 0, ri, in_place);
    if (!in_place) vk_test_bind(&kc.tp, s, 1, ro, 1);
    else s->bind[1] = s->bind[0];
    if (kind == VKG_SOFTMAX_MASK_BOOL || kind == VKG_SOFTMAX_MASK_ADDITIVE) vk_test_bind(&kc.tp, s, 2, rm, 0);
    vk_test_bind(&kc.tp, s, 3, rx, 0);
    kc_check(&kc, vk, cpu, 2e-6);
    kc_free(&kc);
}

static void layernorm_case(vkg_device *vk, vkg_device *cpu, uint32_t cols, uint32_t flags) {
    const uint32_t rows = 6;
    kcase kc;
    kc_init(&kc);
    int ri = kc_floats(&kc, VKG_REGION_INPUT, 4 + (size_t)rows * cols, 6, 1.0f);
    float *x = kc.init[ri];
    for (size_t i = 4 + cols; i < 4 + 2 * (size_t)cols; i++) x[i] += 1000.0f;   /* a large mean */
    int ro = kc_floats(&kc, VKG_REGION_OUTPUT, (size_t)rows * cols, 0, 0);
    int rg = kc_floats(&kc, VKG_REGION_CONSTANT, 1 + cols, 7, 1.0f);
    int rb = kc_floats(&kc, VKG_REGION_CONSTANT, cols, 8, 1.0f);
    vkg_step *s = vk_test_step(&kc.tp, VKG_KERNEL_LAYERNORM);
    vkg_layernorm_params *p = &s->params.layernorm;
    p->rows = rows, p->cols = cols, p->in_offset = 4, p->gamma_offset = 1, p->eps = 1e-5f, p->flags = flags;
    vk_test_bind(&kc.tp, s, 0, ri, 0);
    vk_test_bind(&kc.tp, s, 1, ro, 1);
    if (flags & VKG_LAYERNORM_GAMMA) vk_test_bind(&kc.tp, s, 2, rg, 0);
    if (flags & VKG_LAYERNORM_BETA) vk_test_bind(&kc.tp, s, 3, rb, 0);
    /* Against a double-precision reference rather than the CPU executor: over a row with a
     * large mean, float sums carry errors of their own order on both devices. */
    size_t n = (size_t)rows * cols;
    float *got = malloc(n * sizeof *got), *want = malloc(n * sizeof *want);
    double *y = malloc(cols * sizeof *y);
    assert_true(got && want && y);
    for (uint32_t r = 0; r < rows; r++) {
        ref_layernorm_row(x + 4 + (size_t)r * cols, cols, 1e-5f, y);
        for (uint32_t j = 0; j < cols; j++) {
            double v = y[j];
            if (flags & VKG_LAYERNORM_GAMMA) v *= kc.consts[0][1 + j];
            if (flags & VKG_LAYERNORM_BETA) v += kc.consts[1][j];
            want[(size_t)r * cols + j] = (float)v;
        }
    }
    void *host[16] = {0};
    host[ri] = x, host[ro] = got;
    vk_test_run(vk, &kc.tp.plan, host, NULL);
    snprintf(g_label, sizeof g_label, "layernorm cols %u flags %u", cols, flags);
    compare_floats(got, want, n, 2e-5, ro);
    free(got), free(want), free(y);
    kc_free(&kc);
    (void)cpu;
}

static void row_cases(vkg_device *vk, vkg_device *cpu) {
    const uint32_t cols[] = {1, 7, 100, 1000};
    for (size_t c = 0; c < sizeof cols / sizeof cols[0]; c++) {
        for (uint32_t kind = VKG_SOFTMAX_MASK_NONE; kind <= VKG_SOFTMAX_MASK_ADDITIVE; kind++)
            softmax_case(vk, cpu, cols[c], kind, 0, 0);
        softmax_case(vk, cpu, cols[c], VKG_SOFTMAX_MASK_CAUSAL, 1, 1);
        layernorm_case(vk, cpu, cols[c], VKG_LAYERNORM_GAMMA | VKG_LAYERNORM_BETA);
    }
    layernorm_case(vk, cpu, 3001, VKG_LAYERNORM_GAMMA);
    layernorm_case(vk, cpu, 5, 0);
}

/* --- embedding ------------------------------------------------------------------------------------ */

static void embedding_cases(vkg_device *vk, vkg_device *cpu) {
    const uint32_t V = 10, C = 13;
    const int32_t ids[7] = {0, 9, 4, -1, 10, 5, 6};
    kcase kc;
    kc_init(&kc);
    int rids = kc_ints(&kc, VKG_REGION_INPUT, ids, 7);
    int rt = kc_floats(&kc, VKG_REGION_CONSTANT, 64 + (size_t)V * C, 9, 1.0f);
    int ro = kc_floats(&kc, VKG_REGION_OUTPUT, (size_t)7 * C, 0, 0);
    /* The table's rows start 64 floats (256 bytes) into its region.  Rows [0, 5) are bound from
     * the region's start, rows [5, 10) through a binding that starts 256 bytes in. */
    for (int part = 0; part < 2; part++) {
        vkg_step *s = vk_test_step(&kc.tp, VKG_KERNEL_EMBEDDING);
        vkg_embedding_params *p = &s->params.embedding;
        p->n_ids = 7, p->dim = C, p->vocab = V;
        p->row_begin = part ? 5 : 0, p->row_count = 5;
        p->table_offset = part ? 5 * C : 64;
        p->zero_invalid = part;
        vk_test_bind(&kc.tp, s, 0, rids, 0);
        vk_test_bind(&kc.tp, s, 1, rt, 0);
        vk_test_bind(&kc.tp, s, 2, ro, 1);
        if (part) {
            s->bind[1].offset = 256;
            s->bind[1].bytes -= 256;
        }
    }
    kc_check(&kc, vk, cpu, 0);
    kc_free(&kc);
}

/* --- drivers -------------------------------------------------------------------------------------- */

static void run_all(vkg_device *vk, vkg_device *cpu) {
    binary_cases(vk, cpu);
    unary_cases(vk, cpu);
    row_cases(vk, cpu);
    embedding_cases(vk, cpu);
}

static void test_default_tuning(void **state) {
    vkg_device *vk = vk_test_device(state), *cpu = open_cpu();
    run_all(vk, cpu);
    vkg_device_free(cpu);
}

static void test_row_workgroups(void **state) {
    vkg_device *vk = vk_test_device(state), *cpu = open_cpu();
    vkg_vk_context *c = vk_test_context(vk);
    vkg_vk_tuning saved = c->tuning;
    uint32_t sg = c->subgroup.subgroupSize;
    uint32_t max = c->props.limits.maxComputeWorkGroupInvocations;
    const uint32_t sizes[] = {sg, sg > 2 ? 3 * sg - 2 : 5, 256 <= max ? 256 : max, 1};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        c->tuning.row_wg = sizes[i];
        c->tuning.elementwise_wg = sizes[i] + 3;
        /* one workgroup per row or element block (GPU-like), or a few looping over many */
        c->tuning.max_groups = i % 2 ? 3 : 0;
        c->tuning.min_group_work = i % 2 ? 1 : 0;
        row_cases(vk, cpu);
        binary_cases(vk, cpu);
    }
    c->tuning = saved;
    vkg_device_free(cpu);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_tuning),
        cmocka_unit_test(test_row_workgroups),
    };
    return vk_test_exit_status(cmocka_run_group_tests(tests, vk_test_group_setup, vk_test_group_teardown));
}
