/* vkg_session_compare: one plan run step by step on two devices, every step's output compared
 * by the conformance suite's measure and threshold (vkgraph_conformance.h).
 *
 * Each step is judged on its own inputs: before the device under test runs step i, every
 * non-constant byte range the step binds is copied from the reference, so the step's difference
 * is its own rounding and not that of the i steps before it (a threshold meant for one op cannot
 * judge the sum of a model's drift).  The drift is measured beside it by a third session, on the
 * test device and sharing its constants, that runs the plan freely: what the free-running
 * comparison of the whole plan would say at each step. */
#include "vkgraph_conformance.h"
#include "base/error.h"
#include "runtime/session.h"

#include <stdlib.h>
#include <string.h>

/* The measure each step kind is held to when its inputs are the reference's: a matmul's long
 * sums may be reordered; fused attention sums over the keys in another order but mixes v rows
 * convexly (its conformance threshold); every other kernel rounds each element once or twice. */
static double kernel_threshold(vkg_kernel k) {
    return k == VKG_KERNEL_MATMUL      ? VKG_CONFORMANCE_NMSE_REDUCTION
           : k == VKG_KERNEL_ATTENTION ? VKG_CONFORMANCE_NMSE_ATTENTION
                                       : VKG_CONFORMANCE_NMSE_ELEMENTWISE;
}

/* Where element `index` of binding b lies in node t's coordinates: the node's row-major position
 * when b lies inside the node's own storage and that storage holds exactly the node. */
static void locate(const vkg_plan *p, vkg_tensor t, const vkg_binding *b, int64_t index, vkg_step_comparison *c) {
    const vkg_placement *pl = &p->place[t];
    const vkg_node *n = vkg_graph_node(p->graph, t);
    int64_t numel = vkg_shape_numel(n->ndim, n->shape);
    if (pl->region == b->region && b->offset >= pl->offset && (uint64_t)numel * 4 == pl->bytes &&
        b->offset + b->bytes <= pl->offset + pl->bytes) {
        int64_t flat = (int64_t)((b->offset - pl->offset) / 4) + index;
        for (int d = n->ndim - 1; d >= 0; d--) {
            c->worst[d] = n->shape[d] ? flat % n->shape[d] : 0;
            flat = n->shape[d] ? flat / n->shape[d] : 0;
        }
        c->worst_ndim = n->ndim;
    } else {
        c->worst[0] = index;
        c->worst_ndim = 1;
    }
}

/* The sessions of one comparison and host buffers for the largest binding. */
typedef struct lockstep {
    vkg_session *test, *ref;
    vkg_session *drift;          /* the free-running copy of test, or NULL                      */
    float *test_buf, *ref_buf, *drift_buf;
    uint64_t buf_bytes;
} lockstep;

static vkg_status read_binding(vkg_session *s, const vkg_binding *b, float *buf, vkg_error *err) {
    return s->device->ops->read(s->impl, b->region, b->offset, buf, b->bytes, err);
}

/* Copies bytes [offset, offset + bytes) of region r from one session to another through buf. */
static vkg_status copy_range(vkg_session *from, vkg_session *to, int r, uint64_t offset, uint64_t bytes, void *buf,
                             uint64_t buf_bytes, vkg_error *err) {
    vkg_status st = VKG_OK;
    for (uint64_t done = 0; st == VKG_OK && done < bytes;) {
        size_t n = (size_t)(bytes - done < buf_bytes ? bytes - done : buf_bytes);
        st = from->device->ops->read(from->impl, r, offset + done, buf, n, err);
        if (st == VKG_OK) st = to->device->ops->write(to->impl, r, offset + done, buf, n, err);
        done += n;
    }
    return st;
}

/* Step i's inputs on test become the reference's: every byte range it binds but the constants
 * (the weights are each device's own, so that a corrupted copy is still found).  Ranges it only
 * writes are copied too: a kernel that writes part of a binding (a KV cache row) or reads what it
 * overwrites (in place) then starts from the reference's bytes as well. */
