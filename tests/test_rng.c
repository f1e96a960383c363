/* Tests of the seeded generator (src/base/rng.c): reproducibility, a value worked out by hand
 * from the algorithm's definition, the moments of the uniform and normal draws, skipping ahead,
 * and the random checkpoint writer's fill, drawn in blocks on several threads, equal to one fill
 * on one. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <math.h>
#include <stdlib.h>

#include "base/half.h"
#include "models/random_tensors.h"
#include "vkgraph.h"

enum { DRAWS = 100000 };

static void test_same_seed_same_sequence(void **state) {
    (void)state;
    vkg_rng a, b;
    vkg_rng_seed(&a, 12345);
    vkg_rng_seed(&b, 12345);
    for (int i = 0; i < 1000; i++) assert_int_equal(vkg_rng_next(&a), vkg_rng_next(&b));

    /* All state is in the struct: a copy replays the same normals (no hidden cache). */
    vkg_rng c = a;
    for (int i = 0; i < 100; i++) assert_true(vkg_rng_normal(&a) == vkg_rng_normal(&c));
}

static void test_different_seeds_differ(void **state) {
    (void)state;
    vkg_rng a, b;
    vkg_rng_seed(&a, 0);
    vkg_rng_seed(&b, 1);
    int same = 0;
    for (int i = 0; i < 64; i++) same += vkg_rng_next(&a) == vkg_rng_next(&b);
    assert_int_equal(same, 0);
}

/* Seed 0 worked through the definitions by hand (64-bit wrap-around arithmetic):
 *   splitmix64 from state 0, four outputs:
 *     s[0] = 0xE220A8397B1DCDAF   s[1] = 0x6E789E6AA1B965F4
 *     s[2] = 0x06C45D188009454F   s[3] = 0xF88BB8A8724C81EC
 *   xoshiro256** first output = rotl(s[1] * 5, 7) * 9:
 *     s[1] * 5        = 0x285B1815289EFDC4
 *     rotl(.., 7)     = 0x2D8C0A944F7EE214
 *     * 9             = 0x99EC5F36CB75F2B4
 *   the next two outputs, after the state update: 0xBF6E1F784956452A, 0x1A5F849D4933E6E0.
 *   The first uniform is that first output's top 24 bits, 0x99EC5F = 10087519, over 2^24. */
static void test_known_first_values_seed_0(void **state) {
    (void)state;
    vkg_rng r;
    vkg_rng_seed(&r, 0);
    assert_true(r.s[0] == 0xE220A8397B1DCDAFu);
    assert_true(r.s[1] == 0x6E789E6AA1B965F4u);
    assert_true(r.s[2] == 0x06C45D188009454Fu);
    assert_true(r.s[3] == 0xF88BB8A8724C81ECu);
    assert_true(vkg_rng_next(&r) == 0x99EC5F36CB75F2B4u);
    assert_true(vkg_rng_next(&r) == 0xBF6E1F784956452Au);
    assert_true(vkg_rng_next(&r) == 0x1A5F849D4933E6E0u);

    vkg_rng_seed(&r, 0);
    assert_true(vkg_rng_uniform(&r) == 10087519.0f / 16777216.0f);
}

/* Uniform on [0, 1): mean 1/2, variance 1/12.  Over 100k draws the standard error of the mean is
 * about 0.0009 and of the variance about 0.00024; the tolerances are more than five of those. */
static void test_uniform_range_and_moments(void **state) {
    (void)state;
    vkg_rng r;
    vkg_rng_seed(&r, 42);
    double sum = 0, sum_sq = 0;
    for (int i = 0; i < DRAWS; i++) {
        float u = vkg_rng_uniform(&r);
        assert_true(u >= 0.0f && u < 1.0f);
        sum += u;
        sum_sq += (double)u * u;
    }
    double mean = sum / DRAWS;
    double var = sum_sq / DRAWS - mean * mean;
    assert_true(fabs(mean - 0.5) < 0.005);
    assert_true(fabs(var - 1.0 / 12.0) < 0.002);
}

/* Normal: mean 0 (standard error 0.0032 over 100k draws) and standard deviation 1 (standard
 * error about 0.0022); tolerance 0.02 for both.  About 68.3% of draws fall within one standard
 * deviation; checked to within 1%.  Nothing can be non-finite. */
static void test_normal_moments(void **state) {
    (void)state;
    vkg_rng r;
    vkg_rng_seed(&r, 7);
    double sum = 0, sum_sq = 0;
    int within_one = 0;
    for (int i = 0; i < DRAWS; i++) {
        float z = vkg_rng_normal(&r);
        assert_true(isfinite(z));
        sum += z;
        sum_sq += (double)z * z;
        within_one += fabsf(z) < 1.0f;
    }
    double mean = sum / DRAWS;
    double std = sqrt(sum_sq / DRAWS - mean * mean);
    assert_true(fabs(mean) < 0.02);
    assert_true(fabs(std - 1.0) < 0.02);
    assert_true(fabs((double)within_one / DRAWS - 0.6827) < 0.01);
}

/* fill_normal is std times the same sequence vkg_rng_normal gives. */
static void test_fill_normal_scales(void **state) {
    (void)state;
    enum { N = 1000 };
    float *x = malloc(N * sizeof *x);
    assert_non_null(x);
    vkg_rng a, b;
    vkg_rng_seed(&a, 99);
    vkg_rng_seed(&b, 99);
    vkg_rng_fill_normal(&a, x, N, 0.02f);
    for (int i = 0; i < N; i++) assert_true(x[i] == 0.02f * vkg_rng_normal(&b));
    vkg_rng_fill_normal(&a, x, 0, 1.0f); /* n = 0 writes nothing and must not crash */
    free(x);
}

