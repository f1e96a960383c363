/* Tests of the CPU fused-attention kernel (src/cpu/kernel_attention.c), called directly with
 * hand-built parameter blocks laid out as GPT-2's steps lay them out (q, k, v as strided views of
 * one [T, 3C] projection; k, v read from a [H, 1024, 64] cache while decoding), and through a
 * session: every variant this machine runs and the reference, against attention computed in
 * double, and against each other (the fused variants bit for bit); the mask, the runtime index,
 * -inf and NaN scores; and the same bits however the rows are cut or spread over threads.
 *
 * The tolerance (row_f64) is a bound on float rounding, worked out per output element, not a
 * guess: the scores are float dot products over D (error (D + 1) eps scale sum_d |q_d k_d|), the
 * weights exponentials of rounded differences (a relative error of those errors plus
 * (|s_j - m| + 4) eps), and the output a weighted mean of v rows summed over n keys with up to n
 * rescales (each key adds at most 3 eps relative to sum_j p_j |v_j| / l), eps = 2^-24.  Errors of
 * the weights move a weighted mean by at most twice their largest relative error times max |v|.
 * The bound holds for the reference and each variant alike (they differ only in the order of the
 * same roundings), so two of them agree within the sum of their bounds.  That bound is the worst
 * case, every rounding in the same direction; rounding errors have random signs and grow like
 * the square root of their count, so on these random inputs the largest error is also held to
 * TYPICAL of its bound (they come to about 1/200 of it). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/attention_variant.h"
#include "cpu/kernels.h"
#include "cpu/threadpool.h"
#include "support/cpu_reference.h"
#include "vkgraph.h"

#define EPS 0x1p-24
#define TYPICAL (1.0 / 16)
#define REFERENCE (-1) /* the "variant" that is vkg_cpu_attention_reference */

/* The kernels under test: the reference and every variant this machine runs. */
static int variants[VKG_CPU_MATMUL_VARIANTS + 1], n_variants;

static int find_variants(void **state) {
    (void)state;
    n_variants = 0;
    variants[n_variants++] = REFERENCE;
    printf("attention variants on this CPU:");
    for (int v = 0; v < VKG_CPU_MATMUL_VARIANTS; v++)
        if (vkg_cpu_matmul_variant_runs(v)) {
            variants[n_variants++] = v;
            printf(" %s", vkg_cpu_matmul_variant_name(v));
        }
    printf("\n");
    return n_variants >= 2 ? 0 : -1;
}

static const char *name_of(int v) { return v == REFERENCE ? "reference" : vkg_cpu_matmul_variant_name(v); }

/* One attention problem: its parameters and buffers (q, k, v may be views of one buffer). */
typedef struct problem {
    vkg_attention_params p;
    float *x, *kc, *vc; /* the [T, 3C] projection; the k and v caches (NULL: k, v are views of x) */
    size_t out_n;
    int32_t index[1];
    const float *q, *k, *v;
} problem;

static void problem_free(problem *pr) { free(pr->x), free(pr->kc), free(pr->vc); }

/* GPT-2's prompt: H heads of 64, q, k, v views of a [T, 3C] projection, out [T, C]; causal. */
static problem gpt2_prompt(vkg_rng *rng, uint32_t H, uint32_t T, int causal) {
    const uint32_t dh = 64, C = H * dh;
    problem pr = {0};
    vkg_attention_params *p = &pr.p;
    p->T = T, p->S = T, p->D = dh, p->Dv = dh, p->batch0 = 1, p->batch1 = H;
    p->q_offset = 0, p->k_offset = C, p->v_offset = 2 * C;
    p->q_stride_t = p->k_stride_s = p->v_stride_s = 3 * C;
    p->q_stride_b1 = p->k_stride_b1 = p->v_stride_b1 = dh;
    p->o_stride_t = C, p->o_stride_b1 = dh;
    p->q_stride_d = p->k_stride_d = p->v_stride_d = p->o_stride_d = 1;
    p->scale = 0.125f;
    p->mask_kind = causal ? VKG_ATTENTION_MASK_CAUSAL : VKG_ATTENTION_MASK_NONE;
    p->dyn_index = VKG_NO_INDEX;
    /* q wider than k: scores of a few units, so that the softmax is far from uniform */
    pr.x = ref_checked_floats(rng, (size_t)T * 3 * C, 1.0f);
    for (size_t t = 0; t < T; t++)
        for (size_t c = 0; c < C; c++) pr.x[t * 3 * C + c] *= 8.0f;
    pr.q = pr.k = pr.v = pr.x;
    pr.out_n = (size_t)T * C;
    return pr;
}

