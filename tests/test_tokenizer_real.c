/* Real tokenizer.json files (Llama 3, Qwen3, and a SentencePiece-style BPE with byte fallback:
 * the files tools/fetch-tokenizers.sh fetches) against the golden tables that Hugging Face's
 * tokenizers library made from them (tests/data/tokenizer-golden/, tools/make_tokenizer_json_golden.js).
 * The files are not in the repository (their licences are the models'): a family whose file is
 * absent is skipped, saying so.  VKG_REAL_TOKENIZERS names their folder (default
 * models/tokenizers in the source tree). */
#include "tokenizer_golden.h"

#include <sys/stat.h>

static void check_real(const char *name) {
    const char *root = getenv("VKG_REAL_TOKENIZERS");
    char dir[2048], file[2200], rel[256];
    snprintf(dir, sizeof dir, "%s/%s", root && *root ? root : test_data_path("../../models/tokenizers"), name);
    snprintf(file, sizeof file, "%s/tokenizer.json", dir);
    struct stat st;
    if (stat(file, &st) != 0) {
        fprintf(stderr, "%s is absent (tools/fetch-tokenizers.sh fetches it): skipped\n", file);
        skip();
    }
    vkg_error err = {0};
    vkg_tokenizer *t = NULL;
    if (vkg_tokenizer_load(dir, &t, &err) != VKG_OK) fail_msg("%s: %s", dir, err.message);
    snprintf(rel, sizeof rel, "tokenizer-golden/%s.txt", name);
    assert_true(golden_check(t, test_data_path(rel)) >= 25);
    vkg_tokenizer_free(t);
}

static void test_llama3(void **state) { (void)state; check_real("llama3"); }
static void test_qwen3(void **state) { (void)state; check_real("qwen3"); }
static void test_llama2(void **state) { (void)state; check_real("llama2"); }

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_llama3), cmocka_unit_test(test_qwen3),
                                       cmocka_unit_test(test_llama2)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
