/* From plan steps to recorded commands: shader and workgroup count per step, barrier placement,
 * descriptor sets, and the command buffer itself. */
#include "vulkan/vk_session.h"

#include "base/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint32_t div_up(uint64_t a, uint64_t b) { return (uint32_t)((a + b - 1) / b); }

/* Mesa's llvmpipe (lavapipe) stops every loop of a shader invocation, silently, once that
 * invocation has run 65535 loop iterations in all, counted over all of its loops together
 * (gallivm's LP_MAX_TGSI_LOOP_ITERATIONS, a guard against GL shaders that never end).  The work
 * after that point is skipped and the dispatch "succeeds".  So every dispatch is sized so that no
 * invocation runs more than LOOP_BUDGET iterations by the estimates below; half the limit leaves
 * room for what the estimates leave out (a few iterations per row or per k step).  A GPU gets one
 * workgroup per row or element block anyway, so the budget only binds where workgroups loop. */
#define LOOP_BUDGET 32768u

/* Loop iterations of one softmax or layernorm row for a workgroup of `wg` invocations: three
 * passes over the columns, and two workgroup reductions, each a loop over the subgroups
 * (reduce.glsl), every loop ended by one more test. */
static uint64_t row_iterations(const vkg_vk_context *c, uint64_t cols, uint32_t wg) {
    uint64_t sg = vkg_vk_subgroup_size(c);
    return 3 * (div_up(cols, wg) + 1) + 2 * (div_up(wg, sg) + 1) + 4;
}

/* Workgroups for `units` pieces of work (element blocks or rows), each taking `unit_iters` loop
 * iterations of the invocation doing it, laid out over x (and y when x's limit is exceeded);
 * shaders rebuild the linear index as x + y * gl_NumWorkGroups.x and loop over the units their
 * workgroups do not cover.  On devices where each workgroup costs much (llvmpipe: ~20 us) the
 * tuning caps their number and gives each at least min_group_work of the `work` elements; the
 * loop budget then raises the count again where those loops would run too long. */
static vkg_status linear_groups(const vkg_vk_context *c, const vkg_step *st, uint64_t units, uint64_t work,
                                uint64_t unit_iters, uint32_t g[3], vkg_error *err) {
    const vkg_vk_tuning *t = &c->tuning;
    if (unit_iters > LOOP_BUDGET)
        return vkg_error_set(err, VKG_ERR_UNSUPPORTED,
                             "%s: one row needs %llu shader loop iterations, more than %s runs reliably (%u)",
                             st->label, (unsigned long long)unit_iters, c->props.deviceName, LOOP_BUDGET);
    uint64_t n = units;
    if (t->max_groups && n > t->max_groups) n = t->max_groups;
    if (t->min_group_work && n > work / t->min_group_work)
        n = work / t->min_group_work ? work / t->min_group_work : 1;
    uint64_t units_per_group = LOOP_BUDGET / unit_iters - 1;   /* -1: the loop's own last test */
    uint64_t min_n = units_per_group ? div_up(units, units_per_group) : units;
    if (n < min_n) n = min_n;
    uint64_t max_x = c->props.limits.maxComputeWorkGroupCount[0];
    g[0] = (uint32_t)(n < max_x ? n : max_x);
    g[1] = g[0] ? div_up(n, g[0]) : 0;
    g[2] = 1;
    if (g[1] > c->props.limits.maxComputeWorkGroupCount[1])
        return vkg_error_set(err, VKG_ERR_UNSUPPORTED, "%s needs %llu workgroups; %s allows %u x %u", st->label,
                             (unsigned long long)n, c->props.deviceName, c->props.limits.maxComputeWorkGroupCount[0],
                             c->props.limits.maxComputeWorkGroupCount[1]);
    return VKG_OK;
}

/* The row workgroup for rows of `cols`: the tuned width, doubled while one row would run past
 * the loop budget (a softmax over a very wide row), up to the device's workgroup limit. */
static uint32_t row_workgroup(const vkg_vk_context *c, uint64_t cols) {
    uint32_t max_wg = vkg_vk_max_workgroup_x(c);
    uint32_t wg = c->tuning.row_wg;
    while (row_iterations(c, cols, wg) > LOOP_BUDGET && wg * 2 <= max_wg) wg *= 2;
    return wg;
}

/* Whether binding b can be read through a texel view of texels of `texel_bytes`. */
static int texel_fits(const vkg_vk_context *c, const vkg_binding *b, uint64_t texel_bytes) {
    const VkPhysicalDeviceLimits *l = &c->props.limits;
    return b->region >= 0 && (b->bytes + texel_bytes - 1) / texel_bytes <= l->maxTexelBufferElements &&
           b->offset % l->minTexelBufferOffsetAlignment == 0 && b->offset % texel_bytes == 0;
}

static int mult4(uint32_t v) { return v % 4 == 0; }

/* A operand readable as vec4s along k: unit k stride, every other step and offset whole vec4s. */
static int a_along_k4(const vkg_matmul_params *m) {
    return m->a_stride_k == 1 && (m->M == 1 || mult4(m->a_stride_m)) && mult4(m->a_offset) &&
           (m->batch0 == 1 || mult4(m->a_stride_b0)) && (m->batch1 == 1 || mult4(m->a_stride_b1));
}

/* The matmul shader for a step, its specialization constants and its workgroup count.
 *   texel path (software rasterisers): vec4 texel shaders where the layout allows (register
 *     blocks mm_tm x mm_tn, or 1 x mv_tn for M == 1), else the float texel shader;
 *   GPU path: shared-memory tiles, or the split-K matrix-vector shader for M == 1. */
static int b_16bit(const vkg_matmul_params *m) { return (m->flags & (VKG_MATMUL_B_F16 | VKG_MATMUL_B_BF16)) != 0; }

/* B along n (along_k 0) or along k (along_k 1) in texels of `ept` elements (4: vec4s): unit
 * stride that way, every other step and offset whole texels. */
static int b_texels_along(const vkg_matmul_params *m, uint32_t ept, int along_k) {
    uint32_t unit = along_k ? m->b_stride_k : m->b_stride_n, other = along_k ? m->b_stride_n : m->b_stride_k;
    uint32_t other_len = along_k ? m->N : m->K;
    return unit == 1 && (other_len == 1 || other % ept == 0) && m->b_offset % ept == 0 &&
           (m->batch0 == 1 || m->b_stride_b0 % ept == 0) && (m->batch1 == 1 || m->b_stride_b1 % ept == 0);
}

