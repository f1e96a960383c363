#include "cli_args.h"

#include "cli.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* llama.cpp's spellings that differ from vkgraph's, and what each means here.  Spellings the two
 * share need no row: -m/--model, -p/--prompt, -f/--file, -n, --seed, --threads, --top-k,
 * --top-p, --min-p, --repeat-penalty, --repeat-last-n, --stop, --ignore-eos, --interactive.
 * The first row that matches the spelling and the command counts. */
static const struct cli_alias {
    const char *given;    /* llama.cpp's spelling                                          */
    const char *meant;    /* vkgraph's; NULL: nothing here means that (refused by name)     */
    const char *command;  /* the one command the row is for; NULL: every command            */
} aliases[] = {
    {"--temp", "--temperature", NULL},
    {"-s", "--seed", NULL},
    {"-t", "--threads", NULL},
    {"--n-predict", "-n", NULL},
    {"-i", "--interactive", NULL},
    {"-c", "--ctx", "gpt2-random"}, /* the model's context, n_positions */
    {"--ctx-size", "--ctx", "gpt2-random"},
    {"-c", "--ctx", "random"}, /* max_position_embeddings, or GPT-2's n_positions */
    {"--ctx-size", "--ctx", "random"},
    {"-c", "--ctx", "generate"}, /* the KV cache, as llama-cli's -c */
    {"--ctx-size", "--ctx", "generate"},
    {"-c", "--ctx", "chat"},
    {"--ctx-size", "--ctx", "chat"},
    {"-c", "--ctx-size", "serve"}, /* each slot's KV cache, as llama-server's -c */
    {"--ctx-size", "--ctx-size", "serve"},
    {"-c", NULL, NULL},
    {"--ctx-size", NULL, NULL},
};

/* Options that take a value in every command that has them: the token after one is its value,
 * never split or renamed (so -p "-s" is the prompt "-s"). */
static const char *const value_options[] = {"-m",     "--model", "-p",       "--prompt",    "-f",      "--file",
                                            "--ids",  "--token", "--stop",   "--device",    "--trace", "--tokenizer",
                                            "-o",     "--output", "-n",      "--seed",      "--threads",
                                            "--temperature", "--top-k", "--top-p", "--dtype", "--system"};

/* What the rewritten argv holds, so messages can name what the user typed. */
enum { GIVEN_ALIAS = 1, GIVEN_SPLIT_VALUE };
typedef struct given_record {
    const char *token; /* a pointer in the new argv (each rewritten token is its own string) */
    const char *given; /* what was typed: the alias, or the whole "--switch=value"          */
    int kind;
} given_record;

static struct {
    char **argv;
    given_record *records;
    int n_records;
    char **owned; /* strings made here */
    int n_owned;
} state;

static int in_list(const char *s, const char *const *list, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(s, list[i]) == 0) return 1;
    return 0;
}

static char *own(const char *s, size_t len) {
    char *copy = malloc(len + 1);
    if (!copy) return NULL;
    memcpy(copy, s, len);
    copy[len] = '\0';
    state.owned[state.n_owned++] = copy;
    return copy;
}

static const struct cli_alias *find_alias(const char *cmd, const char *name) {
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if (strcmp(aliases[i].given, name) == 0 && (!aliases[i].command || strcmp(aliases[i].command, cmd) == 0))
            return &aliases[i];
    return NULL;
}

/* "--name=value": a long option (letters, digits, dashes) with its value attached. */
static const char *attached_value(const char *a) {
    if (a[0] != '-' || a[1] != '-' || a[2] == '\0' || a[2] == '=') return NULL;
    const char *eq = strchr(a, '=');
    return eq ? eq + 1 : NULL;
}

