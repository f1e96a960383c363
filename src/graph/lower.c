/* Lowering: how each node's value is read (a view: strides over some node's storage), which
 * nodes need storage of their own, and the symbolic steps that compute them.  Bindings name
 * storage nodes and element ranges here; bufplan.c turns them into regions and byte offsets. */
#include "graph/compile_internal.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define WORD(type, field) ((int)(offsetof(type, field) / 4))

void vkg_contiguous_strides(int ndim, const int64_t *shape, int64_t *strides) {
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        strides[i] = s;
        /* saturates instead of overflowing: builders keep every count below 2^61, so this only
         * guards callers that pass a shape no builder checked */
        if (__builtin_mul_overflow(s, shape[i], &s)) s = INT64_MAX;
    }
}

int vkg_view_is_contiguous(const vkg_view *v) {
    int64_t expected = 1;
    for (int i = v->ndim - 1; i >= 0; i--) {
        if (v->shape[i] != 1 && v->strides[i] != expected) return 0;
        expected *= v->shape[i];
    }
    return 1;
}

static vkg_view own_view(const vkg_node *n, vkg_tensor t) {
    vkg_view v = {.base = t, .ndim = n->ndim, .offset = 0};
    memcpy(v.shape, n->shape, sizeof v.shape);
    vkg_contiguous_strides(n->ndim, n->shape, v.strides);
    return v;
}

static int is_view_op(vkg_op op) { return op == VKG_OP_RESHAPE || op == VKG_OP_PERMUTE || op == VKG_OP_SLICE; }

/* Strides that read src's elements, in row-major order, as the shape (ndim, shape): possible
 * without a copy when every group of source dimensions merged or split is itself contiguous
 * (the rule numpy's reshape follows).  Returns 0 when a copy is needed. */
static int reshape_strides(const vkg_view *src, int ndim, const int64_t *shape, int64_t *strides) {
    int64_t od[VKG_MAX_DIMS], os[VKG_MAX_DIMS];
    int on = 0;
    for (int i = 0; i < src->ndim; i++)
        if (src->shape[i] != 1) {
            od[on] = src->shape[i];
            os[on++] = src->strides[i];
        }
    int oi = 0, oj = 1, ni = 0, nj = 1;
    while (ni < ndim && oi < on) {
        int64_t np = shape[ni], op = od[oi];
        while (np != op) {
            if (np < op) {
                if (nj >= ndim) return 0;
                np *= shape[nj++];
            } else {
                if (oj >= on) return 0;
                op *= od[oj++];
            }
        }
        for (int k = oi; k < oj - 1; k++)
            if (os[k] != od[k + 1] * os[k + 1]) return 0;
        strides[nj - 1] = os[oj - 1];
        for (int k = nj - 1; k > ni; k--) strides[k - 1] = strides[k] * shape[k];
        ni = nj++;
        oi = oj++;
    }
    for (int k = ni; k < ndim; k++) strides[k] = 1; /* trailing dimensions of size 1 */
    return 1;
}

/* The view a view op produces from its source, before any materialisation. */
static vkg_view natural_view(const vkg_compiler *c, vkg_tensor t) {
    const vkg_node *n = &c->g->nodes[t];
    vkg_view src = c->view[n->src[0]], v = src;
    v.ndim = n->ndim;
    memcpy(v.shape, n->shape, sizeof v.shape);
    switch (n->op) {
    case VKG_OP_RESHAPE: reshape_strides(&src, n->ndim, n->shape, v.strides); break; /* checked possible */
    case VKG_OP_PERMUTE:
        for (int i = 0; i < n->ndim; i++) v.strides[i] = src.strides[n->attr.permute.axes[i]];
        break;
    case VKG_OP_SLICE: v.offset += n->attr.slice.start * src.strides[n->attr.slice.axis]; break;
    default: break;
    }
    return v;
}

/* Where a node placed in a concat's part lives (place_concat_parts): that part of the concat's
 * own place, contiguous. */
static vkg_view placed_view(const vkg_compiler *c, vkg_tensor t) {
    const vkg_tensor cat = c->placed_in[t];
    vkg_view v = c->placed_in[cat] != VKG_NONE ? placed_view(c, cat) : own_view(&c->g->nodes[cat], cat);
    const vkg_node *n = &c->g->nodes[t];
    v.ndim = n->ndim;
    memcpy(v.shape, n->shape, sizeof v.shape);
    vkg_contiguous_strides(n->ndim, n->shape, v.strides);
    v.offset += c->placed_at[t];
    return v;
}

/* Views of every node, given the current materialisation choices. */
static void compute_views(vkg_compiler *c) {
    const vkg_graph *g = c->g;
    for (int i = 0; i < c->n; i++) {
        const vkg_node *n = &g->nodes[i];
        c->own_storage[i] = 0;
        if (!c->keep[i] || c->role[i] == VKG_FUSE_ABSORBED) continue;
        if (n->op == VKG_OP_INDEX) { /* read as data (a copy, a concat): its slot of the indices region */
            c->view[i] = own_view(n, i);
            continue;
        }
        if (n->op == VKG_OP_WRITE_AT) {
            c->view[i] = c->view[n->src[0]];
        } else if (is_view_op(n->op) && !c->materialize[i]) {
            int64_t strides[VKG_MAX_DIMS];
            if (n->op == VKG_OP_RESHAPE && !reshape_strides(&c->view[n->src[0]], n->ndim, n->shape, strides)) {
                c->materialize[i] = 1; /* a reshape of a strided view needs the elements in order */
            } else {
                c->view[i] = natural_view(c, i);
                continue;
            }
        }
        if (n->op != VKG_OP_WRITE_AT) {
            c->view[i] = c->placed_in[i] != VKG_NONE ? placed_view(c, i) : own_view(n, i);
            c->own_storage[i] = c->placed_in[i] == VKG_NONE;
        }
    }
}

/* Operands that kernels read as plain rows: they must be contiguous. */
static int needs_contiguous(const vkg_compiler *c, vkg_tensor consumer, vkg_tensor *operands) {
    const vkg_node *n = &c->g->nodes[consumer];
    int k = 0;
    switch (n->op) {
    case VKG_OP_SOFTMAX: operands[k++] = c->fused_input[consumer] != VKG_NONE ? c->fused_input[consumer] : n->src[0]; break;
    case VKG_OP_LAYERNORM: case VKG_OP_RMS_NORM: for (int s = 0; s < 3; s++) operands[k++] = n->src[s]; break;
    case VKG_OP_EMBEDDING: operands[k++] = n->src[0]; operands[k++] = n->src[1]; break;
    case VKG_OP_ROPE: /* the table and the row positions; x is read through strides */
        operands[k++] = n->src[1];
        if (n->attr.rope.row_positions) operands[k++] = n->src[2];
        break;
    case VKG_OP_MATMUL: operands[k++] = n->src[2]; break;
    default: break;
    }
    if (c->fused_input[consumer] != VKG_NONE && n->op != VKG_OP_SOFTMAX) {
        operands[k++] = c->fused_bias[consumer];
        operands[k++] = c->fused_residual[consumer];
        operands[k++] = c->g->nodes[c->fused_input[consumer]].src[2];
    }
    return k;
}

