/* `vkgraph bench` on a model, as a user (or bench/compare-pytorch) runs it: the JSON report of a
 * random gpt2-tiny on the CPU and on Vulkan, every figure that follows from the model's shape
 * checked against that shape (parameters, weight bytes, matmul GFLOP), the times checked for
 * consistency with the rates derived from them (never for speed), the logits it writes against
 * `vkgraph logits`, and the refused option mixes.  Plus `gpt2-random --size`. */
#include "gpt2_cli_run.h"

#include "base/json.h"

#include <math.h>

/* gpt2-tiny (src/models/gpt2_random.c), written out here so that the test does not take the
 * figures it checks from the code under test. */
enum { L = 2, H = 4, C = 64, P = 128, V = 50257 };

static const int64_t PARAMETERS = (int64_t)V * C + (int64_t)P * C + L * (12LL * C * C + 13LL * C) + 2LL * C;

/* 2 x the multiply-adds of the matmul steps of one forward pass over T tokens without a cache:
 * per layer the four projections (12 C^2 per token); then the head.  Attention's two T x T
 * products are not matmul steps: the compiler fuses them into one attention step
 * (src/graph/compile.c), whose time the matmul figure leaves out too. */
static double forward_flops(int T) {
    return L * 24.0 * T * C * C + 2.0 * T * C * V;
}

static vkg_json *parse(const result *r) {
    vkg_json *j = NULL;
    vkg_error err = {0};
    if (vkg_json_parse(r->out, strlen(r->out), &j, &err) != VKG_OK) fail_msg("not JSON: %s\n%s", err.message, r->out);
    return j;
}

static const vkg_json *field(const vkg_json *obj, const char *key, vkg_json_type type) {
    const vkg_json *v = vkg_json_get(obj, key);
    if (vkg_json_type_of(v) != type)
        fail_msg("\"%s\" is %s, not %s", key, vkg_json_type_name(vkg_json_type_of(v)), vkg_json_type_name(type));
    return v;
}

static double number(const vkg_json *obj, const char *key) { return vkg_json_number(field(obj, key, VKG_JSON_NUMBER)); }

static double positive(const vkg_json *obj, const char *key) {
    double v = number(obj, key);
    if (!(v > 0) || !isfinite(v)) fail_msg("\"%s\" is %g; a positive figure expected", key, v);
    return v;
}

/* x printed with 6 significant digits against what it must be, want computed from up to two other
 * printed figures: each carries up to 5e-6 of itself in rounding, so the three up to 1.5e-5. */
static void near(const char *what, double x, double want) {
    if (fabs(x - want) > 2e-5 * fabs(want)) fail_msg("%s is %.9g; %.9g expected", what, x, want);
}

static void check_ids(const vkg_json *a, size_t n) {
    assert_int_equal(vkg_json_length(a), n);
    for (size_t i = 0; i < n; i++) {
        double id = vkg_json_number(vkg_json_at(a, i));
        if (id < 0 || id >= V || id != floor(id)) fail_msg("id %zu is %g, not a token of the vocabulary", i, id);
    }
}

static void check_memory(const vkg_json *o, const char *what) {
    const double arena = number(o, "arena_bytes"), naive = number(o, "naive_bytes"), low = number(o, "lower_bound_bytes");
    if (!(low > 0 && low <= arena && arena <= naive)) fail_msg("%s: arena %g, naive %g, lower bound %g", what, arena, naive, low);
}

