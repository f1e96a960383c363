/* The ops of the graph API.  Each checks its operands at once and, on a mismatch, puts the graph
 * into its error state with a message that names the op, the operands and their shapes. */
#include "graph/graph_build.h"

#include <math.h>
#include <string.h>

/* A shape as text, for messages. */
typedef struct shape_text { char s[96]; } shape_text;

static shape_text shape_of(const vkg_graph *g, vkg_tensor t) {
    shape_text st;
    const vkg_node *n = &g->nodes[t];
    vkg_shape_str(n->ndim, n->shape, st.s, sizeof st.s);
    return st;
}

static int need_f32(vkg_graph *g, const char *op, const char *operand, vkg_tensor t) {
    if (g->nodes[t].dtype == VKG_F32 && g->nodes[t].op != VKG_OP_INDEX) return 1;
    if (vkg_dtype_is_16bit(g->nodes[t].dtype))
        vkg_graph_fail(g, VKG_ERR_INVALID_ARGUMENT, "%s: operand %s ('%s') is %s; %s reads f32 here (16-bit tensors "
                       "serve as matmul's b and embedding tables)", op, operand, vkg_tensor_name(g, t),
                       vkg_dtype_name(g->nodes[t].dtype), op);
    else
        vkg_graph_fail(g, VKG_ERR_INVALID_ARGUMENT, "%s: operand %s ('%s') must be an f32 tensor", op, operand,
                       vkg_tensor_name(g, t));
    return 0;
}

/* A weight operand: f32, or a 16-bit constant (or a view of one) read as f32. */
static int need_weight(vkg_graph *g, const char *op, const char *operand, vkg_tensor t) {
    return vkg_dtype_is_16bit(g->nodes[t].dtype) || need_f32(g, op, operand, t);
}

/* A valid f32 operand (the graph failed, naming it, where not). */
static int f32_operand(vkg_graph *g, const char *op, const char *operand, vkg_tensor t) {
    return vkg_graph_check(g, op, operand, t) && need_f32(g, op, operand, t);
}

static vkg_tensor unary_node(vkg_graph *g, vkg_op op, vkg_tensor x) {
    if (!f32_operand(g, vkg_op_name(op), "x", x)) return VKG_NONE;
    vkg_node n;
    vkg_node_init(&n, op, VKG_F32, g->nodes[x].ndim, g->nodes[x].shape);
    n.src[0] = x;
    return vkg_graph_add_node(g, &n);
}

/* A node shaped as x that also reads src1 and src2 (checked by the caller; either may be VKG_NONE). */
static vkg_tensor unary_node_with(vkg_graph *g, vkg_op op, vkg_tensor x, vkg_tensor src1, vkg_tensor src2) {
    vkg_tensor t = unary_node(g, op, x);
    if (t == VKG_NONE) return t;
    g->nodes[t].src[1] = src1;
    g->nodes[t].src[2] = src2;
    return t;
}

/* numpy broadcasting of a and b into out; 0 when they do not broadcast. */
static int broadcast(const vkg_node *a, const vkg_node *b, int *ndim, int64_t *out) {
    int nd = a->ndim > b->ndim ? a->ndim : b->ndim;
    for (int i = 0; i < nd; i++) {
        int ia = a->ndim - nd + i, ib = b->ndim - nd + i;
        int64_t da = ia >= 0 ? a->shape[ia] : 1, db = ib >= 0 ? b->shape[ib] : 1;
        if (da != db && da != 1 && db != 1) return 0;
        out[i] = da > db ? da : db;
    }
    *ndim = nd;
    return 1;
}