/* GPT-2 with its cache: T queries at positions pos .. pos + T - 1 (the runtime index pos) against
 * k and v caches [H, 1024, 64] whose rows past pos + T - 1 are not written yet (NaN here: they
 * must take no part). */
static problem gpt2_cached_len(vkg_rng *rng, uint32_t H, uint32_t T, int32_t pos, uint32_t L) {
    problem pr = gpt2_prompt(rng, H, T, 1);
    const uint32_t dh = 64;
    vkg_attention_params *p = &pr.p;
    p->S = L, p->k_offset = p->v_offset = 0;
    p->k_stride_s = p->v_stride_s = dh, p->k_stride_b1 = p->v_stride_b1 = L * dh;
    p->dyn_index = 0;
    pr.index[0] = pos;
    pr.kc = ref_checked_floats(rng, (size_t)H * L * dh, 1.0f);
    pr.vc = ref_checked_floats(rng, (size_t)H * L * dh, 1.0f);
    for (size_t h = 0; h < H; h++)
        for (size_t j = (size_t)pos + T; j < L; j++)
            for (size_t d = 0; d < dh; d++) pr.kc[(h * L + j) * dh + d] = pr.vc[(h * L + j) * dh + d] = NAN;
    pr.k = pr.kc, pr.v = pr.vc;
    return pr;
}

static problem gpt2_cached(vkg_rng *rng, uint32_t H, uint32_t T, int32_t pos) {
    return gpt2_cached_len(rng, H, T, pos, 1024);
}

static size_t rows_of(const problem *pr) { return vkg_cpu_attention_rows(&pr->p); }

static void run_range(int v, const problem *pr, float *out, size_t begin, size_t end) {
    if (v == REFERENCE)
        vkg_cpu_attention_reference(&pr->p, pr->q, pr->k, pr->v, out, pr->index, begin, end);
    else
        vkg_cpu_attention_with(v, &pr->p, pr->q, pr->k, pr->v, out, pr->index, begin, end);
}

/* out (malloc'd, zeroed) computed by variant v over all rows in one call. */
static float *run_whole(int v, const problem *pr) {
    float *out = calloc(pr->out_n ? pr->out_n : 1, sizeof *out);
    assert_non_null(out);
    run_range(v, pr, out, 0, rows_of(pr));
    return out;
}

/* Row r's outputs in double (want[Dv]) and each one's rounding bound (tol[Dv]), from the formula
 * in params/attention.h: keys blocked by the mask and keys whose score is -inf take no part. */
static void row_f64(const problem *pr, size_t r, double *want, double *tol) {
    const vkg_attention_params *p = &pr->p;
    const size_t t = r % p->T, b1 = r / p->T % p->batch1, b0 = r / ((size_t)p->T * p->batch1);
    const float *q = pr->q + p->q_offset + b0 * p->q_stride_b0 + b1 * p->q_stride_b1 + t * p->q_stride_t;
    const float *k = pr->k + p->k_offset + b0 * p->k_stride_b0 + b1 * p->k_stride_b1;
    const float *v = pr->v + p->v_offset + b0 * p->v_stride_b0 + b1 * p->v_stride_b1;
    int64_t n = p->S;
    if (p->mask_kind == VKG_ATTENTION_MASK_CAUSAL) {
        int64_t last = (int64_t)t + p->causal_offset + (p->dyn_index == VKG_NO_INDEX ? 0 : pr->index[p->dyn_index]);
        n = last + 1 < 0 ? 0 : last + 1 > n ? n : last + 1;
    }
    double *s = malloc((size_t)(n ? n : 1) * sizeof *s);
    assert_non_null(s);
    double m = -INFINITY, err_s = 0, vmax = 0;
    for (int64_t j = 0; j < n; j++) {
        double dot = 0, mag = 0;
        for (size_t d = 0; d < p->D; d++) {
            double x = (double)q[d * p->q_stride_d] * k[j * p->k_stride_s + d * p->k_stride_d];
            dot += x, mag += fabs(x);
        }
        s[j] = p->scale * dot;
        if (s[j] == -INFINITY) continue;
        if (s[j] > m) m = s[j];
        double e = (p->D + 1) * EPS * fabs(p->scale) * mag;
        if (e > err_s) err_s = e;
        for (size_t d = 0; d < p->Dv; d++) vmax = fmax(vmax, fabs(v[j * p->v_stride_s + d * p->v_stride_d]));
    }
    double l = 0, spread = 0;
    for (int64_t j = 0; j < n; j++)
        if (s[j] != -INFINITY) l += exp(s[j] - m), spread = fmax(spread, m - s[j]);
    const double eta = 2 * err_s + (spread + 4) * EPS; /* the weights' largest relative error */
    for (size_t d = 0; d < p->Dv; d++) {
        double num = 0, mag = 0;
        for (int64_t j = 0; j < n; j++) {
            if (s[j] == -INFINITY) continue;
            double x = exp(s[j] - m) * v[j * p->v_stride_s + d * p->v_stride_d];
            num += x, mag += fabs(x);
        }
        want[d] = l == 0 ? 0 : num / l;
        tol[d] = l == 0 ? 0 : 2 * eta / (1 - eta) * vmax + (3.0 * n + 4) * EPS * (mag / l + fabs(want[d]));
    }
    free(s);
}

