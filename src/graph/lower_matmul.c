/* Lowering a matmul group (matmul, then optionally + bias, an activation, + residual) into matmul
 * steps.  Operands are read through their views' strides, so transposes and broadcast batches cost no
 * copy.  A matmul whose operands exceed the largest binding is split: a batched one first into runs
 * of its batch entries (the attention scores of 32 heads at T = 2048, 512 MiB, against lavapipe's
 * 128 MiB), then, where one entry is still too large (GPT-2's tied output head, 154 MB), each
 * entry into column and row blocks. */
#include "graph/compile_internal.h"

#include <stddef.h>
#include <string.h>

#define WORD(field) ((int)(offsetof(vkg_matmul_params, field) / 4))

void vkg_compile_batch_strides(const vkg_view *v, const vkg_node *out, uint32_t *s0, uint32_t *s1) {
    int nb = out->ndim - 2, nbv = v->ndim - 2;
    int64_t s[2] = {0, 0};
    for (int j = 0; j < nb; j++) {
        int jv = j - (nb - nbv);
        s[j] = (jv < 0 || v->shape[jv] == 1) ? 0 : v->strides[jv];
    }
    if (nb == 2) { *s0 = (uint32_t)s[0]; *s1 = (uint32_t)s[1]; }
    else if (nb == 1) { *s0 = 0; *s1 = (uint32_t)s[0]; }
    else { *s0 = 0; *s1 = 0; }
}

static vkg_view transposed(vkg_view v) {
    int64_t t = v.shape[v.ndim - 1];
    v.shape[v.ndim - 1] = v.shape[v.ndim - 2];
    v.shape[v.ndim - 2] = t;
    t = v.strides[v.ndim - 1];
    v.strides[v.ndim - 1] = v.strides[v.ndim - 2];
    v.strides[v.ndim - 2] = t;
    return v;
}

/* The sub-view of rows [r0, r0 + rn) and columns [c0, c0 + cn) of a 2-d (or batch-1) view. */
static vkg_view block(vkg_view v, int64_t r0, int64_t rn, int64_t c0, int64_t cn) {
    int r = v.ndim - 2, c = v.ndim - 1;
    v.offset += r0 * v.strides[r] + c0 * v.strides[c];
    v.shape[r] = rn;
    v.shape[c] = cn;
    return v;
}

typedef struct mm_group {
    vkg_tensor root, mm, bias, residual, activation; /* activation: the absorbed node, or VKG_NONE */
    vkg_view a, b, c, z, r;   /* operands and output, transposes applied */
    int64_t M, N, K;
    int64_t batch0, batch1;   /* the output's batch extents (1 where it has no such dimension) */
} mm_group;

vkg_view vkg_compile_entries_of(vkg_view v, int out_nd, const vkg_entries *e) {
    const int nb = out_nd - 2, nbv = v.ndim - 2;
    for (int j = 0; j < nb; j++) {
        const int jv = j - (nb - nbv);
        if (jv < 0 || v.shape[jv] == 1) continue;
        const int is1 = j == nb - 1; /* the last batch dimension is batch1 */
        v.offset += (is1 ? e->e1 : e->e0) * v.strides[jv];
        v.shape[jv] = is1 ? e->n1 : e->n0;
    }
    return v;
}

vkg_entries vkg_compile_entries_at(const vkg_entries *run, int64_t e0, int64_t e1, int64_t batch0, int64_t batch1) {
    return (vkg_entries){e0, batch0 - e0 < run->n0 ? batch0 - e0 : run->n0, e1,
                         batch1 - e1 < run->n1 ? batch1 - e1 : run->n1};
}

vkg_entries vkg_compile_fit_entries(const vkg_compiler *c, const vkg_view *views, int n, int out_nd, int64_t batch0,
                                    int64_t batch1) {
    const uint64_t limit = vkg_compile_binding_limit(c);
    vkg_entries e = {0, batch0, 0, batch1};
    for (;;) {
        int fits = 1;
        for (int k = 0; k < n && fits; k++) {
            const vkg_view v = vkg_compile_entries_of(views[k], out_nd, &e);
            fits = vkg_compile_span_bytes(c, &v) <= limit;
        }
        if (fits || (e.n0 == 1 && e.n1 == 1)) return e;
        if (e.n0 > 1) e.n0 = (e.n0 + 1) / 2;
        else e.n1 = (e.n1 + 1) / 2;
    }
}

