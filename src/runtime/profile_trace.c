/* The profile as a Chrome trace: the JSON "trace event" format that chrome://tracing and
 * Perfetto open.  One track (thread) per profiled session, named by "M" metadata events, holding
 * a span per run around that run's step spans; one more track for the marks (e.g. one span per
 * generated token).  Times are the host's CLOCK_MONOTONIC in microseconds, as recorded. */
#include "runtime/backend.h"
#include "base/error.h"
#include "base/json.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ns as microseconds with three decimals, exactly. */
static void us(FILE *f, uint64_t ns) { fprintf(f, "%llu.%03u", (unsigned long long)(ns / 1000), (unsigned)(ns % 1000)); }

static void span(FILE *f, const char *cat, int tid, uint64_t begin, uint64_t end) {
    fprintf(f, ",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":1,\"tid\":%d,\"ts\":", cat, tid);
    us(f, begin);
    fputs(",\"dur\":", f);
    us(f, end - begin);
}

static void thread_name(FILE *f, int tid, const char *name, int sort) {
    fprintf(f, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":%d,\"args\":{\"name\":", tid);
    vkg_json_write_string(f, name);
    fprintf(f, "}},\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":1,\"tid\":%d,\"args\":{\"sort_index\":%d}}",
            tid, sort);
}

vkg_status vkg_device_profile_write_trace(const vkg_device *d, const char *path, vkg_error *err) {
    const vkg_profile *prof = &d->profile;
    const char *clock = prof->clock ? prof->clock : "no profiled runs";
    const int marks_tid = prof->n_sessions + 1;
    FILE *f = fopen(path, "w");
    if (!f) return vkg_error_set(err, VKG_ERR_IO, "cannot write the trace to %s: %s", path, strerror(errno));
    fputs("{\"displayTimeUnit\":\"ns\",\"otherData\":{\"device\":", f);
    vkg_json_write_string(f, d->name);
    fputs(",\"clock\":", f);
    vkg_json_write_string(f, clock);
    fputs(",\"timestamps\":\"host CLOCK_MONOTONIC, microseconds\"},\"traceEvents\":[\n", f);
    fputs("{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"args\":{\"name\":", f);
    char text[320];
    snprintf(text, sizeof text, "vkgraph: %s", d->name);
    vkg_json_write_string(f, text);
    fputs("}},\n{\"name\":\"process_labels\",\"ph\":\"M\",\"pid\":1,\"args\":{\"labels\":", f);
    vkg_json_write_string(f, clock);
    fputs("}}", f);
    if (prof->n_marks) thread_name(f, marks_tid, "marks", 0);
    for (int id = 1; id <= prof->n_sessions; id++) {
        const char *label = prof->sessions[id - 1].label;
        snprintf(text, sizeof text, "session %d%s%s", id, label[0] ? ": " : "", label);
        thread_name(f, id, text, id);
    }

    int *runs = calloc((size_t)prof->n_sessions + 1, sizeof *runs);
    if (!runs) {
        fclose(f);
        return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory writing the trace");
    }
    uint64_t last_end = 0;
    for (size_t i = 0; i < prof->n; i++) {
        const vkg_profile_event *e = &prof->events[i];
        if (e->end_ns > last_end) last_end = e->end_ns;
        if (e->session == 0) {
            fputs(",\n{\"name\":", f);
            vkg_json_write_string(f, prof->marks[e->step].name);
            span(f, "mark", marks_tid, e->begin_ns, e->end_ns);
            fputc('}', f);
        } else if (e->step < 0) {
            fprintf(f, ",\n{\"name\":\"run %d\"", ++runs[e->session]);
            span(f, "run", e->session, e->begin_ns, e->end_ns);
            fprintf(f, ",\"args\":{\"session\":%d,\"run\":%d,\"steps\":%d}}", e->session, runs[e->session],
                    prof->sessions[e->session - 1].n_steps);
        } else {
            const vkg_profile_step *st = &prof->sessions[e->session - 1].steps[e->step];
            if (strncmp(st->label, st->node, strlen(st->node)) == 0) /* an unnamed node: its op */
                snprintf(text, sizeof text, "%s", st->label);
            else
                snprintf(text, sizeof text, "%s (%s)", st->node, st->label);
            fputs(",\n{\"name\":", f);
            vkg_json_write_string(f, text);
            span(f, "step", e->session, e->begin_ns, e->end_ns);
            fprintf(f, ",\"args\":{\"step\":%d,\"op\":", e->step);
            vkg_json_write_string(f, st->label);
            fputs(",\"node\":", f);
            vkg_json_write_string(f, st->node);
            fputs(",\"shape\":", f);
            vkg_json_write_string(f, st->shape);
            fputs("}}", f);
        }
    }
    free(runs);
    /* A mark still open ends with the last recorded span. */
    if (prof->n_marks && prof->marks[prof->n_marks - 1].end_ns == 0) {
        const vkg_profile_mark *m = &prof->marks[prof->n_marks - 1];
        fputs(",\n{\"name\":", f);
        vkg_json_write_string(f, m->name);
        span(f, "mark", marks_tid, m->begin_ns, last_end > m->begin_ns ? last_end : m->begin_ns);
        fputc('}', f);
    }
    fputs("\n]}\n", f);
    /* an earlier failed write leaves only the error flag; fclose reports the last flush alone */
    int failed = ferror(f);
    if (fclose(f) != 0 || failed)
        return vkg_error_set(err, VKG_ERR_IO, "cannot write the trace to %s: %s", path,
                             strerror(errno ? errno : EIO));
    return VKG_OK;
}