int cli_args_normalize(const char *cmd, int *argc, char ***argv) {
    int n = *argc;
    char **in = *argv;
    /* Each token becomes at most two. */
    state.argv = calloc((size_t)(2 * n + 1), sizeof *state.argv);
    state.records = calloc((size_t)(2 * n + 1), sizeof *state.records);
    state.owned = calloc((size_t)(2 * n + 1), sizeof *state.owned);
    if (!state.argv || !state.records || !state.owned) return cli_fail(cmd, "out of memory");
    int out = 0;
    state.argv[out++] = in[0];
    for (int i = 1; i < n; i++) {
        const char *a = in[i];
        const char *value = attached_value(a);
        size_t name_len = value ? (size_t)(value - 1 - a) : strlen(a);
        char name[64];
        if (name_len >= sizeof name) { /* no option is that long: leave it for the command to refuse */
            state.argv[out++] = in[i];
            continue;
        }
        memcpy(name, a, name_len);
        name[name_len] = '\0';
        const struct cli_alias *alias = a[0] == '-' ? find_alias(cmd, name) : NULL;
        if (alias && !alias->meant)
            return cli_fail(cmd, "%s is llama.cpp's context size, which vkgraph %s has no use for: a model's "
                            "context is in its config.json, max_position_embeddings (n_positions for GPT-2), "
                            "which vkgraph random sets with --ctx", name, cmd);
        const char *meant = alias ? alias->meant : name;
        if (!alias && !value) {
            state.argv[out++] = in[i];
        } else {
            char *token = own(meant, strlen(meant));
            if (!token) return cli_fail(cmd, "out of memory");
            if (alias) state.records[state.n_records++] = (given_record){token, alias->given, GIVEN_ALIAS};
            state.argv[out++] = token;
        }
        if (value) {
            /* A pointer into the original, so it is its own string; remembered in case the
             * option takes no value and the command finds this left over. */
            state.argv[out] = (char *)value;
            state.records[state.n_records++] = (given_record){state.argv[out], a, GIVEN_SPLIT_VALUE};
            out++;
        } else if (in_list(meant, value_options, sizeof value_options / sizeof value_options[0]) && i + 1 < n) {
            state.argv[out++] = in[++i]; /* the value, as it was typed */
        }
    }
    state.argv[out] = NULL;
    *argc = out;
    *argv = state.argv;
    return 0;
}

int cli_takes_value(const char *opt) {
    return in_list(opt, value_options, sizeof value_options / sizeof value_options[0]);
}

void cli_args_free(void) {
    for (int i = 0; i < state.n_owned; i++) free(state.owned[i]);
    free(state.owned);
    free(state.records);
    free(state.argv);
    memset(&state, 0, sizeof state);
}

static const given_record *record_of(const char *token) {
    for (int i = 0; i < state.n_records; i++)
        if (state.records[i].token == token) return &state.records[i];
    return NULL;
}

/* Levenshtein distance; words longer than 63 bytes are far from everything. */
static size_t edit_distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63) return (size_t)-1;
    size_t row[64];
    for (size_t j = 0; j <= lb; j++) row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

const char *cli_closest(const char *word, const char *const *names, int n) {
    /* Close enough: one edit in a short word, up to a third of a longer one's characters. */
    size_t len = strlen(word), allowed = len / 3 < 1 ? 1 : len / 3 > 3 ? 3 : len / 3;
    const char *best = NULL;
    size_t best_d = allowed + 1;
    for (int i = 0; i < n; i++) {
        size_t d = edit_distance(word, names[i]);
        if (d < best_d) best = names[i], best_d = d;
    }
    return best;
}

/* The options a help text names: "-x" and "--name" words at the start of a line or after a
 * space, bracket, bar or comma.  Returns how many were stored (pointers into text, each cut
 * with a NUL). */
static int options_in_help(char *text, const char **names, int cap) {
    int n = 0;
    for (char *p = text; *p && n < cap; p++) {
        int starts = p == text || strchr(" \t\n[(|,", p[-1]);
        const char *rest = p[1] == '-' ? p + 2 : p + 1;
        if (*p != '-' || !starts || !((*rest >= 'a' && *rest <= 'z') || (*rest >= 'A' && *rest <= 'Z'))) continue;
        char *end = p + 1;
        while ((*end >= 'a' && *end <= 'z') || (*end >= 'A' && *end <= 'Z') || (*end >= '0' && *end <= '9') ||
               *end == '-')
            end++;
        char stop = *end;
        *end = '\0';
        names[n++] = p;
        if (!stop) break;
        p = end;
    }
    return n;
}

