/* `vkgraph generate`: GPT-2 text generation with a KV cache, streamed as it is produced: one prompt,
 * or a conversation read from standard input (-i). */
#include "cli.h"
#include "cli_sampling.h"
#include "commands.h"
#include "gpt2_cli.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CMD "generate"

static void usage(FILE *f) {
    fprintf(f,
            "usage: vkgraph generate -m DIR (-p TEXT | -f FILE | --ids IDS | -i) [--chat] [-n N] [--temperature T]\n"
            "                        [--top-k K] [--top-p P] [--min-p P] [--repeat-penalty F]\n"
            "                        [--repeat-last-n N] [--stop TEXT]... [--ignore-eos] [--seed S] [--ctx N]\n"
            "                        [--device D]\n"
            "\n"
            "Continues the prompt with the model, printing each token as it is produced, until N tokens, the\n"
            "end-of-text token (eos_token_id) or a stop string.  Without sampling options the choice is greedy\n"
            "(always the most likely token).  An empty prompt starts from the start token (bos_token_id; for\n"
            "GPT-2 the end-of-text token), as GPT-2's unconditional samples do.\n"
            "\n"
            "At the end a summary goes to standard error: the load (model, tokenizer, device, plan, weights);\n"
            "the prompt, run as one prefill pass per turn; the tokens decoded, one decode step each (the first\n"
            "generated token comes from the prompt pass's logits, so N tokens take N - 1 steps); the time\n"
            "spent choosing tokens; and the total, from start to end.\n"
            "\n"
            "With -i (--interactive), each line read from standard input is one turn: the line, with its\n"
            "newline, is added to the conversation and a reply of up to N tokens is generated and printed,\n"
            "followed by a newline.  The KV cache keeps the conversation, so a turn feeds only its new tokens\n"
            "(the previous reply's last token and the line's).  A prompt given with -p, -f or --ids starts the\n"
            "conversation (it is fed with the first line, not printed).  When standard input is a terminal,\n"
            "\"> \" on standard error asks for each line.  It ends at the end of standard input (exit 0), or\n"
            "when the KV cache cannot hold the next line: the conversation then stops with a message\n"
            "saying so, the rest of the input is not read, and the exit status is 1.\n"
            "\n"
            "With --ids-out the token ids are printed as tokenize prints them, \"[464, 5044, 318]\", one list\n"
            "a line, which --ids and tokenize --decode read back.  -n 0 generates nothing and runs no pass:\n"
            "it prints the prompt (or its ids) and the load time.\n"
            "\n");
    gpt2_cli_usage_common(f);
    cli_sampling_usage(f, "per turn with -i; default 50; 0: none, no pass run");
    fprintf(f,
            "  -i, --interactive   read the conversation from standard input, one line per turn\n"
            "  -c, --ctx N         positions of the KV cache (default: the prompt's and -n's; with -i the\n"
            "                      model's context, or where the device cannot bind or hold a cache that\n"
            "                      long the largest half, quarter, ... it can)\n"
            "  --chat              an instruct model: the prompt (-p or -f) is one user message, put through\n"
            "                      the model's chat template (as apply_chat_template with\n"
            "                      add_generation_prompt); only the reply is printed (vkgraph chat keeps a\n"
            "                      conversation)\n"
            "  --ids-out           print the token ids instead of text: [464, 5044, 318], one list a line\n"
            "  --no-prompt         do not print the prompt before the continuation\n"
            "  -h, --help          show this help\n");
}

typedef struct gen_options {
    cli_sampling cs;                     /* the generation options as given                  */
    vkg_generate_options go;             /* what each reply runs with (prompt set per reply) */
    int ids_out, no_prompt, interactive, chat;
    long n_ctx;                          /* --ctx; 0: as the prompt and -n (or -i) need       */
    double t_start;                      /* when the command started, for the load and total times */
} gen_options;

/* Parses this command's own options; 1 taken, 0 not ours, -1 refused (said why). */
static int own_option(gen_options *g, int argc, char **argv, int *i) {
    const char *a = argv[*i];
    if (strcmp(a, "--ctx") == 0) {
        const char *v = cli_value(CMD, argc, argv, i);
        return v && cli_int(CMD, a, v, 1, 1 << 24, &g->n_ctx) == 0 ? 1 : -1;
    }
    if (strcmp(a, "--ids-out") == 0) return g->ids_out = 1;
    if (strcmp(a, "--no-prompt") == 0) return g->no_prompt = 1;
    if (strcmp(a, "-i") == 0 || strcmp(a, "--interactive") == 0) return g->interactive = 1;
    if (strcmp(a, "--chat") == 0) return g->chat = 1;
    return 0;
}

/* What one run of the command did beyond the context's own timings, for the summary. */
typedef struct gen_counts {
    double load_s;
    long generated;
    long first_from_prefill;             /* replies whose first token came from a prefill pass */
} gen_counts;

