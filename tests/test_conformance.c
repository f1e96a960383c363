/* The conformance suite: the comparison catches what it must (a perturbed output, a NaN where the
 * reference has a number, an infinity of the wrong sign), the CPU executor agrees with itself
 * bit for bit across thread counts, and the quick suite passes on the Vulkan device with the
 * validation layer on and silent, with lavapipe's own tuning and with a discrete GPU's. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "vkgraph_conformance.h"
#include "support/vk_test.h"
#include "vulkan/pipelines.h"

static void test_compare_identical_and_zero(void **state) {
    (void)state;
    const float a[] = {1.0f, -2.0f, 0.5f, INFINITY, -INFINITY, NAN};
    vkg_conformance_diff d;
    vkg_conformance_compare(a, a, 6, &d);
    assert_true(d.nmse == 0.0);
    assert_int_equal(d.nonfinite_mismatches, 0);
    assert_int_equal(d.first_mismatch, -1);
    assert_true(vkg_conformance_diff_passes(&d, 0.0));

    /* An all-zero reference (fully masked softmax rows) is matched by zeros only. */
    const float zeros[3] = {0}, tiny[3] = {0, 1e-20f, 0};
    vkg_conformance_compare(zeros, zeros, 3, &d);
    assert_true(d.nmse == 0.0);
    vkg_conformance_compare(tiny, zeros, 3, &d);
    assert_true(isinf(d.nmse));
    assert_false(vkg_conformance_diff_passes(&d, 1.0));
}

static void test_compare_measures_nmse(void **state) {
    (void)state;
    float ref[64], dut[64];
    for (int i = 0; i < 64; i++) {
        ref[i] = (float)(i % 7) - 3.0f;
        dut[i] = ref[i] * 1.001f; /* relative error 1e-3: nmse 1e-6 */
    }
    vkg_conformance_diff d;
    vkg_conformance_compare(dut, ref, 64, &d);
    assert_true(fabs(d.nmse - 1e-6) < 1e-8);
    assert_false(vkg_conformance_diff_passes(&d, VKG_CONFORMANCE_NMSE_ELEMENTWISE));
    assert_true(vkg_conformance_diff_passes(&d, VKG_CONFORMANCE_NMSE_REDUCTION));
}

static void test_compare_detects_nonfinite_disagreement(void **state) {
    (void)state;
    const float ref[] = {1.0f, NAN, INFINITY, 2.0f, -INFINITY};
    const float nan_to_zero[] = {1.0f, 0.0f, INFINITY, 2.0f, -INFINITY};
    const float nan_where_finite[] = {1.0f, NAN, INFINITY, NAN, -INFINITY};
    const float wrong_sign[] = {1.0f, NAN, -INFINITY, 2.0f, -INFINITY};
    vkg_conformance_diff d;
    vkg_conformance_compare(nan_to_zero, ref, 5, &d);
    assert_int_equal(d.nonfinite_mismatches, 1);
    assert_int_equal(d.first_mismatch, 1);
    assert_true(d.nmse == 0.0); /* the finite values agree: only the NaN check catches it */
    assert_false(vkg_conformance_diff_passes(&d, 1.0));
    vkg_conformance_compare(nan_where_finite, ref, 5, &d);
    assert_int_equal(d.nonfinite_mismatches, 1);
    assert_int_equal(d.first_mismatch, 3);
    vkg_conformance_compare(wrong_sign, ref, 5, &d);
    assert_int_equal(d.nonfinite_mismatches, 1);
    assert_int_equal(d.first_mismatch, 2);
}

static vkg_device *open_cpu(int threads) {
    vkg_device_options o = {.cpu_threads = threads, .quiet = 1};
    vkg_device *d = NULL;
    vkg_error err = {0};
    if (vkg_device_open("cpu", &o, &d, &err) != VKG_OK) fail_msg("cpu device: %s", err.message);
    return d;
}

static void test_unknown_op_is_refused(void **state) {
    (void)state;
    vkg_device *ref = open_cpu(1);
    vkg_conformance_options o;
    vkg_conformance_options_default(&o);
    o.op = "convolution";
    vkg_conformance_report r = {0};
    vkg_error err = {0};
    assert_int_equal(vkg_conformance_run(ref, ref, &o, &r, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "convolution"));
    assert_non_null(strstr(err.message, "matmul"));
    assert_int_equal(r.n_cases, 0);
    vkg_conformance_report_free(&r);
    vkg_device_free(ref);
}

