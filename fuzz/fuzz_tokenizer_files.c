/* The two-file tokenizers: vocab.json + merges.txt (Hugging Face's names) when the first byte is
 * even, encoder.json + vocab.bpe (OpenAI's) when it is odd; the rest of the input is the
 * vocabulary, FUZZ_SEPARATOR, then the merges.  Whatever the bytes, loading fails with a
 * message or gives a tokenizer whose round trips hold (check_tokenizer.c). */
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    static const char *const names[2][2] = {{"vocab.json", "merges.txt"}, {"encoder.json", "vocab.bpe"}};
    const int pair = data[0] & 1;
    const uint8_t *vocab, *merges;
    size_t vocab_len, merges_len;
    fuzz_split(data + 1, size - 1, &vocab, &vocab_len, &merges, &merges_len);
    /* Only this pair is present: the other would be looked for first, or be half a pair. */
    fuzz_remove_file(names[!pair][0]);
    fuzz_remove_file(names[!pair][1]);
    fuzz_write_file(names[pair][0], vocab, vocab_len);
    fuzz_write_file(names[pair][1], merges, merges_len);
    fuzz_check_tokenizer_dir(fuzz_dir(), 1);
    return 0;
}