/* A generation or a conversation over one context (its cache and its tokens). */
typedef struct gen_state {
    gpt2_cli *c;
    const gen_options *g;
    vkg_context *ctx;
    int cache_len;
    int write_failed;                    /* a write failed (message printed): stop, exit 1 */
    long ids_written;                    /* ids printed on the current line (ids mode)        */
    gen_counts t;
} gen_state;

static int write_out(const void *bytes, size_t len) {
    if (fwrite(bytes, 1, len, stdout) != len || fflush(stdout) != 0)
        return cli_fail(CMD, "cannot write the output: %s", strerror(errno));
    return 0;
}

/* Ids are printed instead of text with --ids-out, or when the model has no tokenizer. */
static int ids_mode(const gen_state *st) { return st->g->ids_out || !st->c->tok; }

/* A token as printed: in ids mode a list as tokenize prints it, "[464, 5044" (the line's "]" comes
 * from end_line), which --ids and tokenize --decode read back; else its text. */
static int write_token(gen_state *st, int32_t id) {
    char buf[32];
    size_t len;
    const char *bytes = buf;
    if (ids_mode(st)) len = (size_t)snprintf(buf, sizeof buf, st->ids_written++ ? ", %d" : "[%d", (int)id);
    else bytes = gpt2_cli_token(st->c, id, buf, sizeof buf, &len);
    return write_out(bytes, len);
}

/* The end of a reply's line: in ids mode the list is closed first ("[]" when it is empty). */
static int end_line(gen_state *st) {
    const char *end = !ids_mode(st) ? "\n" : st->ids_written ? "]\n" : "[]\n";
    st->ids_written = 0;
    return write_out(end, strlen(end));
}

/* The context's streaming callback: prints what is ready of each token at once (its id with
 * --ids-out or without a tokenizer; stop strings need text, so there are none then). */
static int on_token(void *user, int32_t id, const char *text, size_t len) {
    gen_state *st = user;
    if (st->write_failed) return 1;
    int rc;
    if (id != VKG_NO_TOKEN && ids_mode(st)) rc = write_token(st, id);
    else if (!ids_mode(st)) rc = write_out(text, len);
    else rc = 0;
    if (rc) st->write_failed = 1;
    return rc;
}

/* Feeds the tokens waiting (a prompt or a line, after the last reply's last token) with one
 * prefill pass, then generates up to g->n tokens.  The last one generated stays pending: only a
 * next turn needs it in the cache.  An end-of-text token ends the reply and is not kept. */
static int reply(gen_state *st, const int32_t *ids, int n) {
    const gen_options *g = st->g;
    if (g->go.max_tokens == 0) { /* nothing to generate: no pass over the prompt either */
        int rc = end_line(st);
        if (rc == 0) fprintf(stderr, "vkgraph %s: -n 0: nothing generated, no pass run\n", CMD);
        return rc;
    }
    vkg_generate_options o = g->go;
    o.prompt = ids;
    o.n_prompt = n;
    vkg_generate_result res;
    vkg_error err = {0};
    if (vkg_context_generate(st->ctx, &o, on_token, st, &res, &err) != VKG_OK) return cli_fail(CMD, "%s", err.message);
    if (st->write_failed) return 1;
    st->t.generated += res.generated;
    if (res.generated > 0) st->t.first_from_prefill++;
    int rc = end_line(st);
    if (rc == 0) {
        static const char *const why[] = {
            [VKG_STOP_MAX_TOKENS] = "the requested number of tokens", [VKG_STOP_EOS] = "the end-of-text token",
            [VKG_STOP_CONTEXT_FULL] = "the end of the model's context", [VKG_STOP_CALLBACK] = "a failed write"};
        if (res.reason == VKG_STOP_STRING)
            fprintf(stderr, "vkgraph %s: stopped at the stop string '%s'\n", CMD, g->go.stops[res.stop_index]);
        else if (res.reason == VKG_STOP_CONTEXT_FULL && st->cache_len < st->c->info.n_ctx)
            fprintf(stderr, "vkgraph %s: stopped at the end of the KV cache (%d of the model's %d positions)\n", CMD,
                    st->cache_len, st->c->info.n_ctx);
        else fprintf(stderr, "vkgraph %s: stopped at %s\n", CMD, why[res.reason]);
    }
    return rc;
}

/* "prompt:       12.34 ms /     5 tokens in 1 prefill pass  (2.47 ms per token, 405.2 tokens/s)";
 * the rates are left out for no tokens, the tokens/s for a phase that is not a model pass. */
