/* A runtime index that would move a write outside its state is refused before the run, on the
 * CPU and on Vulkan alike (vkg_session_check_indices), and the state keeps its value: a write at
 * a position (vkg_write_at), each row of a decode step at its own (vkg_write_rows: a position past
 * a row's slot lies inside the state's bytes, in the next slot), and the step-by-step comparison
 * of two sessions. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "graph/graph_build.h"
#include "support/test_util.h"
#include "support/vk_test.h"
#include "vkgraph.h"
#include "vkgraph_conformance.h"

#include <stdlib.h>
#include <string.h>

enum { S = 4, D = 8, R = 3 };

/* Runs s expecting a refusal naming index `name` and its value; the state then still holds `want`. */
static void expect_refused(vkg_session *s, vkg_tensor state, const float *want, size_t n, const char *name,
                           int32_t value) {
    vkg_error err = {0};
    float now[S * D * R * 2];
    assert_int_equal(vkg_session_run(s, &err), VKG_ERR_INVALID_ARGUMENT);
    char needle[64];
    snprintf(needle, sizeof needle, "'%s' holds %d", name, (int)value);
    if (!strstr(err.message, needle)) fail_msg("'%s' does not name %s", err.message, needle);
    assert_int_equal(vkg_session_get_state(s, state, now, n * sizeof *now, &err), VKG_OK);
    for (size_t i = 0; i < n; i++)
        if (now[i] != want[i]) fail_msg("state[%zu] %g after a refused run, was %g", i, now[i], want[i]);
}

/* x [1, D] into state [S, D] at row pos: 0 .. S - 1 run, S and -1 are refused. */
static void write_at(const char *device) {
    vkg_device *dev = vk_test_open_named(device);
    vkg_graph *g = vkg_graph_new();
    vkg_tensor state = vkg_state(g, "cache", 2, (int64_t[]){S, D});
    vkg_tensor x = vkg_input(g, "x", VKG_F32, 2, (int64_t[]){1, D}), pos = vkg_index(g, "pos");
    assert_int_equal(vkg_output(g, "y", vkg_scale(g, vkg_write_at(g, state, x, 0, 0, pos), 1.0f)), VKG_OK);
    vkg_plan *p = NULL;
    vkg_session *s = test_session_for(dev, g, &p);
    vkg_error err = {0};
    float row[D], want[S * D];
    for (int t = 0; t < S; t++) {
        for (int i = 0; i < D; i++) row[i] = want[t * D + i] = (float)(t * D + i + 1);
        assert_int_equal(vkg_session_set_input(s, x, row, sizeof row, &err), VKG_OK);
        assert_int_equal(vkg_session_set_index(s, pos, t, &err), VKG_OK);
        if (vkg_session_run(s, &err) != VKG_OK) fail_msg("%s", err.message);
    }
    for (int i = 0; i < D; i++) row[i] = -1.0f;
    assert_int_equal(vkg_session_set_input(s, x, row, sizeof row, &err), VKG_OK);
    static const int32_t bad[] = {S, -1, S + 1000, INT32_MAX, INT32_MIN};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        assert_int_equal(vkg_session_set_index(s, pos, bad[k], &err), VKG_OK);
        expect_refused(s, state, want, S * D, "pos", bad[k]);
    }
    vkg_session_free(s);
    vkg_plan_free(p);
    vkg_graph_free(g);
    vk_test_close_any(dev);
}

/* The rows of a decode step, x [R, 2, 1, D], each into its slot of state [2 R, 1, S, D] at its own
 * position: one row out of range refuses the whole run. */
