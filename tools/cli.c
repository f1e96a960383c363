#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

int cli_fail(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "vkgraph %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 1;
}

const char *cli_value(const char *cmd, int argc, char **argv, int *i) {
    if (*i + 1 >= argc) {
        cli_fail(cmd, "option %s needs a value", argv[*i]);
        return NULL;
    }
    return argv[++*i];
}

int cli_int(const char *cmd, const char *opt, const char *text, long lo, long hi, long *out) {
    char *end = NULL;
    errno = 0;
    long v = strtol(text, &end, 10);
    /* A bound that only guards the arithmetic is not shown as if it were a limit. */
    const int open_ended = hi >= (1L << 30);
    if ((errno == ERANGE && v > 0) || (!errno && end != text && !*end && v > hi && open_ended))
        return cli_fail(cmd, "%s: '%s' is too large (at most %ld)", opt, text, hi);
    if (errno || end == text || *end || v < lo || v > hi) {
        if (open_ended) return cli_fail(cmd, "%s: '%s' is not a whole number of %ld or more", opt, text, lo);
        return cli_fail(cmd, "%s: '%s' is not a whole number from %ld to %ld", opt, text, lo, hi);
    }
    *out = v;
    return 0;
}

int cli_float(const char *cmd, const char *opt, const char *text, double *out) {
    char *end = NULL;
    errno = 0;
    double v = strtod(text, &end);
    if (errno || end == text || *end) return cli_fail(cmd, "%s: '%s' is not a number", opt, text);
    *out = v;
    return 0;
}

int cli_check_extension(const char *cmd, const char *opt, const char *path, const char *ext, const char *format) {
    size_t n = strlen(path), e = strlen(ext);
    if (n > e && strcasecmp(path + n - e, ext) == 0 && path[n - e - 1] != '/') return 0;
    return cli_fail(cmd, "%s %s: writes %s; name the file %s", opt, path, format, ext);
}

/* What --profile, --trace and --group-by asked for: options of the whole command line, set once in main. */
static struct {
    int on;
    const char *trace;
    unsigned group_by;  /* VKG_PROFILE_BY_* */
} profile_request;

/* --group-by layer, op, or both ("layer,op"). */
static int parse_group_by(const char *cmd, const char *spec) {
    for (const char *p = spec;; p++) {
        size_t n = strcspn(p, ",");
        if (n == 5 && strncmp(p, "layer", 5) == 0) profile_request.group_by |= VKG_PROFILE_BY_LAYER;
        else if (n == 2 && strncmp(p, "op", 2) == 0) profile_request.group_by |= VKG_PROFILE_BY_OP;
        else return cli_fail(cmd, "--group-by: '%.*s' is not a grouping (use layer, op, or layer,op)", (int)n, p);
        p += n;
        if (!*p) return 0;
    }
}

int cli_take_common_options(int *argc, char **argv, int profiles) {
    int out = 0;
    const char *given = NULL;
    for (int i = 0; i < *argc; i++) {
        if (strcmp(argv[i], "--profile") == 0) {
            profile_request.on = 1;
            given = argv[i];
        } else if (strcmp(argv[i], "--trace") == 0) {
            if (i + 1 >= *argc) return cli_fail(argv[0], "--trace needs a file name");
            profile_request.on = 1;
            given = argv[i];
            profile_request.trace = argv[++i];
            if (cli_check_extension(argv[0], "--trace", profile_request.trace, ".json", "a Chrome trace (JSON)"))
                return 1;
        } else if (strcmp(argv[i], "--group-by") == 0) {
            if (i + 1 >= *argc) return cli_fail(argv[0], "--group-by needs layer, op, or layer,op");
            given = argv[i];
            if (parse_group_by(argv[0], argv[++i])) return 1;
            profile_request.on = 1;
        } else {
            argv[out++] = argv[i];
            if (i > 0 && cli_takes_value(argv[i]) && i + 1 < *argc) argv[out++] = argv[++i]; /* -p "--profile" */
        }
    }
    *argc = out;
    if (given && !profiles)
        return cli_not_applicable(argv[0], given, "this command runs no graph, so there is no step to time");
    if (profile_request.on)
        return cli_check_output(argv[0], profile_request.trace ? "--trace" : "--profile (its Chrome trace)",
                                profile_request.trace ? profile_request.trace : CLI_TRACE_DEFAULT);
    return 0;
}