/* Row r of out, as the params place it. */
static float out_at(const problem *pr, const float *out, size_t r, size_t d) {
    const vkg_attention_params *p = &pr->p;
    const size_t t = r % p->T, b1 = r / p->T % p->batch1, b0 = r / ((size_t)p->T * p->batch1);
    return out[p->o_offset + b0 * p->o_stride_b0 + b1 * p->o_stride_b1 + t * p->o_stride_t + d * p->o_stride_d];
}

/* Every row r % row_step == 0 (and the last) of each kernel's result within its bound of the
 * double result, and each within the sum of both bounds of the reference's; returns the largest
 * error seen relative to its bound. */
static double check_against_f64(const problem *pr, float *const *outs, size_t row_step) {
    const size_t Dv = pr->p.Dv, n = rows_of(pr);
    double *want = malloc((Dv ? Dv : 1) * sizeof *want), *tol = malloc((Dv ? Dv : 1) * sizeof *tol), worst = 0;
    assert_true(want && tol);
    for (size_t r = 0; r < n; r++) {
        if (r % row_step && r != n - 1) continue;
        row_f64(pr, r, want, tol);
        for (size_t d = 0; d < Dv; d++) {
            const float ref = out_at(pr, outs[0], r, d);
            for (int i = 0; i < n_variants; i++) {
                const float got = out_at(pr, outs[i], r, d);
                const double err = fabs((double)got - want[d]);
                if (!(err <= tol[d]) || !(fabs((double)got - ref) <= 2 * tol[d]))
                    fail_msg("%s: T=%u S=%u H=%u row %zu [%zu]: %.9g, double %.9g (bound %.3g), reference %.9g",
                             name_of(variants[i]), pr->p.T, pr->p.S, pr->p.batch1, r, d, got, want[d], tol[d], ref);
                if (tol[d] > 0 && err / tol[d] > worst) worst = err / tol[d];
            }
        }
    }
    free(want), free(tol);
    return worst;
}

/* The fused variants (AVX2, AVX-512) compute every row the same way whatever their width:
 * their results agree bit for bit (the portable one rounds products apart, so differs). */
static void check_fused_agree(float *const *outs, size_t n) {
    int first = -1;
    for (int i = 0; i < n_variants; i++) {
        if (variants[i] != VKG_CPU_MATMUL_AVX2 && variants[i] != VKG_CPU_MATMUL_AVX512) continue;
        if (first < 0) first = i;
        else if (memcmp(outs[i], outs[first], n * sizeof(float)))
            fail_msg("%s and %s differ", name_of(variants[first]), name_of(variants[i]));
    }
}

static void check_problem(const problem *pr, size_t row_step) {
    float *outs[VKG_CPU_MATMUL_VARIANTS + 1];
    for (int i = 0; i < n_variants; i++) outs[i] = run_whole(variants[i], pr);
    check_fused_agree(outs, pr->out_n);
    double worst = check_against_f64(pr, outs, row_step);
    if (worst > TYPICAL) fail_msg("T=%u S=%u: an error of %.3f times its bound", pr->p.T, pr->p.S, worst);
    for (int i = 0; i < n_variants; i++) free(outs[i]);
}

/* ---- against double ---------------------------------------------------------------------------- */

/* GPT-2's head counts (124M, medium, large, XL) and prompt lengths around the key blocks (32 and
 * 16 keys) and the row groups (32 rows), causal and not. */
static void test_gpt2_prompts(void **state) {
    (void)state;
    vkg_rng rng;
    vkg_rng_seed(&rng, 11);
    const uint32_t heads[] = {12, 16, 20, 25}, lengths[] = {1, 7, 63, 64, 65, 256};
    for (size_t i = 0; i < sizeof lengths / sizeof *lengths; i++)
        for (int causal = 0; causal <= 1; causal++) {
            problem pr = gpt2_prompt(&rng, heads[(i + causal) % 4], lengths[i], causal);
            check_problem(&pr, lengths[i] > 64 ? 5 : 1);
            problem_free(&pr);
        }
}

