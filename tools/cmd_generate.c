/* `vkgraph generate`: GPT-2 text generation with a KV cache, streamed as it is produced: one prompt,
 * or a conversation read from standard input (-i). */
#include "cli.h"
#include "commands.h"
#include "gpt2_cli.h"
#include "models/sampling.h"
#include "models/stop_strings.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CMD "generate"

static void usage(FILE *f) {
    fprintf(f,
            "usage: vkgraph generate -m DIR (-p TEXT | -f FILE | --ids IDS | -i) [-n N] [--temperature T]\n"
            "                        [--top-k K] [--top-p P] [--min-p P] [--repeat-penalty F]\n"
            "                        [--repeat-last-n N] [--stop TEXT]... [--ignore-eos] [--seed S] [--device D]\n"
            "\n"
            "Continues the prompt with GPT-2, printing each token as it is produced, until N tokens, the\n"
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
            "conversation (it is fed with the first line, not printed).  It ends at the end of standard input,\n"
            "or when the model's context is full.\n"
            "\n");
    gpt2_cli_usage_common(f);
    fprintf(f,
            "  -n, --tokens N      tokens to generate (per turn with -i; default 50)\n"
            "  -i, --interactive   read the conversation from standard input, one line per turn\n"
            "  --temperature T     sample from softmax(logits / T); 0 = greedy (default 1 when --top-k,\n"
            "                      --top-p or --min-p is given, else 0)\n"
            "  --top-k K           sample among the K most likely tokens only (0 = all)\n"
            "  --top-p P           sample among the most likely tokens whose probabilities add up to P\n"
            "  --min-p P           sample among the tokens at least P times as likely as the best one (after\n"
            "                      the temperature; 0 = all)\n"
            "  --repeat-penalty F  divide the logit of each token already in the window by F when positive,\n"
            "                      multiply it by F otherwise (1 = none; greedy choices too)\n"
            "  --repeat-last-n N   the penalty's window: the last N tokens of the context, prompt included\n"
            "                      (default 64; 0 = none; -1 = the whole context)\n"
            "                      order: penalty, temperature, top-k, top-p, min-p\n"
            "  --stop TEXT         end when the generated text ends with TEXT (repeatable); TEXT itself is\n"
            "                      not printed, nor anything after it; a stop string in the prompt does not\n"
            "                      count\n"
            "  --ignore-eos        never choose the end-of-text token, and so never stop at it\n"
            "  --seed S            the sampling seed: the same seed gives the same text (default: from the\n"
            "                      clock, printed so the run can be repeated)\n"
            "  --ids-out           print the generated token ids instead of text\n"
            "  --no-prompt         do not print the prompt before the continuation\n"
            "  -h, --help          show this help\n");
}

typedef struct gen_options {
    long n;
    vkg_sampling_options sampling;
    int sampling_given, temperature_given, seed_given, ids_out, no_prompt, ignore_eos, interactive;
    const char **stops;                  /* [argc]: the --stop values, borrowed from argv */
    int n_stops;
    double t_start;                      /* when the command started, for the load and total times */
} gen_options;

