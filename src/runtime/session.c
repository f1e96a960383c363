/* Sessions: the backend-independent half of running a plan.  Maps graph tensors to the plan's
 * regions, checks sizes, and keeps the per-step profile. */
#include "runtime/session.h"
#include "base/error.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* For each region of p: the region of `with`'s plan holding the same constant or state (same
 * kind, name and size; constants also the same host data), or -1. */
static int *match_regions(const vkg_plan *p, const vkg_plan *q) {
    int *map = malloc((size_t)(p->n_regions > 0 ? p->n_regions : 1) * sizeof *map);
    if (!map) return NULL;
    for (int r = 0; r < p->n_regions; r++) {
        const vkg_region *a = &p->regions[r];
        map[r] = -1;
        if (a->kind != VKG_REGION_CONSTANT && a->kind != VKG_REGION_STATE) continue;
        for (int k = 0; k < q->n_regions && map[r] < 0; k++) {
            const vkg_region *b = &q->regions[k];
            if (b->kind == a->kind && b->bytes == a->bytes && b->host == a->host &&
                strcmp(vkg_tensor_name(p->graph, a->tensor), vkg_tensor_name(q->graph, b->tensor)) == 0)
                map[r] = k;
        }
    }
    return map;
}

/* A state of p whose name one of q's states has at another size (-1: none): the two plans'
 * caches would silently be apart (plans built with different slot counts, say). */
static int state_size_mismatch(const vkg_plan *p, const vkg_plan *q) {
    for (int r = 0; r < p->n_regions; r++) {
        const vkg_region *a = &p->regions[r];
        if (a->kind != VKG_REGION_STATE) continue;
        for (int k = 0; k < q->n_regions; k++) {
            const vkg_region *b = &q->regions[k];
            if (b->kind == VKG_REGION_STATE && b->bytes != a->bytes &&
                strcmp(vkg_tensor_name(p->graph, a->tensor), vkg_tensor_name(q->graph, b->tensor)) == 0)
                return r;
        }
    }
    return -1;
}

/* s->indices for s->plan: each slot's index node, every value 0 (as the device's region starts).
 * 0 when short of memory. */
static int hold_indices(vkg_session *s) {
    const vkg_plan *p = s->plan;
    for (int r = 0; r < p->n_regions; r++)
        if (p->regions[r].kind == VKG_REGION_INDICES) s->n_indices = (int)(p->regions[r].bytes / 4);
    if (!s->n_indices) return 1;
    if (!(s->indices = calloc((size_t)s->n_indices, sizeof *s->indices))) return 0;
    for (int k = 0; k < s->n_indices; k++) s->indices[k].node = VKG_NONE;
    for (int i = 0; i < p->graph->n_nodes; i++)
        if (p->graph->nodes[i].op == VKG_OP_INDEX && p->place[i].region >= 0)
            s->indices[p->place[i].offset / 4].node = i;
    return 1;
}

vkg_status vkg_session_new(vkg_device *d, const vkg_plan *p, vkg_session **out, vkg_error *err) {
    return vkg_session_new_shared(d, p, NULL, out, err);
}

vkg_status vkg_session_new_shared(vkg_device *d, const vkg_plan *p, vkg_session *with, vkg_session **out,
                                  vkg_error *err) {
    *out = NULL;
    if (with && with->device != d)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "a session can share memory only with a session on the "
                             "same device (%s, not %s)", d->name, with->device->name);
    if (p->opts.alignment % (d->alignment ? d->alignment : 1) != 0 ||
        (d->max_binding_bytes && p->opts.max_binding_bytes > d->max_binding_bytes))
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT,
                             "plan was compiled for alignment %u and bindings up to %" PRIu64
                             " bytes, but %s needs alignment %u and bindings up to %" PRIu64
                             " bytes: compile with vkg_device_compile_options()",
                             p->opts.alignment, p->opts.max_binding_bytes, d->name, d->alignment,
                             d->max_binding_bytes);
    if (p->opts.read_16bit && !d->read_16bit)
        for (int r = 0; r < p->n_regions; r++)
            if (vkg_dtype_is_16bit(p->regions[r].dtype))
                return vkg_error_set(err, VKG_ERR_UNSUPPORTED,
                                     "plan reads the %s constant '%s' as stored, but %s cannot read 16-bit data: "
                                     "compile with vkg_device_compile_options() (it widens them to f32)",
                                     vkg_dtype_name(p->regions[r].dtype),
                                     vkg_tensor_name(p->graph, p->regions[r].tensor), d->name);
    const int mismatch = with ? state_size_mismatch(p, with->plan) : -1;
    if (mismatch >= 0)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "state '%s' has %" PRIu64 " bytes here and another size in "
                             "the session shared with: sessions share states of one name and size",
                             vkg_tensor_name(p->graph, p->regions[mismatch].tensor), p->regions[mismatch].bytes);
    vkg_session *s = calloc(1, sizeof *s);
    if (!s) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory creating a session");
    s->device = d;
    s->plan = p;
    int *map = NULL;
    if (!hold_indices(s) || (with && !(map = match_regions(p, with->plan)))) {
        free(s->indices);
        free(s);
        return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory creating a session");
    }
    vkg_status st = d->ops->session_new(d->impl, p, with ? with->impl : NULL, map, &s->impl, err);
    free(map);
    if (st != VKG_OK) {
        free(s->indices);
        free(s);
        return st;
    }
    *out = s;
    if (d->opts.profile && (st = vkg_session_enable_profiling(s, 1, err)) != VKG_OK) {
        vkg_session_free(s);
        *out = NULL;
        return st;
    }
    return VKG_OK;
}