/* The most rows the matrix-vector texel shaders take (a decoding step of that many sequences):
 * each fetch of B serves them all, and each invocation keeps ROWS x COL_TEXELS texels of sums
 * (matvec_texel.glsl) or ROWS x BLOCK_ROWS sums (matvec_texelt.glsl). */
#define MATVEC_TEXEL_MAX_ROWS 8

/* The matrix-vector texel shader with B along n (matvec_texel.glsl) for M up to
 * MATVEC_TEXEL_MAX_ROWS, where the tuning has it and the layout allows: 16-byte texels of B (four
 * floats or eight 16-bit elements), A in vec4s.  Each workgroup covers mvx_wg / mvx_split
 * (mvx_split_rows for M > 1) invocations x mvx_tn texels of columns; mvx_tn is halved while that leaves fewer than
 * mvx_min_groups workgroups (a product with few columns still spreads over the device's threads),
 * and while the rows' sums would pass mvx_tn texels per invocation (registers) or the sums of the
 * workgroup the shared memory.  Returns 0 to leave the step to the general choice. */
static int choose_matvec_texel(const vkg_vk_context *c, const vkg_step *st, vkg_vk_shader *sh, uint32_t spec[],
                               uint32_t *n_spec, uint32_t g[3]) {
    const vkg_vk_tuning *t = &c->tuning;
    const vkg_matmul_params *m = &st->params.matmul;
    const uint32_t ept = b_16bit(m) ? 8 : 4;
    if (!t->matmul_texel || !t->matvec_texel || m->M < 1 || m->M > MATVEC_TEXEL_MAX_ROWS || !a_along_k4(m) ||
        !b_texels_along(m, ept, 0) || !texel_fits(c, &st->bind[0], 16) || !texel_fits(c, &st->bind[1], 16))
        return 0;
    const uint32_t split = m->M > 1 ? t->mvx_split_rows : t->mvx_split;
    const uint64_t texels = div_up(m->N, ept), lanes = t->mvx_wg / split;
    const uint64_t shared_max = c->props.limits.maxComputeSharedMemorySize;
    uint32_t tn = t->mvx_tn;
    while (tn > 1 && (div_up(texels, lanes * tn) < t->mvx_min_groups || (uint64_t)m->M * tn > t->mvx_tn ||
                      (uint64_t)t->mvx_wg * m->M * tn * ept * 4 > shared_max))
        tn /= 2;
    if ((uint64_t)t->mvx_wg * m->M * tn * ept * 4 > shared_max) return 0;
    *sh = VKG_SH_MATVEC_TEXEL;
    spec[VKG_SPEC_WG_X] = t->mvx_wg, spec[VKG_SPEC_SPLIT] = split, spec[VKG_SPEC_COL_TEXELS] = tn;
    spec[VKG_SPEC_SYNC] = (uint32_t)t->mvx_sync, spec[VKG_SPEC_ROWS] = m->M, *n_spec = VKG_SPEC_ROWS + 1;
    g[0] = div_up(texels, lanes * tn), g[1] = 1, g[2] = m->batch0 * m->batch1;
    return 1;
}

/* The matrix-vector texel shader with B along k (matvec_texelt.glsl) for M up to
 * MATVEC_TEXEL_MAX_ROWS, where the tuning has it and the layout allows: 16-byte texels of B (four floats, or eight 16-bit elements where the device has
 * such texels), K a whole number of them, A in vec4s.  Returns 0 to leave the step to the
 * general choice. */
static int choose_matvec_texelt(const vkg_vk_context *c, const vkg_step *st, vkg_vk_shader *sh, uint32_t spec[],
                                uint32_t *n_spec, uint32_t g[3]) {
    const vkg_vk_tuning *t = &c->tuning;
    const vkg_matmul_params *m = &st->params.matmul;
    const uint32_t ept = b_16bit(m) ? 8 : 4;
    if (!t->matmul_texel || !t->matvec_texelt || (b_16bit(m) && !t->texel_16bit_x8) || m->M < 1 ||
        m->M > MATVEC_TEXEL_MAX_ROWS || m->K % ept != 0 || !a_along_k4(m) || !b_texels_along(m, ept, 1) || !texel_fits(c, &st->bind[0], 16) ||
        !texel_fits(c, &st->bind[1], 16))
        return 0;
    *sh = VKG_SH_MATVEC_TEXELT;
    spec[VKG_SPEC_WG_X] = t->mvt_wg, spec[VKG_SPEC_BLOCK_ROWS] = t->mvt_rows, spec[VKG_SPEC_SPAN_BLOCKS] = t->mvt_blocks;
    spec[VKG_SPEC_WG_SPANS] = t->mvt_spans, spec[VKG_SPEC_ROWS] = m->M, *n_spec = VKG_SPEC_ROWS + 1;
    g[0] = div_up(m->N, (uint64_t)t->mvt_rows * t->mvt_blocks * t->mvt_spans), g[1] = 1, g[2] = m->batch0 * m->batch1;
    return 1;
}

