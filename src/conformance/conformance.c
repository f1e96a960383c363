/* Running the conformance suite: each case is compiled once for both devices' limits, run on the
 * reference and on the device under test, and the outputs compared by normalized mean squared
 * error and by where the non-finite values are. */
#include "vkgraph_conformance.h"
#include "conformance/conformance_cases.h"
#include "base/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void vkg_conformance_options_default(vkg_conformance_options *o) {
    *o = (vkg_conformance_options){.level = VKG_CONFORMANCE_DEFAULT, .seed = 20240229};
}

/* ---- op groups ------------------------------------------------------------------------------- */

/* A group is every case of one op name, wherever it stands in the list (the cases generated from
 * a table are followed by model-sized ones of the same op); its first case is its identity. */
static int first_of_its_op(int i) {
    for (int k = 0; k < i; k++)
        if (strcmp(vkg_conformance_case_def(k)->op, vkg_conformance_case_def(i)->op) == 0) return 0;
    return 1;
}

static int group_first_case(int group) {
    int seen = -1;
    for (int i = 0; i < vkg_conformance_case_count(); i++) {
        if (first_of_its_op(i)) seen++;
        if (seen == group) return i;
    }
    return -1;
}

int vkg_conformance_op_count(void) {
    int n = 0;
    while (group_first_case(n) >= 0) n++;
    return n;
}

const char *vkg_conformance_op_name(int i) {
    int first = i >= 0 ? group_first_case(i) : -1;
    return first >= 0 ? vkg_conformance_case_def(first)->op : NULL;
}

/* ---- the comparison -------------------------------------------------------------------------- */

enum { KIND_FINITE = 0, KIND_POS_INF, KIND_NEG_INF, KIND_NAN };

static int value_kind(float x) {
    if (isnan(x)) return KIND_NAN;
    if (isinf(x)) return x > 0 ? KIND_POS_INF : KIND_NEG_INF;
    return KIND_FINITE;
}

void vkg_conformance_compare(const float *dut, const float *ref, size_t n, vkg_conformance_diff *d) {
    double err = 0, norm = 0;
    *d = (vkg_conformance_diff){.first_mismatch = -1, .worst = -1};
    for (size_t i = 0; i < n; i++) {
        int kd = value_kind(dut[i]), kr = value_kind(ref[i]);
        if (kd != kr) {
            if (d->first_mismatch < 0) d->first_mismatch = (int64_t)i;
            d->nonfinite_mismatches++;
            continue;
        }
        if (kd != KIND_FINITE) continue;
        double diff = (double)dut[i] - (double)ref[i];
        if (d->worst < 0 || fabs(diff) > d->max_abs_diff) d->max_abs_diff = fabs(diff), d->worst = (int64_t)i;
        err += diff * diff;
        norm += (double)ref[i] * (double)ref[i];
    }
    /* An all-zero reference (e.g. fully masked softmax rows) is matched only by zeros. */
    d->nmse = norm > 0 ? err / norm : err > 0 ? INFINITY : 0.0;
}

int vkg_conformance_diff_passes(const vkg_conformance_diff *d, double threshold) {
    return d->nmse <= threshold && d->nonfinite_mismatches == 0;
}

/* ---- running one case ------------------------------------------------------------------------ */

static double now_ms(void) { return vkg_clock_seconds() * 1e3; }

static size_t output_bytes(const conf_build *b, int i) {
    return (size_t)vkg_tensor_numel(b->g, b->out[i]) * sizeof(float);
}

/* One run of the plan on d; outs[i] receive the outputs. */
static vkg_status run_on(vkg_device *d, const vkg_plan *p, const conf_build *b, float **outs, double *ms,
                         vkg_error *err) {
    vkg_session *s = NULL;
    vkg_status st = vkg_session_new(d, p, &s, err);
    for (int i = 0; i < b->n_data && st == VKG_OK; i++)
        if (b->data[i].is_input) st = vkg_session_set_input(s, b->data[i].tensor, b->data[i].host, b->data[i].bytes, err);
        else if (b->data[i].is_state)
            st = vkg_session_set_state(s, b->data[i].tensor, b->data[i].host, b->data[i].bytes, err);
    for (int i = 0; i < b->n_index && st == VKG_OK; i++)
        st = vkg_session_set_index(s, b->index[i], b->index_value[i], err);
    if (st == VKG_OK) {
        double t0 = now_ms();
        st = vkg_session_run(s, err);
        *ms = now_ms() - t0;
    }
    for (int i = 0; i < b->n_out && st == VKG_OK; i++)
        st = vkg_session_get_output(s, b->out[i], outs[i], output_bytes(b, i), err);
    vkg_session_free(s);
    return st;
}

static void free_outputs(float **outs, int n) {
    for (int i = 0; i < n; i++) free(outs[i]);
}

/* Runs a built case on both devices and fills c.  Returns VKG_ERR_OUT_OF_MEMORY only for the host
 * running out; every other problem is the case's failure, written to c->error. */
