/* Per-step timings of profiled runs: kept per device, printed as a table, written as a Chrome
 * trace (the JSON "trace event" format that chrome://tracing and Perfetto open). */
#include "core/profile.h"

#include "core/backend.h"
#include "core/error.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A long generation profiles every token: keep at most this many events (about 100 MB). */
#define MAX_EVENTS (1u << 20)

double vkg_profile_now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

void vkg_profile_add_run(vkg_profile *prof, int session, const vkg_plan *p, double start_us, const uint64_t *step_ns) {
    if (prof->n == 0 && prof->dropped == 0) prof->origin_us = start_us;
    double t = start_us - prof->origin_us;
    for (int i = 0; i < p->n_steps; i++) {
        double dur = (double)step_ns[i] / 1e3;
        if (prof->n == prof->cap) {
            size_t cap = prof->cap ? 2 * prof->cap : 1024;
            vkg_profile_event *ev = cap <= MAX_EVENTS ? realloc(prof->events, cap * sizeof *ev) : NULL;
            if (!ev) {
                prof->dropped += (size_t)(p->n_steps - i);
                return;
            }
            prof->events = ev;
            prof->cap = cap;
        }
        vkg_profile_event *e = &prof->events[prof->n++];
        const vkg_node *n = vkg_graph_node(p->graph, p->steps[i].node);
        e->session = session;
        e->step = i;
        snprintf(e->label, sizeof e->label, "%s", p->steps[i].label);
        vkg_shape_str(n->ndim, n->shape, e->shape, sizeof e->shape);
        e->start_us = t;
        e->dur_us = dur;
        t += dur;
    }
}

void vkg_profile_free(vkg_profile *prof) {
    free(prof->events);
    memset(prof, 0, sizeof *prof);
}

/* The table: for each profiled session, each step's mean time over its runs and its share. */
vkg_status vkg_device_profile_print(const vkg_device *d, FILE *f) {
    const vkg_profile *prof = &d->profile;
    if (prof->n == 0) {
        fprintf(f, "profile: no profiled runs\n");
        return VKG_OK;
    }
    for (int s = 1; s <= prof->sessions; s++) {
        int steps = 0;
        double total = 0;
        for (size_t i = 0; i < prof->n; i++)
            if (prof->events[i].session == s) {
                if (prof->events[i].step + 1 > steps) steps = prof->events[i].step + 1;
                total += prof->events[i].dur_us;
            }
        if (steps == 0) continue;
        double *sum = calloc((size_t)steps, sizeof *sum);
        int runs = 0;
        if (!sum) return VKG_ERR_OUT_OF_MEMORY;
        const vkg_profile_event **first = calloc((size_t)steps, sizeof *first);
        if (!first) {
            free(sum);
            return VKG_ERR_OUT_OF_MEMORY;
        }
        for (size_t i = 0; i < prof->n; i++) {
            const vkg_profile_event *e = &prof->events[i];
            if (e->session != s) continue;
            sum[e->step] += e->dur_us;
            if (!first[e->step]) first[e->step] = e;
            if (e->step == 0) runs++;
        }
        fprintf(f, "profile of session %d on %s: %d steps, %d run%s, %.1f us per run\n", s, d->name, steps, runs,
                runs == 1 ? "" : "s", runs ? total / runs : 0.0);
        fprintf(f, "%5s  %-26s %-18s %12s %7s\n", "step", "op", "shape", "us (mean)", "share");
        for (int i = 0; i < steps; i++)
            if (first[i])
                fprintf(f, "%5d  %-26s %-18s %12.1f %6.1f%%\n", i, first[i]->label, first[i]->shape,
                        runs ? sum[i] / runs : 0.0, total > 0 ? 100.0 * sum[i] / total : 0.0);
        free(sum);
        free(first);
    }
    if (prof->dropped) fprintf(f, "profile: %zu later step times were not kept (limit %u)\n", prof->dropped, MAX_EVENTS);
    return VKG_OK;
}

vkg_status vkg_device_profile_write_trace(const vkg_device *d, const char *path, vkg_error *err) {
    const vkg_profile *prof = &d->profile;
    FILE *f = fopen(path, "w");
    if (!f) return vkg_error_set(err, VKG_ERR_IO, "cannot write the trace to %s", path);
    fprintf(f, "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n");
    fprintf(f, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"args\":{\"name\":\"vkgraph: %s\"}}", d->name);
    for (size_t i = 0; i < prof->n; i++) {
        const vkg_profile_event *e = &prof->events[i];
        /* labels and shapes hold letters, digits, [ ] , + ( ) / and spaces: nothing to escape */
        fprintf(f, ",\n{\"name\":\"%s\",\"cat\":\"step\",\"ph\":\"X\",\"pid\":1,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,"
                   "\"args\":{\"step\":%d,\"shape\":\"%s\"}}",
                e->label, e->session, e->start_us, e->dur_us, e->step, e->shape);
    }
    fprintf(f, "\n]}\n");
    if (fclose(f) != 0) return vkg_error_set(err, VKG_ERR_IO, "cannot write the trace to %s", path);
    return VKG_OK;
}