/* The tensor whose storage x's view reads whole and in order (x itself, or a chain of views of
 * it), where that tensor is computed by a step into storage of its own in the arena; else
 * VKG_NONE. */
static vkg_tensor whole_storage_of(const vkg_compiler *c, vkg_tensor x) {
    const vkg_view *v = &c->view[x];
    const vkg_tensor p = v->base;
    if (p == VKG_NONE || !c->own_storage[p] || c->placed_in[p] != VKG_NONE) return VKG_NONE;
    const vkg_node *n = &c->g->nodes[p];
    if (n->op == VKG_OP_INPUT || n->op == VKG_OP_CONSTANT || n->op == VKG_OP_STATE || n->op == VKG_OP_INDEX ||
        n->output_name)
        return VKG_NONE;
    if (v->offset != 0 || !vkg_view_is_contiguous(v) || vkg_shape_numel(v->ndim, v->shape) != vkg_shape_numel(n->ndim, n->shape))
        return VKG_NONE;
    return p;
}

/* A concat's operand computed by a step of its own (or read whole and in order through views of
 * such a tensor) is computed straight into its part of the concat, whose copy then has nothing to
 * do (lower_concat): a batch's per-row attention outputs stacked row after row, rotated keys
 * beside the values.  Only where the parts are contiguous (every dimension before the axis is 1)
 * and each tensor goes into one part; a concat placed in another concat's part (a chain) takes
 * its operands along. */
static void place_concat_parts(vkg_compiler *c) {
    const vkg_graph *g = c->g;
    int placed = 0;
    for (int t = 0; t < c->n; t++) {
        const vkg_node *n = &g->nodes[t];
        if (n->op != VKG_OP_CONCAT || !c->keep[t] || c->role[t] == VKG_FUSE_ABSORBED || !c->own_storage[t] ||
            n->output_name)
            continue;
        const int axis = n->attr.concat.axis;
        int64_t row = 1; /* elements per index along the axis */
        int parts_contiguous = 1;
        for (int d = 0; d < n->ndim; d++) {
            if (d < axis && n->shape[d] != 1) parts_contiguous = 0;
            if (d > axis) row *= n->shape[d];
        }
        if (!parts_contiguous) continue;
        const vkg_tensor a = whole_storage_of(c, n->src[0]), b = whole_storage_of(c, n->src[1]);
        if (a != VKG_NONE && a != b) c->placed_in[a] = t, c->placed_at[a] = 0, placed = 1;
        if (b != VKG_NONE && b != a) c->placed_in[b] = t, c->placed_at[b] = g->nodes[n->src[0]].shape[axis] * row, placed = 1;
    }
    if (placed) compute_views(c);
}

static vkg_status decide_storage(vkg_compiler *c) {
    const vkg_graph *g = c->g;
    for (int i = 0; i < c->n; i++) {
        const vkg_node *n = &g->nodes[i];
        if (!n->output_name) continue;
        if (n->op == VKG_OP_INPUT || n->op == VKG_OP_CONSTANT || n->op == VKG_OP_STATE || n->op == VKG_OP_WRITE_AT)
            return vkg_error_set(c->err, VKG_ERR_INVALID_ARGUMENT,
                                 "output '%s' is a %s: outputs must be computed (wrap it in vkg_copy; read a "
                                 "state with vkg_session_get_state)", n->output_name, vkg_op_name(n->op));
        if (is_view_op(n->op)) c->materialize[i] = 1; /* outputs are contiguous buffers of their own */
    }
    /* Materialising a view changes the views below it, which may need other copies: repeat. */
    for (int round = 0; round <= c->n; round++) {
        compute_views(c);
        int changed = 0;
        for (int i = 0; i < c->n; i++) {
            if (!c->keep[i] || c->role[i] == VKG_FUSE_ABSORBED) continue;
            vkg_tensor ops[8];
            int k = needs_contiguous(c, i, ops);
            for (int j = 0; j < k; j++) {
                vkg_tensor t = ops[j];
                if (t == VKG_NONE || vkg_view_is_contiguous(&c->view[t])) continue;
                if (!is_view_op(g->nodes[t].op) || c->materialize[t]) continue;
                c->materialize[t] = 1;
                changed = 1;
            }
        }
        if (!changed) break;
    }
    place_concat_parts(c);
    return VKG_OK;
}

/* ---- symbolic steps ------------------------------------------------------------------------ */

vkg_status vkg_compile_check_split(vkg_compiler *c, vkg_tensor t, const char *what, int64_t parts) {
    if (parts <= VKG_MAX_SPLIT_STEPS) return VKG_OK;
    return vkg_error_set(c->err, VKG_ERR_UNSUPPORTED,
                         "%s '%s': fitting its operands into bindings of %llu bytes takes %lld steps, more than "
                         "the %d a plan splits one op into", what, vkg_tensor_name(c->g, t),
                         (unsigned long long)c->opts.max_binding_bytes, (long long)parts, VKG_MAX_SPLIT_STEPS);
}

vkg_sym_step *vkg_compile_new_step(vkg_compiler *c, vkg_kernel k, vkg_tensor node, const char *label) {
    if (c->n_steps == c->cap_steps) {
        int cap = c->cap_steps ? 2 * c->cap_steps : 64;
        vkg_sym_step *s = realloc(c->steps, (size_t)cap * sizeof *s);
        if (!s) return NULL;
        c->steps = s;
        c->cap_steps = cap;
    }
    vkg_sym_step *s = &c->steps[c->n_steps++];
    memset(s, 0, sizeof *s);
    s->step.kernel = k;
    s->step.node = node;
    snprintf(s->step.label, sizeof s->step.label, "%s", label);
    for (int i = 0; i < VKG_MAX_BINDINGS; i++) {
        s->sym[i].storage = VKG_NONE;
        s->sym[i].offset_word = -1;
    }
    return s;
}

/* Element range [lo, hi) a strided window touches. */
void vkg_view_span(const vkg_view *v, int64_t *lo, int64_t *hi) {
    int64_t last = v->offset;
    for (int i = 0; i < v->ndim; i++) last += (v->shape[i] - 1) * v->strides[i];
    *lo = v->offset;
    *hi = last + 1;
}

uint64_t vkg_compile_span_bytes(const vkg_compiler *c, const vkg_view *v) {
    int64_t lo, hi;
    vkg_view_span(v, &lo, &hi);
    return (uint64_t)(hi - lo) * vkg_compile_elem_bytes(c, v->base);
}

