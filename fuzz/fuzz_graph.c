/* Random graphs through the public API (vkgraph.h), with random and often wrong shapes, handles,
 * axes and options, run on the CPU executor.  The input is a little program: each op's byte
 * picks a builder, the next bytes its operands (an index into the tensors made so far, or a
 * handle that is none or not of this graph) and its numbers (extents from 0 to 2^62, negative
 * ones, axes out of range), read in that order: one read per statement, never two among a call's
 * arguments, whose order of evaluation C leaves to the compiler (gcc and clang differ, and an
 * input would build another graph under each).  Whatever it builds:
 *   - every builder either returns a tensor with a sane shape or puts the graph in an error
 *     state with a message, and every later call keeps it there;
 *   - a graph without error compiles, or is refused with a message;
 *   - a plan small enough to run (a few MiB) runs on the CPU, and each output agrees with the
 *     reference interpreter (tests/support/ref_eval.c) wherever the reference is finite. */
#include "fuzz.h"

#include "graph/plan.h"
#include "support/ref_eval.h"
#include "vkgraph.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TENSORS 48
#define MAX_OPS 40
#define RUN_LIMIT_BYTES (8u << 20) /* plans up to this size run; larger ones only compile */

typedef struct reader {
    const uint8_t *p;
    size_t n;
} reader;

static unsigned u8(reader *r) {
    if (!r->n) return 0;
    r->n--;
    return *r->p++;
}

/* An extent: mostly small, sometimes 0, negative or huge. */
static int64_t extent(reader *r) {
    static const int64_t odd[] = {0, -1, -3, 1 << 16, (int64_t)1 << 31, (int64_t)1 << 32, (int64_t)1 << 62,
                                  INT64_MAX};
    unsigned b = u8(r);
    if (b < 224) return 1 + b % 6;
    return odd[b % 8];
}

static int dims(reader *r) {
    unsigned b = u8(r);
    return b < 240 ? 1 + (int)(b % 4) : (int)(b % 8) - 2; /* -2..5 now and then */
}

static float number(reader *r) {
    static const float odd[] = {0.0f, -1.0f, 1e30f, -1e-30f, INFINITY, NAN, 3.0f, 0.125f};
    return odd[u8(r) % 8];
}

typedef struct build {
    vkg_graph *g;
    vkg_tensor t[MAX_TENSORS];
    int n;
    void *data[MAX_TENSORS];      /* inputs' and constants' values, owned */
    size_t bytes[MAX_TENSORS];
    vkg_rng rng;
} build;

/* An operand: one of the tensors made, or now and then VKG_NONE or a handle not of the graph. */
static vkg_tensor operand(build *b, reader *r) {
    unsigned v = u8(r);
    if (v >= 250) return v == 255 ? VKG_NONE : (vkg_tensor)(1000 + v);
    return b->n ? b->t[v % b->n] : VKG_NONE;
}

static void keep(build *b, vkg_tensor t) {
    if (t != VKG_NONE && b->n < MAX_TENSORS) b->t[b->n++] = t;
}

/* A leaf's values: random, for inputs and constants whose element count is small. */
static void *values(build *b, vkg_dtype dtype, int ndim, const int64_t *shape, size_t *bytes) {
    int64_t n = 1;
    for (int i = 0; i < ndim && i < VKG_MAX_DIMS; i++) {
        if (shape[i] < 0 || shape[i] > 4096 || (shape[i] && n > 4096 / shape[i])) return NULL;
        n *= shape[i];
    }
    *bytes = (size_t)n * 4;
    void *d = malloc(*bytes ? *bytes : 4);
    FUZZ_CHECK(d != NULL);
    for (int64_t i = 0; i < n; i++) {
        if (dtype == VKG_F32) ((float *)d)[i] = 4.0f * vkg_rng_uniform(&b->rng) - 2.0f;
        else ((int32_t *)d)[i] = (int32_t)(vkg_rng_next(&b->rng) % 12) - 2;
    }
    return d;
}

