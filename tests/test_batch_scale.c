/* Batch contexts at the shapes users run (the Release leg only): GPT-2 124M's shapes (2 of its
 * 12 layers, f16 weights, a cache of 1024 positions) and SmolLM2-135M's (2 of its 30 layers, a
 * cache of 2048) with random weights, 8 sequences at positions from 1 to 600 joining and leaving
 * mid-way, the prompts of 301 and 600 tokens prefilled in the default chunks of 256 while the
 * others decode (the two watched: every row of their passes, vkg_batch_seq_watch_prompt), each
 * one's logits against the same sequence alone (tests/support/batch_check.h):
 * bit for bit on the CPU, within attention's conformance threshold on Vulkan. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "support/batch_check.h"
#include "support/test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void check(vkg_status st, const vkg_error *err) {
    if (st != VKG_OK) fail_msg("%s", err->message);
}

/* Writes the model (GPT-2 124M's shapes, or a Llama-family shape), opens it on device, and runs
 * 8 sequences through a batch context of 8 slots. */
static void run(const char *device, const char *llama_shape) {
    char *dir = test_tmpdir("batch_scale");
    vkg_error err = {0};
    if (llama_shape) {
        vkg_random_model_options o;
        vkg_random_model_options_default(&o);
        o.shape = llama_shape;
        o.n_layer = 2;
        o.n_positions = 2048;
        o.dtype = VKG_WEIGHTS_F16;
        check(vkg_random_model_write(dir, &o, &err), &err);
    } else {
        vkg_random_gpt2_options o;
        vkg_random_gpt2_options_default(&o);
        check(vkg_random_gpt2_size("gpt2", &o, &err), &err);
        o.n_layer = 2;
        o.dtype = VKG_WEIGHTS_F16;
        check(vkg_random_gpt2_write(dir, &o, &err), &err);
    }
    const int cpu = strcmp(device, "cpu") == 0;
    vkg_device_options dopts = {.cpu_threads = 2, .quiet = 1, .validation = !cpu};
    vkg_device *dev = NULL;
    check(vkg_device_open(device, &dopts, &dev, &err), &err);
    batch_check c = {.cpu = cpu};
    check(vkg_model_open(dir, dev, NULL, &c.model, &err), &err);
    vkg_model_info info;
    check(vkg_model_get_info(c.model, &info, &err), &err);
    c.V = info.n_vocab;
    c.n_ctx = info.n_ctx;
    batch_seq plans[8];
    memset(plans, 0, sizeof plans);
    const int len[8] = {600, 1, 17, 130, 5, 64, 2, 301}, join[8] = {0, 0, 0, 1, 1, 2, 4, 4};
    for (int i = 0; i < 8; i++) {
        batch_make_prompt(&plans[i], i, len[i], c.V);
        plans[i].join = join[i];
        plans[i].steps = 2 + i % 3;
    }
    plans[0].watch = plans[7].watch = 1; /* every row of the 600- and 301-token prompts' passes */
    assert_true(batch_run_schedule(&c, plans, 8, 8) > 0); /* chunks ran beside decoding */
    vkg_model_free(c.model);
    const uint64_t messages = vkg_device_validation_errors(dev);
    vkg_device_free(dev);
    test_remove_tree(dir);
    free(dir);
    assert_int_equal(messages, 0);
}

static void test_gpt2_cpu(void **state) { (void)state; run("cpu", NULL); }
static void test_gpt2_vulkan(void **state) { (void)state; run("vulkan", NULL); }
static void test_smollm2_cpu(void **state) { (void)state; run("cpu", "smollm2-135m"); }
static void test_smollm2_vulkan(void **state) { (void)state; run("vulkan", "smollm2-135m"); }

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpt2_cpu),
        cmocka_unit_test(test_gpt2_vulkan),
        cmocka_unit_test(test_smollm2_cpu),
        cmocka_unit_test(test_smollm2_vulkan),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