void vkg_compile_bind(vkg_sym_step *s, int slot, const vkg_view *v, int offset_word) {
    vkg_sym_binding *b = &s->sym[slot];
    b->storage = v->base;
    vkg_view_span(v, &b->lo, &b->hi);
    b->offset_word = offset_word;
    b->writes = vkg_kernel_binding_writes(s->step.kernel, slot);
    if (offset_word >= 0) s->step.params.words[offset_word] = (uint32_t)v->offset;
}

static void bind_index(vkg_sym_step *s, int slot, vkg_tensor index) {
    s->sym[slot].storage = index;
    s->sym[slot].lo = 0;
    s->sym[slot].hi = 1;
}

/* v padded on the left to 4 dimensions and broadcast to shape4 (stride 0 where it is 1). */
static void strides4(const vkg_view *v, const int64_t *shape4, uint32_t *out) {
    for (int i = 0; i < 4; i++) {
        int j = v->ndim - 4 + i;
        out[i] = (j < 0 || (v->shape[j] == 1 && shape4[i] != 1)) ? 0u : (uint32_t)v->strides[j];
    }
}

static void shape4_of(int ndim, const int64_t *shape, int64_t *shape4) {
    for (int i = 0; i < 4; i++) shape4[i] = (i < 4 - ndim) ? 1 : shape[i - (4 - ndim)];
}

/* A broadcast view (for binding spans): strides zeroed where the operand broadcasts. */
static vkg_view broadcast_view(const vkg_view *v, const int64_t *shape4) {
    vkg_view b = {.base = v->base, .ndim = 4, .offset = v->offset};
    uint32_t s[4];
    strides4(v, shape4, s);
    for (int i = 0; i < 4; i++) {
        b.shape[i] = shape4[i];
        b.strides[i] = s[i];
    }
    return b;
}

static vkg_status emit_unary(vkg_compiler *c, vkg_tensor node, const char *label, uint32_t op,
                             const vkg_view *in, const vkg_view *out) {
    vkg_sym_step *s = vkg_compile_new_step(c, VKG_KERNEL_UNARY, node, label);
    if (!s) return vkg_error_set(c->err, VKG_ERR_OUT_OF_MEMORY, "out of memory compiling");
    vkg_unary_params *p = &s->step.params.unary;
    int64_t shape4[4];
    shape4_of(out->ndim, out->shape, shape4);
    p->op = op;
    p->alpha = 1.0f;
    p->dyn_index = VKG_NO_INDEX;
    for (int i = 0; i < 4; i++) p->shape[i] = (uint32_t)shape4[i];
    strides4(in, shape4, p->in_strides);
    strides4(out, shape4, p->out_strides);
    vkg_view bin = broadcast_view(in, shape4);
    vkg_compile_bind(s, 0, &bin, WORD(vkg_unary_params, in_offset));
    vkg_compile_bind(s, 1, out, WORD(vkg_unary_params, out_offset));
    return VKG_OK;
}

/* An op whose operands exceed one binding (a copy of the attention probabilities of 32 heads at
 * T = 2048, 512 MiB, against lavapipe's 128 MiB) runs as boxes of its 4-d shape, one step each:
 * the first `dims` dimensions halved in turn, from the first, until each of the n views (4-d,
 * broadcast strides) spans at most one binding.  A dimension is cut only once those before it
 * are 1, so a box is whole in every dimension after the first it cuts.  n_box gets a box's
 * extents; returns the boxes. */
static int boxes_fit(const vkg_compiler *c, const vkg_view *views, int n, const int64_t *n_box) {
    const uint64_t limit = vkg_compile_binding_limit(c);
    for (int k = 0; k < n; k++) {
        vkg_view v = views[k];
        for (int i = 0; i < 4; i++) v.shape[i] = n_box[i];
        if (vkg_compile_span_bytes(c, &v) > limit) return 0;
    }
    return 1;
}

static int64_t fit_boxes(const vkg_compiler *c, const int64_t *shape4, const vkg_view *views, int n, int dims,
                         int64_t *n_box) {
    for (int i = 0; i < 4; i++) n_box[i] = shape4[i];
    for (int d = 0; d < dims && !boxes_fit(c, views, n, n_box); d++)
        while (n_box[d] > 1 && !boxes_fit(c, views, n, n_box)) n_box[d] = (n_box[d] + 1) / 2;
    int64_t boxes = 1;
    for (int i = 0; i < 4; i++) boxes *= (shape4[i] + n_box[i] - 1) / n_box[i]; /* at most the elements: < 2^63 */
    return boxes;
}

/* The box of a 4-d view from corner e, of extents n_box clipped to shape4. */
static vkg_view box_of(vkg_view v, const int64_t *shape4, const int64_t *e, const int64_t *n_box) {
    for (int i = 0; i < 4; i++) {
        v.offset += e[i] * v.strides[i];
        v.shape[i] = shape4[i] - e[i] < n_box[i] ? shape4[i] - e[i] : n_box[i];
    }
    return v;
}

/* Steps the next box's corner e through shape4 in row-major order; 0 after the last. */
static int next_box(int64_t *e, const int64_t *shape4, const int64_t *n_box) {
    for (int i = 3; i >= 0; i--) {
        e[i] += n_box[i];
        if (e[i] < shape4[i]) return 1;
        e[i] = 0;
    }
    return 0;
}

const char *vkg_compile_part_label(char *l, size_t size, const char *label, int64_t part, int64_t parts) {
    if (parts == 1) return label;
    snprintf(l, size, "%.32s[%d/%d]", label, (int)part, (int)parts);
    return l;
}

/* A unary op (no runtime index but the causal mask's one, which every position reads alike) over
 * boxes: a box's coordinates start again at 0, so the causal mask's offset moves by the box's
 * corner (query i2 = e2 + i2', key i3 = e3 + i3'). */
static vkg_status emit_unary_boxes(vkg_compiler *c, vkg_tensor node, const char *label, uint32_t op,
                                   const vkg_view *in, const vkg_view *out) {
    const vkg_node *n = &c->g->nodes[node];
    int64_t shape4[4], n_box[4], e[4] = {0, 0, 0, 0};
    shape4_of(out->ndim, out->shape, shape4);
    const vkg_view views[2] = {broadcast_view(in, shape4), broadcast_view(out, shape4)};
    const int64_t boxes = fit_boxes(c, shape4, views, 2, 4, n_box);
    vkg_status st = vkg_compile_check_split(c, node, label, boxes);
    for (int64_t part = 1; st == VKG_OK; part++) {
        char l[64];
        const vkg_view bi = box_of(views[0], shape4, e, n_box), bo = box_of(views[1], shape4, e, n_box);
        st = boxes == 1 ? emit_unary(c, node, label, op, in, out)
                        : emit_unary(c, node, vkg_compile_part_label(l, sizeof l, label, part, boxes), op, &bi, &bo);
        if (st != VKG_OK) return st;
        vkg_unary_params *p = &c->steps[c->n_steps - 1].step.params.unary;
        if (op == VKG_UNARY_SCALE) p->alpha = n->attr.scale.s;
        if (op == VKG_UNARY_CAUSAL) {
            p->causal_offset = n->attr.causal.offset + (int32_t)(e[2] - e[3]);
            p->window = n->attr.causal.window;
            if (n->src[1] != VKG_NONE) {
                p->dyn_index = (uint32_t)c->index_slot[n->src[1]];
                bind_index(&c->steps[c->n_steps - 1], 2, n->src[1]);
            }
        }
        if (!next_box(e, shape4, n_box)) break;
    }
    return st;
}