static vkg_status run_case(vkg_device *ref, vkg_device *dut, const conf_build *b, const vkg_conformance_options *o,
                           vkg_conformance_case *c) {
    vkg_compile_options co;
    vkg_compile_options_default(&co);
    vkg_device_compile_options(dut, &co);
    vkg_device_compile_options(ref, &co);
    vkg_plan *plan = NULL;
    vkg_error err = {0};
    if (vkg_plan_compile(b->g, &co, &plan, &err) != VKG_OK) {
        snprintf(c->error, sizeof c->error, "compile: %s", err.message);
        return err.status == VKG_ERR_OUT_OF_MEMORY ? VKG_ERR_OUT_OF_MEMORY : VKG_OK;
    }
    float *ref_out[CONF_MAX_OUTPUTS] = {0}, *dut_out[CONF_MAX_OUTPUTS] = {0};
    vkg_status st = VKG_OK;
    for (int i = 0; i < b->n_out; i++) {
        ref_out[i] = malloc(output_bytes(b, i) + 1);
        dut_out[i] = malloc(output_bytes(b, i) + 1);
        if (!ref_out[i] || !dut_out[i]) st = VKG_ERR_OUT_OF_MEMORY;
    }
    if (st == VKG_OK && run_on(ref, plan, b, ref_out, &c->ref_ms, &err) != VKG_OK)
        snprintf(c->error, sizeof c->error, "reference %.200s: %s", vkg_device_name(ref), err.message);
    else if (st == VKG_OK && run_on(dut, plan, b, dut_out, &c->dut_ms, &err) != VKG_OK)
        snprintf(c->error, sizeof c->error, "%.200s: %s", vkg_device_name(dut), err.message);
    for (int i = 0; st == VKG_OK && !c->error[0] && i < b->n_out; i++) {
        size_t n = output_bytes(b, i) / sizeof(float);
        if (o->perturb != 0)
            for (size_t k = 0; k < n; k++)
                dut_out[i][k] = (float)(dut_out[i][k] + o->perturb * (fabs(dut_out[i][k]) + 1.0));
        vkg_conformance_diff d;
        vkg_conformance_compare(dut_out[i], ref_out[i], n, &d);
        if (!(d.nmse <= c->nmse)) c->nmse = d.nmse;   /* the worst output; NaN never hides */
        if (c->first_mismatch < 0) c->first_mismatch = d.first_mismatch;
        c->nonfinite_mismatches += d.nonfinite_mismatches;
    }
    free_outputs(ref_out, b->n_out);
    free_outputs(dut_out, b->n_out);
    vkg_plan_free(plan);
    return st;
}

static vkg_conformance_case *report_add(vkg_conformance_report *r) {
    if (r->n_cases == r->cap_cases) {
        int cap = r->cap_cases ? 2 * r->cap_cases : 64;
        vkg_conformance_case *c = realloc(r->cases, (size_t)cap * sizeof *c);
        if (!c) return NULL;
        r->cases = c;
        r->cap_cases = cap;
    }
    vkg_conformance_case *c = &r->cases[r->n_cases++];
    memset(c, 0, sizeof *c);
    return c;
}

/* Builds and runs the case def at sweep point pt, appending its result to r. */
static vkg_status run_point(vkg_device *ref, vkg_device *dut, const vkg_conformance_options *o, int def_index,
                            int point_index, vkg_conformance_report *r, vkg_error *err) {
    const conf_case_def *def = vkg_conformance_case_def(def_index);
    vkg_conformance_case *c = report_add(r);
    if (!c) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "conformance: out of memory for the report");
    snprintf(c->op, sizeof c->op, "%s", def->op);
    snprintf(c->variant, sizeof c->variant, "%s", def->variant);
    c->threshold = def->threshold;
    c->first_mismatch = -1;

    /* Each case draws from its own stream, so a filtered run sees the same inputs as a full one. */
    vkg_rng rng;
    vkg_rng_seed(&rng, o->seed ^ ((uint64_t)(def_index + 1) * 0x9e3779b97f4a7c15u) ^ ((uint64_t)point_index << 48));
    conf_build b = {.g = vkg_graph_new(), .rng = &rng};
    if (!b.g) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "conformance: out of memory for a graph");
    def->build(&b, def->sweep[point_index].d);
    vkg_status st = VKG_OK;
    if (b.out_of_memory) {
        st = vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "conformance: out of memory building %s %s", def->op,
                           def->variant);
    } else if (vkg_graph_status(b.g) != VKG_OK) {
        snprintf(c->error, sizeof c->error, "graph: %s", vkg_graph_error(b.g));
    } else if (b.n_out == 0) {
        snprintf(c->error, sizeof c->error, "the case marks no output");
    } else {
        conf_describe(&b, c->shape, sizeof c->shape);
        if (run_case(ref, dut, &b, o, c) != VKG_OK)
            st = vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "conformance: out of memory running %s %s", def->op,
                               def->variant);
    }
    conf_build_free(&b);
    c->passed = !c->error[0] && c->nmse <= c->threshold && c->nonfinite_mismatches == 0;
    if (c->passed) r->passed++;
    else r->failed++;
    if (o->progress) {
        vkg_conformance_case_print(c, o->progress);
        fflush(o->progress);
    }
    return st;
}

