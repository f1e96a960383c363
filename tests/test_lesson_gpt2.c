/* Tests of the lesson's step 7 (src/models/lesson_gpt2.c) and of `vkgraph lesson` itself.  Step 7
 * runs on a GPT-2-shaped model with random weights and GPT-2's real tokenizer, on the CPU and,
 * when a Vulkan device opens, on Vulkan with the validation layer on; what it finds is checked
 * against the model's own forward pass, and its printed table against the values. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/backend.h"
#include "io/tokenizer.h"
#include "models/gpt2.h"
#include "models/model_run.h"
#include "models/gpt2_random.h"
#include "vkgraph_lesson.h"
#include "support/test_util.h"
#include "support/vk_test.h"
#include "vkgraph.h"

#define TOL 1e-4




static void check_ok(vkg_status st, const vkg_error *err) {
    if (st != VKG_OK) fail_msg("%s: %s", vkg_status_name(st), err->message);
}

static void check_validation(vkg_device *d) {
    if (!vkg_device_is_cpu(d)) assert_int_equal(vkg_device_validation_errors(d), 0);
}

static void test_py_repr(void **state) {
    (void)state;
    char buf[64];
    assert_int_equal(vkg_lesson_py_repr(buf, sizeof buf, " it"), 5);
    assert_string_equal(buf, "' it'");
    assert_int_equal(vkg_lesson_py_repr(buf, sizeof buf, "'t"), 4);
    assert_string_equal(buf, "\"'t\"");
    vkg_lesson_py_repr(buf, sizeof buf, "a'\"b\\\n");
    assert_string_equal(buf, "'a\\'\"b\\\\\\n'");
    assert_int_equal(vkg_lesson_py_repr(buf, sizeof buf, "\xC3\xA9\xFF"), 4);   /* é, then a lone byte */
    assert_string_equal(buf, "'\xC3\xA9\xEF\xBF\xBD'");
}

/* A GPT-2-shaped model with random weights and GPT-2's vocabulary (so the real tokenizer fits),
 * written once per test run. */
static char lesson_tmp[256]; /* removed by main */

static const char *random_gpt2_dir(void) {
    static char dir[512];
    if (dir[0]) return dir;
    char *tmp = test_tmpdir("lesson");
    assert_non_null(tmp);
    snprintf(lesson_tmp, sizeof lesson_tmp, "%s", tmp);
    snprintf(dir, sizeof dir, "%s/model", tmp);
    free(tmp);
    vkg_gpt2_random_options o;
    vkg_gpt2_random_options_default(&o);
    o.config.n_layer = 6;
    o.config.n_head = 4;
    o.config.n_embd = 16;
    o.config.vocab_size = 50257;
    o.config.bos_token_id = o.config.eos_token_id = 50256;
    vkg_error err = {0};
    check_ok(vkg_gpt2_write_random(dir, &o, &err), &err);
    return dir;
}

static const char *tokenizer_dir(void) { return test_data_path("../../data/gpt2-tokenizer"); }

