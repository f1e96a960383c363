/* The blocked attention algorithm, once, for any vector width: included by one file per variant
 * (attention_portable.c, attention_avx2.c, attention_avx512.c) after it defines
 *   ATTN_NAME        the variant's entry point (a vkg_attn_fn, attention_variant.h)
 *   vf, VL           its vector type of VL floats
 *   KV, RT           a block of keys is KB = KV * VL keys; scores are computed RT rows x KB
 *                    keys at a time, in registers
 *   CH               vectors of one output row kept in registers while P.V adds a block
 *   vzero, vload, vstore, vset1, vadd, vmul, vmax (a > b ? a : b, lane by lane),
 *   vmadd(a, b, c) = a * b + c (fused or not)
 *
 * Up to VKG_ATTN_GROUP consecutive query rows of one batch entry form a group.  For each block
 * of KB keys (blocks start at key 0, KB, 2 KB, ... whatever the group), the keys are packed
 * transposed (kT[d][j]) once for the whole group, and then, per row:
 *   s_j   = scale * (q . k_j), the dot summed in d order from 0 by vmadd (lanes are keys);
 *           keys past the row's last (the causal mask) get s_j = -inf;
 *   none of s_j differs from -inf: the block leaves the row as it was; otherwise
 *   m'    = max(m, max_j s_j),  c = exp(m - m'),  p_j = exp(s_j - m')   (vkg_cpu_exp)
 *   l     = l c + sum_j p_j     (VL partial sums, lane i adding the keys j = i mod VL in order,
 *                                added up in lane order at the end)
 *   acc   = acc c, then acc += p_j v_j by vmadd in key order, skipping keys with s_j = -inf
 *   out   = l == 0 ? 0 : acc / l
 * Every step of a row depends on that row and the block's position only, never on the other
 * rows of its group, so the results do not depend on how the units were cut.  Keys with
 * s_j = -inf and masked keys take no part (not even 0 * v_j, which a non-finite v_j would turn
 * into NaN); a NaN score makes p_j, hence l and the outputs, NaN, as in the reference. */
#include <stdint.h>
#include <string.h>

#include "cpu/attention_variant.h"

#define KB (KV * VL)
#define GROUP_PAD ((VKG_ATTN_GROUP + RT - 1) / RT * RT) /* rows of packed q: whole score tiles */
#define ALIGNED __attribute__((aligned(64)))
#define INLINE static inline __attribute__((always_inline))

_Static_assert(VKG_ATTENTION_MAX_DV % (CH * VL) == 0, "output rows are whole register chunks");

/* The buffers of one group (on the stack: about 140 KiB). */
typedef struct group {
    float qp[GROUP_PAD * VKG_ATTN_MAX_D];  /* the rows' q, row r at r * D (padding rows zero) */
    float kT[VKG_ATTN_MAX_D * KB];         /* the block's keys transposed: k_j[d] at d * KB + j */
    float vp[KB * VKG_ATTENTION_MAX_DV];   /* the block's values, where they are not read in place */
    float s[GROUP_PAD * KB];               /* scores, then weights: row r's at r * KB */
    float acc[VKG_ATTN_GROUP * VKG_ATTENTION_MAX_DV]; /* row r's output sums at r * dv_pad */
    vf l[VKG_ATTN_GROUP];
    float m[VKG_ATTN_GROUP];
    vkg_attn_row rows[VKG_ATTN_GROUP];
} group;

/* s[r][j] = scale * (q_r . kT[.][j]) for RT rows x KB keys. */
INLINE void score_tile(const float *qp, size_t D, const float *kT, float scale, float *s) {
    vf acc[RT][KV];
    for (int r = 0; r < RT; r++)
        for (int c = 0; c < KV; c++) acc[r][c] = vzero();
    for (size_t d = 0; d < D; d++) {
        vf kd[KV];
        for (int c = 0; c < KV; c++) kd[c] = vload(kT + d * KB + c * VL);
        for (int r = 0; r < RT; r++) {
            const vf qd = vset1(qp[r * D + d]);
            for (int c = 0; c < KV; c++) acc[r][c] = vmadd(qd, kd[c], acc[r][c]);
        }
    }
    const vf sc = vset1(scale);
    for (int r = 0; r < RT; r++)
        for (int c = 0; c < KV; c++) vstore(s + r * KB + c * VL, vmul(sc, acc[r][c]));
}

/* One row's online-softmax step over one block: s holds the row's KB scores of which the first
 * n are its keys; v_j is at vrows + j * v_step (dv_pad floats, zero past Dv when packed). */
