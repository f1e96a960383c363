/* Next-token choice: the greedy limits of every sampling option, seeded reproducibility,
 * frequencies that follow the probabilities, and the exact distributions that the repetition
 * penalty, its window and min-p leave. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "models/sampling.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define V 1000

/* Logits with a known argmax (id 613) and a spread of other values. */
static void make_logits(float *x, uint64_t seed) {
    vkg_rng r;
    vkg_rng_seed(&r, seed);
    for (int i = 0; i < V; i++) x[i] = 3.0f * vkg_rng_normal(&r);
    x[613] = 20.0f;
}

/* The next token, which must be chosen without an error. */
static int32_t next(vkg_sampler *s, const float *logits, const int32_t *ctx, int nc) {
    vkg_error err = {0};
    int32_t id = -1;
    if (vkg_sampler_next(s, logits, ctx, nc, &id, &err) != VKG_OK) fail_msg("%s", err.message);
    return id;
}

static int32_t sample_once(const vkg_sampling_options *o, const float *logits) {
    vkg_sampler s;
    vkg_error err = {0};
    assert_int_equal(vkg_sampler_init(&s, o, V, &err), VKG_OK);
    int32_t id = next(&s, logits, NULL, 0);
    vkg_sampler_free(&s);
    return id;
}

static void test_greedy_limits(void **state) {
    (void)state;
    float x[V];
    for (uint64_t seed = 1; seed <= 20; seed++) {
        make_logits(x, seed);
        x[613] = 2.0f + (float)seed * 0.1f; /* not always far ahead: sampling would pick others */
        int32_t best = vkg_argmax(x, V);
        vkg_sampling_options o;
        vkg_sampling_options_default(&o);
        o.seed = seed;
        o.temperature = 0.0f;
        assert_int_equal(sample_once(&o, x), best);               /* temperature 0 */
        o.temperature = 1.0f;
        o.top_k = 1;
        assert_int_equal(sample_once(&o, x), best);               /* top-k 1 */
        o.top_k = 0;
        o.top_p = 1e-6f;
        assert_int_equal(sample_once(&o, x), best);               /* top-p tiny */
        o.top_p = 1.0f;
        o.temperature = 1e-4f;
        assert_int_equal(sample_once(&o, x), best);               /* temperature near 0 */
    }
}

static void test_argmax_ties_and_nan(void **state) {
    (void)state;
    float x[5] = {1.0f, 3.0f, NAN, 3.0f, -INFINITY};
    assert_int_equal(vkg_argmax(x, 5), 1);                        /* the lower id among equals */
    float bad[3] = {NAN, -INFINITY, NAN};
    assert_int_equal(vkg_argmax(bad, 3), 0);
    vkg_sampler s;
    vkg_sampling_options o;
    vkg_sampling_options_default(&o);
    vkg_error err = {0};
    assert_int_equal(vkg_sampler_init(&s, &o, 5, &err), VKG_OK);
    /* A NaN logit is refused, naming the token: no answer is better than a wrong one. */
    int32_t id = -1;
    assert_int_equal(vkg_sampler_next(&s, x, NULL, 0, &id, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "token 2 is NaN"));
    x[2] = INFINITY;
    assert_int_equal(vkg_sampler_next(&s, x, NULL, 0, &id, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "token 2 is +inf"));
    const float none[5] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
    assert_int_equal(vkg_sampler_next(&s, none, NULL, 0, &id, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "every logit is -inf"));
    x[2] = -INFINITY;
    for (int i = 0; i < 200; i++) {
        id = next(&s, x, NULL, 0);
        assert_true(id == 0 || id == 1 || id == 3);               /* never -inf */
    }
    vkg_sampler_free(&s);
}