static void leaf(build *b, reader *r, int kind) {
    int64_t shape[8];
    int nd = dims(r);
    for (int i = 0; i < 8; i++) shape[i] = extent(r);
    char name[16];
    snprintf(name, sizeof name, "l%u", u8(r) % 24); /* names collide now and then */
    vkg_tensor t = VKG_NONE;
    void *d = NULL;
    size_t bytes = 0;
    if (kind == 0 || kind == 1) {
        vkg_dtype dtype = kind == 0 ? VKG_F32 : VKG_I32;
        t = vkg_input(b->g, name, dtype, nd, shape);
        if (t != VKG_NONE) d = values(b, dtype, nd, shape, &bytes);
    } else if (kind == 2) {
        d = values(b, VKG_F32, nd, shape, &bytes);
        /* Constant data is borrowed and must cover the shape: huge shapes get none (refused). */
        t = vkg_constant(b->g, name, VKG_F32, nd, shape, d);
    } else if (kind == 3) {
        t = vkg_state(b->g, name, nd, shape);
    } else {
        t = vkg_index(b->g, name);
    }
    if (t == VKG_NONE || b->n == MAX_TENSORS) {
        free(d);
        return;
    }
    b->data[b->n] = d;
    b->bytes[b->n] = bytes;
    keep(b, t);
}

static void op(build *b, reader *r) {
    /* codes are bytes mod 30, but for 250 .. 253: the ops added after the corpus was grown (its
     * programs use none of those bytes as codes, so they keep their meaning) */
    const unsigned raw = u8(r), code = raw >= 250 && raw <= 253 ? 30 + (raw - 250) : raw % 30;
    vkg_graph *g = b->g;
    const vkg_tensor x = operand(b, r);
    const vkg_tensor y = operand(b, r);
    int64_t shape[8];
    int axes[8];
    switch (code) {
    case 0: case 1: case 2: case 3: case 4: leaf(b, r, (int)code); return;
    case 5: {
        const vkg_tensor bias = u8(r) & 1 ? operand(b, r) : VKG_NONE;
        keep(b, vkg_matmul(g, x, y, bias, u8(r) % 5));
        return;
    }
    case 6: keep(b, vkg_add(g, x, y)); return;
    case 7: keep(b, vkg_mul(g, x, y)); return;
    case 8: keep(b, vkg_scale(g, x, number(r))); return;
    case 9: keep(b, vkg_softmax(g, x)); return;
    case 10: {
        const int32_t offset = (int8_t)u8(r);
        keep(b, vkg_mask_causal(g, x, offset, u8(r) & 1 ? y : VKG_NONE));
        return;
    }
    case 11: keep(b, vkg_mask(g, x, y, (vkg_mask_kind)(u8(r) % 3))); return;
    case 12: {
        const vkg_tensor gamma = u8(r) & 1 ? y : VKG_NONE;
        const vkg_tensor beta = u8(r) & 1 ? operand(b, r) : VKG_NONE;
        keep(b, vkg_layernorm(g, x, gamma, beta, u8(r) & 1 ? 1e-5f : number(r)));
        return;
    }
    case 13: keep(b, vkg_gelu(g, x)); return;
    case 14: keep(b, vkg_gelu_erf(g, x)); return;
    case 15: keep(b, vkg_quick_gelu(g, x)); return;
    case 16: keep(b, vkg_silu(g, x)); return;
    case 17: keep(b, vkg_relu(g, x)); return;
    case 18: keep(b, vkg_embedding(g, x, y)); return;
    case 19: {
        int nd = dims(r);
        for (int i = 0; i < 8; i++) shape[i] = u8(r) < 32 ? -1 : extent(r);
        keep(b, vkg_reshape(g, x, nd, shape));
        return;
    }
    case 20:
        for (int i = 0; i < 8; i++) axes[i] = (int)(u8(r) % 6) - 1;
        keep(b, vkg_permute(g, x, axes));
        return;
    case 21: {
        const int a0 = (int)(u8(r) % 6) - 1;
        keep(b, vkg_transpose(g, x, a0, (int)(u8(r) % 6) - 1));
        return;
    }
    case 22: {
        const int axis = (int)(u8(r) % 6) - 1;
        const int64_t start = (int8_t)u8(r);
        keep(b, vkg_slice(g, x, axis, start, u8(r) < 240 ? u8(r) % 6 : extent(r)));
        return;
    }
    case 23: keep(b, vkg_concat(g, x, y, (int)(u8(r) % 6) - 1)); return;
    case 24: keep(b, vkg_copy(g, x)); return;
    case 25: {
        const int axis = (int)(u8(r) % 6) - 1;
        const int64_t at = (int8_t)u8(r);
        keep(b, vkg_write_at(g, x, y, axis, at, u8(r) & 1 ? operand(b, r) : VKG_NONE));
        return;
    }
    /* the operands of the ops below are read in order (one statement each) */
    case 30: {
        vkg_tensor w = u8(r) & 1 ? y : VKG_NONE;
        keep(b, vkg_rms_norm(g, x, w, u8(r) & 1 ? 1e-6f : number(r)));
        return;
    }
    case 31: {
        int32_t offset = (int8_t)u8(r);
        keep(b, vkg_rope(g, x, y, offset, u8(r) & 1 ? operand(b, r) : VKG_NONE));
        return;
    }
    case 32: keep(b, vkg_swiglu(g, x, y)); return;
    case 33: {
        int32_t offset = (int8_t)u8(r);
        vkg_tensor dyn = u8(r) & 1 ? y : VKG_NONE;
        keep(b, vkg_mask_causal_window(g, x, offset, dyn, u8(r)));
        return;
    }
    case 26: {
        char name[16];
        snprintf(name, sizeof name, "n%u", u8(r) % 8);
        vkg_name(g, x, u8(r) < 8 ? "" : name);
        return;
    }
    default: {
        char name[16];
        snprintf(name, sizeof name, "out%u", u8(r) % 4);
        vkg_output(g, name, x);
        return;
    }
    }
}

