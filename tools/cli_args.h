/* How options may be spelled, handled once for every command before it reads its argv:
 * "--opt=value" is split into "--opt" "value", llama.cpp's common spellings are mapped to
 * vkgraph's own (one table, in cli_args.c), and typos are answered with "did you mean". */
#ifndef VKG_CLI_ARGS_H
#define VKG_CLI_ARGS_H

#include <stddef.h>
#include <stdio.h>

/* Rewrites the argv of command cmd (argv[0] is the command's name) into a new array: every
 * "--name=value" becomes "--name" "value", and each llama.cpp spelling becomes vkgraph's.  A
 * token right after an option that always takes a value (-p, -f, -m, --ids, ...) is that value
 * and is left as it is.  0, or 1 after printing why (a llama.cpp option with no counterpart in
 * this command).  The new array lives until cli_args_free. */
int cli_args_normalize(const char *cmd, int *argc, char ***argv);
void cli_args_free(void);

/* 1 when opt (as normalized) always takes a value (-p, -m, --ids, ...): the next token is that
 * value, whatever it looks like. */
int cli_takes_value(const char *opt);

/* The closest of n names to word by edit distance, or NULL when none is close enough to be
 * the one meant. */
const char *cli_closest(const char *word, const char *const *names, int n);

/* For a command's "unknown option" branch: prints "vkgraph CMD: unknown option 'ARG'" with
 * the closest option the command's help text (usage(f) writes it) names, and says when ARG
 * was a llama.cpp spelling or the value of "--switch=value".  Returns 1 (the exit status). */
int cli_unknown_option(const char *cmd, const char *arg, void (*usage)(FILE *f));

/* A command's plain options as a table (one row each, read by cli_option_read), so that the
 * commands share one reading of values, ranges and repeats. */
typedef enum {
    CLI_SWITCH,  /* no value: *(int *)to = lo                                                   */
    CLI_TEXT,    /* a value: *(const char **)to; given twice is refused                        */
    CLI_INT,     /* a whole number in [lo, hi]: *(int *)to                                    */
    CLI_REFUSED, /* an option that does not apply here: refused, saying why                    */
    CLI_FOLDER,  /* names NULL: the one word not starting with '-' (*(const char **)to)        */
    CLI_SEED,    /* a whole number from 0 to LONG_MAX: *(uint64_t *)to                         */
} cli_option_kind;
typedef struct cli_option {
    const char *names;   /* the spellings, separated by '|': "-m|--model|--tokenizer"           */
    cli_option_kind kind;
    void *to;
    long lo, hi;
    const char *why;     /* CLI_REFUSED: the reason cli_not_applicable prints                   */
} cli_option;
/* The rows, by kind (designated, so each names only what its kind reads). */
#define CLI_OPT_SWITCH(spellings, field, value) {.names = (spellings), .kind = CLI_SWITCH, .to = (field), .lo = (value)}
#define CLI_OPT_TEXT(spellings, field) {.names = (spellings), .kind = CLI_TEXT, .to = (field)}
#define CLI_OPT_INT(spellings, field, min, max) \
    {.names = (spellings), .kind = CLI_INT, .to = (field), .lo = (min), .hi = (max)}
#define CLI_OPT_REFUSED(spellings, reason) {.names = (spellings), .kind = CLI_REFUSED, .why = (reason)}
#define CLI_OPT_FOLDER(field) {.names = NULL, .kind = CLI_FOLDER, .to = (field)}
#define CLI_OPT_SEED(spellings, field) {.names = (spellings), .kind = CLI_SEED, .to = (field)}
/* When argv[*i] is one of the n options: reads its value (advancing *i), checks and stores it
 * and returns 1, or returns -1 after printing why it is refused.  0 when it is none of them. */
int cli_option_read(const char *cmd, const cli_option *opts, size_t n, int argc, char **argv, int *i);

/* For the options no row reads, each with its value: 0 when taken, 1 after printing why the
 * value is refused, -1 when the command has no such option. */
typedef int (*cli_value_fn)(void *ctx, const char *opt, const char *value);
/* A command's whole argv read with its table: -h/--help prints usage(stdout) and returns
 * CLI_HELP_SHOWN; an option no row reads goes with its value to more (NULL: none), and one that
 * no one knows is answered by cli_unknown_option.  0 when all was read, 1 after a message. */
#define CLI_HELP_SHOWN 2
int cli_options_parse(const char *cmd, const cli_option *opts, size_t n, cli_value_fn more, void *ctx,
                      void (*usage)(FILE *f), int argc, char **argv);

#endif