static void choose_matmul(const vkg_vk_context *c, const vkg_step *st, vkg_vk_shader *sh, uint32_t spec[],
                          uint32_t *n_spec, uint32_t g[3]) {
    const vkg_vk_tuning *t = &c->tuning;
    const vkg_matmul_params *m = &st->params.matmul;
    if (choose_matvec_texel(c, st, sh, spec, n_spec, g) || choose_matvec_texelt(c, st, sh, spec, n_spec, g)) return;
    uint32_t wx = t->mm_wg_x, wy = t->mm_wg_y, tm = t->mm_tm, tn = t->mm_tn;
    /* A 16-bit B takes the texel path where the device has 16-bit integer texels; its texels are
     * half as wide. */
    const int texel = t->matmul_texel && (!b_16bit(m) || t->texel_16bit);
    const uint64_t b_elem = b_16bit(m) ? 2 : 4;
    if (texel && texel_fits(c, &st->bind[0], 16) && texel_fits(c, &st->bind[1], 4 * b_elem) && a_along_k4(m) &&
        (b_texels_along(m, 4, 0) || b_texels_along(m, 4, 1))) {
        *sh = b_texels_along(m, 4, 0) ? VKG_SH_MATMUL_TEXEL4 : VKG_SH_MATMUL_TEXEL4T;
        if (m->M >= (uint64_t)wy * t->mm_tm_tall) tm = t->mm_tm_tall;
        /* M == 1: B along n streams rows of mv_tn columns (few live vec4s, so no spilling);
         * B along k keeps mm_tn rows per invocation, whose dot products share each A fetch. */
        if (m->M == 1) {
            wx = t->mv_wg, wy = 1, tm = 1, tn = *sh == VKG_SH_MATMUL_TEXEL4 ? t->mv_tn : t->mm_tn;
            if ((uint64_t)wx * tn * 4 > c->props.limits.maxComputeSharedMemorySize) tn = t->mv_tn;
        }
        /* A 16-bit B eight elements per 16-byte texel where its layout allows (along k: no
         * partial texel at the end of k). */
        const int along_k = *sh == VKG_SH_MATMUL_TEXEL4T;
        if (b_16bit(m) && t->texel_16bit_x8 && tn % 8 == 0 && b_texels_along(m, 8, along_k) &&
            (!along_k || m->K % 8 == 0) && texel_fits(c, &st->bind[1], 16))
            *sh = along_k ? VKG_SH_MATMUL_TEXEL8T_B16 : VKG_SH_MATMUL_TEXEL8_B16;
    } else if (texel && texel_fits(c, &st->bind[0], 4) && texel_fits(c, &st->bind[1], b_elem)) {
        *sh = VKG_SH_MATMUL_TEXEL;
        tm = tm < 4 ? tm : 4, tn = tn < 4 ? tn : 4;
        if (m->M == 1) wx = t->mv_wg, wy = 1, tm = 1;
    } else if (m->M == 1) {
        *sh = VKG_SH_MATVEC;
        spec[VKG_SPEC_WG_X] = t->mv_wg, spec[VKG_SPEC_COLS] = t->mv_cols, *n_spec = VKG_SPEC_COLS + 1;
        g[0] = div_up(m->N, t->mv_cols), g[1] = 1, g[2] = m->batch0 * m->batch1;
        return;
    } else {
        *sh = VKG_SH_MATMUL_TILED;
    }
    spec[VKG_SPEC_WG_X] = wx, spec[VKG_SPEC_WG_Y] = wy, spec[VKG_SPEC_TM] = tm, spec[VKG_SPEC_TN] = tn;
    spec[VKG_SPEC_BK] = t->mm_bk;
    *n_spec = *sh == VKG_SH_MATMUL_TILED ? VKG_SPEC_BK + 1 : VKG_SPEC_TN + 1;
    g[0] = div_up(m->N, (uint64_t)wx * tn), g[1] = div_up(m->M, (uint64_t)wy * tm), g[2] = m->batch0 * m->batch1;
}

/* Loop iterations of one matmul invocation: its walk along k, plus the store of its TM x TN
 * block, whose loops are kept rolled (matmul_block.glsl; the tiled shader's too, counted alike).
 * The loops over a register block inside the walk have constant bounds and are unrolled.  sg:
 * the device's subgroup size (the lanes that share a walk in matvec_texelt.glsl). */
static uint64_t matmul_iterations(vkg_vk_shader sh, const vkg_matmul_params *m, const uint32_t spec[], uint64_t sg) {
    uint64_t K = m->K, store = (uint64_t)spec[VKG_SPEC_TM] * (spec[VKG_SPEC_TN] + 1) + 1;
    if (sh == VKG_SH_MATMUL_TEXEL4 || sh == VKG_SH_MATMUL_TEXEL4T || sh == VKG_SH_MATMUL_TEXEL8_B16 ||
        sh == VKG_SH_MATMUL_TEXEL8T_B16)
        return div_up(K, 4) + 1 + store;
    if (sh == VKG_SH_MATMUL_TEXEL) return K + 1 + store;
    if (sh == VKG_SH_MATVEC) {
        uint64_t split = spec[VKG_SPEC_WG_X] / spec[VKG_SPEC_COLS];
        return div_up(K, split) + split + 2;
    }
    if (sh == VKG_SH_MATVEC_TEXELT) {
        /* per block of rows its walk along k (a lane's share of the row's texels, four elements
         * or more each), then the store of the block's ROWS x BLOCK_ROWS sums; a subgroup takes
         * every (wg / sg)-th span of the workgroup */
        uint64_t walk = div_up(div_up(K, 4), sg) + 1;
        uint64_t spans = div_up(spec[VKG_SPEC_WG_SPANS], div_up(spec[VKG_SPEC_WG_X], sg));
        uint64_t sums = (uint64_t)spec[VKG_SPEC_ROWS] * spec[VKG_SPEC_BLOCK_ROWS];
        return spans * (spec[VKG_SPEC_SPAN_BLOCKS] * (walk + sums + 1) + 1) + 1;
    }
    if (sh == VKG_SH_MATVEC_TEXEL) {
        /* the walk over one slice's blocks of four rows and the partial block at its end, then
         * the store of ROWS x 8 x COL_TEXELS outputs at most, each summed over the slices */
        uint64_t split = spec[VKG_SPEC_SPLIT];
        uint64_t outs = (uint64_t)spec[VKG_SPEC_ROWS] * 8 * spec[VKG_SPEC_COL_TEXELS];
        return div_up(div_up(K, 4), split) + 2 + outs * (split + 1) + 1;
    }
    /* VKG_SH_MATMUL_TILED, the one other shader choose_matmul picks */
    uint64_t threads = (uint64_t)spec[VKG_SPEC_WG_X] * spec[VKG_SPEC_WG_Y];
    uint64_t bm = (uint64_t)spec[VKG_SPEC_WG_Y] * spec[VKG_SPEC_TM], bn = (uint64_t)spec[VKG_SPEC_WG_X] * spec[VKG_SPEC_TN];
    uint64_t bk = spec[VKG_SPEC_BK];
    return div_up(K, bk) * (div_up(bm * bk, threads) + div_up(bk * bn, threads) + 3) + store;
}

/* Whether attention's q, k and v can be read as vec4 texels: unit stride along their rows, whole
 * vec4 rows, every other stride and offset whole vec4s, bindings a vec4 view can take. */
static int attention_vec4(const vkg_vk_context *c, const vkg_step *st) {
    const vkg_attention_params *a = &st->params.attention;
    const uint32_t words[] = {a->D, a->Dv, a->q_offset, a->q_stride_t, a->q_stride_b0, a->q_stride_b1,
                              a->k_offset, a->k_stride_s, a->k_stride_b0, a->k_stride_b1,
                              a->v_offset, a->v_stride_s, a->v_stride_b0, a->v_stride_b1};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (!mult4(words[i])) return 0;
    return a->q_stride_d == 1 && a->k_stride_d == 1 && a->v_stride_d == 1 && texel_fits(c, &st->bind[0], 16) &&
           texel_fits(c, &st->bind[1], 16) && texel_fits(c, &st->bind[2], 16);
}

