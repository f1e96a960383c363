/* Compiling a graph into a plan:
 *   validate -> drop dead nodes -> fuse -> lower to steps (views, splits) -> liveness ->
 *   in-place reuse -> arena packing -> bindings and barriers.
 * The order of steps is the order of node creation, which is topological by construction. */
#include "graph/compile_internal.h"

#include <stdlib.h>
#include <string.h>

void vkg_compile_options_default(vkg_compile_options *opts) {
    opts->fuse = 1;
    opts->in_place = 1;
    opts->alignment = 256;                       /* the largest minStorageBufferOffsetAlignment */
    opts->max_binding_bytes = (uint64_t)128 << 20; /* lavapipe's maxStorageBufferRange        */
    opts->read_16bit = 1;
}

/* Marks what reaches an output or writes a state (a side effect), and counts consumers. */
static void mark_live(vkg_compiler *c) {
    const vkg_graph *g = c->g;
    for (int i = c->n - 1; i >= 0; i--) {
        const vkg_node *n = &g->nodes[i];
        if (n->output_name || n->op == VKG_OP_WRITE_AT) c->keep[i] = 1;
        if (!c->keep[i]) continue;
        for (int s = 0; s < VKG_MAX_SRC; s++)
            if (n->src[s] != VKG_NONE) {
                c->keep[n->src[s]] = 1;
                c->consumers[n->src[s]]++;
            }
    }
}

/* A node another step may absorb: computed, kept, read once, not an output. */
static int absorbable(const vkg_compiler *c, vkg_tensor t, vkg_op op) {
    const vkg_node *n = &c->g->nodes[t];
    return n->op == op && c->consumers[t] == 1 && !n->output_name && c->role[t] == VKG_FUSE_NONE;
}

/* The single consumer of t, or VKG_NONE. */
static vkg_tensor sole_consumer(const vkg_compiler *c, vkg_tensor t) {
    if (c->consumers[t] != 1 || c->g->nodes[t].output_name) return VKG_NONE;
    for (int i = t + 1; i < c->n; i++) {
        if (!c->keep[i]) continue;
        for (int s = 0; s < VKG_MAX_SRC; s++)
            if (c->g->nodes[i].src[s] == t) return i;
    }
    return VKG_NONE;
}

/* softmax(mask(scale(x))), softmax(scale(mask(x))) for causal/boolean masks, and
 * softmax(additive_mask(scale(x))): the kernel computes scale * x, then applies the mask. */
static void fuse_softmax(vkg_compiler *c, vkg_tensor sm) {
    const vkg_graph *g = c->g;
    vkg_tensor x = g->nodes[sm].src[0], mask = VKG_NONE, scale = VKG_NONE;
    for (int depth = 0; depth < 2; depth++) {
        if (mask == VKG_NONE && (absorbable(c, x, VKG_OP_MASK_CAUSAL) || absorbable(c, x, VKG_OP_MASK))) {
            /* An additive mask must come after the scale, i.e. be met first going up. */
            if (scale != VKG_NONE && g->nodes[x].op == VKG_OP_MASK && g->nodes[x].attr.mask.kind == VKG_MASK_ADDITIVE)
                break;
            mask = x;
            x = g->nodes[x].src[0];
        } else if (scale == VKG_NONE && absorbable(c, x, VKG_OP_SCALE)) {
            scale = x;
            x = g->nodes[x].src[0];
        } else {
            break;
        }
    }
    if (mask != VKG_NONE) c->role[mask] = VKG_FUSE_ABSORBED;
    if (scale != VKG_NONE) c->role[scale] = VKG_FUSE_ABSORBED;
    c->fused_mask[sm] = mask;
    c->fused_scale[sm] = scale;
    c->fused_input[sm] = x;
}

static int same_shape(const vkg_node *a, const vkg_node *b) {
    return a->ndim == b->ndim && memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->ndim) == 0;
}

/* softmax(causal(scale(q k^T))) @ v, the probabilities read by nothing else (not an output, as the
 * `attention` command and every probs request make them): one fused attention step, which never
 * stores the [T, S] scores.  Runs after fuse_softmax has absorbed the scale and the mask. */
