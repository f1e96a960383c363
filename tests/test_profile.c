/* Profiling: per-step times of every run land in the device's profile, which prints as a table
 * and writes a Chrome trace that parses as JSON with one complete event per step and run. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "io/json.h"
#include "support/test_util.h"
#include "support/vk_test.h"
#include "vkgraph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void profile_on(const char *spec) {
    const int vulkan = strcmp(spec, "cpu") != 0;
    vkg_device_options o = {.profile = 1, .quiet = 1, .validation = vulkan};
    vkg_device *d = NULL;
    vkg_error err = {0};
    if (vkg_device_open(spec, &o, &d, &err) != VKG_OK) {
        if (vulkan) vk_test_no_vulkan(err.message);
        fail_msg("open %s: %s", spec, err.message);
    }
    if (vulkan) assert_true(vk_test_context(d)->validation);
    vkg_graph *g = vkg_graph_new();
    vkg_tensor x = vkg_input(g, "x", VKG_F32, 2, (int64_t[]){4, 8});
    vkg_output(g, "y", vkg_softmax(g, vkg_relu(g, vkg_matmul(g, x, x, VKG_NONE, VKG_TRANSPOSE_B))));
    vkg_compile_options opts;
    vkg_compile_options_default(&opts);
    vkg_device_compile_options(d, &opts);
    vkg_plan *p = NULL;
    vkg_session *s = NULL;
    assert_int_equal(vkg_plan_compile(g, &opts, &p, &err), VKG_OK);
    assert_int_equal(vkg_session_new(d, p, &s, &err), VKG_OK);
    float in[32];
    for (int i = 0; i < 32; i++) in[i] = (float)(i % 7) - 3.0f;
    const int runs = 3, steps = vkg_plan_step_count(p);
    for (int r = 0; r < runs; r++) {
        assert_int_equal(vkg_session_set_input(s, x, in, sizeof in, &err), VKG_OK);
        assert_int_equal(vkg_session_run(s, &err), VKG_OK);
    }

    char *dir = test_tmpdir("profile");
    char path[512];
    snprintf(path, sizeof path, "%s/trace.json", dir);
    assert_int_equal(vkg_device_profile_write_trace(d, path, &err), VKG_OK);
    vkg_json *root = NULL;
    if (vkg_json_parse_file(path, &root, &err) != VKG_OK) fail_msg("trace: %s", err.message);
    const vkg_json *events = vkg_json_get(root, "traceEvents");
    assert_non_null(events);
    assert_int_equal(vkg_json_length(events), 1 + (size_t)(runs * steps)); /* + the process name */
    double last_end = 0;
    for (size_t i = 1; i < vkg_json_length(events); i++) {
        const vkg_json *e = vkg_json_at(events, i);
        assert_string_equal(vkg_json_string(vkg_json_get(e, "ph"), NULL), "X");
        double ts = vkg_json_number(vkg_json_get(e, "ts")), dur = vkg_json_number(vkg_json_get(e, "dur"));
        assert_true(dur >= 0);
        assert_true(ts >= last_end - 1e-6); /* steps of one session do not overlap */
        last_end = ts + dur;
    }
    vkg_json_free(root);
    remove(path);
    remove(dir);
    free(dir);

    FILE *f = tmpfile();
    assert_non_null(f);
    assert_int_equal(vkg_device_profile_print(d, f), VKG_OK);
    rewind(f);
    char text[4096] = {0};
    size_t got = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    assert_true(got > 0);
    assert_non_null(strstr(text, "3 runs"));
    assert_non_null(strstr(text, "matmul"));
    assert_non_null(strstr(text, "softmax"));

    vkg_session_free(s);
    vkg_plan_free(p);
    vkg_graph_free(g);
    if (vulkan) vk_test_close(d); /* no validation message, teardown included */
    else vkg_device_free(d);
}

static void test_profile_cpu(void **state) {
    (void)state;
    profile_on("cpu");
}

static void test_profile_vulkan(void **state) {
    (void)state;
    profile_on("vulkan");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_profile_cpu),
        cmocka_unit_test(test_profile_vulkan),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
