/* Recording the profile: sessions, runs with their steps, and marks (see profile.h). */
#include "runtime/profile.h"

#include "runtime/backend.h"
#include "base/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A long generation profiles every token: keep at most this many events (24 MB). */
#define MAX_EVENTS (1u << 20)

vkg_status vkg_profile_add_session(vkg_profile *prof, const vkg_plan *p, const char *label, int *id,
                                   vkg_error *err) {
    vkg_profile_session *grown = realloc(prof->sessions, ((size_t)prof->n_sessions + 1) * sizeof *grown);
    if (!grown) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory for the profile");
    prof->sessions = grown;
    vkg_profile_session *s = &grown[prof->n_sessions];
    memset(s, 0, sizeof *s);
    s->steps = calloc(p->n_steps ? (size_t)p->n_steps : 1, sizeof *s->steps);
    if (!s->steps) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory for the profile");
    s->n_steps = p->n_steps;
    for (int i = 0; i < p->n_steps; i++) {
        const vkg_node *n = vkg_graph_node(p->graph, p->steps[i].node);
        snprintf(s->steps[i].label, sizeof s->steps[i].label, "%s", p->steps[i].label);
        snprintf(s->steps[i].node, sizeof s->steps[i].node, "%s", vkg_tensor_name(p->graph, p->steps[i].node));
        vkg_shape_str(n->ndim, n->shape, s->steps[i].shape, sizeof s->steps[i].shape);
    }
    snprintf(s->label, sizeof s->label, "%s", label ? label : "");
    *id = ++prof->n_sessions;
    return VKG_OK;
}

void vkg_profile_set_label(vkg_profile *prof, int id, const char *label) {
    if (id >= 1 && id <= prof->n_sessions)
        snprintf(prof->sessions[id - 1].label, sizeof prof->sessions[id - 1].label, "%s", label ? label : "");
}

/* Room for `more` events; 0 when the cap (or memory) is reached. */
static int reserve(vkg_profile *prof, size_t more) {
    if (prof->n + more <= prof->cap) return 1;
    size_t cap = prof->cap ? prof->cap : 1024;
    while (cap < prof->n + more) cap *= 2;
    vkg_profile_event *ev = cap <= MAX_EVENTS ? realloc(prof->events, cap * sizeof *ev) : NULL;
    if (!ev) return 0;
    prof->events = ev;
    prof->cap = cap;
    return 1;
}

static uint64_t clamp(uint64_t t, uint64_t lo, uint64_t hi) { return t < lo ? lo : t > hi ? hi : t; }

void vkg_profile_add_run(vkg_profile *prof, int id, uint64_t begin_ns, uint64_t end_ns, const vkg_step_times *t) {
    const int n = prof->sessions[id - 1].n_steps;
    prof->clock = t->clock;
    if (!reserve(prof, (size_t)n + 1)) {
        prof->dropped += (size_t)n + 1;
        return;
    }
    prof->events[prof->n++] = (vkg_profile_event){.session = id, .step = -1, .begin_ns = begin_ns, .end_ns = end_ns};
    for (int i = 0; i < n; i++) {
        uint64_t b = clamp(t->begin_ns[i], begin_ns, end_ns), e = clamp(t->end_ns[i], b, end_ns);
        prof->events[prof->n++] = (vkg_profile_event){.session = id, .step = i, .begin_ns = b, .end_ns = e};
    }
}

void vkg_profile_free(vkg_profile *prof) {
    for (int i = 0; i < prof->n_sessions; i++) free(prof->sessions[i].steps);
    free(prof->sessions);
    free(prof->events);
    free(prof->marks);
    memset(prof, 0, sizeof *prof);
}

/* Marks are kept only where something is profiled, so that an unprofiled generation does not
 * collect one per token for nothing. */
vkg_status vkg_device_profile_mark(vkg_device *d, const char *name, vkg_error *err) {
    vkg_profile *prof = &d->profile;
    if (!d->opts.profile && prof->n_sessions == 0) return VKG_OK;
    uint64_t now = vkg_clock_ns();
    if (prof->n_marks > 0 && prof->marks[prof->n_marks - 1].end_ns == 0) {
        vkg_profile_mark *open = &prof->marks[prof->n_marks - 1];
        open->end_ns = now > open->begin_ns ? now : open->begin_ns + 1;
        if (reserve(prof, 1))
            prof->events[prof->n++] = (vkg_profile_event){.session = 0, .step = prof->n_marks - 1,
                                                          .begin_ns = open->begin_ns, .end_ns = open->end_ns};
        else
            prof->dropped++;
    }
    if (!name) return VKG_OK;
    vkg_profile_mark *grown = realloc(prof->marks, ((size_t)prof->n_marks + 1) * sizeof *grown);
    if (!grown) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory for the profile");
    prof->marks = grown;
    vkg_profile_mark *m = &grown[prof->n_marks++];
    snprintf(m->name, sizeof m->name, "%s", name);
    m->begin_ns = now;
    m->end_ns = 0;
    return VKG_OK;
}

size_t vkg_device_profile_event_count(const vkg_device *d) { return d ? d->profile.n : 0; }

/* A step's label is its kernel, then "+" and what was fused into it ("matmul+bias+gelu"), and "[i/n]"
 * for a part of a split step. */
static int label_is_kernel(const char *label, const char *kernel) {
    const size_t n = strlen(kernel);
    return strncmp(label, kernel, n) == 0 && (label[n] == '\0' || label[n] == '+' || label[n] == '[');
}

double vkg_device_profile_kernel_seconds(const vkg_device *d, size_t from, const char *kernel, int *steps) {
    double ns = 0;
    int n_steps = 0;
    const vkg_profile *prof = d ? &d->profile : NULL;
    for (size_t i = from; prof && kernel && i < prof->n; i++) {
        const vkg_profile_event *e = &prof->events[i];
        if (e->session < 1 || e->session > prof->n_sessions || e->step < 0) continue;
        const vkg_profile_session *s = &prof->sessions[e->session - 1];
        if (e->step >= s->n_steps) continue;
        n_steps++;
        if (label_is_kernel(s->steps[e->step].label, kernel)) ns += (double)(e->end_ns - e->begin_ns);
    }
    if (steps) *steps = n_steps;
    return ns / 1e9;
}