int cli_check_output(const char *cmd, const char *opt, const char *path) {
    errno = 0;
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0) { /* new: it can be made; made for real when written */
        close(fd);
        unlink(path);
        return 0;
    }
    if (errno == EEXIST) {
        struct stat sb;
        if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) errno = EISDIR;
        else if ((fd = open(path, O_WRONLY | O_CLOEXEC)) >= 0) {
            close(fd);
            return 0;
        }
    }
    return cli_fail(cmd, "%s %s: cannot write: %s", opt, path, strerror(errno));
}

int cli_check_threads(const char *cmd, long threads, vkg_device *dev) {
    if (threads <= 0 || !dev || vkg_device_is_cpu(dev)) return 0;
    return cli_fail(cmd, "--threads %ld: sets the CPU executor's threads, and the device is %s: give --device cpu "
                    "to run on the CPU, or leave --threads out", threads, vkg_device_name(dev));
}

int cli_unknown_value(const char *cmd, const char *opt, const char *value, const char *const *names, int n) {
    const char *meant = cli_closest(value, names, n);
    fprintf(stderr, "vkgraph %s: %s '%s' is unknown", cmd, opt, value);
    if (meant) fprintf(stderr, "; did you mean '%s'?", meant);
    fprintf(stderr, " (one of:");
    for (int i = 0; i < n; i++) fprintf(stderr, " %s", names[i]);
    fprintf(stderr, ")\n");
    return 1;
}

int cli_not_applicable(const char *cmd, const char *opt, const char *why) {
    return cli_fail(cmd, "%s does not apply to vkgraph %s: %s", opt, cmd, why);
}

static int abandoned_work; /* a device closed with work still running on it */

void cli_close_device(const char *cmd, vkg_device *dev) {
    if (dev && profile_request.on) {
        const char *path = profile_request.trace ? profile_request.trace : CLI_TRACE_DEFAULT;
        vkg_error err = {0};
        vkg_device_profile_print(dev, profile_request.group_by, stderr);
        if (vkg_device_profile_write_trace(dev, path, &err) != VKG_OK) {
            cli_fail(cmd, "%s", err.message);
            cli_note_output_failure(); /* the results are out, but what was asked for is not */
        } else fprintf(stderr, "vkgraph %s: Chrome trace written to %s (open in chrome://tracing or Perfetto)\n", cmd, path);
    }
    if (vkg_device_has_abandoned_work(dev)) abandoned_work = 1;
    vkg_device_free(dev);
}

int cli_device_work_abandoned(void) { return abandoned_work; }

int cli_open_device(const char *cmd, const char *spec, int threads, vkg_device **dev) {
    vkg_device_options o = {.cpu_threads = threads, .profile = profile_request.on};
    if (cli_device_options_from_env(cmd, &o)) return 1;
    vkg_error err = {0};
    if (vkg_device_open(spec, &o, dev, &err) != VKG_OK) return cli_fail(cmd, "%s", err.message);
    return 0;
}

char *cli_read_file(const char *cmd, const char *path, size_t *len) {
    errno = 0;
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (!f) {
        cli_fail(cmd, "cannot read %s: %s", path, strerror(errno));
        return NULL;
    }
    /* Grows to at most one byte past the bound: reading that byte is how an overlong file shows. */
    const size_t limit = CLI_PROMPT_MAX_BYTES + 1;
    size_t cap = 1 << 16, used = 0;
    int too_long = 0, why = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        size_t want = cap - used, got = fread(buf + used, 1, want, f);
        used += got;
        if (used > CLI_PROMPT_MAX_BYTES) {
            too_long = 1;
            break;
        }
        if (got < want) break;
        size_t bigger_cap = 2 * cap < limit ? 2 * cap : limit;
        char *bigger = realloc(buf, bigger_cap + 1);
        if (!bigger) {
            free(buf);
            buf = NULL;
            why = ENOMEM;
            break;
        }
        buf = bigger;
        cap = bigger_cap;
    }
    if (!buf && !why) why = ENOMEM;
    if (buf && ferror(f)) why = errno ? errno : EIO; /* keep fread's errno: EISDIR says more than EIO */
    int failed = !buf || why || too_long;
    if (f != stdin) fclose(f);
    if (failed) {
        free(buf);
        if (too_long)
            cli_fail(cmd, "%s: more than %zu MiB; a prompt file is read up to %zu MiB (64 MiB of text is far "
                     "more tokens than any model's context holds)", path, CLI_PROMPT_MAX_BYTES >> 20,
                     CLI_PROMPT_MAX_BYTES >> 20);
        else cli_fail(cmd, "cannot read %s: %s", path, strerror(why));
        return NULL;
    }
    buf[used] = '\0';
    *len = used;
    return buf;
}