/* add, mul, mask or swiglu over boxes, each operand read through broadcast strides. */
static vkg_status emit_binary_boxes(vkg_compiler *c, vkg_tensor t) {
    const vkg_node *n = &c->g->nodes[t];
    const int additive = n->op == VKG_OP_MASK && n->attr.mask.kind == VKG_MASK_ADDITIVE;
    const uint32_t op = n->op == VKG_OP_MUL ? VKG_BINARY_MUL : n->op == VKG_OP_SWIGLU ? VKG_BINARY_SWIGLU
                      : (n->op == VKG_OP_MASK && !additive) ? VKG_BINARY_MASK : VKG_BINARY_ADD;
    int64_t shape4[4], n_box[4], e[4] = {0, 0, 0, 0};
    shape4_of(n->ndim, n->shape, shape4);
    const vkg_view views[3] = {broadcast_view(&c->view[n->src[0]], shape4), broadcast_view(&c->view[n->src[1]], shape4),
                               broadcast_view(&c->view[t], shape4)};
    const int64_t boxes = fit_boxes(c, shape4, views, 3, 4, n_box);
    vkg_status st = vkg_compile_check_split(c, t, vkg_op_name(n->op), boxes);
    for (int64_t part = 1; st == VKG_OK; part++) {
        char l[64];
        vkg_sym_step *s = vkg_compile_new_step(c, VKG_KERNEL_BINARY, t,
                                               vkg_compile_part_label(l, sizeof l, vkg_op_name(n->op), part, boxes));
        if (!s) return vkg_error_set(c->err, VKG_ERR_OUT_OF_MEMORY, "out of memory compiling");
        vkg_binary_params *p = &s->step.params.binary;
        p->op = op;
        const vkg_view a = box_of(views[0], shape4, e, n_box), b = box_of(views[1], shape4, e, n_box);
        for (int i = 0; i < 4; i++) {
            p->shape[i] = (uint32_t)a.shape[i];
            p->a_strides[i] = (uint32_t)views[0].strides[i];
            p->b_strides[i] = (uint32_t)views[1].strides[i];
        }
        vkg_compile_bind(s, 0, &a, WORD(vkg_binary_params, a_offset));
        vkg_compile_bind(s, 1, &b, WORD(vkg_binary_params, b_offset));
        if (boxes == 1) vkg_compile_bind(s, 2, &c->view[t], WORD(vkg_binary_params, out_offset));
        else {
            const vkg_view o = box_of(views[2], shape4, e, n_box);
            vkg_compile_bind(s, 2, &o, WORD(vkg_binary_params, out_offset));
        }
        if (!next_box(e, shape4, n_box)) break;
    }
    return st;
}

static vkg_status lower_elementwise(vkg_compiler *c, vkg_tensor t) {
    const vkg_node *n = &c->g->nodes[t];
    if (n->op == VKG_OP_ADD || n->op == VKG_OP_MUL || n->op == VKG_OP_MASK || n->op == VKG_OP_SWIGLU)
        return emit_binary_boxes(c, t);
    if (n->op == VKG_OP_MASK_CAUSAL && n->attr.causal.rows)
        return vkg_error_set(c->err, VKG_ERR_UNSUPPORTED, "'%s': a causal mask with a position for each row runs "
                             "fused into the softmax or attention that reads it", vkg_tensor_name(c->g, t));
    const uint32_t op = n->op == VKG_OP_SCALE ? VKG_UNARY_SCALE : n->op == VKG_OP_MASK_CAUSAL ? VKG_UNARY_CAUSAL
                      : vkg_activation_code(n->op); /* an activation, or VKG_UNARY_COPY for copy */
    return emit_unary_boxes(c, t, vkg_op_name(n->op), op, &c->view[n->src[0]], &c->view[t]);
}

/* One softmax step over the rows of the box at e (extents n_box, clipped): i0, i1, i2 of its
 * [d0, d1, d2, cols] rows, every row whole (fit_boxes with dims 3, so the rows are contiguous). */
static vkg_status emit_softmax(vkg_compiler *c, vkg_tensor t, const char *label, const int64_t *shape4,
                               const int64_t *e, const int64_t *n_box) {
    const vkg_node *n = &c->g->nodes[t];
    vkg_tensor x = c->fused_input[t] != VKG_NONE ? c->fused_input[t] : n->src[0];
    vkg_tensor sc = c->fused_scale[t], mk = c->fused_mask[t];
    vkg_sym_step *s = vkg_compile_new_step(c, VKG_KERNEL_SOFTMAX, t, label);
    if (!s) return vkg_error_set(c->err, VKG_ERR_OUT_OF_MEMORY, "out of memory compiling");
    vkg_softmax_params *p = &s->step.params.softmax;
    const vkg_view out = box_of(broadcast_view(&c->view[t], shape4), shape4, e, n_box);
    const int whole = out.shape[0] == shape4[0] && out.shape[1] == shape4[1] && out.shape[2] == shape4[2];
    p->cols = (uint32_t)shape4[3];
    p->rows = (uint32_t)(out.shape[0] * out.shape[1] * out.shape[2]);
    p->dim1 = (uint32_t)out.shape[1];
    p->dim2 = (uint32_t)out.shape[2];
    p->scale = sc != VKG_NONE ? c->g->nodes[sc].attr.scale.s : 1.0f;
    p->mask_kind = VKG_SOFTMAX_MASK_NONE;
    p->dyn_index = VKG_NO_INDEX;
    if (whole) {
        vkg_compile_bind(s, 0, &c->view[x], WORD(vkg_softmax_params, in_offset));
        vkg_compile_bind(s, 1, &c->view[t], WORD(vkg_softmax_params, out_offset));
    } else {
        const vkg_view in = box_of(broadcast_view(&c->view[x], shape4), shape4, e, n_box);
        vkg_compile_bind(s, 0, &in, WORD(vkg_softmax_params, in_offset));
        vkg_compile_bind(s, 1, &out, WORD(vkg_softmax_params, out_offset));
    }
    if (mk == VKG_NONE) return VKG_OK;
    const vkg_node *m = &c->g->nodes[mk];
    if (m->op == VKG_OP_MASK_CAUSAL) {
        p->mask_kind = VKG_SOFTMAX_MASK_CAUSAL;
        p->mask_rows = vkg_compile_mask_rows(m);
        /* a box's row i2 = 0 is the tensor's e2: its position moves with it, unless every row is
         * at one position */
        p->causal_offset = m->attr.causal.offset + (p->mask_rows & VKG_MASK_ROWS_ONE_POSITION ? 0 : (int32_t)e[2]);
        p->window = m->attr.causal.window;
        if (m->src[1] != VKG_NONE) {
            /* with an index for each i0, the box's first i0 reads the e0-th */
            p->dyn_index = (uint32_t)c->index_slot[m->src[1]] + (p->mask_rows & VKG_MASK_ROWS_OWN_INDEX ? (uint32_t)e[0] : 0u);
            bind_index(s, 3, m->src[1]);
        }
    } else {
        p->mask_kind = m->attr.mask.kind == VKG_MASK_BOOL ? VKG_SOFTMAX_MASK_BOOL : VKG_SOFTMAX_MASK_ADDITIVE;
        strides4(&c->view[m->src[1]], shape4, p->mask_strides);
        const vkg_view mv = box_of(broadcast_view(&c->view[m->src[1]], shape4), shape4, e, n_box);
        vkg_compile_bind(s, 2, &mv, WORD(vkg_softmax_params, mask_offset));
    }
    return VKG_OK;
}