static void test_gpt2(void **state) {
    vkg_device *d = vk_test_device(state);
    const char *model_dir = random_gpt2_dir();
    vkg_lesson_gpt2 r;
    vkg_error err = {0};
    check_ok(vkg_lesson_gpt2_run(d, model_dir, tokenizer_dir(), &r, &err), &err);
    assert_int_equal(r.n_layer, 6);
    assert_int_equal(r.n_head, 4);
    assert_int_equal(r.layer, 4);
    assert_int_equal(r.head, 3);
    const char *const want[12] = {"The", " animal", " didn", "'t", " cross", " the", " street", " because", " it",
                                  " was", " too", " tired"};
    assert_int_equal(r.tired.n_tokens, 12);
    for (int i = 0; i < 12; i++) assert_string_equal(r.tired.tokens[i], want[i]);
    assert_string_equal(r.wide.tokens[11], " wide");
    assert_int_equal(r.tired.it, 8);
    assert_int_equal(r.wide.it, 8);

    /* the layer's attention again, through the model's own one-shot forward pass */
    vkg_gpt2 *m = NULL;
    vkg_tokenizer *tok = NULL;
    check_ok(vkg_gpt2_load(model_dir, &m, &err), &err);
    check_ok(vkg_tokenizer_load(tokenizer_dir(), &tok, &err), &err);
    int32_t *ids = NULL;
    size_t n = 0;
    check_ok(vkg_tokenizer_encode(tok, VKG_LESSON_SENTENCE_TIRED, strlen(VKG_LESSON_SENTENCE_TIRED), &ids, &n, &err), &err);
    float *logits = malloc((size_t)m->config.vocab_size * sizeof *logits), probs[4 * 12 * 12];
    assert_non_null(logits);
    check_ok(vkg_decoder_forward(&m->decoder, d, ids, (int)n, 0, logits, 4, probs, &err), &err);
    for (int i = 0; i < 144; i++) assert_true(fabs(r.tired.heat[i] - probs[3 * 144 + i]) < TOL);
    for (int h = 0; h < 4; h++) {
        const float *row = probs + (h * 12 + 8) * 12;
        float top = 0;
        for (int j = 1; j <= 8; j++) top = fmaxf(top, row[j]);
        int best = r.tired.best[4 * 4 + h];
        assert_true(best >= 1 && best <= 8);
        /* another plan (one layer's attention, not all) may round differently */
        assert_true(fabs(r.tired.best_weight[4 * 4 + h] - row[best]) < TOL);
        assert_true(row[best] >= top - TOL);
    }
    /* Exercise 6's list is exactly the heads whose choice moves from " animal" to " street" */
    int layers[24], heads[24], moves = vkg_lesson_gpt2_moves(&r, layers, heads, 24), count = 0;
    for (int k = 0; k < 24; k++)
        if (r.tired.best[k] == 1 && r.wide.best[k] == 6) {
            assert_int_equal(layers[count], k / 4);
            assert_int_equal(heads[count], k % 4);
            count++;
        }
    assert_int_equal(moves, count);

    test_capture c;
    vkg_lesson_print_gpt2(test_capture_begin(&c), &r);
    const char *text = test_capture_end(&c);
    assert_non_null(strstr(text, "6 layers; 4 heads per layer\n"));
    /* one numbering, from 0: "layer 4", as vkgraph attention --layer 4 says it */
    assert_non_null(strstr(text, "\"" VKG_LESSON_SENTENCE_TIRED "\", layer 4:\n"));
    assert_null(strstr(text, "index"));
    assert_null(strstr(text, "RANDOM")); /* the folder has no marker */
    for (int h = 0; h < 4; h++) {
        char prefix[64], repr[64], line[256];
        int k = 4 * 4 + h, chars = vkg_lesson_py_repr(repr, sizeof repr, r.tired.tokens[r.tired.best[k]]);
        snprintf(prefix, sizeof prefix, "head %2d: ' it' attends most to ", h);
        snprintf(line, sizeof line, "%s%s%*s (%.2f)\n", prefix, repr, 12 - chars, "", (double)r.tired.best_weight[k]);
        assert_true(strncmp(test_line_with(text, prefix), line, strlen(line)) == 0);
    }
    assert_non_null(strstr(text, moves ? " -> ' street' (" : "  none\n"));
    if (moves) {
        char first[64];
        snprintf(first, sizeof first, "  layer %2d, head %2d: ' animal' (", layers[0], heads[0]);
        assert_non_null(strstr(text, first));
    }

    /* the heatmap is a PNG */
    char png[600];
    snprintf(png, sizeof png, "%s/heat.png", model_dir);
    check_ok(vkg_lesson_gpt2_heatmap(&r, png, &err), &err);
    FILE *f = fopen(png, "rb");
    unsigned char sig[8] = {0};
    assert_non_null(f);
    assert_int_equal(fread(sig, 1, 8, f), 8);
    fclose(f);
    assert_memory_equal(sig, "\x89PNG\r\n\x1a\n", 8);
    remove(png);

    free(c.text);
    free(logits);
    free(ids);
    vkg_tokenizer_free(tok);
    vkg_gpt2_free(m);
    vkg_lesson_gpt2_free(&r);
    check_validation(d);
}

/* Every layer's attention from one pass (VKG_ALL_LAYERS) is each layer's own pass, and each
 * query row sums to 1 over the keys. */
static void test_all_layers_one_pass(void **state) {
    vkg_device *d = vk_test_device(state);
    vkg_gpt2 *m = NULL;
    vkg_error err = {0};
    check_ok(vkg_gpt2_load(random_gpt2_dir(), &m, &err), &err);
    enum { T = 9, L = 6, H = 4 };
    const int32_t ids[T] = {464, 5044, 1422, 470, 3272, 262, 4675, 780, 340};
    float all[L * H * T * T], one[H * T * T];
    check_ok(vkg_decoder_forward(&m->decoder, d, ids, T, 0, NULL, VKG_ALL_LAYERS, all, &err), &err);
    for (int l = 0; l < L; l++) {
        check_ok(vkg_decoder_forward(&m->decoder, d, ids, T, 0, NULL, l, one, &err), &err);
        for (int i = 0; i < H * T * T; i++) assert_true(fabsf(all[l * H * T * T + i] - one[i]) < 1e-5f);
        for (int r = 0; r < H * T; r++) {
            double sum = 0;
            for (int j = 0; j < T; j++) sum += all[(l * H * T + r) * T + j];
            assert_true(fabs(sum - 1.0) < 1e-5);
        }
    }
    vkg_gpt2_free(m);
    check_validation(d);
}