static vkg_status emit_block(vkg_compiler *c, const mm_group *G, const vkg_entries *e, int64_t m0, int64_t mn,
                             int64_t n0, int64_t nn, const char *label) {
    vkg_sym_step *s = vkg_compile_new_step(c, VKG_KERNEL_MATMUL, G->root, label);
    if (!s) return vkg_error_set(c->err, VKG_ERR_OUT_OF_MEMORY, "out of memory compiling");
    vkg_matmul_params *p = &s->step.params.matmul;
    const vkg_node *out = &c->g->nodes[G->root];
    p->M = (uint32_t)mn;
    p->N = (uint32_t)nn;
    p->K = (uint32_t)G->K;
    p->batch1 = (uint32_t)e->n1;
    p->batch0 = (uint32_t)e->n0;
    p->a_stride_m = (uint32_t)G->a.strides[G->a.ndim - 2];
    p->a_stride_k = (uint32_t)G->a.strides[G->a.ndim - 1];
    p->b_stride_k = (uint32_t)G->b.strides[G->b.ndim - 2];
    p->b_stride_n = (uint32_t)G->b.strides[G->b.ndim - 1];
    p->c_stride_m = (uint32_t)G->N;
    vkg_compile_batch_strides(&G->a, out, &p->a_stride_b0, &p->a_stride_b1);
    vkg_compile_batch_strides(&G->b, out, &p->b_stride_b0, &p->b_stride_b1);
    vkg_compile_batch_strides(&G->c, out, &p->c_stride_b0, &p->c_stride_b1);
    /* the strides above are the whole operands'; the bindings span the step's entries */
    const int nd = out->ndim;
    vkg_view a = block(vkg_compile_entries_of(G->a, nd, e), m0, mn, 0, G->K),
             b = block(vkg_compile_entries_of(G->b, nd, e), 0, G->K, n0, nn),
             cc = block(vkg_compile_entries_of(G->c, nd, e), m0, mn, n0, nn);
    /* Each binding spans its view as shaped: a broadcast batch (size 1 in the operand) spans one. */
    vkg_compile_bind(s, 0, &a, WORD(a_offset));
    vkg_compile_bind(s, 1, &b, WORD(b_offset));
    const vkg_dtype b_dtype = vkg_compile_dtype(c, G->b.base); /* B's offset and strides count its elements */
    if (b_dtype == VKG_F16) p->flags |= VKG_MATMUL_B_F16;
    if (b_dtype == VKG_BF16) p->flags |= VKG_MATMUL_B_BF16;
    vkg_compile_bind(s, 2, &cc, WORD(c_offset));
    if (G->bias != VKG_NONE) {
        p->flags |= VKG_MATMUL_BIAS;
        vkg_view z = G->z;
        z.offset += n0;
        z.shape[0] = nn;
        vkg_compile_bind(s, 3, &z, WORD(bias_offset));
    }
    p->activation = G->activation != VKG_NONE ? vkg_activation_code(c->g->nodes[G->activation].op) : VKG_UNARY_COPY;
    if (G->residual != VKG_NONE) {
        p->flags |= VKG_MATMUL_RESIDUAL;
        if (out->op == VKG_OP_SWIGLU) p->flags |= VKG_MATMUL_GATE; /* the residual is swiglu's gate */
        vkg_view r = block(vkg_compile_entries_of(G->r, nd, e), m0, mn, n0, nn);
        p->r_stride_m = (uint32_t)G->r.strides[G->r.ndim - 2];
        vkg_compile_batch_strides(&G->r, out, &p->r_stride_b0, &p->r_stride_b1);
        vkg_compile_bind(s, 4, &r, WORD(r_offset));
    }
    return VKG_OK;
}

