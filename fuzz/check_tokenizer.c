/* What must hold for any tokenizer that loaded, whatever files it came from: every text that is
 * UTF-8 encodes, in each special-token mode, to ids inside the vocabulary that decode, and text
 * that is not is refused with the offset of the first bad byte.  Byte-level tokenizers read from
 * vocab files (and GPT-2's) also give back the same bytes; a tokenizer.json may normalize, add
 * BOS or drop characters it has no token for, so there only the ids are checked. */
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

/* Encodes in every mode; the ids must be inside the vocabulary and decode. */
static void check_encodes(const vkg_tokenizer *t, const char *text, size_t len) {
    static const unsigned modes[4] = {0, VKG_TOKENIZE_NO_SPECIAL, VKG_TOKENIZE_SPLIT_SPECIAL,
                                      VKG_TOKENIZE_NO_SPECIAL | VKG_TOKENIZE_SPLIT_SPECIAL};
    for (int m = 0; m < 4; m++) {
        int32_t *ids = NULL;
        size_t n = 0;
        vkg_error err;
        if (vkg_tokenizer_encode_with(t, text, len, modes[m], &ids, &n, &err) != VKG_OK) {
            FUZZ_CHECK(err.status == VKG_ERR_INVALID_ARGUMENT && ids == NULL);
            FUZZ_CHECK(strstr(err.message, "byte") != NULL);
            continue;
        }
        for (size_t i = 0; i < n; i++) FUZZ_CHECK(ids[i] >= 0 && ids[i] < vkg_tokenizer_vocab_size(t));
        char *back = NULL;
        size_t back_len = 0;
        FUZZ_CHECK(vkg_tokenizer_decode(t, ids, n, &back, &back_len, &err) == VKG_OK);
        FUZZ_CHECK(back[back_len] == '\0');
        free(back);
        free(ids);
    }
}

void fuzz_check_tokenizer(const vkg_tokenizer *t, int exact) {
    static const char *const texts[] = {
        "Hello world, it's a test!", "  two  spaces\n\n\ttab", "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac 123 456",
        "<|endoftext|>", "'s'S're'll\xf0\x9f\x98\x80", "\xff not UTF-8", "", " <s> [INST] x<|im_start|>",
        "a\xcc\x81 \xef\xac\x81 \xe2\x91\xa0 12345 \xe2\x80\x8d\xf0\x9f\x91\xa9",
    };
    FUZZ_CHECK(vkg_tokenizer_vocab_size(t) >= (exact ? 256 : 1));
    int32_t eot = vkg_tokenizer_eot(t);
    FUZZ_CHECK(eot == -1 || (eot >= 0 && eot < vkg_tokenizer_vocab_size(t)));
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        check_encodes(t, texts[i], strlen(texts[i]));
        if (exact) fuzz_check_round_trip(t, texts[i], strlen(texts[i]));
    }
    /* An id just outside the vocabulary is refused, naming it. */
    int32_t bad[2] = {0, vkg_tokenizer_vocab_size(t)};
    char *text = NULL;
    size_t len = 0;
    vkg_error err;
    FUZZ_CHECK(vkg_tokenizer_decode(t, bad, 2, &text, &len, &err) == VKG_ERR_INVALID_ARGUMENT && text == NULL);
}

void fuzz_check_tokenizer_dir(const char *dir, int exact) {
    vkg_tokenizer *t = NULL;
    vkg_error err;
    if (vkg_tokenizer_load(dir, &t, &err) != VKG_OK) {
        FUZZ_CHECK(t == NULL && err.message[0] != '\0');
        return;
    }
    fuzz_check_tokenizer(t, exact);
    vkg_tokenizer_free(t);
}
