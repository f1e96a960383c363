/* Data-movement ops: reshape, permute, transpose, slice, concat and writes into state tensors.
 * The compiler turns reshape/permute/slice into views (strides and an offset) wherever the
 * consumer reads strides, so these cost nothing at run time. */
#include "graph/graph_build.h"

#include <stdio.h>
#include <string.h>

static const char *shape_s(const vkg_graph *g, vkg_tensor t, char *buf, size_t size) {
    return vkg_shape_str(g->nodes[t].ndim, g->nodes[t].shape, buf, size);
}

/* Normalises a possibly negative axis; -1 when out of range. */
static int norm_axis(int axis, int ndim) {
    if (axis < 0) axis += ndim;
    return (axis >= 0 && axis < ndim) ? axis : -1;
}

static vkg_tensor view_node(vkg_graph *g, vkg_op op, vkg_tensor x, int ndim, const int64_t *shape) {
    vkg_node n;
    vkg_node_init(&n, op, g->nodes[x].dtype, ndim, shape);
    n.src[0] = x;
    return vkg_graph_add_node(g, &n);
}

vkg_tensor vkg_reshape(vkg_graph *g, vkg_tensor x, int ndim, const int64_t *shape) {
    if (!vkg_graph_check(g, "reshape", "x", x)) return VKG_NONE;
    char a[96];
    if (ndim < 1 || ndim > VKG_MAX_DIMS || !shape) {
        vkg_graph_fail(g, VKG_ERR_SHAPE, "reshape: x %s to %d dimensions; 1 to %d supported",
                       shape_s(g, x, a, sizeof a), ndim, VKG_MAX_DIMS);
        return VKG_NONE;
    }
    int64_t out[VKG_MAX_DIMS], known = 1;
    int infer = -1;
    for (int i = 0; i < ndim; i++) {
        out[i] = shape[i];
        if (shape[i] == -1 && infer < 0) {
            infer = i;
        } else if (shape[i] < 1) {
            vkg_graph_fail(g, VKG_ERR_SHAPE, "reshape: x %s: target dimension %d is %lld",
                           shape_s(g, x, a, sizeof a), i, (long long)shape[i]);
            return VKG_NONE;
        } else if (__builtin_mul_overflow(known, shape[i], &known) || known > VKG_MAX_NUMEL) {
            char b[96];
            vkg_graph_fail(g, VKG_ERR_SHAPE, "reshape: x %s ('%s'): target %s holds more elements than fit in 63 bits",
                           shape_s(g, x, a, sizeof a), vkg_tensor_name(g, x), vkg_shape_str(ndim, shape, b, sizeof b));
            return VKG_NONE;
        }
    }
    int64_t numel = vkg_shape_numel(g->nodes[x].ndim, g->nodes[x].shape);
    if (infer >= 0 && known > 0 && numel % known == 0) out[infer] = numel / known;
    char b[96];
    if ((infer >= 0 && (numel % known != 0)) || vkg_shape_numel(ndim, out) != numel) {
        vkg_graph_fail(g, VKG_ERR_SHAPE, "reshape: x %s ('%s', %lld elements) cannot become %s",
                       shape_s(g, x, a, sizeof a), vkg_tensor_name(g, x), (long long)numel,
                       vkg_shape_str(ndim, shape, b, sizeof b));
        return VKG_NONE;
    }
    return view_node(g, VKG_OP_RESHAPE, x, ndim, out);
}

vkg_tensor vkg_permute(vkg_graph *g, vkg_tensor x, const int *axes) {
    if (!vkg_graph_check(g, "permute", "x", x)) return VKG_NONE;
    const vkg_node *nx = &g->nodes[x];
    int seen[VKG_MAX_DIMS] = {0};
    int64_t shape[VKG_MAX_DIMS];
    int norm[VKG_MAX_DIMS];
    char a[96];
    for (int i = 0; i < nx->ndim; i++) {
        int ax = axes ? norm_axis(axes[i], nx->ndim) : -1;
        if (ax < 0 || seen[ax]) {
            vkg_graph_fail(g, VKG_ERR_SHAPE, "permute: axes of x %s ('%s') are not a permutation of 0..%d",
                           shape_s(g, x, a, sizeof a), vkg_tensor_name(g, x), nx->ndim - 1);
            return VKG_NONE;
        }
        seen[ax] = 1;
        norm[i] = ax;
        shape[i] = nx->shape[ax];
    }
    vkg_tensor t = view_node(g, VKG_OP_PERMUTE, x, nx->ndim, shape);
    if (t != VKG_NONE) memcpy(g->nodes[t].attr.permute.axes, norm, sizeof norm);
    return t;
}

