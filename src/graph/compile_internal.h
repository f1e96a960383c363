/* The compiler's working state, shared by its passes:
 *   compile.c   validate, drop dead nodes, fuse, drive the passes, build the plan
 *   lower.c     views and lowering: one or more symbolic steps per node
 *   bufplan.c   liveness, in-place reuse, arena packing, binding resolution, barriers */
#ifndef VKG_COMPILE_INTERNAL_H
#define VKG_COMPILE_INTERNAL_H

#include "base/error.h"
#include "graph/plan.h"

/* A strided window onto a node's storage: element (i0..) at offset + sum(i_k * strides[k]). */
typedef struct vkg_view {
    vkg_tensor base;                 /* the node whose storage holds the elements           */
    int ndim;
    int64_t shape[VKG_MAX_DIMS];
    int64_t strides[VKG_MAX_DIMS];   /* elements; 0 broadcasts                              */
    int64_t offset;                  /* elements from the start of base's storage           */
} vkg_view;

/* A binding before memory is placed: an element range of some node's storage. */
typedef struct vkg_sym_binding {
    vkg_tensor storage;              /* VKG_NONE: unused slot                               */
    int64_t lo, hi;                  /* elements [lo, hi) of the storage the kernel touches */
    int offset_word;                 /* params word that holds the offset of lo; -1 none    */
    int writes;
} vkg_sym_binding;

typedef struct vkg_sym_step {
    vkg_step step;                   /* kernel, node, label, params (offsets filled later)  */
    vkg_sym_binding sym[VKG_MAX_BINDINGS];
} vkg_sym_step;

/* What fusion decided for a node. */
typedef enum vkg_fuse_role {
    VKG_FUSE_NONE = 0,               /* computed by its own step                           */
    VKG_FUSE_ABSORBED,               /* computed inside its consumer's step                */
} vkg_fuse_role;

typedef struct vkg_compiler {
    const vkg_graph *g;
    vkg_compile_options opts;
    vkg_error *err;
    int n;                           /* nodes                                               */
    char *keep;                      /* reaches an output or a state write                  */
    int *consumers;                  /* references from kept nodes                          */
    vkg_fuse_role *role;
    /* For a node that roots a fused group: the nodes it absorbed. */
    vkg_tensor *fused_scale, *fused_mask, *fused_bias, *fused_residual, *fused_activation;
    vkg_tensor *fused_input;         /* softmax: the tensor under the absorbed scale/mask   */
    vkg_tensor *fused_softmax;       /* probs @ v computed as fused attention: its softmax  */
    char *materialize;               /* node gets its own contiguous storage (and a copy)   */
    char *own_storage;               /* node has storage of its own                         */
    vkg_tensor *placed_in;           /* the concat whose part holds this node, else VKG_NONE */
    int64_t *placed_at;              /* where in that concat: elements from its start        */
    vkg_view *view;                  /* how each node's value is read                       */
    int *index_slot;                 /* runtime indices: slot in the indices region         */
    int n_indices;
    int64_t *index_min, *index_max;  /* runtime indices: the values every use can take     */
    vkg_sym_step *steps;
    int n_steps, cap_steps;
    vkg_tensor *alias;               /* in-place: storage shared with this node; else self  */
    char *written_by_rope;           /* a write_at the rope step before it does (its cache rows) */
} vkg_compiler;

/* The VKG_UNARY_* code of an activation op (vkg_gelu, vkg_relu, ...); VKG_UNARY_COPY for any
 * other op. */
