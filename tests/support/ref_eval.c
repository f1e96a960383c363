/* The reference interpreter: one function per op, each a direct loop over the output's elements
 * in row-major order, sums in double.  Deliberately naive: it shares nothing with the compiler
 * (no strides, no views, no 4-d padding), so agreeing with it means something. */
#include "support/ref_eval.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ref_inputs_init(ref_inputs *in, const vkg_graph *g) {
    in->n_nodes = g->n_nodes;
    size_t n = (size_t)(g->n_nodes ? g->n_nodes : 1);
    in->data = calloc(n, sizeof *in->data);
    in->index = calloc(n, sizeof *in->index);
    if (!in->data || !in->index) {
        ref_inputs_free(in);
        return -1;
    }
    return 0;
}

void ref_inputs_free(ref_inputs *in) {
    free(in->data);
    free(in->index);
    in->data = NULL;
    in->index = NULL;
}

void ref_inputs_set(ref_inputs *in, vkg_tensor t, const void *data) {
    if (t >= 0 && t < in->n_nodes) in->data[t] = data;
}

void ref_inputs_set_index(ref_inputs *in, vkg_tensor t, int32_t value) {
    if (t >= 0 && t < in->n_nodes) in->index[t] = value;
}

/* ---- indexing helpers ---------------------------------------------------------------------- */

static int64_t numel(const vkg_node *n) { return vkg_shape_numel(n->ndim, n->shape); }

/* Row-major multi-index of a flat position. */
static void unravel(int64_t flat, int ndim, const int64_t *shape, int64_t *idx) {
    for (int i = ndim - 1; i >= 0; i--) {
        idx[i] = flat % shape[i];
        flat /= shape[i];
    }
}

static int64_t ravel(int ndim, const int64_t *shape, const int64_t *idx) {
    int64_t flat = 0;
    for (int i = 0; i < ndim; i++) flat = flat * shape[i] + idx[i];
    return flat;
}

/* Flat position in operand x of the element that numpy broadcasting maps to the output index
 * idx (out_ndim dimensions, x's dimensions aligned to the right, size-1 dimensions repeat). */
static int64_t broadcast_at(const vkg_node *x, int out_ndim, const int64_t *idx) {
    int64_t flat = 0;
    for (int i = 0; i < x->ndim; i++) {
        int64_t k = idx[out_ndim - x->ndim + i];
        flat = flat * x->shape[i] + (x->shape[i] == 1 ? 0 : k);
    }
    return flat;
}

/* ---- ops ----------------------------------------------------------------------------------- */

typedef struct ref_ctx {
    const vkg_graph *g;
    const ref_inputs *in;
    float **v;
} ref_ctx;

static const vkg_node *node(const ref_ctx *c, vkg_tensor t) { return &c->g->nodes[t]; }

static void ref_matmul(const ref_ctx *c, vkg_tensor t, float *out) {
    const vkg_node *n = node(c, t), *a = node(c, n->src[0]), *b = node(c, n->src[1]);
    const float *av = c->v[n->src[0]], *bv = c->v[n->src[1]];
    const float *bias = n->src[2] != VKG_NONE ? c->v[n->src[2]] : NULL;
    int ta = (n->attr.matmul.flags & VKG_TRANSPOSE_A) != 0, tb = (n->attr.matmul.flags & VKG_TRANSPOSE_B) != 0;
    int nb = n->ndim - 2;
    int64_t M = n->shape[nb], N = n->shape[nb + 1];
    int64_t K = a->shape[a->ndim - 1 - ta];
    int64_t a_rows = a->shape[a->ndim - 2], a_cols = a->shape[a->ndim - 1];
    int64_t b_rows = b->shape[b->ndim - 2], b_cols = b->shape[b->ndim - 1];
    int64_t batches = vkg_shape_numel(nb, n->shape);
    for (int64_t bi = 0; bi < batches; bi++) {
        int64_t idx[VKG_MAX_DIMS] = {0};
        unravel(bi, nb, n->shape, idx);
        /* Each operand's batch entry: its batch dimensions aligned right, size 1 repeats. */
        int64_t abatch = 0, bbatch = 0;
        for (int i = 0; i < a->ndim - 2; i++)
            abatch = abatch * a->shape[i] + (a->shape[i] == 1 ? 0 : idx[nb - (a->ndim - 2) + i]);
        for (int i = 0; i < b->ndim - 2; i++)
            bbatch = bbatch * b->shape[i] + (b->shape[i] == 1 ? 0 : idx[nb - (b->ndim - 2) + i]);
        const float *A = av + abatch * a_rows * a_cols, *B = bv + bbatch * b_rows * b_cols;
        float *C = out + bi * M * N;
        for (int64_t m = 0; m < M; m++)
            for (int64_t j = 0; j < N; j++) {
                double acc = 0.0;
                for (int64_t k = 0; k < K; k++) {
                    double x = ta ? A[k * a_cols + m] : A[m * a_cols + k];
                    double y = tb ? B[j * b_cols + k] : B[k * b_cols + j];
                    acc += x * y;
                }
                if (bias) acc += bias[j];
                C[m * N + j] = (float)acc;
            }
    }
}

