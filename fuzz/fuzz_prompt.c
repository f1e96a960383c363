/* Prompt bytes through GPT-2's own tokenizer (data/gpt2-tokenizer): any text either encodes to
 * ids that decode to the same bytes or, when it is not UTF-8, is refused with the offset of the
 * bad byte; and the same bytes read as a list of ids either decode or are refused by the id. */
#include "fuzz.h"

#include "io/tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static vkg_tokenizer *gpt2;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    vkg_error err;
    if (vkg_tokenizer_load(VKG_FUZZ_TOKENIZER_DIR, &gpt2, &err) != VKG_OK) {
        fprintf(stderr, "fuzz_prompt: %s\n", err.message);
        abort();
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_check_round_trip(gpt2, (const char *)data, size);
    size_t n = size / 4;
    int32_t *ids = malloc(n ? n * sizeof *ids : 1);
    FUZZ_CHECK(ids != NULL);
    int in_vocab = 1;
    for (size_t i = 0; i < n; i++) {
        memcpy(&ids[i], data + 4 * i, 4);
        in_vocab &= ids[i] >= 0 && ids[i] < vkg_tokenizer_vocab_size(gpt2);
    }
    char *text = NULL;
    size_t len = 0;
    vkg_error err;
    vkg_status st = vkg_tokenizer_decode(gpt2, ids, n, &text, &len, &err);
    FUZZ_CHECK(in_vocab ? st == VKG_OK : st == VKG_ERR_INVALID_ARGUMENT);
    free(text);
    free(ids);
    return 0;
}