static void fuse_attention(vkg_compiler *c, vkg_tensor sm) {
    const vkg_graph *g = c->g;
    vkg_tensor x = c->fused_input[sm], mk = c->fused_mask[sm];
    if (mk != VKG_NONE && g->nodes[mk].op != VKG_OP_MASK_CAUSAL) return;
    if (!absorbable(c, x, VKG_OP_MATMUL) || g->nodes[x].attr.matmul.flags != VKG_TRANSPOSE_B ||
        g->nodes[x].src[2] != VKG_NONE || g->nodes[x].ndim > 4)
        return;
    vkg_tensor pv = sole_consumer(c, sm);
    if (pv == VKG_NONE || g->nodes[pv].op != VKG_OP_MATMUL || c->role[pv] != VKG_FUSE_NONE ||
        g->nodes[pv].src[0] != sm || g->nodes[pv].src[1] == sm || g->nodes[pv].attr.matmul.flags != 0 ||
        g->nodes[pv].src[2] != VKG_NONE || g->nodes[pv].shape[g->nodes[pv].ndim - 1] > (int64_t)VKG_ATTENTION_MAX_DV)
        return;
    c->role[sm] = VKG_FUSE_ABSORBED;
    c->role[x] = VKG_FUSE_ABSORBED;
    c->fused_softmax[pv] = sm;
}

/* matmul -> (+ bias[N]) -> activation -> (+ residual of the same shape, or swiglu(gate, this)),
 * each step optional, in this order: the matmul kernel's epilogue.  The group's value is its last
 * node's (a swiglu there makes the residual the gate, lower_matmul.c). */

static void fuse_matmul(vkg_compiler *c, vkg_tensor mm) {
    const vkg_graph *g = c->g;
    vkg_tensor last = mm;
    int has_bias = g->nodes[mm].src[2] != VKG_NONE;
    vkg_tensor activation = VKG_NONE;
    vkg_tensor bias = VKG_NONE, residual = VKG_NONE;
    for (;;) {
        vkg_tensor next = sole_consumer(c, last);
        if (next == VKG_NONE) break;
        const vkg_node *nn = &g->nodes[next];
        /* next already ends an earlier matmul's group (matmul + matmul): it stays there */
        if (c->fused_input[next] != VKG_NONE || c->role[next] != VKG_FUSE_NONE) break;
        vkg_tensor other = VKG_NONE;
        if (nn->op == VKG_OP_ADD) other = nn->src[0] == last ? nn->src[1] : nn->src[0];
        if (nn->op == VKG_OP_ADD && nn->src[0] == nn->src[1]) break;
        if (nn->op == VKG_OP_ADD && !has_bias && activation == VKG_NONE && residual == VKG_NONE &&
            g->nodes[other].ndim == 1 && g->nodes[other].shape[0] == g->nodes[mm].shape[g->nodes[mm].ndim - 1] &&
            same_shape(nn, &g->nodes[last])) {
            bias = other;
            has_bias = 1;
        } else if (vkg_activation_fuses(nn->op) && activation == VKG_NONE && residual == VKG_NONE) {
            activation = next;
        } else if (nn->op == VKG_OP_ADD && residual == VKG_NONE && same_shape(&g->nodes[other], nn) &&
                   same_shape(nn, &g->nodes[last])) {
            residual = other;
        } else if (nn->op == VKG_OP_SWIGLU && nn->src[1] == last && nn->src[0] != last && residual == VKG_NONE) {
            residual = nn->src[0]; /* silu(gate) * up, up this group: the gate is R (VKG_MATMUL_GATE) */
        } else {
            break;
        }
        c->role[last] = VKG_FUSE_ABSORBED;
        last = next;
    }
    if (last == mm) return;
    c->fused_input[last] = mm;    /* the group root names the matmul that starts it */
    c->fused_bias[last] = bias;
    c->fused_activation[last] = activation;
    c->fused_residual[last] = residual;
}

vkg_status vkg_compile_fuse(vkg_compiler *c) {
    if (!c->opts.fuse) return VKG_OK;
    for (int i = 0; i < c->n; i++) {
        if (!c->keep[i]) continue;
        if (c->g->nodes[i].op == VKG_OP_SOFTMAX) {
            fuse_softmax(c, i);
            fuse_attention(c, i);
        } else if (c->g->nodes[i].op == VKG_OP_MATMUL && c->role[i] == VKG_FUSE_NONE &&
                   c->fused_softmax[i] == VKG_NONE) {
            fuse_matmul(c, i);
        }
    }
    return VKG_OK;
}