/* Skipping n normals leaves the generator where drawing them does: below 129 normals the skip
 * draws, above it jumps (x^m mod the characteristic polynomial); both sides of that edge, a block
 * of the writer's fill and a count of no special form. */
static void test_skip_normals_lands_where_drawing_does(void **state) {
    (void)state;
    const size_t counts[] = {0, 1, 2, 7, 127, 128, 129, 1000, 65536, 1000003};
    for (size_t c = 0; c < sizeof counts / sizeof *counts; c++) {
        vkg_rng drawn, skipped;
        vkg_rng_seed(&drawn, 5 + c);
        vkg_rng_seed(&skipped, 5 + c);
        for (size_t i = 0; i < counts[c]; i++) vkg_rng_normal(&drawn);
        vkg_rng_skip_normals(&skipped, counts[c]);
        for (int k = 0; k < 4; k++) assert_true(drawn.s[k] == skipped.s[k]);
        assert_true(vkg_rng_normal(&drawn) == vkg_rng_normal(&skipped));
    }
}

/* Counts too long to draw in a test: skips compose (a then b lands where a + b does), and a
 * count whose draws overflow 64 bits (taken in parts) lands where its parts do. */
static void test_long_skips_compose(void **state) {
    (void)state;
    const size_t a = ((size_t)1 << 40) + 12345, b = ((size_t)3 << 50) + 7;
    vkg_rng parts, whole;
    vkg_rng_seed(&parts, 77);
    vkg_rng_seed(&whole, 77);
    vkg_rng_skip_normals(&parts, a);
    vkg_rng_skip_normals(&parts, b);
    vkg_rng_skip_normals(&whole, a + b);
    for (int k = 0; k < 4; k++) assert_true(parts.s[k] == whole.s[k]);

    const size_t huge = SIZE_MAX - 5, half = huge / 2;
    vkg_rng_seed(&parts, 78);
    vkg_rng_seed(&whole, 78);
    vkg_rng_skip_normals(&parts, half);
    vkg_rng_skip_normals(&parts, huge - half);
    vkg_rng_skip_normals(&whole, huge);
    for (int k = 0; k < 4; k++) assert_true(parts.s[k] == whole.s[k]);
    /* and a jump moves the state at all */
    vkg_rng fresh;
    vkg_rng_seed(&fresh, 78);
    assert_false(fresh.s[0] == whole.s[0] && fresh.s[1] == whole.s[1]);
}

/* The writer's normal fill (blocks of 65536 values on every core; here a partial last block)
 * holds exactly what one vkg_rng_fill_normal of the same seed gives (rounded once to f16 for an
 * f16 writer), and leaves the generator where that fill does, so the next tensor draws on from
 * the same place. */
static void test_random_tensors_fill_matches_one_fill(void **state) {
    (void)state;
    enum { ROWS = 3, COLS = 65536 + 2, N = ROWS * COLS };
    const int64_t shape[2] = {ROWS, COLS};
    vkg_random_tensors s;
    vkg_random_tensors_init(&s, VKG_ST_F32, 42);
    vkg_error err = {0};
    assert_int_equal(vkg_random_tensors_add(&s, "w", 2, shape, VKG_FILL_NORMAL, 0.5f, 0.02f, &err), VKG_OK);
    assert_int_equal(vkg_random_tensors_add(&s, "b", 1, shape, VKG_FILL_NORMAL, 0.0f, 1.0f, &err), VKG_OK);
    float *x = malloc(N * sizeof *x);
    assert_non_null(x);
    vkg_rng one;
    vkg_rng_seed(&one, 42);
    vkg_rng_fill_normal(&one, x, N, 0.02f);
    const float *w = s.items[0].data;
    for (size_t i = 0; i < N; i++) assert_true(w[i] == x[i] + 0.5f);
    vkg_random_tensors half;
    vkg_random_tensors_init(&half, VKG_ST_F16, 42);
    assert_int_equal(vkg_random_tensors_add(&half, "w", 2, shape, VKG_FILL_NORMAL, 0.5f, 0.02f, &err), VKG_OK);
    const uint16_t *w16 = half.items[0].data;
    for (size_t i = 0; i < N; i++) assert_true(w16[i] == vkg_f32_to_f16(x[i] + 0.5f));
    vkg_random_tensors_free(&half);
    vkg_rng_fill_normal(&one, x, 3, 1.0f);
    const float *b = s.items[1].data;
    for (size_t i = 0; i < 3; i++) assert_true(b[i] == x[i]);
    free(x);
    vkg_random_tensors_free(&s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_seed_same_sequence),
        cmocka_unit_test(test_different_seeds_differ),
        cmocka_unit_test(test_known_first_values_seed_0),
        cmocka_unit_test(test_uniform_range_and_moments),
        cmocka_unit_test(test_normal_moments),
        cmocka_unit_test(test_fill_normal_scales),
        cmocka_unit_test(test_skip_normals_lands_where_drawing_does),
        cmocka_unit_test(test_long_skips_compose),
        cmocka_unit_test(test_random_tensors_fill_matches_one_fill),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
