/* The profile as tables: for each profiled session, each step's mean time over its runs and its
 * share; then, when asked, the same time summed by layer ("h.<i>." names) or by op kind. */
#include "runtime/backend.h"
#include "base/error.h"
#include "graph/graph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct group {
    char key[40];
    double total_us;
    long count;
} group;

/* The op kind of a step: its label before what was fused ("softmax+scale+causal" -> "softmax")
 * and before a split's part number ("embedding[1/2]" -> "embedding"). */
static void op_kind(const char *label, char *out, size_t size) {
    size_t n = strcspn(label, "+[");
    snprintf(out, size, "%.*s", (int)n, label);
}

/* The layer group of step i: "layer 3" (layers numbered from 0, as every command numbers them); steps named outside a layer are "embed" before
 * the first layer's steps, "head" after the last, "other" between (or when nothing has a layer). */
static void layer_group(const vkg_profile_session *s, int i, char *out, size_t size) {
    int first = -1, last = -1;
    for (int k = 0; k < s->n_steps; k++)
        if (vkg_name_layer(s->steps[k].node) >= 0) {
            if (first < 0) first = k;
            last = k;
        }
    int layer = vkg_name_layer(s->steps[i].node);
    if (layer >= 0) snprintf(out, size, "layer %d", layer);
    else snprintf(out, size, "%s", first < 0 ? "other" : i < first ? "embed" : i > last ? "head" : "other");
}

static int by_total(const void *a, const void *b) {
    double x = ((const group *)a)->total_us, y = ((const group *)b)->total_us;
    return (x < y) - (x > y);
}

/* One summary: groups in order of first appearance (layers), or by time (ops). */
static vkg_status print_groups(FILE *f, const vkg_profile_session *s, const double *sum_us, int runs, int by_layer,
                               const char *title) {
    group *g = calloc(s->n_steps ? (size_t)s->n_steps : 1, sizeof *g);
    if (!g) return VKG_ERR_OUT_OF_MEMORY;
    int n = 0;
    double total = 0;
    for (int i = 0; i < s->n_steps; i++) {
        char key[40];
        if (by_layer) layer_group(s, i, key, sizeof key);
        else op_kind(s->steps[i].label, key, sizeof key);
        int k = 0;
        while (k < n && strcmp(g[k].key, key) != 0) k++;
        if (k == n) snprintf(g[n++].key, sizeof g[k].key, "%s", key);
        g[k].total_us += sum_us[i];
        g[k].count += runs;
        total += sum_us[i];
    }
    if (!by_layer) qsort(g, (size_t)n, sizeof *g, by_total);
    fprintf(f, "%s by %s:\n", title, by_layer ? "layer" : "op");
    fprintf(f, "  %-24s %14s %7s %8s %12s\n", by_layer ? "layer" : "op", "us (total)", "share", "count", "us (mean)");
    for (int k = 0; k < n; k++)
        fprintf(f, "  %-24s %14.1f %6.1f%% %8ld %12.1f\n", g[k].key, g[k].total_us,
                total > 0 ? 100.0 * g[k].total_us / total : 0.0, g[k].count,
                g[k].count ? g[k].total_us / (double)g[k].count : 0.0);
    fprintf(f, "  %-24s %14.1f %6.1f%% %8ld\n", "total", total, total > 0 ? 100.0 : 0.0, (long)s->n_steps * runs);
    free(g);
    return VKG_OK;
}

static vkg_status print_session(const vkg_device *d, int id, unsigned group_by, FILE *f) {
    const vkg_profile *prof = &d->profile;
    const vkg_profile_session *s = &prof->sessions[id - 1];
    double *sum = calloc(s->n_steps ? (size_t)s->n_steps : 1, sizeof *sum);
    if (!sum) return VKG_ERR_OUT_OF_MEMORY;
    int runs = 0;
    double total = 0;
    for (size_t i = 0; i < prof->n; i++) {
        const vkg_profile_event *e = &prof->events[i];
        if (e->session != id) continue;
        if (e->step < 0) {
            runs++;
            continue;
        }
        double us = (double)(e->end_ns - e->begin_ns) / 1e3;
        sum[e->step] += us;
        total += us;
    }
    char title[96];
    snprintf(title, sizeof title, "session %d%s%s", id, s->label[0] ? ": " : "", s->label);
    vkg_status st = VKG_OK;
    if (runs > 0) {
        fprintf(f, "profile of %s on %s: %d steps, %d run%s, %.1f us per run\n", title, d->name, s->n_steps, runs,
                runs == 1 ? "" : "s", total / runs);
        /* the node column as wide as its longest name (the Llama family's run to 40 characters) */
        int node_width = 24;
        for (int i = 0; i < s->n_steps; i++)
            if ((int)strlen(s->steps[i].node) > node_width) node_width = (int)strlen(s->steps[i].node);
        fprintf(f, "%5s  %-26s %-*s %-18s %12s %7s\n", "step", "op", node_width, "node", "shape", "us (mean)", "share");
        for (int i = 0; i < s->n_steps; i++)
            fprintf(f, "%5d  %-26s %-*s %-18s %12.1f %6.1f%%\n", i, s->steps[i].label, node_width, s->steps[i].node,
                    s->steps[i].shape, sum[i] / runs, total > 0 ? 100.0 * sum[i] / total : 0.0);
        if (st == VKG_OK && (group_by & VKG_PROFILE_BY_LAYER)) st = print_groups(f, s, sum, runs, 1, title);
        if (st == VKG_OK && (group_by & VKG_PROFILE_BY_OP)) st = print_groups(f, s, sum, runs, 0, title);
    }
    free(sum);
    return st;
}

vkg_status vkg_device_profile_print(const vkg_device *d, unsigned group_by, FILE *f) {
    const vkg_profile *prof = &d->profile;
    if (prof->n == 0) {
        fprintf(f, "profile: no profiled runs\n");
        return VKG_OK;
    }
    for (int id = 1; id <= prof->n_sessions; id++) {
        vkg_status st = print_session(d, id, group_by, f);
        if (st != VKG_OK) return st;
    }
    if (prof->clock) fprintf(f, "profile: %s\n", prof->clock);
    if (prof->dropped) fprintf(f, "profile: %zu later events were not kept (the profile is full)\n", prof->dropped);
    return VKG_OK;
}
