/* Profiling: every run and step of a profiled session lands in its device's profile, which
 * prints as a table (with each step's node) and summaries by layer and by op, and writes a Chrome
 * trace: named tracks per session, run spans around their steps, marks, times on the host clock. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "support/profile_check.h"
#include "support/test_util.h"
#include "support/vk_test.h"
#include "vkgraph.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double host_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static void sleep_ms(int ms) {
    struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)ms * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {}
}

static char *printed(const vkg_device *d, unsigned group_by) {
    FILE *f = tmpfile();
    assert_non_null(f);
    assert_int_equal(vkg_device_profile_print(d, group_by, f), VKG_OK);
    long n = ftell(f);
    rewind(f);
    char *text = calloc((size_t)n + 1, 1);
    assert_non_null(text);
    assert_int_equal(fread(text, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    return text;
}

/* A graph whose steps are named as GPT-2's are: one outside any layer before, a step in each of
 * two layers, one after. */
static vkg_graph *layered_graph(vkg_tensor *x) {
    vkg_graph *g = vkg_graph_new();
    *x = vkg_input(g, "x", VKG_F32, 2, (int64_t[]){4, 8});
    vkg_tensor e = vkg_scale(g, *x, 0.5f);
    vkg_output(g, "wte.scaled", e);
    vkg_tensor s = vkg_matmul(g, e, e, VKG_NONE, VKG_TRANSPOSE_B);
    vkg_output(g, "h.0.attn.scores", s);
    vkg_tensor p = vkg_softmax(g, s);
    vkg_output(g, "h.1.attn.softmax", p);
    vkg_output(g, "logits", vkg_relu(g, vkg_scale(g, p, 3.0f)));
    assert_int_equal(vkg_graph_status(g), VKG_OK);
    return g;
}

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
    vkg_tensor x;
    vkg_graph *g = layered_graph(&x);
    vkg_compile_options opts;
    vkg_compile_options_default(&opts);
    vkg_device_compile_options(d, &opts);
    vkg_plan *p = NULL;
    vkg_session *s1 = NULL, *s2 = NULL;
    assert_int_equal(vkg_plan_compile(g, &opts, &p, &err), VKG_OK);
    const int steps = vkg_plan_step_count(p);
    assert_int_equal(steps, 5);
    assert_int_equal(vkg_session_new(d, p, &s1, &err), VKG_OK);
    vkg_session_set_label(s1, "first");
    assert_int_equal(vkg_session_new(d, p, &s2, &err), VKG_OK);
    float in[32];
    for (int i = 0; i < 32; i++) in[i] = (float)(i % 7) - 3.0f;
    assert_int_equal(vkg_session_set_input(s1, x, in, sizeof in, &err), VKG_OK);
    assert_int_equal(vkg_session_set_input(s2, x, in, sizeof in, &err), VKG_OK);

    /* session 1 runs twice in "token 1", then, 50 ms later, session 2 and session 1 in "token 2" */
    const double before = host_us();
    assert_int_equal(vkg_device_profile_mark(d, "token 1", &err), VKG_OK);
    assert_int_equal(vkg_session_run(s1, &err), VKG_OK);
    assert_int_equal(vkg_session_run(s1, &err), VKG_OK);
    sleep_ms(50);
    assert_int_equal(vkg_device_profile_mark(d, "token 2", &err), VKG_OK);
    assert_int_equal(vkg_session_run(s2, &err), VKG_OK);
    assert_int_equal(vkg_session_run(s1, &err), VKG_OK);
    assert_int_equal(vkg_device_profile_mark(d, NULL, &err), VKG_OK);
    const double after = host_us();
    vkg_session_set_label(s2, "second"); /* a label set after the runs still names the track */

    char *dir = test_tmpdir("profile");
    char path[512];
    snprintf(path, sizeof path, "%s/trace.json", dir);
    assert_int_equal(vkg_device_profile_write_trace(d, path, &err), VKG_OK);
    trace_info t;
    trace_check(path, &t);
    remove(path);
    remove(dir);
    free(dir);
    int one = trace_thread(&t, "session 1: first"), two = trace_thread(&t, "session 2: second");
    assert_true(one >= 0 && two >= 0 && trace_thread(&t, "marks") >= 0);
    assert_int_equal(t.n_runs, 4);
    assert_int_equal(t.n_steps, 4 * steps);
    assert_non_null(strstr(t.clock, vulkan ? "GPU timestamps" : "host clock"));
    if (vulkan && vk_test_context(d)->calibrated) assert_non_null(strstr(t.clock, "VK_EXT_calibrated_timestamps"));
    /* the runs in the order they ran, at the host clock's times: the third 50 ms after the second */
    const int order[4] = {one, one, two, one};
    for (int r = 0; r < 4; r++) {
        assert_int_equal(t.runs[r].tid, t.tid[order[r]]);
        assert_true(t.runs[r].ts >= before && t.runs[r].ts + t.runs[r].dur <= after);
        if (r) assert_true(t.runs[r].ts >= t.runs[r - 1].ts + t.runs[r - 1].dur);
    }
    assert_true(t.runs[2].ts - (t.runs[1].ts + t.runs[1].dur) >= 50000.0);
    assert_int_equal(t.n_marks, 2);
    assert_string_equal(t.marks[0].name, "token 1");
    assert_string_equal(t.marks[1].name, "token 2");
    assert_true(t.marks[0].ts <= t.runs[0].ts && t.runs[1].ts + t.runs[1].dur <= t.marks[0].ts + t.marks[0].dur);
    assert_true(t.marks[0].dur >= 50000.0);
    assert_true(t.marks[1].ts <= t.runs[2].ts && t.runs[3].ts + t.runs[3].dur <= t.marks[1].ts + t.marks[1].dur);

    /* the table names each step's node; the summaries add up to the steps' times */
    char *text = printed(d, VKG_PROFILE_BY_LAYER | VKG_PROFILE_BY_OP);
    assert_non_null(strstr(text, "3 runs"));
    assert_non_null(strstr(text, "h.0.attn.scores"));
    assert_non_null(strstr(text, "h.1.attn.softmax"));
    profile_summary by_layer, by_op;
    profile_summary_parse(text, "session 1: first", "layer", &by_layer);
    profile_summary_parse(text, "session 1: first", "op", &by_op);
    const char *layers[4] = {"embed", "layer 0", "layer 1", "head"};
    const long counts[4] = {3, 3, 3, 6}; /* steps in the group x 3 runs */
    assert_int_equal(by_layer.n, 4);
    for (int i = 0; i < 4; i++) {
        assert_string_equal(by_layer.group[i].key, layers[i]);
        assert_int_equal(by_layer.group[i].count, counts[i]);
    }
    assert_int_equal(by_layer.count, 3 * steps);
    assert_non_null(profile_summary_find(&by_op, "matmul"));
    assert_non_null(profile_summary_find(&by_op, "softmax"));
    assert_int_equal(profile_summary_find(&by_op, "scale")->count, 6);
    const profile_summary *sums[2] = {&by_layer, &by_op};
    for (int k = 0; k < 2; k++) {
        double total = 0, share = 0;
        for (int i = 0; i < sums[k]->n; i++) total += sums[k]->group[i].total_us, share += sums[k]->group[i].share;
        const double rounding = 0.05 * (sums[k]->n + 1); /* printed to 0.1 us */
        if (fabs(total - sums[k]->total_us) > rounding) fail_msg("groups add to %f us, total %f", total, sums[k]->total_us);
        if (fabs(sums[k]->total_us - t.step_us[one]) > rounding + 0.05)
            fail_msg("total %f us, the trace's steps %f us", sums[k]->total_us, t.step_us[one]);
        if (sums[k]->total_us > 1.0 && fabs(share - 100.0) > 0.05 * sums[k]->n + 1e-9) fail_msg("shares add to %f%%", share);
    }
    free(text);
    text = printed(d, VKG_PROFILE_STEPS); /* the table only */
    assert_null(strstr(text, " by layer:"));
    assert_null(strstr(text, " by op:"));
    free(text);

    vkg_session_free(s1);
    vkg_session_free(s2);
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

/* Marks are kept only where something is profiled. */
static void test_marks_without_profiling(void **state) {
    (void)state;
    vkg_device *d = NULL;
    vkg_error err = {0};
    vkg_device_options o = {.quiet = 1};
    assert_int_equal(vkg_device_open("cpu", &o, &d, &err), VKG_OK);
    assert_int_equal(vkg_device_profile_mark(d, "token 1", &err), VKG_OK);
    assert_int_equal(vkg_device_profile_mark(d, NULL, &err), VKG_OK);
    char *text = printed(d, VKG_PROFILE_BY_LAYER);
    assert_string_equal(text, "profile: no profiled runs\n");
    free(text);
    vkg_device_free(d);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_profile_cpu),
        cmocka_unit_test(test_profile_vulkan),
        cmocka_unit_test(test_marks_without_profiling),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
