/* tokenizer.json pipelines of every supported family (src/io/tok_*.c), on the small test
 * tokenizers of tests/data/tokenizers/ (each with the components of a real family: its split
 * regexes, normalizers, byte fallback, decoders, added tokens), against the ids and texts of
 * Hugging Face's tokenizers library (golden.txt, tools/make_tokenizer_json_golden.js); and the
 * special-token switches of `vkgraph tokenize`. */
#include "gpt2_cli_run.h"
#include "tokenizer_golden.h"

#include <dirent.h>

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

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Every folder of tests/data/tokenizers: the families (gpt2, llama3, qwen2, smollm2, llama2,
 * mistral) and the components they leave out (split behaviours, normalizers, Metaspace with
 * split, RobertaProcessing...). */
static void test_every_tokenizer(void **state) {
    (void)state;
    DIR *d = opendir(test_data_path("tokenizers"));
    assert_non_null(d);
    char *names[64];
    size_t n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (e->d_name[0] != '.' && n < 64) names[n++] = strdup(e->d_name);
    closedir(d);
    qsort(names, n, sizeof *names, by_name);
    assert_true(n >= 15);
    static const char *const families[] = {"gpt2", "llama3", "qwen2", "smollm2", "llama2", "mistral"};
    for (size_t f = 0; f < 6; f++) {
        int found = 0;
        for (size_t i = 0; i < n; i++) found |= !strcmp(names[i], families[f]);
        if (!found) fail_msg("tests/data/tokenizers/%s is missing", families[f]);
    }
    for (size_t i = 0; i < n; i++) {
        check_family(names[i]);
        free(names[i]);
    }
}

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
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_every_tokenizer), cmocka_unit_test(test_cli_modes)};
    return cmocka_run_group_tests(tests, setup, teardown);
}
