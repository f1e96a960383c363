/* Hugging Face's one-file tokenizer.json, with any combination of components.  Whatever the
 * bytes, loading fails with a message or gives a tokenizer whose ids stay inside its vocabulary
 * and decode, in every special-token mode (check_tokenizer.c).  The seeds include the test
 * tokenizers of every family (tests/data/tokenizers/). */
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_write_file("tokenizer.json", data, size);
    fuzz_check_tokenizer_dir(fuzz_dir(), 0);
    return 0;
}
