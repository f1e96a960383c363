/* layernorm over rows of any magnitude, on the CPU executor and on Vulkan, each output against a
 * float64 computation over the very floats the step read.  Rows of magnitude 1e-37 to 3e37 (in
 * float, squared deviations of 1e-30 underflow to 0 and of 1e20 overflow to inf), a large mean
 * with small deviations, equal values, and eps from 0 to 1e30 and inf: a variance of 0 or inf
 * would give inf or 0 where the answer is of order 1.  The chain the graph fuzz target found,
 * eps 1e30 twice then eps 0 (rows of 1e-30 normalised), runs as one graph. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/vk_test.h"
#include "vkgraph.h"

#define ROWS 10
#define STAGES 5

/* Row r of x [ROWS, cols]: values of magnitude 1/4 to 2, either sign, times the row's
 * magnitude (none below float's smallest normal, which a device may flush to 0); row 7 has a
 * large mean (1e30 plus deviations of 1e24), row 8 is all equal.  Through the chain, rows of
 * magnitude 1e-8 to 1e-15 would leave subnormals in ln(ln(x, 1e30), 1e30): none is. */
static void fill_rows(float *x, int64_t cols, uint64_t seed) {
    static const float magnitude[ROWS] = {1.0f, 1e-30f, 1e-20f, 1e20f, 1e30f, 1.5e37f, 1e10f, 0, 0, 1e-37f};
    vk_test_fill(x, (size_t)(ROWS * cols), seed, 2.0f);
    for (int r = 0; r < ROWS; r++)
        for (int64_t c = 0; c < cols; c++) {
            float *v = &x[r * cols + c];
            const float w = copysignf(0.25f + 0.875f * fabsf(*v), *v);
            if (r == 7) *v = 1e30f + 5e23f * w;
            else if (r == 8) *v = 3.25f;
            else *v = magnitude[r] * w;
        }
}

/* The float64 layernorm of one row (biased variance, no gamma or beta). */
static void layernorm_row_f64(const float *x, int64_t cols, double eps, double *y) {
    double mean = 0.0, var = 0.0;
    for (int64_t c = 0; c < cols; c++) mean += x[c];
    mean /= (double)cols;
    for (int64_t c = 0; c < cols; c++) var += ((double)x[c] - mean) * ((double)x[c] - mean);
    var /= (double)cols;
    const double rstd = 1.0 / sqrt(var + eps);
    for (int64_t c = 0; c < cols; c++) y[c] = ((double)x[c] - mean) * rstd;
}

/* got (the step's output) against the float64 layernorm of in (the step's input), row by row:
 * within 2e-5 of the row's largest magnitude (float sums of up to 1000 terms) or of float's
 * smallest normal (an answer below it is a subnormal, which a device may flush to 0), NaN where
 * the formula gives NaN (0 / 0: equal values and eps 0). */
static void check_rows(const char *device, const char *what, const float *in, const float *got, int64_t cols,
                       double eps) {
    double *want = malloc((size_t)cols * sizeof *want);
    assert_non_null(want);
    for (int r = 0; r < ROWS; r++) {
        layernorm_row_f64(in + r * cols, cols, eps, want);
        double scale = 0.0;
        for (int64_t c = 0; c < cols; c++) scale = fmax(scale, fabs(want[c]));
        for (int64_t c = 0; c < cols; c++) {
            const float g = got[r * cols + c];
            const int ok = isnan(want[c]) ? isnan(g) : fabs((double)g - want[c]) <= fmax(2e-5 * scale, FLT_MIN);
            if (!ok)
                fail_msg("%s: %s, cols %lld, eps %g, row %d column %lld: got %.9g, want %.9g", device, what,
                         (long long)cols, eps, r, (long long)c, g, want[c]);
        }
    }
    free(want);
}