/* Every output of the device under test scaled by 1.01: every case must fail, and the table says so. */
static void test_perturbed_outputs_fail(void **state) {
    (void)state;
    vkg_device *ref = open_cpu(1);
    const char *ops[] = {"scale", "matmul"};
    for (int k = 0; k < 2; k++) {
        vkg_conformance_options o;
        vkg_conformance_options_default(&o);
        o.level = VKG_CONFORMANCE_QUICK;
        o.op = ops[k];
        o.perturb = k == 0 ? 0.01 : 0.1; /* nmse 1e-4 > 1e-7; 1e-2 > 5e-4 */
        vkg_conformance_report r = {0};
        vkg_error err = {0};
        assert_int_equal(vkg_conformance_run(ref, ref, &o, &r, &err), VKG_OK);
        assert_true(r.n_cases >= 4);
        assert_int_equal(r.passed, 0);
        assert_int_equal(r.failed, r.n_cases);
        for (int i = 0; i < r.n_cases; i++) {
            assert_string_equal(r.cases[i].op, ops[k]);
            assert_string_equal(r.cases[i].error, "");
            assert_true(r.cases[i].nmse > r.cases[i].threshold);
        }
        static char buf[65536];
        memset(buf, 0, sizeof buf);
        FILE *f = fmemopen(buf, sizeof buf - 1, "w");
        assert_non_null(f);
        vkg_conformance_report_print(&r, f, 0);
        fclose(f);
        assert_non_null(strstr(buf, "FAIL"));
        char last[64];
        snprintf(last, sizeof last, "0 passed, %d failed", r.n_cases);
        assert_non_null(strstr(buf, last));
        vkg_conformance_report_free(&r);
    }
    vkg_device_free(ref);
}

static void print_failures(const vkg_conformance_report *r) {
    if (r->failed) vkg_conformance_report_print(r, stderr, 0);
}

/* The CPU kernels promise the same bits however the work is split over threads. */
static void test_cpu_threads_agree_exactly(void **state) {
    (void)state;
    vkg_device *one = open_cpu(1), *two = open_cpu(2);
    vkg_conformance_options o;
    vkg_conformance_options_default(&o);
    o.level = VKG_CONFORMANCE_QUICK;
    vkg_conformance_report r = {0};
    vkg_error err = {0};
    assert_int_equal(vkg_conformance_run(one, two, &o, &r, &err), VKG_OK);
    print_failures(&r);
    assert_true(r.n_cases > 100);
    assert_int_equal(r.failed, 0);
    for (int i = 0; i < r.n_cases; i++) {
        if (r.cases[i].nmse != 0.0) vkg_conformance_case_print(&r.cases[i], stderr);
        assert_true(r.cases[i].nmse == 0.0);
    }
    /* Every op group ran. */
    for (int g = 0; g < vkg_conformance_op_count(); g++) {
        int n = 0;
        for (int i = 0; i < r.n_cases; i++) n += !strcmp(r.cases[i].op, vkg_conformance_op_name(g));
        if (n == 0) fail_msg("op %s has no quick case", vkg_conformance_op_name(g));
    }
    vkg_conformance_report_free(&r);
    vkg_device_free(two);
    vkg_device_free(one);
}

/* The quick suite on the Vulkan device, validation on: every case passes and the layer says
 * nothing, teardown included (vk_test_close). */
static void run_vulkan_suite(vkg_device *dut) {
    vkg_device *ref = open_cpu(0);
    vkg_conformance_options o;
    vkg_conformance_options_default(&o);
    o.level = VKG_CONFORMANCE_QUICK;
    vkg_conformance_report r = {0};
    vkg_error err = {0};
    assert_int_equal(vkg_conformance_run(ref, dut, &o, &r, &err), VKG_OK);
    print_failures(&r);
    assert_true(r.n_cases > 100);
    assert_int_equal(r.failed, 0);
    assert_int_equal(vkg_device_validation_errors(dut), 0);
    vkg_conformance_report_free(&r);
    vkg_device_free(ref);
}

static void test_vulkan_quick_suite_passes(void **state) {
    (void)state;
    vkg_device *dut = vk_test_open();
    run_vulkan_suite(dut);
    vk_test_close(dut);
}

/* The same with the sizes a discrete GPU gets (wide workgroups, shared-memory tiled matmul, split-K
 * matrix-vector, a decode step's keys split over workgroups), so those shaders are checked on a
 * machine whose device is lavapipe. */
static void test_vulkan_gpu_tuning_passes(void **state) {
    (void)state;
    vkg_device *dut = vk_test_open();
    vkg_vk_context *c = vk_test_context(dut);
    vkg_vk_tuning t = c->tuning;
    t.elementwise_wg = 256, t.row_wg = 256, t.matmul_texel = 0;
    t.mm_wg_x = 16, t.mm_wg_y = 16, t.mm_tm = 4, t.mm_tm_tall = 4, t.mm_tn = 4, t.mm_bk = 16;
    t.mv_wg = 256, t.mv_cols = 32;
    t.attn_chunk_keys = 256;
    vkg_error err = {0};
    if (vkg_vk_tuning_check(c, &t, &err) != VKG_OK) fail_msg("%s", err.message);
    c->tuning = t;
    run_vulkan_suite(dut);
    vk_test_close(dut);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_compare_identical_and_zero),
        cmocka_unit_test(test_compare_measures_nmse),
        cmocka_unit_test(test_compare_detects_nonfinite_disagreement),
        cmocka_unit_test(test_unknown_op_is_refused),
        cmocka_unit_test(test_perturbed_outputs_fail),
        cmocka_unit_test(test_cpu_threads_agree_exactly),
        cmocka_unit_test(test_vulkan_quick_suite_passes),
        cmocka_unit_test(test_vulkan_gpu_tuning_passes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
