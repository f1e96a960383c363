/* Sessions: the backend-independent half of running a plan.  Maps graph tensors to the plan's
 * regions, checks sizes, and keeps the per-step profile. */
#include "core/backend.h"
#include "core/error.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

struct vkg_session {
    vkg_device *device;
    const vkg_plan *plan;
    void *impl;
    int profiling;
    uint64_t *step_ns;     /* last run's per-step durations, when profiling */
};

vkg_status vkg_session_new(vkg_device *d, const vkg_plan *p, vkg_session **out, vkg_error *err) {
    *out = NULL;
    if (p->opts.alignment % (d->alignment ? d->alignment : 1) != 0 ||
        (d->max_binding_bytes && p->opts.max_binding_bytes > d->max_binding_bytes))
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT,
                             "plan was compiled for alignment %u and bindings up to %" PRIu64
                             " bytes, but %s needs alignment %u and bindings up to %" PRIu64
                             " bytes: compile with vkg_device_compile_options()",
                             p->opts.alignment, p->opts.max_binding_bytes, d->name, d->alignment,
                             d->max_binding_bytes);
    vkg_session *s = calloc(1, sizeof *s);
    if (!s) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory creating a session");
    s->device = d;
    s->plan = p;
    vkg_status st = d->ops->session_new(d->impl, p, &s->impl, err);
    if (st != VKG_OK) {
        free(s);
        return st;
    }
    *out = s;
    return VKG_OK;
}

void vkg_session_free(vkg_session *s) {
    if (!s) return;
    s->device->ops->session_free(s->impl);
    free(s->step_ns);
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
    return s->device->ops->write(s->impl, pl->region, pl->offset, &value, sizeof value, err);
}

vkg_status vkg_session_run(vkg_session *s, vkg_error *err) {
    return s->device->ops->run(s->impl, s->profiling ? s->step_ns : NULL, err);
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
    if (enable && !s->step_ns) {
        s->step_ns = calloc((size_t)s->plan->n_steps + 1, sizeof *s->step_ns);
        if (!s->step_ns) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory for the profile");
    }
    s->profiling = enable;
    return VKG_OK;
}

static void step_shape(const vkg_plan *p, const vkg_step *st, char *buf, size_t size) {
    const vkg_node *n = vkg_graph_node(p->graph, st->node);
    vkg_shape_str(n->ndim, n->shape, buf, size);
}

vkg_status vkg_session_profile_print(const vkg_session *s, FILE *f) {
    if (!s->step_ns) return VKG_ERR_INVALID_ARGUMENT;
    const vkg_plan *p = s->plan;
    uint64_t total = 0;
    for (int i = 0; i < p->n_steps; i++) total += s->step_ns[i];
    fprintf(f, "%5s  %-22s %-20s %10s %7s\n", "step", "op", "shape", "us", "share");
    for (int i = 0; i < p->n_steps; i++) {
        char shape[64];
        step_shape(p, &p->steps[i], shape, sizeof shape);
        fprintf(f, "%5d  %-22s %-20s %10.1f %6.1f%%\n", i, p->steps[i].label, shape,
                s->step_ns[i] / 1000.0, total ? 100.0 * (double)s->step_ns[i] / (double)total : 0.0);
    }
    fprintf(f, "%5s  %-22s %-20s %10.1f %6.1f%%\n", "", "total", "", total / 1000.0, 100.0);
    return VKG_OK;
}

vkg_status vkg_session_profile_write_trace(const vkg_session *s, const char *path, vkg_error *err) {
    if (!s->step_ns)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "profiling was not enabled for this session");
    FILE *f = fopen(path, "w");
    if (!f) return vkg_error_set(err, VKG_ERR_IO, "cannot write the trace to %s", path);
    const vkg_plan *p = s->plan;
    /* Chrome trace event format: complete events ("ph":"X"), times in microseconds. */
    fprintf(f, "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n");
    fprintf(f, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"args\":{\"name\":\"vkgraph %s\"}}",
            s->device->name);
    double t = 0;
    for (int i = 0; i < p->n_steps; i++) {
        char shape[64];
        step_shape(p, &p->steps[i], shape, sizeof shape);
        double dur = s->step_ns[i] / 1000.0;
        fprintf(f, ",\n{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":1,\"tid\":1,\"ts\":%.3f,"
                   "\"dur\":%.3f,\"args\":{\"step\":%d,\"shape\":\"%s\"}}",
                p->steps[i].label, vkg_kernel_name(p->steps[i].kernel), t, dur, i, shape);
        t += dur;
    }
    fprintf(f, "\n]}\n");
    if (fclose(f) != 0) return vkg_error_set(err, VKG_ERR_IO, "cannot write the trace to %s", path);
    return VKG_OK;
}
