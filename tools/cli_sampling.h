/* The generation options that generate and chat share (-n, --temperature, --top-k, --top-p,
 * --min-p, --repeat-penalty, --repeat-last-n, --stop, --ignore-eos, --seed): parsed once here,
 * each remembered as given or not, so that a command can lay them over its own defaults
 * (generate: greedy, 50 tokens; chat: the model's generation_config.json). */
#ifndef VKG_CLI_SAMPLING_H
#define VKG_CLI_SAMPLING_H

#include "vkgraph_model.h"

#include <stdio.h>

typedef struct cli_sampling {
    long n;                              /* -n; n_given says whether it was given           */
    vkg_sampling_options s;              /* the values given (the others unread)            */
    int n_given, temperature_given, top_k_given, top_p_given, min_p_given, penalty_given, last_n_given,
        seed_given;
    int sampling_given;                  /* --temperature, --top-k, --top-p or --min-p       */
    int ignore_eos;
    const char **stops;                  /* [argc]: the --stop values, borrowed from argv   */
    int n_stops;
} cli_sampling;

/* For a command of argc arguments; 0, or 1 after printing an error. */
int cli_sampling_init(const char *cmd, cli_sampling *g, int argc);
void cli_sampling_free(cli_sampling *g);
/* Takes argv[*i] when it is one of these options (advancing *i past its value): 1 taken, 0 not
 * one of them, -1 after printing an error. */
int cli_sampling_option(cli_sampling *g, const char *cmd, int argc, char **argv, int *i);
/* The help lines of these options; n_help describes -n's default. */
void cli_sampling_usage(FILE *f, const char *n_help);
/* o (the command's defaults) with the options given laid over it: a sampling option given over
 * greedy defaults samples at temperature 1 unless --temperature says otherwise; a run that
 * samples without --seed (or --seed -1) takes its seed from the clock, printed on stderr so that
 * it can be repeated. */
void cli_sampling_apply(const cli_sampling *g, const char *cmd, vkg_generate_options *o);
/* The choice in words on stderr ("sampling with temperature 0.7, top-k 20, ..."; the penalty's
 * window); nothing for greedy without a penalty. */
void cli_sampling_print(const char *cmd, const vkg_sampling_options *s);

#endif