static vkg_status take_inputs(lockstep *l, int i, vkg_error *err) {
    const vkg_plan *p = l->test->plan;
    const vkg_step *st = &p->steps[i];
    vkg_status s = VKG_OK;
    for (int b = 0; b < vkg_kernel_binding_count(st->kernel) && s == VKG_OK; b++) {
        const vkg_binding *bd = &st->bind[b];
        if (bd->region < 0 || bd->bytes == 0 || p->regions[bd->region].kind == VKG_REGION_CONSTANT) continue;
        s = copy_range(l->ref, l->test, bd->region, bd->offset, bd->bytes, l->ref_buf, l->buf_bytes, err);
    }
    return s;
}

/* The element shown: the first inf/NaN mismatch (the stronger sign), else the largest
 * difference, over every binding the step writes (in practice there is one). */
static void note_worst(const vkg_plan *p, const vkg_step *st, const vkg_binding *bd, const vkg_conformance_diff *d,
                       const float *test_buf, const float *ref_buf, vkg_step_comparison *c) {
    int shown_mismatch = c->nonfinite_mismatches > 0;
    int64_t at = -1;
    if (d->first_mismatch >= 0 && !shown_mismatch) at = d->first_mismatch;
    else if (!shown_mismatch && d->first_mismatch < 0 && d->worst >= 0 &&
             (c->worst_ndim == 0 || d->max_abs_diff > c->max_abs_diff)) at = d->worst;
    if (at >= 0) {
        c->worst_value = test_buf[at];
        c->worst_reference = ref_buf[at];
        locate(p, st->node, bd, at, c);
    }
}

/* Compares what step i wrote on test (and on the drift session) with the reference. */
static vkg_status compare_step(lockstep *l, int i, vkg_step_comparison *c, vkg_error *err) {
    const vkg_plan *p = l->test->plan;
    const vkg_step *st = &p->steps[i];
    const vkg_node *node = vkg_graph_node(p->graph, st->node);
    memset(c, 0, sizeof *c);
    c->step = i;
    snprintf(c->label, sizeof c->label, "%s", st->label);
    const char *name = vkg_tensor_name(p->graph, st->node);
    snprintf(c->node, sizeof c->node, "%s", name ? name : "");
    c->ndim = node->ndim;
    memcpy(c->shape, node->shape, sizeof c->shape);
    c->threshold = kernel_threshold(st->kernel);
    for (int b = 0; b < vkg_kernel_binding_count(st->kernel); b++) {
        const vkg_binding *bd = &st->bind[b];
        if (bd->region < 0 || !bd->writes || bd->bytes == 0 || node->dtype != VKG_F32) continue;
        vkg_status s = read_binding(l->test, bd, l->test_buf, err);
        if (s == VKG_OK) s = read_binding(l->ref, bd, l->ref_buf, err);
        if (s == VKG_OK && l->drift) s = read_binding(l->drift, bd, l->drift_buf, err);
        if (s != VKG_OK) return s;
        size_t n = bd->bytes / 4;
        vkg_conformance_diff d;
        vkg_conformance_compare(l->test_buf, l->ref_buf, n, &d);
        note_worst(p, st, bd, &d, l->test_buf, l->ref_buf, c);
        if (d.max_abs_diff > c->max_abs_diff) c->max_abs_diff = d.max_abs_diff;
        if (d.nmse > c->nmse) c->nmse = d.nmse;
        c->elements += n;
        c->nonfinite_mismatches += d.nonfinite_mismatches;
        if (l->drift) {
            vkg_conformance_compare(l->drift_buf, l->ref_buf, n, &d);
            if (d.nmse > c->drift_nmse) c->drift_nmse = d.nmse;
            if (d.max_abs_diff > c->drift_max_abs_diff) c->drift_max_abs_diff = d.max_abs_diff;
            c->drift_nonfinite_mismatches += d.nonfinite_mismatches;
        }
    }
    c->fails = !(c->nmse <= c->threshold) || c->nonfinite_mismatches > 0;
    return VKG_OK;
}

