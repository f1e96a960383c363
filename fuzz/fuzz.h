/* What every fuzz target shares.
 *
 * A target is one function, LLVMFuzzerTestOneInput(data, size), that feeds the bytes to one
 * parser or builder and checks what must hold whatever the bytes are: no crash, no leak, no
 * undefined behaviour (the sanitizers see those), and the target's own invariants (a value that
 * parses writes back and parses to the same thing), which it checks with FUZZ_CHECK.
 *
 * The same file is linked two ways: with libFuzzer (-DVKG_FUZZ=ON, clang), which generates
 * inputs, and with replay.c, a plain main() that runs the seed corpus (fuzz/corpus/<target>/)
 * through the function in the normal test suite. */
#ifndef VKG_FUZZ_H
#define VKG_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/* Optional, called once before the first input (libFuzzer's hook, which replay.c calls too). */
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* Stops the process with a message when an invariant fails: a finding, which libFuzzer records
 * with its input (abort()), and a failing test in replay. */
#define FUZZ_CHECK(cond) \
    do { \
        if (!(cond)) fuzz_fail(__FILE__, __LINE__, #cond); \
    } while (0)
void fuzz_fail(const char *file, int line, const char *what);

/* A private folder for the files a target writes (made once per process, in $TMPDIR or /tmp,
 * removed at exit). */
const char *fuzz_dir(void);
/* Writes size bytes to fuzz_dir()/name (replacing it) and returns the path (a static buffer
 * per name slot: valid until the next call with the same name). */
const char *fuzz_write_file(const char *name, const void *data, size_t size);
/* Removes fuzz_dir()/name if present. */
void fuzz_remove_file(const char *name);

/* Splits data at the first occurrence of FUZZ_SEPARATOR: part 0 before it, part 1 after it (all
 * of data and nothing when it is absent).  Lets one input hold two files. */
#define FUZZ_SEPARATOR "\n#####\n"
void fuzz_split(const uint8_t *data, size_t size, const uint8_t **a, size_t *a_len, const uint8_t **b,
                size_t *b_len);

/* check_tokenizer.c: the invariants of any tokenizer that loaded (round trips, ids inside the
 * vocabulary), for the tokenizer targets. */
typedef struct vkg_tokenizer vkg_tokenizer;
void fuzz_check_round_trip(const vkg_tokenizer *t, const char *text, size_t len);
/* exact: the tokenizer must give back the bytes it encoded (byte-level vocab files). */
void fuzz_check_tokenizer(const vkg_tokenizer *t, int exact);
/* Loads the tokenizer in dir; a failure must carry a message, a success the invariants above. */
void fuzz_check_tokenizer_dir(const char *dir, int exact);

#endif