static vkg_tensor binary_node(vkg_graph *g, vkg_op op, vkg_tensor a, vkg_tensor b) {
    const char *name = vkg_op_name(op);
    if (!f32_operand(g, name, "a", a) || !f32_operand(g, name, "b", b)) return VKG_NONE;
    int ndim;
    int64_t shape[VKG_MAX_DIMS];
    if (!broadcast(&g->nodes[a], &g->nodes[b], &ndim, shape)) {
        vkg_graph_fail(g, VKG_ERR_SHAPE, "%s: shapes a %s ('%s') and b %s ('%s') do not broadcast", name,
                       shape_of(g, a).s, vkg_tensor_name(g, a), shape_of(g, b).s, vkg_tensor_name(g, b));
        return VKG_NONE;
    }
    vkg_node n;
    vkg_node_init(&n, op, VKG_F32, ndim, shape);
    n.src[0] = a;
    n.src[1] = b;
    return vkg_graph_add_node(g, &n);
}

vkg_tensor vkg_add(vkg_graph *g, vkg_tensor a, vkg_tensor b) { return binary_node(g, VKG_OP_ADD, a, b); }
vkg_tensor vkg_mul(vkg_graph *g, vkg_tensor a, vkg_tensor b) { return binary_node(g, VKG_OP_MUL, a, b); }
vkg_tensor vkg_swiglu(vkg_graph *g, vkg_tensor gate, vkg_tensor up) {
    if (!vkg_graph_check(g, "swiglu", "gate", gate) || !vkg_graph_check(g, "swiglu", "up", up)) return VKG_NONE;
    const vkg_node *a = &g->nodes[gate], *b = &g->nodes[up];
    if (a->ndim != b->ndim || memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->ndim) != 0) {
        vkg_graph_fail(g, VKG_ERR_SHAPE, "swiglu: gate %s ('%s') and up %s ('%s') must have one shape",
                       shape_of(g, gate).s, vkg_tensor_name(g, gate), shape_of(g, up).s, vkg_tensor_name(g, up));
        return VKG_NONE;
    }
    return binary_node(g, VKG_OP_SWIGLU, gate, up);
}
vkg_tensor vkg_gelu(vkg_graph *g, vkg_tensor x) { return unary_node(g, VKG_OP_GELU, x); }
vkg_tensor vkg_relu(vkg_graph *g, vkg_tensor x) { return unary_node(g, VKG_OP_RELU, x); }
vkg_tensor vkg_gelu_erf(vkg_graph *g, vkg_tensor x) { return unary_node(g, VKG_OP_GELU_ERF, x); }
vkg_tensor vkg_quick_gelu(vkg_graph *g, vkg_tensor x) { return unary_node(g, VKG_OP_QUICK_GELU, x); }
vkg_tensor vkg_silu(vkg_graph *g, vkg_tensor x) { return unary_node(g, VKG_OP_SILU, x); }
vkg_tensor vkg_softmax(vkg_graph *g, vkg_tensor x) { return unary_node(g, VKG_OP_SOFTMAX, x); }
vkg_tensor vkg_copy(vkg_graph *g, vkg_tensor x) { return unary_node(g, VKG_OP_COPY, x); }

vkg_tensor vkg_scale(vkg_graph *g, vkg_tensor x, float s) {
    vkg_tensor t = unary_node(g, VKG_OP_SCALE, x);
    if (t != VKG_NONE) g->nodes[t].attr.scale.s = s;
    return t;
}