static void test_same_seed_same_sequence(void **state) {
    (void)state;
    float x[V];
    make_logits(x, 7);
    x[613] = 2.0f;
    vkg_sampling_options o;
    vkg_sampling_options_default(&o);
    o.temperature = 1.3f;
    o.top_k = 100;
    o.top_p = 0.95f;
    o.seed = 99;
    vkg_sampler a, b;
    vkg_error err = {0};
    assert_int_equal(vkg_sampler_init(&a, &o, V, &err), VKG_OK);
    assert_int_equal(vkg_sampler_init(&b, &o, V, &err), VKG_OK);
    int differs_from_first = 0, first = next(&a, x, NULL, 0);
    assert_int_equal(next(&b, x, NULL, 0), first);
    for (int i = 0; i < 200; i++) {
        int32_t ia = next(&a, x, NULL, 0);
        assert_int_equal(next(&b, x, NULL, 0), ia);
        differs_from_first |= ia != first;
    }
    assert_true(differs_from_first); /* it does sample */
    vkg_sampler_free(&a);
    vkg_sampler_free(&b);
}

/* Counts over many draws match softmax(logits / T) within 5 standard errors. */
static void test_frequencies(void **state) {
    (void)state;
    const float logits[4] = {0.0f, 1.0f, 2.0f, -1.0f};
    const float T = 0.8f;
    double p[4], z = 0.0;
    for (int i = 0; i < 4; i++) z += p[i] = exp(logits[i] / T);
    vkg_sampling_options o;
    vkg_sampling_options_default(&o);
    o.temperature = T;
    o.seed = 5;
    vkg_sampler s;
    vkg_error err = {0};
    assert_int_equal(vkg_sampler_init(&s, &o, 4, &err), VKG_OK);
    const int N = 40000;
    int count[4] = {0};
    for (int i = 0; i < N; i++) count[next(&s, logits, NULL, 0)]++;
    for (int i = 0; i < 4; i++) {
        double q = p[i] / z, se = sqrt(q * (1 - q) / N);
        double f = (double)count[i] / N;
        if (fabs(f - q) > 5 * se) fail_msg("token %d: frequency %.4f, probability %.4f", i, f, q);
    }
    vkg_sampler_free(&s);

    /* top-k 2 keeps tokens 2 and 1 only, renormalised. */
    o.top_k = 2;
    assert_int_equal(vkg_sampler_init(&s, &o, 4, &err), VKG_OK);
    memset(count, 0, sizeof count);
    for (int i = 0; i < N; i++) count[next(&s, logits, NULL, 0)]++;
    assert_int_equal(count[0] + count[3], 0);
    double q2 = p[2] / (p[1] + p[2]);
    assert_true(fabs((double)count[2] / N - q2) < 5 * sqrt(q2 * (1 - q2) / N));
    vkg_sampler_free(&s);

    /* top-p just above p(2): tokens 2 and 1 (the shortest prefix reaching it). */
    o.top_k = 0;
    o.top_p = (float)(p[2] / z) + 0.01f;
    assert_int_equal(vkg_sampler_init(&s, &o, 4, &err), VKG_OK);
    memset(count, 0, sizeof count);
    for (int i = 0; i < N; i++) count[next(&s, logits, NULL, 0)]++;
    assert_int_equal(count[0] + count[3], 0);
    assert_true(count[1] > 0 && count[2] > count[1]);
    vkg_sampler_free(&s);
}

static void test_bad_options(void **state) {
    (void)state;
    vkg_sampler s;
    vkg_sampling_options o;
    vkg_error err = {0};
    vkg_sampling_options_default(&o);
    o.top_k = -1;
    assert_int_equal(vkg_sampler_init(&s, &o, 10, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "top-k -1"));
    vkg_sampling_options_default(&o);
    o.temperature = NAN;
    assert_int_equal(vkg_sampler_init(&s, &o, 10, &err), VKG_ERR_INVALID_ARGUMENT);
    vkg_sampling_options_default(&o);
    o.top_p = INFINITY;
    assert_int_equal(vkg_sampler_init(&s, &o, 10, &err), VKG_ERR_INVALID_ARGUMENT);
    vkg_sampling_options_default(&o);
    assert_int_equal(vkg_sampler_init(&s, &o, 0, &err), VKG_ERR_INVALID_ARGUMENT);
    vkg_sampling_options_default(&o);
    o.min_p = 1.5f;
    assert_int_equal(vkg_sampler_init(&s, &o, 10, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "min-p"));
    vkg_sampling_options_default(&o);
    o.repeat_penalty = 0.0f;
    assert_int_equal(vkg_sampler_init(&s, &o, 10, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "repetition penalty"));
    vkg_sampling_options_default(&o);
    o.repeat_last_n = -2;
    assert_int_equal(vkg_sampler_init(&s, &o, 10, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "repeat-last-n -2"));
}