int cli_unknown_option(const char *cmd, const char *arg, void (*usage)(FILE *f)) {
    const given_record *r = record_of(arg);
    if (r && r->kind == GIVEN_SPLIT_VALUE)
        return cli_fail(cmd, "%.*s takes no value (given '%s'; see vkgraph %s --help)", (int)(arg - 1 - r->given),
                        r->given, r->given, cmd);
    if (r && r->kind == GIVEN_ALIAS)
        return cli_fail(cmd, "unknown option '%s' (llama.cpp's spelling of %s, which vkgraph %s does not take; see "
                        "vkgraph %s --help)", r->given, arg, cmd, cmd);
    const char *suggestion = NULL;
    char *help = NULL;
    size_t help_len = 0;
    FILE *f = arg[0] == '-' && usage ? open_memstream(&help, &help_len) : NULL;
    if (f) {
        usage(f);
        fclose(f);
        const char *names[256];
        int n = help ? options_in_help(help, names, 256) : 0;
        suggestion = cli_closest(arg, names, n);
    }
    int rc = suggestion ? cli_fail(cmd, "unknown option '%s'; did you mean '%s'? (see vkgraph %s --help)", arg,
                                   suggestion, cmd)
                        : cli_fail(cmd, "unknown option '%s' (see vkgraph %s --help)", arg, cmd);
    free(help);
    return rc;
}

/* 1 when arg is one of the '|'-separated spellings in names. */
static int spelled(const char *names, const char *arg) {
    size_t len = strlen(arg);
    for (const char *p = names; *p;) {
        const char *bar = strchr(p, '|');
        size_t n = bar ? (size_t)(bar - p) : strlen(p);
        if (n == len && strncmp(p, arg, n) == 0) return 1;
        p += n + (bar != NULL);
    }
    return 0;
}

int cli_option_read(const char *cmd, const cli_option *opts, size_t n, int argc, char **argv, int *i) {
    const char *a = argv[*i];
    for (size_t k = 0; k < n; k++) {
        const cli_option *o = &opts[k];
        if (o->kind == CLI_FOLDER) {
            if (a[0] == '-') continue;
            const char **dir = o->to;
            if (*dir) return -cli_fail(cmd, "one folder please: '%s' and '%s' given", *dir, a);
            *dir = a;
            return 1;
        }
        if (!spelled(o->names, a)) continue;
        if (o->kind == CLI_SWITCH) {
            *(int *)o->to = (int)o->lo;
            return 1;
        }
        if (o->kind == CLI_REFUSED) return -cli_not_applicable(cmd, a, o->why);
        if (o->kind == CLI_TEXT && *(const char **)o->to) return -cli_fail(cmd, "%s given twice", a);
        const char *val = cli_value(cmd, argc, argv, i);
        if (!val) return -1;
        if (o->kind == CLI_TEXT) {
            *(const char **)o->to = val;
            return 1;
        }
        long v = 0;
        if (o->kind == CLI_SEED) {
            if (cli_int(cmd, a, val, 0, LONG_MAX, &v)) return -1;
            *(uint64_t *)o->to = (uint64_t)v;
            return 1;
        }
        if (cli_int(cmd, a, val, o->lo, o->hi, &v)) return -1;
        *(int *)o->to = (int)v;
        return 1;
    }
    return 0;
}

int cli_options_parse(const char *cmd, const cli_option *opts, size_t n, cli_value_fn more, void *ctx,
                      void (*usage)(FILE *f), int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return CLI_HELP_SHOWN;
        }
        const int read = cli_option_read(cmd, opts, n, argc, argv, &i);
        if (read < 0) return 1;
        if (read) continue;
        if (!more || a[0] != '-') return cli_unknown_option(cmd, a, usage);
        const char *val = cli_value(cmd, argc, argv, &i);
        if (!val) return 1;
        const int taken = more(ctx, a, val);
        if (taken < 0) return cli_unknown_option(cmd, a, usage);
        if (taken) return 1;
    }
    return 0;
}
