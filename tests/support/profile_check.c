#include "support/profile_check.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/json.h"

#include <stdio.h>
#include <string.h>

int trace_thread(const trace_info *info, const char *name) {
    for (int i = 0; i < info->n_threads; i++)
        if (strcmp(info->thread[i], name) == 0) return i;
    return -1;
}

static int thread_index(const trace_info *info, int tid) {
    for (int i = 0; i < info->n_threads; i++)
        if (info->tid[i] == tid) return i;
    return -1;
}

static const char *str(const vkg_json *obj, const char *key) {
    const char *s = vkg_json_string(vkg_json_get(obj, key), NULL);
    return s ? s : "";
}

void trace_check(const char *path, trace_info *out) {
    memset(out, 0, sizeof *out);
    vkg_error err = {0};
    vkg_json *root = NULL;
    if (vkg_json_parse_file(path, &root, &err) != VKG_OK) fail_msg("trace: %s", err.message);
    snprintf(out->clock, sizeof out->clock, "%s", str(vkg_json_get(root, "otherData"), "clock"));
    const vkg_json *events = vkg_json_get(root, "traceEvents");
    assert_non_null(events);
    /* metadata first: the track names */
    for (size_t i = 0; i < vkg_json_length(events); i++) {
        const vkg_json *e = vkg_json_at(events, i);
        if (strcmp(str(e, "ph"), "M") != 0 || strcmp(str(e, "name"), "thread_name") != 0) continue;
        assert_true(out->n_threads < TRACE_MAX_THREADS);
        int tid = (int)vkg_json_number(vkg_json_get(e, "tid"));
        if (thread_index(out, tid) >= 0) fail_msg("trace: tid %d named twice", tid);
        out->tid[out->n_threads] = tid;
        snprintf(out->thread[out->n_threads++], sizeof out->thread[0], "%s", str(vkg_json_get(e, "args"), "name"));
    }
    double run_end[TRACE_MAX_THREADS], run_begin[TRACE_MAX_THREADS], last_end[TRACE_MAX_THREADS];
    for (int t = 0; t < TRACE_MAX_THREADS; t++) run_begin[t] = run_end[t] = last_end[t] = -1;
    for (size_t i = 0; i < vkg_json_length(events); i++) {
        const vkg_json *e = vkg_json_at(events, i);
        if (strcmp(str(e, "ph"), "X") != 0) continue;
        int tid = (int)vkg_json_number(vkg_json_get(e, "tid")), t = thread_index(out, tid);
        const char *cat = str(e, "cat"), *name = str(e, "name");
        double ts = vkg_json_number(vkg_json_get(e, "ts")), dur = vkg_json_number(vkg_json_get(e, "dur"));
        if (t < 0) fail_msg("trace: '%s' on tid %d, which has no thread_name", name, tid);
        if (!(ts > 0 && dur >= 0)) fail_msg("trace: '%s' at %f for %f us", name, ts, dur);
        trace_span sp = {.tid = tid, .ts = ts, .dur = dur};
        snprintf(sp.name, sizeof sp.name, "%s", name);
        if (strcmp(cat, "step") == 0) {
            /* inside the run written before it on its track (ts are exact to the ns) */
            if (run_begin[t] < 0 || ts < run_begin[t] || ts + dur > run_end[t] + 1e-3)
                fail_msg("trace: step '%s' [%f, %f] is outside its run [%f, %f]", name, ts, ts + dur, run_begin[t],
                         run_end[t]);
            out->step_us[t] += dur;
            out->n_steps++;
        } else if (strcmp(cat, "run") == 0 || strcmp(cat, "mark") == 0) {
            if (ts < last_end[t] - 1e-3)
                fail_msg("trace: %s '%s' at %f starts before the previous one on its track ends (%f)", cat, name, ts,
                         last_end[t]);
            last_end[t] = ts + dur;
            if (cat[0] == 'r') {
                run_begin[t] = ts, run_end[t] = ts + dur;
                assert_true(out->n_runs < TRACE_MAX_SPANS);
                out->runs[out->n_runs++] = sp;
            } else {
                assert_true(out->n_marks < TRACE_MAX_SPANS);
                out->marks[out->n_marks++] = sp;
            }
        } else {
            fail_msg("trace: '%s' has category '%s'", name, cat);
        }
    }
    vkg_json_free(root);
}

void profile_summary_parse(const char *text, const char *title, const char *by, profile_summary *out) {
    memset(out, 0, sizeof *out);
    char head[160];
    snprintf(head, sizeof head, "%s by %s:\n", title, by);
    const char *p = strstr(text, head);
    if (!p) fail_msg("no summary \"%s\" in:\n%s", head, text);
    p = strchr(p, '\n') + 1;          /* the column heads */
    p = strchr(p, '\n') + 1;
    for (;;) {
        const char *eol = strchr(p, '\n');
        if (!eol || eol - p < 27 || strncmp(p, "  ", 2) != 0) fail_msg("summary \"%s\": bad line at %.60s", head, p);
        char key[40];
        int n = 24;
        while (n > 0 && p[2 + n - 1] == ' ') n--;
        snprintf(key, sizeof key, "%.*s", n, p + 2);
        if (strcmp(key, "total") == 0) {
            double share;
            if (sscanf(p + 26, "%lf %lf%% %ld", &out->total_us, &share, &out->count) != 3)
                fail_msg("summary \"%s\": bad total line %.80s", head, p);
            return;
        }
        assert_true(out->n < 64);
        profile_group *g = &out->group[out->n++];
        snprintf(g->key, sizeof g->key, "%s", key);
        if (sscanf(p + 26, "%lf %lf%% %ld %lf", &g->total_us, &g->share, &g->count, &g->mean_us) != 4)
            fail_msg("summary \"%s\": bad line %.80s", head, p);
        p = eol + 1;
    }
}

const profile_group *profile_summary_find(const profile_summary *s, const char *key) {
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->group[i].key, key) == 0) return &s->group[i];
    return NULL;
}