static void phase(const char *label, double s, long n, const char *what, int per_second) {
    fprintf(stderr, "vkgraph %s: %-11s %9.2f ms / %5ld %-30s", CMD, label, 1e3 * s, n, what);
    if (n > 0 && s > 0) {
        fprintf(stderr, " (%.3f ms per token", 1e3 * s / (double)n);
        if (per_second) fprintf(stderr, ", %.1f tokens/s", (double)n / s);
        fprintf(stderr, ")");
    }
    fprintf(stderr, "\n");
}

/* llama.cpp's closing summary: each phase's time and count, counted exactly as timed.  The
 * phases do not overlap, and the total runs from the command's start, so it is at least their
 * sum. */
static void summary(const gen_state *st, double total_s) {
    const gen_counts *t = &st->t;
    vkg_context_timings ct = {0};
    if (st->ctx) vkg_context_get_timings(st->ctx, &ct, NULL); /* none with -n 0 */
    char what[64];
    fprintf(stderr, "vkgraph %s: %s\n", CMD, vkg_device_name(st->c->dev));
    fprintf(stderr, "vkgraph %s: %-11s %9.2f ms (model, tokenizer, device%s)\n", CMD, "load:", 1e3 * t->load_s,
            st->ctx ? ", plan compiled, weights uploaded" : "");
    snprintf(what, sizeof what, "tokens in %ld prefill pass%s", ct.prefill_passes, ct.prefill_passes == 1 ? "" : "es");
    phase("prompt:", ct.prefill_s, ct.prefill_tokens, what, 1);
    phase("generation:", ct.decode_s, ct.decode_steps, "tokens decoded, 1 per step", 1);
    phase("sampling:", ct.sample_s, ct.samples, "tokens chosen", 0);
    fprintf(stderr, "vkgraph %s: %-11s %9.2f ms / %5ld tokens generated: %ld from a prefill pass's logits, %ld from "
            "decode steps\n", CMD, "total:", 1e3 * total_s, t->generated, t->first_from_prefill,
            t->generated - t->first_from_prefill);
}

/* -i: one turn per line of standard input until its end.  The first turn feeds the prompt (if
 * any) with the line.  A line the context cannot hold ends the conversation with a message and
 * exit status 1: what was asked is not all answered.  (A reply the context cuts short says so
 * itself: "stopped at the end of the model's context", or of a shorter KV cache.) */
static int converse(gen_state *st) {
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int rc = 0;
    const int tty = isatty(STDIN_FILENO);
    for (int turn = 1; rc == 0; turn++) {
        if (tty) fputs("> ", stderr); /* asks for the line; only a person at a terminal needs it */
        if ((len = getline(&line, &cap, stdin)) < 0) break;
        int32_t *ids = NULL;
        size_t n = 0;
        vkg_error err = {0};
        if (vkg_tokenizer_encode(st->c->tok, line, (size_t)len, &ids, &n, &err) != VKG_OK) {
            rc = cli_fail(CMD, "%s", err.message);
            break;
        }
        int n_ctx;
        vkg_context_tokens(st->ctx, &n_ctx);
        /* The conversation so far (the last reply's last token included), and on the first turn
         * the prompt. */
        const size_t prompt = turn == 1 ? st->c->n_ids : 0;
        const size_t used = (size_t)n_ctx + prompt;
        if (used + n > (size_t)st->cache_len) {
            free(ids);
            rc = cli_fail(CMD, "%s is full: line %d needs %zu positions and %zu of the %d are free; the "
                          "conversation stops here and the rest of the input is not read",
                          st->cache_len < st->c->info.n_ctx ? "the KV cache" : "the model's context", turn, n,
                          (size_t)st->cache_len - (used < (size_t)st->cache_len ? used : (size_t)st->cache_len),
                          st->cache_len);
            break;
        }
        int32_t *feed = ids;
        if (prompt) { /* the prompt goes in with the first line */
            if (!(feed = malloc((prompt + n) * sizeof *feed))) {
                free(ids);
                rc = cli_fail(CMD, "out of memory");
                break;
            }
            memcpy(feed, st->c->ids, prompt * sizeof *feed);
            if (n) memcpy(feed + prompt, ids, n * sizeof *feed);
        }
        fprintf(stderr, "vkgraph %s: line %d: %zu tokens; the conversation now fills %zu of the KV cache's %d "
                "positions\n", CMD, turn, n, used + n, st->cache_len);
        rc = reply(st, feed, (int)(prompt + n));
        if (feed != ids) free(feed);
        free(ids);
    }
    free(line);
    if (rc == 0 && ferror(stdin)) rc = cli_fail(CMD, "cannot read standard input: %s", strerror(errno));
    return rc;
}

