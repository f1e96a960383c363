#include "gpt2_cli.h"

#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

int gpt2_cli_dtype(const char *cmd, const char *text, vkg_weight_dtype *out) {
    static const vkg_weight_dtype dtypes[] = {VKG_WEIGHTS_F32, VKG_WEIGHTS_F16, VKG_WEIGHTS_BF16};
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (strcasecmp(text, vkg_weight_dtype_name(dtypes[i])) == 0) {
            *out = dtypes[i];
            return 0;
        }
    return cli_fail(cmd, "--dtype: '%s'; use f32, f16 or bf16", text);
}

void gpt2_cli_usage_common(FILE *f) {
    fprintf(f,
            "  -m, --model DIR     a Hugging Face model folder (GPT-2, Llama, Mistral, Qwen2, Qwen3):\n"
            "                      config.json + model.safetensors or its shards (and the tokenizer:\n"
            "                      tokenizer.json, vocab.json + merges.txt, or encoder.json + vocab.bpe)\n"
            "  -p, --prompt TEXT   the prompt\n"
            "  -f, --file FILE     the prompt's exact bytes from FILE (\"-\": standard input)\n"
            "  --ids IDS           the prompt as token ids, separated by commas or spaces: 464,5044,\n"
            "                      \"464 5044\" or \"[464, 5044]\" (as tokenize and generate --ids-out print them)\n"
            "  --device D          cpu, vulkan, vulkan:N (default: the best Vulkan GPU, else the CPU)\n"
            "  --threads N         CPU executor threads (default: every core); refused when no device of\n"
            "                      the run is the CPU executor\n"
            "  --dtype D           the weight matrices in memory: f32, f16 or bf16 (default: as the file\n"
            "                      stores them); biases and layer norms stay f32\n");
}

int gpt2_cli_option(gpt2_cli *c, int argc, char **argv, int *i) {
    const char *a = argv[*i];
    const char **slot = NULL;
    if (strcmp(a, "-m") == 0 || strcmp(a, "--model") == 0) slot = &c->model_dir;
    else if (strcmp(a, "-p") == 0 || strcmp(a, "--prompt") == 0) slot = &c->prompt;
    else if (strcmp(a, "-f") == 0 || strcmp(a, "--file") == 0) slot = &c->file;
    else if (strcmp(a, "--ids") == 0) slot = &c->ids_text;
    else if (strcmp(a, "--device") == 0) slot = &c->device;
    else if (strcmp(a, "--threads") == 0) {
        const char *v = cli_value(c->cmd, argc, argv, i);
        return v && cli_int(c->cmd, "--threads", v, 0, 1024, &c->threads) == 0 ? 1 : -1;
    } else if (strcmp(a, "--dtype") == 0) {
        const char *v = cli_value(c->cmd, argc, argv, i);
        if (!v) return -1;
        if (c->model_opts.dtype != VKG_WEIGHTS_AS_STORED) return cli_fail(c->cmd, "--dtype given twice"), -1;
        return gpt2_cli_dtype(c->cmd, v, &c->model_opts.dtype) ? -1 : 1;
    } else {
        return 0;
    }
    if (*slot) {
        cli_fail(c->cmd, "%s given twice", a);
        return -1;
    }
    return (*slot = cli_value(c->cmd, argc, argv, i)) ? 1 : -1;
}

/* Where `cmake --install` puts data/gpt2-tokenizer, relative to the installed binary's folder. */
#ifndef VKG_BIN_TO_TOKENIZER
#define VKG_BIN_TO_TOKENIZER "../share/vkgraph/gpt2-tokenizer"
#endif

int gpt2_cli_project_tokenizer(char *out, size_t size) {
    const char *env = getenv("VKG_GPT2_TOKENIZER");
    if (env && *env) {
        snprintf(out, size, "%s", env);
        return vkg_tokenizer_present(out);
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return 0;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash) *slash = '\0';
    static const char *const tries[] = {"../data/gpt2-tokenizer", "data/gpt2-tokenizer", "../../data/gpt2-tokenizer",
                                        VKG_BIN_TO_TOKENIZER};
    for (size_t i = 0; i < sizeof tries / sizeof tries[0]; i++) {
        if (snprintf(out, size, "%s/%s", exe, tries[i]) >= (int)size) continue;
        if (vkg_tokenizer_present(out)) return 1;
    }
    return 0;
}

/* The model folder's tokenizer, else the project's GPT-2 tokenizer for a model of GPT-2's
 * vocabulary; none is needed for ids in, ids out. */