vkg_tensor vkg_matmul(vkg_graph *g, vkg_tensor a, vkg_tensor b, vkg_tensor bias, unsigned flags) {
    if (!vkg_graph_check(g, "matmul", "a", a) || !vkg_graph_check(g, "matmul", "b", b) ||
        (bias != VKG_NONE && !vkg_graph_check(g, "matmul", "bias", bias)))
        return VKG_NONE;
    if (!need_f32(g, "matmul", "a", a) || !need_weight(g, "matmul", "b", b) ||
        (bias != VKG_NONE && !need_f32(g, "matmul", "bias", bias)))
        return VKG_NONE;
    if (flags & ~(VKG_TRANSPOSE_A | VKG_TRANSPOSE_B)) {
        vkg_graph_fail(g, VKG_ERR_INVALID_ARGUMENT, "matmul: unknown flags 0x%x", flags);
        return VKG_NONE;
    }
    const vkg_node *na = &g->nodes[a], *nb = &g->nodes[b];
    if (na->ndim < 2 || nb->ndim < 2) {
        vkg_graph_fail(g, VKG_ERR_SHAPE, "matmul: a %s and b %s need at least 2 dimensions each",
                       shape_of(g, a).s, shape_of(g, b).s);
        return VKG_NONE;
    }
    int ta = (flags & VKG_TRANSPOSE_A) != 0, tb = (flags & VKG_TRANSPOSE_B) != 0;
    int64_t M = na->shape[na->ndim - 2 + ta], Ka = na->shape[na->ndim - 1 - ta];
    int64_t Kb = nb->shape[nb->ndim - 2 + tb], N = nb->shape[nb->ndim - 1 - tb];
    if (Ka != Kb) {
        vkg_graph_fail(g, VKG_ERR_SHAPE,
                       "matmul: a %s%s ('%s') and b %s%s ('%s') do not fit: a has K = %lld, b has K = %lld",
                       shape_of(g, a).s, ta ? " transposed" : "", vkg_tensor_name(g, a), shape_of(g, b).s,
                       tb ? " transposed" : "", vkg_tensor_name(g, b), (long long)Ka, (long long)Kb);
        return VKG_NONE;
    }
    /* Batch dimensions broadcast like numpy's matmul. */
    vkg_node ba = *na, bb = *nb;
    ba.ndim -= 2;
    bb.ndim -= 2;
    int nbatch = 0;
    int64_t shape[VKG_MAX_DIMS];
    if (!broadcast(&ba, &bb, &nbatch, shape)) {
        vkg_graph_fail(g, VKG_ERR_SHAPE, "matmul: the batch dimensions of a %s and b %s do not broadcast",
                       shape_of(g, a).s, shape_of(g, b).s);
        return VKG_NONE;
    }
    if (nbatch > 2) {
        vkg_graph_fail(g, VKG_ERR_SHAPE, "matmul: a %s and b %s give %d batch dimensions; at most 2 supported",
                       shape_of(g, a).s, shape_of(g, b).s, nbatch);
        return VKG_NONE;
    }
    if (bias != VKG_NONE) {
        const vkg_node *nz = &g->nodes[bias];
        if (nz->ndim != 1 || nz->shape[0] != N) {
            vkg_graph_fail(g, VKG_ERR_SHAPE, "matmul: bias %s ('%s') must be [%lld] for a %s and b %s",
                           shape_of(g, bias).s, vkg_tensor_name(g, bias), (long long)N, shape_of(g, a).s,
                           shape_of(g, b).s);
            return VKG_NONE;
        }
    }
    shape[nbatch] = M;
    shape[nbatch + 1] = N;
    vkg_node n;
    vkg_node_init(&n, VKG_OP_MATMUL, VKG_F32, nbatch + 2, shape);
    n.src[0] = a;
    n.src[1] = b;
    n.src[2] = bias;
    n.attr.matmul.flags = flags;
    return vkg_graph_add_node(g, &n);
}

static int index_ok(vkg_graph *g, const char *op, vkg_tensor dyn) {
    if (dyn == VKG_NONE) return 1;
    if (!vkg_graph_check(g, op, "dyn_offset", dyn)) return 0;
    if (g->nodes[dyn].op != VKG_OP_INDEX) {
        vkg_graph_fail(g, VKG_ERR_INVALID_ARGUMENT, "%s: dyn_offset ('%s') must be a vkg_index", op,
                       vkg_tensor_name(g, dyn));
        return 0;
    }
    return 1;
}

vkg_tensor vkg_mask_causal(vkg_graph *g, vkg_tensor x, int32_t offset, vkg_tensor dyn_offset) {
    return vkg_mask_causal_window(g, x, offset, dyn_offset, 0);
}

