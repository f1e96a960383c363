/* Randomized invariants of the compiler's memory planner, over a few hundred seeded random graphs
 * (tests/support/random_graph.c), each compiled with several option sets:
 *   (a) no two arena tensors whose lifetimes overlap share a byte, except an in-place pair: the
 *       step is marked in place and it is the operand's last use;
 *   (b) running the plan on the CPU gives every output (and every state) the reference
 *       interpreter computes, node by node, with no arena at all;
 *   (c) lower_bound_bytes <= arena_bytes <= naive_bytes;
 *   (d) in place only where safe: an element-wise step (or a matmul writing over its residual)
 *       over an arena operand that is no output and that no later step reads;
 * and every binding lies inside its region at an aligned offset, and steps with no barrier
 * between them never write bytes another of them touches.
 * Lifetimes are recomputed here from the graph (which stored tensors each step reads), not taken
 * from the planner, so a planner that misjudges a lifetime is caught by (a) and by (b). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/plan.h"
#include "support/random_graph.h"
#include "support/ref_eval.h"

enum { N_GRAPHS = 300, MAX_REPORTS = 6 };

typedef struct variant {
    const char *name;
    int fuse, in_place;
    uint32_t alignment;
    uint64_t max_binding_bytes; /* 0: the default */
} variant;

static const variant variants[] = {
    {"align4", 1, 1, 4, 0},     /* the tightest packing; below the CPU device's alignment: not run */
    {"align16", 1, 1, 16, 0},
    {"default", 1, 1, 0, 0},
    {"unfused", 0, 0, 16, 0},
    {"split", 1, 1, 16, 128}, /* tiny bindings: matmuls and tables split into blocks */
};
enum { N_VARIANTS = sizeof variants / sizeof variants[0] };

static int failures;

/* Reports a broken invariant (the first few in full) and counts it. */
static void report(const vkg_plan *p, uint64_t seed, const char *variant_name, const char *fmt, ...) {
    failures++;
    if (failures > MAX_REPORTS) return;
    fprintf(stderr, "seed %llu, %s: ", (unsigned long long)seed, variant_name);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    if (p && failures == 1) {
        vkg_graph_dump(p->graph, stderr, VKG_DUMP_TEXT);
        vkg_plan_dump(p, stderr, VKG_DUMP_TEXT);
    }
}

/* ---- what each step reads, from the graph ------------------------------------------------- */

/* Marks the stored tensors whose values t is made of: t itself when it has storage, else (a view,
 * a node fused into its consumer) what it is computed from.  A write_at's value is its state. */
static void mark_stored(const vkg_plan *p, vkg_tensor t, char *marks) {
    const vkg_node *n = &p->graph->nodes[t];
    if (p->place[t].region >= 0) {
        marks[t] = 1;
        return;
    }
    if (n->op == VKG_OP_WRITE_AT) {
        mark_stored(p, n->src[0], marks);
        return;
    }
    for (int s = 0; s < VKG_MAX_SRC; s++)
        if (n->src[s] != VKG_NONE) mark_stored(p, n->src[s], marks);
}

/* The stored tensors step s reads. */
static void step_reads(const vkg_plan *p, int s, char *marks) {
    const vkg_node *n = &p->graph->nodes[p->steps[s].node];
    memset(marks, 0, (size_t)p->graph->n_nodes);
    for (int k = 0; k < VKG_MAX_SRC; k++) {
        if (n->src[k] == VKG_NONE || (n->op == VKG_OP_WRITE_AT && k == 0)) continue;
        mark_stored(p, n->src[k], marks);
    }
}

typedef struct lifetimes {
    int *first, *last; /* per node: steps that write / last touch it; -1 when none */
} lifetimes;

static int compute_lifetimes(const vkg_plan *p, lifetimes *lt) {
    int n = p->graph->n_nodes;
    lt->first = malloc((size_t)n * sizeof *lt->first);
    lt->last = malloc((size_t)n * sizeof *lt->last);
    char *marks = malloc((size_t)n);
    if (!lt->first || !lt->last || !marks) {
        free(marks);
        return -1;
    }
    for (int t = 0; t < n; t++) lt->first[t] = lt->last[t] = -1;
    for (int s = 0; s < p->n_steps; s++) {
        /* a step computing a concat's part in place writes that concat too */
        for (vkg_tensor w = p->steps[s].node; w != VKG_NONE; w = p->place[w].within) {
            if (lt->first[w] < 0) lt->first[w] = s;
            lt->last[w] = s;
        }
        step_reads(p, s, marks);
        for (int t = 0; t < n; t++)
            if (marks[t]) lt->last[t] = s;
    }
    free(marks);
    return 0;
}

