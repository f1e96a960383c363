/* Graph construction: nodes, leaves, outputs and the sticky error state.  The ops themselves,
 * with their shape checks, are in ops.c. */
#include "graph/graph_build.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static const char *const op_names[] = {
#define VKG_OP(NAME, name) [VKG_OP_##NAME] = #name,
#include "graph/ops.def"
#define VKG_ACTIVATION(NAME, name, code, epilogue) [VKG_OP_##NAME] = #name,
#include "params/unary_ops.def"
};
_Static_assert(sizeof op_names / sizeof op_names[0] == VKG_OP_COUNT, "one name per op");

const char *vkg_op_name(vkg_op op) { return (op >= 0 && op < VKG_OP_COUNT) ? op_names[op] : "?"; }

/* The one table of element types: bytes per element and the name dumps and messages use. */
static const struct { const char *name; size_t size; } dtype_info[] = {
    [VKG_F32] = {"f32", 4}, [VKG_I32] = {"i32", 4}, [VKG_F16] = {"f16", 2}, [VKG_BF16] = {"bf16", 2}};
#define DTYPE_COUNT ((int)(sizeof dtype_info / sizeof dtype_info[0]))

size_t vkg_dtype_size(vkg_dtype d) { return (int)d >= 0 && (int)d < DTYPE_COUNT ? dtype_info[d].size : 0; }
const char *vkg_dtype_name(vkg_dtype d) { return (int)d >= 0 && (int)d < DTYPE_COUNT ? dtype_info[d].name : "?"; }

int64_t vkg_shape_numel(int ndim, const int64_t *shape) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0 || __builtin_mul_overflow(n, shape[i], &n) || n > VKG_MAX_NUMEL) return -1;
    return n;
}

/* Every node's shape passes here, so the count, the byte size and the contiguous strides of any
 * tensor of a healthy graph fit in 63 bits, and nothing downstream needs to check again. */
static int shape_fits(vkg_graph *g, const char *what, const char *name, int ndim, const int64_t *shape) {
    char buf[160];
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0) {
            vkg_graph_fail(g, VKG_ERR_SHAPE, "%s%s%s%s: shape %s: dimension %d is negative", what, name ? " '" : "",
                           name ? name : "", name ? "'" : "", vkg_shape_str(ndim, shape, buf, sizeof buf), i);
            return 0;
        }
    if (vkg_shape_numel(ndim, shape) < 0) {
        vkg_graph_fail(g, VKG_ERR_SHAPE,
                       "%s%s%s%s: shape %s holds more elements than fit in 63 bits as bytes (at most %lld)", what,
                       name ? " '" : "", name ? name : "", name ? "'" : "", vkg_shape_str(ndim, shape, buf, sizeof buf),
                       (long long)VKG_MAX_NUMEL);
        return 0;
    }
    return 1;
}

vkg_graph *vkg_graph_new(void) { return calloc(1, sizeof(vkg_graph)); }

void vkg_graph_free(vkg_graph *g) {
    if (!g) return;
    for (int i = 0; i < g->n_nodes; i++) {
        free(g->nodes[i].name);
        free(g->nodes[i].label);
        free(g->nodes[i].output_name);
    }
    free(g->nodes);
    free(g->bound);
    free(g);
}

vkg_status vkg_graph_status(const vkg_graph *g) { return g->status; }
const char *vkg_graph_error(const vkg_graph *g) { return g->error; }

void vkg_graph_fail(vkg_graph *g, vkg_status status, const char *fmt, ...) {
    if (g->status != VKG_OK) return; /* keep the first error: later ones are its consequences */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g->error, sizeof g->error, fmt, ap);
    va_end(ap);
    g->status = status;
}

int vkg_graph_check(vkg_graph *g, const char *op, const char *operand, vkg_tensor t) {
    if (g->status != VKG_OK) return 0;
    if (t < 0 || t >= g->n_nodes) {
        vkg_graph_fail(g, VKG_ERR_INVALID_ARGUMENT, "%s: operand %s is not a tensor of this graph (%d)",
                       op, operand, (int)t);
        return 0;
    }
    return 1;
}