/* T = 1024 (GPT-2's context): 12 heads causal, 25 without the mask, every 37th row in double. */
static void test_gpt2_full_context(void **state) {
    (void)state;
    vkg_rng rng;
    vkg_rng_seed(&rng, 12);
    problem pr = gpt2_prompt(&rng, 12, 1024, 1);
    check_problem(&pr, 37);
    problem_free(&pr);
    pr = gpt2_prompt(&rng, 25, 1024, 0);
    check_problem(&pr, 101);
    problem_free(&pr);
}

/* Decoding: one query at position pos (the runtime index) against the 1024-row cache, the rows
 * after pos unwritten (NaN); and a prompt of 7 after a cached prefix. */
static void test_gpt2_decode(void **state) {
    (void)state;
    vkg_rng rng;
    vkg_rng_seed(&rng, 13);
    const int32_t positions[] = {0, 1, 31, 32, 500, 1023};
    for (size_t i = 0; i < sizeof positions / sizeof *positions; i++) {
        problem pr = gpt2_cached(&rng, i % 2 ? 25 : 12, 1, positions[i]);
        check_problem(&pr, 1);
        problem_free(&pr);
    }
    problem pr = gpt2_cached(&rng, 16, 7, 100);
    check_problem(&pr, 1);
    problem_free(&pr);
}

/* Layouts GPT-2 does not use: strides on d, a broadcast batch dimension, widths that are no
 * multiple of a vector, a negative causal offset (rows that see no key give zeros), q/k rows
 * wider than the blocked variants pack (the reference runs them). */
static void test_other_layouts(void **state) {
    (void)state;
    vkg_rng rng;
    vkg_rng_seed(&rng, 14);
    const uint32_t shapes[][4] = {{24, 40, 37, 50}, {5, 3, 9, 70}, {64, 64, 40, 33}, {300, 8, 5, 6}};
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        const uint32_t D = shapes[i][0], Dv = shapes[i][1], T = shapes[i][2], S = shapes[i][3];
        problem pr = {0};
        vkg_attention_params *p = &pr.p;
        p->T = T, p->S = S, p->D = D, p->Dv = Dv, p->batch0 = 2, p->batch1 = 3;
        p->q_stride_d = 2, p->q_stride_t = 2 * D, p->q_stride_b1 = T * 2 * D, p->q_stride_b0 = 3 * T * 2 * D;
        p->k_stride_d = 1, p->k_stride_s = 3 * D, p->k_stride_b1 = D, p->k_stride_b0 = 0; /* broadcast */
        p->v_stride_d = 3, p->v_stride_s = 3 * Dv, p->v_stride_b1 = S * 3 * Dv, p->v_stride_b0 = 0;
        p->o_stride_d = 2, p->o_stride_t = 2 * Dv, p->o_stride_b1 = T * 2 * Dv, p->o_stride_b0 = 3 * T * 2 * Dv;
        p->k_offset = 7, p->o_offset = 1;
        p->scale = 0.3f;
        p->mask_kind = i % 2 ? VKG_ATTENTION_MASK_NONE : VKG_ATTENTION_MASK_CAUSAL;
        p->causal_offset = i == 0 ? -3 : 20;
        p->dyn_index = VKG_NO_INDEX;
        pr.x = ref_checked_floats(&rng, (size_t)6 * T * 2 * D, 3.0f);
        pr.kc = ref_checked_floats(&rng, 7 + (size_t)S * 3 * D, 1.0f);
        pr.vc = ref_checked_floats(&rng, (size_t)3 * S * 3 * Dv, 1.0f);
        pr.q = pr.x, pr.k = pr.kc, pr.v = pr.vc;
        pr.out_n = 1 + (size_t)6 * T * 2 * Dv;
        float *outs[VKG_CPU_MATMUL_VARIANTS + 1];
        for (int j = 0; j < n_variants; j++) outs[j] = run_whole(variants[j], &pr);
        check_fused_agree(outs, pr.out_n);
        assert_true(check_against_f64(&pr, outs, 1) <= TYPICAL);
        /* nothing but the outputs is written: the strides' gaps keep their zeros */
        for (int j = 0; j < n_variants; j++) {
            for (size_t e = 0; e < pr.out_n; e++)
                if ((e < 1 || (e - 1) % 2) && outs[j][e] != 0.0f) fail_msg("%s wrote element %zu", name_of(variants[j]), e);
            free(outs[j]);
        }
        problem_free(&pr);
    }
}