static int run(gpt2_cli *c, gen_options *g) {
    const vkg_model_info *info = &c->info;
    vkg_error err = {0};
    gen_state st = {.c = c, .g = g};
    if (vkg_sampling_options_check(&g->go.sampling, &err) != VKG_OK) return cli_fail(CMD, "%s", err.message);
    cli_sampling_print(CMD, &g->go.sampling);

    /* The cache holds the prompt and what follows, up to the model's context; a conversation may
     * use all of it.  A length left to the model is the longest the device holds. */
    long want = (long)c->n_ids + g->go.max_tokens;
    st.cache_len = g->n_ctx ? (int)g->n_ctx : g->interactive || want > info->n_ctx ? info->n_ctx : (int)want;
    if (st.cache_len > info->n_ctx)
        return cli_fail(CMD, "--ctx %d: the model's context holds %d positions", st.cache_len, info->n_ctx);
    if ((long)c->n_ids > st.cache_len)
        return cli_fail(CMD, "--ctx %d: the prompt's %zu tokens do not fit", st.cache_len, c->n_ids);
    vkg_context_options co;
    vkg_context_options_default(&co);
    co.n_ctx = !g->n_ctx && st.cache_len == info->n_ctx ? 0 : st.cache_len;
    int rc = 0;
    vkg_status made = VKG_OK;
    if (g->go.max_tokens > 0 && (made = vkg_context_new(c->model, &co, &st.ctx, &err)) != VKG_OK)
        rc = cli_fail(CMD, "%s%s", err.message, cli_memory_hint(made, " (--ctx N sets a shorter KV cache)"));
    if (st.ctx) {
        st.cache_len = vkg_context_size(st.ctx);
        cli_note_context(CMD, co.n_ctx, st.cache_len, info->n_ctx,
                         g->interactive ? "the conversation stops when it is full" : "generation stops at its end",
                         c->dev);
    }
    st.t.load_s = vkg_clock_seconds() - g->t_start;
    if (rc == 0 && !g->no_prompt && !g->interactive)
        for (size_t i = 0; i < c->n_ids && rc == 0; i++)
            if ((c->ids[i] != info->eos_token && c->ids[i] != info->bos_token) || g->ids_out)
                rc = write_token(&st, c->ids[i]); /* markers are not text; ids are never VKG_NO_TOKEN */
    /* The prompt fits the cache (checked above) and the model's context (gpt2_cli_load). */
    if (rc == 0) rc = g->interactive ? converse(&st) : reply(&st, c->ids, (int)c->n_ids);
    if (rc == 0) summary(&st, vkg_clock_seconds() - g->t_start);
    vkg_context_free(st.ctx);
    return rc;
}

int cmd_generate(int argc, char **argv) {
    gpt2_cli c = {.cmd = CMD};
    gen_options g = {.t_start = vkg_clock_seconds()};
    if (cli_sampling_init(CMD, &g.cs, argc)) return 1;
    int rc = 0;
    for (int i = 1; i < argc && rc == 0; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            cli_sampling_free(&g.cs);
            return 0;
        }
        int taken = gpt2_cli_option(&c, argc, argv, &i);
        if (taken == 0) taken = cli_sampling_option(&g.cs, CMD, argc, argv, &i);
        if (taken == 0) taken = own_option(&g, argc, argv, &i);
        if (taken < 0) rc = 1;
        else if (taken == 0) rc = cli_unknown_option(CMD, argv[i], usage);
    }
    if (rc == 0 && g.cs.n_stops && g.ids_out)
        rc = cli_fail(CMD, "--stop matches text: it cannot be combined with --ids-out");
    vkg_generate_options_default(&g.go); /* greedy, 50 tokens, unless the options say otherwise */
    if (rc == 0) cli_sampling_apply(&g.cs, CMD, &g.go);
    if (rc == 0 && g.interactive && g.go.max_tokens == 0) rc = cli_fail(CMD, "-n 0 with --interactive would answer no line");
    if (rc == 0 && g.chat && (g.interactive || c.ids_text))
        rc = cli_fail(CMD, "--chat takes the message as -p or -f%s", g.interactive ? "; for a conversation use vkgraph chat" : "");
    vkg_chat_template *tpl = NULL;
    if (rc == 0 && g.chat && c.model_dir && gpt2_cli_chat_template(CMD, c.model_dir, &tpl)) rc = 1;
    c.chat = tpl;
    if (g.chat) g.no_prompt = 1; /* the rendered template is not the user's text */
    /* A conversation without a prompt starts as an empty prompt does, from the start token. */
    if (g.interactive && !c.prompt && !c.file && !c.ids_text) c.prompt = "";
    if (rc == 0) rc = gpt2_cli_load(&c, 1);
    if (rc == 0 && !c.tok && (g.interactive || g.cs.n_stops))
        rc = cli_fail(CMD, "%s needs a tokenizer, and %s has none", g.interactive ? "--interactive" : "--stop",
                      c.model_dir);
    if (rc == 0) rc = run(&c, &g);
    gpt2_cli_free(&c);
    vkg_chat_template_free(tpl);
    cli_sampling_free(&g.cs);
    return rc;
}