/* Steps run in creation order, so reading a state through a handle that a later write_at has
 * already replaced would see the newer contents.  Refuse it: read through the latest handle. */
static vkg_status check_state_reads(const vkg_compiler *c) {
    const vkg_graph *g = c->g;
    /* replaced[t]: the first write_at that replaced handle t, or -1; one pass each way, as a
     * model of thousands of layers has thousands of writes over a hundred thousand nodes. */
    vkg_tensor *replaced = malloc((size_t)(c->n ? c->n : 1) * sizeof *replaced);
    if (!replaced) return vkg_error_set(c->err, VKG_ERR_OUT_OF_MEMORY, "out of memory compiling");
    for (int t = 0; t < c->n; t++) replaced[t] = VKG_NONE;
    for (int w = 0; w < c->n; w++)
        if (g->nodes[w].op == VKG_OP_WRITE_AT && replaced[g->nodes[w].src[0]] == VKG_NONE)
            replaced[g->nodes[w].src[0]] = w;
    vkg_status st = VKG_OK;
    for (int r = 0; r < c->n && st == VKG_OK; r++)
        for (int s = 0; s < VKG_MAX_SRC && st == VKG_OK; s++) {
            const vkg_tensor old = g->nodes[r].src[s];
            if (!c->keep[r] || old == VKG_NONE || replaced[old] == VKG_NONE || replaced[old] >= r) continue;
            vkg_tensor leaf = old;
            while (g->nodes[leaf].op == VKG_OP_WRITE_AT) leaf = g->nodes[leaf].src[0];
            st = vkg_error_set(c->err, VKG_ERR_INVALID_ARGUMENT,
                               "%s (node %d) reads state '%s' through a handle that write_at (node %d) "
                               "already replaced: use the handle write_at returned",
                               vkg_op_name(g->nodes[r].op), r, vkg_tensor_name(g, leaf), replaced[old]);
        }
    free(replaced);
    return st;
}

static void compiler_free(vkg_compiler *c) {
    free(c->keep);
    free(c->consumers);
    free(c->role);
    free(c->fused_scale);
    free(c->fused_mask);
    free(c->fused_bias);
    free(c->fused_residual);
    free(c->fused_activation);
    free(c->fused_input);
    free(c->fused_softmax);
    free(c->materialize);
    free(c->own_storage);
    free(c->placed_in);
    free(c->placed_at);
    free(c->view);
    free(c->index_slot);
    free(c->index_min);
    free(c->index_max);
    free(c->steps);
    free(c->alias);
    free(c->written_by_rope);
}

static vkg_status compiler_init(vkg_compiler *c, const vkg_graph *g, const vkg_compile_options *opts,
                                vkg_error *err) {
    memset(c, 0, sizeof *c);
    c->g = g;
    c->err = err;
    c->n = g->n_nodes;
    if (opts) c->opts = *opts;
    else vkg_compile_options_default(&c->opts);
    size_t n = (size_t)(c->n ? c->n : 1);
    c->keep = calloc(n, 1);
    c->consumers = calloc(n, sizeof *c->consumers);
    c->role = calloc(n, sizeof *c->role);
    c->fused_scale = malloc(n * sizeof *c->fused_scale);
    c->fused_mask = malloc(n * sizeof *c->fused_mask);
    c->fused_bias = malloc(n * sizeof *c->fused_bias);
    c->fused_residual = malloc(n * sizeof *c->fused_residual);
    c->fused_activation = malloc(n * sizeof *c->fused_activation);
    c->fused_input = malloc(n * sizeof *c->fused_input);
    c->fused_softmax = malloc(n * sizeof *c->fused_softmax);
    c->materialize = calloc(n, 1);
    c->own_storage = calloc(n, 1);
    c->placed_in = malloc(n * sizeof *c->placed_in);
    c->placed_at = calloc(n, sizeof *c->placed_at);
    c->view = calloc(n, sizeof *c->view);
    c->index_slot = malloc(n * sizeof *c->index_slot);
    c->index_min = malloc(n * sizeof *c->index_min);
    c->index_max = malloc(n * sizeof *c->index_max);
    c->alias = malloc(n * sizeof *c->alias);
    c->written_by_rope = calloc(n, 1);
    if (!c->written_by_rope || !c->keep || !c->consumers || !c->role || !c->fused_scale || !c->fused_mask || !c->fused_bias ||
        !c->fused_residual || !c->fused_activation || !c->fused_input || !c->fused_softmax || !c->materialize || !c->own_storage ||
        !c->placed_in || !c->placed_at || !c->view || !c->index_slot || !c->index_min || !c->index_max || !c->alias)
        return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory compiling a graph of %d nodes", c->n);
    for (int i = 0; i < c->n; i++) {
        c->fused_scale[i] = c->fused_mask[i] = c->fused_bias[i] = c->fused_residual[i] = VKG_NONE;
        c->fused_activation[i] = VKG_NONE;
        c->fused_input[i] = VKG_NONE;
        c->fused_softmax[i] = VKG_NONE;
        c->placed_in[i] = VKG_NONE;
        c->index_slot[i] = -1;
        c->index_min[i] = INT32_MIN;
        c->index_max[i] = INT32_MAX;
        c->alias[i] = i;
    }
    return VKG_OK;
}