/* ---- -inf and NaN scores ------------------------------------------------------------------------ */

/* NF_ROWS rows (a group past every variant's few-rows path, NARROW_MAX_ROWS) x 40 keys (two
 * blocks of 32, past two of 16), scores made non-finite by k_j[0] = x (q[0] = 1 in every row): */
enum { NF_ROWS = 5 };
static problem nonfinite(vkg_rng *rng, const int *keys, int n_keys, float x, int causal) {
    problem pr = gpt2_prompt(rng, 1, 40, causal);
    pr.p.T = NF_ROWS;
    pr.p.causal_offset = 36; /* causal: row t sees keys 0 .. 36 + t (the last two: all 40) */
    pr.out_n = NF_ROWS * 64;
    for (size_t t = 0; t < NF_ROWS; t++) pr.x[t * 192] = 1.0f;
    for (int i = 0; i < n_keys; i++) {
        pr.x[keys[i] * 192 + 64] = x;
        if (x == -INFINITY)
            for (int d = 0; d < 64; d++) pr.x[keys[i] * 192 + 128 + d] = NAN; /* their v: unused */
    }
    return pr;
}

/* Each variant's rows computed one at a time give its whole run's bits: a lone row takes the
 * kernels' few-rows path (keys in the vector lanes), the group of NF_ROWS the row-lanes path, so
 * -inf and NaN scores meet both. */
static void check_rows_alone(const problem *pr) {
    for (int i = 0; i < n_variants; i++) {
        float *whole = run_whole(variants[i], pr), *alone = calloc(pr->out_n, sizeof *alone);
        assert_non_null(alone);
        for (size_t r = 0; r < rows_of(pr); r++) run_range(variants[i], pr, alone, r, r + 1);
        /* NaN where the whole run has NaN; every other element the same bits */
        for (size_t e = 0; e < pr->out_n; e++)
            if (isnan(whole[e]) ? !isnan(alone[e]) : memcmp(&whole[e], &alone[e], sizeof(float)))
                fail_msg("%s: element %zu is %g alone, %g in its group", name_of(variants[i]), e, alone[e], whole[e]);
        free(whole), free(alone);
    }
}

static void test_nonfinite_scores(void **state) {
    (void)state;
    vkg_rng rng;
    vkg_rng_seed(&rng, 15);
    int all[40];
    for (int j = 0; j < 40; j++) all[j] = j;
    for (int causal = 0; causal <= 1; causal++) {
        /* -inf scores weigh 0, and their v rows (NaN) are not read into the sums */
        problem pr = nonfinite(&rng, (const int[]){0, 3, 17, 31, 32, 39}, 6, -INFINITY, causal);
        check_problem(&pr, 1);
        check_rows_alone(&pr);
        problem_free(&pr);
        /* all keys -inf: zeros; so too the first block alone (the second then starts the sums) */
        for (int n = 32; n <= 40; n += 8) {
            pr = nonfinite(&rng, all, n, -INFINITY, causal);
            check_problem(&pr, 1);
            check_rows_alone(&pr);
            for (int i = 0; i < n_variants; i++) {
                float *out = run_whole(variants[i], &pr);
                for (int e = 0; e < NF_ROWS * 64; e++) {
                    if (n == 40) assert_true(out[e] == 0.0f);
                    else assert_true(isfinite(out[e]));
                }
                free(out);
            }
            problem_free(&pr);
        }
        /* a NaN score (in either block, or after a -inf one), or +inf (e^(inf - inf)): NaN rows */
        const int nan_keys[][2] = {{20, 20}, {35, 35}, {3, 36}};
        const float values[] = {NAN, NAN, INFINITY};
        for (int c = 0; c < 3; c++) {
            pr = nonfinite(&rng, nan_keys[c], 2, values[c], causal);
            if (c == 2) pr.x[3 * 192 + 64] = -INFINITY;
            check_rows_alone(&pr);
            for (int i = 0; i < n_variants; i++) {
                float *out = run_whole(variants[i], &pr);
                for (int e = 0; e < NF_ROWS * 64; e++)
                    if (!isnan(out[e])) fail_msg("%s: case %d element %d is %g, not NaN", name_of(variants[i]), c, e, out[e]);
                free(out);
            }
            problem_free(&pr);
        }
    }
}

/* pr (gpt2_cached's H = hkv G heads) as grouped-query attention: the G query heads of each of hkv
 * key/value heads against one cache head (the first of theirs), broadcast over b1. */
