/* tokenizer.json pipelines of every supported family (src/io/tok_*.c), on the small test
 * tokenizers of tests/data/tokenizers/ (each with the components of a real family: its split
 * regexes, normalizers, byte fallback, decoders, added tokens), against the ids and texts of
 * Hugging Face's JavaScript tokenizers (golden.txt, tools/make_tokenizer_json_golden.js). */
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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpt2),    cmocka_unit_test(test_llama3),  cmocka_unit_test(test_qwen2),
        cmocka_unit_test(test_smollm2), cmocka_unit_test(test_llama2), cmocka_unit_test(test_mistral),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