void vkg_session_free(vkg_session *s) {
    if (!s) return;
    s->device->ops->session_free(s->impl);
    free(s->times.begin_ns);
    free(s->times.end_ns);
    free(s->indices);
    free(s);
}

/* The region that holds tensor t, checked against the kind the caller expects. */
static vkg_status find_region(const vkg_session *s, vkg_tensor t, vkg_region_kind kind,
                              const char *what, size_t bytes, int check_bytes, int *region,
                              vkg_error *err) {
    const vkg_plan *p = s->plan;
    if (t < 0 || t >= p->graph->n_nodes)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "tensor %d is not in the graph", (int)t);
    for (int r = 0; r < p->n_regions; r++) {
        if (p->regions[r].kind != kind || p->regions[r].tensor != t) continue;
        if (check_bytes && bytes != p->regions[r].bytes)
            return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT,
                                 "%s '%s' holds %" PRIu64 " bytes, but %zu were given", what,
                                 vkg_tensor_name(p->graph, t), p->regions[r].bytes, bytes);
        *region = r;
        return VKG_OK;
    }
    return vkg_error_set(err, VKG_ERR_NOT_FOUND, "tensor '%s' is not a%s %s of the plan",
                         vkg_tensor_name(p->graph, t), kind == VKG_REGION_INPUT ? "n" : "", what);
}

vkg_status vkg_session_set_input(vkg_session *s, vkg_tensor input, const void *data, size_t bytes,
                                 vkg_error *err) {
    int r = -1;
    vkg_status st = find_region(s, input, VKG_REGION_INPUT, "input", bytes, 1, &r, err);
    if (st != VKG_OK) return st;
    return s->device->ops->write(s->impl, r, 0, data, bytes, err);
}

vkg_status vkg_session_set_index(vkg_session *s, vkg_tensor index, int32_t value, vkg_error *err) {
    const vkg_plan *p = s->plan;
    if (index < 0 || index >= p->graph->n_nodes || p->graph->nodes[index].op != VKG_OP_INDEX)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "tensor %d is not a runtime index", (int)index);
    const vkg_placement *pl = &p->place[index];
    if (pl->region < 0) return VKG_OK; /* no step reads it */
    vkg_status st = s->device->ops->write(s->impl, pl->region, pl->offset, &value, sizeof value, err);
    if (st == VKG_OK) s->indices[pl->offset / 4].value = value;
    return st;
}

vkg_status vkg_session_check_indices(const vkg_session *s, vkg_error *err) {
    const vkg_plan *p = s->plan;
    for (int k = 0; k < s->n_indices; k++) {
        const vkg_tensor i = s->indices[k].node;
        if (i == VKG_NONE) continue;
        const vkg_placement *pl = &p->place[i];
        const int32_t value = s->indices[k].value;
        if (value < pl->index_min || value > pl->index_max)
            return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT,
                                 "runtime index '%s' holds %d, outside the %" PRId64 " .. %" PRId64 " its uses take "
                                 "(each write it places stays inside its state)",
                                 vkg_tensor_name(p->graph, i), (int)value, pl->index_min, pl->index_max);
    }
    return VKG_OK;
}

vkg_status vkg_session_run(vkg_session *s, vkg_error *err) {
    vkg_status st = vkg_session_check_indices(s, err);
    if (st != VKG_OK) return st;
    if (!s->profile_id) return s->device->ops->run(s->impl, NULL, err);
    uint64_t begin = vkg_clock_ns();
    st = s->device->ops->run(s->impl, &s->times, err);
    uint64_t end = vkg_clock_ns();
    if (st == VKG_OK) vkg_profile_add_run(&s->device->profile, s->profile_id, begin, end, &s->times);
    return st;
}

vkg_status vkg_session_get_output(vkg_session *s, vkg_tensor output, void *data, size_t bytes,
                                  vkg_error *err) {
    int r = -1;
    vkg_status st = find_region(s, output, VKG_REGION_OUTPUT, "output", bytes, 1, &r, err);
    if (st != VKG_OK) return st;
    return s->device->ops->read(s->impl, r, 0, data, bytes, err);
}

vkg_status vkg_session_get_state(vkg_session *s, vkg_tensor state, void *data, size_t bytes,
                                 vkg_error *err) {
    int r = -1;
    vkg_status st = find_region(s, state, VKG_REGION_STATE, "state", bytes, 1, &r, err);
    if (st != VKG_OK) return st;
    return s->device->ops->read(s->impl, r, 0, data, bytes, err);
}