/* The one grammar for a list of ids, read by every option that takes ids: integers 0 to 2^31 - 1
 * in decimal digits, separated by a comma (spaces around it allowed) or by spaces, the whole
 * optionally in brackets, spaces before and after allowed: "1,2,3", "1 2 3", "[1, 2, 3]" (what
 * `tokenize` and `generate --ids-out` print).  Nothing else is guessed at: an empty item ("1,,2",
 * "1,2,", ",1"), a sign, or an unclosed bracket is refused with its position (1-based
 * characters), since a silently dropped or merged id is a wrong answer.  An empty list ("", "[]")
 * is refused too: every command that takes ids needs at least one. */
static int ids_fail(const char *cmd, const char *opt, const char *spec, const char *at, const char *what) {
    char where[40] = "at the end";
    if (*at) snprintf(where, sizeof where, "at character %zu", (size_t)(at - spec) + 1);
    if (strcmp(what, "not a token id") == 0) {
        size_t shown = strcspn(at, ", ]\t\n");
        return cli_fail(cmd, "%s \"%s\": %s: \"%.*s\" is not a token id (expected ids such as 1,2,3, 1 2 3 or "
                        "[1, 2, 3])", opt, spec, where, (int)(shown ? shown : 1), at);
    }
    return cli_fail(cmd, "%s \"%s\": %s: %s (expected ids such as 1,2,3, 1 2 3 or [1, 2, 3])", opt, spec, where,
                    what);
}

static int is_space(char ch) { return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r'; }

static const char *skip_spaces(const char *p) {
    while (is_space(*p)) p++;
    return p;
}

int cli_parse_ids(const char *cmd, const char *opt, const char *spec, int32_t **ids, size_t *n) {
    size_t cap = strlen(spec) / 2 + 1, count = 0; /* each id takes 2 characters but the last */
    int32_t *out = malloc(cap * sizeof *out);
    if (!out) return cli_fail(cmd, "out of memory");
    const char *p = skip_spaces(spec);
    int bracket = *p == '[', rc = 0;
    if (bracket) p = skip_spaces(p + 1);
    if (*p == '\0' || (bracket && *p == ']')) {
        rc = (*p == '\0' && bracket) ? ids_fail(cmd, opt, spec, p, "\"[\" is not closed by \"]\"")
                                     : cli_fail(cmd, "%s: no token ids given", opt);
        goto done;
    }
    for (;;) {
        if (*p < '0' || *p > '9') {
            rc = ids_fail(cmd, opt, spec, p,
                          *p == ',' || *p == ']' || *p == '\0' ? "a token id is missing" : "not a token id");
            goto done;
        }
        const char *start = p;
        int64_t v = 0;
        while (*p >= '0' && *p <= '9' && v <= INT32_MAX) v = v * 10 + (*p++ - '0');
        if (v > INT32_MAX || (*p != ',' && *p != ']' && *p != '\0' && !is_space(*p))) {
            rc = ids_fail(cmd, opt, spec, start, "not a token id");
            goto done;
        }
        out[count++] = (int32_t)v;
        const char *after = p;
        p = skip_spaces(p);
        if (*p == ',') {
            p = skip_spaces(p + 1);
            continue;
        }
        if (*p >= '0' && *p <= '9' && p != after) continue; /* separated by spaces */
        if (*p == ']' && !bracket) {
            rc = ids_fail(cmd, opt, spec, p, "\"]\" without \"[\"");
            goto done;
        }
        if (*p == '\0' && bracket) {
            rc = ids_fail(cmd, opt, spec, p, "\"[\" is not closed by \"]\"");
            goto done;
        }
        if (*p == ']') p = skip_spaces(p + 1);
        break;
    }
    if (*p) rc = ids_fail(cmd, opt, spec, p, "unexpected text after the ids");
done:
    if (rc) {
        free(out);
        return rc;
    }
    *ids = out;
    *n = count;
    return 0;
}

void cli_note_context(const char *cmd, int asked, int n_ctx, int model_ctx, const char *hint, const vkg_device *dev) {
    if (asked == 0 && n_ctx < model_ctx)
        fprintf(stderr, "vkgraph %s: note: a KV cache of %d positions: the model's %d do not fit %s (%s)\n", cmd,
                n_ctx, model_ctx, dev ? vkg_device_name(dev) : "the portable limits", hint);
}

const char *cli_memory_hint(vkg_status st, const char *hint) {
    return st == VKG_ERR_OUT_OF_DEVICE_MEMORY || st == VKG_ERR_OUT_OF_MEMORY ? hint : "";
}
