/* Lowering fused attention (compile.c's fuse_attention): softmax(causal(scale(q k^T))) @ v as one
 * step of the attention kernel, q, k and v read through their views' strides (heads split from a
 * [T, 3C] projection or read from a KV cache cost no copy). */
#include "graph/compile_internal.h"

#include <stddef.h>
#include <string.h>

#define WORD(field) ((int)(offsetof(vkg_attention_params, field) / 4))

vkg_status vkg_compile_lower_attention(vkg_compiler *c, vkg_tensor pv) {
    const vkg_graph *g = c->g;
    const vkg_node *out = &g->nodes[pv];
    vkg_tensor sm = c->fused_softmax[pv], scores = c->fused_input[sm];
    vkg_tensor sc = c->fused_scale[sm], mk = c->fused_mask[sm];
    const vkg_view *q = &c->view[g->nodes[scores].src[0]], *k = &c->view[g->nodes[scores].src[1]];
    const vkg_view *v = &c->view[out->src[1]], *o = &c->view[pv];
    char label[48] = "attention";
    if (sc != VKG_NONE) strcat(label, "+scale");
    if (mk != VKG_NONE) strcat(label, g->nodes[mk].attr.causal.window ? "+window" : "+causal");
    vkg_sym_step *s = vkg_compile_new_step(c, VKG_KERNEL_ATTENTION, pv, label);
    if (!s) return vkg_error_set(c->err, VKG_ERR_OUT_OF_MEMORY, "out of memory compiling");
    vkg_attention_params *p = &s->step.params.attention;
    int nd = out->ndim;
    p->T = (uint32_t)out->shape[nd - 2];
    p->S = (uint32_t)g->nodes[scores].shape[g->nodes[scores].ndim - 1];
    p->D = (uint32_t)q->shape[q->ndim - 1];
    p->Dv = (uint32_t)out->shape[nd - 1];
    p->batch1 = nd >= 3 ? (uint32_t)out->shape[nd - 3] : 1u;
    p->batch0 = nd >= 4 ? (uint32_t)out->shape[nd - 4] : 1u;
    p->q_stride_t = (uint32_t)q->strides[q->ndim - 2], p->q_stride_d = (uint32_t)q->strides[q->ndim - 1];
    p->k_stride_s = (uint32_t)k->strides[k->ndim - 2], p->k_stride_d = (uint32_t)k->strides[k->ndim - 1];
    p->v_stride_s = (uint32_t)v->strides[v->ndim - 2], p->v_stride_d = (uint32_t)v->strides[v->ndim - 1];
    p->o_stride_t = (uint32_t)o->strides[o->ndim - 2], p->o_stride_d = (uint32_t)o->strides[o->ndim - 1];
    vkg_compile_batch_strides(q, out, &p->q_stride_b0, &p->q_stride_b1);
    vkg_compile_batch_strides(k, out, &p->k_stride_b0, &p->k_stride_b1);
    vkg_compile_batch_strides(v, out, &p->v_stride_b0, &p->v_stride_b1);
    vkg_compile_batch_strides(o, out, &p->o_stride_b0, &p->o_stride_b1);
    p->scale = sc != VKG_NONE ? g->nodes[sc].attr.scale.s : 1.0f;
    p->mask_kind = VKG_ATTENTION_MASK_NONE;
    p->dyn_index = VKG_NO_INDEX;
    vkg_compile_bind(s, 0, q, WORD(q_offset));
    vkg_compile_bind(s, 1, k, WORD(k_offset));
    vkg_compile_bind(s, 2, v, WORD(v_offset));
    vkg_compile_bind(s, 3, o, WORD(o_offset));
    if (mk != VKG_NONE) {
        const vkg_node *m = &g->nodes[mk];
        p->mask_kind = VKG_ATTENTION_MASK_CAUSAL;
        p->causal_offset = m->attr.causal.offset;
        p->window = m->attr.causal.window;
        p->mask_rows = vkg_compile_mask_rows(m);
        if (m->src[1] != VKG_NONE) {
            p->dyn_index = (uint32_t)c->index_slot[m->src[1]];
            s->sym[4].storage = m->src[1];   /* the runtime indices: one i32 */
            s->sym[4].lo = 0;
            s->sym[4].hi = 1;
        }
    }
    return VKG_OK;
}
