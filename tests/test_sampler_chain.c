/* Sampler chains against a straightforward reference: the same stages written over the whole
 * vocabulary with a full sort (no partial selection, no histogram), on many random logits
 * vectors with ties, -inf, every stage in many orders and edge values (k past the vocabulary,
 * p = 1, min-p 1, greedy temperatures), at sizes that take the chain's short path and its
 * partial-sort path.  The tokens drawn must be the same, draw after draw.  Also: the chain's
 * exp against libm's, NaN and +inf refused, and the chain's own checks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "models/sampling.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- the reference ------------------------------------------------------------------------ */

typedef struct ref_stage {
    char kind;      /* 'P' penalties, 'T' temperature, 'K' top-k, 'N' top-p, 'M' min-p, 'G' greedy, 'D' dist */
    float v;
    int k;
    float repeat, freq, pres;
} ref_stage;

typedef struct ref_entry {
    float l;
    int32_t id;
} ref_entry;

static int ref_order(const void *a, const void *b) {
    const ref_entry *x = a, *y = b;
    if (x->l != y->l) return x->l > y->l ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* The members of the set, sorted in the order. */
static int ref_sorted(const float *L, const char *in, int V, ref_entry *out) {
    int n = 0;
    for (int i = 0; i < V; i++)
        if (in[i]) out[n++] = (ref_entry){L[i], i};
    qsort(out, (size_t)n, sizeof *out, ref_order);
    return n;
}

/* Probabilities relative to the best for temperature t, dropping tokens under the cutoff. */
static void ref_probs(const float *L, char *in, int V, float best, float t, float *p) {
    for (int i = 0; i < V; i++) {
        if (!in[i]) continue;
        const float x = (L[i] - best) / t;
        if (x < -VKG_SAMPLING_CUTOFF) in[i] = 0;
        else p[i] = vkg_sampling_exp(x);
    }
}

static double ref_total(const float *p, const char *in, int V, float *scratch) {
    int n = 0;
    for (int i = 0; i < V; i++)
        if (in[i]) scratch[n++] = p[i]; /* id order */
    return vkg_sampling_total(scratch, n);
}

/* One token from logits x[V] after history h[nh]: 0 with *token set, else -1 (refused). */
static int ref_sample(const ref_stage *st, int ns, const float *x, int V, const int32_t *h, int nh, vkg_rng *rng,
                      int32_t *token) {
    float *L = malloc((size_t)V * sizeof *L), *p = calloc((size_t)V, sizeof *p), *scratch = malloc((size_t)V * sizeof *scratch);
    char *in = calloc((size_t)V, 1);
    ref_entry *sorted = malloc((size_t)V * sizeof *sorted);
    int *count = calloc((size_t)V, sizeof *count);
    memcpy(L, x, (size_t)V * sizeof *L);
    int first = 0, result = 0;
    if (ns && st[0].kind == 'P') {
        first = 1;
        int window = st[0].k < 0 ? nh : st[0].k < nh ? st[0].k : nh;
        for (int i = nh - window; i < nh; i++)
            if (h[i] >= 0 && h[i] < V) count[h[i]]++;
        for (int i = 0; i < V; i++)
            if (count[i]) {
                if (st[0].repeat != 1.0f) L[i] = L[i] > 0.0f ? L[i] / st[0].repeat : L[i] * st[0].repeat;
                if (st[0].freq != 0.0f || st[0].pres != 0.0f) L[i] -= (float)count[i] * st[0].freq + st[0].pres;
            }
    }
    int any = 0;
    for (int i = 0; i < V; i++) {
        if (isnan(L[i]) || L[i] == INFINITY) result = -1;
        in[i] = L[i] != -INFINITY;
        any |= in[i];
    }
    if (result == 0 && !any) result = -1;
    if (result < 0) goto done;
    int n = ref_sorted(L, in, V, sorted);
    const float best = sorted[0].l;
    const int32_t best_id = sorted[0].id;
    float t = 1.0f;
    *token = -1;
    for (int s = first; s < ns && *token < 0; s++) {
        switch (st[s].kind) {
        case 'T':
            if (st[s].v <= 0.0f) {
                memset(in, 0, (size_t)V);
                in[best_id] = 1;
            } else
                t *= st[s].v;
            break;
        case 'K':
            if (st[s].k <= 0) break;
            n = ref_sorted(L, in, V, sorted);
            for (int i = st[s].k; i < n; i++) in[sorted[i].id] = 0;
            break;
        case 'N': {
            if (!(st[s].v > 0.0f && st[s].v < 1.0f)) break;
            ref_probs(L, in, V, best, t, p);
            const double target = (double)st[s].v * ref_total(p, in, V, scratch);
            n = ref_sorted(L, in, V, sorted);
            double kept = 0.0;
            int keep = 0;
            while (keep < n && (keep == 0 || kept < target)) kept += p[sorted[keep++].id];
            for (int i = keep; i < n; i++) in[sorted[i].id] = 0;
            break;
        }
        case 'M':
            if (st[s].v <= 0.0f) break;
            ref_probs(L, in, V, best, t, p);
            for (int i = 0; i < V; i++)
                if (in[i] && !(p[i] >= st[s].v)) in[i] = 0;
            break;
        case 'G': *token = best_id; break;
        case 'D': {
            ref_probs(L, in, V, best, t, p);
            const double total = ref_total(p, in, V, scratch);
            const double u = (double)vkg_rng_uniform(rng);
            n = ref_sorted(L, in, V, sorted);
            double acc = 0.0;
            for (int i = 0; i < n && *token < 0; i++) {
                acc += (double)(float)(p[sorted[i].id] / total);
                if (u < acc) *token = sorted[i].id;
            }
            if (*token < 0) *token = sorted[n - 1].id;
            break;
        }
        }
    }
    if (*token < 0) *token = best_id;
done:
    free(L);
    free(p);
    free(scratch);
    free(in);
    free(sorted);
    free(count);
    return result;
}

/* A stage by its fields (designated: the others 0). */
#define STAGE(kind_, v_, k_) ((ref_stage){.kind = (kind_), .v = (v_), .k = (k_)})
#define PENALTIES(last_n, r, f, pr) ((ref_stage){.kind = 'P', .k = (last_n), .repeat = (r), .freq = (f), .pres = (pr)})

/* ---- the chain under test ------------------------------------------------------------------ */

static vkg_sampler_chain *make_chain(const ref_stage *st, int ns, int V, uint64_t seed) {
    vkg_sampler_chain *c = NULL;
    vkg_error err = {0};
    assert_int_equal(vkg_sampler_chain_new(V, &c, &err), VKG_OK);
    for (int s = 0; s < ns; s++) {
        vkg_status r = VKG_OK;
        switch (st[s].kind) {
        case 'P': r = vkg_sampler_chain_add_penalties(c, st[s].k, st[s].repeat, st[s].freq, st[s].pres, &err); break;
        case 'T': r = vkg_sampler_chain_add_temperature(c, st[s].v, &err); break;
        case 'K': r = vkg_sampler_chain_add_top_k(c, st[s].k, &err); break;
        case 'N': r = vkg_sampler_chain_add_top_p(c, st[s].v, &err); break;
        case 'M': r = vkg_sampler_chain_add_min_p(c, st[s].v, &err); break;
        case 'G': r = vkg_sampler_chain_add_greedy(c, &err); break;
        case 'D': r = vkg_sampler_chain_add_dist(c, seed, &err); break;
        }
        if (r != VKG_OK) fail_msg("stage %c: %s", st[s].kind, err.message);
    }
    return c;
}

/* Logits of one of several shapes: wide normal, coarse values with many ties, one token far
 * ahead, all equal; some -inf. */
static void make_logits(float *x, int V, int shape, vkg_rng *r) {
    for (int i = 0; i < V; i++) {
        float v = vkg_rng_normal(r);
        switch (shape) {
        case 0: v *= 3.0f; break;
        case 1: v = roundf(v * 2.0f) / 2.0f; break;          /* ties */
        case 2: v *= 2.0f; if (i == V / 3) v = 25.0f; break; /* one far ahead */
        case 3: v = 1.5f; break;                             /* every token equal */
        default: v *= 12.0f; break;                          /* a wide spread: the cutoff bites */
        }
        if (V > 4 && vkg_rng_next(r) % 17 == 0) v = -INFINITY;
        x[i] = v;
    }
    x[vkg_rng_next(r) % (uint64_t)V] = 4.0f; /* at least one finite */
}

/* Runs chain and reference side by side for `draws` tokens, accepting each. */
static void compare(const ref_stage *st, int ns, int V, int shape, uint64_t seed, int draws) {
    vkg_rng r, ref_rng;
    vkg_rng_seed(&r, seed * 7919u + (uint64_t)V);
    vkg_rng_seed(&ref_rng, seed);
    float *x = malloc((size_t)V * sizeof *x);
    make_logits(x, V, shape, &r);
    vkg_sampler_chain *c = make_chain(st, ns, V, seed);
    int32_t *hist = malloc((size_t)(draws + 8) * sizeof *hist);
    int nh = 0;
    vkg_error err = {0};
    for (int d = 0; d < draws; d++) {
        int32_t want = -1, got = -1;
        assert_int_equal(ref_sample(st, ns, x, V, hist, nh, &ref_rng, &want), 0);
        if (vkg_sampler_chain_sample(c, x, (size_t)V, &got, &err) != VKG_OK) fail_msg("%s", err.message);
        if (got != want)
            fail_msg("V %d, shape %d, seed %llu, draw %d: the chain chose %d, the reference %d", V, shape,
                     (unsigned long long)seed, d, got, want);
        assert_int_equal(vkg_sampler_chain_accept(c, got, &err), VKG_OK);
        hist[nh++] = got;
    }
    vkg_sampler_chain_free(c);
    free(hist);
    free(x);
}

static void test_against_reference(void **state) {
    (void)state;
    const int sizes[] = {1, 2, 7, 256, 257, 1000, 5003};
    const float temps[] = {1.0f, 0.7f, 1.9f, 0.0f, 0.05f};
    const int ks[] = {0, 1, 3, 40, 300, 1 << 20}; /* the last past any vocabulary */
    const float ps[] = {1.0f, 0.9f, 0.5f, 1e-6f, 0.999f, 0.0f};
    const float ms[] = {0.0f, 0.05f, 1.0f, 1e-9f};
    uint64_t seed = 1;
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++)
        for (int shape = 0; shape < 5; shape++)
            for (int combo = 0; combo < 12; combo++, seed++) {
                ref_stage st[8];
                int ns = 0;
                if (combo % 3 == 0) st[ns++] = PENALTIES(combo % 2 ? -1 : 8, 1.3f, 0.2f, 0.1f);
                const float T = temps[(seed + (uint64_t)combo) % 5];
                const int K = ks[seed % 6];
                const float P = ps[(seed / 2) % 6], M = ms[(seed / 3) % 4];
                /* transformers' order, and other orders a user may choose */
                switch (combo % 4) {
                case 0: st[ns++] = STAGE('K', 0, K); st[ns++] = STAGE('T', T, 0); st[ns++] = STAGE('N', P, 0);
                        st[ns++] = STAGE('M', M, 0); break;
                case 1: st[ns++] = STAGE('T', T, 0); st[ns++] = STAGE('M', M, 0); st[ns++] = STAGE('N', P, 0); break;
                case 2: st[ns++] = STAGE('N', P, 0); st[ns++] = STAGE('K', 0, K); st[ns++] = STAGE('T', T, 0); break;
                case 3: st[ns++] = STAGE('T', T, 0); st[ns++] = STAGE('T', 1.5f, 0); st[ns++] = STAGE('N', P, 0); break;
                }
                st[ns++] = STAGE(combo == 11 ? 'G' : 'D', 0, 0);
                compare(st, ns, sizes[si], shape, seed, 12);
            }
    /* GPT-2's vocabulary, with the stages the tool's options make. */
    const ref_stage full[] = {PENALTIES(64, 1.1f, 0, 0), STAGE('K', 0, 0), STAGE('T', 0.8f, 0), STAGE('N', 0.95f, 0),
                              STAGE('M', 0.0f, 0), STAGE('D', 0, 0)};
    for (int shape = 0; shape < 5; shape++) compare(full, 6, 50257, shape, 100 + (uint64_t)shape, 6);
    const ref_stage plain[] = {STAGE('T', 1.0f, 0), STAGE('D', 0, 0)};
    for (int shape = 0; shape < 5; shape++) compare(plain, 2, 50257, shape, 200 + (uint64_t)shape, 6);
}