static void make_grouped(problem *pr, uint32_t hkv, uint32_t G) {
    const uint32_t dh = 64, L = pr->p.S;
    vkg_attention_params *p = &pr->p;
    p->batch0 = hkv, p->batch1 = G;
    p->q_stride_b0 = p->o_stride_b0 = G * dh, p->q_stride_b1 = p->o_stride_b1 = dh;
    p->k_stride_b0 = p->v_stride_b0 = G * L * dh, p->k_stride_b1 = p->v_stride_b1 = 0;
}

/* ---- the same bits however the rows are cut --------------------------------------------------- */

typedef struct job {
    int variant;
    const problem *pr;
    float *out;
} job;

static void job_range(void *ctx, size_t begin, size_t end) {
    const job *j = ctx;
    run_range(j->variant, j->pr, j->out, begin, end);
}

static void test_cuts_and_threads(void **state) {
    (void)state;
    vkg_rng rng;
    vkg_rng_seed(&rng, 16);
    problem probs[6] = {gpt2_prompt(&rng, 12, 100, 1), gpt2_prompt(&rng, 3, 77, 0), gpt2_cached(&rng, 12, 1, 600),
                        gpt2_cached(&rng, 12, 1, 600), gpt2_cached(&rng, 12, 1, 600), gpt2_cached(&rng, 12, 1, 600)};
    /* the last three decode with query heads sharing a KV head in pairs, threes and fours
     * (grouped-query attention, as Qwen3-0.6B's, SmolLM2's and Llama-3.2's): a group's rows take
     * the few-rows path together where the variant takes that many (NARROW_MAX_ROWS), else the
     * row-lanes path; a lone row the few-rows path */
    make_grouped(&probs[3], 6, 2);
    make_grouped(&probs[4], 4, 3);
    make_grouped(&probs[5], 3, 4);
    vkg_threadpool *pools[3] = {vkg_threadpool_new(1), vkg_threadpool_new(2), vkg_threadpool_new(3)};
    for (int i = 0; i < 3; i++) assert_non_null(pools[i]);
    for (int pi = 0; pi < 6; pi++) {
        const problem *pr = &probs[pi];
        const size_t n = rows_of(pr);
        for (int i = 0; i < n_variants; i++) {
            float *whole = run_whole(variants[i], pr), *cut = calloc(pr->out_n, sizeof *cut);
            assert_non_null(cut);
            /* cuts at random places (mid group, mid batch entry), then one row at a time */
            for (int trial = 0; trial < 4; trial++) {
                memset(cut, 0, pr->out_n * sizeof *cut);
                for (size_t b = 0; b < n;) {
                    size_t len = trial == 3 ? 1 : 1 + vkg_rng_next(&rng) % (2 * 33);
                    if (len > n - b) len = n - b;
                    run_range(variants[i], pr, cut, b, b + len);
                    b += len;
                }
                if (memcmp(cut, whole, pr->out_n * sizeof *cut))
                    fail_msg("%s: problem %d, cut %d changes the bits", name_of(variants[i]), pi, trial);
            }
            for (int t = 0; t < 3; t++) {
                memset(cut, 0, pr->out_n * sizeof *cut);
                job j = {variants[i], pr, cut};
                vkg_threadpool_for(pools[t], n, job_range, &j);
                if (memcmp(cut, whole, pr->out_n * sizeof *cut))
                    fail_msg("%s: problem %d on %d threads changes the bits", name_of(variants[i]), pi, t + 1);
            }
            free(whole), free(cut);
        }
    }
    for (int i = 0; i < 3; i++) vkg_threadpool_free(pools[i]);
    for (int i = 0; i < 6; i++) problem_free(&probs[i]);
}

/* ---- a step's units ------------------------------------------------------------------------ */

typedef struct unit_job {
    const problem *pr;
    float *out;
} unit_job;

static void unit_range(void *ctx, size_t begin, size_t end) {
    const unit_job *j = ctx;
    vkg_cpu_attention(&j->pr->p, j->pr->q, j->pr->k, j->pr->v, j->out, j->pr->index, begin, end);
}

/* A step's units (what its threads share out) are whole groups of rows that read the same keys:
 * a grouped decode's query heads of one key/value head make one unit, so that no two threads
 * read that head's keys and values.  Run a unit at a time, or the units over two threads, they
 * give the bits of every row run at once. */