/* Loop iterations of one attention invocation (one query row) over `keys` keys (the step's, or
 * its chunk's): one iteration each, plus a few; the loops over a row's vec4s have constant
 * bounds (specialization constants) and are unrolled, as matmul's register blocks are. */
static uint64_t attention_iterations(uint64_t keys) { return keys + 8; }

/* Specialization constant `id` of a step set to value; the pipeline takes constants 0..n_spec-1,
 * so the ones in between that were not set are 0: ids the shader does not declare (entries for
 * absent ids are ignored). */
static void set_spec(uint32_t spec[], uint32_t *n_spec, uint32_t id, uint32_t value) {
    for (uint32_t i = *n_spec; i < id; i++) spec[i] = 0;
    spec[id] = value;
    if (*n_spec < id + 1) *n_spec = id + 1;
}

/* Turns the f32 shader chosen for a step into its variant for a 16-bit operand (matmul's B, an
 * embedding table): WIDEN_BF16 says which 16-bit format (matmul_b16.glsl). */
static void widen_16bit(vkg_vk_shader *sh, uint32_t spec[], uint32_t *n_spec, int bf16) {
    *sh = vkg_vk_shader_b16_variant(*sh);
    set_spec(spec, n_spec, VKG_SPEC_WIDEN_BF16, (uint32_t)bf16);
}

/* Binding b of step st as shader sh sees it: 1 and its texel format and size when it is a texel
 * buffer, else 0 (a storage buffer). */
static int texel_view(vkg_vk_shader sh, uint32_t b, VkFormat *format, uint64_t *bytes) {
    if (!((vkg_vk_shader_texel_mask(sh) >> b) & 1)) return 0;
    int vec4 = vkg_vk_shader_texel_vec4(sh);
    int b16 = vkg_vk_shader_b16(sh) && vkg_kernel_binding_elem(vkg_vk_shader_kernel(sh), (int)b) == VKG_ELEM_WEIGHT;
    if (vec4 == 2 && b16) {   /* eight 16-bit elements per texel */
        *format = VK_FORMAT_R32G32B32A32_UINT, *bytes = 16;
        return 1;
    }
    *format = b16 ? (vec4 ? VK_FORMAT_R16G16B16A16_UINT : VK_FORMAT_R16_UINT)
                  : (vec4 ? VK_FORMAT_R32G32B32A32_SFLOAT : VK_FORMAT_R32_SFLOAT);
    *bytes = (uint64_t)(vec4 ? 4 : 1) * (b16 ? 2 : 4);
    return 1;
}

/* Per family (graph/kernels.def): <name>_shader picks the step's shader, sets its specialization
 * constants spec[0..*n_spec) by name (VKG_SPEC_*; on entry spec[VKG_SPEC_WG_X] is the element-wise
 * workgroup width, *n_spec 1) and
 * its workgroup count g, or says why the device cannot run the step. */

static vkg_status matmul_shader(const vkg_vk_context *c, const vkg_step *st, vkg_vk_shader *sh, uint32_t spec[],
                                uint32_t *n_spec, uint32_t g[3], vkg_error *err) {
    const vkg_matmul_params *m = &st->params.matmul;
    choose_matmul(c, st, sh, spec, n_spec, g);
    uint64_t iters = matmul_iterations(*sh, m, spec, vkg_vk_subgroup_size(c));
    if (iters > LOOP_BUDGET)
        return vkg_error_set(err, VKG_ERR_UNSUPPORTED,
                             "%s: matmul %ux%ux%u needs %llu shader loop iterations per invocation, more "
                             "than %s runs reliably (%u)", st->label, m->M, m->N, m->K,
                             (unsigned long long)iters, c->props.deviceName, LOOP_BUDGET);
    uint64_t batch = (uint64_t)m->batch0 * m->batch1;
    const uint32_t *max = c->props.limits.maxComputeWorkGroupCount;
    if (batch > max[2] || g[0] > max[0] || g[1] > max[1])
        return vkg_error_set(err, VKG_ERR_UNSUPPORTED,
                             "matmul %ux%ux%u with batch %llu needs %u x %u x %u workgroups; %s allows %u x %u x %u",
                             m->M, m->N, m->K, (unsigned long long)batch, g[0], g[1], g[2],
                             c->props.deviceName, max[0], max[1], max[2]);
    if (m->N == 0 || m->M == 0) g[0] = 0;
    if (b_16bit(m)) widen_16bit(sh, spec, n_spec, (m->flags & VKG_MATMUL_B_BF16) != 0);
    set_spec(spec, n_spec, VKG_SPEC_EPILOGUE, m->flags & (VKG_MATMUL_BIAS | VKG_MATMUL_RESIDUAL | VKG_MATMUL_GATE));
    set_spec(spec, n_spec, VKG_SPEC_ACTIVATION, m->activation);
    return VKG_OK;
}

/* n elements, one per invocation of workgroups of the element-wise width. */
static vkg_status elementwise_groups(const vkg_vk_context *c, const vkg_step *st, uint64_t n, uint32_t g[3],
                                     vkg_error *err) {
    return linear_groups(c, st, div_up(n, c->tuning.elementwise_wg), n, 1, g, err);
}

static uint64_t numel4(const uint32_t s[4]) { return (uint64_t)s[0] * s[1] * s[2] * s[3]; }

static vkg_status binary_shader(const vkg_vk_context *c, const vkg_step *st, vkg_vk_shader *sh, uint32_t spec[],
                                uint32_t *n_spec, uint32_t g[3], vkg_error *err) {
    *sh = VKG_SH_BINARY;
    set_spec(spec, n_spec, VKG_SPEC_OP, st->params.binary.op);
    return elementwise_groups(c, st, numel4(st->params.binary.shape), g, err);
}

static vkg_status unary_shader(const vkg_vk_context *c, const vkg_step *st, vkg_vk_shader *sh, uint32_t spec[],
                               uint32_t *n_spec, uint32_t g[3], vkg_error *err) {
    *sh = VKG_SH_UNARY;
    set_spec(spec, n_spec, VKG_SPEC_OP, st->params.unary.op);
    return elementwise_groups(c, st, numel4(st->params.unary.shape), g, err);
}