vkg_tensor vkg_graph_add_node(vkg_graph *g, const vkg_node *proto) {
    if (g->status != VKG_OK) return VKG_NONE;
    if (!shape_fits(g, vkg_op_name(proto->op), proto->name, proto->ndim, proto->shape)) return VKG_NONE;
    if (g->n_nodes == g->cap_nodes) {
        int cap = g->cap_nodes ? 2 * g->cap_nodes : 64;
        vkg_node *nodes = realloc(g->nodes, (size_t)cap * sizeof *nodes);
        if (!nodes) {
            vkg_graph_fail(g, VKG_ERR_OUT_OF_MEMORY, "out of memory adding a %s node", vkg_op_name(proto->op));
            return VKG_NONE;
        }
        g->nodes = nodes;
        g->cap_nodes = cap;
    }
    g->nodes[g->n_nodes] = *proto;
    return g->n_nodes++;
}

void vkg_node_init(vkg_node *n, vkg_op op, vkg_dtype dtype, int ndim, const int64_t *shape) {
    memset(n, 0, sizeof *n);
    n->op = op;
    n->dtype = dtype;
    n->ndim = ndim;
    for (int i = 0; i < ndim; i++) n->shape[i] = shape[i];
    for (int i = 0; i < VKG_MAX_SRC; i++) n->src[i] = VKG_NONE;
}

static uint32_t name_hash(const char *s) {
    uint32_t h = 2166136261u;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

static int binds(const vkg_node *n, const char *name) {
    return (n->name && strcmp(n->name, name) == 0) || (n->output_name && strcmp(n->output_name, name) == 0);
}

/* The leaf or output bound to name: these names are unique, and sessions key on them. */
static vkg_tensor find_bound(const vkg_graph *g, const char *name) {
    if (!g->bound_cap) return VKG_NONE;
    for (uint32_t i = name_hash(name) & (g->bound_cap - 1);; i = (i + 1) & (g->bound_cap - 1)) {
        const int32_t t = g->bound[i] - 1;
        if (t < 0) return VKG_NONE;
        if (binds(&g->nodes[t], name)) return t;
    }
}

static void insert_bound(int32_t *table, uint32_t cap, const char *name, vkg_tensor t) {
    uint32_t i = name_hash(name) & (cap - 1);
    while (table[i]) i = (i + 1) & (cap - 1);
    table[i] = t + 1;
}

/* Records that node t is now bound to name (already stored in the node, checked unique); 0
 * when out of memory.  The table grows at half full, rebuilt from the nodes' names. */
static int bind_name(vkg_graph *g, vkg_tensor t, const char *name) {
    if (2 * (g->n_bound + 1) <= g->bound_cap) {
        insert_bound(g->bound, g->bound_cap, name, t);
        g->n_bound++;
        return 1;
    }
    const uint32_t cap = g->bound_cap ? 2 * g->bound_cap : 256;
    int32_t *table = calloc(cap, sizeof *table);
    if (!table) return 0;
    for (int i = 0; i < g->n_nodes; i++) {
        if (g->nodes[i].name) insert_bound(table, cap, g->nodes[i].name, i);
        if (g->nodes[i].output_name) insert_bound(table, cap, g->nodes[i].output_name, i);
    }
    free(g->bound);
    g->bound = table;
    g->bound_cap = cap;
    g->n_bound++;
    return 1;
}

vkg_tensor vkg_find(const vkg_graph *g, const char *name) {
    if (!name) return VKG_NONE;
    vkg_tensor t = find_bound(g, name);
    for (int i = 0; t == VKG_NONE && i < g->n_nodes; i++)
        if (g->nodes[i].label && strcmp(g->nodes[i].label, name) == 0) t = i;
    return t;
}

static int name_ok(vkg_graph *g, const char *what, const char *name) {
    if (g->status != VKG_OK) return 0;
    if (!name || !*name) {
        vkg_graph_fail(g, VKG_ERR_INVALID_ARGUMENT, "%s: a name is required", what);
        return 0;
    }
    if (find_bound(g, name) != VKG_NONE) {
        vkg_graph_fail(g, VKG_ERR_INVALID_ARGUMENT, "%s: the name '%s' is already used in this graph", what, name);
        return 0;
    }
    return 1;
}

static int shape_ok(vkg_graph *g, const char *what, const char *name, int ndim, const int64_t *shape) {
    if (ndim < 1 || ndim > VKG_MAX_DIMS || !shape) {
        vkg_graph_fail(g, VKG_ERR_SHAPE, "%s '%s': %d dimensions given, 1 to %d supported", what, name, ndim,
                       VKG_MAX_DIMS);
        return 0;
    }
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 1 || shape[i] > ((int64_t)1 << 32)) {
            vkg_graph_fail(g, VKG_ERR_SHAPE, "%s '%s': dimension %d is %lld; sizes must be 1 to 2^32", what,
                           name, i, (long long)shape[i]);
            return 0;
        }
    return shape_fits(g, what, name, ndim, shape);
}