static int load_tokenizer(gpt2_cli *c) {
    c->tok = vkg_model_tokenizer(c->model);
    if (c->tok) return 0;
    char fallback[PATH_MAX];
    int gpt2_vocab = c->info.n_vocab == 50257;
    if (gpt2_vocab && gpt2_cli_project_tokenizer(fallback, sizeof fallback)) {
        fprintf(stderr, "vkgraph %s: %s has no tokenizer files; using GPT-2's tokenizer from %s\n", c->cmd,
                c->model_dir, fallback);
        vkg_error err = {0};
        if (vkg_model_load_tokenizer(c->model, fallback, &err) != VKG_OK) return cli_fail(c->cmd, "%s", err.message);
        c->tok = vkg_model_tokenizer(c->model);
        return 0;
    }
    if (!c->prompt && !c->file) return 0; /* ids in, ids out */
    return cli_fail(c->cmd, "%s has no tokenizer (tokenizer.json, vocab.json + merges.txt, or encoder.json + "
                    "vocab.bpe)%s",
                    c->model_dir, gpt2_vocab ? " and GPT-2's own was not found (set VKG_GPT2_TOKENIZER to "
                                               "the source tree's data/gpt2-tokenizer)"
                                             : "; with its own vocabulary size GPT-2's tokenizer does not "
                                               "fit: give the prompt as --ids");
}

int gpt2_cli_chat_template(const char *cmd, const char *dir, vkg_chat_template **out) {
    vkg_error err = {0};
    vkg_status st = vkg_chat_template_load(dir, out, &err);
    if (st == VKG_ERR_NOT_FOUND)
        return cli_fail(cmd, "%s has no chat template (the key \"chat_template\" in tokenizer_config.json): %s; an "
                        "instruct model's template is needed here", dir, err.message);
    if (st == VKG_ERR_IO)
        return cli_fail(cmd, "%s has no chat template: %s (the key \"chat_template\" of that file is read)", dir,
                        err.message);
    return st == VKG_OK ? 0 : cli_fail(cmd, "%s", err.message);
}

/* text as the one user message of a conversation, rendered with c->chat and tokenized with the
 * special tokens it writes read as such and none added (so a template's BOS is not doubled). */
static int encode_chat(gpt2_cli *c, const char *text, size_t len) {
    char *json = NULL, *rendered = NULL, *copy = malloc(len + 1);
    size_t json_len = 0, rendered_len = 0;
    FILE *f = copy ? open_memstream(&json, &json_len) : NULL;
    if (!f) {
        free(copy);
        return cli_fail(c->cmd, "out of memory");
    }
    memcpy(copy, text, len);
    copy[len] = '\0';
    if (strlen(copy) != len) {
        fclose(f);
        free(json);
        free(copy);
        return cli_fail(c->cmd, "--chat: the prompt holds a NUL byte; a message is text");
    }
    fputs("[{\"role\": \"user\", \"content\": ", f);
    vkg_json_write_string(f, copy);
    fputs("}]", f);
    fclose(f);
    free(copy);
    vkg_error err = {0};
    vkg_chat_render_options ro = {.add_generation_prompt = 1};
    vkg_status st = vkg_chat_template_render(c->chat, json, json_len, &ro, &rendered, &rendered_len, &err);
    if (st == VKG_OK)
        st = vkg_tokenizer_encode_with(c->tok, rendered, rendered_len, VKG_TOKENIZE_NO_SPECIAL, &c->ids, &c->n_ids, &err);
    free(json);
    free(rendered);
    return st == VKG_OK ? 0 : cli_fail(c->cmd, "%s", err.message);
}

int gpt2_cli_load(gpt2_cli *c, int empty_is_eot) {
    if (!c->model_dir) return cli_fail(c->cmd, "say which model: -m DIR (see vkgraph %s --help)", c->cmd);
    if ((c->prompt != NULL) + (c->file != NULL) + (c->ids_text != NULL) != 1)
        return cli_fail(c->cmd, "give the prompt as exactly one of -p TEXT, -f FILE or --ids IDS");
    if (cli_open_device(c->cmd, c->device, (int)c->threads, &c->dev)) return 1;
    if (!c->more_devices && cli_check_threads(c->cmd, c->threads, c->dev)) return 1;
    vkg_error err = {0};
    if (vkg_model_open(c->model_dir, c->dev, &c->model_opts, &c->model, &err) != VKG_OK ||
        vkg_model_get_info(c->model, &c->info, &err) != VKG_OK)
        return cli_fail(c->cmd, "%s", err.message);
    if (c->info.random_weights)
        fprintf(stderr, "vkgraph %s: note: %s holds RANDOM weights (written by vkgraph random or gpt2-random): its outputs "
                "mean nothing\n", c->cmd, c->model_dir);
    if (c->info.note[0]) fprintf(stderr, "vkgraph %s: note: %s\n", c->cmd, c->info.note); /* one line */
    if (load_tokenizer(c)) return 1;

    if (c->ids_text) {
        if (cli_parse_ids(c->cmd, "--ids", c->ids_text, &c->ids, &c->n_ids)) return 1;
    } else {
        size_t len = c->prompt ? strlen(c->prompt) : 0;
        char *bytes = NULL;
        if (c->file && !(bytes = cli_read_file(c->cmd, c->file, &len))) return 1;
        if (c->chat) {
            const int rc = encode_chat(c, bytes ? bytes : c->prompt, len);
            free(bytes);
            if (rc) return rc;
        } else {
            vkg_status st = vkg_tokenizer_encode(c->tok, bytes ? bytes : c->prompt, len, &c->ids, &c->n_ids, &err);
            free(bytes);
            if (st != VKG_OK) return cli_fail(c->cmd, "%s", err.message);
        }
    }
    if (c->n_ids == 0 && empty_is_eot) {
        /* As transformers' generate() without input ids: start from bos_token_id (GPT-2's
         * <|endoftext|>, its start for unconditional text). */
        const int bos = c->info.bos_token;
        if (bos == VKG_NO_TOKEN)
            return cli_fail(c->cmd, "the prompt is empty and the model has no start token (its config.json gives "
                            "no bos_token_id inside the vocabulary): give a prompt");
        int32_t *start = realloc(c->ids, sizeof *start);
        if (!start) return cli_fail(c->cmd, "out of memory");
        c->ids = start;
        c->ids[0] = bos;
        c->n_ids = 1;
        fprintf(stderr, "vkgraph %s: the prompt is empty: starting from the start token bos_token_id (%d)\n", c->cmd,
                (int)c->ids[0]);
    }
    if (vkg_model_check_ids(c->model, c->ids, c->n_ids, &err) != VKG_OK) return cli_fail(c->cmd, "%s", err.message);
    return 0;
}