static void run_case(vkg_device *d, int64_t cols) {
    static const float eps[STAGES] = {1e30f, 1e30f, 0.0f, 1e-5f, INFINITY};
    static const char *const name[STAGES] = {"a", "b", "c", "d", "e"};
    vkg_graph *g = vkg_graph_new();
    assert_non_null(g);
    const int64_t shape[2] = {ROWS, cols};
    vkg_tensor x = vkg_input(g, "x", VKG_F32, 2, shape);
    /* a = ln(x, 1e30), b = ln(a, 1e30), c = ln(b, 0): the fuzz finding's chain; d, e over x */
    vkg_tensor t[STAGES];
    t[0] = vkg_layernorm(g, x, VKG_NONE, VKG_NONE, eps[0]);
    t[1] = vkg_layernorm(g, t[0], VKG_NONE, VKG_NONE, eps[1]);
    t[2] = vkg_layernorm(g, t[1], VKG_NONE, VKG_NONE, eps[2]);
    t[3] = vkg_layernorm(g, x, VKG_NONE, VKG_NONE, eps[3]);
    t[4] = vkg_layernorm(g, x, VKG_NONE, VKG_NONE, eps[4]);
    for (int s = 0; s < STAGES; s++) vkg_output(g, name[s], t[s]);
    assert_int_equal(vkg_graph_status(g), VKG_OK);

    vkg_compile_options opts;
    vkg_compile_options_default(&opts);
    vkg_device_compile_options(d, &opts);
    vkg_plan *plan = NULL;
    vkg_error err = {0};
    if (vkg_plan_compile(g, &opts, &plan, &err) != VKG_OK) fail_msg("compile: %s", err.message);
    vkg_session *s = NULL;
    if (vkg_session_new(d, plan, &s, &err) != VKG_OK) fail_msg("session: %s", err.message);

    const size_t n = (size_t)(ROWS * cols), bytes = n * sizeof(float);
    float *in = malloc(bytes), *out[STAGES];
    assert_non_null(in);
    fill_rows(in, cols, (uint64_t)cols);
    if (vkg_session_set_input(s, x, in, bytes, &err) != VKG_OK) fail_msg("set_input: %s", err.message);
    if (vkg_session_run(s, &err) != VKG_OK) fail_msg("run: %s", err.message);
    for (int k = 0; k < STAGES; k++) {
        out[k] = malloc(bytes);
        assert_non_null(out[k]);
        if (vkg_session_get_output(s, t[k], out[k], bytes, &err) != VKG_OK) fail_msg("get_output: %s", err.message);
    }
    const char *device = vkg_device_name(d);
    check_rows(device, "ln(x, 1e30)", in, out[0], cols, eps[0]);
    check_rows(device, "ln(ln(x, 1e30), 1e30)", out[0], out[1], cols, eps[1]);
    check_rows(device, "ln(ln(ln(x, 1e30), 1e30), 0)", out[1], out[2], cols, eps[2]);
    check_rows(device, "ln(x, 1e-5)", in, out[3], cols, eps[3]);
    check_rows(device, "ln(x, inf)", in, out[4], cols, eps[4]);

    /* The finding's chain ends in a layernorm of rows of about 1e-30 with eps 0: of order 1. */
    for (size_t i = 0; i < (size_t)cols && cols > 1; i++) assert_true(fabsf(out[2][i]) > 1e-3f && fabsf(out[2][i]) < 40.0f);

    for (int k = 0; k < STAGES; k++) free(out[k]);
    free(in);
    vkg_session_free(s);
    vkg_plan_free(plan);
    vkg_graph_free(g);
}

static void test_layernorm_range(void **state) {
    vkg_device *d = vk_test_device(state);
    /* 3: the finding's rows; 768: GPT-2's width; 1000: no workgroup's multiple; 1: var = 0 */
    static const int64_t cols[] = {3, 768, 1000, 1};
    for (size_t i = 0; i < sizeof cols / sizeof cols[0]; i++) run_case(d, cols[i]);
    assert_int_equal(vkg_device_validation_errors(d), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_layernorm_range)};
    int failed = cmocka_run_group_tests_name("layernorm range on the CPU", tests, vk_test_cpu_group_setup,
                                             vk_test_group_teardown);
    failed += cmocka_run_group_tests_name("layernorm range on Vulkan", tests, vk_test_group_setup,
                                          vk_test_group_teardown);
    return vk_test_exit_status(failed);
}