static vkg_tensor add_leaf(vkg_graph *g, vkg_op op, const char *name, vkg_dtype dtype, int ndim,
                           const int64_t *shape, const void *data) {
    const char *what = vkg_op_name(op);
    if (!name_ok(g, what, name) || !shape_ok(g, what, name, ndim, shape)) return VKG_NONE;
    if (vkg_dtype_size(dtype) == 0) {
        vkg_graph_fail(g, VKG_ERR_INVALID_ARGUMENT, "%s '%s': unknown dtype %d", what, name, (int)dtype);
        return VKG_NONE;
    }
    if (vkg_dtype_is_16bit(dtype) && op != VKG_OP_CONSTANT) {
        vkg_graph_fail(g, VKG_ERR_INVALID_ARGUMENT, "%s '%s': %s is for constants (weights) only; inputs are f32 or i32",
                       what, name, vkg_dtype_name(dtype));
        return VKG_NONE;
    }
    vkg_node n;
    vkg_node_init(&n, op, dtype, ndim, shape);
    n.data = data;
    n.name = strdup(name);
    if (!n.name) {
        vkg_graph_fail(g, VKG_ERR_OUT_OF_MEMORY, "out of memory naming '%s'", name);
        return VKG_NONE;
    }
    vkg_tensor t = vkg_graph_add_node(g, &n);
    if (t == VKG_NONE) free(n.name);
    else if (!bind_name(g, t, name)) {
        vkg_graph_fail(g, VKG_ERR_OUT_OF_MEMORY, "out of memory naming '%s'", name);
        return VKG_NONE;
    }
    return t;
}

vkg_tensor vkg_input(vkg_graph *g, const char *name, vkg_dtype dtype, int ndim, const int64_t *shape) {
    return add_leaf(g, VKG_OP_INPUT, name, dtype, ndim, shape, NULL);
}

vkg_tensor vkg_constant(vkg_graph *g, const char *name, vkg_dtype dtype, int ndim, const int64_t *shape,
                        const void *data) {
    if (g->status == VKG_OK && !data) {
        vkg_graph_fail(g, VKG_ERR_INVALID_ARGUMENT, "constant '%s': data is NULL", name ? name : "?");
        return VKG_NONE;
    }
    return add_leaf(g, VKG_OP_CONSTANT, name, dtype, ndim, shape, data);
}

vkg_tensor vkg_state(vkg_graph *g, const char *name, int ndim, const int64_t *shape) {
    return add_leaf(g, VKG_OP_STATE, name, VKG_F32, ndim, shape, NULL);
}

vkg_tensor vkg_index(vkg_graph *g, const char *name) {
    const int64_t one = 1;
    return add_leaf(g, VKG_OP_INDEX, name, VKG_I32, 1, &one, NULL);
}

