/* --profile, --trace and --group-by as a user runs them: `vkgraph generate -n 3` on a 2-layer
 * random GPT-2, on the CPU and on Vulkan (with the validation layer), its trace read back and its
 * printed summaries added up. */
#include "gpt2_cli_run.h"

#include "support/profile_check.h"

#include <math.h>

static const char *model(void) {
    static int made;
    const char *dir = in_tmp("random2");
    if (!made) {
        result r = VKG("gpt2-random", dir, "--layers", "2", "--heads", "2", "--embd", "32", "--ctx", "32", "--seed", "5");
        expect_ok(&r, "gpt2-random");
        result_free(&r);
        made = 1;
    }
    return in_tmp("random2");
}

/* The summary's groups add up to its total, to the trace's step times of the session on track
 * `thread`, and to 100%. */
static void check_summary(const char *err_text, const trace_info *t, const char *thread, const char *by,
                          profile_summary *s) {
    profile_summary_parse(err_text, thread, by, s);
    double total = 0, share = 0;
    for (int i = 0; i < s->n; i++) total += s->group[i].total_us, share += s->group[i].share;
    const double rounding = 0.05 * (s->n + 1);
    if (fabs(total - s->total_us) > rounding) fail_msg("%s by %s: groups add to %f us, total %f", thread, by, total, s->total_us);
    const double traced = t->step_us[trace_thread(t, thread)];
    if (fabs(s->total_us - traced) > rounding + 0.05)
        fail_msg("%s by %s: total %f us, the trace's steps %f us", thread, by, s->total_us, traced);
    if (fabs(share - 100.0) > 0.05 * s->n + 0.1) fail_msg("%s by %s: shares add to %f%%", thread, by, share);
}

static void generate_profiled(const char *device) {
    need_binary();
    const char *m = model(), *trace = in_tmp("trace.json");
    const int vulkan = strcmp(device, "cpu") != 0;
    result r = run((const char *const[]){bin, "generate", "-m", m, "--ids", "1,2,3,4,5", "-n", "3", "--device", device,
                                         "--trace", trace, "--group-by", "layer,op", NULL},
                   vulkan ? "VKG_VALIDATION=1" : NULL);
    expect_ok(&r, "generate --trace --group-by");
    if (strstr(r.err, "Vulkan validation")) fail_msg("validation messages: %s", r.err);
    assert_non_null(strstr(r.err, "Chrome trace written to"));

    trace_info t;
    trace_check(trace, &t);
    const int decode = trace_thread(&t, "session 1: decode"), prefill = trace_thread(&t, "session 2: prefill (T=5)");
    if (decode < 0 || prefill < 0 || trace_thread(&t, "marks") < 0) fail_msg("track names missing: %s", r.err);
    /* one prefill pass, then a decode pass for each token after the first; a span per token, each
     * around the pass that computed its logits */
    assert_int_equal(t.n_runs, 3);
    assert_int_equal(t.runs[0].tid, t.tid[prefill]);
    assert_int_equal(t.runs[1].tid, t.tid[decode]);
    assert_int_equal(t.runs[2].tid, t.tid[decode]);
    assert_int_equal(t.n_marks, 3);
    for (int k = 0; k < 3; k++) {
        char name[16];
        snprintf(name, sizeof name, "token %d", k + 1);
        assert_string_equal(t.marks[k].name, name);
        const trace_span *run = &t.runs[k], *mark = &t.marks[k];
        if (run->ts < mark->ts || run->ts + run->dur > mark->ts + mark->dur + 1e-3)
            fail_msg("run %d [%f, %f] is outside %s [%f, %f]", k, run->ts, run->ts + run->dur, name, mark->ts,
                     mark->ts + mark->dur);
    }

    profile_summary s;
    const char *threads[2] = {"session 1: decode", "session 2: prefill (T=5)"};
    for (int i = 0; i < 2; i++) {
        check_summary(r.err, &t, threads[i], "op", &s);
        assert_non_null(profile_summary_find(&s, "matmul"));
        assert_non_null(profile_summary_find(&s, "layernorm"));
        assert_non_null(profile_summary_find(&s, "attention"));   /* fused: no probabilities asked for */
        check_summary(r.err, &t, threads[i], "layer", &s);
        /* Layers come from node names "h.<i>.": both layers are listed, and every step outside
         * them is before (embed) or after (head) them. */
        assert_non_null(strstr(r.err, " h.0.attn.heads "));
        assert_non_null(profile_summary_find(&s, "embed"));
        assert_non_null(profile_summary_find(&s, "layer 0"));
        assert_non_null(profile_summary_find(&s, "layer 1"));
        assert_non_null(profile_summary_find(&s, "head"));
        assert_null(profile_summary_find(&s, "layer 2"));
        assert_null(profile_summary_find(&s, "other"));
    }
    result_free(&r);
    remove(trace);
}

static void test_generate_cpu(void **state) {
    (void)state;
    generate_profiled("cpu");
}

static void test_generate_vulkan(void **state) {
    (void)state;
    generate_profiled("vulkan");
}

static void test_bad_group_by(void **state) {
    (void)state;
    need_binary();
    expect_fail(VKG("generate", "-m", tiny, "--ids", "1", "-n", "1", "--group-by", "head"), "generate",
                "--group-by: 'head' is not a grouping (use layer, op, or layer,op)");
    expect_fail(VKG("logits", "-m", tiny, "--ids", "1", "-o", in_tmp("x.npy"), "--group-by"), "logits",
                "--group-by needs layer, op, or layer,op");
    expect_fail(VKG("generate", "-m", tiny, "--ids", "1", "--group-by", "layer,"), "generate", "--group-by");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_generate_cpu),
        cmocka_unit_test(test_generate_vulkan),
        cmocka_unit_test(test_bad_group_by),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