static void free_lifetimes(lifetimes *lt) {
    free(lt->first);
    free(lt->last);
}

static int is_output(const vkg_plan *p, vkg_tensor t) { return p->graph->nodes[t].output_name != NULL; }

/* ---- the static invariants ----------------------------------------------------------------- */

static void check_bindings(const vkg_plan *p, uint64_t seed, const char *vn) {
    for (int s = 0; s < p->n_steps; s++) {
        const vkg_step *st = &p->steps[s];
        for (int b = 0; b < VKG_MAX_BINDINGS; b++) {
            const vkg_binding *bd = &st->bind[b];
            if (bd->region < 0) continue;
            if (b >= vkg_kernel_binding_count(st->kernel) || bd->region >= p->n_regions) {
                report(p, seed, vn, "step %d (%s) binding %d: region %d of %d, slot of %d", s, st->label, b,
                       bd->region, p->n_regions, vkg_kernel_binding_count(st->kernel));
                continue;
            }
            if (bd->offset % p->opts.alignment != 0 || bd->offset + bd->bytes > p->regions[bd->region].bytes ||
                bd->bytes == 0 || bd->bytes > p->opts.max_binding_bytes)
                report(p, seed, vn, "step %d (%s) binding %d: [%llu, +%llu) in region %d of %llu bytes, alignment %u",
                       s, st->label, b, (unsigned long long)bd->offset, (unsigned long long)bd->bytes, bd->region,
                       (unsigned long long)p->regions[bd->region].bytes, p->opts.alignment);
        }
    }
}

static int bindings_conflict(const vkg_binding *x, const vkg_binding *y) {
    return x->region >= 0 && x->region == y->region && (x->writes || y->writes) && x->offset < y->offset + y->bytes &&
           y->offset < x->offset + x->bytes;
}

/* Steps between barriers may run concurrently on a GPU: none of them may write bytes another one
 * reads or writes. */
static void check_barriers(const vkg_plan *p, uint64_t seed, const char *vn) {
    int since = 0; /* the first step of the current run without a barrier */
    for (int s = 0; s < p->n_steps; s++) {
        if (p->steps[s].barrier) since = s;
        for (int e = since; e < s; e++)
            for (int i = 0; i < VKG_MAX_BINDINGS; i++)
                for (int j = 0; j < VKG_MAX_BINDINGS; j++)
                    if (bindings_conflict(&p->steps[s].bind[i], &p->steps[e].bind[j]))
                        report(p, seed, vn, "steps %d (%s) and %d (%s) touch the same bytes with no barrier between",
                               e, p->steps[e].label, s, p->steps[s].label);
    }
}

static int bytes_overlap(const vkg_placement *a, const vkg_placement *b) {
    return a->offset < b->offset + b->bytes && b->offset < a->offset + a->bytes;
}

/* Whether t is computed in place inside u (a part of concat u, or of a concat inside u), its bytes
 * within u's. */
static int placed_inside(const vkg_plan *p, vkg_tensor t, vkg_tensor u) {
    const vkg_placement *pt = &p->place[t], *pu = &p->place[u];
    if (pt->offset < pu->offset || pt->offset + pt->bytes > pu->offset + pu->bytes) return 0;
    for (vkg_tensor w = pt->within; w != VKG_NONE; w = p->place[w].within)
        if (w == u) return 1;
    return 0;
}

/* (a): arena tensors alive at the same step never share bytes, in-place pairs and the parts of a
 * concat computed inside it aside. */