/* A softmax whose rows exceed one binding (the attention probabilities of 32 heads at T = 2048,
 * 512 MiB, against lavapipe's 128 MiB) runs as boxes of whole rows. */
static vkg_status lower_softmax(vkg_compiler *c, vkg_tensor t) {
    const vkg_node *n = &c->g->nodes[t];
    char label[48] = "softmax";
    const vkg_tensor x = c->fused_input[t] != VKG_NONE ? c->fused_input[t] : n->src[0];
    const vkg_tensor sc = c->fused_scale[t], mk = c->fused_mask[t];
    if (sc != VKG_NONE) strcat(label, "+scale");
    if (mk != VKG_NONE) strcat(label, c->g->nodes[mk].op == VKG_OP_MASK_CAUSAL ? "+causal" : "+mask");
    int64_t shape4[4], n_box[4], e[4] = {0, 0, 0, 0};
    shape4_of(n->ndim, n->shape, shape4);
    vkg_view views[3] = {broadcast_view(&c->view[x], shape4), broadcast_view(&c->view[t], shape4)};
    const int masked = mk != VKG_NONE && c->g->nodes[mk].op != VKG_OP_MASK_CAUSAL;
    if (masked) views[2] = broadcast_view(&c->view[c->g->nodes[mk].src[1]], shape4);
    const int64_t boxes = fit_boxes(c, shape4, views, masked ? 3 : 2, 3, n_box);
    vkg_status st = vkg_compile_check_split(c, t, "softmax", boxes);
    for (int64_t part = 1; st == VKG_OK; part++) {
        char l[64];
        st = emit_softmax(c, t, vkg_compile_part_label(l, sizeof l, label, part, boxes), shape4, e, n_box);
        if (!next_box(e, shape4, n_box)) break;
    }
    return st;
}

static vkg_status lower_layernorm(vkg_compiler *c, vkg_tensor t) {
    const vkg_node *n = &c->g->nodes[t];
    const int rms = n->op == VKG_OP_RMS_NORM;
    vkg_sym_step *s = vkg_compile_new_step(c, VKG_KERNEL_LAYERNORM, t, rms ? "rms_norm" : "layernorm");
    if (!s) return vkg_error_set(c->err, VKG_ERR_OUT_OF_MEMORY, "out of memory compiling");
    vkg_layernorm_params *p = &s->step.params.layernorm;
    p->cols = (uint32_t)n->shape[n->ndim - 1];
    /* A last axis of 2^32 (the builders' largest extent) wraps to 0 here; such a row is larger
     * than any binding, which vkg_compile_place refuses, so the step never runs. */
    p->rows = p->cols ? (uint32_t)(vkg_shape_numel(n->ndim, n->shape) / p->cols) : 0;
    p->eps = n->attr.layernorm.eps;
    p->flags = rms ? VKG_LAYERNORM_RMS : 0u;
    vkg_compile_bind(s, 0, &c->view[n->src[0]], WORD(vkg_layernorm_params, in_offset));
    vkg_compile_bind(s, 1, &c->view[t], WORD(vkg_layernorm_params, out_offset));
    if (n->src[1] != VKG_NONE) {
        p->flags |= VKG_LAYERNORM_GAMMA;
        vkg_compile_bind(s, 2, &c->view[n->src[1]], WORD(vkg_layernorm_params, gamma_offset));
    }
    if (n->src[2] != VKG_NONE) {
        p->flags |= VKG_LAYERNORM_BETA;
        vkg_compile_bind(s, 3, &c->view[n->src[2]], WORD(vkg_layernorm_params, beta_offset));
    }
    return VKG_OK;
}

typedef struct write_target write_target;
static write_target write_target_of(vkg_compiler *c, vkg_tensor t);
static void limit_write_index(vkg_compiler *c, vkg_tensor t);
static void fuse_cache_write(vkg_compiler *c, vkg_tensor t, vkg_sym_step *s);

/* x [.., T, D] through its view's strides (padded to [b0, b1, T, D]) into its own contiguous rows. */
static vkg_status lower_rope(vkg_compiler *c, vkg_tensor t) {
    const vkg_node *n = &c->g->nodes[t];
    vkg_sym_step *s = vkg_compile_new_step(c, VKG_KERNEL_ROPE, t, "rope");
    if (!s) return vkg_error_set(c->err, VKG_ERR_OUT_OF_MEMORY, "out of memory compiling");
    vkg_rope_params *p = &s->step.params.rope;
    int64_t shape4[4];
    uint32_t xs[4];
    shape4_of(n->ndim, n->shape, shape4);
    strides4(&c->view[n->src[0]], shape4, xs);
    p->batch0 = (uint32_t)shape4[0], p->batch1 = (uint32_t)shape4[1], p->T = (uint32_t)shape4[2];
    p->D = (uint32_t)shape4[3];
    p->x_stride_b0 = xs[0], p->x_stride_b1 = xs[1], p->x_stride_t = xs[2], p->x_stride_d = xs[3];
    p->positions = (uint32_t)c->g->nodes[n->src[1]].shape[0];
    p->pos_offset = n->attr.rope.offset;
    p->rotated = n->attr.rope.rotated ? (uint32_t)n->attr.rope.rotated : p->batch1;
    p->dyn_index = VKG_NO_INDEX;
    vkg_view x = broadcast_view(&c->view[n->src[0]], shape4);
    vkg_compile_bind(s, 0, &x, WORD(vkg_rope_params, x_offset));
    vkg_compile_bind(s, 1, &c->view[n->src[1]], WORD(vkg_rope_params, table_offset));
    vkg_compile_bind(s, 2, &c->view[t], WORD(vkg_rope_params, out_offset));
    if (n->attr.rope.row_positions) {
        p->row_positions = 1;
        vkg_compile_bind(s, 4, &c->view[n->src[2]], WORD(vkg_rope_params, positions_offset));
    } else if (n->src[2] != VKG_NONE) {
        p->dyn_index = (uint32_t)c->index_slot[n->src[2]];
        bind_index(s, 3, n->src[2]);   /* a row whose position has no row in the table rotates to NaN */
    }
    p->cache_index = VKG_NO_INDEX;
    fuse_cache_write(c, t, s);
    return VKG_OK;
}

