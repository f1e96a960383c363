/* --dtype on the GPT-2 commands: f32, f16 and bf16 weight matrices in memory, from any file;
 * bad values refused; a folder `gpt2-random --dtype f16` writes runs as stored, and its plan
 * dump shows the 16-bit weights; `vkgraph devices` says how a device takes 16-bit weights. */
#include "gpt2_cli_run.h"

#include "vkgraph_npy.h"

static float *read_logits(const char *path, int64_t *n) {
    float *x = NULL;
    int nd = 0;
    int64_t shape[VKG_NPY_MAX_DIMS];
    vkg_error err = {0};
    if (vkg_npy_read_f32(path, &x, &nd, shape, &err) != VKG_OK) fail_msg("%s", err.message);
    *n = 1;
    for (int i = 0; i < nd; i++) *n *= shape[i];
    return x;
}

static void test_dtype_option(void **state) {
    (void)state;
    need_binary();
    char dir[1200];
    snprintf(dir, sizeof dir, "%s", in_tmp("f32"));
    result r = VKG("gpt2-random", dir, "--vocab", "100", "--embd", "32", "--ctx", "8");
    expect_ok(&r, "gpt2-random");
    result_free(&r);
    r = VKG("logits", "-m", dir, "--ids", "1,2,3", "--all", "-o", in_tmp("f32.npy"), "--device", "cpu");
    expect_ok(&r, "logits f32");
    result_free(&r);
    int64_t n = 0, m = 0;
    float *want = read_logits(in_tmp("f32.npy"), &n);
    const char *dtypes[] = {"f16", "BF16", "f32"};
    const double tol[] = {1e-5, 1e-3, 0};
    for (int i = 0; i < 3; i++)
        for (int d = 0; d < 2; d++) {
            const char *dev = d ? "vulkan" : "cpu";
            r = VKG("logits", "-m", dir, "--ids", "1,2,3", "--all", "-o", in_tmp("x.npy"), "--device", dev, "--dtype",
                    dtypes[i]);
            expect_ok(&r, dtypes[i]);
            result_free(&r);
            float *got = read_logits(in_tmp("x.npy"), &m);
            assert_int_equal(m, n);
            double e = test_nmse(got, want, (size_t)n);
            /* f32 on the CPU is the same run; on Vulkan the sums' order differs */
            if (!(e <= (d && !tol[i] ? 1e-10 : tol[i]))) fail_msg("--dtype %s on %s: nmse %g", dtypes[i], dev, e);
            free(got);
        }
    free(want);
    expect_fail(VKG("logits", "-m", dir, "--ids", "1", "-o", in_tmp("x.npy"), "--dtype", "f8"), "logits",
                "--dtype: 'f8'; use f32, f16 or bf16");
    expect_fail(VKG("generate", "-m", dir, "--ids", "1", "--dtype=f16", "--dtype", "f32"), "generate", "--dtype given twice");
    expect_fail(VKG("attention", "-m", dir, "--ids", "1", "--layer", "0", "--dtype"), "attention", "needs a value");
}

static void test_f16_folder(void **state) {
    (void)state;
    need_binary();
    char dir[1200];
    snprintf(dir, sizeof dir, "%s", in_tmp("f16"));
    result r = VKG("gpt2-random", dir, "--vocab", "100", "--embd", "32", "--ctx", "8", "--dtype", "F16");
    expect_ok(&r, "gpt2-random --dtype f16");
    result_free(&r);
    r = VKG("generate", "-m", dir, "--ids", "1,2", "-n", "4", "--device", "vulkan", "--ignore-eos");
    expect_ok(&r, "generate f16 on vulkan");
    result_free(&r);
    r = VKG("dump", "-m", dir, "--plan", "--seq", "4");
    expect_ok(&r, "dump --plan");
    if (!strstr(r.out, "wte.weight") || !strstr(r.out, "bytes f16")) fail_msg("the plan shows no f16 weights:\n%s", r.out);
    result_free(&r);
    r = VKG("dump", "-m", dir, "--seq", "4");
    expect_ok(&r, "dump");
    if (!strstr(r.out, " f16 ")) fail_msg("the graph shows no f16 constants:\n%s", r.out);
    result_free(&r);
    r = VKG("devices");
    expect_ok(&r, "devices");
    if (!strstr(r.out, "f16/bf16 weights")) fail_msg("devices does not say how it takes 16-bit weights:\n%s", r.out);
    result_free(&r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dtype_option),
        cmocka_unit_test(test_f16_folder),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
