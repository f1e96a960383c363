/* Memory: which region holds each storage node, in-place reuse, packing the arena by lifetime,
 * and turning symbolic bindings into (region, byte offset, bytes) with barriers between steps
 * that depend on each other. */
#include "graph/compile_internal.h"

#include <stdlib.h>
#include <string.h>

vkg_tensor vkg_storage_root(const vkg_compiler *c, vkg_tensor t) {
    while (c->alias[t] != t) t = c->alias[t];
    return t;
}

static uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

static int in_arena(const vkg_compiler *c, vkg_tensor t) {
    const vkg_node *n = &c->g->nodes[t];
    return c->own_storage[t] && n->op != VKG_OP_INPUT && n->op != VKG_OP_CONSTANT && n->op != VKG_OP_STATE &&
           !n->output_name;
}

static uint64_t storage_bytes(const vkg_compiler *c, vkg_tensor t) {
    return (uint64_t)vkg_shape_numel(c->g->nodes[t].ndim, c->g->nodes[t].shape) * vkg_compile_elem_bytes(c, t);
}

typedef struct life { int first, last, readers; } life;

/* First and last step touching each storage node (by its own id, aliasing ignored) and the
 * number of distinct steps that read it. */
static void storage_lives(const vkg_compiler *c, life *lv) {
    for (int i = 0; i < c->n; i++) lv[i] = (life){-1, -1, 0};
    for (int s = 0; s < c->n_steps; s++) {
        const vkg_sym_step *st = &c->steps[s];
        for (int b = 0; b < VKG_MAX_BINDINGS; b++) {
            vkg_tensor t = st->sym[b].storage;
            if (t == VKG_NONE) continue;
            if (lv[t].first < 0) lv[t].first = s;
            if (!st->sym[b].writes && lv[t].last != s) lv[t].readers++;
            lv[t].last = s;
        }
    }
}

/* An element-wise step may write its output over an operand that nothing reads afterwards:
 * the operand lives in the arena, is read by this step alone, spans the same elements in the
 * same order, and is bound in no other slot of the step. */
static void choose_in_place(vkg_compiler *c, const life *lv) {
    for (int s = 0; s < c->n_steps; s++) {
        vkg_sym_step *st = &c->steps[s];
        vkg_tensor node = st->step.node;
        const vkg_node *n = &c->g->nodes[node];
        int out_slot, first_in, last_in;
        if (st->step.kernel == VKG_KERNEL_BINARY) { out_slot = 2; first_in = 0; last_in = 1; }
        else if (st->step.kernel == VKG_KERNEL_UNARY && n->op != VKG_OP_COPY && n->op != VKG_OP_CONCAT &&
                 n->op != VKG_OP_WRITE_AT && !c->materialize[node]) { out_slot = 1; first_in = 0; last_in = 0; }
        else if (st->step.kernel == VKG_KERNEL_MATMUL && c->fused_residual[node] != VKG_NONE &&
                 st->step.params.matmul.M == (uint32_t)n->shape[n->ndim - 2] &&
                 st->step.params.matmul.N == (uint32_t)n->shape[n->ndim - 1]) { out_slot = 2; first_in = 4; last_in = 4; }
        else continue;
        if (!in_arena(c, node) || st->sym[out_slot].storage != node) continue;
        for (int slot = first_in; slot <= last_in; slot++) {
            vkg_tensor x = st->sym[slot].storage;
            if (x == VKG_NONE || !in_arena(c, x) || lv[x].readers != 1 || lv[x].last != s) continue;
            if (storage_bytes(c, x) != storage_bytes(c, node) || st->sym[slot].lo != 0 ||
                st->sym[slot].hi * 4 != (int64_t)storage_bytes(c, x) || !vkg_view_is_contiguous(&c->view[x]))
                continue;
            int elsewhere = 0;
            for (int b = 0; b < VKG_MAX_BINDINGS; b++)
                if (b != slot && st->sym[b].storage == x) elsewhere = 1;
            if (elsewhere) continue;
            /* the operand's view as this step reads it must be exactly its storage in order */
            const vkg_view *ov = NULL;
            for (int k = 0; k < VKG_MAX_SRC; k++) {
                vkg_tensor src = n->src[k];
                if (src != VKG_NONE && c->view[src].base == x) ov = &c->view[src];
            }
            if (c->fused_residual[node] != VKG_NONE) ov = &c->view[c->fused_residual[node]];
            if (!ov || ov->offset != 0 || !vkg_view_is_contiguous(ov) ||
                vkg_shape_numel(ov->ndim, ov->shape) * 4 != (int64_t)storage_bytes(c, x))
                continue;
            c->alias[node] = x;
            st->step.in_place = 1;
            break;
        }
    }
}