/* ---- repetition penalty and min-p: exact distributions --------------------------------------------- */

/* The candidates left for logits x[n] after context ctx[nc], as probabilities by id (0 for a token
 * left out), for options o. */
static void distribution(const vkg_sampling_options *o, const float *x, int n, const int32_t *ctx, int nc,
                         double *p) {
    vkg_sampler s;
    vkg_error err = {0};
    assert_int_equal(vkg_sampler_init(&s, o, n, &err), VKG_OK);
    for (int i = 0; i < n; i++) p[i] = 0.0;
    const vkg_sampling_entry *cand;
    int k = 0;
    assert_int_equal(vkg_sampler_candidates(&s, x, ctx, nc, &cand, &k, &err), VKG_OK);
    double sum = 0.0;
    for (int i = 0; i < k; i++) {
        assert_true(i == 0 || cand[i].p <= cand[i - 1].p); /* most likely first */
        p[cand[i].id] = cand[i].p;
        sum += cand[i].p;
    }
    assert_true(fabs(sum - 1.0) < 1e-6);
    vkg_sampler_free(&s);
}

/* softmax(l / t) over the ids with keep[i], else 0. */
static void softmax_of(const double *l, const int *keep, int n, double t, double *p) {
    double z = 0.0;
    for (int i = 0; i < n; i++) z += p[i] = keep[i] ? exp(l[i] / t) : 0.0;
    for (int i = 0; i < n; i++) p[i] /= z;
}

static void expect_distribution(const double *got, const double *want, int n) {
    for (int i = 0; i < n; i++)
        if (fabs(got[i] - want[i]) > 1e-6) fail_msg("token %d: probability %.7f, expected %.7f", i, got[i], want[i]);
}

static vkg_sampling_options sampling(float temperature, float penalty, int last_n) {
    vkg_sampling_options o;
    vkg_sampling_options_default(&o);
    o.temperature = temperature;
    o.repeat_penalty = penalty;
    o.repeat_last_n = last_n;
    return o;
}

static void test_repeat_penalty(void **state) {
    (void)state;
    const float x[5] = {2.0f, 1.9f, -1.0f, -1.05f, 0.0f};
    const int all[5] = {1, 1, 1, 1, 1};
    double got[5], want[5];

    /* A positive logit is divided by the penalty, a negative one multiplied, zero stays. */
    vkg_sampling_options o = sampling(1.0f, 1.5f, 64);
    const int32_t ctx[4] = {0, 2, 4, 0}; /* 0 twice: penalised once */
    distribution(&o, x, 5, ctx, 4, got);
    softmax_of((double[]){2.0 / 1.5, 1.9, -1.0 * 1.5, -1.05, 0.0}, all, 5, 1.0, want);
    expect_distribution(got, want, 5);

    /* The greedy choice is made after the penalty: 2.0 / 1.5 < 1.9, and -1.0 * 1.5 < -1.05. */
    o = sampling(0.0f, 1.5f, 64);
    vkg_sampler s;
    vkg_error err = {0};
    assert_int_equal(vkg_sampler_init(&s, &o, 5, &err), VKG_OK);
    assert_int_equal(next(&s, x, NULL, 0), 0);
    assert_int_equal(next(&s, x, (const int32_t[]){0}, 1), 1);
    const float neg[5] = {-0.5f, -0.6f, -3.0f, -4.0f, -5.0f};
    assert_int_equal(next(&s, neg, NULL, 0), 0);
    assert_int_equal(next(&s, neg, (const int32_t[]){0}, 1), 1); /* -0.75 < -0.6 */
    assert_int_equal(next(&s, neg, (const int32_t[]){0, 1}, 2), 0); /* -0.75 > -0.9 */
    assert_int_equal(next(&s, neg, (const int32_t[]){0, 7, -1}, 3), 1); /* ids outside: ignored */
    vkg_sampler_free(&s);

    /* A penalty below 1 favours the tokens seen. */
    o = sampling(1.0f, 0.5f, 64);
    distribution(&o, x, 5, (const int32_t[]){1, 3}, 2, got);
    softmax_of((double[]){2.0, 1.9 / 0.5, -1.0, -1.05 * 0.5, 0.0}, all, 5, 1.0, want);
    expect_distribution(got, want, 5);
}

