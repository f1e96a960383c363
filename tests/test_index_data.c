/* Runtime indices read as data (concatenated) gives its own value on both executors.
 * Found by fuzz_graph: the index had no view, so the copy read the first index's slot. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "support/vk_test.h"
#include "vkgraph.h"

static void run_on(vkg_device *dev) {
    vkg_graph *g = vkg_graph_new();
    vkg_tensor a = vkg_index(g, "a"), b = vkg_index(g, "b"), c = vkg_index(g, "c");
    vkg_output(g, "bca", vkg_concat(g, vkg_concat(g, b, c, 0), a, 0));
    if (vkg_graph_status(g) != VKG_OK) fail_msg("%s", vkg_graph_error(g));
    vkg_compile_options o;
    vkg_compile_options_default(&o);
    vkg_device_compile_options(dev, &o);
    vkg_plan *p = NULL;
    vkg_session *s = NULL;
    vkg_error err = {0};
    if (vkg_plan_compile(g, &o, &p, &err) != VKG_OK || vkg_session_new(dev, p, &s, &err) != VKG_OK)
        fail_msg("%s", err.message);
    assert_int_equal(vkg_session_set_index(s, a, 7, &err), VKG_OK);
    assert_int_equal(vkg_session_set_index(s, b, -3, &err), VKG_OK);
    assert_int_equal(vkg_session_set_index(s, c, 42, &err), VKG_OK);
    assert_int_equal(vkg_session_run(s, &err), VKG_OK);
    int32_t bca[3] = {0};
    assert_int_equal(vkg_session_get_output(s, vkg_find(g, "bca"), bca, sizeof bca, &err), VKG_OK);
    assert_int_equal(bca[0], -3);
    assert_int_equal(bca[1], 42);
    assert_int_equal(bca[2], 7);
    vkg_session_free(s);
    vkg_plan_free(p);
    vkg_graph_free(g);
}

static void test_cpu(void **state) {
    (void)state;
    vkg_device *dev = NULL;
    vkg_error err = {0};
    assert_int_equal(vkg_device_open("cpu", NULL, &dev, &err), VKG_OK);
    run_on(dev);
    vkg_device_free(dev);
}

static void test_vulkan(void **state) {
    (void)state;
    vkg_device *dev = vk_test_open();
    run_on(dev);
    vk_test_close(dev);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_cpu), cmocka_unit_test(test_vulkan)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