static void test_units_are_whole_groups(void **state) {
    (void)state;
    const struct {
        uint32_t hkv, g, t;
        size_t units;
    } cases[] = {
        {3, 3, 1, 3},    /* SmolLM2's decode step */
        {2, 7, 1, 2},    /* Qwen2.5-0.5B's */
        {2, 3, 40, 8},   /* a grouped prompt: 120 rows a key/value head, 4 groups of up to 32 */
        {12, 1, 1, 12},  /* GPT-2's decode step: a head a unit */
        {12, 1, 70, 36}, /* GPT-2's prompt: 3 groups a head */
    };
    vkg_rng rng;
    vkg_rng_seed(&rng, 21);
    vkg_threadpool *pool = vkg_threadpool_new(2);
    assert_non_null(pool);
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        problem pr = gpt2_cached(&rng, cases[c].hkv * cases[c].g, cases[c].t, 600);
        if (cases[c].g > 1) make_grouped(&pr, cases[c].hkv, cases[c].g);
        const size_t units = vkg_cpu_attention_units(&pr.p);
        assert_int_equal(units, cases[c].units);
        float *want = run_whole(vkg_cpu_matmul_best_variant(), &pr), *got = calloc(pr.out_n, sizeof *got);
        assert_non_null(got);
        for (size_t u = 0; u < units; u++) unit_range(&(unit_job){&pr, got}, u, u + 1);
        if (memcmp(got, want, pr.out_n * sizeof *got)) fail_msg("case %zu: a unit at a time changes the bits", c);
        memset(got, 0, pr.out_n * sizeof *got);
        vkg_threadpool_for(pool, units, unit_range, &(unit_job){&pr, got});
        if (memcmp(got, want, pr.out_n * sizeof *got)) fail_msg("case %zu: the units on 2 threads change the bits", c);
        free(want), free(got);
        problem_free(&pr);
    }
    vkg_threadpool_free(pool);
}

/* ---- a unit's keys in chunks ------------------------------------------------------------------ */

typedef struct chunk_job {
    const problem *pr;
    float *out, *state;
} chunk_job;

static void chunk_range(void *ctx, size_t begin, size_t end) {
    const chunk_job *j = ctx;
    vkg_cpu_attention_chunk(&j->pr->p, j->pr->q, j->pr->k, j->pr->v, j->out, j->pr->index, j->state, begin, end);
}

/* A decode step's few units split into chunks of keys over threads (what the CPU executor does
 * where units are fewer than twice its threads), then folded: the bits of the units run whole
 * (which the tests above hold to double: at T = 1024 their rows fold 4 chunks), at positions on
 * either side of a chunk's end, with a sliding window that starts mid chunk, and with the chunks
 * computed in any order. */
static void test_chunks_over_threads(void **state) {
    (void)state;
    enum { CK = VKG_ATTN_CHUNK, L = 4 * CK };
    const struct {
        uint32_t hkv, g, t, window;
        int32_t pos;
        size_t chunks;
    } cases[] = {
        {3, 3, 1, 0, L - 1, 4},             /* SmolLM2's decode step at the end of the cache */
        {3, 3, 1, 0, CK - 1, 1},            /* the first chunk's last key */
        {3, 3, 1, 0, CK, 2},                /* the second chunk's first */
        {2, 7, 1, 0, 2 * CK + 88, 3},       /* Qwen2.5-0.5B's */
        {1, 1, 1, 0, 3 * CK + 9, 4},        /* one head (the few-rows path) */
        {2, 4, 1, 300, 2 * CK + 100, 3},    /* a window of 300 keys, from the middle of chunk 1 */
        {2, 3, 5, 0, CK - 2, 2},            /* a chunk of a prompt after a cached prefix */
    };
    vkg_rng rng;
    vkg_rng_seed(&rng, 22);
    vkg_threadpool *pools[2] = {vkg_threadpool_new(2), vkg_threadpool_new(3)};
    assert_non_null(pools[0]), assert_non_null(pools[1]);
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        problem pr = gpt2_cached_len(&rng, cases[c].hkv * cases[c].g, cases[c].t, cases[c].pos, L);
        if (cases[c].g > 1) make_grouped(&pr, cases[c].hkv, cases[c].g);
        pr.p.window = cases[c].window;
        const size_t units = vkg_cpu_attention_units(&pr.p), chunks = vkg_cpu_attention_chunks(&pr.p, pr.index);
        assert_int_equal(chunks, cases[c].chunks);
        float *want = run_whole(vkg_cpu_matmul_best_variant(), &pr), *got = calloc(pr.out_n, sizeof *got);
        float *st = malloc(vkg_cpu_attention_state_floats(&pr.p, chunks) * sizeof *st);
        assert_non_null(got), assert_non_null(st);
        for (int pass = 0; pass < 3; pass++) {
            memset(got, 0, pr.out_n * sizeof *got);
            chunk_job j = {&pr, got, st};
            if (pass < 2) vkg_threadpool_for(pools[pass], chunks * units, chunk_range, &j);
            else
                for (size_t u = chunks * units; u-- > 0;) chunk_range(&j, u, u + 1); /* last chunk first */
            vkg_cpu_attention_merge(&pr.p, pr.q, pr.k, pr.v, got, pr.index, chunks, st, 0, units);
            if (memcmp(got, want, pr.out_n * sizeof *got)) fail_msg("case %zu, pass %d: the chunks change the bits", c, pass);
        }
        free(want), free(got), free(st);
        problem_free(&pr);
    }
    for (int i = 0; i < 2; i++) vkg_threadpool_free(pools[i]);
}