static void check_overlaps(const vkg_plan *p, const lifetimes *lt, uint64_t seed, const char *vn) {
    int n = p->graph->n_nodes;
    for (int t = 0; t < n; t++) {
        const vkg_placement *pt = &p->place[t];
        if (pt->region != 0) continue;
        if (lt->first[t] < 0) report(p, seed, vn, "arena tensor %d (%s) is written by no step", t, vkg_tensor_name(p->graph, t));
        /* a concat's part computed in place starts where the part does, aligned or not */
        if ((pt->within == VKG_NONE && pt->offset % p->opts.alignment) || pt->offset + pt->bytes > p->stats.arena_bytes)
            report(p, seed, vn, "arena tensor %d at [%llu, +%llu) in an arena of %llu", t,
                   (unsigned long long)pt->offset, (unsigned long long)pt->bytes, (unsigned long long)p->stats.arena_bytes);
        for (int u = t + 1; u < n; u++) {
            const vkg_placement *pu = &p->place[u];
            if (pu->region != 0 || !bytes_overlap(pt, pu)) continue;
            if (lt->last[t] < lt->first[u] || lt->last[u] < lt->first[t]) continue;
            if (placed_inside(p, t, u) || placed_inside(p, u, t)) continue;
            /* u computed in place over t: exactly t's bytes, at t's last step, marked so */
            int s = lt->first[u];
            int in_place = lt->last[t] == s && p->steps[s].in_place && p->steps[s].node == u &&
                           pu->offset == pt->offset && pu->bytes == pt->bytes;
            if (!in_place)
                report(p, seed, vn, "tensors %d (%s, steps %d..%d) and %d (%s, steps %d..%d) share bytes "
                       "[%llu, +%llu) / [%llu, +%llu)", t, vkg_tensor_name(p->graph, t), lt->first[t], lt->last[t], u,
                       vkg_tensor_name(p->graph, u), lt->first[u], lt->last[u], (unsigned long long)pt->offset,
                       (unsigned long long)pt->bytes, (unsigned long long)pu->offset, (unsigned long long)pu->bytes);
        }
    }
}

static int elementwise_op(vkg_op op) {
    return op == VKG_OP_ADD || op == VKG_OP_MUL || op == VKG_OP_MASK || op == VKG_OP_SCALE || op == VKG_OP_GELU ||
           op == VKG_OP_GELU_ERF || op == VKG_OP_QUICK_GELU || op == VKG_OP_SILU || op == VKG_OP_RELU ||
           op == VKG_OP_MASK_CAUSAL;
}

/* (d): each in-place step is element-wise (or a matmul over its residual) and overwrites an
 * arena operand that is no output and that no later step reads. */
static void check_in_place(const vkg_plan *p, const lifetimes *lt, uint64_t seed, const char *vn) {
    char *marks = malloc((size_t)p->graph->n_nodes);
    assert_non_null(marks);
    int counted = 0;
    for (int s = 0; s < p->n_steps; s++) {
        const vkg_step *st = &p->steps[s];
        if (!st->in_place) continue;
        counted++;
        vkg_tensor out = st->node;
        const vkg_node *n = &p->graph->nodes[out];
        int kernel_ok = (st->kernel == VKG_KERNEL_BINARY || st->kernel == VKG_KERNEL_UNARY) ? elementwise_op(n->op)
                      : st->kernel == VKG_KERNEL_MATMUL && (st->params.matmul.flags & VKG_MATMUL_RESIDUAL);
        if (!kernel_ok || p->place[out].region != 0 || is_output(p, out)) {
            report(p, seed, vn, "step %d (%s) runs in place but is not element-wise into the arena", s, st->label);
            continue;
        }
        step_reads(p, s, marks);
        int operands = 0;
        for (int x = 0; x < p->graph->n_nodes; x++) {
            if (!marks[x] || p->place[x].region != 0 || !bytes_overlap(&p->place[x], &p->place[out])) continue;
            operands++;
            if (is_output(p, x) || lt->last[x] != s || p->place[x].offset != p->place[out].offset)
                report(p, seed, vn, "step %d (%s) overwrites %d (%s) which is read until step %d", s, st->label, x,
                       vkg_tensor_name(p->graph, x), lt->last[x]);
        }
        if (operands != 1)
            report(p, seed, vn, "step %d (%s) runs in place over %d operands", s, st->label, operands);
    }
    if (counted != p->stats.in_place_steps)
        report(p, seed, vn, "%d steps marked in place, stats say %d", counted, p->stats.in_place_steps);
    free(marks);
}