vkg_status vkg_session_set_state(vkg_session *s, vkg_tensor state, const void *data, size_t bytes,
                                 vkg_error *err) {
    int r = -1;
    vkg_status st = find_region(s, state, VKG_REGION_STATE, "state", bytes, 1, &r, err);
    if (st != VKG_OK) return st;
    if (!data) return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_session_set_state: NULL data");
    return s->device->ops->write(s->impl, r, 0, data, bytes, err);
}

/* count blocks of `bytes`, `stride` apart, from byte src_offset of region `from` to byte
 * dst_offset of region `to` (which may be the same), checked: within both, at multiples of 4,
 * not overlapping. */
static vkg_status copy_blocks(vkg_session *s, int from, size_t src_offset, int to, size_t dst_offset, size_t stride,
                              size_t count, size_t bytes, vkg_error *err) {
    const vkg_plan *p = s->plan;
    const uint64_t span = count ? (count - 1) * (uint64_t)stride + bytes : 0;
    /* within one state the two spans must lie apart (one slot's blocks and another's do) */
    const uint64_t lo = src_offset < dst_offset ? src_offset : dst_offset, hi = src_offset < dst_offset ? dst_offset : src_offset;
    const int overlap = from == to && span && lo + span > hi;
    if (count > UINT32_MAX || (count > 1 && bytes > stride) || src_offset + span > p->regions[from].bytes ||
        dst_offset + span > p->regions[to].bytes || overlap || src_offset % 4 || dst_offset % 4)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "copying state: %zu blocks of %zu bytes, %zu apart, from "
                             "byte %zu of '%s' to byte %zu of '%s': within the states, at multiples of 4, and not "
                             "overlapping", count, bytes, stride, src_offset,
                             vkg_tensor_name(p->graph, p->regions[from].tensor), dst_offset,
                             vkg_tensor_name(p->graph, p->regions[to].tensor));
    if (!span) return VKG_OK;
    return s->device->ops->copy(s->impl, from, src_offset, to, dst_offset, stride, (uint32_t)count, bytes, err);
}

vkg_status vkg_session_copy_state(vkg_session *s, vkg_tensor src, vkg_tensor dst, size_t stride, size_t count,
                                  size_t bytes, vkg_error *err) {
    int from = -1, to = -1;
    vkg_status st = find_region(s, src, VKG_REGION_STATE, "state", 0, 0, &from, err);
    if (st == VKG_OK) st = find_region(s, dst, VKG_REGION_STATE, "state", 0, 0, &to, err);
    if (st != VKG_OK) return st;
    if (from == to || s->plan->regions[from].bytes != s->plan->regions[to].bytes)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_session_copy_state: from '%s' to '%s': two different "
                             "states of the same size", vkg_tensor_name(s->plan->graph, src),
                             vkg_tensor_name(s->plan->graph, dst));
    return copy_blocks(s, from, 0, to, 0, stride, count, bytes, err);
}

vkg_status vkg_session_copy_state_at(vkg_session *s, vkg_tensor src, size_t src_offset, vkg_tensor dst,
                                     size_t dst_offset, size_t stride, size_t count, size_t bytes, vkg_error *err) {
    int from = -1, to = -1;
    vkg_status st = find_region(s, src, VKG_REGION_STATE, "state", 0, 0, &from, err);
    if (st == VKG_OK) st = find_region(s, dst, VKG_REGION_STATE, "state", 0, 0, &to, err);
    if (st != VKG_OK) return st;
    return copy_blocks(s, from, src_offset, to, dst_offset, stride, count, bytes, err);
}

vkg_status vkg_session_reset_state(vkg_session *s, vkg_error *err) {
    const vkg_plan *p = s->plan;
    for (int r = 0; r < p->n_regions; r++) {
        if (p->regions[r].kind != VKG_REGION_STATE) continue;
        vkg_status st = s->device->ops->read(s->impl, r, 0, NULL, p->regions[r].bytes, err);
        if (st != VKG_OK) return st;
    }
    return VKG_OK;
}

vkg_status vkg_session_enable_profiling(vkg_session *s, int enable, vkg_error *err) {
    if (!enable) {
        s->profile_id = 0;
        return VKG_OK;
    }
    if (s->profile_id) return VKG_OK;
    if (!s->times.begin_ns) {
        s->times.begin_ns = calloc((size_t)s->plan->n_steps + 1, sizeof *s->times.begin_ns);
        s->times.end_ns = calloc((size_t)s->plan->n_steps + 1, sizeof *s->times.end_ns);
        if (!s->times.begin_ns || !s->times.end_ns)
            return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory for the profile");
    }
    /* A session profiled again after a pause gets a new number: its runs stay apart. */
    return vkg_profile_add_session(&s->device->profile, s->plan, s->label, &s->profile_id, err);
}

void vkg_session_set_label(vkg_session *s, const char *label) {
    snprintf(s->label, sizeof s->label, "%s", label ? label : "");
    if (s->profile_id) vkg_profile_set_label(&s->device->profile, s->profile_id, s->label);
}