typedef struct slot { vkg_tensor t; uint64_t size, offset; int first, last; } slot;

static int by_size_desc(const void *a, const void *b) {
    const slot *x = a, *y = b;
    if (x->size != y->size) return x->size < y->size ? 1 : -1;
    return x->first - y->first;
}

static int by_offset(const void *a, const void *b) {
    const slot *x = *(const slot *const *)a, *y = *(const slot *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Greedy best fit: largest tensors first; each takes the smallest gap, among the tensors already
 * placed whose lifetimes overlap its own, that holds it. */
static vkg_status pack_arena(slot *slots, int n, uint64_t *arena) {
    qsort(slots, (size_t)n, sizeof *slots, by_size_desc);
    slot **live = malloc((size_t)(n ? n : 1) * sizeof *live);
    if (!live) return VKG_ERR_OUT_OF_MEMORY;
    *arena = 0;
    for (int i = 0; i < n; i++) {
        int k = 0;
        for (int j = 0; j < i; j++)
            if (slots[j].first <= slots[i].last && slots[i].first <= slots[j].last) live[k++] = &slots[j];
        qsort(live, (size_t)k, sizeof *live, by_offset);
        /* Gaps between the overlapping tensors; past the last one the gap is unbounded. */
        uint64_t best = 0, best_gap = 0, cursor = 0;
        int found = 0;
        for (int j = 0; j < k; j++) {
            uint64_t gap = live[j]->offset > cursor ? live[j]->offset - cursor : 0;
            if (gap >= slots[i].size && (!found || gap < best_gap)) {
                best = cursor;
                best_gap = gap;
                found = 1;
            }
            if (live[j]->offset + live[j]->size > cursor) cursor = live[j]->offset + live[j]->size;
        }
        if (!found) best = cursor;
        slots[i].offset = best;
        if (best + slots[i].size > *arena) *arena = best + slots[i].size;
    }
    free(live);
    return VKG_OK;
}

static vkg_status make_regions(vkg_compiler *c, vkg_plan *p) {
    const vkg_graph *g = c->g;
    p->regions = calloc((size_t)c->n + 2, sizeof *p->regions);
    p->place = calloc((size_t)(c->n ? c->n : 1), sizeof *p->place);
    if (!p->regions || !p->place) return vkg_error_set(c->err, VKG_ERR_OUT_OF_MEMORY, "out of memory planning memory");
    for (int i = 0; i < c->n; i++) p->place[i] = (vkg_placement){.region = -1, .first_step = -1, .last_step = -1, .within = VKG_NONE};
    p->regions[0] = (vkg_region){.kind = VKG_REGION_ARENA, .tensor = VKG_NONE, .dtype = VKG_F32, .host_dtype = VKG_F32};
    p->n_regions = 1;
    int indices_region = -1;
    for (int i = 0; i < c->n; i++) {
        const vkg_node *n = &g->nodes[i];
        vkg_region_kind kind;
        if (n->op == VKG_OP_INPUT) kind = VKG_REGION_INPUT;
        else if (n->op == VKG_OP_STATE) kind = VKG_REGION_STATE;
        else if (n->op == VKG_OP_CONSTANT && c->keep[i]) kind = VKG_REGION_CONSTANT;
        else if (n->output_name && c->own_storage[i]) kind = VKG_REGION_OUTPUT;
        else if (n->op == VKG_OP_INDEX) {
            if (indices_region < 0) {
                indices_region = p->n_regions++;
                p->regions[indices_region] = (vkg_region){.kind = VKG_REGION_INDICES, .tensor = VKG_NONE,
                                                          .bytes = 4u * (uint64_t)c->n_indices, .dtype = VKG_I32,
                                                          .host_dtype = VKG_I32};
            }
            p->place[i] = (vkg_placement){.region = indices_region, .offset = 4u * (uint64_t)c->index_slot[i],
                                          .bytes = 4, .first_step = -1, .last_step = -1,
                                          .index_min = c->index_min[i], .index_max = c->index_max[i],
                                          .within = VKG_NONE};
            continue;
        } else continue;
        int r = p->n_regions++;
        p->regions[r] = (vkg_region){.kind = kind, .tensor = i, .bytes = storage_bytes(c, i),
                                     .host = kind == VKG_REGION_CONSTANT ? n->data : NULL,
                                     .dtype = vkg_compile_dtype(c, i), .host_dtype = n->dtype};
        p->place[i] = (vkg_placement){.region = r, .bytes = storage_bytes(c, i), .first_step = -1, .last_step = -1,
                                      .within = VKG_NONE};
        if (kind == VKG_REGION_CONSTANT) p->stats.constant_bytes += storage_bytes(c, i);
    }
    return VKG_OK;
}

/* Liveness by storage root, in-place choices, then the arena's layout and its three numbers. */
static vkg_status plan_arena(vkg_compiler *c, vkg_plan *p) {
    life *lv = malloc((size_t)(c->n ? c->n : 1) * sizeof *lv);
    slot *slots = malloc((size_t)(c->n ? c->n : 1) * sizeof *slots);
    int *root_slot = malloc((size_t)(c->n ? c->n : 1) * sizeof *root_slot);
    vkg_status st = VKG_OK;
    if (!lv || !slots || !root_slot) {
        st = vkg_error_set(c->err, VKG_ERR_OUT_OF_MEMORY, "out of memory planning memory");
        goto done;
    }
    storage_lives(c, lv);
    if (c->opts.in_place) choose_in_place(c, lv);
    uint64_t align = c->opts.alignment;
    int n_slots = 0;
    for (int i = 0; i < c->n; i++) {
        root_slot[i] = -1;
        if (!in_arena(c, i) || lv[i].first < 0) continue;
        p->stats.naive_bytes += align_up(storage_bytes(c, i), align);
        if (vkg_storage_root(c, i) != i) continue;
        root_slot[i] = n_slots;
        slots[n_slots++] = (slot){.t = i, .size = align_up(storage_bytes(c, i), align), .first = lv[i].first, .last = lv[i].last};
    }
    /* A root lives until the last step touching anything stored over it. */
    for (int i = 0; i < c->n; i++) {
        if (!in_arena(c, i) || lv[i].first < 0) continue;
        slot *sl = &slots[root_slot[vkg_storage_root(c, i)]];
        if (lv[i].first < sl->first) sl->first = lv[i].first;
        if (lv[i].last > sl->last) sl->last = lv[i].last;
    }
    /* The bytes alive at each step, from each slot's birth and death (linear, not steps x slots). */
    int64_t *delta = calloc((size_t)c->n_steps + 2, sizeof *delta);
    if (!delta) {
        st = vkg_error_set(c->err, VKG_ERR_OUT_OF_MEMORY, "out of memory planning memory");
        goto done;
    }
    for (int k = 0; k < n_slots; k++) {
        delta[slots[k].first] += (int64_t)slots[k].size;
        delta[slots[k].last + 1] -= (int64_t)slots[k].size;
    }
    int64_t alive = 0;
    for (int s = 0; s < c->n_steps; s++) {
        alive += delta[s];
        if ((uint64_t)alive > p->stats.lower_bound_bytes) p->stats.lower_bound_bytes = (uint64_t)alive;
    }
    free(delta);
    if (pack_arena(slots, n_slots, &p->stats.arena_bytes) != VKG_OK) {
        st = vkg_error_set(c->err, VKG_ERR_OUT_OF_MEMORY, "out of memory planning memory");
        goto done;
    }
    p->regions[0].bytes = p->stats.arena_bytes;
    for (int k = 0; k < n_slots; k++)
        p->place[slots[k].t] = (vkg_placement){.region = 0, .offset = slots[k].offset, .bytes = storage_bytes(c, slots[k].t),
                                               .first_step = slots[k].first, .last_step = slots[k].last,
                                               .within = VKG_NONE};
    for (int i = 0; i < c->n; i++)
        if (in_arena(c, i) && lv[i].first >= 0 && vkg_storage_root(c, i) != i) {
            p->place[i] = p->place[vkg_storage_root(c, i)];
            p->place[i].bytes = storage_bytes(c, i);
        }
    /* A concat's part computed in place: its bytes inside the concat's storage (place_concat_parts). */
    for (int i = 0; i < c->n; i++) {
        if (c->placed_in[i] == VKG_NONE) continue;
        const vkg_tensor root = vkg_storage_root(c, c->view[i].base);
        p->place[i] = p->place[root];
        p->place[i].offset += vkg_compile_elem_bytes(c, root) * (uint64_t)c->view[i].offset;
        p->place[i].bytes = storage_bytes(c, i);
        p->place[i].within = c->placed_in[i];
    }
done:
    free(lv);
    free(slots);
    free(root_slot);
    return st;
}

static int overlaps(const vkg_binding *a, const vkg_binding *b) {
    return a->region == b->region && a->offset < b->offset + b->bytes && b->offset < a->offset + a->bytes;
}

int vkg_plan_step_hazard(const vkg_plan *p, int i, int since) {
    const vkg_step *cur = &p->steps[i];
    int nb = vkg_kernel_binding_count(cur->kernel);
    for (int e = since; e < i; e++) {
        const vkg_step *prev = &p->steps[e];
        int pb = vkg_kernel_binding_count(prev->kernel);
        for (int a = 0; a < nb; a++) {
            const vkg_binding *x = &cur->bind[a];
            if (x->region < 0) continue;
            for (int b = 0; b < pb; b++) {
                const vkg_binding *y = &prev->bind[b];
                /* read after write, write after write, write after read */
                if (y->region >= 0 && (x->writes || y->writes) && overlaps(x, y)) return 1;
            }
        }
    }
    return 0;
}

/* A barrier exactly where vkg_plan_step_hazard finds one: the fewest a plan in this order can
 * have, since each barrier orders everything before it. */
static void place_barriers(vkg_plan *p) {
    int since = 0; /* first step after the last barrier */
    for (int s = 0; s < p->n_steps; s++) {
        p->steps[s].barrier = vkg_plan_step_hazard(p, s, since);
        if (p->steps[s].barrier) since = s;
    }
}

static vkg_status resolve_bindings(vkg_compiler *c, vkg_plan *p) {
    p->steps = calloc((size_t)(c->n_steps ? c->n_steps : 1), sizeof *p->steps);
    if (!p->steps) return vkg_error_set(c->err, VKG_ERR_OUT_OF_MEMORY, "out of memory building the plan");
    p->n_steps = c->n_steps;
    uint64_t align = c->opts.alignment;
    for (int s = 0; s < c->n_steps; s++) {
        vkg_step *st = &p->steps[s];
        *st = c->steps[s].step;
        for (int b = 0; b < VKG_MAX_BINDINGS; b++) {
            const vkg_sym_binding *sb = &c->steps[s].sym[b];
            st->bind[b] = (vkg_binding){.region = -1};
            if (sb->storage == VKG_NONE) continue;
            const vkg_placement *pl = &p->place[vkg_storage_root(c, sb->storage)];
            if (c->g->nodes[sb->storage].op == VKG_OP_INDEX) {
                st->bind[b] = (vkg_binding){.region = pl->region, .offset = 0, .bytes = p->regions[pl->region].bytes};
                /* Read as data (a copy or concat of the index), the operand starts at its own slot,
                 * not at the region's first. */
                if (sb->offset_word >= 0) st->params.words[sb->offset_word] += (uint32_t)(pl->offset / 4u);
                continue;
            }
            /* Offsets in the params count the storage's elements (2 bytes for a 16-bit constant). */
            const uint64_t es = vkg_compile_elem_bytes(c, vkg_storage_root(c, sb->storage));
            uint64_t start = pl->offset + es * (uint64_t)sb->lo;
            uint64_t off = start / align * align;
            st->bind[b] = (vkg_binding){.region = pl->region, .offset = off,
                                        .bytes = pl->offset + es * (uint64_t)sb->hi - off, .writes = sb->writes};
            if (sb->offset_word >= 0) {
                uint64_t field = st->params.words[sb->offset_word];
                st->params.words[sb->offset_word] = (uint32_t)((pl->offset + es * field - off) / es);
            }
            if (st->bind[b].bytes > c->opts.max_binding_bytes)
                return vkg_error_set(c->err, VKG_ERR_UNSUPPORTED,
                                     "%s: operand '%s' spans %llu bytes, more than the largest binding (%llu)",
                                     st->label, vkg_tensor_name(c->g, sb->storage),
                                     (unsigned long long)st->bind[b].bytes,
                                     (unsigned long long)c->opts.max_binding_bytes);
        }
        p->stats.in_place_steps += st->in_place;
    }
    p->stats.steps = p->n_steps;
    place_barriers(p);
    return VKG_OK;
}

vkg_status vkg_compile_place(vkg_compiler *c, vkg_plan *p) {
    p->graph = c->g;
    p->opts = c->opts;
    vkg_status st = make_regions(c, p);
    if (st == VKG_OK) st = plan_arena(c, p);
    if (st == VKG_OK) st = resolve_bindings(c, p);
    return st;
}
