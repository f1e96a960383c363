/* Lowering fused attention (compile.c's fuse_attention): softmax(causal(scale(q k^T))) @ v as one
 * step of the attention kernel, q, k and v read through their views' strides (heads split from a
 * [T, 3C] projection or read from a KV cache cost no copy).  Where the keys and values exceed one
 * binding (a layer's cache of Qwen3-0.6B's 40960 positions, 160 MiB of keys, against lavapipe's
 * and many phones' 128 MiB), the step runs in runs of its batch entries (key/value heads, or a
 * decode step's rows), each binding its own heads' keys: a head's row of keys is never cut, since
 * a softmax needs it whole. */
#include "graph/compile_internal.h"

#include <stddef.h>
#include <string.h>

#define WORD(field) ((int)(offsetof(vkg_attention_params, field) / 4))

/* The fused group of the product pv: its operands, scale and mask. */
typedef struct attention_group {
    vkg_tensor pv, scale, mask;
    vkg_view q, k, v, o;
    int nd;                    /* the output's dimensions */
    int64_t batch0, batch1;    /* its batch extents (1 where it has no such dimension) */
} attention_group;

static vkg_status emit(vkg_compiler *c, const attention_group *A, const vkg_entries *e, const char *label) {
    const vkg_graph *g = c->g;
    const vkg_node *out = &g->nodes[A->pv];
    const vkg_tensor scores = c->fused_input[c->fused_softmax[A->pv]];
    vkg_sym_step *s = vkg_compile_new_step(c, VKG_KERNEL_ATTENTION, A->pv, label);
    if (!s) return vkg_error_set(c->err, VKG_ERR_OUT_OF_MEMORY, "out of memory compiling");
    vkg_attention_params *p = &s->step.params.attention;
    const vkg_view *q = &A->q, *k = &A->k, *v = &A->v, *o = &A->o;
    const int nd = A->nd;
    p->T = (uint32_t)out->shape[nd - 2];
    p->S = (uint32_t)g->nodes[scores].shape[g->nodes[scores].ndim - 1];
    p->D = (uint32_t)q->shape[q->ndim - 1];
    p->Dv = (uint32_t)out->shape[nd - 1];
    p->batch1 = (uint32_t)e->n1;
    p->batch0 = (uint32_t)e->n0;
    p->q_stride_t = (uint32_t)q->strides[q->ndim - 2], p->q_stride_d = (uint32_t)q->strides[q->ndim - 1];
    p->k_stride_s = (uint32_t)k->strides[k->ndim - 2], p->k_stride_d = (uint32_t)k->strides[k->ndim - 1];
    p->v_stride_s = (uint32_t)v->strides[v->ndim - 2], p->v_stride_d = (uint32_t)v->strides[v->ndim - 1];
    p->o_stride_t = (uint32_t)o->strides[o->ndim - 2], p->o_stride_d = (uint32_t)o->strides[o->ndim - 1];
    vkg_compile_batch_strides(q, out, &p->q_stride_b0, &p->q_stride_b1);
    vkg_compile_batch_strides(k, out, &p->k_stride_b0, &p->k_stride_b1);
    vkg_compile_batch_strides(v, out, &p->v_stride_b0, &p->v_stride_b1);
    vkg_compile_batch_strides(o, out, &p->o_stride_b0, &p->o_stride_b1);
    p->scale = A->scale != VKG_NONE ? g->nodes[A->scale].attr.scale.s : 1.0f;
    p->mask_kind = VKG_ATTENTION_MASK_NONE;
    p->dyn_index = VKG_NO_INDEX;
    /* the strides above are the whole operands'; the bindings span the step's entries */
    const vkg_view qe = vkg_compile_entries_of(*q, nd, e), ke = vkg_compile_entries_of(*k, nd, e),
                   ve = vkg_compile_entries_of(*v, nd, e), oe = vkg_compile_entries_of(*o, nd, e);
    vkg_compile_bind(s, 0, &qe, WORD(q_offset));
    vkg_compile_bind(s, 1, &ke, WORD(k_offset));
    vkg_compile_bind(s, 2, &ve, WORD(v_offset));
    vkg_compile_bind(s, 3, &oe, WORD(o_offset));
    if (A->mask != VKG_NONE) {
        const vkg_node *m = &g->nodes[A->mask];
        p->mask_kind = VKG_ATTENTION_MASK_CAUSAL;
        p->causal_offset = m->attr.causal.offset;
        p->window = m->attr.causal.window;
        p->mask_rows = vkg_compile_mask_rows(m);
        if (m->src[1] != VKG_NONE) {
            /* with an index for each batch0 entry, the run's first reads the e0-th */
            p->dyn_index = (uint32_t)c->index_slot[m->src[1]] +
                           (p->mask_rows & VKG_MASK_ROWS_OWN_INDEX ? (uint32_t)e->e0 : 0u);
            s->sym[4].storage = m->src[1]; /* the runtime indices: one i32 */
            s->sym[4].lo = 0;
            s->sym[4].hi = 1;
        }
    }
    return VKG_OK;
}

vkg_status vkg_compile_lower_attention(vkg_compiler *c, vkg_tensor pv) {
    const vkg_graph *g = c->g;
    const vkg_node *out = &g->nodes[pv];
    const vkg_tensor sm = c->fused_softmax[pv], scores = c->fused_input[sm];
    attention_group A = {.pv = pv, .scale = c->fused_scale[sm], .mask = c->fused_mask[sm], .nd = out->ndim};
    A.q = c->view[g->nodes[scores].src[0]];
    A.k = c->view[g->nodes[scores].src[1]];
    A.v = c->view[out->src[1]];
    A.o = c->view[pv];
    A.batch1 = A.nd >= 3 ? out->shape[A.nd - 3] : 1;
    A.batch0 = A.nd >= 4 ? out->shape[A.nd - 4] : 1;
    char label[48] = "attention";
    if (A.scale != VKG_NONE) strcat(label, "+scale");
    if (A.mask != VKG_NONE) strcat(label, g->nodes[A.mask].attr.causal.window ? "+window" : "+causal");

    const vkg_view operands[4] = {A.q, A.k, A.v, A.o};
    const vkg_entries e = vkg_compile_fit_entries(c, operands, 4, A.nd, A.batch0, A.batch1);
    const int64_t parts = ((A.batch0 + e.n0 - 1) / e.n0) * ((A.batch1 + e.n1 - 1) / e.n1); /* <= the entries */
    vkg_status st = vkg_compile_check_split(c, pv, "attention", parts);
    int64_t part = 0;
    for (int64_t e0 = 0; e0 < A.batch0 && st == VKG_OK; e0 += e.n0)
        for (int64_t e1 = 0; e1 < A.batch1 && st == VKG_OK; e1 += e.n1) {
            const vkg_entries run = vkg_compile_entries_at(&e, e0, e1, A.batch0, A.batch1);
            char l[64];
            st = emit(c, &A, &run, vkg_compile_part_label(l, sizeof l, label, ++part, parts));
        }
    return st;
}
