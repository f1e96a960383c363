/* The command line's list of token ids (--ids, tokenize --decode; tools/cli.c).  Whatever the
 * text, parsing either refuses it with a message or gives at least one id in [0, 2^31), and the
 * ids printed every way the grammar allows ("1,2,3", "1 2 3" and "[1, 2, 3]") parse back the same. */
#include "fuzz.h"

#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* bracketed: "[1, 2, 3]"; else separated by sep. */
static void check_reparse(const int32_t *ids, size_t n, int bracketed, const char *sep) {
    char *text = malloc(n * 14 + 3);
    FUZZ_CHECK(text != NULL);
    size_t len = 0;
    if (bracketed) text[len++] = '[';
    for (size_t i = 0; i < n; i++)
        len += (size_t)sprintf(text + len, "%s%d", i == 0 ? "" : bracketed ? ", " : sep, ids[i]);
    if (bracketed) text[len++] = ']';
    text[len] = '\0';
    int32_t *back = NULL;
    size_t back_n = 0;
    FUZZ_CHECK(cli_parse_ids("fuzz", "--ids", text, &back, &back_n) == 0);
    FUZZ_CHECK(back_n == n && memcmp(back, ids, n * sizeof *ids) == 0);
    free(back);
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* An argument cannot hold a NUL byte: the text ends at the first one. */
    char *spec = malloc(size + 1);
    FUZZ_CHECK(spec != NULL);
    memcpy(spec, data, size);
    spec[size] = '\0';
    int32_t *ids = NULL;
    size_t n = 0;
    if (cli_parse_ids("fuzz", "--ids", spec, &ids, &n) == 0) {
        FUZZ_CHECK(n >= 1 && n <= strlen(spec) / 2 + 1);
        for (size_t i = 0; i < n; i++) FUZZ_CHECK(ids[i] >= 0);
        check_reparse(ids, n, 0, ",");
        check_reparse(ids, n, 0, " ");
        check_reparse(ids, n, 1, NULL);
        free(ids);
    }
    free(spec);
    return 0;
}
