/* What kernel_attention.c shares with its blocked variants (attention_portable.c,
 * attention_avx2.c, attention_avx512.c, one algorithm: attention_body.h): where one query row's
 * operands are and how many keys it sees (the reference reads them here too, so the mask rule
 * lives in one place), and the bounds of the blocked variants' buffers. */
#ifndef VKG_CPU_ATTENTION_VARIANT_H
#define VKG_CPU_ATTENTION_VARIANT_H

#include <stddef.h>
#include <stdint.h>

#include "cpu/kernels.h"

enum {
    VKG_ATTN_GROUP = 32,  /* query rows of one batch entry computed together (vector lanes)    */
    VKG_ATTN_KEYS = 32,   /* keys per block: one max and rescale per row and block; the same on
                             every variant, so that the fused ones agree bit for bit           */
    VKG_ATTN_MAX_D = 256, /* the widest q/k row the blocked variants pack; wider rows run the
                             reference (params/attention.h bounds Dv by VKG_ATTENTION_MAX_DV) */
    VKG_ATTN_CHUNK = 512  /* keys per chunk (whole blocks): a row's keys are summed a chunk at a
                             time from a fresh softmax state, and the chunks' states folded in
                             key order (vkg_attn_fold), so that a decode step's few groups can
                             spread their keys over threads with the bits of one thread's walk */
};
_Static_assert(VKG_ATTN_CHUNK % VKG_ATTN_KEYS == 0, "a chunk is whole blocks");

/* Query row r (a unit): its q row, the first key and value of its batch entry, its output row,
 * and which keys it sees (first .. keys-1: the causal mask and its window block the rest). */
typedef struct vkg_attn_row {
    const float *q, *k, *v;
    float *o;
    size_t t;    /* the row's query position */
    size_t first, keys; /* it sees keys first .. keys-1 */
} vkg_attn_row;

/* The rows that read the same keys and values one after another: a batch entry's T, or with
 * grouped-query attention (keys and values broadcast over b1: the query heads of a group share
 * them) the T rows of each of the b1 query heads of one b0, so that a decode step's G heads read
 * their key/value head once, as one group, not once per head. */
static inline size_t vkg_attn_rows_sharing_keys(const vkg_attention_params *p) {
    return VKG_ATTENTION_GROUPED(*p) ? (size_t)p->T * p->batch1 : p->T;
}

/* The runtime index the causal mask adds for batch entry b0 (0 without the mask). */
static inline int64_t vkg_attn_index(const vkg_attention_params *p, const int32_t *indices, size_t b0) {
    if (p->mask_kind != VKG_ATTENTION_MASK_CAUSAL) return 0;
    return vkg_cpu_dyn_index(indices, p->dyn_index + (p->mask_rows & VKG_MASK_ROWS_OWN_INDEX ? (uint32_t)b0 : 0u));
}

/* The position of query row t: t + causal_offset + index, or with one_position (the rows are
 * the heads of one token) causal_offset + index. */
static inline int64_t vkg_attn_last(const vkg_attention_params *p, size_t t, int64_t index) {
    return (p->mask_rows & VKG_MASK_ROWS_ONE_POSITION ? 0 : (int64_t)t) + p->causal_offset + index;
}

/* The keys query row t sees: all S, or causal: keys j <= its position. */
static inline size_t vkg_attn_keys(const vkg_attention_params *p, size_t t, int64_t index) {
    if (p->mask_kind != VKG_ATTENTION_MASK_CAUSAL) return p->S;
    int64_t last = vkg_attn_last(p, t, index);
    return last < 0 ? 0 : last + 1 < (int64_t)p->S ? (size_t)(last + 1) : p->S;
}

/* The first key it sees: 0, or with a sliding window last - window + 1 (at most its keys). */
static inline size_t vkg_attn_first(const vkg_attention_params *p, size_t t, int64_t index, size_t keys) {
    if (p->mask_kind != VKG_ATTENTION_MASK_CAUSAL || p->window == 0) return 0;
    int64_t first = vkg_attn_last(p, t, index) - (int64_t)p->window + 1;
    return first <= 0 ? 0 : (size_t)first < keys ? (size_t)first : keys;
}