static void ref_binary(const ref_ctx *c, vkg_tensor t, float *out) {
    const vkg_node *n = node(c, t), *a = node(c, n->src[0]), *b = node(c, n->src[1]);
    const float *av = c->v[n->src[0]], *bv = c->v[n->src[1]];
    for (int64_t i = 0; i < numel(n); i++) {
        int64_t idx[VKG_MAX_DIMS];
        unravel(i, n->ndim, n->shape, idx);
        float x = av[broadcast_at(a, n->ndim, idx)], y = bv[broadcast_at(b, n->ndim, idx)];
        switch (n->op) {
        case VKG_OP_ADD: out[i] = x + y; break;
        case VKG_OP_MUL: out[i] = x * y; break;
        case VKG_OP_SWIGLU: out[i] = (float)((double)x / (1.0 + exp(-(double)x)) * (double)y); break;
        default: /* mask */
            out[i] = n->attr.mask.kind == VKG_MASK_ADDITIVE ? x + y : (y != 0.0f ? x : -INFINITY);
            break;
        }
    }
}

static double gelu(double x) {
    const double pi = 3.14159265358979323846;
    return 0.5 * x * (1.0 + tanh(sqrt(2.0 / pi) * (x + 0.044715 * x * x * x)));
}

static double sigmoid(double z) { return 1.0 / (1.0 + exp(-z)); }

static void ref_unary(const ref_ctx *c, vkg_tensor t, float *out) {
    const vkg_node *n = node(c, t);
    const float *x = c->v[n->src[0]];
    for (int64_t i = 0; i < numel(n); i++) {
        switch (n->op) {
        case VKG_OP_SCALE: out[i] = x[i] * n->attr.scale.s; break;
        case VKG_OP_GELU: out[i] = (float)gelu(x[i]); break;
        case VKG_OP_GELU_ERF: out[i] = (float)(0.5 * x[i] * erfc(-x[i] / sqrt(2.0))); break;
        case VKG_OP_QUICK_GELU: out[i] = (float)(x[i] * sigmoid(1.702 * x[i])); break;
        case VKG_OP_SILU: out[i] = (float)(x[i] * sigmoid(x[i])); break;
        case VKG_OP_RELU: out[i] = x[i] > 0.0f ? x[i] : 0.0f; break;
        default: out[i] = x[i]; break; /* copy */
        }
    }
}

static void ref_causal(const ref_ctx *c, vkg_tensor t, float *out) {
    const vkg_node *n = node(c, t);
    const float *x = c->v[n->src[0]];
    int64_t offset = n->attr.causal.offset;
    if (n->src[1] != VKG_NONE) offset += c->in->index[n->src[1]];
    for (int64_t i = 0; i < numel(n); i++) {
        int64_t idx[VKG_MAX_DIMS];
        unravel(i, n->ndim, n->shape, idx);
        int64_t row = idx[n->ndim - 2], col = idx[n->ndim - 1];
        const int64_t w = n->attr.causal.window;
        out[i] = col > row + offset || (w && col <= row + offset - w) ? -INFINITY : x[i];
    }
}

static void ref_softmax(const ref_ctx *c, vkg_tensor t, float *out) {
    const vkg_node *n = node(c, t);
    const float *x = c->v[n->src[0]];
    int64_t cols = n->shape[n->ndim - 1], rows = numel(n) / cols;
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        float *o = out + r * cols;
        double max = -INFINITY, sum = 0.0;
        int nan = 0;
        for (int64_t j = 0; j < cols; j++) {
            max = xr[j] > max ? xr[j] : max;
            nan |= isnan(xr[j]);
        }
        if (nan) { /* a NaN score leaves no weight defined: the row is NaN (not "all masked") */
            for (int64_t j = 0; j < cols; j++) o[j] = NAN;
            continue;
        }
        if (max == -INFINITY) { /* every entry masked: no weight anywhere */
            for (int64_t j = 0; j < cols; j++) o[j] = 0.0f;
            continue;
        }
        for (int64_t j = 0; j < cols; j++) sum += exp((double)xr[j] - max);
        for (int64_t j = 0; j < cols; j++) o[j] = (float)(exp((double)xr[j] - max) / sum);
    }
}