/* A table larger than one binding is split into row ranges, one step each. */
static vkg_status lower_embedding(vkg_compiler *c, vkg_tensor t) {
    const vkg_node *n = &c->g->nodes[t];
    const vkg_view *table = &c->view[n->src[0]];
    int64_t V = table->shape[0], C = table->shape[1];
    uint64_t limit = vkg_compile_binding_limit(c);
    const vkg_dtype dt = vkg_compile_dtype(c, table->base);
    int64_t rows_per_step = (int64_t)(limit / ((uint64_t)C * vkg_dtype_size(dt)));
    if (rows_per_step < 1)
        return vkg_error_set(c->err, VKG_ERR_UNSUPPORTED, "embedding: one row of '%s' (%lld floats) exceeds the "
                             "largest binding (%llu bytes)", vkg_tensor_name(c->g, n->src[0]), (long long)C,
                             (unsigned long long)c->opts.max_binding_bytes);
    vkg_status st = vkg_compile_check_split(c, t, "embedding", V / rows_per_step + (V % rows_per_step != 0));
    if (st != VKG_OK) return st;
    int parts = (int)(V / rows_per_step + (V % rows_per_step != 0));
    for (int64_t r0 = 0; r0 < V; r0 += rows_per_step) {
        int64_t rc = V - r0 < rows_per_step ? V - r0 : rows_per_step;
        char label[48];
        if (parts > 1) snprintf(label, sizeof label, "embedding[%d/%d]", (int)(r0 / rows_per_step) + 1, parts);
        vkg_sym_step *s = vkg_compile_new_step(c, VKG_KERNEL_EMBEDDING, t, parts > 1 ? label : "embedding");
        if (!s) return vkg_error_set(c->err, VKG_ERR_OUT_OF_MEMORY, "out of memory compiling");
        vkg_embedding_params *p = &s->step.params.embedding;
        p->n_ids = (uint32_t)vkg_shape_numel(c->g->nodes[n->src[1]].ndim, c->g->nodes[n->src[1]].shape);
        p->dim = (uint32_t)C;
        p->vocab = (uint32_t)V;
        p->row_begin = (uint32_t)r0;
        p->row_count = (uint32_t)rc;
        p->zero_invalid = r0 == 0;
        p->flags = dt == VKG_F16 ? VKG_EMBEDDING_TABLE_F16 : dt == VKG_BF16 ? VKG_EMBEDDING_TABLE_BF16 : 0u;
        vkg_view part = *table;
        part.shape[0] = rc;
        part.offset += r0 * C;
        vkg_compile_bind(s, 0, &c->view[n->src[1]], WORD(vkg_embedding_params, ids_offset));
        vkg_compile_bind(s, 1, &part, WORD(vkg_embedding_params, table_offset));
        vkg_compile_bind(s, 2, &c->view[t], WORD(vkg_embedding_params, out_offset));
    }
    return VKG_OK;
}

/* out[.., a | b, ..]: two copies into the two parts of the output, but for a part computed there. */
static vkg_status lower_concat(vkg_compiler *c, vkg_tensor t) {
    const vkg_node *n = &c->g->nodes[t];
    int axis = n->attr.concat.axis;
    for (int part = 0; part < 2; part++) {
        vkg_view dst = c->view[t];
        const vkg_node *src = &c->g->nodes[n->src[part]];
        dst.shape[axis] = src->shape[axis];
        if (part == 1) dst.offset += c->g->nodes[n->src[0]].shape[axis] * dst.strides[axis];
        const vkg_view *from = &c->view[n->src[part]];
        if (from->base == dst.base && from->offset == dst.offset && vkg_view_is_contiguous(from) &&
            vkg_view_is_contiguous(&dst)) /* computed in place (place_concat_parts) */
            continue;
        vkg_status st = emit_unary(c, t, part == 0 ? "concat[a]" : "concat[b]", VKG_UNARY_COPY, from, &dst);
        if (st != VKG_OK) return st;
    }
    return VKG_OK;
}

/* Where a write_at node t puts x: dst (x's shape at the state's strides and offsets), the span
 * every value of its index can reach (reach), and that index with the elements one unit of it
 * moves the write (VKG_NONE: none); rows: vkg_write_rows, each i0 at its own index from `index`. */
struct write_target {
    vkg_view dst, reach;
    vkg_tensor index;
    int64_t dyn_stride;
    int rows;
};

static write_target write_target_of(vkg_compiler *c, vkg_tensor t) {
    const vkg_node *n = &c->g->nodes[t];
    const vkg_node *x = &c->g->nodes[n->src[1]];
    const vkg_view state = c->view[t];
    write_target w = {.dst = state, .reach = state, .index = n->src[2], .rows = n->attr.write_at.rows};
    memcpy(w.dst.shape, x->shape, sizeof w.dst.shape);
    if (w.rows) { /* x [R, G, A, D] into the state's planes [0, R G) with a plane stride of G */
        const int64_t strides[4] = {x->shape[1] * state.strides[0], state.strides[0], state.strides[1],
                                    state.strides[3]};
        memcpy(w.dst.strides, strides, sizeof strides);
        w.reach.shape[0] = x->shape[0] * x->shape[1]; /* the planes every row can reach, whole along positions */
        w.dyn_stride = state.strides[2];
    } else {
        const int axis = n->attr.write_at.axis;
        w.dst.offset += n->attr.write_at.offset * w.dst.strides[axis];
        w.dst.offset += n->attr.write_at.lead_offset * w.dst.strides[n->attr.write_at.lead_axis];
        /* The destination moves along the axis: the whole state along it, and along the others x's
         * extent at its offsets (one slot's block of a cache that holds several). */
        w.reach = c->view[n->src[0]];
        for (int i = 0; i < w.reach.ndim; i++)
            if (i != axis) w.reach.shape[i] = x->shape[i];
        w.reach.offset += n->attr.write_at.lead_offset * w.reach.strides[n->attr.write_at.lead_axis];
        w.dyn_stride = w.dst.strides[axis];
    }
    return w;
}

