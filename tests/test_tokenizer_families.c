/* tokenizer.json pipelines of every supported family (src/io/tok_*.c), on the small test
 * tokenizers of tests/data/tokenizers/ (each with the components of a real family: its split
 * regexes, normalizers, byte fallback, decoders, added tokens), against the ids and texts of
 * Hugging Face's tokenizers library (golden.txt, tools/make_tokenizer_json_golden.js); and the
 * special-token switches of `vkgraph tokenize`. */
#include "gpt2_cli_run.h"
#include "tokenizer_golden.h"

static void check_family(const char *name) {
    char rel[256];
    snprintf(rel, sizeof rel, "tokenizers/%s", name);
    char *dir = strdup(test_data_path(rel));
    vkg_error err = {0};
    vkg_tokenizer *t = NULL;
    if (vkg_tokenizer_load(dir, &t, &err) != VKG_OK) fail_msg("%s: %s", dir, err.message);
    snprintf(rel, sizeof rel, "tokenizers/%s/golden.txt", name);
    int cases = golden_check(t, test_data_path(rel));
    assert_true(cases >= 25);
    vkg_tokenizer_free(t);
    free(dir);
}

static void test_gpt2(void **state) { (void)state; check_family("gpt2"); }
static void test_llama3(void **state) { (void)state; check_family("llama3"); }
static void test_qwen2(void **state) { (void)state; check_family("qwen2"); }
static void test_smollm2(void **state) { (void)state; check_family("smollm2"); }
static void test_llama2(void **state) { (void)state; check_family("llama2"); }
static void test_mistral(void **state) { (void)state; check_family("mistral"); }

/* `vkgraph tokenize` in each special-token mode, on the llama2 test tokenizer (BOS from its
 * TemplateProcessing; "<s>", "</s>", "<unk>" special): the ids of golden.txt's case special_s. */
static void test_cli_modes(void **state) {
    (void)state;
    need_binary();
    char *dir = strdup(test_data_path("tokenizers/llama2"));
    const char *text = "<s> Hello </s> world <unk>";
    result r = VKG("tokenize", "--tokenizer", dir, "-p", text);
    expect_ok(&r, "tokenize");
    assert_string_equal(r.out, "[1, 1, 334, 334, 285, 296, 394, 334, 2, 334, 370, 306, 402, 295, 334, 0]\n");
    result_free(&r);
    r = VKG("tokenize", "--tokenizer", dir, "-p", text, "--no-special");
    expect_ok(&r, "tokenize --no-special");
    assert_string_equal(r.out, "[1, 334, 334, 285, 296, 394, 334, 2, 334, 370, 306, 402, 295, 334, 0]\n");
    result_free(&r);
    r = VKG("tokenize", "--tokenizer", dir, "-p", text, "--split-special");
    expect_ok(&r, "tokenize --split-special");
    assert_string_equal(r.out, "[1, 334, 63, 310, 65, 334, 285, 296, 394, 334, 63, 50, 310, 65, 370, 306, 402, 295, "
                               "334, 63, 312, 305, 302, 65]\n");
    result_free(&r);
    r = VKG("tokenize", "--tokenizer", dir, "--decode", "1,334,285,296,394,370,306,402,295");
    expect_ok(&r, "tokenize --decode");
    assert_string_equal(r.out, "<s> Hello world");
    result_free(&r);
    /* Byte fallback: a character the vocabulary lacks is its bytes' <0xNN> tokens (ids 3 + byte),
     * after the prepended U+2581 (334). */
    r = VKG("tokenize", "--tokenizer", dir, "-p", "\xf0\x9f\xa6\x99", "--no-special");
    expect_ok(&r, "tokenize --no-special");
    assert_string_equal(r.out, "[334, 243, 162, 169, 156]\n");
    result_free(&r);
    r = VKG("tokenize", "--tokenizer", dir, "--decode", "334,243,162,169,156");
    expect_ok(&r, "tokenize --decode");
    assert_string_equal(r.out, "\xf0\x9f\xa6\x99");
    result_free(&r);
    free(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpt2),    cmocka_unit_test(test_llama3),  cmocka_unit_test(test_qwen2),
        cmocka_unit_test(test_smollm2), cmocka_unit_test(test_llama2), cmocka_unit_test(test_mistral),
        cmocka_unit_test(test_cli_modes),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
