/* A session whose regions together exceed the machine's memory is refused before the first
 * allocation, with the need and the limit in the message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>
#include <vkgraph.h>


static void test_cpu_session_over_memory(void **state) {
    (void)state;
    /* Inputs of 1 GiB each (a binding may span at most 4 GiB), one more than the machine holds:
     * each alone would fit. */
    const uint64_t have = vkg_host_memory_bytes();
    const int64_t cols = 1 << 20, rows = 256;
    const int n = (int)(have >> 30) + 1;
    vkg_graph *g = vkg_graph_new();
    vkg_tensor sum = VKG_NONE;
    for (int i = 0; i < n; i++) {
        char name[16];
        snprintf(name, sizeof name, "x%d", i);
        vkg_tensor x = vkg_input(g, name, VKG_F32, 2, (int64_t[]){rows, cols});
        sum = i ? vkg_add(g, sum, x) : x;
    }
    vkg_output(g, "y", sum);
    assert_int_equal(vkg_graph_status(g), VKG_OK);
    vkg_error err = {0};
    vkg_device *dev = NULL;
    vkg_plan *plan = NULL;
    vkg_session *s = NULL;
    assert_int_equal(vkg_device_open("cpu", NULL, &dev, &err), VKG_OK);
    vkg_compile_options opts;
    vkg_compile_options_default(&opts);
    opts.max_binding_bytes = (uint64_t)1 << 32; /* the most a binding may span */
    if (vkg_plan_compile(g, &opts, &plan, &err) != VKG_OK) fail_msg("%s", err.message);
    assert_int_equal(vkg_session_new(dev, plan, &s, &err), VKG_ERR_OUT_OF_MEMORY);
    assert_null(s);
    if (!strstr(err.message, "the CPU session needs ") || !strstr(err.message, "GiB of memory"))
        fail_msg("unexpected message: %s", err.message);
    vkg_plan_free(plan);
    vkg_device_free(dev);
    vkg_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_cpu_session_over_memory)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