/* Narrows the values index i may hold to [lo, hi]. */
static void limit_index(vkg_compiler *c, vkg_tensor i, int64_t lo, int64_t hi) {
    if (lo > c->index_min[i]) c->index_min[i] = lo;
    if (hi < c->index_max[i]) c->index_max[i] = hi;
}

/* The values each index of write_at t may hold: its write stays inside the state along its axis
 * (inside the state's bytes is not enough: a row's position past its slot lands in the next). */
static void limit_write_index(vkg_compiler *c, vkg_tensor t) {
    const vkg_node *n = &c->g->nodes[t];
    const vkg_node *x = &c->g->nodes[n->src[1]];
    if (n->src[2] == VKG_NONE) return;
    const int rows = n->attr.write_at.rows; /* each its one row at the position axis (2) */
    const int axis = rows ? 2 : n->attr.write_at.axis;
    const int64_t offset = rows ? 0 : n->attr.write_at.offset;
    const int64_t room = c->g->nodes[n->src[0]].shape[axis] - (rows ? 1 : x->shape[axis]) - offset;
    for (int r = 0; r < (rows ? rows : 1); r++) limit_index(c, n->src[2] + r, -offset, room);
}

/* The write_at after rope t that stores the rope's last heads (a q/k/v projection's keys and
 * values) into a KV cache, with no step between them: VKG_NONE, or the write and in *first its
 * first head.  x must be those heads of the rope's output as the attention layers view them: [G,
 * A, T, D] (a write at a position) or [T, G, A, D] (vkg_write_rows, row t its own position). */
static vkg_tensor cache_write_after(const vkg_compiler *c, vkg_tensor t, int64_t *first) {
    const vkg_graph *g = c->g;
    const vkg_view *out = &c->view[t];
    if (out->ndim < 3 || !vkg_view_is_contiguous(out)) return VKG_NONE;
    const int64_t T = out->shape[out->ndim - 2], D = out->shape[out->ndim - 1], B1 = out->shape[out->ndim - 3];
    if (vkg_shape_numel(out->ndim, out->shape) != B1 * T * D) return VKG_NONE; /* one batch entry */
    for (int i = t + 1; i < c->n; i++) {
        const vkg_node *n = &g->nodes[i];
        if (!c->keep[i] || n->op == VKG_OP_INPUT || n->op == VKG_OP_CONSTANT || n->op == VKG_OP_STATE ||
            n->op == VKG_OP_INDEX || (is_view_op(n->op) && !c->materialize[i]))
            continue;
        if (n->op != VKG_OP_WRITE_AT || c->role[i] == VKG_FUSE_ABSORBED) return VKG_NONE;
        const vkg_view *x = &c->view[n->src[1]];
        if (x->base != out->base || x->ndim != 4 || x->shape[3] != D || x->strides[3] != 1) return VKG_NONE;
        const int rows = n->attr.write_at.rows != 0;
        const int64_t G = x->shape[rows], A = x->shape[rows + 1], heads = G * A;
        const int64_t want[4] = {rows ? D : A * T * D, rows ? A * T * D : T * D, rows ? T * D : D, 1};
        *first = B1 - heads;
        if (x->shape[rows ? 0 : 2] != T || *first < 0 || x->offset != out->offset + *first * T * D ||
            memcmp(x->strides, want, sizeof want))
            return VKG_NONE;
        return i;
    }
    return VKG_NONE;
}

/* Where the write_at after rope t stores the rope's keys and values, the rope step s does it
 * instead (params/rope.h's cache rows): one step fewer a layer.  The rope's output keeps them too,
 * for dumps and compare. */
static void fuse_cache_write(vkg_compiler *c, vkg_tensor t, vkg_sym_step *s) {
    int64_t first = 0;
    const vkg_tensor wr = c->opts.fuse ? cache_write_after(c, t, &first) : VKG_NONE;
    if (wr == VKG_NONE) return;
    const write_target w = write_target_of(c, wr);
    const int rows = w.rows != 0;
    /* a cache larger than one binding is written in boxes, a step of its own (lower_write_at) */
    if (w.dst.strides[3] != 1 || vkg_compile_span_bytes(c, &w.reach) > vkg_compile_binding_limit(c))
        return;
    vkg_rope_params *p = &s->step.params.rope;
    p->cache_first = (uint32_t)first;
    p->cache_heads = (uint32_t)w.dst.shape[rows + 1];
    p->cache_stride_g = (uint32_t)w.dst.strides[rows];
    p->cache_stride_a = (uint32_t)w.dst.strides[rows + 1];
    p->cache_stride_t = (uint32_t)w.dst.strides[rows ? 0 : 2];
    vkg_compile_bind(s, 5, &w.dst, WORD(vkg_rope_params, cache_offset));
    vkg_view_span(&w.reach, &s->sym[5].lo, &s->sym[5].hi);
    if (w.index != VKG_NONE) {
        p->cache_index = (uint32_t)c->index_slot[w.index];
        p->cache_rows = (uint32_t)rows;
        p->cache_dyn_stride = (uint32_t)w.dyn_stride;
        bind_index(s, 3, w.index);
        limit_write_index(c, wr);
    }
    c->written_by_rope[wr] = 1;
    snprintf(s->step.label, sizeof s->step.label, "rope+write");
}

/* The part of write w's reach that the box at corner e (extents n_box of the write's 4-d shape4)
 * can write: the box's extents in the dimensions it cuts, the whole state's in the others. */
static vkg_view reach_of_box(const write_target *w, const int64_t *shape4, const int64_t *e, const int64_t *n_box) {
    int64_t reach4[4], n_reach[4];
    shape4_of(w->reach.ndim, w->reach.shape, reach4);
    for (int i = 0; i < 4; i++) n_reach[i] = n_box[i] < shape4[i] ? n_box[i] : reach4[i];
    return box_of(broadcast_view(&w->reach, reach4), reach4, e, n_reach);
}

/* Whether the write's box of extents n_box, and all its index can move it over, fit one binding. */
static int write_box_fits(const vkg_compiler *c, const write_target *w, const vkg_view *x, const int64_t *shape4,
                          const int64_t *n_box) {
    const uint64_t limit = vkg_compile_binding_limit(c);
    const int64_t corner[4] = {0, 0, 0, 0};
    const vkg_view in = box_of(broadcast_view(x, shape4), shape4, corner, n_box),
                   reach = reach_of_box(w, shape4, corner, n_box);
    return vkg_compile_span_bytes(c, &in) <= limit && vkg_compile_span_bytes(c, &reach) <= limit;
}

/* One step of write_at t: the part of x at box corner e (extents n_box of its 4-d shape4) into
 * its place in the state, binding all that the index can move it over.  boxes == 1: the whole. */
