/* Checks a tokenizer against a golden table written by tools/make_tokenizer_json_golden.js from
 * Hugging Face's JavaScript tokenizers: for each case, the ids of the three special-token modes
 * and the decoded text.  Included by the tests that use it. */
#ifndef VKG_TESTS_TOKENIZER_GOLDEN_H
#define VKG_TESTS_TOKENIZER_GOLDEN_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/test_util.h"
#include "vkgraph.h"
#include "vkgraph_model.h"

/* Splits s at tabs in place; returns the number of fields (at most cap). */
static int golden_fields(char *s, char **field, int cap) {
    int n = 0;
    field[n++] = s;
    for (char *p = s; *p && n < cap; p++)
        if (*p == '\t') {
            *p = '\0';
            field[n++] = p + 1;
        }
    return n;
}

static size_t golden_unhex(const char *h, char *out) {
    size_t n = 0;
    for (; h[0] && h[1]; h += 2) {
        unsigned v;
        sscanf(h, "%2x", &v);
        out[n++] = (char)v;
    }
    return n;
}

static size_t golden_ids(const char *s, int32_t *out, size_t cap) {
    size_t n = 0;
    while (*s && n < cap) {
        out[n++] = (int32_t)strtol(s, (char **)&s, 10);
        if (*s == ',') s++;
    }
    return n;
}

static void golden_fail_ids(const char *where, const char *mode, const int32_t *got, size_t n, const int32_t *want,
                            size_t n_want) {
    char a[2048] = "", b[2048] = "";
    size_t la = 0, lb = 0;
    for (size_t i = 0; i < n && la < 2000; i++) la += (size_t)snprintf(a + la, sizeof a - la, "%s%d", i ? "," : "", (int)got[i]);
    for (size_t i = 0; i < n_want && lb < 2000; i++)
        lb += (size_t)snprintf(b + lb, sizeof b - lb, "%s%d", i ? "," : "", (int)want[i]);
    fail_msg("%s (%s): ids [%s], expected [%s]", where, mode, a, b);
}

/* Runs every case of the golden table at golden_path on t; returns the number of cases. */
static int golden_check(const vkg_tokenizer *t, const char *golden_path) {
    size_t len = 0;
    char *table = test_read_file(golden_path, &len);
    int cases = 0;
    static const unsigned modes[3] = {0, VKG_TOKENIZE_NO_SPECIAL, VKG_TOKENIZE_SPLIT_SPECIAL};
    static const char *const mode_names[3] = {"default", "add_special_tokens=false", "split_special_tokens=true"};
    for (char *line = table, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = '\0';
        if (line[0] == '#' || !line[0]) continue;
        char *f[6];
        if (golden_fields(line, f, 6) != 6) fail_msg("%s: malformed line %s", golden_path, line);
        char where[256];
        snprintf(where, sizeof where, "%s: case %s", golden_path, f[0]);
        size_t hlen = strlen(f[1]);
        char *text = malloc(hlen / 2 + 1), *want_text = malloc(strlen(f[5]) / 2 + 1);
        int32_t *want = malloc(4096 * sizeof *want);
        assert_true(text && want_text && want);
        size_t text_len = golden_unhex(f[1], text);
        int32_t *first_ids = NULL;
        size_t first_n = 0;
        for (int m = 0; m < 3; m++) {
            size_t n_want = golden_ids(f[2 + m], want, 4096);
            int32_t *ids = NULL;
            size_t n = 0;
            vkg_error err = {0};
            if (vkg_tokenizer_encode_with(t, text, text_len, modes[m], &ids, &n, &err) != VKG_OK)
                fail_msg("%s (%s): %s", where, mode_names[m], err.message);
            if (n != n_want || (n && memcmp(ids, want, n * sizeof *ids)))
                golden_fail_ids(where, mode_names[m], ids, n, want, n_want);
            if (m == 0) {
                first_ids = ids;
                first_n = n;
            } else free(ids);
        }
        char *back = NULL;
        size_t back_len = 0;
        vkg_error err = {0};
        if (vkg_tokenizer_decode(t, first_ids, first_n, &back, &back_len, &err) != VKG_OK)
            fail_msg("%s: decode: %s", where, err.message);
        size_t want_len = golden_unhex(f[5], want_text);
        if (back_len != want_len || memcmp(back, want_text, want_len))
            fail_msg("%s: decode gives \"%.*s\", expected \"%.*s\"", where, (int)back_len, back, (int)want_len,
                     want_text);
        free(back);
        free(first_ids);
        free(text);
        free(want_text);
        free(want);
        cases++;
    }
    free(table);
    return cases;
}

#endif