static void check_plan(const vkg_plan *p, uint64_t seed, const char *vn) {
    const vkg_memory_stats *ms = &p->stats;
    if (ms->arena_bytes > ms->naive_bytes || ms->arena_bytes < ms->lower_bound_bytes ||
        ms->arena_bytes != p->regions[0].bytes || ms->steps != p->n_steps)
        report(p, seed, vn, "memory: arena %llu, naive %llu, lower bound %llu, region 0 %llu",
               (unsigned long long)ms->arena_bytes, (unsigned long long)ms->naive_bytes,
               (unsigned long long)ms->lower_bound_bytes, (unsigned long long)p->regions[0].bytes);
    lifetimes lt;
    assert_int_equal(compute_lifetimes(p, &lt), 0);
    check_bindings(p, seed, vn);
    check_barriers(p, seed, vn);
    check_overlaps(p, &lt, seed, vn);
    check_in_place(p, &lt, seed, vn);
    free_lifetimes(&lt);
}

/* ---- (b): running the plan against the reference ------------------------------------------- */

static double max_abs(const float *x, int64_t n) {
    double m = 0.0;
    for (int64_t i = 0; i < n; i++)
        if (isfinite(x[i]) && fabs(x[i]) > m) m = fabs(x[i]);
    return m;
}

static void compare(const vkg_plan *p, const char *what, vkg_tensor t, const float *got, const float *want,
                    uint64_t seed, const char *vn) {
    int64_t n = vkg_tensor_numel(p->graph, t);
    /* 1e-4 relative to the entry or to the tensor's scale, whichever is larger: entries near zero
     * come out of cancellations (and layernorms of nearly equal values magnify float rounding),
     * while a planner bug gives errors of the size of the values themselves */
    int64_t bad = ref_compare(got, want, n, 1e-4, 1e-4 * fmax(1.0, max_abs(want, n)));
    if (bad >= 0)
        report(p, seed, vn, "%s '%s' element %lld: got %.9g, want %.9g", what, vkg_tensor_name(p->graph, t),
               (long long)bad, got[bad], want[bad]);
}

static void run_and_compare(vkg_device *dev, const random_graph *rg, const vkg_plan *p, float **ref, uint64_t seed,
                            const char *vn) {
    vkg_session *s = NULL;
    vkg_error err;
    if (vkg_session_new(dev, p, &s, &err) != VKG_OK) {
        report(p, seed, vn, "session: %s", err.message);
        return;
    }
    vkg_status st = VKG_OK;
    for (int i = 0; i < rg->n_inputs && st == VKG_OK; i++) /* dead inputs too: the API accepts them */
        st = vkg_session_set_input(s, rg->inputs[i], rg->input_data[i], rg->input_bytes[i], &err);
    for (int i = 0; i < rg->n_indices && st == VKG_OK; i++)
        st = vkg_session_set_index(s, rg->indices[i], rg->index_values[i], &err);
    if (st == VKG_OK) st = vkg_session_run(s, &err);
    if (st != VKG_OK) {
        report(p, seed, vn, "run: %s", err.message);
        vkg_session_free(s);
        return;
    }
    for (int i = 0; i < rg->n_outputs + rg->n_states; i++) {
        int is_state = i >= rg->n_outputs;
        vkg_tensor t = is_state ? rg->states[i - rg->n_outputs] : rg->outputs[i];
        size_t bytes = (size_t)vkg_tensor_numel(p->graph, t) * sizeof(float);
        float *got = malloc(bytes);
        assert_non_null(got);
        st = is_state ? vkg_session_get_state(s, t, got, bytes, &err) : vkg_session_get_output(s, t, got, bytes, &err);
        if (st == VKG_OK)
            compare(p, is_state ? "state" : "output", t, got, is_state ? ref_final_state(p->graph, ref, t) : ref[t],
                    seed, vn);
        else
            report(p, seed, vn, "reading '%s': %s", vkg_tensor_name(p->graph, t), err.message);
        free(got);
    }
    vkg_session_free(s);
}