/* Parses this command's own options; 1 taken, 0 not ours, -1 error (printed). */
static int own_option(gen_options *g, int argc, char **argv, int *i) {
    const char *a = argv[*i];
    double d;
    long v;
    if (strcmp(a, "--ids-out") == 0) return g->ids_out = 1;
    if (strcmp(a, "--no-prompt") == 0) return g->no_prompt = 1;
    if (strcmp(a, "--ignore-eos") == 0) return g->ignore_eos = 1;
    if (strcmp(a, "-i") == 0 || strcmp(a, "--interactive") == 0) return g->interactive = 1;
    int known = strcmp(a, "-n") == 0 || strcmp(a, "--tokens") == 0 || strcmp(a, "--temperature") == 0 ||
                strcmp(a, "--top-k") == 0 || strcmp(a, "--top-p") == 0 || strcmp(a, "--seed") == 0 ||
                strcmp(a, "--min-p") == 0 || strcmp(a, "--repeat-penalty") == 0 ||
                strcmp(a, "--repeat-last-n") == 0 || strcmp(a, "--stop") == 0;
    if (!known) return 0;
    const char *val = cli_value(CMD, argc, argv, i);
    if (!val) return -1;
    if (strcmp(a, "-n") == 0 || strcmp(a, "--tokens") == 0) {
        if (cli_int(CMD, a, val, 0, INT_MAX, &g->n)) return -1;
    } else if (strcmp(a, "--temperature") == 0) {
        if (cli_float(CMD, a, val, &d)) return -1;
        if (!(d >= 0 && d < 1e6)) return cli_fail(CMD, "--temperature %s: use 0 (greedy) or a positive number", val), -1;
        g->sampling.temperature = (float)d;
        g->temperature_given = g->sampling_given = 1;
    } else if (strcmp(a, "--top-k") == 0) {
        if (cli_int(CMD, a, val, 0, INT_MAX, &v)) return -1;
        g->sampling.top_k = (int)v;
        g->sampling_given = 1;
    } else if (strcmp(a, "--top-p") == 0) {
        if (cli_float(CMD, a, val, &d)) return -1;
        if (!(d > 0 && d <= 1)) return cli_fail(CMD, "--top-p %s: use a number in (0, 1]", val), -1;
        g->sampling.top_p = (float)d;
        g->sampling_given = 1;
    } else if (strcmp(a, "--min-p") == 0) {
        if (cli_float(CMD, a, val, &d)) return -1;
        if (!(d >= 0 && d <= 1)) return cli_fail(CMD, "--min-p %s: use a number in [0, 1]", val), -1;
        g->sampling.min_p = (float)d;
        g->sampling_given = 1;
    } else if (strcmp(a, "--repeat-penalty") == 0) {
        if (cli_float(CMD, a, val, &d)) return -1;
        if (!(d > 0 && d < 1e6)) return cli_fail(CMD, "--repeat-penalty %s: use a positive number (1 = none)", val), -1;
        g->sampling.repeat_penalty = (float)d; /* not sampling: a greedy choice is penalised too */
    } else if (strcmp(a, "--repeat-last-n") == 0) {
        if (cli_int(CMD, a, val, -1, INT_MAX, &v)) return -1;
        g->sampling.repeat_last_n = (int)v;
    } else if (strcmp(a, "--stop") == 0) {
        if (!val[0]) return cli_fail(CMD, "--stop: the stop string is empty"), -1;
        g->stops[g->n_stops++] = val;
    } else {
        if (cli_int(CMD, a, val, 0, LONG_MAX, &v)) return -1;
        g->sampling.seed = (uint64_t)v;
        g->seed_given = 1;
    }
    return 1;
}

/* What one run of the command did and how long it took, for the summary. */
typedef struct gen_timing {
    double load_s, prompt_s, decode_s, sample_s;
    long prompt_tokens, prompt_passes, decode_steps, samples, generated;
    long first_from_prefill;             /* replies whose first token came from a prefill pass */
} gen_timing;

/* A generation or a conversation: the cache, and ctx, which mirrors it: ctx[0..gen.length) are
 * in the cache, ctx[gen.length..n_ctx) wait to be fed (a prompt, a line, a reply's last token). */
typedef struct gen_state {
    gpt2_cli *c;
    const gen_options *g;
    vkg_gpt2_generator gen;
    vkg_sampler sampler;
    vkg_stop stop;
    int32_t *ctx;                        /* [cache_len + 1] */
    int n_ctx, cache_len;
    gen_timing t;
} gen_state;

static int write_out(const void *bytes, size_t len) {
    if (fwrite(bytes, 1, len, stdout) != len || fflush(stdout) != 0)
        return cli_fail(CMD, "cannot write the output: %s", strerror(errno));
    return 0;
}

/* A token as printed: its id and a space (--ids-out, or no tokenizer), else its text. */
static const char *token_bytes(const gen_state *st, int32_t id, char *buf, size_t size, size_t *len) {
    if (st->g->ids_out || !st->c->tok) {
        *len = (size_t)snprintf(buf, size, "%d ", (int)id);
        return buf;
    }
    return gpt2_cli_token(st->c, id, buf, size, len);
}

