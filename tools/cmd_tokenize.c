/* `vkgraph tokenize`: text -> token ids (a JSON array), or ids -> text, as transformers' fast
 * tokenizer gives them. */
#include "cli.h"
#include "commands.h"
#include "gpt2_cli.h"
#include "vkgraph_model.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define CMD "tokenize"

static void usage(FILE *f) {
    fprintf(f,
            "usage: vkgraph tokenize (-m DIR | --tokenizer DIR) (-p TEXT | -f FILE) [--no-special]\n"
            "                        [--split-special] [--pieces]\n"
            "       vkgraph tokenize (-m DIR | --tokenizer DIR) --decode IDS [--pieces]\n"
            "\n"
            "Encodes text and prints the token ids as a JSON array on one line, as transformers'\n"
            "tokenizer(text)[\"input_ids\"] gives them, or decodes ids and prints tokenizer.decode(ids)\n"
            "(no newline added).\n"
            "\n"
            "  -m, --model DIR    a model directory (or a file in it) holding the tokenizer files\n"
            "  --tokenizer DIR    a directory holding tokenizer.json, vocab.json + merges.txt or encoder.json +\n"
            "                     vocab.bpe, looked for in that order (data/gpt2-tokenizer in the source tree)\n"
            "  -p, --prompt TEXT  the text to encode\n"
            "  -f, --file FILE    encode the exact bytes of FILE (\"-\" reads standard input)\n"
            "  --decode IDS       ids separated by commas or spaces, brackets allowed: 464,5044, \"464 5044\" or\n"
            "                     \"[464, 5044]\" (what this command and generate --ids-out print)\n"
            "  --no-special       add no special tokens around the text (add_special_tokens=False: no BOS)\n"
            "  --split-special    read special tokens written in the text as plain text\n"
            "                     (split_special_tokens=True, as OpenAI's GPT-2 encoder does)\n"
            "  --pieces           also show each token as llama-tokenize does, one \"ID -> 'PIECE'\" line a\n"
            "                     token after the JSON (the piece as Python's repr shows a str); with\n"
            "                     --decode, these lines instead of the text\n"
            "  -h, --help         show this help\n"
            "\n"
            "By default special tokens written in the text (\"<|endoftext|>\", \"<|im_start|>\") are read as\n"
            "those tokens, and the tokenizer's post-processor adds its tokens (Llama's BOS).\n");
}

/* "   464 -> 'The'", one line a token, as llama-tokenize prints them. */
static int print_pieces(const vkg_tokenizer *tok, const int32_t *ids, size_t n) {
    for (size_t i = 0; i < n; i++) {
        size_t len = 0;
        const char *bytes = vkg_tokenizer_token_bytes(tok, ids[i], &len);
        size_t size = 10 * len + 3; /* the longest escape, \\U0001f600, is 10 characters a byte */
        char *shown = malloc(size);
        if (!shown) return cli_fail(CMD, "out of memory");
        gpt2_cli_repr(bytes, len, shown, size);
        printf("%6d -> %s\n", (int)ids[i], shown);
        free(shown);
    }
    return fflush(stdout) == 0 ? 0 : cli_fail(CMD, "cannot write the pieces: %s", strerror(errno));
}

int cmd_tokenize(int argc, char **argv) {
    const char *dir = NULL, *prompt = NULL, *file = NULL, *decode = NULL;
    int pieces = 0, no_special = 0, split_special = 0;
    const cli_option opts[] = {
        CLI_OPT_SWITCH("--pieces", &pieces, 1),
        CLI_OPT_SWITCH("--no-special", &no_special, 1),
        CLI_OPT_SWITCH("--split-special", &split_special, 1),
        CLI_OPT_TEXT("-m|--model|--tokenizer", &dir),
        CLI_OPT_TEXT("-p|--prompt", &prompt),
        CLI_OPT_TEXT("-f|--file", &file),
        CLI_OPT_TEXT("--decode", &decode),
        CLI_OPT_REFUSED("--device|--threads|--dtype",
                        "tokenize reads only the tokenizer files and runs no model"),
    };
    const int parsed = cli_options_parse(CMD, opts, sizeof opts / sizeof *opts, NULL, NULL, usage, argc, argv);
    if (parsed) return parsed == CLI_HELP_SHOWN ? 0 : 1;
    const unsigned flags = (no_special ? VKG_TOKENIZE_NO_SPECIAL : 0u) | (split_special ? VKG_TOKENIZE_SPLIT_SPECIAL : 0u);
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
        rc = cli_parse_ids(CMD, "--decode", decode, &ids, &n);
        if (rc == 0 && vkg_tokenizer_decode(tok, ids, n, &text, &len, &err) != VKG_OK)
            rc = cli_fail(CMD, "%s", err.message);
        if (rc == 0 && pieces) rc = print_pieces(tok, ids, n);
        else if (rc == 0 && (fwrite(text, 1, len, stdout) != len || fflush(stdout) != 0))
            rc = cli_fail(CMD, "cannot write the text: %s", strerror(errno));
        free(text);
        free(ids);
    } else {
        size_t len = prompt ? strlen(prompt) : 0;
        char *owned = NULL;
        if (file && !(owned = cli_read_file(CMD, file, &len))) rc = 1;
        int32_t *ids = NULL;
        size_t n = 0;
        if (rc == 0 && vkg_tokenizer_encode_with(tok, owned ? owned : prompt, len, flags, &ids, &n, &err) != VKG_OK)
            rc = cli_fail(CMD, "%s", err.message);
        if (rc == 0) {
            putchar('[');
            for (size_t i = 0; i < n; i++) printf(i ? ", %d" : "%d", (int)ids[i]);
            printf("]\n");
            if (pieces) rc = print_pieces(tok, ids, n);
            if (fflush(stdout) != 0) rc = cli_fail(CMD, "cannot write the ids: %s", strerror(errno));
        }
        free(ids);
        free(owned);
    }
    vkg_tokenizer_free(tok);
    return rc;
}