/* ---- through a session ------------------------------------------------------------------------- */

/* GPT-2's attention built from ops (q, k, v views of [T, 3C], scale, causal mask, softmax, the
 * product with v, heads merged) runs as one fused step on the CPU executor: its output is
 * vkg_cpu_attention's bit for bit, on 1 thread and on 2. */
static void test_session_threads(void **state) {
    (void)state;
    const int64_t H = 12, T = 70, dh = 64, C = H * dh;
    vkg_graph *g = vkg_graph_new();
    assert_non_null(g);
    vkg_tensor x = vkg_input(g, "qkv", VKG_F32, 2, (const int64_t[]){T, 3 * C});
    vkg_tensor part[3];
    for (int i = 0; i < 3; i++)
        part[i] = vkg_permute(g, vkg_reshape(g, vkg_slice(g, x, -1, i * C, C), 3, (const int64_t[]){T, H, dh}),
                              (const int[]){1, 0, 2});
    vkg_tensor s = vkg_scale(g, vkg_matmul(g, part[0], part[1], VKG_NONE, VKG_TRANSPOSE_B), 0.125f);
    vkg_tensor o = vkg_matmul(g, vkg_softmax(g, vkg_mask_causal(g, s, 0, VKG_NONE)), part[2], VKG_NONE, 0);
    vkg_tensor y = vkg_reshape(g, vkg_permute(g, o, (const int[]){1, 0, 2}), 2, (const int64_t[]){T, C});
    assert_int_equal(vkg_output(g, "y", y), VKG_OK);
    vkg_plan *plan = NULL;
    vkg_error err = {0};
    assert_int_equal(vkg_plan_compile(g, NULL, &plan, &err), VKG_OK);

    vkg_rng rng;
    vkg_rng_seed(&rng, 17);
    problem pr = gpt2_prompt(&rng, (uint32_t)H, (uint32_t)T, 1);
    float *want = run_whole(vkg_cpu_matmul_best_variant(), &pr), *got = malloc(pr.out_n * sizeof *got);
    assert_non_null(got);
    for (int threads = 1; threads <= 2; threads++) {
        vkg_device_options opts = {.cpu_threads = threads, .quiet = 1};
        vkg_device *dev = NULL;
        vkg_session *ses = NULL;
        assert_int_equal(vkg_device_open("cpu", &opts, &dev, &err), VKG_OK);
        assert_int_equal(vkg_session_new(dev, plan, &ses, &err), VKG_OK);
        assert_int_equal(vkg_session_set_input(ses, x, pr.x, pr.out_n * 3 * sizeof(float), &err), VKG_OK);
        assert_int_equal(vkg_session_run(ses, &err), VKG_OK);
        memset(got, 0, pr.out_n * sizeof *got);
        assert_int_equal(vkg_session_get_output(ses, y, got, pr.out_n * sizeof *got, &err), VKG_OK);
        if (memcmp(got, want, pr.out_n * sizeof *got)) fail_msg("the session on %d threads differs", threads);
        vkg_session_free(ses);
        vkg_device_free(dev);
    }
    free(want), free(got);
    problem_free(&pr);
    vkg_plan_free(plan);
    vkg_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpt2_prompts),     cmocka_unit_test(test_gpt2_full_context),
        cmocka_unit_test(test_gpt2_decode),      cmocka_unit_test(test_other_layouts),
        cmocka_unit_test(test_nonfinite_scores), cmocka_unit_test(test_cuts_and_threads),
        cmocka_unit_test(test_units_are_whole_groups), cmocka_unit_test(test_chunks_over_threads),
        cmocka_unit_test(test_session_threads),
    };
    return cmocka_run_group_tests(tests, find_variants, NULL);
}