void gpt2_cli_free(gpt2_cli *c) {
    vkg_model_free(c->model);
    cli_close_device(c->cmd, c->dev);
    free(c->ids);
    c->dev = NULL;
    c->tok = NULL;
    c->model = NULL;
    c->ids = NULL;
}

const char *gpt2_cli_token(const gpt2_cli *c, int32_t id, char *buf, size_t size, size_t *len) {
    const char *bytes = c->tok ? vkg_tokenizer_token_bytes(c->tok, id, len) : NULL;
    if (bytes) return bytes;
    int n = snprintf(buf, size, "[%d]", (int)id);
    *len = n > 0 ? (size_t)n : 0;
    return buf;
}

/* ---- Python's repr of a decoded token --------------------------------------------------------- */

/* str.isprintable() for the characters a GPT-2 token can hold: not control, format, separator
 * (other than the ASCII space), private-use or non-character code points. */
static int printable(uint32_t cp) {
    if (cp < 0x20 || (cp >= 0x7F && cp <= 0xA0) || cp == 0xAD) return 0;
    if (cp == 0x61C || cp == 0x1680 || cp == 0x180E || (cp >= 0x2000 && cp <= 0x200F)) return 0;
    if ((cp >= 0x2028 && cp <= 0x202F) || (cp >= 0x205F && cp <= 0x206F) || cp == 0x3000) return 0;
    if ((cp >= 0xD800 && cp <= 0xF8FF) || cp == 0xFEFF || (cp >= 0xFFF9 && cp <= 0xFFFB)) return 0;
    if ((cp & 0xFFFE) == 0xFFFE || (cp >= 0xE0000 && cp <= 0xE007F) || cp >= 0xF0000) return 0;
    return 1;
}

int gpt2_cli_repr(const char *bytes, size_t len, char *out, size_t size) {
    int has_single = memchr(bytes, '\'', len) != NULL, has_double = memchr(bytes, '"', len) != NULL;
    char quote = has_single && !has_double ? '"' : '\'';
    size_t o = 0;
    int chars = 0;
    char piece[16];
#define EMIT(text, n, count)                                                    \
    do {                                                                        \
        if (o + (n) + 2 <= size) { memcpy(out + o, text, n); o += (n); }        \
        chars += (count);                                                       \
    } while (0)
    EMIT(&quote, 1, 1);
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        size_t used = vkg_utf8_decode(bytes + i, len - i, &cp);
        if (cp == VKG_UTF8_INVALID) cp = 0xFFFD; /* a maximal invalid subpart is one U+FFFD */
        i += used;
        if (cp == '\\' || cp == (uint32_t)quote) {
            piece[0] = '\\';
            piece[1] = (char)cp;
            EMIT(piece, 2, 2);
        } else if (cp == '\n' || cp == '\t' || cp == '\r') {
            piece[0] = '\\';
            piece[1] = cp == '\n' ? 'n' : cp == '\t' ? 't' : 'r';
            EMIT(piece, 2, 2);
        } else if (!printable(cp)) {
            int n = snprintf(piece, sizeof piece, cp < 0x100 ? "\\x%02x" : cp < 0x10000 ? "\\u%04x" : "\\U%08x",
                             (unsigned)cp);
            EMIT(piece, (size_t)n, n);
        } else {
            size_t n = vkg_utf8_encode(cp, piece);
            EMIT(piece, n, 1);
        }
    }
    EMIT(&quote, 1, 1);
#undef EMIT
    if (size) out[o < size ? o : size - 1] = '\0';
    return chars;
}

const char *gpt2_cli_model_name(const gpt2_cli *c) {
    return strcmp(c->info.architecture, "gpt2") ? c->info.architecture : "GPT-2";
}