/* The report of `bench --random gpt2-tiny -T 4,8 --decode 4 --threads 1 --repeat 2`. */
static void check_report(const vkg_json *j, int cpu, int weights_copied) {
    const vkg_json *model = field(j, "model", VKG_JSON_OBJECT);
    assert_int_equal(number(model, "layers"), L);
    assert_int_equal(number(model, "heads"), H);
    assert_int_equal(number(model, "embd"), C);
    assert_int_equal(number(model, "positions"), P);
    assert_int_equal(number(model, "vocab"), V);
    assert_true(number(model, "parameters") == (double)PARAMETERS);
    assert_true(vkg_json_bool(field(model, "random_weights", VKG_JSON_BOOL)));
    assert_string_equal(vkg_json_string(field(model, "dtype", VKG_JSON_STRING), NULL), "f32");
    assert_int_equal(vkg_json_bool(field(j, "cpu_executor", VKG_JSON_BOOL)), cpu);
    positive(j, "load_ms");

    const vkg_json *fwd = field(j, "forward", VKG_JSON_ARRAY);
    assert_int_equal(vkg_json_length(fwd), 2);
    for (size_t i = 0; i < 2; i++) {
        const vkg_json *f = vkg_json_at(fwd, i);
        const int T = i ? 8 : 4;
        assert_int_equal(number(f, "tokens"), T);
        assert_int_equal(number(f, "runs"), 2);
        const double ms = positive(f, "median_ms");
        if (number(f, "min_ms") > ms) fail_msg("T = %d: min %g ms above the median %g", T, number(f, "min_ms"), ms);
        near("tokens_per_s", number(f, "tokens_per_s"), T / (ms / 1e3));
        near("matmul_gflop", number(f, "matmul_gflop"), forward_flops(T) / 1e9);
        near("matmul_gflops", number(f, "matmul_gflops"), number(f, "matmul_gflop") / (positive(f, "matmul_ms") / 1e3));
        positive(f, "compile_ms");
        check_memory(f, "forward");
    }

    const vkg_json *d = field(j, "decode", VKG_JSON_OBJECT);
    assert_int_equal(number(d, "prompt_tokens"), 4);
    assert_int_equal(number(d, "steps"), 4);
    near("decode tokens_per_s", positive(d, "tokens_per_s"), 4 / (positive(d, "total_ms") / 1e3));
    positive(d, "median_token_ms");
    positive(d, "prefill_ms");
    assert_true(number(d, "weight_bytes") == 4.0 * (double)PARAMETERS); /* every weight once, f32 */
    near("weight_gbs", number(d, "weight_gbs"), 4.0 * (double)PARAMETERS * number(d, "tokens_per_s") / 1e9);
    check_memory(d, "decode");
    check_ids(field(d, "ids", VKG_JSON_ARRAY), 5);

    const vkg_json *m = field(j, "machine", VKG_JSON_OBJECT);
    assert_int_equal(number(m, "threads"), 1);
    assert_true(number(m, "cores") >= 1);
    positive(m, "fma_peak_gflops");
    near("share_of_read_bandwidth", number(d, "share_of_read_bandwidth"), number(d, "weight_gbs") / positive(m, "read_gbs"));
    assert_true(number(m, "read_buffer_bytes") >= 256.0 * 1024 * 1024);
    field(m, "fma_isa", VKG_JSON_STRING);
    field(m, "cpu", VKG_JSON_STRING);

    const vkg_json *mem = field(j, "memory", VKG_JSON_OBJECT);
    /* the weights are mapped and read: resident */
    if (number(mem, "peak_host_bytes") < 4.0 * (double)PARAMETERS)
        fail_msg("peak host memory %g below the weights' %g bytes", number(mem, "peak_host_bytes"), 4.0 * PARAMETERS);
    /* On a device whose memory is the host's the weights are imported where they lie (host
     * memory, not a device allocation) unless VKG_HOST_IMPORT=0 has them copied. */
    if (cpu) field(mem, "peak_device_bytes", VKG_JSON_NULL);
    else if (weights_copied && number(mem, "peak_device_bytes") < 4.0 * (double)PARAMETERS)
        fail_msg("peak device memory %g below the weights' %g bytes", number(mem, "peak_device_bytes"), 4.0 * PARAMETERS);
    else if (!weights_copied) positive(mem, "peak_device_bytes"); /* the arena and the logits at least */
    check_ids(field(j, "prompt", VKG_JSON_ARRAY), 8);
}

static void bench_json(const char *device, const char *env) {
    need_binary();
    result r = run((const char *const[]){bin, "bench", "--random", "gpt2-tiny", "--device", device, "-T", "4,8",
                                         "--decode", "4", "--threads", "1", "--repeat", "2", "--json", NULL},
                   env);
    expect_ok(&r, "bench --json");
    if (strstr(r.err, "alidation")) fail_msg("validation messages: %s", r.err);
    vkg_json *j = parse(&r);
    check_report(j, !strcmp(device, "cpu"), env && !strcmp(env, "VKG_HOST_IMPORT=0"));
    vkg_json_free(j);
    result_free(&r);
}

static void test_json_cpu(void **state) {
    (void)state;
    bench_json("cpu", NULL);
}

static void test_json_vulkan(void **state) {
    (void)state;
    bench_json("vulkan", "VKG_VALIDATION=1");
}

/* The weights copied into device memory are counted in its peak. */
static void test_json_vulkan_copied(void **state) {
    (void)state;
    bench_json("vulkan", "VKG_HOST_IMPORT=0");
}

/* --dtype f16: the model says so, and decode reads 16-bit matrices (biases and layer norms stay
 * f32): between half and 0.6 of the f32 bytes. */
