/* Sessions of two plans sharing constants and states: what one session writes into a state, the
 * other reads, on the CPU and on Vulkan. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "support/vk_test.h"
#include "vkgraph.h"

#include <string.h>

static const float weight[2] = {10.0f, 100.0f};

/* writer: cache[pos : pos + 1, :] = x      reader: y = cache * w (both name "cache" and "w") */
static vkg_graph *writer_graph(vkg_tensor *x, vkg_tensor *pos, vkg_tensor *state) {
    vkg_graph *g = vkg_graph_new();
    *state = vkg_state(g, "cache", 2, (int64_t[]){4, 2});
    *x = vkg_input(g, "x", VKG_F32, 2, (int64_t[]){1, 2});
    *pos = vkg_index(g, "pos");
    vkg_tensor w = vkg_constant(g, "w", VKG_F32, 1, (int64_t[]){2}, weight);
    vkg_tensor written = vkg_write_at(g, *state, *x, 0, 0, *pos);
    vkg_output(g, "scaled_row", vkg_mul(g, *x, w));
    (void)written;
    return g;
}

static vkg_graph *reader_graph(vkg_tensor *y) {
    vkg_graph *g = vkg_graph_new();
    vkg_tensor state = vkg_state(g, "cache", 2, (int64_t[]){4, 2});
    vkg_tensor w = vkg_constant(g, "w", VKG_F32, 1, (int64_t[]){2}, weight);
    *y = vkg_mul(g, state, w);
    vkg_output(g, "y", *y);
    return g;
}

static void share_on(const char *spec) {
    const int vulkan = strcmp(spec, "cpu") != 0;
    vkg_device_options o = {.quiet = 1}, ov = {.quiet = 1, .validation = vulkan};
    vkg_device *d = NULL, *cpu = NULL;
    vkg_error err = {0};
    if (vkg_device_open(spec, &ov, &d, &err) != VKG_OK) {
        if (vulkan) vk_test_no_vulkan(err.message);
        fail_msg("open: %s", err.message);
    }
    if (vulkan) assert_true(vk_test_context(d)->validation);
    vkg_compile_options opts;
    vkg_compile_options_default(&opts);
    vkg_device_compile_options(d, &opts);
    vkg_tensor x, pos, state, y;
    vkg_graph *gw = writer_graph(&x, &pos, &state), *gr = reader_graph(&y);
    assert_int_equal(vkg_graph_status(gw), VKG_OK);
    assert_int_equal(vkg_graph_status(gr), VKG_OK);
    vkg_plan *pw = NULL, *pr = NULL;
    assert_int_equal(vkg_plan_compile(gw, &opts, &pw, &err), VKG_OK);
    assert_int_equal(vkg_plan_compile(gr, &opts, &pr, &err), VKG_OK);
    vkg_session *sw = NULL, *sr = NULL, *alone = NULL;
    assert_int_equal(vkg_session_new(d, pw, &sw, &err), VKG_OK);
    assert_int_equal(vkg_session_new_shared(d, pr, sw, &sr, &err), VKG_OK);
    assert_int_equal(vkg_session_new(d, pr, &alone, &err), VKG_OK);

    for (int row = 0; row < 3; row++) {
        float in[2] = {(float)row + 1.0f, -(float)row - 1.0f};
        assert_int_equal(vkg_session_set_input(sw, x, in, sizeof in, &err), VKG_OK);
        assert_int_equal(vkg_session_set_index(sw, pos, row, &err), VKG_OK);
        assert_int_equal(vkg_session_run(sw, &err), VKG_OK);
    }
    float out[8], lone[8];
    assert_int_equal(vkg_session_run(sr, &err), VKG_OK);
    assert_int_equal(vkg_session_get_output(sr, y, out, sizeof out, &err), VKG_OK);
    assert_int_equal(vkg_session_run(alone, &err), VKG_OK);
    assert_int_equal(vkg_session_get_output(alone, y, lone, sizeof lone, &err), VKG_OK);
    for (int row = 0; row < 4; row++) {
        float v = row < 3 ? (float)row + 1.0f : 0.0f;
        assert_true(out[2 * row] == v * 10.0f && out[2 * row + 1] == -v * 100.0f);
        assert_true(lone[2 * row] == 0.0f && lone[2 * row + 1] == 0.0f); /* its own, untouched cache */
    }

    /* Sharing needs one device. */
    assert_int_equal(vkg_device_open("cpu", &o, &cpu, &err), VKG_OK);
    vkg_session *other = NULL;
    if (strcmp(spec, "cpu") != 0) {
        assert_int_equal(vkg_session_new_shared(cpu, pr, sw, &other, &err), VKG_ERR_INVALID_ARGUMENT);
        assert_null(other);
        assert_non_null(strstr(err.message, "same device"));
    }
    vkg_session_free(alone);
    vkg_session_free(sr);
    vkg_session_free(sw);
    vkg_plan_free(pr);
    vkg_plan_free(pw);
    vkg_graph_free(gr);
    vkg_graph_free(gw);
    vkg_device_free(cpu);
    if (vulkan) vk_test_close(d); /* no validation message, teardown included */
    else vkg_device_free(d);
}

static void test_share_cpu(void **state) {
    (void)state;
    share_on("cpu");
}

static void test_share_vulkan(void **state) {
    (void)state;
    share_on("vulkan");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_share_cpu),
        cmocka_unit_test(test_share_vulkan),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
