#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "support/test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

double test_nmse(const float *a, const float *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - (double)b[i];
        num += d * d;
        den += (double)b[i] * (double)b[i];
    }
    return num / (den > 1e-30 ? den : 1e-30);
}

double test_max_abs_diff(const float *a, const float *b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (d > m || d != d) m = d;
    }
    return m;
}

char *mkdtemp(char *template);

char *test_tmpdir(const char *tag) {
    char buf[256];
    snprintf(buf, sizeof buf, "/tmp/vkg-test-%s-XXXXXX", tag);
    if (!mkdtemp(buf)) return NULL;
    return strdup(buf);
}

FILE *test_capture_begin(test_capture *c) {
    c->text = NULL;
    c->f = open_memstream(&c->text, &c->len);
    assert_non_null(c->f);
    return c->f;
}

const char *test_capture_end(test_capture *c) {
    fclose(c->f);
    return c->text;
}

const char *test_line_with(const char *text, const char *prefix) {
    for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (strncmp(p, prefix, strlen(prefix)) == 0) return p;
    fail_msg("no line starting with '%s' in:\n%s", prefix, text);
    return NULL;
}

const char *test_data_path(const char *rel) {
    static char path[1024];
    const char *data = getenv("VKG_TEST_DATA");
    snprintf(path, sizeof path, "%s/%s", data ? data : "data", rel);
    return path;
}

char *test_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot open %s", path);
    size_t cap = 1 << 12, used = 0;
    char *buf = malloc(cap + 1);
    assert_non_null(buf);
    while ((used += fread(buf + used, 1, cap - used, f)) == cap) {
        cap *= 2;
        buf = realloc(buf, cap + 1);
        assert_non_null(buf);
    }
    fclose(f);
    buf[used] = '\0';
    if (len) *len = used;
    return buf;
}

int test_read_ids(const char *dir_rel, int32_t *ids, int cap) {
    char rel[256];
    snprintf(rel, sizeof rel, "%s/ids.txt", dir_rel);
    FILE *f = fopen(test_data_path(rel), "r");
    assert_non_null(f);
    int n = 0, v;
    while (n < cap && fscanf(f, "%d", &v) == 1) {
        ids[n++] = v;
        if (fgetc(f) != ',') break;
    }
    fclose(f);
    return n;
}