vkg_status vkg_output(vkg_graph *g, const char *name, vkg_tensor t) {
    if (!vkg_graph_check(g, "output", "t", t) || !name_ok(g, "output", name)) return g->status;
    vkg_node *n = &g->nodes[t];
    if (n->output_name) {
        vkg_graph_fail(g, VKG_ERR_INVALID_ARGUMENT, "output '%s': tensor %d is already the output '%s'", name,
                       (int)t, n->output_name);
        return g->status;
    }
    if (n->op == VKG_OP_INDEX) {
        vkg_graph_fail(g, VKG_ERR_INVALID_ARGUMENT, "output '%s': a runtime index cannot be an output", name);
        return g->status;
    }
    n->output_name = strdup(name);
    if (!n->output_name || !bind_name(g, t, name))
        vkg_graph_fail(g, VKG_ERR_OUT_OF_MEMORY, "out of memory naming output '%s'", name);
    return g->status;
}

vkg_status vkg_name(vkg_graph *g, vkg_tensor t, const char *name) {
    if (!vkg_graph_check(g, "name", "t", t)) return g->status;
    if (!name || !*name) {
        vkg_graph_fail(g, VKG_ERR_INVALID_ARGUMENT, "name: tensor %d ('%s') needs a non-empty name", (int)t,
                       vkg_tensor_name(g, t));
        return g->status;
    }
    char *copy = strdup(name);
    if (!copy) {
        vkg_graph_fail(g, VKG_ERR_OUT_OF_MEMORY, "out of memory naming tensor %d '%s'", (int)t, name);
        return g->status;
    }
    free(g->nodes[t].label);
    g->nodes[t].label = copy;
    return VKG_OK;
}

int vkg_tensor_shape(const vkg_graph *g, vkg_tensor t, int64_t shape[VKG_MAX_DIMS]) {
    if (t < 0 || t >= g->n_nodes) return 0;
    const vkg_node *n = &g->nodes[t];
    for (int i = 0; i < n->ndim; i++) shape[i] = n->shape[i];
    return n->ndim;
}

int64_t vkg_tensor_numel(const vkg_graph *g, vkg_tensor t) {
    if (t < 0 || t >= g->n_nodes) return 0;
    return vkg_shape_numel(g->nodes[t].ndim, g->nodes[t].shape);
}

const char *vkg_tensor_name(const vkg_graph *g, vkg_tensor t) {
    if (t < 0 || t >= g->n_nodes) return "?";
    const vkg_node *n = &g->nodes[t];
    if (n->label) return n->label;
    if (n->output_name) return n->output_name;
    if (n->name) return n->name;
    return vkg_op_name(n->op);
}

int vkg_name_layer(const char *name) {
    static const char *const prefixes[] = {"h.", "model.layers."};
    for (size_t k = 0; k < sizeof prefixes / sizeof prefixes[0]; k++) {
        const size_t n = strlen(prefixes[k]);
        if (strncmp(name, prefixes[k], n) != 0 || name[n] < '0' || name[n] > '9') continue;
        long layer = 0;
        const char *p = name + n;
        for (; *p >= '0' && *p <= '9'; p++)
            if ((layer = layer * 10 + (*p - '0')) > 1000000) return -1;
        return *p == '.' ? (int)layer : -1;
    }
    return -1;
}

int vkg_tensor_layer(const vkg_graph *g, vkg_tensor t) { return vkg_name_layer(vkg_tensor_name(g, t)); }

const char *vkg_tensor_bound_name(const vkg_graph *g, vkg_tensor t) {
    if (t < 0 || t >= g->n_nodes) return "?";
    const vkg_node *n = &g->nodes[t];
    return n->output_name ? n->output_name : n->name ? n->name : vkg_tensor_name(g, t);
}

int64_t vkg_graph_constant_numel(const vkg_graph *g) {
    int64_t total = 0;
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].op == VKG_OP_CONSTANT &&
            __builtin_add_overflow(total, vkg_shape_numel(g->nodes[i].ndim, g->nodes[i].shape), &total))
            return INT64_MAX; /* saturates: a count for display, many huge constants could pass 2^63 */
    return total;
}