static void test_json_f16(void **state) {
    (void)state;
    need_binary();
    result r = VKG("bench", "--random", "gpt2-tiny", "--device", "cpu", "-T", "4", "--decode", "2", "--threads", "1",
                   "--repeat", "1", "--dtype", "f16", "--json");
    expect_ok(&r, "bench --dtype f16 --json");
    vkg_json *j = parse(&r);
    assert_string_equal(vkg_json_string(field(field(j, "model", VKG_JSON_OBJECT), "dtype", VKG_JSON_STRING), NULL),
                        "f16");
    const double bytes = number(field(j, "decode", VKG_JSON_OBJECT), "weight_bytes");
    if (!(bytes >= 2.0 * (double)PARAMETERS && bytes < 0.6 * 4.0 * (double)PARAMETERS))
        fail_msg("f16 decode reads %g bytes of weights; f32 would be %g", bytes, 4.0 * (double)PARAMETERS);
    vkg_json_free(j);
    result_free(&r);
}

/* -m DIR keeps the file's dtype, as every command does: an f16 checkpoint is timed in f16 (and
 * --dtype f32 converts it, when asked). */
static void test_dtype_as_stored(void **state) {
    (void)state;
    need_binary();
    const char *dir = in_tmp("f16-model");
    result r = VKG("gpt2-random", dir, "--size", "gpt2-tiny", "--dtype", "f16");
    expect_ok(&r, "gpt2-random --dtype f16");
    result_free(&r);
    const char *want[2] = {"f16", "f32"};
    for (int k = 0; k < 2; k++) {
        r = k == 0 ? VKG("bench", "-m", dir, "--device", "cpu", "-T", "4", "--decode", "2", "--repeat", "1", "--json")
                   : VKG("bench", "-m", dir, "--device", "cpu", "-T", "4", "--decode", "2", "--repeat", "1", "--json",
                         "--dtype", "f32");
        expect_ok(&r, "bench -m DIR --json");
        vkg_json *j = parse(&r);
        assert_string_equal(vkg_json_string(field(field(j, "model", VKG_JSON_OBJECT), "dtype", VKG_JSON_STRING), NULL),
                            want[k]);
        vkg_json_free(j);
        result_free(&r);
    }
}

/* The table holds the same figures for people. */
static void test_table(void **state) {
    (void)state;
    need_binary();
    result r = VKG("bench", "--random", "gpt2-tiny", "--device", "cpu", "-T", "3", "--decode", "2", "--repeat", "1");
    expect_ok(&r, "bench");
    static const char *const parts[] = {"gpt2-tiny (gpt2): 2 layers, 4 heads, 64 wide, 128 positions, 50257 tokens",
                                        "RANDOM weights", "FMA peak", "read bandwidth", "a prompt of 3, then 2 tokens",
                                        "peak host", "lower MiB"};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        if (!strstr(r.out, parts[i])) fail_msg("the table lacks \"%s\":\n%s", parts[i], r.out);
    result_free(&r);
}

static int argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

/* --logits: the forward pass's logits are `vkgraph logits --all`'s for the prompt the report
 * lists, and each decode row is the prediction its id was chosen from, the first one the
 * prompt's last-position logits. */
static void test_logits(void **state) {
    (void)state;
    need_binary();
    const char *dir = in_tmp("tiny"), *logits = in_tmp("logits"), *ref = in_tmp("ref.npy");
    result r = VKG("gpt2-random", dir, "--size", "gpt2-tiny", "--seed", "3");
    expect_ok(&r, "gpt2-random --size");
    result_free(&r);
    assert_int_equal(mkdir(logits, 0700), 0);
    r = VKG("bench", "-m", dir, "--device", "cpu", "-T", "6", "--decode", "3", "--repeat", "1", "--logits", logits,
            "--json");
    expect_ok(&r, "bench --logits");
    vkg_json *j = parse(&r);
    result_free(&r);
    char ids[256] = "", path[1300];
    const vkg_json *prompt = field(j, "prompt", VKG_JSON_ARRAY);
    assert_int_equal(vkg_json_length(prompt), 6);
    for (size_t i = 0; i < 6; i++)
        snprintf(ids + strlen(ids), sizeof ids - strlen(ids), "%s%d", i ? "," : "", (int)vkg_json_number(vkg_json_at(prompt, i)));
    r = VKG("logits", "-m", dir, "--ids", ids, "--all", "--device", "cpu", "-o", ref);
    expect_ok(&r, "logits --all");
    result_free(&r);

    snprintf(path, sizeof path, "%s/forward-6.npy", logits);
    float *fwd = test_read_npy_matrix(path, 6, V), *want = test_read_npy_matrix(ref, 6, V);
    double worst = 0, scale = 0;
    for (size_t i = 0; i < (size_t)6 * V; i++) {
        worst = fmax(worst, fabs((double)fwd[i] - want[i]));
        scale = fmax(scale, fabs((double)want[i]));
    }
    if (!(scale > 0) || worst > 1e-6 * scale) fail_msg("bench's logits differ from vkgraph logits by %g (scale %g)", worst, scale);

    snprintf(path, sizeof path, "%s/decode.npy", logits);
    float *dec = test_read_npy_matrix(path, 4, V);
    const vkg_json *picked = field(field(j, "decode", VKG_JSON_OBJECT), "ids", VKG_JSON_ARRAY);
    for (int k = 0; k < 4; k++)
        assert_int_equal(argmax(dec + (size_t)k * V, V), (int)vkg_json_number(vkg_json_at(picked, (size_t)k)));
    /* the prefill of the 6 ids over a cache predicts what the forward pass's last position does */
    for (int i = 0; i < V; i++)
        if (fabs((double)dec[i] - fwd[(size_t)5 * V + i]) > 1e-4 * scale)
            fail_msg("decode row 0 [%d] = %g, the forward pass's last position %g", i, dec[i], fwd[(size_t)5 * V + i]);
    free(fwd);
    free(want);
    free(dec);
    vkg_json_free(j);
}