static int write_token(const gen_state *st, int32_t id) {
    char buf[32];
    size_t len;
    const char *bytes = token_bytes(st, id, buf, sizeof buf, &len);
    return write_out(bytes, len);
}

/* Writes a generated token at once, through the stop strings (none with --ids-out); *stopped is
 * set when its text completed a stop string. */
static int emit(gen_state *st, int32_t id, int *stopped) {
    char buf[32];
    size_t len;
    const char *bytes = token_bytes(st, id, buf, sizeof buf, &len), *ready;
    vkg_error err = {0};
    if (vkg_stop_push(&st->stop, bytes, len, &ready, &len, &err) != VKG_OK) return cli_fail(CMD, "%s", err.message);
    *stopped = st->stop.matched >= 0;
    return write_out(ready, len);
}

/* With --profile, one span per generated token: mark_token opens token k's span before the pass
 * that computes its logits, and the next mark ends it (k = 0: ends the last one). */
static int mark_token(vkg_device *dev, long k) {
    char name[32];
    snprintf(name, sizeof name, "token %ld", k);
    vkg_error err = {0};
    if (vkg_device_profile_mark(dev, k ? name : NULL, &err) != VKG_OK) return cli_fail(CMD, "%s", err.message);
    return 0;
}

/* Feeds what waits in ctx as one prefill pass. */
static int feed_pending(gen_state *st) {
    int n = st->n_ctx - st->gen.length;
    if (n == 0) return 0;
    vkg_error err = {0};
    double t0 = gpt2_cli_now();
    if (vkg_gpt2_generator_feed(&st->gen, st->ctx + st->gen.length, n, &err) != VKG_OK)
        return cli_fail(CMD, "%s", err.message);
    st->t.prompt_s += gpt2_cli_now() - t0;
    st->t.prompt_tokens += n;
    st->t.prompt_passes++;
    return 0;
}

/* Feeds what waits, then generates up to g->n tokens.  The last one generated stays in ctx, not
 * yet fed: only a next turn needs it in the cache.  An end-of-text token ends the reply and is
 * not kept. */