vkg_tensor vkg_mask_causal_window(vkg_graph *g, vkg_tensor x, int32_t offset, vkg_tensor dyn_offset,
                                  uint32_t window) {
    if (window > INT32_MAX) {
        vkg_graph_fail(g, VKG_ERR_INVALID_ARGUMENT, "mask_causal: window %u exceeds %d", window, INT32_MAX);
        return VKG_NONE;
    }
    if (!vkg_graph_check(g, "mask_causal", "x", x) || !index_ok(g, "mask_causal", dyn_offset)) return VKG_NONE;
    if (g->nodes[x].ndim < 2) {
        vkg_graph_fail(g, VKG_ERR_SHAPE, "mask_causal: scores %s need at least 2 dimensions [.., Tq, Tk]",
                       shape_of(g, x).s);
        return VKG_NONE;
    }
    vkg_tensor t = unary_node_with(g, VKG_OP_MASK_CAUSAL, x, dyn_offset, VKG_NONE);
    if (t == VKG_NONE) return t;
    g->nodes[t].attr.causal.offset = offset;
    g->nodes[t].attr.causal.window = window;
    return t;
}

int vkg_graph_indices(const vkg_graph *g, vkg_tensor first, int n) {
    int consecutive = first >= 0 && n >= 1 && first + n <= g->n_nodes;
    for (int i = 0; consecutive && i < n; i++) consecutive = g->nodes[first + i].op == VKG_OP_INDEX;
    return consecutive;
}

vkg_tensor vkg_mask_causal_rows(vkg_graph *g, vkg_tensor x, int32_t offset, vkg_tensor first, int rows,
                                uint32_t window, int one_position) {
    if (!vkg_graph_check(g, "mask_causal", "x", x) || !index_ok(g, "mask_causal", first)) return VKG_NONE;
    if (!vkg_graph_indices(g, first, rows) || g->nodes[x].ndim < 3 || g->nodes[x].shape[0] != rows) {
        vkg_graph_fail(g, VKG_ERR_INVALID_ARGUMENT, "mask_causal: %d runtime positions from '%s' for scores %s: one "
                       "index for each entry of axis 0, made one after another", rows,
                       first != VKG_NONE ? vkg_tensor_name(g, first) : "(none)", shape_of(g, x).s);
        return VKG_NONE;
    }
    vkg_tensor t = vkg_mask_causal_window(g, x, offset, first, window);
    if (t != VKG_NONE) g->nodes[t].attr.causal.rows = rows, g->nodes[t].attr.causal.one_position = one_position != 0;
    return t;
}

vkg_tensor vkg_mask(vkg_graph *g, vkg_tensor x, vkg_tensor mask, vkg_mask_kind kind) {
    if (!vkg_graph_check(g, "mask", "x", x) || !vkg_graph_check(g, "mask", "mask", mask)) return VKG_NONE;
    if (kind != VKG_MASK_BOOL && kind != VKG_MASK_ADDITIVE) {
        vkg_graph_fail(g, VKG_ERR_INVALID_ARGUMENT, "mask: unknown mask kind %d", (int)kind);
        return VKG_NONE;
    }
    /* The mask broadcasts to the scores; it must not widen them. */
    int ndim;
    int64_t shape[VKG_MAX_DIMS];
    const vkg_node *nx = &g->nodes[x];
    if (broadcast(nx, &g->nodes[mask], &ndim, shape) &&
        (ndim != nx->ndim || memcmp(shape, nx->shape, sizeof(int64_t) * (size_t)ndim) != 0)) {
        vkg_graph_fail(g, VKG_ERR_SHAPE, "mask: mask %s ('%s') must broadcast to the scores %s, not widen them",
                       shape_of(g, mask).s, vkg_tensor_name(g, mask), shape_of(g, x).s);
        return VKG_NONE;
    }
    vkg_tensor t = binary_node(g, VKG_OP_MASK, x, mask);
    if (t != VKG_NONE) g->nodes[t].attr.mask.kind = kind;
    return t;
}

