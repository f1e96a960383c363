/* `vkgraph chat`: a conversation with an instruct model, one message per line of standard input,
 * through its chat template, the KV cache kept from turn to turn (vkgraph_chat.h). */
#include "cli.h"
#include "cli_sampling.h"
#include "commands.h"
#include "gpt2_cli.h"
#include "vkgraph_chat.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CMD "chat"

static void usage(FILE *f) {
    fprintf(f,
            "usage: vkgraph chat -m DIR [--system TEXT] [--ctx N] [-n N] [--temperature T] [--top-k K]\n"
            "                    [--top-p P] [--min-p P] [--repeat-penalty F] [--repeat-last-n N]\n"
            "                    [--stop TEXT]... [--ignore-eos] [--seed S] [--device D]\n"
            "\n"
            "Talks with an instruct model: each line of standard input is one user message.  The whole\n"
            "conversation is rendered with the model's chat template (tokenizer_config.json's\n"
            "chat_template, as transformers' apply_chat_template with add_generation_prompt) and\n"
            "tokenized; the KV cache keeps what the previous turns fed, so a turn feeds only the tokens\n"
            "past those it shares with the cache.  The reply streams to standard output until one of the\n"
            "model's stop ids (generation_config.json's eos_token_id, else config.json's, else the\n"
            "tokenizer's eos), then a newline.  On a terminal, \"> \" on standard error asks for each line.\n"
            "\n"
            "Sampling follows the model's generation_config.json (do_sample, temperature, top_k, top_p,\n"
            "min_p, repetition_penalty, max_new_tokens), each overridden by the option given; keys it\n"
            "does not apply are named on standard error.  Without max_new_tokens or -n a reply runs to a\n"
            "stop id or to the end of the context.\n"
            "\n"
            "Lines that are commands:  /clear  forgets the conversation (the system message stays)\n"
            "                          /exit   ends (so does the end of the input)\n"
            "\n"
            "When the conversation outgrows the context, a message on standard error says so, the\n"
            "oldest turns are dropped (the system message kept) and the rest is fed again.  A message\n"
            "that does not fit even alone is refused with a message saying why, and the chat goes on;\n"
            "the exit status is then 1.\n"
            "\n"
            "  -m, --model DIR     an instruct model's folder: config.json, the weights, tokenizer.json and\n"
            "                      tokenizer_config.json with its chat_template\n"
            "  --system TEXT       the system message, first in every rendering\n"
            "  -c, --ctx N         positions of the KV cache (default: the model's context, or\n"
            "                      generation_config.json's max_length when smaller; where the device\n"
            "                      cannot bind or hold a cache that long, the largest half, quarter, ...\n"
            "                      it can)\n"
            "  --device D          cpu, vulkan, vulkan:N (default: the best Vulkan GPU, else the CPU)\n"
            "  --threads N         CPU executor threads (default: every core)\n"
            "  --dtype D           the weight matrices in memory: f32, f16 or bf16 (default: as stored)\n");
    cli_sampling_usage(f, "per reply; default generation_config.json's max_new_tokens, else no limit");
    fprintf(f, "  -h, --help          show this help\n");
}

typedef struct chat_run {
    gpt2_cli c;                          /* -m, --device, --threads, --dtype and the model */
    cli_sampling cs;
    const char *system;
    long n_ctx;
    vkg_generate_options go;
    vkg_chat_template *tpl;
    vkg_context *ctx;
    vkg_chat *chat;
    const vkg_chat_turn_result *res;     /* the turn under way, for its first token's notice */
    int streamed, write_failed;
} chat_run;

/* The conversation was cut to fit: said before the reply it makes room for. */
static void say_dropped(const chat_run *r) {
    fprintf(stderr, "vkgraph %s: the conversation outgrew the context (%d positions): dropped the oldest %d "
            "message%s (the system message kept); what is left takes %d tokens, %d of them fed again\n", CMD,
            vkg_context_size(r->ctx), r->res->dropped, r->res->dropped == 1 ? "" : "s", r->res->prompt_tokens,
            r->res->fed);
}

static int on_token(void *user, int32_t id, const char *text, size_t len) {
    (void)id;
    chat_run *r = user;
    if (!r->streamed++ && r->res->dropped) say_dropped(r);
    if (len && (fwrite(text, 1, len, stdout) != len || fflush(stdout) != 0)) {
        cli_fail(CMD, "cannot write the reply: %s", strerror(errno));
        r->write_failed = 1;
        return 1;
    }
    return 0;
}