static int reply(gen_state *st) {
    const gen_options *g = st->g;
    const int eos = st->c->model->config.eos_token_id;
    const char *why = "the requested number of tokens";
    int rc = mark_token(st->c->dev, st->t.generated + 1), stopped = 0;
    if (rc == 0) rc = feed_pending(st);
    vkg_stop_reset(&st->stop);
    for (long produced = 0; rc == 0 && produced < g->n;) {
        if (g->ignore_eos && eos != VKG_GPT2_NO_TOKEN) st->gen.logits[eos] = -INFINITY; /* as llama.cpp */
        double t0 = gpt2_cli_now();
        int32_t next = vkg_sampler_next(&st->sampler, st->gen.logits, st->ctx, st->gen.length);
        st->t.sample_s += gpt2_cli_now() - t0;
        st->t.samples++;
        if (eos != VKG_GPT2_NO_TOKEN && next == eos) {
            why = "the end-of-text token";
            break;
        }
        st->ctx[st->n_ctx++] = next;
        if (produced++ == 0) st->t.first_from_prefill++;
        st->t.generated++;
        if ((rc = emit(st, next, &stopped)) != 0) break;
        if (stopped) {
            why = "a stop string";
            break;
        }
        if (produced == g->n) break;
        if (st->gen.length >= st->cache_len) {
            why = "the end of the model's context";
            break;
        }
        vkg_error err = {0};
        if ((rc = mark_token(st->c->dev, st->t.generated + 1)) != 0) break;
        t0 = gpt2_cli_now();
        if (vkg_gpt2_generator_feed(&st->gen, &next, 1, &err) != VKG_OK) rc = cli_fail(CMD, "%s", err.message);
        st->t.decode_s += gpt2_cli_now() - t0;
        st->t.decode_steps++;
    }
    if (rc == 0) rc = mark_token(st->c->dev, 0);
    if (rc == 0 && !stopped) { /* a stop string that began but never completed is text after all */
        size_t len;
        const char *rest = vkg_stop_flush(&st->stop, &len);
        rc = write_out(rest, len);
    }
    if (rc == 0) rc = write_out("\n", 1);
    if (rc == 0) {
        if (stopped) fprintf(stderr, "vkgraph %s: stopped at the stop string '%s'\n", CMD, st->g->stops[st->stop.matched]);
        else fprintf(stderr, "vkgraph %s: stopped at %s\n", CMD, why);
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
    const gen_timing *t = &st->t;
    char what[64];
    fprintf(stderr, "vkgraph %s: %s\n", CMD, vkg_device_name(st->c->dev));
    fprintf(stderr, "vkgraph %s: %-11s %9.2f ms (model, tokenizer, device, plan compiled, weights uploaded)\n", CMD,
            "load:", 1e3 * t->load_s);
    snprintf(what, sizeof what, "tokens in %ld prefill pass%s", t->prompt_passes, t->prompt_passes == 1 ? "" : "es");
    phase("prompt:", t->prompt_s, t->prompt_tokens, what, 1);
    phase("generation:", t->decode_s, t->decode_steps, "tokens decoded, 1 per step", 1);
    phase("sampling:", t->sample_s, t->samples, "tokens chosen", 0);
    fprintf(stderr, "vkgraph %s: %-11s %9.2f ms / %5ld tokens generated: %ld from a prefill pass's logits, %ld from "
            "decode steps\n", CMD, "total:", 1e3 * total_s, t->generated, t->first_from_prefill,
            t->generated - t->first_from_prefill);
}

/* -i: one turn per line of standard input until its end, or until the context is full. */
static int converse(gen_state *st) {
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int rc = 0;
    for (int turn = 1; rc == 0 && (len = getline(&line, &cap, stdin)) >= 0; turn++) {
        int32_t *ids = NULL;
        size_t n = 0;
        vkg_error err = {0};
        if (vkg_tokenizer_encode(st->c->tok, line, (size_t)len, &ids, &n, &err) != VKG_OK) {
            rc = cli_fail(CMD, "%s", err.message);
            break;
        }
        int waiting = st->n_ctx - st->gen.length;
        if ((size_t)st->n_ctx + n > (size_t)st->cache_len) {
            fprintf(stderr, "vkgraph %s: the context is full: turn %d needs %zu more positions, %d of %d are used; "
                    "the conversation ends\n", CMD, turn, (size_t)waiting + n, st->gen.length, st->cache_len);
            free(ids);
            break;
        }
        memcpy(st->ctx + st->n_ctx, ids, n * sizeof *ids);
        st->n_ctx += (int)n;
        free(ids);
        fprintf(stderr, "vkgraph %s: turn %d: feeding %d new tokens (%d waiting, %zu of the line) after %d in the "
                "cache\n", CMD, turn, waiting + (int)n, waiting, n, st->gen.length);
        rc = reply(st);
    }
    free(line);
    if (rc == 0 && ferror(stdin)) rc = cli_fail(CMD, "cannot read standard input: %s", strerror(errno));
    return rc;
}

static int run(gpt2_cli *c, gen_options *g) {
    const vkg_gpt2_config *cfg = &c->model->config;
    vkg_error err = {0};
    gen_state st = {.c = c, .g = g};
    if (vkg_sampler_init(&st.sampler, &g->sampling, cfg->vocab_size, &err) != VKG_OK ||
        vkg_stop_init(&st.stop, g->stops, g->n_stops, &err) != VKG_OK) {
        vkg_sampler_free(&st.sampler);
        return cli_fail(CMD, "%s", err.message);
    }
    const vkg_sampling_options *so = &g->sampling;
    if (!vkg_sampler_is_greedy(&st.sampler))
        fprintf(stderr, "vkgraph %s: sampling with temperature %g, top-k %d, top-p %g, min-p %g, seed %llu\n", CMD,
                (double)so->temperature, so->top_k, (double)so->top_p, (double)so->min_p,
                (unsigned long long)so->seed);
    if (so->repeat_penalty != 1.0f) {
        char window[48] = "the whole context";
        if (so->repeat_last_n >= 0) snprintf(window, sizeof window, "the last %d tokens", so->repeat_last_n);
        fprintf(stderr, "vkgraph %s: repetition penalty %g over %s\n", CMD, (double)so->repeat_penalty, window);
    }

    /* The cache holds the prompt and what follows, up to the model's context; a conversation may
     * use all of it. */
    long want = (long)c->n_ids + g->n;
    st.cache_len = g->interactive || want > cfg->n_positions ? cfg->n_positions : (int)want;
    st.ctx = malloc(((size_t)st.cache_len + 1) * sizeof *st.ctx);
    int rc = st.ctx ? 0 : cli_fail(CMD, "out of memory");
    if (rc == 0 && vkg_gpt2_generator_new(c->model, c->dev, st.cache_len, &st.gen, &err) != VKG_OK)
        rc = cli_fail(CMD, "%s", err.message);
    st.t.load_s = gpt2_cli_now() - g->t_start;
    if (rc == 0) {
        memcpy(st.ctx, c->ids, c->n_ids * sizeof *c->ids); /* the prompt fits: gpt2_cli_load checked it */
        st.n_ctx = (int)c->n_ids;
    }
    if (rc == 0 && !g->no_prompt && !g->interactive)
        for (size_t i = 0; i < c->n_ids && rc == 0; i++)
            if ((c->ids[i] != cfg->eos_token_id && c->ids[i] != cfg->bos_token_id) || g->ids_out)
                rc = write_token(&st, c->ids[i]); /* markers are not text; ids are never VKG_GPT2_NO_TOKEN */
    if (rc == 0) rc = g->interactive ? converse(&st) : reply(&st);
    if (rc == 0) summary(&st, gpt2_cli_now() - g->t_start);
    vkg_gpt2_generator_free(&st.gen);
    vkg_stop_free(&st.stop);
    vkg_sampler_free(&st.sampler);
    free(st.ctx);
    return rc;
}

int cmd_generate(int argc, char **argv) {
    gpt2_cli c = {.cmd = CMD};
    gen_options g = {.n = 50, .t_start = gpt2_cli_now()};
    vkg_sampling_options_default(&g.sampling);
    g.stops = calloc((size_t)argc, sizeof *g.stops);
    if (!g.stops) return cli_fail(CMD, "out of memory");
    int rc = 0;
    for (int i = 1; i < argc && rc == 0; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            free(g.stops);
            return 0;
        }
        int taken = gpt2_cli_option(&c, argc, argv, &i);
        if (taken == 0) taken = own_option(&g, argc, argv, &i);
        if (taken < 0) rc = 1;
        else if (taken == 0) rc = cli_unknown_option(CMD, argv[i], usage);
    }
    if (rc == 0 && g.n_stops && g.ids_out)
        rc = cli_fail(CMD, "--stop matches text: it cannot be combined with --ids-out");
    if (!g.sampling_given) g.sampling.temperature = 0.0f; /* greedy unless sampling was asked for */
    if (g.sampling_given && !g.seed_given) g.sampling.seed = (uint64_t)time(NULL);
    /* A conversation without a prompt starts as an empty prompt does, from the start token. */
    if (g.interactive && !c.prompt && !c.file && !c.ids_text) c.prompt = "";
    if (rc == 0) rc = gpt2_cli_load(&c, 1);
    if (rc == 0 && !c.tok && (g.interactive || g.n_stops))
        rc = cli_fail(CMD, "%s needs a tokenizer, and %s has none", g.interactive ? "--interactive" : "--stop",
                      c.model_dir);
    if (rc == 0) rc = gpt2_cli_open_device(&c);
    if (rc == 0) rc = run(&c, &g);
    gpt2_cli_free(&c);
    free(g.stops);
    return rc;
}
