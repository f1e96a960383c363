/* How options may be spelled, handled once for every command before it reads its argv:
 * "--opt=value" is split into "--opt" "value", llama.cpp's common spellings are mapped to
 * vkgraph's own (one table, in cli_args.c), and typos are answered with "did you mean". */
#ifndef VKG_CLI_ARGS_H
#define VKG_CLI_ARGS_H

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

#endif