static vkg_status validate(const vkg_graph *g, const vkg_compile_options *opts, vkg_error *err) {
    if (g->status != VKG_OK)
        return vkg_error_set(err, g->status, "the graph has an error: %s", g->error);
    int outputs = 0;
    for (int i = 0; i < g->n_nodes; i++) outputs += g->nodes[i].output_name != NULL;
    if (outputs == 0) return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "the graph has no outputs (vkg_output)");
    /* Kernel parameters hold sizes and offsets within a binding as 32-bit numbers (as Vulkan's
     * maxStorageBufferRange is): a binding over 4 GiB would wrap them. */
    if (opts && (opts->alignment < 4 || (opts->alignment & (opts->alignment - 1)) ||
                 opts->max_binding_bytes < 4u * opts->alignment || opts->max_binding_bytes > ((uint64_t)1 << 32)))
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT,
                             "compile options: alignment must be a power of two >= 4 and max_binding_bytes "
                             "at least 4 alignments and at most 4 GiB");
    return VKG_OK;
}

vkg_status vkg_plan_compile(const vkg_graph *g, const vkg_compile_options *opts, vkg_plan **out,
                            vkg_error *err) {
    *out = NULL;
    vkg_status st = validate(g, opts, err);
    if (st != VKG_OK) return st;
    vkg_compiler c;
    vkg_plan *p = calloc(1, sizeof *p);
    st = p ? compiler_init(&c, g, opts, err)
           : vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory compiling a graph");
    if (st == VKG_OK) {
        mark_live(&c);
        st = check_state_reads(&c);
    }
    if (st == VKG_OK) {
        st = vkg_compile_fuse(&c);
    }
    if (st == VKG_OK) st = vkg_compile_lower(&c);
    if (st == VKG_OK) st = vkg_compile_place(&c, p);
    if (p) compiler_free(&c);
    if (st != VKG_OK) {
        vkg_plan_free(p);
        return st;
    }
    *out = p;
    return VKG_OK;
}

void vkg_plan_free(vkg_plan *p) {
    if (!p) return;
    free(p->regions);
    free(p->steps);
    free(p->place);
    free(p);
}

void vkg_plan_memory(const vkg_plan *p, vkg_memory_stats *stats) { *stats = p->stats; }
int vkg_plan_step_count(const vkg_plan *p) { return p->n_steps; }

double vkg_plan_matmul_flops(const vkg_plan *p) {
    double flops = 0;
    for (int i = 0; i < p->n_steps; i++) {
        const vkg_step *s = &p->steps[i];
        if (s->kernel != VKG_KERNEL_MATMUL) continue;
        const vkg_matmul_params *m = &s->params.matmul;
        flops += 2.0 * m->M * m->N * m->K * (m->batch0 ? m->batch0 : 1) * (m->batch1 ? m->batch1 : 1);
    }
    return flops;
}
