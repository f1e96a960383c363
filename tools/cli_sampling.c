/* The generation options generate and chat share (see cli_sampling.h). */
#include "cli_sampling.h"

#include "cli.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int cli_sampling_init(const char *cmd, cli_sampling *g, int argc) {
    memset(g, 0, sizeof *g);
    g->n = 50;
    vkg_sampling_options_default(&g->s);
    g->stops = calloc((size_t)argc + 1, sizeof *g->stops);
    return g->stops ? 0 : cli_fail(cmd, "out of memory");
}

void cli_sampling_free(cli_sampling *g) {
    free(g->stops);
    g->stops = NULL;
}

void cli_sampling_usage(FILE *f, const char *n_help) {
    fprintf(f,
            "  -n, --tokens N      tokens to generate (%s)\n"
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
            "  --ignore-eos        never choose a stop id (the model's end-of-text tokens), and so never\n"
            "                      stop at one\n"
            "  --seed S            the sampling seed: the same seed gives the same text (default, or -1 as\n"
            "                      llama.cpp takes it: from the clock, printed so the run can be repeated)\n",
            n_help);
}

int cli_sampling_option(cli_sampling *g, const char *cmd, int argc, char **argv, int *i) {
    const char *a = argv[*i];
    double d;
    long v;
    if (strcmp(a, "--ignore-eos") == 0) return g->ignore_eos = 1;
    int known = strcmp(a, "-n") == 0 || strcmp(a, "--tokens") == 0 || strcmp(a, "--temperature") == 0 ||
                strcmp(a, "--top-k") == 0 || strcmp(a, "--top-p") == 0 || strcmp(a, "--seed") == 0 ||
                strcmp(a, "--min-p") == 0 || strcmp(a, "--repeat-penalty") == 0 ||
                strcmp(a, "--repeat-last-n") == 0 || strcmp(a, "--stop") == 0;
    if (!known) return 0;
    const char *val = cli_value(cmd, argc, argv, i);
    if (!val) return -1;
    if (strcmp(a, "-n") == 0 || strcmp(a, "--tokens") == 0) {
        if (cli_int(cmd, a, val, 0, INT_MAX, &g->n)) return -1;
        g->n_given = 1;
    } else if (strcmp(a, "--temperature") == 0) {
        if (cli_float(cmd, a, val, &d)) return -1;
        if (!(d >= 0 && d < 1e6)) return cli_fail(cmd, "--temperature %s: use 0 (greedy) or a positive number", val), -1;
        g->s.temperature = (float)d;
        g->temperature_given = g->sampling_given = 1;
    } else if (strcmp(a, "--top-k") == 0) {
        if (cli_int(cmd, a, val, 0, INT_MAX, &v)) return -1;
        g->s.top_k = (int)v;
        g->top_k_given = g->sampling_given = 1;
    } else if (strcmp(a, "--top-p") == 0) {
        if (cli_float(cmd, a, val, &d)) return -1;
        if (!(d > 0 && d <= 1)) return cli_fail(cmd, "--top-p %s: use a number in (0, 1]", val), -1;
        g->s.top_p = (float)d;
        g->top_p_given = g->sampling_given = 1;
    } else if (strcmp(a, "--min-p") == 0) {
        if (cli_float(cmd, a, val, &d)) return -1;
        if (!(d >= 0 && d <= 1)) return cli_fail(cmd, "--min-p %s: use a number in [0, 1]", val), -1;
        g->s.min_p = (float)d;
        g->min_p_given = g->sampling_given = 1;
    } else if (strcmp(a, "--repeat-penalty") == 0) {
        if (cli_float(cmd, a, val, &d)) return -1;
        if (!(d > 0 && d < 1e6)) return cli_fail(cmd, "--repeat-penalty %s: use a positive number (1 = none)", val), -1;
        g->s.repeat_penalty = (float)d; /* not sampling: a greedy choice is penalised too */
        g->penalty_given = 1;
    } else if (strcmp(a, "--repeat-last-n") == 0) {
        if (cli_int(cmd, a, val, -1, INT_MAX, &v)) return -1;
        g->s.repeat_last_n = (int)v;
        g->last_n_given = 1;
    } else if (strcmp(a, "--stop") == 0) {
        if (!val[0]) return cli_fail(cmd, "--stop: the stop string is empty"), -1;
        g->stops[g->n_stops++] = val;
    } else {
        if (cli_int(cmd, a, val, -1, LONG_MAX, &v)) return -1;
        g->s.seed = (uint64_t)v;
        g->seed_given = v >= 0; /* -1: a random seed, as when none is given */
    }
    return 1;
}

/* A seed for a run that names none: from the clock's nanoseconds, so that two runs in the same
 * second differ; within --seed's range, so that the printed seed repeats the run. */
static uint64_t clock_seed(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec) & (uint64_t)LONG_MAX;
}

void cli_sampling_apply(const cli_sampling *g, const char *cmd, vkg_generate_options *o) {
    (void)cmd;
    vkg_sampling_options *s = &o->sampling;
    if (g->n_given) o->max_tokens = (int)g->n;
    if (g->sampling_given && s->temperature <= 0) s->temperature = 1.0f; /* sampling asked for over greedy */
    if (g->temperature_given) s->temperature = g->s.temperature;
    if (g->top_k_given) s->top_k = g->s.top_k;
    if (g->top_p_given) s->top_p = g->s.top_p;
    if (g->min_p_given) s->min_p = g->s.min_p;
    if (g->penalty_given) s->repeat_penalty = g->s.repeat_penalty;
    if (g->last_n_given) s->repeat_last_n = g->s.repeat_last_n;
    if (g->ignore_eos) o->ignore_eos = 1;
    o->stops = g->stops;
    o->n_stops = g->n_stops;
    s->seed = g->seed_given ? g->s.seed : vkg_sampling_is_greedy(s) ? 0 : clock_seed();
}

void cli_sampling_print(const char *cmd, const vkg_sampling_options *so) {
    if (!vkg_sampling_is_greedy(so))
        fprintf(stderr, "vkgraph %s: sampling with temperature %g, top-k %d, top-p %g, min-p %g, seed %llu\n", cmd,
                (double)so->temperature, so->top_k, (double)so->top_p, (double)so->min_p,
                (unsigned long long)so->seed);
    if (so->repeat_penalty != 1.0f) {
        char window[48] = "the whole context";
        if (so->repeat_last_n >= 0) snprintf(window, sizeof window, "the last %d tokens", so->repeat_last_n);
        fprintf(stderr, "vkgraph %s: repetition penalty %g over %s\n", cmd, (double)so->repeat_penalty, window);
    }
}