/* A folder marked as random says so on every line of output and in the picture's title. */
static void test_random_label(void **state) {
    vkg_device *d = vk_test_device(state);
    char marker[600], png[600];
    snprintf(marker, sizeof marker, "%s/" VKG_GPT2_RANDOM_MARKER, random_gpt2_dir());
    snprintf(png, sizeof png, "%s/random.png", random_gpt2_dir());
    FILE *f = fopen(marker, "w");
    assert_non_null(f);
    fclose(f);
    test_capture c;
    vkg_error err = {0};
    check_ok(vkg_lesson_step_gpt2(d, random_gpt2_dir(), tokenizer_dir(), png, test_capture_begin(&c), &err), &err);
    const char *text = test_capture_end(&c);
    assert_true(strncmp(text, VKG_LESSON_RANDOM_NOTE "\n", strlen(VKG_LESSON_RANDOM_NOTE) + 1) == 0);
    char line[800];
    snprintf(line, sizeof line, "heatmap of layer 4, head 3 (RANDOM WEIGHTS): %s\n", png);
    assert_non_null(strstr(text, line));
    size_t len = 0;
    char *bytes = test_read_file(png, &len);
    assert_non_null(bytes);
    assert_memory_equal(bytes, "\x89PNG\r\n\x1a\n", 8);
    free(bytes);
    remove(png);
    remove(marker);
    free(c.text);
}

static void test_gpt2_errors(void **state) {
    vkg_device *d = vk_test_device(state);
    vkg_lesson_gpt2 r;
    vkg_error err = {0};
    assert_int_not_equal(vkg_lesson_gpt2_run(d, "/nonexistent-model", NULL, &r, &err), VKG_OK);
    assert_true(strlen(err.message) > 0);
    /* the model folder holds no tokenizer: the message says how to name one */
    assert_int_equal(vkg_lesson_gpt2_run(d, random_gpt2_dir(), NULL, &r, &err), VKG_ERR_IO);
    assert_non_null(strstr(err.message, "--tokenizer"));
}

/* ---- the command ---------------------------------------------------------------------------- */

/* `vkgraph lesson` without -m runs steps 1-6 and says what step 7 needs. */
static void test_command(void **state) {
    (void)state;
    const char *bin = getenv("VKG_BINARY");
    if (!bin) skip();
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "%s lesson --device cpu 2>&1", bin);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char *out = calloc(1, 1 << 16);
    assert_non_null(out);
    fread(out, 1, (1 << 16) - 1, p);
    assert_int_equal(pclose(p), 0);
    assert_non_null(strstr(out, "Step 1. "));
    assert_non_null(strstr(out, "weights: [[0.434 0.214 0.351]]  output: [[6.1 3.9]]\n"));
    assert_non_null(strstr(out, "Step 6. "));
    assert_non_null(strstr(out, "parameters per block: 49984\n"));
    assert_non_null(strstr(out, "step 7 needs a GPT-2 folder: vkgraph lesson -m DIR 7"));
    free(out);

    snprintf(cmd, sizeof cmd, "%s lesson --device cpu 7 2>&1", bin);
    p = popen(cmd, "r");
    char line[512] = {0};
    assert_non_null(fgets(line, sizeof line, p));
    assert_int_not_equal(pclose(p), 0);
    assert_non_null(strstr(line, "-m DIR"));
    snprintf(cmd, sizeof cmd, "%s lesson 9 2>&1", bin);
    p = popen(cmd, "r");
    assert_non_null(fgets(line, sizeof line, p));
    assert_int_not_equal(pclose(p), 0);
    assert_non_null(strstr(line, "from 1 to 7"));
}

int main(void) {
    const struct CMUnitTest host_tests[] = {
        cmocka_unit_test(test_py_repr),
        cmocka_unit_test(test_command),
    };
    const struct CMUnitTest cpu_tests[] = {cmocka_unit_test(test_gpt2), cmocka_unit_test(test_all_layers_one_pass),
                                           cmocka_unit_test(test_random_label), cmocka_unit_test(test_gpt2_errors)};
    const struct CMUnitTest vulkan_tests[] = {cmocka_unit_test(test_gpt2), cmocka_unit_test(test_all_layers_one_pass)};
    int failed = cmocka_run_group_tests_name("lesson step 7: repr and command", host_tests, NULL, NULL);
    failed += cmocka_run_group_tests_name("lesson step 7 on the CPU", cpu_tests, vk_test_cpu_group_setup, vk_test_group_teardown);
    failed += cmocka_run_group_tests_name("lesson step 7 on Vulkan", vulkan_tests, vk_test_group_setup, vk_test_group_teardown);
    if (lesson_tmp[0] && test_remove_tree(lesson_tmp) != 0) failed++;
    return vk_test_exit_status(failed);
}