/* layernorm and rms_norm: x normalised over its last axis, then the affine vectors [C] given. */
static vkg_tensor norm_node(vkg_graph *g, vkg_op op, vkg_tensor x, vkg_tensor gamma, vkg_tensor beta, float eps) {
    const char *name = vkg_op_name(op);
    if (!vkg_graph_check(g, name, "x", x)) return VKG_NONE;
    int64_t C = g->nodes[x].shape[g->nodes[x].ndim - 1];
    const vkg_tensor params[2] = {gamma, beta};
    const char *names[2] = {op == VKG_OP_RMS_NORM ? "weight" : "gamma", "beta"};
    for (int i = 0; i < 2; i++) {
        if (params[i] == VKG_NONE) continue;
        if (!f32_operand(g, name, names[i], params[i])) return VKG_NONE;
        const vkg_node *p = &g->nodes[params[i]];
        if (p->ndim != 1 || p->shape[0] != C) {
            vkg_graph_fail(g, VKG_ERR_SHAPE, "%s: %s %s ('%s') must be [%lld] for x %s", name, names[i],
                           shape_of(g, params[i]).s, vkg_tensor_name(g, params[i]), (long long)C,
                           shape_of(g, x).s);
            return VKG_NONE;
        }
    }
    if (!(eps >= 0.0f)) { /* +inf is allowed: both kernels give the limit, zeros (plus beta) */
        vkg_graph_fail(g, VKG_ERR_INVALID_ARGUMENT, "%s: eps must be >= 0", name);
        return VKG_NONE;
    }
    vkg_tensor t = unary_node_with(g, op, x, gamma, beta);
    if (t != VKG_NONE) g->nodes[t].attr.layernorm.eps = eps;
    return t;
}

vkg_tensor vkg_layernorm(vkg_graph *g, vkg_tensor x, vkg_tensor gamma, vkg_tensor beta, float eps) {
    return norm_node(g, VKG_OP_LAYERNORM, x, gamma, beta, eps);
}

vkg_tensor vkg_rms_norm(vkg_graph *g, vkg_tensor x, vkg_tensor weight, float eps) {
    return norm_node(g, VKG_OP_RMS_NORM, x, weight, VKG_NONE, eps);
}

vkg_tensor vkg_rope(vkg_graph *g, vkg_tensor x, vkg_tensor cos_sin, int32_t offset, vkg_tensor dyn_offset) {
    if (!vkg_graph_check(g, "rope", "x", x) || !f32_operand(g, "rope", "cos_sin", cos_sin) ||
        !index_ok(g, "rope", dyn_offset))
        return VKG_NONE;
    const vkg_node *nx = &g->nodes[x], *nt = &g->nodes[cos_sin];
    const int64_t D = nx->shape[nx->ndim - 1];
    if (nx->ndim < 2 || nx->ndim > 4 || D % 2 != 0) {
        vkg_graph_fail(g, VKG_ERR_SHAPE, "rope: x %s ('%s') must be [.., T, D] with 2 to 4 dimensions and D even",
                       shape_of(g, x).s, vkg_tensor_name(g, x));
        return VKG_NONE;
    }
    if (nt->ndim != 2 || nt->shape[1] != D || nt->shape[0] < 1) {
        vkg_graph_fail(g, VKG_ERR_SHAPE, "rope: cos_sin %s ('%s') must be [P, %lld] (cos then sin of each position) "
                       "for x %s", shape_of(g, cos_sin).s, vkg_tensor_name(g, cos_sin), (long long)D, shape_of(g, x).s);
        return VKG_NONE;
    }
    vkg_tensor t = unary_node_with(g, VKG_OP_ROPE, x, cos_sin, dyn_offset);
    if (t != VKG_NONE) g->nodes[t].attr.rope.offset = offset;
    return t;
}