static vkg_status emit_write_box(vkg_compiler *c, vkg_tensor t, const write_target *w, const int64_t *shape4,
                                 const int64_t *e, const int64_t *n_box, int64_t part, int64_t boxes) {
    const vkg_view *x = &c->view[c->g->nodes[t].src[1]];
    vkg_status st;
    if (boxes == 1) {
        st = emit_unary(c, t, "write_at", VKG_UNARY_COPY, x, &w->dst);
    } else {
        char l[64];
        const vkg_view in = box_of(broadcast_view(x, shape4), shape4, e, n_box),
                       dst = box_of(broadcast_view(&w->dst, shape4), shape4, e, n_box);
        st = emit_unary(c, t, vkg_compile_part_label(l, sizeof l, "write_at", part, boxes), VKG_UNARY_COPY, &in,
                        &dst);
    }
    if (st != VKG_OK) return st;
    vkg_sym_step *s = &c->steps[c->n_steps - 1];
    const vkg_view reach = boxes == 1 ? w->reach : reach_of_box(w, shape4, e, n_box);
    vkg_view_span(&reach, &s->sym[1].lo, &s->sym[1].hi);
    if (w->index != VKG_NONE) {
        s->step.params.unary.dyn_index = (uint32_t)c->index_slot[w->index];
        s->step.params.unary.dyn_rows = (uint32_t)(w->rows != 0);
        s->step.params.unary.out_dyn_stride = (uint32_t)w->dyn_stride;
        bind_index(s, 2, w->index);
    }
    return VKG_OK;
}

/* state[.., offset + index : .., ..] = x: a copy whose destination moves with a runtime index;
 * with rows (vkg_write_rows), each i0 at its own index (dyn_rows).  Nothing where the rope step
 * that computes x wrote it already (lower_rope).  A write whose reach exceeds one binding (a
 * layer's KV cache of Qwen3-0.6B's 40960 positions, 320 MiB) runs in boxes of the dimensions
 * before its axis (the cache's key and value planes, then its heads), each binding its own part
 * of the state along the whole axis; a rows write is kept within the binding every device has by
 * its builder (layers.c's decode_rows). */
static vkg_status lower_write_at(vkg_compiler *c, vkg_tensor t) {
    if (c->written_by_rope[t]) return VKG_OK;
    const vkg_node *n = &c->g->nodes[t];
    const write_target w = write_target_of(c, t);
    const vkg_view *x = &c->view[n->src[1]];
    int64_t shape4[4], n_box[4], e[4] = {0, 0, 0, 0};
    shape4_of(w.dst.ndim, w.dst.shape, shape4);
    memcpy(n_box, shape4, sizeof n_box);
    const int axis4 = w.rows ? 0 : n->attr.write_at.axis + 4 - w.dst.ndim;
    for (int d = 0; d < axis4 && !write_box_fits(c, &w, x, shape4, n_box); d++)
        while (n_box[d] > 1 && !write_box_fits(c, &w, x, shape4, n_box)) n_box[d] = (n_box[d] + 1) / 2;
    int64_t boxes = 1;
    for (int i = 0; i < 4; i++) boxes *= (shape4[i] + n_box[i] - 1) / n_box[i];
    vkg_status st = vkg_compile_check_split(c, t, "write_at", boxes);
    for (int64_t part = 1; st == VKG_OK; part++) {
        st = emit_write_box(c, t, &w, shape4, e, n_box, part, boxes);
        if (!next_box(e, shape4, n_box)) break;
    }
    if (st == VKG_OK && w.index != VKG_NONE) limit_write_index(c, t);
    return st;
}

vkg_status vkg_compile_lower(vkg_compiler *c) {
    const vkg_graph *g = c->g;
    for (int i = 0; i < c->n; i++)
        if (g->nodes[i].op == VKG_OP_INDEX) c->index_slot[i] = c->n_indices++;
    vkg_status st = decide_storage(c);
    for (int i = 0; i < c->n && st == VKG_OK; i++) {
        const vkg_node *n = &g->nodes[i];
        if (!c->keep[i] || c->role[i] == VKG_FUSE_ABSORBED) continue;
        switch (n->op) {
        case VKG_OP_INPUT: case VKG_OP_CONSTANT: case VKG_OP_STATE: case VKG_OP_INDEX: break;
        case VKG_OP_RESHAPE: case VKG_OP_PERMUTE: case VKG_OP_SLICE:
            if (c->materialize[i] && vkg_dtype_is_16bit(vkg_compile_dtype(c, i))) {
                st = vkg_error_set(c->err, VKG_ERR_UNSUPPORTED,
                                   "%s '%s' of a %s tensor would need a copy (an output, or a layout its reader "
                                   "cannot take); 16-bit tensors are read in place only, as matmul's b or an "
                                   "embedding table", vkg_op_name(n->op), vkg_tensor_name(g, i),
                                   vkg_dtype_name(n->dtype));
            } else if (c->materialize[i]) {
                /* Copy in the logical order of the source (a reshape keeps element order). */
                vkg_view from = n->op == VKG_OP_RESHAPE ? c->view[n->src[0]] : natural_view(c, i);
                vkg_view to = c->view[i];
                to.ndim = from.ndim;
                memcpy(to.shape, from.shape, sizeof to.shape);
                vkg_contiguous_strides(to.ndim, to.shape, to.strides);
                st = emit_unary_boxes(c, i, "copy(view)", VKG_UNARY_COPY, &from, &to);
            }
            break;
        case VKG_OP_SOFTMAX: st = lower_softmax(c, i); break;
        case VKG_OP_LAYERNORM: case VKG_OP_RMS_NORM: st = lower_layernorm(c, i); break;
        case VKG_OP_EMBEDDING: st = lower_embedding(c, i); break;
        case VKG_OP_ROPE: st = lower_rope(c, i); break;
        case VKG_OP_CONCAT: st = lower_concat(c, i); break;
        case VKG_OP_WRITE_AT: st = lower_write_at(c, i); break;
        case VKG_OP_MATMUL:
            st = c->fused_softmax[i] != VKG_NONE ? vkg_compile_lower_attention(c, i) : vkg_compile_lower_matmul(c, i);
            break;
        /* element-wise, or the last node of a matmul group (its epilogue's add or activation) */
        case VKG_OP_ADD: case VKG_OP_MUL: case VKG_OP_SWIGLU: case VKG_OP_MASK: case VKG_OP_SCALE: case VKG_OP_MASK_CAUSAL: case VKG_OP_COPY:
#define VKG_ACTIVATION(NAME, name, code, epilogue) case VKG_OP_##NAME:
#include "params/unary_ops.def"
            st = c->fused_input[i] != VKG_NONE ? vkg_compile_lower_matmul(c, i) : lower_elementwise(c, i);
            break;
        case VKG_OP_COUNT: break;
        }
    }
    return st;
}