/* One row of `cols` per workgroup of the row width (widened for very wide rows). */
static vkg_status row_groups(const vkg_vk_context *c, const vkg_step *st, uint32_t rows, uint32_t cols,
                             uint32_t spec[], uint32_t g[3], vkg_error *err) {
    spec[VKG_SPEC_WG_X] = row_workgroup(c, cols);
    return linear_groups(c, st, rows, (uint64_t)rows * cols, row_iterations(c, cols, spec[VKG_SPEC_WG_X]), g, err);
}

static vkg_status softmax_shader(const vkg_vk_context *c, const vkg_step *st, vkg_vk_shader *sh, uint32_t spec[],
                                 uint32_t *n_spec, uint32_t g[3], vkg_error *err) {
    (void)n_spec;
    *sh = VKG_SH_SOFTMAX;
    return row_groups(c, st, st->params.softmax.rows, st->params.softmax.cols, spec, g, err);
}

static vkg_status layernorm_shader(const vkg_vk_context *c, const vkg_step *st, vkg_vk_shader *sh, uint32_t spec[],
                                   uint32_t *n_spec, uint32_t g[3], vkg_error *err) {
    (void)n_spec;
    *sh = VKG_SH_LAYERNORM;
    return row_groups(c, st, st->params.layernorm.rows, st->params.layernorm.cols, spec, g, err);
}

static vkg_status rope_shader(const vkg_vk_context *c, const vkg_step *st, vkg_vk_shader *sh, uint32_t spec[],
                               uint32_t *n_spec, uint32_t g[3], vkg_error *err) {
    (void)spec, (void)n_spec;
    const vkg_rope_params *r = &st->params.rope;
    *sh = r->cache_heads ? VKG_SH_ROPE_CACHE : VKG_SH_ROPE;
    return elementwise_groups(c, st, (uint64_t)r->batch0 * r->batch1 * r->T * (r->D / 2), g, err);
}
static vkg_status embedding_shader(const vkg_vk_context *c, const vkg_step *st, vkg_vk_shader *sh, uint32_t spec[],
                                   uint32_t *n_spec, uint32_t g[3], vkg_error *err) {
    const vkg_embedding_params *e = &st->params.embedding;
    *sh = VKG_SH_EMBEDDING;
    if (e->flags) widen_16bit(sh, spec, n_spec, (e->flags & VKG_EMBEDDING_TABLE_BF16) != 0);
    return elementwise_groups(c, st, (uint64_t)e->n_ids * e->dim, g, err);
}

/* The query rows of an attention step, numbered as attention.glsl numbers them (its runs). */
static uint64_t attention_rows(const vkg_attention_params *a) {
    return (uint64_t)a->batch0 * a->batch1 * a->T;
}

/* The most bytes of chunk states an attention step may write (its chunks widen to fit). */
#define ATTENTION_STATES_MAX ((uint64_t)32 << 20)

/* Keys per workgroup of a step whose query rows each take a subgroup (attention.glsl's
 * CHUNK_KEYS): the tuning's chunk where the keys fill two or more of them, doubled while the
 * chunks' states would pass ATTENTION_STATES_MAX bytes or the dispatch's depth limit; 0: one
 * workgroup walks them all. */
static uint32_t attention_chunk_keys(const vkg_vk_context *c, const vkg_attention_params *a) {
    uint64_t ck = c->tuning.attn_chunk_keys;
    if (ck == 0) return 0;
    while (div_up(a->S, ck) > c->props.limits.maxComputeWorkGroupCount[2] ||
           attention_rows(a) * div_up(a->S, ck) * (a->Dv + 2u) * 4u > ATTENTION_STATES_MAX)
        ck *= 2;
    return div_up(a->S, ck) >= 2 ? (uint32_t)ck : 0;
}

/* For an attention step whose shader took spec: the bytes of its chunk states, 0 when it has none
 * (no CHUNK_KEYS). */
static uint64_t attention_states_bytes(const vkg_step *st, const uint32_t spec[]) {
    const vkg_attention_params *a = &st->params.attention;
    const uint32_t ck = spec[VKG_SPEC_CHUNK_KEYS];
    return ck ? attention_rows(a) * div_up(a->S, ck) * (a->Dv + 2u) * 4u : 0;
}

/* The merge of a split attention step (attention_merge.comp): its specialization and workgroups,
 * one invocation per output element. */
static vkg_status attention_merge_shader(const vkg_vk_context *c, const vkg_step *st, const uint32_t attention_spec[],
                                         vkg_vk_shader *sh, uint32_t spec[], uint32_t *n_spec, uint32_t g[3],
                                         vkg_error *err) {
    const vkg_attention_params *a = &st->params.attention;
    const uint32_t chunks = div_up(a->S, attention_spec[VKG_SPEC_CHUNK_KEYS]);
    *sh = VKG_SH_ATTENTION_MERGE;
    spec[VKG_SPEC_WG_X] = c->tuning.elementwise_wg;
    spec[VKG_SPEC_CHUNKS] = chunks, *n_spec = VKG_SPEC_CHUNKS + 1;
    const uint64_t n = attention_rows(a) * a->Dv;
    return linear_groups(c, st, div_up(n, c->tuning.elementwise_wg), n * chunks, 2u * chunks + 8u, g, err);
}

