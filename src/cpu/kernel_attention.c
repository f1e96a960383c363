/* Fused attention (params/attention.h) on the CPU.
 *
 * The reference, vkg_cpu_attention_reference (what the tests hold the variants to): over a range
 * of query rows (b0, b1, t); each row's keys are walked in order j = 0, 1, ... with the online
 * softmax:
 *   s = scale * (q . k_j);  m' = max(m, s);  l = l e^(m - m') + e^(s - m');
 *   acc = acc e^(m - m') + e^(s - m') v_j;   out = acc / l
 * Blocked keys (causal: j > t + causal_offset + index, or with a window j <= that - window) and
 * keys whose score is -inf take no part, so they weigh exactly 0, as softmax gives them.  A NaN
 * score makes the row's outputs NaN, as it makes every unblocked probability NaN in softmax.
 *
 * vkg_cpu_attention runs the blocked variant (attention_body.h: the same sums over blocks of keys,
 * one rescale per block, chunks of blocks folded in order, vector multiply-adds, vkg_cpu_exp) for
 * the widest instruction set this CPU has, the matmul's (portable C, AVX2 + FMA, AVX-512;
 * vkg_cpu_matmul_variant_runs says which run).  Every variant keeps the reference's masking, -inf
 * and NaN semantics and the unit contract (a row's bits never depend on how the rows were cut, so
 * neither on the thread count); its results differ from the reference's by rounding only (the
 * order of the sums, the rescale points, fused products, vkg_cpu_exp for expf).  Rows wider than
 * VKG_ATTN_MAX_D run the reference. */
#include "cpu/kernels.h"

#include "cpu/attention_variant.h"

size_t vkg_cpu_attention_rows(const vkg_attention_params *p) {
    return (size_t)p->batch0 * p->batch1 * p->T;
}

static size_t groups_per_span(size_t span) {
    return (span + VKG_ATTN_GROUP - 1) / VKG_ATTN_GROUP;
}

size_t vkg_cpu_attention_units(const vkg_attention_params *p) {
    const size_t span = vkg_attn_rows_sharing_keys(p);
    return span ? vkg_cpu_attention_rows(p) / span * groups_per_span(span) : 0;
}

double vkg_cpu_attention_unit_cost(const vkg_attention_params *p) {
    const size_t units = vkg_cpu_attention_units(p);
    return units ? 2.0 * p->S * (p->D + p->Dv) * (double)vkg_cpu_attention_rows(p) / (double)units : 0.0;
}

/* The first row of unit u (u = units: the end of the rows; 0 where there are no rows). */
static size_t unit_row(const vkg_attention_params *p, size_t u) {
    const size_t span = vkg_attn_rows_sharing_keys(p), per = groups_per_span(span);
    if (per == 0) return 0;
    const size_t row = u / per * span;
    const size_t in_span = u % per * VKG_ATTN_GROUP;
    return row + (in_span < span ? in_span : span);
}

void vkg_cpu_attention_reference(const vkg_attention_params *p, const float *q, const float *k, const float *v,
                                 float *out, const int32_t *indices, size_t row_begin, size_t row_end) {
    float acc[VKG_ATTENTION_MAX_DV];
    for (size_t r = row_begin; r < row_end; r++) {
        const vkg_attn_row w = vkg_attn_row_of(p, q, k, v, out, r, indices);
        float m = -INFINITY, l = 0.0f;
        for (size_t d = 0; d < p->Dv; d++) acc[d] = 0.0f;
        for (size_t j = w.first; j < w.keys; j++) {
            const float *kj = w.k + j * p->k_stride_s, *vj = w.v + j * p->v_stride_s;
            float dot = 0.0f;
            for (size_t d = 0; d < p->D; d++) dot += w.q[d * p->q_stride_d] * kj[d * p->k_stride_d];
            float s = p->scale * dot;
            if (s == -INFINITY) continue;
            if (!(s <= m)) { /* a new maximum, or NaN (which then stays) */
                float corr = expf(m - s);
                l *= corr;
                for (size_t d = 0; d < p->Dv; d++) acc[d] *= corr;
                m = s;
            }
            float e = expf(s - m);
            l += e;
            for (size_t d = 0; d < p->Dv; d++) acc[d] += e * vj[d * p->v_stride_d];
        }
        vkg_attn_write_out(w.o, p->o_stride_d, acc, l, p->Dv);
    }
}

/* Indexed by VKG_CPU_MATMUL_*: each variant's whole kernel and its chunk of a group; a variant
 * not built for this architecture has none. */
