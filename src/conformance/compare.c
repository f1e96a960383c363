/* vkg_session_compare: one plan run step by step on two devices, every step's output compared
 * by the conformance suite's measure and threshold (vkgraph_conformance.h). */
#include "vkgraph_conformance.h"
#include "base/error.h"
#include "runtime/session.h"

#include <stdlib.h>
#include <string.h>

/* A matmul's and attention's long sums may be reordered; every other kernel rounds each element
 * once or twice. */
static double kernel_threshold(vkg_kernel k) {
    return k == VKG_KERNEL_MATMUL || k == VKG_KERNEL_ATTENTION ? VKG_CONFORMANCE_NMSE_REDUCTION
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

/* Compares what step i wrote on both sessions; test_buf and ref_buf hold at least the largest
 * binding the step writes. */
static vkg_status compare_step(vkg_session *test, vkg_session *ref, int i, float *test_buf, float *ref_buf,
                               vkg_step_comparison *c, vkg_error *err) {
    const vkg_plan *p = test->plan;
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
        vkg_status s = test->device->ops->read(test->impl, bd->region, bd->offset, test_buf, bd->bytes, err);
        if (s == VKG_OK) s = ref->device->ops->read(ref->impl, bd->region, bd->offset, ref_buf, bd->bytes, err);
        if (s != VKG_OK) return s;
        size_t n = bd->bytes / 4;
        vkg_conformance_diff d;
        vkg_conformance_compare(test_buf, ref_buf, n, &d);
        /* The element shown: the first inf/NaN mismatch (the stronger sign), else the largest
         * difference, over every binding the step writes (in practice there is one). */
        int shown_mismatch = c->nonfinite_mismatches > 0;
        int64_t at = -1;
        if (d.first_mismatch >= 0 && !shown_mismatch) at = d.first_mismatch;
        else if (!shown_mismatch && d.first_mismatch < 0 && d.worst >= 0 &&
                 (c->worst_ndim == 0 || d.max_abs_diff > c->max_abs_diff)) at = d.worst;
        if (at >= 0) {
            c->worst_value = test_buf[at];
            c->worst_reference = ref_buf[at];
            locate(p, st->node, bd, at, c);
        }
        if (d.max_abs_diff > c->max_abs_diff) c->max_abs_diff = d.max_abs_diff;
        if (d.nmse > c->nmse) c->nmse = d.nmse;
        c->elements += n;
        c->nonfinite_mismatches += d.nonfinite_mismatches;
    }
    c->fails = !(c->nmse <= c->threshold) || c->nonfinite_mismatches > 0;
    return VKG_OK;
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
            if (p->steps[i].bind[b].region >= 0 && p->steps[i].bind[b].writes && p->steps[i].bind[b].bytes > largest)
                largest = p->steps[i].bind[b].bytes;
    vkg_step_comparison *cmp = calloc((size_t)p->n_steps + 1, sizeof *cmp);
    float *test_buf = malloc(largest), *ref_buf = malloc(largest);
    vkg_status st = VKG_OK;
    if (!cmp || !test_buf || !ref_buf)
        st = vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory comparing steps of up to %llu bytes",
                           (unsigned long long)largest);
    for (int i = 0; i < p->n_steps && st == VKG_OK; i++) {
        st = test->device->ops->run_steps(test->impl, i, 1, err);
        if (st == VKG_OK) st = reference->device->ops->run_steps(reference->impl, i, 1, err);
        if (st == VKG_OK) st = compare_step(test, reference, i, test_buf, ref_buf, &cmp[i], err);
        if (st == VKG_OK && cmp[i].fails && *first_failure < 0) *first_failure = i;
    }
    free(test_buf);
    free(ref_buf);
    if (st != VKG_OK) {
        free(cmp);
        *first_failure = -1;
        return st;
    }
    *out = cmp;
    return VKG_OK;
}