vkg_tensor vkg_transpose(vkg_graph *g, vkg_tensor x, int axis0, int axis1) {
    if (!vkg_graph_check(g, "transpose", "x", x)) return VKG_NONE;
    int nd = g->nodes[x].ndim, a0 = norm_axis(axis0, nd), a1 = norm_axis(axis1, nd);
    if (a0 < 0 || a1 < 0) {
        char a[96];
        vkg_graph_fail(g, VKG_ERR_SHAPE, "transpose: axes %d and %d out of range for x %s", axis0, axis1,
                       shape_s(g, x, a, sizeof a));
        return VKG_NONE;
    }
    int axes[VKG_MAX_DIMS];
    for (int i = 0; i < nd; i++) axes[i] = i;
    axes[a0] = a1;
    axes[a1] = a0;
    return vkg_permute(g, x, axes);
}

vkg_tensor vkg_slice(vkg_graph *g, vkg_tensor x, int axis, int64_t start, int64_t length) {
    if (!vkg_graph_check(g, "slice", "x", x)) return VKG_NONE;
    const vkg_node *nx = &g->nodes[x];
    int ax = norm_axis(axis, nx->ndim);
    char a[96];
    /* length > extent - start, not start + length > extent: the sum may overflow. */
    if (ax < 0 || start < 0 || length < 1 || start > nx->shape[ax] || length > nx->shape[ax] - start) {
        char end[48];
        int64_t stop;
        if (__builtin_add_overflow(start, length, &stop))
            snprintf(end, sizeof end, "%lld + %lld", (long long)start, (long long)length);
        else snprintf(end, sizeof end, "%lld", (long long)stop);
        vkg_graph_fail(g, VKG_ERR_SHAPE, "slice: [%lld, %s) along axis %d is outside x %s ('%s')", (long long)start,
                       end, axis, shape_s(g, x, a, sizeof a), vkg_tensor_name(g, x));
        return VKG_NONE;
    }
    int64_t shape[VKG_MAX_DIMS];
    memcpy(shape, nx->shape, sizeof shape);
    shape[ax] = length;
    vkg_tensor t = view_node(g, VKG_OP_SLICE, x, nx->ndim, shape);
    if (t != VKG_NONE) {
        g->nodes[t].attr.slice.axis = ax;
        g->nodes[t].attr.slice.start = start;
    }
    return t;
}

/* 1 when a and b have the same shape except along axis. */
static int same_except(const vkg_node *a, const vkg_node *b, int axis) {
    if (a->ndim != b->ndim) return 0;
    for (int i = 0; i < a->ndim; i++)
        if (i != axis && a->shape[i] != b->shape[i]) return 0;
    return 1;
}

vkg_tensor vkg_concat(vkg_graph *g, vkg_tensor a, vkg_tensor b, int axis) {
    if (!vkg_graph_check(g, "concat", "a", a) || !vkg_graph_check(g, "concat", "b", b)) return VKG_NONE;
    const vkg_node *na = &g->nodes[a], *nb = &g->nodes[b];
    int ax = norm_axis(axis, na->ndim);
    char sa[96], sb[96];
    if (vkg_dtype_is_16bit(na->dtype) || vkg_dtype_is_16bit(nb->dtype)) {
        vkg_graph_fail(g, VKG_ERR_INVALID_ARGUMENT, "concat: a ('%s', %s) and b ('%s', %s): 16-bit tensors are read "
                       "in place only (as matmul's b or an embedding table), never copied", vkg_tensor_name(g, a),
                       vkg_dtype_name(na->dtype), vkg_tensor_name(g, b), vkg_dtype_name(nb->dtype));
        return VKG_NONE;
    }
    if (ax < 0 || !same_except(na, nb, ax) || na->dtype != nb->dtype) {
        vkg_graph_fail(g, VKG_ERR_SHAPE, "concat: a %s ('%s') and b %s ('%s') do not join along axis %d",
                       shape_s(g, a, sa, sizeof sa), vkg_tensor_name(g, a), shape_s(g, b, sb, sizeof sb),
                       vkg_tensor_name(g, b), axis);
        return VKG_NONE;
    }
    int64_t shape[VKG_MAX_DIMS];
    memcpy(shape, na->shape, sizeof shape);
    shape[ax] += nb->shape[ax];
    vkg_node n;
    vkg_node_init(&n, VKG_OP_CONCAT, na->dtype, na->ndim, shape);
    n.src[0] = a;
    n.src[1] = b;
    n.attr.concat.axis = ax;
    return vkg_graph_add_node(g, &n);
}

vkg_tensor vkg_write_at(vkg_graph *g, vkg_tensor state, vkg_tensor x, int axis, int64_t offset,
                        vkg_tensor dyn_offset) {
    return vkg_write_at_block(g, state, x, axis, offset, dyn_offset, axis, 0);
}