static const struct {
    vkg_attn_fn *whole;
    vkg_attn_chunk_fn *chunk;
} variants[VKG_CPU_MATMUL_VARIANTS] = {
    [VKG_CPU_MATMUL_PORTABLE] = {vkg_attn_portable, vkg_attn_portable_chunk},
#if defined(VKG_MATMUL_X86)
    [VKG_CPU_MATMUL_AVX2] = {vkg_attn_avx2, vkg_attn_avx2_chunk},
    [VKG_CPU_MATMUL_AVX512] = {vkg_attn_avx512, vkg_attn_avx512_chunk},
#endif
};

/* The variant asked for, or the portable one where that one cannot run here. */
static int runnable(int variant) {
    return vkg_cpu_matmul_variant_runs(variant) && variants[variant].whole ? variant : VKG_CPU_MATMUL_PORTABLE;
}

void vkg_cpu_attention_with(int variant, const vkg_attention_params *p, const float *q, const float *k,
                            const float *v, float *out, const int32_t *indices, size_t row_begin, size_t row_end) {
    if (p->D > VKG_ATTN_MAX_D) {
        vkg_cpu_attention_reference(p, q, k, v, out, indices, row_begin, row_end);
        return;
    }
    variants[runnable(variant)].whole(p, q, k, v, out, indices, row_begin, row_end);
}

void vkg_cpu_attention(const vkg_attention_params *p, const float *q, const float *k, const float *v, float *out,
                       const int32_t *indices, size_t unit_begin, size_t unit_end) {
    vkg_cpu_attention_with(vkg_cpu_matmul_best_variant(), p, q, k, v, out, indices, unit_row(p, unit_begin),
                           unit_row(p, unit_end));
}

/* ---- a group's keys in chunks over threads ---------------------------------------------------- */

size_t vkg_cpu_attention_chunks(const vkg_attention_params *p, const int32_t *indices) {
    if (p->D > VKG_ATTN_MAX_D || vkg_cpu_attention_rows(p) == 0) return 0; /* the reference: one walk */
    size_t keys = 0; /* the most any row sees: its entry's last row, the causal keys growing with t */
    for (size_t b0 = 0; b0 < p->batch0; b0++) {
        const size_t n = vkg_attn_keys(p, p->T - 1, vkg_attn_index(p, indices, b0));
        if (n > keys) keys = n;
    }
    return (keys + VKG_ATTN_CHUNK - 1) / VKG_ATTN_CHUNK;
}

/* The most rows a group holds, and the floats of one row's state (m, l, acc). */
static size_t group_rows(const vkg_attention_params *p) {
    const size_t span = vkg_attn_rows_sharing_keys(p);
    return span < VKG_ATTN_GROUP ? span : VKG_ATTN_GROUP;
}

static size_t state_floats(const vkg_attention_params *p) { return 2 + (size_t)p->Dv; }

size_t vkg_cpu_attention_state_floats(const vkg_attention_params *p, size_t chunks) {
    return chunks * vkg_cpu_attention_units(p) * group_rows(p) * state_floats(p);
}

/* Where chunk c of group u keeps its rows' states. */
static float *chunk_state(const vkg_attention_params *p, float *state, size_t c, size_t u) {
    return state + (c * vkg_cpu_attention_units(p) + u) * group_rows(p) * state_floats(p);
}

void vkg_cpu_attention_chunk(const vkg_attention_params *p, const float *q, const float *k, const float *v,
                             float *out, const int32_t *indices, float *state, size_t unit_begin, size_t unit_end) {
    vkg_attn_chunk_fn *const chunk = variants[runnable(vkg_cpu_matmul_best_variant())].chunk;
    const size_t groups = vkg_cpu_attention_units(p);
    for (size_t i = unit_begin; i < unit_end; i++) {
        const size_t c = i / groups, u = i % groups, r0 = unit_row(p, u);
        chunk(p, q, k, v, out, indices, r0, unit_row(p, u + 1) - r0, c * VKG_ATTN_CHUNK, chunk_state(p, state, c, u));
    }
}

void vkg_cpu_attention_merge(const vkg_attention_params *p, const float *q, const float *k, const float *v,
                             float *out, const int32_t *indices, size_t chunks, float *state, size_t unit_begin,
                             size_t unit_end) {
    float acc[VKG_ATTENTION_MAX_DV];
    for (size_t u = unit_begin; u < unit_end; u++) {
        const size_t r0 = unit_row(p, u), r1 = unit_row(p, u + 1);
        for (size_t r = r0; r < r1; r++) {
            float m = -INFINITY, l = 0.0f;
            for (size_t d = 0; d < p->Dv; d++) acc[d] = 0.0f;
            for (size_t c = 0; c < chunks; c++) {
                const float *st = chunk_state(p, state, c, u) + (r - r0) * state_floats(p);
                vkg_attn_fold(&m, &l, acc, st[0], st[1], st + 2, p->Dv);
            }
            vkg_attn_write_out(vkg_attn_row_of(p, q, k, v, out, r, indices).o, p->o_stride_d, acc, l, p->Dv);
        }
    }
}
