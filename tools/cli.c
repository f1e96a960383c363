#include "cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    if (errno || end == text || *end || v < lo || v > hi)
        return cli_fail(cmd, "%s: '%s' is not a whole number from %ld to %ld", opt, text, lo, hi);
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

int cli_open_device(const char *cmd, const char *spec, int threads, vkg_device **dev) {
    vkg_device_options o = {.cpu_threads = threads};
    const char *v = getenv("VKG_VALIDATION");
    o.validation = v && strcmp(v, "1") == 0;
    vkg_error err = {0};
    if (vkg_device_open(spec, &o, dev, &err) != VKG_OK) return cli_fail(cmd, "%s", err.message);
    return 0;
}