/* One user message: 0 done, 1 refused or failed (said), -1 stop (a failed write or a fault). */
static int turn(chat_run *r, const char *line, int number) {
    vkg_chat_turn_result res;
    vkg_error err = {0};
    r->res = &res;
    r->streamed = 0;
    vkg_status st = vkg_chat_turn(r->chat, line, &r->go, on_token, r, &res, &err);
    if (st == VKG_OK && !r->streamed && res.dropped) say_dropped(r);
    if (r->write_failed) return -1;
    if (st != VKG_OK && res.refused) {
        cli_fail(CMD, "message %d refused: %s", number, err.message);
        return 1;
    }
    if (st != VKG_OK) {
        cli_fail(CMD, "%s", err.message);
        return -1;
    }
    if (fputs("\n", stdout) == EOF || fflush(stdout) != 0) return cli_fail(CMD, "cannot write the reply: %s", strerror(errno)), -1;
    static const char *const why[] = {
        [VKG_STOP_MAX_TOKENS] = "the token limit (-n or max_new_tokens)", [VKG_STOP_EOS] = "a stop id",
        [VKG_STOP_STRING] = "a stop string", [VKG_STOP_CONTEXT_FULL] = "the end of the context",
        [VKG_STOP_CALLBACK] = "a failed write"};
    fprintf(stderr, "vkgraph %s: message %d: %d tokens in the conversation, %d already in the cache, %d fed; "
            "reply of %d tokens ended at %s\n", CMD, number, res.prompt_tokens, res.reused, res.fed, res.gen.generated,
            why[res.gen.reason]);
    if (res.gen.reason == VKG_STOP_CONTEXT_FULL)
        fprintf(stderr, "vkgraph %s: the reply filled the context (%d positions) and was cut short; the next "
                "message drops the oldest turns to make room\n", CMD, vkg_context_size(r->ctx));
    return 0;
}

/* The lines of standard input, each a message or a command, until /exit or its end. */
static int converse(chat_run *r) {
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int rc = 0, number = 0;
    const int tty = isatty(STDIN_FILENO);
    for (;;) {
        if (tty) fputs("> ", stderr);
        if ((len = getline(&line, &cap, stdin)) < 0) break;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = '\0';
        if ((size_t)len != strlen(line)) {
            rc = cli_fail(CMD, "message %d holds a NUL byte; messages are text", number + 1);
            continue;
        }
        if (strcmp(line, "/exit") == 0) break;
        if (strcmp(line, "/clear") == 0) {
            vkg_error err = {0};
            if (vkg_chat_clear(r->chat, &err) != VKG_OK) {
                rc = cli_fail(CMD, "%s", err.message);
                break;
            }
            fprintf(stderr, "vkgraph %s: conversation cleared%s\n", CMD, r->system ? " (the system message kept)" : "");
            continue;
        }
        if (len == 0) continue; /* nothing to say */
        const int t = turn(r, line, ++number);
        if (t < 0) {
            rc = 1;
            break;
        }
        if (t > 0) rc = 1;
    }
    free(line);
    if (ferror(stdin)) rc = cli_fail(CMD, "cannot read standard input: %s", strerror(errno));
    if (tty && len < 0) fputs("\n", stderr);
    return rc;
}