static vkg_status attention_shader(const vkg_vk_context *c, const vkg_step *st, vkg_vk_shader *sh, uint32_t spec[],
                                   uint32_t *n_spec, uint32_t g[3], vkg_error *err) {
    const vkg_attention_params *a = &st->params.attention;
    if (!texel_fits(c, &st->bind[0], 4) || !texel_fits(c, &st->bind[1], 4) || !texel_fits(c, &st->bind[2], 4))
        return vkg_error_set(err, VKG_ERR_UNSUPPORTED, "%s: q, k or v spans more than a texel buffer of %s holds",
                             st->label, c->props.deviceName);
    *sh = attention_vec4(c, st) ? VKG_SH_ATTENTION4 : VKG_SH_ATTENTION;
    /* Fewer query rows per batch entry than a subgroup has lanes (decoding): a subgroup per row,
     * its lanes splitting the keys (attention.glsl, SPLIT_KEYS), one subgroup per workgroup. */
    const uint32_t sg = vkg_vk_subgroup_size(c);
    /* grouped-query attention: the rows of a b0 entry are one run (attention.glsl) */
    const int grouped = VKG_ATTENTION_GROUPED(*a);
    const uint64_t run = grouped ? (uint64_t)a->batch1 * a->T : a->T;
    const uint64_t batch = grouped ? a->batch0 : (uint64_t)a->batch0 * a->batch1;
    const int split = run < sg;
    /* split: a subgroup per row, one workgroup per run (a group's heads together, as a grouped
     * run or as the rows of one position) */
    const uint64_t split_rows = (grouped || (a->mask_rows & VKG_MASK_ROWS_ONE_POSITION)) && run * sg <= vkg_vk_max_workgroup_x(c) ? run : 1;
    spec[VKG_SPEC_WG_X] = split ? (uint32_t)(split_rows * sg) : c->tuning.row_wg;
    spec[VKG_SPEC_D4] = div_up(a->D, 4), spec[VKG_SPEC_DV4] = div_up(a->Dv, 4);
    spec[VKG_SPEC_SPLIT_KEYS] = (uint32_t)split;
    /* split, on a device that wants more workgroups than heads: the keys in chunks, one
     * workgroup each (the dispatch's depth), merged by a second dispatch (steps_prepare) */
    const uint32_t chunk_keys = split ? attention_chunk_keys(c, a) : 0;
    spec[VKG_SPEC_CHUNK_KEYS] = chunk_keys, *n_spec = VKG_SPEC_CHUNK_KEYS + 1;
    if (spec[VKG_SPEC_D4] == 0) spec[VKG_SPEC_D4] = 1;
    if (spec[VKG_SPEC_DV4] == 0) spec[VKG_SPEC_DV4] = 1;
    /* one unit: a workgroup's tile of consecutive query rows of one run (split_rows when split) */
    uint64_t rows = batch * run;
    uint64_t units = batch * div_up(run, split ? split_rows : spec[VKG_SPEC_WG_X]);
    const uint64_t keys = chunk_keys ? chunk_keys : a->S;
    vkg_status status = linear_groups(c, st, units, rows * keys * (a->D + a->Dv), attention_iterations(keys), g, err);
    if (status == VKG_OK && chunk_keys) g[2] = div_up(a->S, chunk_keys);
    return status;
}

vkg_status vkg_vk_step_shader(const vkg_vk_context *c, const vkg_step *st, vkg_vk_shader *sh, uint32_t spec[],
                              uint32_t *n_spec, uint32_t g[3], vkg_error *err) {
    spec[VKG_SPEC_WG_X] = c->tuning.elementwise_wg;
    *n_spec = VKG_SPEC_WG_X + 1;
    switch (st->kernel) {
#define VKG_KERNEL(ENUM, name, n_bindings, units, cost, ...) \
    case VKG_KERNEL_##ENUM: return name##_shader(c, st, sh, spec, n_spec, g, err);
#include "graph/kernels.def"
    case VKG_KERNEL_COUNT: break;
    }
    return vkg_error_set(err, VKG_ERR_UNSUPPORTED, "the Vulkan executor has no kernel %d", (int)st->kernel);
}

/* Every binding must lie inside its region and respect the device's descriptor limits; the
 * compiler guarantees this for plans made with vkg_device_compile_options(). */
static vkg_status check_bindings(const vkg_vk_session *s, int i, vkg_vk_shader sh, vkg_error *err) {
    const vkg_plan *p = s->plan;
    const vkg_step *st = &p->steps[i];
    const VkPhysicalDeviceLimits *l = &s->c->props.limits;
    for (uint32_t b = 0; b < vkg_vk_shader_bindings(sh); b++) {
        const vkg_binding *bd = &st->bind[b];
        if (bd->region < 0) continue;
        VkFormat format;
        uint64_t texel_bytes = 4;
        int texel = texel_view(sh, b, &format, &texel_bytes);
        uint64_t align = texel ? l->minTexelBufferOffsetAlignment : l->minStorageBufferOffsetAlignment;
        uint64_t max = texel ? (uint64_t)l->maxTexelBufferElements * texel_bytes : l->maxStorageBufferRange;
        const char *problem = NULL;
        if (bd->region >= p->n_regions) problem = "names a region the plan does not have";
        else if (bd->offset > p->regions[bd->region].bytes || bd->bytes > p->regions[bd->region].bytes - bd->offset)
            problem = "lies outside its region";
        else if (bd->offset % align) problem = "has an offset the device cannot bind (alignment)";
        else if (bd->bytes > max) problem = "spans more bytes than the device can bind";
        if (problem)
            return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT,
                                 "plan step %d (%s), binding %u: region %d, offset %llu, %llu bytes %s "
                                 "(alignment %llu, at most %llu bytes); compile with vkg_device_compile_options()",
                                 i, st->label, b, bd->region, (unsigned long long)bd->offset,
                                 (unsigned long long)bd->bytes, problem, (unsigned long long)align,
                                 (unsigned long long)max);
    }
    return VKG_OK;
}

/* Attention step i, whose shader took spec: where its keys are split over workgroups, the merge's
 * pipeline and workgroups, and the attention states it needs. */
static vkg_status merge_prepare(vkg_vk_session *s, int i, const uint32_t spec[], vkg_error *err) {
    vkg_vk_step *vs = &s->steps[i];
    const vkg_step *st = &s->plan->steps[i];
    vs->states_bytes = attention_states_bytes(st, spec);
    if (!vs->states_bytes) return VKG_OK;
    vkg_vk_shader sh;
    uint32_t merge_spec[VKG_VK_MAX_SPEC], n_spec;
    vkg_status status = attention_merge_shader(s->c, st, spec, &sh, merge_spec, &n_spec, vs->merge_groups, err);
    if (status == VKG_OK) status = vkg_vk_pipeline_get(s->c, sh, merge_spec, n_spec, &vs->merge, err);
    if (s->states_bytes < vs->states_bytes) s->states_bytes = vs->states_bytes;
    return status;
}

/* Multiply-adds of a step, for cutting a run into submissions: a matmul's, an attention's two
 * products (every key counted, masked or not); the other families do a few operations per element
 * they move and count as none. */
static uint64_t step_multiply_adds(const vkg_step *st) {
    if (st->kernel == VKG_KERNEL_MATMUL) {
        const vkg_matmul_params *m = &st->params.matmul;
        return (uint64_t)m->batch0 * m->batch1 * m->M * m->N * m->K;
    }
    if (st->kernel == VKG_KERNEL_ATTENTION) {
        const vkg_attention_params *a = &st->params.attention;
        return attention_rows(a) * a->S * (a->D + a->Dv);
    }
    return 0;
}

/* The plan's pieces: consecutive steps of at most submit_work multiply-adds together (a costlier
 * step alone, the cheap steps after it with it), so that no submission of a run holds more than a
 * device does within its timeout. */