static void test_repeat_window(void **state) {
    (void)state;
    const float x[4] = {1.0f, 2.0f, -1.0f, 0.5f};
    const int all[4] = {1, 1, 1, 1};
    const int32_t ctx[3] = {0, 1, 2}; /* oldest first */
    double got[4], want[4];
    const float F = 2.0f;
    struct { int last_n; double l[4]; } cases[] = {
        {0, {1.0, 2.0, -1.0, 0.5}},            /* off */
        {1, {1.0, 2.0, -2.0, 0.5}},            /* the newest token only */
        {2, {1.0, 1.0, -2.0, 0.5}},
        {3, {0.5, 1.0, -2.0, 0.5}},
        {64, {0.5, 1.0, -2.0, 0.5}},           /* longer than the context: all of it */
        {-1, {0.5, 1.0, -2.0, 0.5}},           /* the whole context */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        vkg_sampling_options o = sampling(1.0f, F, cases[c].last_n);
        distribution(&o, x, 4, ctx, 3, got);
        softmax_of(cases[c].l, all, 4, 1.0, want);
        expect_distribution(got, want, 4);
    }
    /* No context, no penalty. */
    vkg_sampling_options o = sampling(1.0f, F, -1);
    distribution(&o, x, 4, NULL, 0, got);
    softmax_of((double[]){1.0, 2.0, -1.0, 0.5}, all, 4, 1.0, want);
    expect_distribution(got, want, 4);
}

static void test_min_p(void **state) {
    (void)state;
    /* Probabilities relative to the best: 1, 0.5, 0.25, 0.1 at temperature 1. */
    const double l[4] = {0.0, log(0.5), log(0.25), log(0.1)};
    const float x[4] = {(float)l[0], (float)l[1], (float)l[2], (float)l[3]};
    double got[4], want[4];
    vkg_sampling_options o = sampling(1.0f, 1.0f, 64);
    o.min_p = 0.3f;
    distribution(&o, x, 4, NULL, 0, got);
    softmax_of(l, (const int[]){1, 1, 0, 0}, 4, 1.0, want); /* 2/3, 1/3 */
    expect_distribution(got, want, 4);
    assert_true(fabs(got[0] - 2.0 / 3.0) < 1e-6);
    o.min_p = 0.25f * 0.999f; /* 0.25 itself is kept (p >= min_p * p_max) */
    distribution(&o, x, 4, NULL, 0, got);
    softmax_of(l, (const int[]){1, 1, 1, 0}, 4, 1.0, want);
    expect_distribution(got, want, 4);
    o.min_p = 1.0f; /* only the best */
    distribution(&o, x, 4, NULL, 0, got);
    expect_distribution(got, (const double[]){1, 0, 0, 0}, 4);

    /* After the temperature: at T = 2 the ratios are their square roots, 1, 0.71, 0.5, 0.32. */
    o = sampling(2.0f, 1.0f, 64);
    o.min_p = 0.3f;
    distribution(&o, x, 4, NULL, 0, got);
    softmax_of(l, (const int[]){1, 1, 1, 1}, 4, 2.0, want);
    expect_distribution(got, want, 4);
    o.min_p = 0.4f;
    distribution(&o, x, 4, NULL, 0, got);
    softmax_of(l, (const int[]){1, 1, 1, 0}, 4, 2.0, want);
    expect_distribution(got, want, 4);
}