static uint64_t hash(const uint8_t *p, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

static double max_abs(const float *x, int64_t n) {
    double m = 0;
    for (int64_t i = 0; i < n; i++) m = fmax(m, fabs(x[i]));
    return m;
}

static int all_finite(const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return 0;
    return 1;
}

/* Float kernels and the reference (which sums in double) part ways only where float arithmetic
 * overflows: a product (mul, matmul) of values beyond about 1e19 gives inf in float and a finite
 * answer in double.  Outputs are compared when no value of any node is NaN or a finite
 * value beyond 1e15 (infinities, as masks make, are fine). */
static int tame(const vkg_graph *g, float **values) {
    for (vkg_tensor t = 0; t < g->n_nodes; t++) {
        const int64_t n = vkg_tensor_numel(g, t);
        for (int64_t i = 0; i < n && values[t]; i++)
            if (isnan(values[t][i]) || (isfinite(values[t][i]) && fabsf(values[t][i]) > 1e15f)) return 0;
    }
    return 1;
}

static vkg_device *cpu;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    vkg_device_options o = {.cpu_threads = 1, .quiet = 1};
    vkg_error err;
    if (vkg_device_open("cpu", &o, &cpu, &err) != VKG_OK) {
        fprintf(stderr, "fuzz_graph: %s\n", err.message);
        abort();
    }
    return 0;
}