/* One graph through every variant: compile, check, and (when a device is given) run. */
static void check_seed(vkg_device *dev, uint64_t seed) {
    random_graph rg;
    if (random_graph_build(&rg, seed, 6 + (int)(seed % 30)) != 0) {
        report(NULL, seed, "build", "the generator made an invalid graph");
        random_graph_free(&rg);
        return;
    }
    float **ref = NULL;
    if (dev) {
        ref_inputs in;
        assert_int_equal(ref_inputs_init(&in, rg.g), 0);
        random_graph_ref_inputs(&rg, &in);
        assert_int_equal(ref_eval(rg.g, &in, &ref), 0);
        ref_inputs_free(&in);
    }
    for (int v = 0; v < N_VARIANTS; v++) {
        vkg_compile_options opts;
        vkg_compile_options_default(&opts);
        opts.fuse = variants[v].fuse;
        opts.in_place = variants[v].in_place;
        if (variants[v].alignment) opts.alignment = variants[v].alignment;
        if (variants[v].max_binding_bytes) opts.max_binding_bytes = variants[v].max_binding_bytes;
        vkg_plan *p = NULL;
        vkg_error err;
        vkg_status st = vkg_plan_compile(rg.g, &opts, &p, &err);
        if (st == VKG_ERR_UNSUPPORTED && variants[v].max_binding_bytes) continue; /* e.g. a batched split */
        if (st != VKG_OK) {
            report(NULL, seed, variants[v].name, "compile: %s", err.message);
            continue;
        }
        check_plan(p, seed, variants[v].name);
        if (dev) {
            vkg_compile_options need = opts;
            vkg_device_compile_options(dev, &need);
            if (need.alignment == opts.alignment) run_and_compare(dev, &rg, p, ref, seed, variants[v].name);
        }
        vkg_plan_free(p);
    }
    ref_free(rg.g, ref);
    random_graph_free(&rg);
}

static void test_planner_static(void **state) {
    (void)state;
    failures = 0;
    for (uint64_t seed = 1; seed <= N_GRAPHS; seed++) check_seed(NULL, seed);
    if (failures) fprintf(stderr, "%d broken invariants\n", failures);
    assert_int_equal(failures, 0);
}

static void test_planner_runs(void **state) {
    (void)state;
    vkg_device *dev = NULL;
    vkg_error err;
    vkg_device_options dopts = {.cpu_threads = 1, .quiet = 1};
    if (vkg_device_open("cpu", &dopts, &dev, &err) != VKG_OK) {
        fprintf(stderr, "cpu device: %s\n", err.message);
        fail();
    }
    failures = 0;
    for (uint64_t seed = 1; seed <= N_GRAPHS; seed++) check_seed(dev, seed);
    vkg_device_free(dev);
    if (failures) fprintf(stderr, "%d broken invariants or wrong values\n", failures);
    assert_int_equal(failures, 0);
}

/* The generator itself: the same seed gives the same graph, and it covers what it claims to. */
static void test_generator_coverage(void **state) {
    (void)state;
    int ops[VKG_OP_COUNT] = {0}, transposed = 0, outputs_read = 0, dead = 0;
    for (uint64_t seed = 1; seed <= N_GRAPHS; seed++) {
        random_graph a, b;
        assert_int_equal(random_graph_build(&a, seed, 6 + (int)(seed % 30)), 0);
        assert_int_equal(random_graph_build(&b, seed, 6 + (int)(seed % 30)), 0);
        assert_int_equal(a.g->n_nodes, b.g->n_nodes);
        int *readers = calloc((size_t)a.g->n_nodes, sizeof *readers);
        assert_non_null(readers);
        for (int i = 0; i < a.g->n_nodes; i++) {
            const vkg_node *n = &a.g->nodes[i];
            assert_int_equal(n->op, b.g->nodes[i].op);
            ops[n->op]++;
            if (n->op == VKG_OP_MATMUL && n->attr.matmul.flags) transposed++;
            for (int s = 0; s < VKG_MAX_SRC; s++)
                if (n->src[s] != VKG_NONE) readers[n->src[s]]++;
        }
        for (int i = 0; i < a.g->n_nodes; i++) {
            const vkg_node *n = &a.g->nodes[i];
            outputs_read += n->output_name && readers[i] > 0;
            dead += readers[i] == 0 && !n->output_name && n->op != VKG_OP_WRITE_AT && n->op >= VKG_OP_MATMUL;
        }
        free(readers);
        random_graph_free(&a);
        random_graph_free(&b);
    }
    for (int op = VKG_OP_INPUT; op < VKG_OP_COUNT; op++) {
        if (ops[op] < 10) fprintf(stderr, "op %s made %d times\n", vkg_op_name((vkg_op)op), ops[op]);
        assert_true(ops[op] >= 10);
    }
    assert_true(transposed >= 20);
    assert_true(outputs_read >= 20);
    assert_true(dead >= 20);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_generator_coverage),
        cmocka_unit_test(test_planner_static),
        cmocka_unit_test(test_planner_runs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
