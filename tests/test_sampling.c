/* Next-token choice: the greedy limits of every sampling option, seeded reproducibility, and
 * frequencies that follow the probabilities. */
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

static int32_t sample_once(const vkg_sampling_options *o, const float *logits) {
    vkg_sampler s;
    vkg_error err = {0};
    assert_int_equal(vkg_sampler_init(&s, o, V, &err), VKG_OK);
    int32_t id = vkg_sampler_next(&s, logits, NULL, 0);
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
    for (int i = 0; i < 200; i++) {
        int32_t id = vkg_sampler_next(&s, x, NULL, 0);
        assert_true(id == 0 || id == 1 || id == 3);               /* never NaN or -inf */
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
    int differs_from_first = 0, first = vkg_sampler_next(&a, x, NULL, 0);
    assert_int_equal(vkg_sampler_next(&b, x, NULL, 0), first);
    for (int i = 0; i < 200; i++) {
        int32_t ia = vkg_sampler_next(&a, x, NULL, 0);
        assert_int_equal(vkg_sampler_next(&b, x, NULL, 0), ia);
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
    for (int i = 0; i < N; i++) count[vkg_sampler_next(&s, logits, NULL, 0)]++;
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
    for (int i = 0; i < N; i++) count[vkg_sampler_next(&s, logits, NULL, 0)]++;
    assert_int_equal(count[0] + count[3], 0);
    double q2 = p[2] / (p[1] + p[2]);
    assert_true(fabs((double)count[2] / N - q2) < 5 * sqrt(q2 * (1 - q2) / N));
    vkg_sampler_free(&s);

    /* top-p just above p(2): tokens 2 and 1 (the shortest prefix reaching it). */
    o.top_k = 0;
    o.top_p = (float)(p[2] / z) + 0.01f;
    assert_int_equal(vkg_sampler_init(&s, &o, 4, &err), VKG_OK);
    memset(count, 0, sizeof count);
    for (int i = 0; i < N; i++) count[vkg_sampler_next(&s, logits, NULL, 0)]++;
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
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_greedy_limits),
        cmocka_unit_test(test_argmax_ties_and_nan),
        cmocka_unit_test(test_same_seed_same_sequence),
        cmocka_unit_test(test_frequencies),
        cmocka_unit_test(test_bad_options),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