/* The operands of a write: a state (or a write's result) and x, both healthy; else why not. */
static int writable(vkg_graph *g, const char *op, vkg_tensor state, vkg_tensor x) {
    if (!vkg_graph_check(g, op, "state", state) || !vkg_graph_check(g, op, "x", x)) return 0;
    if (g->nodes[state].op == VKG_OP_STATE || g->nodes[state].op == VKG_OP_WRITE_AT) return 1;
    vkg_graph_fail(g, VKG_ERR_INVALID_ARGUMENT, "%s: '%s' is not a state tensor (vkg_state) nor the result of a write_at",
                   op, vkg_tensor_name(g, state));
    return 0;
}

/* The write of x into state, its runtime index `index` (or VKG_NONE), placed as `at` says. */
static vkg_tensor write_node(vkg_graph *g, vkg_tensor state, vkg_tensor x, vkg_tensor index,
                             const struct vkg_write_at_attr *at) {
    const vkg_node *ns = &g->nodes[state];
    vkg_node n;
    vkg_node_init(&n, VKG_OP_WRITE_AT, VKG_F32, ns->ndim, ns->shape);
    n.src[0] = state;
    n.src[1] = x;
    n.src[2] = index;
    n.attr.write_at = *at;
    return vkg_graph_add_node(g, &n);
}

vkg_tensor vkg_write_at_block(vkg_graph *g, vkg_tensor state, vkg_tensor x, int axis, int64_t offset,
                              vkg_tensor dyn_offset, int lead_axis, int64_t lead_offset) {
    if (!writable(g, "write_at", state, x)) return VKG_NONE;
    const vkg_node *ns = &g->nodes[state], *nx = &g->nodes[x];
    if (dyn_offset != VKG_NONE &&
        (!vkg_graph_check(g, "write_at", "dyn_offset", dyn_offset) || g->nodes[dyn_offset].op != VKG_OP_INDEX)) {
        vkg_graph_fail(g, VKG_ERR_INVALID_ARGUMENT, "write_at: dyn_offset must be a vkg_index");
        return VKG_NONE;
    }
    int ax = norm_axis(axis, ns->ndim), lead = norm_axis(lead_axis, ns->ndim);
    int fits = ax >= 0 && lead >= 0 && ns->ndim == nx->ndim && nx->dtype == VKG_F32 && offset >= 0 &&
               lead_offset >= 0 && (lead_offset == 0 || lead != ax);
    for (int i = 0; fits && i < ns->ndim; i++) {
        const int64_t at = i == ax ? offset : i == lead ? lead_offset : 0;
        fits = i == ax || i == lead ? at + nx->shape[i] <= ns->shape[i] : nx->shape[i] == ns->shape[i];
    }
    char ss[96], sx[96];
    if (!fits) {
        vkg_graph_fail(g, VKG_ERR_SHAPE, "write_at: x %s ('%s') does not fit into state %s ('%s') at %lld along axis "
                       "%d (and %lld along axis %d)", shape_s(g, x, sx, sizeof sx), vkg_tensor_name(g, x),
                       shape_s(g, state, ss, sizeof ss), vkg_tensor_name(g, state), (long long)offset, axis,
                       (long long)lead_offset, lead_axis);
        return VKG_NONE;
    }
    return write_node(g, state, x, dyn_offset,
                      &(struct vkg_write_at_attr){.axis = ax, .offset = offset, .lead_axis = lead, .lead_offset = lead_offset});
}

vkg_tensor vkg_write_rows(vkg_graph *g, vkg_tensor state, vkg_tensor x, vkg_tensor first, int rows) {
    if (!writable(g, "write_rows", state, x)) return VKG_NONE;
    const vkg_node *ns = &g->nodes[state], *nx = &g->nodes[x];
    char ss[96], sx[96];
    if (!vkg_graph_indices(g, first, rows) || ns->ndim != 4 || nx->ndim != 4 || nx->dtype != VKG_F32 ||
        nx->shape[0] != rows || nx->shape[0] * nx->shape[1] > ns->shape[0] || nx->shape[2] != ns->shape[1] ||
        nx->shape[3] != ns->shape[3]) {
        vkg_graph_fail(g, VKG_ERR_SHAPE, "write_rows: x %s ('%s') into state %s ('%s') at %d runtime positions from "
                       "'%s': x is [rows, G, A, D] of f32 for a state [P >= rows G, A, S, D], one index for each row, "
                       "made one after another", shape_s(g, x, sx, sizeof sx), vkg_tensor_name(g, x),
                       shape_s(g, state, ss, sizeof ss), vkg_tensor_name(g, state), rows,
                       first >= 0 && first < g->n_nodes ? vkg_tensor_name(g, first) : "(none)");
        return VKG_NONE;
    }
    return write_node(g, state, x, first, &(struct vkg_write_at_attr){.axis = 2, .rows = rows});
}
