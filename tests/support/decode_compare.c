#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "support/decode_compare.h"

#include <stdio.h>
#include <stdlib.h>

static void check(vkg_status st, const vkg_error *err, const char *what) {
    if (st != VKG_OK) fail_msg("%s: %s", what, err->message);
}

static vkg_graph *build(vkg_model *m, int tokens, int n_ctx, int seqs, int first_slot, int n_slots) {
    vkg_model_graph_options o;
    vkg_model_graph_options_default(&o, tokens);
    o.n_ctx = n_ctx;
    o.seqs = seqs;
    o.first_slot = first_slot;
    o.n_slots = n_slots;
    vkg_graph *g = NULL;
    vkg_error err = {0};
    check(vkg_model_build_graph(m, &o, &g, &err), &err, "building a graph");
    return g;
}

static vkg_plan *compile_for_both(vkg_graph *g, vkg_device *test, vkg_device *ref) {
    vkg_compile_options o;
    vkg_compile_options_default(&o);
    vkg_device_compile_options(test, &o);
    vkg_device_compile_options(ref, &o);
    vkg_plan *p = NULL;
    vkg_error err = {0};
    check(vkg_plan_compile(g, &o, &p, &err), &err, "compiling");
    return p;
}

static void set_input(vkg_session *s, const vkg_graph *g, const char *name, const int32_t *v, int n) {
    vkg_error err = {0};
    check(vkg_session_set_input(s, vkg_find(g, name), v, (size_t)n * sizeof *v, &err), &err, name);
}

/* The first `length` ids into slot r of s's caches, by a session of pp run on d by itself. */
static void prefill(vkg_device *d, vkg_plan *pp, const vkg_graph *pg, vkg_session *s, const int32_t *ids,
                    const int32_t *positions, int length) {
    vkg_session *ps = NULL;
    vkg_error err = {0};
    check(vkg_session_new_shared(d, pp, s, &ps, &err), &err, "a prefill session");
    set_input(ps, pg, "ids", ids, length);
    set_input(ps, pg, "positions", positions, length);
    check(vkg_session_set_index(ps, vkg_find(pg, "pos"), 0, &err), &err, "pos");
    if (vkg_session_run(ps, &err) != VKG_OK) fail_msg("prefill on %s: %s", vkg_device_name(d), err.message);
    vkg_session_free(ps);
}

/* The step's rows: ids, positions and each row's index "pos.<r>". */
static void set_rows(vkg_session *s, const vkg_graph *g, const int32_t *ids, const int32_t *positions, int rows) {
    set_input(s, g, "ids", ids, rows);
    set_input(s, g, "positions", positions, rows);
    vkg_error err = {0};
    for (int r = 0; r < rows; r++) {
        char name[32];
        snprintf(name, sizeof name, "pos.%d", r);
        if (vkg_find(g, name) == VKG_NONE) fail_msg("the step has no index %s", name);
        check(vkg_session_set_index(s, vkg_find(g, name), positions[r], &err), &err, name);
    }
}

void decode_compare_setup(decode_compare *d, vkg_model *m, vkg_device *test, vkg_device *ref, const int32_t *ids,
                          const int *lengths, int rows, int n_ctx) {
    d->graph = build(m, rows, n_ctx, rows, 0, rows);
    d->plan = compile_for_both(d->graph, test, ref);
    vkg_error err = {0};
    d->test = d->ref = NULL;
    check(vkg_session_new(test, d->plan, &d->test, &err), &err, "the step's session on the device under test");
    check(vkg_session_new(ref, d->plan, &d->ref, &err), &err, "the step's session on the reference");
    int32_t *positions = malloc((size_t)n_ctx * sizeof *positions), *row_ids = malloc((size_t)rows * sizeof *row_ids),
            *row_pos = malloc((size_t)rows * sizeof *row_pos);
    assert_true(positions && row_ids && row_pos);
    for (int i = 0; i < n_ctx; i++) positions[i] = i;
    for (int r = 0; r < rows; r++) {
        assert_true(lengths[r] >= 1 && lengths[r] < n_ctx);
        vkg_graph *pg = build(m, lengths[r], n_ctx, 1, r, rows);
        vkg_plan *pp = compile_for_both(pg, test, ref);
        prefill(test, pp, pg, d->test, ids, positions, lengths[r]);
        prefill(ref, pp, pg, d->ref, ids, positions, lengths[r]);
        vkg_plan_free(pp);
        vkg_graph_free(pg);
        row_ids[r] = ids[lengths[r]];
        row_pos[r] = lengths[r];
    }
    set_rows(d->test, d->graph, row_ids, row_pos, rows);
    set_rows(d->ref, d->graph, row_ids, row_pos, rows);
    free(positions);
    free(row_ids);
    free(row_pos);
}

void decode_compare_free(decode_compare *d) {
    vkg_session_free(d->test);
    vkg_session_free(d->ref);
    vkg_plan_free(d->plan);
    vkg_graph_free(d->graph);
}