static inline uint32_t vkg_activation_code(vkg_op op) {
#define VKG_ACTIVATION(NAME, name, code, epilogue) \
    if (op == VKG_OP_##NAME) return VKG_UNARY_##NAME;
#include "params/unary_ops.def"
    return VKG_UNARY_COPY;
}

/* 1 for an activation the compiler fuses into the epilogue of the matmul before it. */
static inline int vkg_activation_fuses(vkg_op op) {
#define VKG_ACTIVATION(NAME, name, code, epilogue) \
    if (op == VKG_OP_##NAME) return epilogue;
#include "params/unary_ops.def"
    return 0;
}

/* The element type node t's storage holds in the plan: its own, except that 16-bit constants are
 * held as f32 where the device cannot read them (compile option read_16bit 0). */
static inline vkg_dtype vkg_compile_dtype(const vkg_compiler *c, vkg_tensor t) {
    vkg_dtype d = c->g->nodes[t].dtype;
    return vkg_dtype_is_16bit(d) && !c->opts.read_16bit ? VKG_F32 : d;
}
static inline uint64_t vkg_compile_elem_bytes(const vkg_compiler *c, vkg_tensor t) {
    return vkg_dtype_size(vkg_compile_dtype(c, t));
}

vkg_status vkg_compile_fuse(vkg_compiler *c);
vkg_status vkg_compile_lower(vkg_compiler *c);
vkg_status vkg_compile_lower_matmul(vkg_compiler *c, vkg_tensor root);
vkg_status vkg_compile_lower_attention(vkg_compiler *c, vkg_tensor pv);
/* The VKG_MASK_ROWS_* flags of a causal mask node (vkg_mask_causal_rows), for the fused softmax
 * or attention that applies it. */
static inline uint32_t vkg_compile_mask_rows(const vkg_node *mask) {
    return (mask->attr.causal.rows ? VKG_MASK_ROWS_OWN_INDEX : 0u) |
           (mask->attr.causal.one_position ? VKG_MASK_ROWS_ONE_POSITION : 0u);
}
/* An operand's batch strides mapped onto the output's (batch0, batch1): out has 2 to 4 dims, the
 * last two the matrix; a dimension the operand lacks or has of size 1 broadcasts (stride 0). */
void vkg_compile_batch_strides(const vkg_view *v, const vkg_node *out, uint32_t *s0, uint32_t *s1);
vkg_status vkg_compile_place(vkg_compiler *c, vkg_plan *p);

/* The batch entries one step of a batched op computes (matmul, attention): batch0 entries
 * [e0, e0 + n0) by batch1 entries [e1, e1 + n1). */
typedef struct vkg_entries {
    int64_t e0, n0, e1, n1;
} vkg_entries;
/* The part of view v (an operand or the output of an op whose output has out_nd dimensions, the
 * last two the matrix) that entries e read: its batch dimensions narrowed, save where it
 * broadcasts (every entry reads the same matrix there). */
vkg_view vkg_compile_entries_of(vkg_view v, int out_nd, const vkg_entries *e);
/* The run of entries (e0 = e1 = 0) for which each of the n views spans at most one binding: every
 * entry at once, else batch0's halved until they fit, then (one batch0 entry at a time) batch1's;
 * one entry where even that does not fit (the plan's binding check then names the operand). */
vkg_entries vkg_compile_fit_entries(const vkg_compiler *c, const vkg_view *views, int n, int out_nd, int64_t batch0,
                                    int64_t batch1);
/* The run of a fitted run's extents from entry (e0, e1), cut at the batch's ends. */
vkg_entries vkg_compile_entries_at(const vkg_entries *run, int64_t e0, int64_t e1, int64_t batch0, int64_t batch1);

/* Appends a symbolic step (NULL when out of memory). */
vkg_sym_step *vkg_compile_new_step(vkg_compiler *c, vkg_kernel k, vkg_tensor node, const char *label);
/* Splitting one op into more steps than this (an operand far larger than max_binding_bytes) is
 * refused: the plan would hold millions of steps, and its step table alone gigabytes. */
#define VKG_MAX_SPLIT_STEPS 65536
/* The label of part `part` (from 1) of an op split into `parts` steps: "label[part/parts]" in l
 * (at most 64 bytes, cut to the plan's 48), or label itself when it is not split. */
const char *vkg_compile_part_label(char *l, size_t size, const char *label, int64_t part, int64_t parts);
/* VKG_OK, or VKG_ERR_UNSUPPORTED naming node t and its parts when parts > VKG_MAX_SPLIT_STEPS. */
vkg_status vkg_compile_check_split(vkg_compiler *c, vkg_tensor t, const char *what, int64_t parts);
/* Binds view v to a slot and writes its offset into params word offset_word; whether the step
 * writes it is the family's (graph/kernels.def). */
void vkg_compile_bind(vkg_sym_step *s, int slot, const vkg_view *v, int offset_word);
/* The element range [lo, hi) a view touches. */
void vkg_view_span(const vkg_view *v, int64_t *lo, int64_t *hi);
/* The bytes it spans. */
uint64_t vkg_compile_span_bytes(const vkg_compiler *c, const vkg_view *v);
/* The most bytes a view may span to fit one binding wherever it lies: the largest binding less
 * the alignment its start is rounded down to. */
static inline uint64_t vkg_compile_binding_limit(const vkg_compiler *c) {
    return c->opts.max_binding_bytes - c->opts.alignment;
}
/* The root of a node's storage after in-place aliasing. */
vkg_tensor vkg_storage_root(const vkg_compiler *c, vkg_tensor t);
int vkg_view_is_contiguous(const vkg_view *v);
void vkg_contiguous_strides(int ndim, const int64_t *shape, int64_t *strides);

#endif