/* Penalty, then temperature, top-k, top-p and min-p, in that order. */
static void test_combined(void **state) {
    (void)state;
    const float x[5] = {3.0f, 2.9f, 1.0f, 0.0f, -2.0f};
    double got[5], want[5];
    /* Penalty 2 on token 0: 1.5, so the order is 1 (2.9), 0 (1.5), 2 (1.0), 3, 4.  top-k 3 keeps
     * 1, 0, 2; min-p 0.2 at T = 1 keeps 0 (e^-1.4 = 0.247) and drops 2 (e^-1.9 = 0.150). */
    vkg_sampling_options o = sampling(1.0f, 2.0f, 64);
    o.top_k = 3;
    o.min_p = 0.2f;
    distribution(&o, x, 5, (const int32_t[]){0}, 1, got);
    softmax_of((double[]){1.5, 2.9, 1.0, 0.0, -2.0}, (const int[]){1, 1, 0, 0, 0}, 5, 1.0, want);
    expect_distribution(got, want, 5);
    /* The same at T = 2: ratios e^-0.7 = 0.50 and e^-0.95 = 0.39 both pass min-p 0.2; top-k 3
     * still drops 3 and 4. */
    o.temperature = 2.0f;
    distribution(&o, x, 5, (const int32_t[]){0}, 1, got);
    softmax_of((double[]){1.5, 2.9, 1.0, 0.0, -2.0}, (const int[]){1, 1, 1, 0, 0}, 5, 2.0, want);
    expect_distribution(got, want, 5);
    /* top-p 0.7 after top-k at T = 2: p(1) = 0.475 < 0.7, p(1) + p(0) = 0.714 >= 0.7: 1 and 0. */
    o.top_p = 0.7f;
    distribution(&o, x, 5, (const int32_t[]){0}, 1, got);
    softmax_of((double[]){1.5, 2.9, 1.0, 0.0, -2.0}, (const int[]){1, 1, 0, 0, 0}, 5, 2.0, want);
    expect_distribution(got, want, 5);

    /* The same seed and context give the same draws with every option on. */
    float y[V];
    make_logits(y, 11);
    y[613] = 2.0f;
    vkg_sampling_options q = sampling(1.2f, 1.3f, 16);
    q.top_k = 200;
    q.top_p = 0.9f;
    q.min_p = 0.01f;
    q.seed = 42;
    vkg_sampler a, b;
    vkg_error err = {0};
    assert_int_equal(vkg_sampler_init(&a, &q, V, &err), VKG_OK);
    assert_int_equal(vkg_sampler_init(&b, &q, V, &err), VKG_OK);
    int32_t ctx[64];
    for (int i = 0; i < 64; i++) {
        ctx[i] = next(&a, y, ctx, i);
        assert_int_equal(next(&b, y, ctx, i), ctx[i]);
    }
    int distinct = 0;
    for (int i = 0; i < 64; i++) distinct += ctx[i] != ctx[0];
    assert_true(distinct > 0);
    vkg_sampler_free(&a);
    vkg_sampler_free(&b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_greedy_limits),
        cmocka_unit_test(test_argmax_ties_and_nan),
        cmocka_unit_test(test_same_seed_same_sequence),
        cmocka_unit_test(test_frequencies),
        cmocka_unit_test(test_bad_options),
        cmocka_unit_test(test_repeat_penalty),
        cmocka_unit_test(test_repeat_window),
        cmocka_unit_test(test_min_p),
        cmocka_unit_test(test_combined),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