static vkg_status segments_prepare(vkg_vk_session *s, vkg_error *err) {
    const vkg_plan *p = s->plan;
    s->segment_first = malloc(((size_t)p->n_steps + 1) * sizeof *s->segment_first);
    if (!s->segment_first) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory cutting the plan");
    const uint64_t limit = s->c->tuning.submit_work;
    int n = 0;
    uint64_t work = 0;   /* the piece's so far */
    s->segment_first[n++] = 0;
    for (int i = 0; i < p->n_steps; i++) {
        const uint64_t w = step_multiply_adds(&p->steps[i]);
        if (work > 0 && w > 0 && (work >= limit || w > limit - work)) s->segment_first[n++] = i, work = 0;
        work = w > UINT64_MAX - work ? UINT64_MAX : work + w;
    }
    s->segment_first[n] = p->n_steps;
    s->n_segments = n;
    if (s->c->opts.print_steps)
        fprintf(stderr, "vkgraph: %d steps in %d submission%s (at most %llu multiply-adds each, or one step)\n",
                p->n_steps, n, n == 1 ? "" : "s", (unsigned long long)limit);
    return VKG_OK;
}

vkg_status vkg_vk_steps_prepare(vkg_vk_session *s, vkg_error *err) {
    const vkg_plan *p = s->plan;
    s->steps = calloc((size_t)p->n_steps + 1, sizeof *s->steps);
    if (!s->steps) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory preparing %d steps", p->n_steps);
    int last_barrier = 0;
    /* vkg_device_options.print_steps: one line per step on stderr (shader, workgroups,
     * specialization). */
    const int show = s->c->opts.print_steps;
    for (int i = 0; i < p->n_steps; i++) {
        vkg_vk_step *vs = &s->steps[i];
        vkg_vk_shader sh;
        uint32_t spec[VKG_VK_MAX_SPEC], n_spec;
        vkg_status st = vkg_vk_step_shader(s->c, &p->steps[i], &sh, spec, &n_spec, vs->groups, err);
        if (st == VKG_OK) st = check_bindings(s, i, sh, err);
        if (st == VKG_OK) st = vkg_vk_pipeline_get(s->c, sh, spec, n_spec, &vs->pipeline, err);
        if (st == VKG_OK && p->steps[i].kernel == VKG_KERNEL_ATTENTION)
            st = merge_prepare(s, i, spec, err);
        if (st != VKG_OK) return st;
        int hazard = vkg_plan_step_hazard(p, i, last_barrier);
        if (hazard && !p->steps[i].barrier) {
            /* A planner bug: run correctly anyway, and make it loud where validation is on. */
            s->missing_barriers++;
            if (s->c->validation) {
                fprintf(stderr, "vkgraph: plan step %d (%s) reads or writes bytes an unsynchronised earlier "
                                "step touched, but has no barrier flag; adding one\n", i, p->steps[i].label);
                if (s->c->validation_counter) (*s->c->validation_counter)++;
            }
        }
        /* a split step writes the attention states that an earlier one's merge may still read */
        vs->barrier = i > 0 && (hazard || p->steps[i].barrier || vs->merge);
        if (vs->barrier) last_barrier = i;
        if (show) {
            fprintf(stderr, "vkgraph: step %3d %-24s %-15s groups %ux%ux%u spec", i, p->steps[i].label,
                    vkg_vk_shader_file(sh), vs->groups[0], vs->groups[1], vs->groups[2]);
            for (uint32_t k = 0; k < n_spec; k++) fprintf(stderr, " %u", spec[k]);
            fprintf(stderr, "%s", vs->barrier ? " (barrier)" : "");
            if (vs->merge)
                fprintf(stderr, ", then %s groups %ux%ux%u chunks %u", vkg_vk_shader_file(vs->merge->shader),
                        vs->merge_groups[0], vs->merge_groups[1], vs->merge_groups[2],
                        vs->merge->spec[VKG_SPEC_CHUNKS]);
            fprintf(stderr, "\n");
        }
    }
    return segments_prepare(s, err);
}

/* Bindings of the same step's dispatches: the attention states in place of out (the first of a
 * split attention step), or in place of q with out kept (its merge). */
static void split_bindings(const vkg_vk_session *s, const vkg_vk_step *vs, const vkg_step *st, int merge,
                           vkg_binding bind[VKG_MAX_BINDINGS]) {
    const vkg_binding states = {.region = VKG_VK_STATES_BUFFER(s->plan), .offset = 0, .bytes = vs->states_bytes};
    for (int b = 0; b < VKG_MAX_BINDINGS; b++) bind[b] = merge ? (vkg_binding){.region = -1} : st->bind[b];
    bind[merge ? 0 : 3] = states;
    if (merge) bind[3] = st->bind[3];
}

/* Allocates a descriptor set for a pipeline and points its bindings at bind[] (views made as its
 * shader reads them; unused slots at the dummy buffer). */
static vkg_status write_set(vkg_vk_session *s, const vkg_vk_pipeline *pl, const vkg_binding *bind, VkDescriptorSet *set,
                            vkg_error *err) {
    vkg_vk_context *c = s->c;
    VkDescriptorSetAllocateInfo ai = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
        .descriptorPool = s->pool,
        .descriptorSetCount = 1,
        .pSetLayouts = &pl->set_layout,
    };
    VkResult r = vkAllocateDescriptorSets(c->device, &ai, set);
    if (r != VK_SUCCESS) return vkg_vk_fail(err, r, "vkAllocateDescriptorSets");

    const vkg_vk_buffer *dummy = &s->buffers[VKG_VK_DUMMY_BUFFER(s->plan)];
    VkWriteDescriptorSet writes[VKG_MAX_BINDINGS];
    VkDescriptorBufferInfo infos[VKG_MAX_BINDINGS];
    const vkg_vk_shader sh = pl->shader;
    const uint32_t nb = vkg_vk_shader_bindings(sh);
    for (uint32_t b = 0; b < nb; b++) {
        const vkg_binding *bd = &bind[b];
        int used = bd->region >= 0 && bd->bytes > 0;
        const vkg_vk_buffer *buf = used ? &s->buffers[bd->region] : dummy;
        VkDeviceSize offset = used ? buf->start + bd->offset : 0, range = used ? bd->bytes : dummy->size;
        writes[b] = (VkWriteDescriptorSet){
            .sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
            .dstSet = *set,
            .dstBinding = b,
            .descriptorCount = 1,
        };
        VkFormat format;
        uint64_t texel;
        if (texel_view(sh, b, &format, &texel)) {
            /* Whole texels, rounded up: buffers are sized in 256-byte steps, so a view may
             * reach into that slack (the shaders never use what lies past the binding). */
            range = (range + texel - 1) / texel * texel;
            if (offset + range > buf->size) range = (buf->size - offset) / texel * texel;
            VkBufferViewCreateInfo vci = {
                .sType = VK_STRUCTURE_TYPE_BUFFER_VIEW_CREATE_INFO,
                .buffer = buf->buffer,
                .format = format,
                .offset = offset,
                .range = range,
            };
            r = vkCreateBufferView(c->device, &vci, NULL, &s->views[s->n_views]);
            if (r != VK_SUCCESS) return vkg_vk_fail(err, r, "vkCreateBufferView");
            writes[b].descriptorType = VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER;
            writes[b].pTexelBufferView = &s->views[s->n_views++];
        } else {
            infos[b] = (VkDescriptorBufferInfo){.buffer = buf->buffer, .offset = offset, .range = range};
            writes[b].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
            writes[b].pBufferInfo = &infos[b];
        }
    }
    vkUpdateDescriptorSets(c->device, nb, writes, 0, NULL);
    return VKG_OK;
}