static void test_refused(void **state) {
    (void)state;
    need_binary();
    expect_fail(VKG("bench", "--random", "gpt2-tiny", "--dtype", "f64"), "bench", "use f32, f16 or bf16");
    expect_fail(VKG("bench", "--random", "gpt3"), "bench", "gpt2-tiny, gpt2, gpt2-medium, gpt2-large, gpt2-xl");
    expect_fail(VKG("bench", "--random", "gpt2-tiny", "-T", "0"), "bench", "1 or more");
    expect_fail(VKG("bench", "--random", "gpt2-tiny", "-T", "4,4"), "bench", "4 is given twice");
    expect_fail(VKG("bench", "--random", "gpt2-tiny", "-T", "4,"), "bench", "-T");
    expect_fail(VKG("bench", "--random", "gpt2-tiny", "-T", "129", "--device", "cpu"), "bench", "128 positions");
    expect_fail(VKG("bench", "--random", "gpt2-tiny", "-T", "100", "--decode", "29", "--device", "cpu"), "bench",
                "make 129 positions");
    expect_fail(VKG("bench", "-m", "x", "--random", "gpt2-tiny"), "bench", "not both");
    expect_fail(VKG("bench", "matmul", "--random", "gpt2-tiny"), "bench", "give one");
    expect_fail(VKG("bench", "matmul", "--json"), "bench", "--json is for a model");
    expect_fail(VKG("bench", "--random", "gpt2-tiny", "--threads", "-1"), "bench", "--threads");
    expect_fail(VKG("bench", "-m", in_tmp("no-such-model")), "bench", "no-such-model");
    expect_fail(VKG("bench", "--random", "gpt2-tiny", "--decod", "3"), "bench", "--decode");
}

/* --size writes the shape of the release it names; options after it change it. */
static void test_random_size(void **state) {
    (void)state;
    need_binary();
    const char *dir = in_tmp("sized");
    result r = VKG("gpt2-random", dir, "--size", "gpt2-tiny", "--layers", "3");
    expect_ok(&r, "gpt2-random --size --layers");
    result_free(&r);
    char path[1300];
    snprintf(path, sizeof path, "%s/config.json", dir);
    vkg_json *j = NULL;
    vkg_error err = {0};
    if (vkg_json_parse_file(path, &j, &err) != VKG_OK) fail_msg("%s", err.message);
    assert_int_equal(number(j, "n_layer"), 3);
    assert_int_equal(number(j, "n_head"), H);
    assert_int_equal(number(j, "n_embd"), C);
    assert_int_equal(number(j, "n_positions"), P);
    assert_int_equal(number(j, "vocab_size"), V);
    vkg_json_free(j);
    expect_fail(VKG("gpt2-random", in_tmp("nope"), "--size", "gpt2-small"), "gpt2-random", "gpt2-medium");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_cpu),    cmocka_unit_test(test_json_vulkan),
        cmocka_unit_test(test_json_vulkan_copied),
        cmocka_unit_test(test_json_f16),
        cmocka_unit_test(test_dtype_as_stored), cmocka_unit_test(test_table),
        cmocka_unit_test(test_logits),      cmocka_unit_test(test_refused),     cmocka_unit_test(test_random_size),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