static inline vkg_attn_row vkg_attn_row_of(const vkg_attention_params *p, const float *q, const float *k,
                                           const float *v, float *out, size_t r, const int32_t *indices) {
    const size_t t = r % p->T, b1 = r / p->T % p->batch1, b0 = r / ((size_t)p->T * p->batch1);
    const int64_t index = vkg_attn_index(p, indices, b0);
    vkg_attn_row w;
    w.q = q + p->q_offset + b0 * p->q_stride_b0 + b1 * p->q_stride_b1 + t * p->q_stride_t;
    w.k = k + p->k_offset + b0 * p->k_stride_b0 + b1 * p->k_stride_b1;
    w.v = v + p->v_offset + b0 * p->v_stride_b0 + b1 * p->v_stride_b1;
    w.o = out + p->o_offset + b0 * p->o_stride_b0 + b1 * p->o_stride_b1 + t * p->o_stride_t;
    w.t = t;
    w.keys = vkg_attn_keys(p, t, index);
    w.first = vkg_attn_first(p, t, index, w.keys);
    return w;
}

/* A row's softmax state over some keys: the largest score m, the weights' sum l and the weighted
 * values acc[Dv], each weight e^(s - m) (nothing seen: m = -inf, l = 0, acc = 0).
 *
 * Folds the state of the next keys (m, l, acc) into a row's running state (*tm, *tl, tacc), both
 * rescaled to the larger maximum; into a state that has seen nothing, a copy (0 * 0 + x * e^0).
 * Keys that all weigh 0 change nothing (skipped: how many such chunks a row meets depends on the
 * other rows of its group, and x * e^0 + 0 * 0 would turn a -0 into +0), while a NaN among them (l
 * NaN) makes the row NaN, as it does in one walk.  Plain C, no contraction (-ffp-contract=off):
 * the same bits in every variant's file and in kernel_attention.c. */
static inline void vkg_attn_fold(float *tm, float *tl, float *tacc, float m, float l, const float *acc, size_t dv) {
    if (m == -INFINITY && l == 0.0f) return;
    const float mn = m > *tm ? m : *tm, base = mn == -INFINITY ? 0.0f : mn;
    const float ct = vkg_cpu_exp(*tm - base), c = vkg_cpu_exp(m - base);
    *tl = *tl * ct + l * c;
    for (size_t d = 0; d < dv; d++) tacc[d] = tacc[d] * ct + acc[d] * c;
    *tm = mn;
}

/* A row's outputs from its state over all its keys: acc / l, zeros where it saw none. */
static inline void vkg_attn_write_out(float *o, size_t o_stride_d, const float *acc, float l, size_t dv) {
    for (size_t d = 0; d < dv; d++) o[d * o_stride_d] = l == 0.0f ? 0.0f : acc[d] / l;
}

/* A variant's whole kernel, with vkg_cpu_attention's meaning (D <= VKG_ATTN_MAX_D). */
typedef void vkg_attn_fn(const vkg_attention_params *p, const float *q, const float *k, const float *v,
                         float *out, const int32_t *indices, size_t row_begin, size_t row_end);

/* A variant's chunk of a group: the softmax state of rows r0 .. r0 + g - 1 (rows that share
 * their keys, a unit of vkg_cpu_attention_units) over keys c0 .. c0 + VKG_ATTN_CHUNK - 1, into
 * state: row i's m, l and acc[Dv] at state + i * (2 + Dv). */
typedef void vkg_attn_chunk_fn(const vkg_attention_params *p, const float *q, const float *k, const float *v,
                               float *out, const int32_t *indices, size_t r0, size_t g, size_t c0, float *state);

vkg_attn_fn vkg_attn_portable;
vkg_attn_chunk_fn vkg_attn_portable_chunk;
#if defined(VKG_MATMUL_X86)
vkg_attn_fn vkg_attn_avx2;
vkg_attn_fn vkg_attn_avx512;
vkg_attn_chunk_fn vkg_attn_avx2_chunk;
vkg_attn_chunk_fn vkg_attn_avx512_chunk;
#endif

#endif