/* A session of test's plan on test's device sharing test's constants (a corrupted weight stays
 * corrupted) and nothing else, starting from test's inputs, indices and states (a KV cache that
 * test's own prefill filled). */
static vkg_status drift_session_new(lockstep *l, vkg_error *err) {
    vkg_session *t = l->test;
    const vkg_plan *p = t->plan;
    int *map = malloc(((size_t)p->n_regions + 1) * sizeof *map);
    vkg_session *s = calloc(1, sizeof *s);
    if (!map || !s) {
        free(map);
        free(s);
        return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory creating the free-running session");
    }
    for (int r = 0; r < p->n_regions; r++) map[r] = p->regions[r].kind == VKG_REGION_CONSTANT ? r : -1;
    s->device = t->device;
    s->plan = p;
    vkg_status st = t->device->ops->session_new(t->device->impl, p, t->impl, map, &s->impl, err);
    free(map);
    if (st != VKG_OK) {
        free(s);
        return st;
    }
    l->drift = s;
    for (int r = 0; r < p->n_regions && st == VKG_OK; r++) {
        vkg_region_kind k = p->regions[r].kind;
        if (k == VKG_REGION_INPUT || k == VKG_REGION_INDICES || k == VKG_REGION_STATE)
            st = copy_range(t, s, r, 0, p->regions[r].bytes, l->ref_buf, l->buf_bytes, err);
    }
    return st;
}

vkg_status vkg_session_compare(vkg_session *test, vkg_session *reference, vkg_step_comparison **out,
                               int *first_failure, vkg_error *err) {
    if (!test || !reference || !out || !first_failure)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_session_compare: NULL argument");
    *out = NULL;
    *first_failure = -1;
    if (test->plan != reference->plan)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT,
                             "vkg_session_compare: the two sessions must run the same plan (one vkg_plan, compiled "
                             "with the limits of the stricter device)");
    const vkg_plan *p = test->plan;
    uint64_t largest = 4;
    for (int i = 0; i < p->n_steps; i++)
        for (int b = 0; b < VKG_MAX_BINDINGS; b++)
            if (p->steps[i].bind[b].region >= 0 && p->steps[i].bind[b].bytes > largest)
                largest = p->steps[i].bind[b].bytes;
    lockstep l = {.test = test, .ref = reference, .buf_bytes = largest};
    vkg_step_comparison *cmp = calloc((size_t)p->n_steps + 1, sizeof *cmp);
    l.test_buf = malloc(largest);
    l.ref_buf = malloc(largest);
    l.drift_buf = malloc(largest);
    vkg_status st = VKG_OK;
    if (!cmp || !l.test_buf || !l.ref_buf || !l.drift_buf)
        st = vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory comparing steps of up to %llu bytes",
                           (unsigned long long)largest);
    /* the free-running session copies the test session's indices */
    if (st == VKG_OK) st = vkg_session_check_indices(test, err);
    if (st == VKG_OK) st = vkg_session_check_indices(reference, err);
    if (st == VKG_OK) st = drift_session_new(&l, err);
    for (int i = 0; i < p->n_steps && st == VKG_OK; i++) {
        st = take_inputs(&l, i, err);
        if (st == VKG_OK) st = test->device->ops->run_steps(test->impl, i, 1, err);
        if (st == VKG_OK) st = l.drift->device->ops->run_steps(l.drift->impl, i, 1, err);
        if (st == VKG_OK) st = reference->device->ops->run_steps(reference->impl, i, 1, err);
        if (st == VKG_OK) st = compare_step(&l, i, &cmp[i], err);
        if (st == VKG_OK && cmp[i].fails && *first_failure < 0) *first_failure = i;
    }
    vkg_session_free(l.drift);
    free(l.test_buf);
    free(l.ref_buf);
    free(l.drift_buf);
    if (st != VKG_OK) {
        free(cmp);
        *first_failure = -1;
        return st;
    }
    *out = cmp;
    return VKG_OK;
}