static void ref_layernorm(const ref_ctx *c, vkg_tensor t, float *out) {
    const vkg_node *n = node(c, t);
    const float *x = c->v[n->src[0]];
    const float *gamma = n->src[1] != VKG_NONE ? c->v[n->src[1]] : NULL;
    const float *beta = n->src[2] != VKG_NONE ? c->v[n->src[2]] : NULL;
    int64_t cols = n->shape[n->ndim - 1], rows = numel(n) / cols;
    const int rms = n->op == VKG_OP_RMS_NORM; /* x / sqrt(mean(x^2) + eps) * gamma: no mean */
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        double mean = 0.0, var = 0.0;
        for (int64_t j = 0; j < cols && !rms; j++) mean += xr[j];
        mean /= (double)cols;
        for (int64_t j = 0; j < cols; j++) var += ((double)xr[j] - mean) * ((double)xr[j] - mean);
        var /= (double)cols; /* biased, as PyTorch's LayerNorm */
        double inv = 1.0 / sqrt(var + (double)n->attr.layernorm.eps);
        for (int64_t j = 0; j < cols; j++) {
            double y = ((double)xr[j] - mean) * inv;
            if (gamma) y *= gamma[j];
            if (beta) y += beta[j];
            out[r * cols + j] = (float)y;
        }
    }
}

/* HF's rotate_half: y[i] = x[i] c - x[i + D/2] s, y[i + D/2] = x[i + D/2] c + x[i] s, with c and
 * s from row offset (+ index) + t of the table, or offset + positions[t]; the heads of axis -3
 * from `rotated` on copied. */
static void ref_rope(const ref_ctx *c, vkg_tensor t, float *out) {
    const vkg_node *n = node(c, t);
    const float *x = c->v[n->src[0]], *table = c->v[n->src[1]];
    const int64_t D = n->shape[n->ndim - 1], T = n->shape[n->ndim - 2], half = D / 2;
    const int64_t P = node(c, n->src[1])->shape[0], heads = n->ndim >= 3 ? n->shape[n->ndim - 3] : 1;
    const float *positions = n->attr.rope.row_positions ? c->v[n->src[2]] : NULL;
    int64_t base = n->attr.rope.offset;
    if (n->src[2] != VKG_NONE && !positions) base += c->in->index[n->src[2]];
    for (int64_t r = 0; r < numel(n) / D; r++) {
        const float *xr = x + r * D;
        if (n->attr.rope.rotated && r / T % heads >= n->attr.rope.rotated) {
            for (int64_t i = 0; i < D; i++) out[r * D + i] = xr[i];
            continue;
        }
        const int64_t pos = positions ? n->attr.rope.offset + (int64_t)positions[r % T] : base + r % T;
        const float *cs = table + pos * D;
        for (int64_t i = 0; i < half; i++) {
            if (pos < 0 || pos >= P) {
                out[r * D + i] = out[r * D + half + i] = NAN;
                continue;
            }
            out[r * D + i] = (float)((double)xr[i] * cs[i] - (double)xr[half + i] * cs[half + i]);
            out[r * D + half + i] = (float)((double)xr[half + i] * cs[i] + (double)xr[i] * cs[half + i]);
        }
    }
}

static void ref_embedding(const ref_ctx *c, vkg_tensor t, float *out) {
    const vkg_node *table = node(c, node(c, t)->src[0]), *ids = node(c, node(c, t)->src[1]);
    const float *tv = c->v[node(c, t)->src[0]], *iv = c->v[node(c, t)->src[1]];
    int64_t V = table->shape[0], C = table->shape[1];
    for (int64_t i = 0; i < numel(ids); i++) {
        int64_t id = (int64_t)iv[i];
        for (int64_t j = 0; j < C; j++) out[i * C + j] = (id >= 0 && id < V) ? tv[id * C + j] : 0.0f;
    }
}

