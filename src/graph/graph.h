/* The graph's internal representation: an array of nodes in creation order, which is also a
 * topological order (an op can only name nodes that exist). */
#ifndef VKG_GRAPH_H
#define VKG_GRAPH_H

#include "vkgraph.h"

/* The ops: graph/ops.def's rows, then the activations of params/unary_ops.def. */
typedef enum vkg_op {
#define VKG_OP(NAME, name) VKG_OP_##NAME,
#include "graph/ops.def"
#define VKG_ACTIVATION(NAME, name, code, epilogue) VKG_OP_##NAME,
#include "params/unary_ops.def"
    VKG_OP_COUNT
} vkg_op;

const char *vkg_op_name(vkg_op op);

#define VKG_MAX_SRC 3

typedef struct vkg_node {
    vkg_op op;
    vkg_dtype dtype;
    int ndim;
    int64_t shape[VKG_MAX_DIMS];
    vkg_tensor src[VKG_MAX_SRC];     /* operands; VKG_NONE where absent                       */
    char *name;                      /* leaves: the name they are bound and looked up by      */
    char *label;                     /* set by vkg_name: what dumps and profiles call the node */
    char *output_name;               /* set by vkg_output                                     */
    const void *data;                /* constants: borrowed host data                         */
    union {
        struct { unsigned flags; } matmul;              /* VKG_TRANSPOSE_A/B; bias is src[2] */
        struct { float s; } scale;
        /* causal: dynamic offset src[1] (with rows, the first of `rows` indices, one for each
         * entry of axis 0; one_position: the query axis -2 not added); window 0: none */
        struct { int32_t offset; uint32_t window; int rows; int one_position; } causal;
        /* rope: table src[1]; src[2] a dynamic offset, or with row_positions an i32 [T] of each
         * row's position; rotated: the heads of axis -3 rotated (0: all) */
        struct { int32_t offset; int64_t rotated; int row_positions; } rope;
        struct { vkg_mask_kind kind; } mask;
        struct { float eps; } layernorm;                /* gamma src[1], beta src[2]; rms_norm's too */
        struct { int axes[VKG_MAX_DIMS]; } permute;
        struct { int axis; int64_t start; } slice;
        struct { int axis; } concat;
        /* state src[0], x src[1], index src[2]; x also at lead_offset along lead_axis; rows > 0:
         * x [rows, G, A, D] into state [P, A, S, D], row r at planes r G.. and position index
         * src[2] + r along axis 2 (vkg_write_rows) */
        struct vkg_write_at_attr { int axis; int64_t offset; int lead_axis; int64_t lead_offset; int rows; } write_at;
    } attr;
} vkg_node;

struct vkg_graph {
    vkg_node *nodes;
    int n_nodes, cap_nodes;
    /* The names leaves and outputs are bound to, hashed (open addressing; node + 1, 0 empty):
     * a model of thousands of layers binds tens of thousands of names, each checked unique. */
    int32_t *bound;
    uint32_t bound_cap, n_bound;
    vkg_status status;
    char error[512];
};

static inline const vkg_node *vkg_graph_node(const vkg_graph *g, vkg_tensor t) { return &g->nodes[t]; }
static inline int vkg_dtype_is_16bit(vkg_dtype d) { return d == VKG_F16 || d == VKG_BF16; }
/* The largest element count of a tensor: its byte size (at most 4 bytes an element) fits in 63 bits. */
#define VKG_MAX_NUMEL (INT64_MAX / 4)
/* The element count, or -1 when a dimension is negative or the count exceeds VKG_MAX_NUMEL (never
 * overflows; the builders refuse such shapes, so for a node of a graph it is never -1). */
int64_t vkg_shape_numel(int ndim, const int64_t *shape);
/* The layer a node's name puts it in: N when it starts "h.N." (GPT-2's naming) or
 * "model.layers.N." (the Llama family's, as transformers names the modules), else -1. */
int vkg_name_layer(const char *name);
int vkg_tensor_layer(const vkg_graph *g, vkg_tensor t);
/* The name a leaf or output is bound to (what sessions and vkg_find key on), else vkg_tensor_name. */
const char *vkg_tensor_bound_name(const vkg_graph *g, vkg_tensor t);

#endif