/* The model, its template, a context and the chat over it. */
static int start(chat_run *r) {
    gpt2_cli *c = &r->c;
    vkg_error err = {0};
    /* the template first: a model without one is refused before anything heavy loads */
    if (gpt2_cli_chat_template(CMD, c->model_dir, &r->tpl)) return 1;
    if (cli_open_device(CMD, c->device, (int)c->threads, &c->dev)) return 1;
    if (cli_check_threads(CMD, c->threads, c->dev)) return 1;
    if (vkg_model_open(c->model_dir, c->dev, &c->model_opts, &c->model, &err) != VKG_OK)
        return cli_fail(CMD, "%s", err.message);
    if (vkg_model_get_info(c->model, &c->info, &err) != VKG_OK) return cli_fail(CMD, "%s", err.message);
    if (!vkg_model_tokenizer(c->model))
        return cli_fail(CMD, "%s has no tokenizer that vkgraph reads%s%s", c->model_dir, c->info.note[0] ? ": " : "",
                        c->info.note);
    if (c->info.note[0]) fprintf(stderr, "vkgraph %s: note: %s\n", CMD, c->info.note);
    if (c->info.generation_note[0]) fprintf(stderr, "vkgraph %s: note: %s\n", CMD, c->info.generation_note);
    if (c->info.random_weights) fprintf(stderr, "vkgraph %s: the model's weights are RANDOM: its replies mean nothing\n", CMD);
    int n_ctx = c->info.n_ctx;
    if (c->info.max_length && c->info.max_length < n_ctx) n_ctx = c->info.max_length;
    if (r->n_ctx) {
        if (r->n_ctx > c->info.n_ctx)
            return cli_fail(CMD, "--ctx %ld: the model's context holds %d positions", r->n_ctx, c->info.n_ctx);
        n_ctx = (int)r->n_ctx;
    }
    vkg_context_options co;
    vkg_context_options_default(&co);
    /* a length named is exact; else the model's, or max_length, or the most of it this device holds */
    co.n_ctx = r->n_ctx ? n_ctx : 0;
    co.n_ctx_fit = r->n_ctx ? 0 : n_ctx;
    vkg_status st = vkg_context_new(c->model, &co, &r->ctx, &err);
    if (st != VKG_OK)
        return cli_fail(CMD, "%s%s", err.message, cli_memory_hint(st, " (--ctx N sets a shorter KV cache)"));
    const int fitted = vkg_context_size(r->ctx);
    if (co.n_ctx_fit == c->info.n_ctx || co.n_ctx_fit == 0)
        cli_note_context(CMD, co.n_ctx, fitted, c->info.n_ctx, "--ctx N sets it", c->dev);
    else if (fitted < co.n_ctx_fit)
        fprintf(stderr, "vkgraph %s: note: a KV cache of %d positions: generation_config.json's max_length of %d "
                "does not fit %s (--ctx N sets it)\n", CMD, fitted, co.n_ctx_fit, vkg_device_name(c->dev));
    n_ctx = fitted;
    vkg_model_generate_defaults(c->model, &r->go);
    if (!c->info.max_new_tokens) r->go.max_tokens = n_ctx; /* to a stop id or the context's end */
    cli_sampling_apply(&r->cs, CMD, &r->go);
    if (vkg_sampling_options_check(&r->go.sampling, &err) != VKG_OK) return cli_fail(CMD, "%s", err.message);
    cli_sampling_print(CMD, &r->go.sampling);
    int32_t stops[8];
    const int n_stops = vkg_model_stop_ids(c->model, stops, 8);
    if (n_stops == 0 && !r->go.ignore_eos)
        fprintf(stderr, "vkgraph %s: note: the model names no end-of-turn token: replies run to -n or the "
                "context's end\n", CMD);
    if (vkg_chat_new(r->ctx, r->tpl, r->system, &r->chat, &err) != VKG_OK) return cli_fail(CMD, "%s", err.message);
    return 0;
}

int cmd_chat(int argc, char **argv) {
    chat_run r = {.c = {.cmd = CMD}};
    if (cli_sampling_init(CMD, &r.cs, argc)) return 1;
    int rc = 0;
    for (int i = 1; i < argc && rc == 0; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            cli_sampling_free(&r.cs);
            return 0;
        }
        int taken = gpt2_cli_option(&r.c, argc, argv, &i);
        if (taken == 0) taken = cli_sampling_option(&r.cs, CMD, argc, argv, &i);
        if (taken == 0 && strcmp(a, "--system") == 0) {
            if (r.system) rc = cli_fail(CMD, "--system given twice");
            else taken = (r.system = cli_value(CMD, argc, argv, &i)) ? 1 : -1;
        } else if (taken == 0 && strcmp(a, "--ctx") == 0) {
            const char *v = cli_value(CMD, argc, argv, &i);
            taken = v && cli_int(CMD, a, v, 1, 1 << 24, &r.n_ctx) == 0 ? 1 : -1;
        }
        if (rc == 0 && taken < 0) rc = 1;
        else if (rc == 0 && taken == 0) rc = cli_unknown_option(CMD, a, usage);
    }
    if (rc == 0 && (r.c.prompt || r.c.file || r.c.ids_text))
        rc = cli_fail(CMD, "%s: chat reads its messages from standard input, one per line",
                      r.c.prompt ? "-p" : r.c.file ? "-f" : "--ids");
    if (rc == 0 && !r.c.model_dir) rc = cli_fail(CMD, "say which model: -m DIR");
    if (rc == 0 && r.cs.n_given && r.cs.n == 0) rc = cli_fail(CMD, "-n 0 would answer no message");
    if (rc == 0) rc = start(&r);
    if (rc == 0) rc = converse(&r);
    vkg_chat_free(r.chat);
    vkg_context_free(r.ctx);
    vkg_chat_template_free(r.tpl);
    gpt2_cli_free(&r.c);
    cli_sampling_free(&r.cs);
    return rc;
}