static void ref_permute(const ref_ctx *c, vkg_tensor t, float *out) {
    const vkg_node *n = node(c, t), *x = node(c, n->src[0]);
    const float *xv = c->v[n->src[0]];
    for (int64_t i = 0; i < numel(n); i++) {
        int64_t idx[VKG_MAX_DIMS], src[VKG_MAX_DIMS];
        unravel(i, n->ndim, n->shape, idx);
        for (int k = 0; k < n->ndim; k++) src[n->attr.permute.axes[k]] = idx[k];
        out[i] = xv[ravel(x->ndim, x->shape, src)];
    }
}

static void ref_slice(const ref_ctx *c, vkg_tensor t, float *out) {
    const vkg_node *n = node(c, t), *x = node(c, n->src[0]);
    const float *xv = c->v[n->src[0]];
    for (int64_t i = 0; i < numel(n); i++) {
        int64_t idx[VKG_MAX_DIMS];
        unravel(i, n->ndim, n->shape, idx);
        idx[n->attr.slice.axis] += n->attr.slice.start;
        out[i] = xv[ravel(x->ndim, x->shape, idx)];
    }
}

static void ref_concat(const ref_ctx *c, vkg_tensor t, float *out) {
    const vkg_node *n = node(c, t), *a = node(c, n->src[0]), *b = node(c, n->src[1]);
    int axis = n->attr.concat.axis;
    for (int64_t i = 0; i < numel(n); i++) {
        int64_t idx[VKG_MAX_DIMS];
        unravel(i, n->ndim, n->shape, idx);
        if (idx[axis] < a->shape[axis]) {
            out[i] = c->v[n->src[0]][ravel(a->ndim, a->shape, idx)];
        } else {
            idx[axis] -= a->shape[axis];
            out[i] = c->v[n->src[1]][ravel(b->ndim, b->shape, idx)];
        }
    }
}

/* vkg_write_rows: x [R, G, A, D], row r into planes r G.. of the state at position index + r. */
static int ref_write_rows(const ref_ctx *c, vkg_tensor t, float *out) {
    const vkg_node *n = node(c, t), *x = node(c, n->src[1]);
    memcpy(out, c->v[n->src[0]], (size_t)numel(n) * sizeof *out);
    for (int64_t i = 0; i < numel(x); i++) {
        int64_t xi[VKG_MAX_DIMS];
        unravel(i, x->ndim, x->shape, xi);
        const int64_t pos = c->in->index[n->src[2] + xi[0]];
        if (pos < 0 || pos >= n->shape[2]) {
            fprintf(stderr, "ref_eval: write_rows node %d writes row %lld at %lld of %lld\n", (int)t, (long long)xi[0],
                    (long long)pos, (long long)n->shape[2]);
            return -1;
        }
        const int64_t idx[4] = {xi[0] * x->shape[1] + xi[1], xi[2], pos, xi[3]};
        out[ravel(n->ndim, n->shape, idx)] = c->v[n->src[1]][i];
    }
    return 0;
}

static int ref_write_at(const ref_ctx *c, vkg_tensor t, float *out) {
    const vkg_node *n = node(c, t), *x = node(c, n->src[1]);
    if (n->attr.write_at.rows) return ref_write_rows(c, t, out);
    int axis = n->attr.write_at.axis, lead = n->attr.write_at.lead_axis;
    int64_t pos = n->attr.write_at.offset;
    if (n->src[2] != VKG_NONE) pos += c->in->index[n->src[2]];
    if (pos < 0 || pos + x->shape[axis] > n->shape[axis]) {
        fprintf(stderr, "ref_eval: write_at node %d writes [%lld, %lld) along axis %d of a state of %lld\n",
                (int)t, (long long)pos, (long long)(pos + x->shape[axis]), axis, (long long)n->shape[axis]);
        return -1;
    }
    memcpy(out, c->v[n->src[0]], (size_t)numel(n) * sizeof *out);
    for (int64_t i = 0; i < numel(x); i++) {
        int64_t idx[VKG_MAX_DIMS];
        unravel(i, x->ndim, x->shape, idx);
        idx[axis] += pos;
        if (lead != axis) idx[lead] += n->attr.write_at.lead_offset;
        out[ravel(n->ndim, n->shape, idx)] = c->v[n->src[1]][i];
    }
    return 0;
}