static void write_rows(const char *device) {
    vkg_device *dev = vk_test_open_named(device);
    vkg_graph *g = vkg_graph_new();
    vkg_tensor state = vkg_state(g, "cache", 4, (int64_t[]){2 * R, 1, S, D});
    vkg_tensor x = vkg_input(g, "x", VKG_F32, 4, (int64_t[]){R, 2, 1, D});
    vkg_tensor first = vkg_index(g, "pos0");
    for (int r = 1; r < R; r++) {
        char name[16];
        snprintf(name, sizeof name, "pos%d", r);
        vkg_index(g, name);
    }
    assert_int_equal(vkg_output(g, "y", vkg_scale(g, vkg_write_rows(g, state, x, first, R), 1.0f)), VKG_OK);
    vkg_plan *p = NULL;
    vkg_session *s = test_session_for(dev, g, &p);
    vkg_error err = {0};
    float xs[R * 2 * D], want[2 * R * S * D] = {0};
    for (int i = 0; i < R * 2 * D; i++) xs[i] = (float)(i + 1);
    assert_int_equal(vkg_session_set_input(s, x, xs, sizeof xs, &err), VKG_OK);
    static const int32_t at[R] = {0, S - 1, 2};
    for (int r = 0; r < R; r++) {
        assert_int_equal(vkg_session_set_index(s, first + r, at[r], &err), VKG_OK);
        for (int plane = 0; plane < 2; plane++)
            memcpy(&want[((size_t)(r * 2 + plane) * S + at[r]) * D], &xs[(r * 2 + plane) * D], D * sizeof(float));
    }
    if (vkg_session_run(s, &err) != VKG_OK) fail_msg("%s", err.message);
    float now[2 * R * S * D];
    assert_int_equal(vkg_session_get_state(s, state, now, sizeof now, &err), VKG_OK);
    for (size_t i = 0; i < 2 * R * S * D; i++)
        if (now[i] != want[i]) fail_msg("state[%zu] %g, want %g", i, now[i], want[i]);
    assert_int_equal(vkg_session_set_index(s, first + 1, S, &err), VKG_OK);
    expect_refused(s, state, want, 2 * R * S * D, "pos1", S);
    assert_int_equal(vkg_session_set_index(s, first + 1, 1, &err), VKG_OK);
    assert_int_equal(vkg_session_set_index(s, first + 2, -1, &err), VKG_OK);
    expect_refused(s, state, want, 2 * R * S * D, "pos2", -1);
    vkg_session_free(s);
    vkg_plan_free(p);
    vkg_graph_free(g);
    vk_test_close_any(dev);
}

/* vkg_session_compare refuses to step through a plan whose index would move a write outside. */
static void compare_refuses(const char *device) {
    vkg_device *dev = vk_test_open_named(device), *cpu = test_open_cpu();
    vkg_graph *g = vkg_graph_new();
    vkg_tensor state = vkg_state(g, "cache", 2, (int64_t[]){S, D});
    vkg_tensor x = vkg_input(g, "x", VKG_F32, 2, (int64_t[]){1, D}), pos = vkg_index(g, "pos");
    assert_int_equal(vkg_output(g, "y", vkg_scale(g, vkg_write_at(g, state, x, 0, 0, pos), 1.0f)), VKG_OK);
    vkg_plan *p = NULL;
    vkg_session *s = test_session_for(dev, g, &p), *ref = NULL;
    vkg_error err = {0};
    assert_int_equal(vkg_session_new(cpu, p, &ref, &err), VKG_OK);
    float row[D] = {1, 2, 3, 4, 5, 6, 7, 8};
    vkg_session *both[2] = {s, ref};
    for (int k = 0; k < 2; k++) assert_int_equal(vkg_session_set_input(both[k], x, row, sizeof row, &err), VKG_OK);
    vkg_step_comparison *cmp = NULL;
    int first_failure = 0;
    for (int k = 0; k < 2; k++) {
        assert_int_equal(vkg_session_set_index(s, pos, k ? 1 : S, &err), VKG_OK);
        assert_int_equal(vkg_session_set_index(ref, pos, k ? S : 1, &err), VKG_OK);
        assert_int_equal(vkg_session_compare(s, ref, &cmp, &first_failure, &err), VKG_ERR_INVALID_ARGUMENT);
        assert_non_null(strstr(err.message, "'pos' holds 4"));
        assert_null(cmp);
    }
    vkg_session_free(ref);
    vkg_session_free(s);
    vkg_plan_free(p);
    vkg_graph_free(g);
    vkg_device_free(cpu);
    vk_test_close_any(dev);
}

static void test_write_at_cpu(void **state) { (void)state; write_at("cpu"); }
static void test_write_at_vulkan(void **state) { (void)state; write_at("vulkan"); }
static void test_write_rows_cpu(void **state) { (void)state; write_rows("cpu"); }
static void test_write_rows_vulkan(void **state) { (void)state; write_rows("vulkan"); }
static void test_compare_refuses_cpu(void **state) { (void)state; compare_refuses("cpu"); }
static void test_compare_refuses_vulkan(void **state) { (void)state; compare_refuses("vulkan"); }

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_write_at_cpu),       cmocka_unit_test(test_write_at_vulkan),
        cmocka_unit_test(test_write_rows_cpu),     cmocka_unit_test(test_write_rows_vulkan),
        cmocka_unit_test(test_compare_refuses_cpu), cmocka_unit_test(test_compare_refuses_vulkan),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
