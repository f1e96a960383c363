/* Hugging Face's one-file tokenizer.json.  Whatever the bytes, loading fails with a message or
 * gives a tokenizer whose round trips hold (check_tokenizer.c). */
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_write_file("tokenizer.json", data, size);
    fuzz_check_tokenizer_dir(fuzz_dir());
    return 0;
}