vkg_tensor vkg_rope_heads(vkg_graph *g, vkg_tensor x, vkg_tensor cos_sin, int32_t offset, vkg_tensor dyn_offset,
                          vkg_tensor positions, int64_t rotated) {
    if (!vkg_graph_check(g, "rope", "x", x)) return VKG_NONE;
    const vkg_node *nx = &g->nodes[x];
    if (nx->ndim < 3 || rotated < 1 || rotated > nx->shape[nx->ndim - 3]) {
        vkg_graph_fail(g, VKG_ERR_SHAPE, "rope: %lld rotated heads of x %s ('%s'); x must be [.., n, T, D] and "
                       "1 to n of its heads rotated", (long long)rotated, shape_of(g, x).s, vkg_tensor_name(g, x));
        return VKG_NONE;
    }
    if (positions != VKG_NONE) {
        if (!vkg_graph_check(g, "rope", "positions", positions)) return VKG_NONE;
        const vkg_node *np = &g->nodes[positions];
        if (np->dtype != VKG_I32 || np->op == VKG_OP_INDEX || np->ndim != 1 || np->shape[0] != nx->shape[nx->ndim - 2] ||
            dyn_offset != VKG_NONE) {
            vkg_graph_fail(g, VKG_ERR_INVALID_ARGUMENT, "rope: positions %s ('%s') must be an i32 tensor [%lld], one "
                           "for each row of x %s, in place of a dyn_offset", shape_of(g, positions).s,
                           vkg_tensor_name(g, positions), (long long)nx->shape[nx->ndim - 2], shape_of(g, x).s);
            return VKG_NONE;
        }
    }
    vkg_tensor t = vkg_rope(g, x, cos_sin, offset, dyn_offset);
    if (t == VKG_NONE) return t;
    g->nodes[t].attr.rope.rotated = rotated;
    if (positions != VKG_NONE) {
        g->nodes[t].src[2] = positions;
        g->nodes[t].attr.rope.row_positions = 1;
    }
    return t;
}

vkg_tensor vkg_embedding(vkg_graph *g, vkg_tensor table, vkg_tensor ids) {
    if (!vkg_graph_check(g, "embedding", "table", table) || !vkg_graph_check(g, "embedding", "ids", ids) ||
        !need_weight(g, "embedding", "table", table))
        return VKG_NONE;
    const vkg_node *nt = &g->nodes[table], *ni = &g->nodes[ids];
    if (nt->ndim != 2) {
        vkg_graph_fail(g, VKG_ERR_SHAPE, "embedding: table %s ('%s') must be [V, C]", shape_of(g, table).s,
                       vkg_tensor_name(g, table));
        return VKG_NONE;
    }
    if (ni->dtype != VKG_I32 || ni->op == VKG_OP_INDEX) {
        vkg_graph_fail(g, VKG_ERR_INVALID_ARGUMENT, "embedding: ids ('%s') must be an i32 tensor",
                       vkg_tensor_name(g, ids));
        return VKG_NONE;
    }
    if (ni->ndim + 1 > VKG_MAX_DIMS) {
        vkg_graph_fail(g, VKG_ERR_SHAPE, "embedding: ids %s have too many dimensions (at most %d)",
                       shape_of(g, ids).s, VKG_MAX_DIMS - 1);
        return VKG_NONE;
    }
    int64_t shape[VKG_MAX_DIMS];
    for (int i = 0; i < ni->ndim; i++) shape[i] = ni->shape[i];
    shape[ni->ndim] = nt->shape[1];
    vkg_node n;
    vkg_node_init(&n, VKG_OP_EMBEDDING, VKG_F32, ni->ndim + 1, shape);
    n.src[0] = table;
    n.src[1] = ids;
    return vkg_graph_add_node(g, &n);
}
