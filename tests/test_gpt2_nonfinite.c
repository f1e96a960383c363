/* NaN and Inf never become an answer.  A weight holding one is refused at load, for F32 used in
 * place and for F16/BF16 converted alike, naming the tensor and the first bad element; finite
 * weights so large that the forward pass overflows end logits, generate and attention with a
 * "not finite" error naming the position, on the CPU and on Vulkan, never with a token. */
#include "gpt2_cli_run.h"

#include "models/gpt2.h"
#include "models/model_run.h"
#include "models/gpt2_random.h"
#include "support/poked_model.h"

#include <math.h>

/* support/poked_model.h's model written to tmp/dir. */
static const char *write_poked(const char *dir, vkg_st_dtype dtype, int untied, const char *name, size_t first,
                               size_t count, float value) {
    static char d[1200];
    snprintf(d, sizeof d, "%s", in_tmp(dir));
    const test_poke poke = {name, first, count, value};
    test_write_poked_gpt2(d, dtype, untied, &poke, 1);
    return d;
}

static void expect_load_error(const char *dir, const char *part) {
    vkg_gpt2 *m = NULL;
    vkg_error err = {0};
    vkg_status st = vkg_gpt2_load(dir, &m, &err);
    if (st != VKG_ERR_FORMAT) fail_msg("%s: status %s (%s)", dir, vkg_status_name(st), err.message);
    assert_null(m);
    if (!strstr(err.message, part)) fail_msg("message \"%s\" lacks \"%s\"", err.message, part);
}

static void test_nonfinite_weights_refused(void **state) {
    (void)state;
    /* c_attn.weight is [32, 96]: index 1234 is row 12, column 82 */
    expect_load_error(write_poked("nan32", VKG_ST_F32, 0, "h.0.attn.c_attn.weight", 1234, 1, NAN),
                      "model.safetensors: tensor h.0.attn.c_attn.weight holds NaN at index 1234 (row 12, column 82)");
    expect_load_error(write_poked("inf16", VKG_ST_F16, 0, "h.1.mlp.c_proj.weight", 7, 1, INFINITY),
                      "model.safetensors: tensor h.1.mlp.c_proj.weight holds Inf at index 7 (row 0, column 7)");
    expect_load_error(write_poked("ninfbf16", VKG_ST_BF16, 0, "ln_f.bias", 5, 1, -INFINITY),
                      "model.safetensors: tensor ln_f.bias holds -Inf at index 5");
    expect_load_error(write_poked("nanwte", VKG_ST_F32, 0, "wte.weight", 2046, 2, NAN),
                      "tensor wte.weight holds NaN at index 2046 (row 63, column 30)");
}

/* An F32 weight beyond f16's range becomes Inf when `--dtype f16` converts it: refused at load,
 * saying so, at the file's row and column also where the matrix is held transposed; as f32 or
 * bf16 (whose range is f32's) the same file loads. */
static void test_f16_conversion_overflow_refused(void **state) {
    (void)state;
    const char *dir = write_poked("big16", VKG_ST_F32, 0, "h.1.mlp.c_fc.weight", 40, 1, -70000.0f);
    const int dtypes[4] = {VKG_F16, VKG_F16, VKG_F32, VKG_BF16};
    for (int i = 0; i < 4; i++) {
        vkg_gpt2_load_options o;
        vkg_gpt2_load_options_default(&o);
        o.dtype = dtypes[i];
        o.transposed = i == 1;
        vkg_gpt2 *m = NULL;
        vkg_error err = {0};
        vkg_status st = vkg_gpt2_load_with(dir, &o, &m, &err);
        if (i <= 1) {
            assert_int_equal(st, VKG_ERR_FORMAT);
            assert_null(m);
            if (!strstr(err.message, "tensor h.1.mlp.c_fc.weight holds -Inf at index 40 (row 0, column 40) once "
                                     "converted from F32 to f16 (f16 ends at 65504)"))
                fail_msg("message: %s", err.message);
        } else {
            if (st != VKG_OK) fail_msg("%s", err.message);
            vkg_gpt2_free(m);
        }
    }
}

/* Layer 0's c_attn.weight all 3e38: finite, loads, and q, k and v overflow at every position. */
static void test_overflow_is_an_error(void **state) {
    (void)state;
    need_binary();
    char dir[1200];
    snprintf(dir, sizeof dir, "%s", write_poked("big", VKG_ST_F32, 0, "h.0.attn.c_attn.weight", 0, 32 * 96, 3e38f));

    /* the library: a status, not logits */
    vkg_gpt2 *m = NULL;
    vkg_error err = {0};
    assert_int_equal(vkg_gpt2_load(dir, &m, &err), VKG_OK);
    vkg_device *cpu = NULL;
    vkg_device_options o = {.cpu_threads = 2, .quiet = 1};
    assert_int_equal(vkg_device_open("cpu", &o, &cpu, &err), VKG_OK);
    const int32_t ids[4] = {1, 2, 3, 5};
    float logits[64];
    assert_int_equal(vkg_decoder_forward(&m->decoder, cpu, ids, 4, 0, logits, VKG_NO_ATTENTION, NULL, &err),
                     VKG_ERR_NOT_FINITE);
    assert_non_null(strstr(err.message, "the model's outputs overflowed: logits at position 3 are not finite"));
    assert_string_equal(vkg_status_name(VKG_ERR_NOT_FINITE), "not finite");
    vkg_device_free(cpu);
    vkg_gpt2_free(m);

    /* the commands, on both executors (Vulkan where a device is there: lavapipe in the test runs) */
    vkg_device *vk = NULL;
    const int has_vulkan = vkg_device_open("vulkan", &o, &vk, &err) == VKG_OK;
    vkg_device_free(vk);
    const char *devices[2] = {"cpu", "vulkan"};
    for (int d = 0; d < 1 + has_vulkan; d++) {
        const char *dev = devices[d];
        expect_fail(VKG("logits", "-m", dir, "--ids", "1,2,3,5", "-o", in_tmp("o.npy"), "--device", dev), "logits",
                    "the model's outputs overflowed: logits at position 3 are not finite");
        expect_fail(VKG("logits", "-m", dir, "--ids", "1,2,3,5", "--all", "-o", in_tmp("o.npy"), "--device", dev),
                    "logits", "logits at position 0 are not finite");
        result r = VKG("generate", "-m", dir, "--ids", "1,2,3,5", "-n", "4", "--device", dev, "--ids-out");
        if (r.status != 1 || !strstr(r.err, "vkgraph generate: gpt2: the model's outputs overflowed: logits at "
                                            "position 3 are not finite"))
            fail_msg("generate on %s: exit %d, stderr %s", dev, r.status, r.err);
        assert_string_equal(r.out, "[1, 2, 3, 5"); /* the prompt echoed, no token after it, the list left open */
        result_free(&r);
        expect_fail(VKG("attention", "-m", dir, "--ids", "1,2,3,5", "--layer", "0", "--device", dev), "attention",
                    "the model's outputs overflowed: layer 0's attention (head 0) at position 0");
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nonfinite_weights_refused),
        cmocka_unit_test(test_f16_conversion_overflow_refused),
        cmocka_unit_test(test_overflow_is_an_error),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