/* Leaves: inputs and constants are converted to floats; states start at their given value. */
static int ref_leaf(const ref_ctx *c, vkg_tensor t, float *out) {
    const vkg_node *n = node(c, t);
    const void *data = n->op == VKG_OP_CONSTANT ? n->data : c->in->data[t];
    if (n->op == VKG_OP_INDEX) {
        out[0] = (float)c->in->index[t];
        return 0;
    }
    if (!data) {
        if (n->op == VKG_OP_STATE) return 0; /* already zero */
        fprintf(stderr, "ref_eval: input '%s' has no data\n", n->name ? n->name : "?");
        return -1;
    }
    for (int64_t i = 0; i < numel(n); i++)
        out[i] = n->dtype == VKG_I32 ? (float)((const int32_t *)data)[i] : ((const float *)data)[i];
    return 0;
}

static int eval_node(const ref_ctx *c, vkg_tensor t, float *out) {
    switch (node(c, t)->op) {
    case VKG_OP_INPUT: case VKG_OP_CONSTANT: case VKG_OP_STATE: case VKG_OP_INDEX: return ref_leaf(c, t, out);
    case VKG_OP_MATMUL: ref_matmul(c, t, out); return 0;
    case VKG_OP_ADD: case VKG_OP_MUL: case VKG_OP_SWIGLU: case VKG_OP_MASK: ref_binary(c, t, out); return 0;
    case VKG_OP_SCALE: case VKG_OP_GELU: case VKG_OP_GELU_ERF: case VKG_OP_QUICK_GELU: case VKG_OP_SILU:
    case VKG_OP_RELU: case VKG_OP_COPY:
        ref_unary(c, t, out);
        return 0;
    case VKG_OP_RESHAPE: /* the same elements in the same order */
        memcpy(out, c->v[node(c, t)->src[0]], (size_t)numel(node(c, t)) * sizeof *out);
        return 0;
    case VKG_OP_SOFTMAX: ref_softmax(c, t, out); return 0;
    case VKG_OP_MASK_CAUSAL: ref_causal(c, t, out); return 0;
    case VKG_OP_LAYERNORM: case VKG_OP_RMS_NORM: ref_layernorm(c, t, out); return 0;
    case VKG_OP_EMBEDDING: ref_embedding(c, t, out); return 0;
    case VKG_OP_ROPE: ref_rope(c, t, out); return 0;
    case VKG_OP_PERMUTE: ref_permute(c, t, out); return 0;
    case VKG_OP_SLICE: ref_slice(c, t, out); return 0;
    case VKG_OP_CONCAT: ref_concat(c, t, out); return 0;
    case VKG_OP_WRITE_AT: return ref_write_at(c, t, out);
    default: break;
    }
    fprintf(stderr, "ref_eval: op %s of node %d is not known\n", vkg_op_name(node(c, t)->op), (int)t);
    return -1;
}

int ref_eval(const vkg_graph *g, const ref_inputs *in, float ***values) {
    *values = NULL;
    if (g->status != VKG_OK) {
        fprintf(stderr, "ref_eval: the graph has an error: %s\n", g->error);
        return -1;
    }
    float **v = calloc((size_t)(g->n_nodes ? g->n_nodes : 1), sizeof *v);
    if (!v) return -1;
    ref_ctx c = {.g = g, .in = in, .v = v};
    for (int t = 0; t < g->n_nodes; t++) {
        v[t] = calloc((size_t)numel(&g->nodes[t]), sizeof *v[t]);
        if (!v[t] || eval_node(&c, t, v[t]) != 0) {
            ref_free(g, v);
            return -1;
        }
    }
    *values = v;
    return 0;
}

void ref_free(const vkg_graph *g, float **values) {
    if (!values) return;
    for (int t = 0; t < g->n_nodes; t++) free(values[t]);
    free(values);
}

const float *ref_final_state(const vkg_graph *g, float **values, vkg_tensor state) {
    vkg_tensor last = state;
    for (int t = state + 1; t < g->n_nodes; t++)
        if (g->nodes[t].op == VKG_OP_WRITE_AT && g->nodes[t].src[0] == last) last = t;
    return values[last];
}

int64_t ref_compare(const float *got, const float *want, int64_t n, double rtol, double atol) {
    for (int64_t i = 0; i < n; i++) {
        if (got[i] == want[i]) continue; /* also equal infinities */
        if (isinf(want[i])) return i;    /* within rtol of an infinity would admit any finite value */
        double d = fabs((double)got[i] - (double)want[i]);
        if (!(d <= atol + rtol * fabs((double)want[i]))) return i;
    }
    return -1;
}