/* Runs the plan on the CPU and checks its outputs against the reference interpreter. */
static void run(build *b, const vkg_plan *plan) {
    vkg_error err;
    vkg_session *s = NULL;
    vkg_status st = vkg_session_new(cpu, plan, &s, &err);
    if (st != VKG_OK) {
        FUZZ_CHECK(s == NULL && err.message[0]);
        return;
    }
    ref_inputs in;
    FUZZ_CHECK(ref_inputs_init(&in, b->g) == 0);
    int ok = 1;
    for (int i = 0; i < b->n; i++) {
        const vkg_tensor t = b->t[i];
        if (b->data[i] && vkg_find(b->g, vkg_tensor_name(b->g, t)) == t) {
            /* an input: its values go to both; a constant's are already in the graph */
            if (vkg_session_set_input(s, t, b->data[i], b->bytes[i], &err) == VKG_OK) ref_inputs_set(&in, t, b->data[i]);
        }
    }
    /* Every input and index needs a value before a run; an unset one is an error, not garbage. */
    for (int i = 0; i < b->n; i++) {
        int32_t v = (int32_t)(vkg_rng_next(&b->rng) % 8) - 1;
        if (vkg_session_set_index(s, b->t[i], v, &err) == VKG_OK) ref_inputs_set_index(&in, b->t[i], v);
    }
    st = vkg_session_run(s, &err);
    if (st != VKG_OK) {
        FUZZ_CHECK(err.message[0]);
        ok = 0;
    }
    /* The reference gives every node its own buffer, dead ones too, which the plan dropped. */
    int64_t ref_floats = 0;
    for (vkg_tensor t = 0; t < b->g->n_nodes; t++)
        ref_floats += vkg_tensor_numel(b->g, t) > RUN_LIMIT_BYTES ? RUN_LIMIT_BYTES : vkg_tensor_numel(b->g, t);
    float **want = NULL;
    if (ok && ref_floats * 4 <= RUN_LIMIT_BYTES && ref_eval(b->g, &in, &want) == 0) {
        for (int i = 0; i < b->n && tame(b->g, want); i++) {
            const vkg_tensor t = b->t[i];
            const int64_t n = vkg_tensor_numel(b->g, t);
            float *got = malloc(n ? (size_t)n * 4 : 4);
            FUZZ_CHECK(got != NULL);
            if (vkg_session_get_output(s, t, got, (size_t)n * 4, &err) == VKG_OK && all_finite(want[t], n)) {
                if (b->g->nodes[t].dtype == VKG_I32) /* the reference holds ids as floats */
                    for (int64_t k = 0; k < n; k++) got[k] = (float)((int32_t *)got)[k];
                int64_t bad = ref_compare(got, want[t], n, 1e-3, 1e-3 * fmax(1.0, max_abs(want[t], n)));
                if (bad >= 0) {
                    fprintf(stderr, "output %d (node %d, %s) element %lld: %g, reference %g\n", i, t,
                            vkg_tensor_name(b->g, t), (long long)bad, got[bad], want[t][bad]);
                    vkg_graph_dump(b->g, stderr, VKG_DUMP_TEXT);
                    vkg_plan_dump(plan, stderr, VKG_DUMP_TEXT);
                }
                FUZZ_CHECK(bad < 0);
            }
            free(got);
        }
        ref_free(b->g, want);
    }
    ref_inputs_free(&in);
    vkg_session_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    reader r = {data, size};
    build b;
    memset(&b, 0, sizeof b);
    vkg_rng_seed(&b.rng, hash(data, size));
    b.g = vkg_graph_new();
    FUZZ_CHECK(b.g != NULL);
    for (int i = 0; i < MAX_OPS && r.n; i++) {
        op(&b, &r);
        if (vkg_graph_status(b.g) != VKG_OK) {
            FUZZ_CHECK(vkg_graph_error(b.g)[0] != '\0');
            break;
        }
    }
    for (int i = 0; i < b.n; i++) {
        int64_t shape[VKG_MAX_DIMS];
        int nd = vkg_tensor_shape(b.g, b.t[i], shape);
        FUZZ_CHECK(nd >= 0 && nd <= VKG_MAX_DIMS);
        for (int k = 0; k < nd; k++) FUZZ_CHECK(shape[k] >= 0);
        FUZZ_CHECK(vkg_tensor_numel(b.g, b.t[i]) >= 0);
    }
    if (vkg_graph_status(b.g) == VKG_OK && b.n) {
        vkg_compile_options opts;
        vkg_compile_options_default(&opts);
        unsigned o = u8(&r);
        static const uint32_t align[] = {256, 4, 1, 0, 3, 64, 65536, 256};
        static const uint64_t binding[] = {128u << 20, 64, 4, 0, 1u << 10, 96, 128u << 20, 1};
        opts.fuse = !(o & 1);
        opts.in_place = !(o & 2);
        opts.alignment = align[(o >> 2) % 8];
        opts.max_binding_bytes = binding[(o >> 5) % 8];
        vkg_plan *plan = NULL;
        vkg_error err;
        if (vkg_plan_compile(b.g, &opts, &plan, &err) != VKG_OK) {
            FUZZ_CHECK(plan == NULL && err.message[0]);
        } else {
            /* Inputs, outputs and states are regions of their own, beside the arena. */
            uint64_t session_bytes = 0;
            for (int i = 0; i < plan->n_regions; i++)
                session_bytes += plan->regions[i].bytes > RUN_LIMIT_BYTES ? RUN_LIMIT_BYTES : plan->regions[i].bytes;
            if (session_bytes <= RUN_LIMIT_BYTES) run(&b, plan);
            vkg_plan_free(plan);
        }
    }
    for (int i = 0; i < b.n; i++) free(b.data[i]);
    vkg_graph_free(b.g);
    return 0;
}
