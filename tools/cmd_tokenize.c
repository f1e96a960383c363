/* `vkgraph tokenize`: text -> GPT-2 token ids (a JSON array), or ids -> the exact bytes. */
#include "cli.h"
#include "commands.h"
#include "io/tokenizer.h"
#include "vkgraph.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define CMD "tokenize"

static void usage(FILE *f) {
    fprintf(f,
            "usage: vkgraph tokenize (-m DIR | --tokenizer DIR) (-p TEXT | -f FILE)\n"
            "       vkgraph tokenize (-m DIR | --tokenizer DIR) --decode IDS\n"
            "\n"
            "Encodes text with GPT-2's byte-level BPE and prints the token ids as a JSON array on one\n"
            "line, or decodes ids and prints the text they stand for, byte for byte (no newline added).\n"
            "\n"
            "  -m, --model DIR    a model directory (or a file in it) holding the tokenizer files\n"
            "  --tokenizer DIR    a directory holding vocab.json + merges.txt or encoder.json + vocab.bpe\n"
            "                     (data/gpt2-tokenizer in the source tree)\n"
            "  -p, --prompt TEXT  the text to encode\n"
            "  -f, --file FILE    encode the exact bytes of FILE (\"-\" reads standard input)\n"
            "  --decode IDS       ids separated by commas or spaces, brackets allowed: 464,5044 or \"[464, 5044]\"\n"
            "  -h, --help         show this help\n"
            "\n"
            "\"<|endoftext|>\" in a text is encoded as plain characters, as GPT-2's reference encoder does.\n");
}

/* Reads a whole file (or standard input for "-") as raw bytes. */
static char *read_input(const char *path, size_t *len) {
    errno = 0;
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, used = 0;
    char *buf = malloc(cap);
    while (buf) {
        used += fread(buf + used, 1, cap - used, f);
        if (used < cap) break;
        char *bigger = realloc(buf, cap * 2);
        if (!bigger) { free(buf); buf = NULL; errno = ENOMEM; break; }
        buf = bigger;
        cap *= 2;
    }
    if (buf && ferror(f)) { /* keep fread's errno: EISDIR says more than EIO */
        int why = errno ? errno : EIO;
        free(buf);
        buf = NULL;
        errno = why;
    }
    if (f != stdin) fclose(f);
    *len = used;
    return buf;
}

/* Parses "464,5044", "464 5044" or "[464, 5044]".  Returns 0 and fills ids and n, or 1 after
 * printing what is wrong. */
static int parse_ids(const char *spec, int32_t **ids, size_t *n) {
    size_t cap = strlen(spec) / 2 + 1, count = 0;
    int32_t *out = malloc(cap * sizeof *out);
    if (!out) return cli_fail(CMD, "out of memory");
    const char *p = spec;
    while (*p == ' ' || *p == '\t' || *p == '\n') p++;
    int bracket = *p == '[';
    if (bracket) p++;
    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == '\n' || *p == ',') p++;
        if (*p == '\0' || (bracket && *p == ']')) break;
        const char *start = p;
        while (*p && *p != ',' && *p != ' ' && *p != '\t' && *p != '\n' && *p != ']') p++;
        char item[32];
        size_t item_len = (size_t)(p - start) < sizeof item - 1 ? (size_t)(p - start) : sizeof item - 1;
        memcpy(item, start, item_len);
        item[item_len] = '\0';
        char *end;
        errno = 0;
        long v = strtol(item, &end, 10);
        if (item_len == 0 || (size_t)(p - start) != item_len || *end != '\0' || errno != 0 || v < INT32_MIN ||
            v > INT32_MAX) {
            free(out);
            return cli_fail(CMD, "bad token id \"%s\" in --decode: expected integers separated by commas", item);
        }
        out[count++] = (int32_t)v; /* each id takes at least 2 characters of spec but the last */
    }
    if (bracket && *p == ']') p++;
    while (*p == ' ' || *p == '\t' || *p == '\n') p++;
    if (*p != '\0') {
        free(out);
        return cli_fail(CMD, "unexpected \"%s\" after the ids in --decode", p);
    }
    *ids = out;
    *n = count;
    return 0;
}

int cmd_tokenize(int argc, char **argv) {
    const char *dir = NULL, *prompt = NULL, *file = NULL, *decode = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char **slot = NULL;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        }
        if (strcmp(a, "-m") == 0 || strcmp(a, "--model") == 0 || strcmp(a, "--tokenizer") == 0) slot = &dir;
        else if (strcmp(a, "-p") == 0 || strcmp(a, "--prompt") == 0) slot = &prompt;
        else if (strcmp(a, "-f") == 0 || strcmp(a, "--file") == 0) slot = &file;
        else if (strcmp(a, "--decode") == 0) slot = &decode;
        else return cli_fail(CMD, "unknown option '%s' (see vkgraph tokenize --help)", a);
        if (*slot) return cli_fail(CMD, "%s given twice", a);
        if (!(*slot = cli_value(CMD, argc, argv, &i))) return 1;
    }
    if (!dir) return cli_fail(CMD, "say where the tokenizer is: -m DIR or --tokenizer DIR");
    if ((prompt != NULL) + (file != NULL) + (decode != NULL) != 1)
        return cli_fail(CMD, "give exactly one of -p TEXT, -f FILE or --decode IDS");

    /* -m may name a file of the model (its weights): the tokenizer sits beside it. */
    char *dir_owned = NULL;
    struct stat st;
    if (stat(dir, &st) == 0 && S_ISREG(st.st_mode)) {
        dir_owned = strdup(dir);
        if (!dir_owned) return cli_fail(CMD, "out of memory");
        char *slash = strrchr(dir_owned, '/');
        if (slash) *slash = '\0';
        else strcpy(dir_owned, ".");
        dir = dir_owned;
    }
    vkg_error err = {0};
    vkg_tokenizer *tok = NULL;
    vkg_status status = vkg_tokenizer_load(dir, &tok, &err);
    free(dir_owned);
    if (status != VKG_OK) return cli_fail(CMD, "%s", err.message);

    int rc = 0;
    if (decode) {
        int32_t *ids = NULL;
        size_t n = 0;
        char *text = NULL;
        size_t len = 0;
        rc = parse_ids(decode, &ids, &n);
        if (rc == 0 && vkg_tokenizer_decode(tok, ids, n, &text, &len, &err) != VKG_OK)
            rc = cli_fail(CMD, "%s", err.message);
        if (rc == 0 && (fwrite(text, 1, len, stdout) != len || fflush(stdout) != 0))
            rc = cli_fail(CMD, "cannot write the text: %s", strerror(errno));
        free(text);
        free(ids);
    } else {
        size_t len = prompt ? strlen(prompt) : 0;
        char *owned = NULL;
        if (file && !(owned = read_input(file, &len)))
            rc = cli_fail(CMD, "cannot read %s: %s", file, strerror(errno));
        int32_t *ids = NULL;
        size_t n = 0;
        if (rc == 0 && vkg_tokenizer_encode(tok, owned ? owned : prompt, len, &ids, &n, &err) != VKG_OK)
            rc = cli_fail(CMD, "%s", err.message);
        if (rc == 0) {
            putchar('[');
            for (size_t i = 0; i < n; i++) printf(i ? ", %d" : "%d", (int)ids[i]);
            printf("]\n");
            if (fflush(stdout) != 0) rc = cli_fail(CMD, "cannot write the ids: %s", strerror(errno));
        }
        free(ids);
        free(owned);
    }
    vkg_tokenizer_free(tok);
    return rc;
}