INLINE void row_block(float *s, size_t n, float *m, vf *l, float *acc, size_t dv_pad, const float *vrows,
                      size_t v_step) {
    for (size_t j = n; j < KB; j++) s[j] = -INFINITY;
    int live = 0, holes = 0;
    for (size_t j = 0; j < n; j++) {
        live |= s[j] != -INFINITY;
        holes |= s[j] == -INFINITY;
    }
    if (!live) return;
    vf mx = vload(s);
    for (int c = 1; c < KV; c++) mx = vmax(vload(s + c * VL), mx);
    float lanes[VL];
    memcpy(lanes, &mx, sizeof lanes);
    float bm = lanes[0];
    for (int i = 1; i < VL; i++) bm = lanes[i] > bm ? lanes[i] : bm;
    const float mn = bm > *m ? bm : *m;
    const float corr = vkg_cpu_exp(*m - mn);
    *m = mn;
    float p[KB] ALIGNED;
    for (int j = 0; j < KB; j++) p[j] = vkg_cpu_exp(s[j] - mn);
    vf ps = vload(p);
    for (int c = 1; c < KV; c++) ps = vadd(ps, vload(p + c * VL));
    const vf cv = vset1(corr);
    *l = vadd(vmul(*l, cv), ps);
    for (size_t x = 0; x < dv_pad; x += CH * VL) {
        vf a[CH];
        for (int c = 0; c < CH; c++) a[c] = vmul(vload(acc + x + c * VL), cv);
        for (size_t j = 0; j < n; j++) {
            if (holes && s[j] == -INFINITY) continue;
            const vf pj = vset1(p[j]);
            const float *vr = vrows + j * v_step + x;
            for (int c = 0; c < CH; c++) a[c] = vmadd(pj, vload(vr + c * VL), a[c]);
        }
        for (int c = 0; c < CH; c++) vstore(acc + x + c * VL, a[c]);
    }
}

/* Rows r0 .. r0 + g - 1, all of one batch entry (consecutive positions). */
static void run_group(group *G, const vkg_attention_params *p, const float *q, const float *k, const float *v,
                      float *out, size_t r0, size_t g, int64_t index) {
    const size_t D = p->D, Dv = p->Dv, dv_pad = (Dv + CH * VL - 1) / (CH * VL) * (CH * VL);
    const size_t ks = p->k_stride_s, kds = p->k_stride_d, vs = p->v_stride_s, vds = p->v_stride_d;
    /* values are read in place when their rows are contiguous whole chunks */
    const int v_direct = vds == 1 && Dv == dv_pad;
    size_t keys_max = 0;
    for (size_t r = 0; r < g; r++) {
        vkg_attn_row *w = &G->rows[r];
        *w = vkg_attn_row_of(p, q, k, v, out, r0 + r, index);
        if (w->keys > keys_max) keys_max = w->keys;
        for (size_t d = 0; d < D; d++) G->qp[r * D + d] = w->q[d * p->q_stride_d];
        G->m[r] = -INFINITY;
        G->l[r] = vzero();
        memset(G->acc + r * dv_pad, 0, dv_pad * sizeof(float));
    }
    memset(G->qp + g * D, 0, (GROUP_PAD - g) * D * sizeof(float));
    const float *kb = G->rows[0].k, *vb = G->rows[0].v;
    for (size_t j0 = 0; j0 < keys_max; j0 += KB) {
        const size_t nb = keys_max - j0 < KB ? keys_max - j0 : KB;
        const float *kr = kb + j0 * ks;
        for (size_t d = 0; d < D; d++)
            for (size_t j = 0; j < nb; j++) G->kT[d * KB + j] = kr[j * ks + d * kds];
        for (size_t j = nb; j < KB; j++)
            for (size_t d = 0; d < D; d++) G->kT[d * KB + j] = 0.0f;
        const float *vrows = vb + j0 * vs;
        size_t v_step = vs;
        if (!v_direct) {
            for (size_t j = 0; j < nb; j++)
                for (size_t x = 0; x < dv_pad; x++)
                    G->vp[j * dv_pad + x] = x < Dv ? vb[(j0 + j) * vs + x * vds] : 0.0f;
            vrows = G->vp;
            v_step = dv_pad;
        }
        for (size_t r = 0; r < g; r += RT) {
            size_t tile_keys = 0; /* the most keys a row of the tile sees */
            for (size_t i = r; i < r + RT && i < g; i++)
                if (G->rows[i].keys > tile_keys) tile_keys = G->rows[i].keys;
            if (tile_keys > j0) score_tile(G->qp + r * D, D, G->kT, p->scale, G->s + r * KB);
        }
        for (size_t r = 0; r < g; r++) {
            const size_t keys = G->rows[r].keys;
            if (keys <= j0) continue;
            const size_t n = keys - j0 < nb ? keys - j0 : nb;
            row_block(G->s + r * KB, n, &G->m[r], &G->l[r], G->acc + r * dv_pad, dv_pad, vrows, v_step);
        }
    }
    for (size_t r = 0; r < g; r++) {
        float lanes[VL];
        memcpy(lanes, &G->l[r], sizeof lanes);
        float l = 0.0f;
        for (int i = 0; i < VL; i++) l += lanes[i];
        const float *a = G->acc + r * dv_pad;
        float *o = G->rows[r].o;
        for (size_t d = 0; d < Dv; d++) o[d * p->o_stride_d] = l == 0.0f ? 0.0f : a[d] / l;
    }
}

void ATTN_NAME(const vkg_attention_params *p, const float *q, const float *k, const float *v, float *out,
               const int32_t *indices, size_t row_begin, size_t row_end) {
    const int64_t index = vkg_attn_index(p, indices);
    group G;
    for (size_t r = row_begin; r < row_end;) {
        size_t g = p->T - r % p->T; /* the rest of this batch entry's rows */
        if (g > row_end - r) g = row_end - r;
        if (g > VKG_ATTN_GROUP) g = VKG_ATTN_GROUP;
        run_group(&G, p, q, k, v, out, r, g, index);
        r += g;
    }
}
