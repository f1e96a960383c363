/* What must hold for any tokenizer that loaded, whatever files it came from: every text that is
 * UTF-8 encodes to ids inside the vocabulary that decode to the same bytes, and text that is not
 * is refused with the offset of the first bad byte. */
#include "fuzz.h"

#include "io/tokenizer.h"

#include <stdlib.h>
#include <string.h>

void fuzz_check_round_trip(const vkg_tokenizer *t, const char *text, size_t len) {
    int32_t *ids = NULL;
    size_t n = 0;
    vkg_error err;
    if (vkg_tokenizer_encode(t, text, len, &ids, &n, &err) != VKG_OK) {
        FUZZ_CHECK(err.status == VKG_ERR_INVALID_ARGUMENT && ids == NULL);
        FUZZ_CHECK(strstr(err.message, "byte") != NULL);
        return;
    }
    FUZZ_CHECK(n <= len && (n == 0) == (len == 0));
    size_t sum = 0;
    for (size_t i = 0; i < n; i++) {
        size_t tlen = 0;
        FUZZ_CHECK(ids[i] >= 0 && ids[i] < vkg_tokenizer_vocab_size(t));
        FUZZ_CHECK(vkg_tokenizer_token_bytes(t, ids[i], &tlen) != NULL);
        sum += tlen;
    }
    FUZZ_CHECK(sum == len);
    char *back = NULL;
    size_t back_len = 0;
    FUZZ_CHECK(vkg_tokenizer_decode(t, ids, n, &back, &back_len, &err) == VKG_OK);
    FUZZ_CHECK(back_len == len && memcmp(back, text, len) == 0 && back[len] == '\0');
    free(back);
    free(ids);
}

void fuzz_check_tokenizer(const vkg_tokenizer *t) {
    static const char *const texts[] = {
        "Hello world, it's a test!", "  two  spaces\n\n\ttab", "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac 123 456",
        "<|endoftext|>", "'s'S're'll\xf0\x9f\x98\x80", "\xff not UTF-8",
    };
    FUZZ_CHECK(vkg_tokenizer_vocab_size(t) >= 256);
    int32_t eot = vkg_tokenizer_eot(t);
    FUZZ_CHECK(eot == -1 || (eot >= 0 && eot < vkg_tokenizer_vocab_size(t)));
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) fuzz_check_round_trip(t, texts[i], strlen(texts[i]));
    /* An id just outside the vocabulary is refused, naming it. */
    int32_t bad[2] = {0, vkg_tokenizer_vocab_size(t)};
    char *text = NULL;
    size_t len = 0;
    vkg_error err;
    FUZZ_CHECK(vkg_tokenizer_decode(t, bad, 2, &text, &len, &err) == VKG_ERR_INVALID_ARGUMENT && text == NULL);
}

void fuzz_check_tokenizer_dir(const char *dir) {
    vkg_tokenizer *t = NULL;
    vkg_error err;
    if (vkg_tokenizer_load(dir, &t, &err) != VKG_OK) {
        FUZZ_CHECK(t == NULL && err.message[0] != '\0');
        return;
    }
    fuzz_check_tokenizer(t);
    vkg_tokenizer_free(t);
}