vkg_status vkg_conformance_run(vkg_device *ref, vkg_device *dut, const vkg_conformance_options *o,
                               vkg_conformance_report *r, vkg_error *err) {
    vkg_conformance_options defaults;
    if (!o) {
        vkg_conformance_options_default(&defaults);
        o = &defaults;
    }
    if (!ref || !dut || !r) return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "conformance: a device or the report is NULL");
    if (o->op) {
        int known = 0;
        for (int i = 0; i < vkg_conformance_op_count(); i++) known |= strcmp(o->op, vkg_conformance_op_name(i)) == 0;
        if (!known) {
            char names[256] = "";
            for (int i = 0; i < vkg_conformance_op_count(); i++)
                snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "",
                         vkg_conformance_op_name(i));
            return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "conformance: unknown op '%s' (known: %s)", o->op, names);
        }
    }
    snprintf(r->ref_name, sizeof r->ref_name, "%s", vkg_device_name(ref));
    snprintf(r->dut_name, sizeof r->dut_name, "%s", vkg_device_name(dut));
    double t0 = now_ms();
    for (int i = 0; i < vkg_conformance_case_count(); i++) {
        const conf_case_def *def = vkg_conformance_case_def(i);
        if (o->op && strcmp(o->op, def->op) != 0) continue;
        for (int p = 0; def->sweep[p].level >= 0; p++) {
            if (def->sweep[p].level > (int)o->level) continue;
            vkg_status st = run_point(ref, dut, o, i, p, r, err);
            if (st != VKG_OK) return st;
        }
    }
    r->seconds = (now_ms() - t0) / 1e3;
    return VKG_OK;
}

void vkg_conformance_report_free(vkg_conformance_report *r) {
    if (!r) return;
    free(r->cases);
    memset(r, 0, sizeof *r);
}

/* ---- printing -------------------------------------------------------------------------------- */

void vkg_conformance_case_print(const vkg_conformance_case *c, FILE *f) {
    fprintf(f, "  %-4s %-10s %-32s %-40s ", c->passed ? "PASS" : "FAIL", c->op, c->variant, c->shape);
    if (c->error[0]) {
        fprintf(f, "error: %s\n", c->error);
        return;
    }
    fprintf(f, "nmse %9.2e (max %.0e)", c->nmse, c->threshold);
    if (c->nonfinite_mismatches)
        fprintf(f, ", %lld inf/nan mismatches (first at element %lld)", (long long)c->nonfinite_mismatches,
                (long long)c->first_mismatch);
    fprintf(f, "  [%.1f / %.1f ms]\n", c->ref_ms, c->dut_ms);
}

void vkg_conformance_report_print(const vkg_conformance_report *r, FILE *f, int verbose) {
    fprintf(f, "reference: %s\ndevice under test: %s\n\n", r->ref_name, r->dut_name);
    fprintf(f, "%-12s %6s %7s %12s %10s  %s\n", "op", "cases", "failed", "worst nmse", "threshold", "result");
    for (int g = 0; g < vkg_conformance_op_count(); g++) {
        const char *name = vkg_conformance_op_name(g);
        int n = 0, failed = 0, errors = 0;
        double worst = 0, threshold = 0;
        for (int i = 0; i < r->n_cases; i++) {
            const vkg_conformance_case *c = &r->cases[i];
            if (strcmp(c->op, name) != 0) continue;
            n++;
            failed += !c->passed;
            errors += c->error[0] != 0;
            if (!c->error[0] && !(c->nmse <= worst)) worst = c->nmse;
            if (c->threshold > threshold) threshold = c->threshold;
        }
        if (n == 0) continue;
        fprintf(f, "%-12s %6d %7d %12.3e %10.0e  %s%s\n", name, n, failed, worst, threshold, failed ? "FAIL" : "PASS",
                errors ? " (errors)" : "");
    }
    if (verbose) {
        fprintf(f, "\nevery case (nmse, then reference / device-under-test run time):\n");
        for (int i = 0; i < r->n_cases; i++) vkg_conformance_case_print(&r->cases[i], f);
    } else if (r->failed) {
        fprintf(f, "\nfailed cases:\n");
        for (int i = 0; i < r->n_cases; i++)
            if (!r->cases[i].passed) vkg_conformance_case_print(&r->cases[i], f);
    }
    fprintf(f, "\n%d passed, %d failed (%.1f s)\n", r->passed, r->failed, r->seconds);
}