vkg_status vkg_vk_descriptors_create(vkg_vk_session *s, vkg_error *err) {
    const vkg_plan *p = s->plan;
    uint32_t n_storage = 0, n_texel = 0, n_sets = 0;
    for (int i = 0; i < p->n_steps; i++) {
        const vkg_vk_pipeline *pipelines[2] = {s->steps[i].pipeline, s->steps[i].merge};
        for (int k = 0; k < 2 && pipelines[k]; k++, n_sets++) {
            vkg_vk_shader sh = pipelines[k]->shader;
            uint32_t mask = vkg_vk_shader_texel_mask(sh);
            for (uint32_t b = 0; b < vkg_vk_shader_bindings(sh); b++) {
                if ((mask >> b) & 1) n_texel++;
                else n_storage++;
            }
        }
    }
    VkDescriptorPoolSize sizes[2];
    uint32_t n_sizes = 0;
    if (n_storage) sizes[n_sizes++] = (VkDescriptorPoolSize){VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, n_storage};
    if (n_texel) sizes[n_sizes++] = (VkDescriptorPoolSize){VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER, n_texel};
    if (p->n_steps == 0) return VKG_OK;
    VkDescriptorPoolCreateInfo pci = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
        .maxSets = n_sets,
        .poolSizeCount = n_sizes,
        .pPoolSizes = sizes,
    };
    VkResult r = vkCreateDescriptorPool(s->c->device, &pci, NULL, &s->pool);
    if (r != VK_SUCCESS) {
        s->pool = VK_NULL_HANDLE;
        return vkg_vk_fail(err, r, "vkCreateDescriptorPool");
    }
    s->views = calloc((size_t)n_texel + 1, sizeof *s->views);
    if (!s->views) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory for buffer views");

    vkg_status st = VKG_OK;
    for (int i = 0; i < p->n_steps && st == VKG_OK; i++) {
        vkg_vk_step *vs = &s->steps[i];
        if (!vs->merge) {
            st = write_set(s, vs->pipeline, p->steps[i].bind, &vs->set, err);
            continue;
        }
        vkg_binding bind[VKG_MAX_BINDINGS];
        split_bindings(s, vs, &p->steps[i], 0, bind);
        st = write_set(s, vs->pipeline, bind, &vs->set, err);
        split_bindings(s, vs, &p->steps[i], 1, bind);
        if (st == VKG_OK) st = write_set(s, vs->merge, bind, &vs->merge_set, err);
    }
    return st;
}

static void memory_barrier(VkCommandBuffer cmd, VkPipelineStageFlags src_stage, VkAccessFlags src,
                           VkPipelineStageFlags dst_stage, VkAccessFlags dst) {
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER, .srcAccessMask = src, .dstAccessMask = dst};
    vkCmdPipelineBarrier(cmd, src_stage, dst_stage, 0, 1, &mb, 0, NULL, 0, NULL);
}

vkg_status vkg_vk_record(vkg_vk_session *s, VkCommandBuffer cmd, VkQueryPool queries, int first, int count,
                         vkg_error *err) {
    const vkg_plan *p = s->plan;
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    VkResult r = vkBeginCommandBuffer(cmd, &bi);
    if (r != VK_SUCCESS) return vkg_vk_fail(err, r, "vkBeginCommandBuffer");
    if (queries && first == 0) vkCmdResetQueryPool(cmd, queries, 0, (uint32_t)p->n_steps + 1);
    /* Order this run after the previous one, staged copies and host writes. */
    memory_barrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_HOST_BIT,
                   VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_HOST_WRITE_BIT,
                   VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
    if (queries && first == 0) vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, queries, 0);
    const vkg_vk_pipeline *bound = NULL;
    for (int i = first; i < first + count; i++) {
        const vkg_vk_step *vs = &s->steps[i];
        if (vs->barrier && i > first)   /* the first step is ordered by the barrier above */
            memory_barrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                           VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
        if (vs->groups[0] && vs->groups[1] && vs->groups[2]) {
            if (vs->pipeline != bound) {
                vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, vs->pipeline->pipeline);
                bound = vs->pipeline;
            }
            vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, vs->pipeline->layout, 0, 1, &vs->set, 0, NULL);
            vkCmdPushConstants(cmd, vs->pipeline->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0,
                               vkg_vk_shader_push_bytes(vs->pipeline->shader), p->steps[i].params.words);
            vkCmdDispatch(cmd, vs->groups[0], vs->groups[1], vs->groups[2]);
            if (vs->merge) {   /* the chunks' states, written above, into the step's output */
                memory_barrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                               VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT);
                vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, vs->merge->pipeline);
                bound = vs->merge;
                vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, vs->merge->layout, 0, 1, &vs->merge_set, 0,
                                        NULL);
                vkCmdPushConstants(cmd, vs->merge->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0,
                                   vkg_vk_shader_push_bytes(vs->merge->shader), p->steps[i].params.words);
                vkCmdDispatch(cmd, vs->merge_groups[0], vs->merge_groups[1], vs->merge_groups[2]);
            }
        }
        if (queries) vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries, (uint32_t)i + 1);
    }
    /* Results visible to the host (outputs, states) and to staged reads. */
    memory_barrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                   VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                   VK_ACCESS_HOST_READ_BIT | VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT);
    r = vkEndCommandBuffer(cmd);
    if (r != VK_SUCCESS) return vkg_vk_fail(err, r, "vkEndCommandBuffer");
    return VKG_OK;
}