vkg_status vkg_compile_lower_matmul(vkg_compiler *c, vkg_tensor root) {
    const vkg_graph *g = c->g;
    mm_group G = {.root = root, .mm = c->fused_input[root] != VKG_NONE ? c->fused_input[root] : root};
    const vkg_node *mm = &g->nodes[G.mm];
    G.bias = mm->src[2] != VKG_NONE ? mm->src[2] : c->fused_bias[root];
    G.residual = c->fused_residual[root];
    G.activation = c->fused_activation[root];
    G.a = c->view[mm->src[0]];
    G.b = c->view[mm->src[1]];
    if (mm->attr.matmul.flags & VKG_TRANSPOSE_A) G.a = transposed(G.a);
    if (mm->attr.matmul.flags & VKG_TRANSPOSE_B) G.b = transposed(G.b);
    G.c = c->view[root];
    if (G.bias != VKG_NONE) G.z = c->view[G.bias];
    if (G.residual != VKG_NONE) G.r = c->view[G.residual];
    G.M = mm->shape[mm->ndim - 2];
    G.N = mm->shape[mm->ndim - 1];
    G.K = G.a.shape[G.a.ndim - 1];
    const vkg_node *out = &g->nodes[root];
    G.batch1 = out->ndim >= 3 ? out->shape[out->ndim - 3] : 1;
    G.batch0 = out->ndim >= 4 ? out->shape[out->ndim - 4] : 1;

    char label[48] = "matmul";
    if (G.bias != VKG_NONE) strcat(label, "+bias");
    if (G.activation != VKG_NONE) {
        strcat(label, "+");
        strcat(label, vkg_op_name(g->nodes[G.activation].op));
    }
    if (G.residual != VKG_NONE) strcat(label, g->nodes[root].op == VKG_OP_SWIGLU ? "+swiglu" : "+residual");

    /* Steps small enough for one binding each: runs of batch entries (vkg_compile_fit_entries);
     * then, where one entry is still too large, its columns (B is the big weight), then its rows. */
    const uint64_t limit = vkg_compile_binding_limit(c);
    const vkg_view operands[4] = {G.a, G.b, G.c, G.r};
    const vkg_entries e = vkg_compile_fit_entries(c, operands, G.residual != VKG_NONE ? 4 : 3, out->ndim, G.batch0,
                                                  G.batch1);
    int64_t nb = G.N, mb = G.M;
    for (;;) {
        vkg_view b = block(vkg_compile_entries_of(G.b, out->ndim, &e), 0, G.K, 0, nb);
        if (vkg_compile_span_bytes(c, &b) <= limit || nb == 1) break;
        nb = (nb + 1) / 2;
    }
    for (;;) {
        vkg_view a = block(vkg_compile_entries_of(G.a, out->ndim, &e), 0, mb, 0, G.K),
                 cc = block(vkg_compile_entries_of(G.c, out->ndim, &e), 0, mb, 0, nb);
        if ((vkg_compile_span_bytes(c, &a) <= limit && vkg_compile_span_bytes(c, &cc) <= limit) || mb == 1) break;
        mb = (mb + 1) / 2;
    }
    /* every extent is at least 1 (the graph's builders refuse empty shapes) */
    const int64_t dims[4] = {(G.batch0 + e.n0 - 1) / e.n0, (G.batch1 + e.n1 - 1) / e.n1, (G.N + nb - 1) / nb,
                             (G.M + mb - 1) / mb};
    int64_t parts = 1; /* the product of dims, or INT64_MAX once past what a plan may split into */
    for (int i = 0; i < 4; i++) parts = parts > VKG_MAX_SPLIT_STEPS / dims[i] ? INT64_MAX : parts * dims[i];
    vkg_status st = vkg_compile_check_split(c, root, "matmul", parts);
    if (st != VKG_OK) return st;
    int64_t part = 0;
    for (int64_t e0 = 0; e0 < G.batch0; e0 += e.n0)
        for (int64_t e1 = 0; e1 < G.batch1; e1 += e.n1) {
            const vkg_entries run = vkg_compile_entries_at(&e, e0, e1, G.batch0, G.batch1);
            for (int64_t n0 = 0; n0 < G.N; n0 += nb)
                for (int64_t m0 = 0; m0 < G.M; m0 += mb) {
                    char l[64];
                    st = emit_block(c, &G, &run, m0, G.M - m0 < mb ? G.M - m0 : mb, n0, G.N - n0 < nb ? G.N - n0 : nb,
                                    vkg_compile_part_label(l, sizeof l, label, ++part, parts));
                    if (st != VKG_OK) return st;
                }
        }
    return VKG_OK;
}