static void test_exp(void **state) {
    (void)state;
    float prev = 0.0f;
    for (float x = -VKG_SAMPLING_CUTOFF; x <= 0.0f; x += 1.0f / 1024.0f) {
        const float got = vkg_sampling_exp(x);
        const double want = exp((double)x);
        const double ulp = (double)nextafterf((float)want, INFINITY) - (double)(float)want;
        if (fabs(got - want) > 2.0 * ulp) fail_msg("exp(%.9g): %.9g, exactly %.12g", (double)x, (double)got, want);
        assert_true(got >= prev - 2.0f * (float)ulp); /* steps back by at most 2 ulp */
        prev = got;
    }
    assert_true(vkg_sampling_exp(0.0f) == 1.0f);
    assert_true(vkg_sampling_exp(-1000.0f) == vkg_sampling_exp(-VKG_SAMPLING_CUTOFF)); /* clamped */
    float p[19];
    double want = 0.0;
    for (int i = 0; i < 19; i++) want += p[i] = 1.0f / (float)(i + 1);
    assert_true(fabs(vkg_sampling_total(p, 19) - want) < 1e-12);
    assert_true(vkg_sampling_total(p, 0) == 0.0);
}

static void test_refusals(void **state) {
    (void)state;
    vkg_sampler_chain *c = NULL;
    vkg_error err = {0};
    assert_int_equal(vkg_sampler_chain_new(0, &c, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_null(c);
    assert_int_equal(vkg_sampler_chain_new(4, &c, &err), VKG_OK);
    assert_int_equal(vkg_sampler_chain_add_top_k(c, -1, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_int_equal(vkg_sampler_chain_add_min_p(c, 1.5f, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_int_equal(vkg_sampler_chain_add_top_p(c, NAN, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_int_equal(vkg_sampler_chain_add_temperature(c, INFINITY, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_int_equal(vkg_sampler_chain_add_penalties(c, -2, 1.1f, 0, 0, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_int_equal(vkg_sampler_chain_add_penalties(c, 8, 0.0f, 0, 0, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_int_equal(vkg_sampler_chain_add_temperature(c, 0.5f, &err), VKG_OK);
    assert_int_equal(vkg_sampler_chain_add_penalties(c, 8, 1.1f, 0, 0, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "add them first"));
    assert_int_equal(vkg_sampler_chain_add_dist(c, 3, &err), VKG_OK);
    assert_int_equal(vkg_sampler_chain_add_top_k(c, 2, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "after dist"));
    int32_t id = -1;
    const float ok[4] = {0.0f, 1.0f, -INFINITY, 0.5f};
    assert_int_equal(vkg_sampler_chain_sample(c, ok, 3, &id, &err), VKG_ERR_INVALID_ARGUMENT); /* wrong length */
    const float nan[4] = {0.0f, NAN, 1.0f, 0.5f};
    assert_int_equal(vkg_sampler_chain_sample(c, nan, 4, &id, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "token 1 is NaN"));
    assert_int_equal(vkg_sampler_chain_accept(c, 4, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_int_equal(vkg_sampler_chain_accept(c, -1, &err), VKG_ERR_INVALID_ARGUMENT);
    /* Reset starts the draws again from the seed. */
    int32_t first[8], again[8];
    for (int i = 0; i < 8; i++) assert_int_equal(vkg_sampler_chain_sample(c, ok, 4, &first[i], &err), VKG_OK);
    vkg_sampler_chain_reset(c);
    for (int i = 0; i < 8; i++) assert_int_equal(vkg_sampler_chain_sample(c, ok, 4, &again[i], &err), VKG_OK);
    assert_memory_equal(first, again, sizeof first);
    for (int i = 0; i < 8; i++) assert_true(first[i] != 2); /* -inf never */
    vkg_sampler_chain_free(c);
    vkg_sampler_chain_free(NULL);
}

/* The options' chain is the one the generator runs: the same tokens as a chain built by hand. */
static void test_from_options(void **state) {
    (void)state;
    enum { V = 3000 };
    float *x = malloc(V * sizeof *x);
    vkg_rng r;
    vkg_rng_seed(&r, 5);
    make_logits(x, V, 0, &r);
    vkg_sampling_options o;
    vkg_sampling_options_default(&o);
    o.temperature = 0.9f;
    o.top_k = 50;
    o.top_p = 0.9f;
    o.min_p = 0.01f;
    o.repeat_penalty = 1.2f;
    o.repeat_last_n = 16;
    o.frequency_penalty = 0.1f;
    o.presence_penalty = 0.2f;
    o.seed = 77;
    vkg_sampler_chain *a = NULL;
    vkg_error err = {0};
    assert_int_equal(vkg_sampler_chain_from_options(&o, V, &a, &err), VKG_OK);
    const ref_stage st[] = {PENALTIES(16, 1.2f, 0.1f, 0.2f), STAGE('K', 0, 50), STAGE('T', 0.9f, 0),
                            STAGE('N', 0.9f, 0), STAGE('M', 0.01f, 0), STAGE('D', 0, 0)};
    vkg_sampler_chain *b = make_chain(st, 6, V, 77);
    for (int i = 0; i < 40; i++) {
        int32_t ia, ib;
        assert_int_equal(vkg_sampler_chain_sample(a, x, V, &ia, &err), VKG_OK);
        assert_int_equal(vkg_sampler_chain_sample(b, x, V, &ib, &err), VKG_OK);
        assert_int_equal(ia, ib);
        assert_int_equal(vkg_sampler_chain_accept(a, ia, &err), VKG_OK);
        assert_int_equal(vkg_sampler_chain_accept(b, ib, &err), VKG_OK);
    }
    vkg_sampler_chain_free(a);
    vkg_sampler_chain_free(b);
    o.frequency_penalty = NAN;
    assert_int_equal(vkg_sampler_chain_from_options(&o, V, &a, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_null(a);
    free(x);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exp),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_from_options),
        cmocka_unit_test(test_against_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
