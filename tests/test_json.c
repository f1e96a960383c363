/* The strict JSON parser: values, escapes, accessors, every malformed input we could think of
 * (each must fail with a position and no crash), and the speed a GPT-2 vocabulary needs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static vkg_json *parse_ok(const char *text) {
    vkg_json *root = NULL;
    vkg_error err = {0};
    vkg_status st = vkg_json_parse(text, strlen(text), &root, &err);
    if (st != VKG_OK) fail_msg("parse of <%s> failed: %s", text, err.message);
    assert_non_null(root);
    return root;
}

static double parse_number(const char *text) {
    vkg_json *root = parse_ok(text);
    assert_int_equal(vkg_json_type_of(root), VKG_JSON_NUMBER);
    double d = vkg_json_number(root);
    vkg_json_free(root);
    return d;
}

static void test_scalars(void **state) {
    (void)state;
    vkg_json *v = parse_ok(" null ");
    assert_int_equal(vkg_json_type_of(v), VKG_JSON_NULL);
    vkg_json_free(v);
    v = parse_ok("true");
    assert_int_equal(vkg_json_type_of(v), VKG_JSON_BOOL);
    assert_int_equal(vkg_json_bool(v), 1);
    vkg_json_free(v);
    v = parse_ok("\t\r\nfalse\n");
    assert_int_equal(vkg_json_bool(v), 0);
    vkg_json_free(v);

    assert_true(parse_number("0") == 0.0);
    assert_true(signbit(parse_number("-0")));
    assert_true(parse_number("42") == 42.0);
    assert_true(parse_number("-17") == -17.0);
    assert_true(parse_number("1.5") == 1.5);
    assert_true(parse_number("-0.25") == -0.25);
    assert_true(parse_number("1e3") == 1000.0);
    assert_true(parse_number("1E+2") == 100.0);
    assert_true(parse_number("25e-2") == 0.25);
    assert_true(parse_number("1e-05") == 1e-5);
    assert_true(parse_number("123456789012345") == 123456789012345.0);
    assert_true(parse_number("12345678901234567890") == 12345678901234567890.0);
    assert_true(parse_number("1.7976931348623157e308") == 1.7976931348623157e308);
    assert_true(parse_number("5e-324") == 5e-324);
    assert_true(parse_number("1e-400") == 0.0); /* underflow rounds to zero; only overflow fails */
    assert_true(parse_number("0.1") == 0.1);
    assert_true(parse_number("50256") == 50256.0);

    v = parse_ok("\"\"");
    size_t len = 99;
    const char *s = vkg_json_string(v, &len);
    assert_non_null(s);
    assert_int_equal(len, 0);
    assert_string_equal(s, "");
    vkg_json_free(v);
}

static void test_escapes(void **state) {
    (void)state;
    vkg_json *v = parse_ok("\"a\\\"b\\\\c\\/d\\be\\ff\\ng\\rh\\ti\"");
    size_t len;
    const char *s = vkg_json_string(v, &len);
    assert_string_equal(s, "a\"b\\c/d\be\ff\ng\rh\ti");
    assert_int_equal(len, strlen("a\"b\\c/d\be\ff\ng\rh\ti"));
    vkg_json_free(v);

    /* \u escapes: 1, 2, 3 and 4 byte UTF-8, upper and lower case hex, and a surrogate pair. */
    v = parse_ok("\"\\u0041\\u00e9\\u00E9\\u20AC\\uD83D\\uDE00\\u0120x\\uDBFF\\uDFFF\"");
    s = vkg_json_string(v, &len);
    const char expect[] = "A\xC3\xA9\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\xC4\xA0x\xF4\x8F\xBF\xBF";
    assert_int_equal(len, sizeof expect - 1);
    assert_memory_equal(s, expect, len);
    vkg_json_free(v);

    /* \u0000 gives a NUL inside the string; the length tells the truth. */
    v = parse_ok("{\"a\\u0000b\": \"x\\u0000y\"}");
    const char *key = vkg_json_key_at(v, 0, &len);
    assert_int_equal(len, 3);
    assert_memory_equal(key, "a\0b", 3);
    s = vkg_json_string(vkg_json_at(v, 0), &len);
    assert_int_equal(len, 3);
    assert_memory_equal(s, "x\0y", 4); /* and NUL-terminated after the content */
    assert_non_null(vkg_json_get_n(v, "a\0b", 3));
    assert_null(vkg_json_get(v, "a"));
    vkg_json_free(v);

    /* Raw UTF-8 passes through unchanged. */
    v = parse_ok("\"h\xC3\xA9llo \xE2\x82\xAC \xF0\x9F\x98\x80\"");
    s = vkg_json_string(v, &len);
    assert_string_equal(s, "h\xC3\xA9llo \xE2\x82\xAC \xF0\x9F\x98\x80");
    vkg_json_free(v);

    /* A UTF-8 byte order mark before the value is skipped (RFC 8259 8.1). */
    v = parse_ok("\xEF\xBB\xBF[1]");
    assert_int_equal(vkg_json_length(v), 1);
    vkg_json_free(v);
}

static void test_nested_and_accessors(void **state) {
    (void)state;
    vkg_json *v = parse_ok("{\"a\": [1, {\"b\": null}, \"s\"], \"c\": {\"d\": [[]]}, \"e\": {}, \"f\": true}");
    assert_int_equal(vkg_json_type_of(v), VKG_JSON_OBJECT);
    assert_int_equal(vkg_json_length(v), 4);
    size_t len;
    assert_string_equal(vkg_json_key_at(v, 0, &len), "a");
    assert_string_equal(vkg_json_key_at(v, 3, &len), "f");
    assert_null(vkg_json_key_at(v, 4, &len));
    const vkg_json *a = vkg_json_get(v, "a");
    assert_int_equal(vkg_json_type_of(a), VKG_JSON_ARRAY);
    assert_int_equal(vkg_json_length(a), 3);
    assert_true(vkg_json_number(vkg_json_at(a, 0)) == 1.0);
    assert_int_equal(vkg_json_type_of(vkg_json_get(vkg_json_at(a, 1), "b")), VKG_JSON_NULL);
    assert_non_null(vkg_json_get(vkg_json_at(a, 1), "b"));
    assert_string_equal(vkg_json_string(vkg_json_at(a, 2), NULL), "s");
    assert_null(vkg_json_at(a, 3));
    const vkg_json *d = vkg_json_get(vkg_json_get(v, "c"), "d");
    assert_int_equal(vkg_json_length(d), 1);
    assert_int_equal(vkg_json_type_of(vkg_json_at(d, 0)), VKG_JSON_ARRAY);
    assert_int_equal(vkg_json_length(vkg_json_at(d, 0)), 0);
    assert_int_equal(vkg_json_length(vkg_json_get(v, "e")), 0);
    assert_null(vkg_json_get(vkg_json_get(v, "e"), "x"));
    assert_int_equal(vkg_json_bool(vkg_json_get(v, "f")), 1);
    assert_null(vkg_json_get(v, "missing"));
    assert_true(vkg_json_at(v, 3) == vkg_json_get(v, "f"));

    /* Wrong types and NULL give the neutral answers. */
    assert_null(vkg_json_get(a, "a"));
    assert_null(vkg_json_get(NULL, "a"));
    assert_null(vkg_json_string(a, &len));
    assert_int_equal(len, 0);
    assert_true(vkg_json_number(a) == 0.0);
    assert_int_equal(vkg_json_bool(a), 0);
    assert_int_equal(vkg_json_length(vkg_json_at(a, 0)), 0);
    assert_int_equal(vkg_json_type_of(NULL), VKG_JSON_NULL);
    assert_string_equal(vkg_json_type_name(VKG_JSON_OBJECT), "object");
    vkg_json_free(v);
    vkg_json_free(NULL);
}

static void test_large_object_lookup(void **state) {
    (void)state;
    /* Above the index threshold, lookups go through the hash table: check every key and misses. */
    char text[8192];
    size_t n = 0;
    n += (size_t)snprintf(text + n, sizeof text - n, "{");
    for (int i = 0; i < 300; i++)
        n += (size_t)snprintf(text + n, sizeof text - n, "%s\"k%d\":%d", i ? "," : "", i, i * 3);
    snprintf(text + n, sizeof text - n, "}");
    vkg_json *v = parse_ok(text);
    assert_int_equal(vkg_json_length(v), 300);
    for (int i = 0; i < 300; i++) {
        char key[16];
        snprintf(key, sizeof key, "k%d", i);
        const vkg_json *e = vkg_json_get(v, key);
        assert_non_null(e);
        assert_true(vkg_json_number(e) == i * 3.0);
    }
    assert_null(vkg_json_get(v, "k300"));
    assert_null(vkg_json_get(v, ""));
    vkg_json_free(v);
}

static void test_depth_limit(void **state) {
    (void)state;
    char text[2 * (VKG_JSON_MAX_DEPTH + 1) + 1];
    for (int i = 0; i < VKG_JSON_MAX_DEPTH; i++) {
        text[i] = '[';
        text[VKG_JSON_MAX_DEPTH + i] = ']';
    }
    vkg_json *v = NULL;
    vkg_error err = {0};
    assert_int_equal(vkg_json_parse(text, 2 * VKG_JSON_MAX_DEPTH, &v, &err), VKG_OK);
    vkg_json_free(v);
    for (int i = 0; i <= VKG_JSON_MAX_DEPTH; i++) {
        text[i] = '[';
        text[VKG_JSON_MAX_DEPTH + 1 + i] = ']';
    }
    assert_int_equal(vkg_json_parse(text, 2 * (VKG_JSON_MAX_DEPTH + 1), &v, &err), VKG_ERR_FORMAT);
    assert_null(v);
    assert_non_null(strstr(err.message, "nested deeper than 256"));
    assert_non_null(strstr(err.message, "column 257"));
}

typedef struct bad_case {
    const char *text;
    const char *where; /* "line L, column C" expected in the message */
    const char *what;  /* a substring naming the problem             */
} bad_case;

static const bad_case bad_cases[] = {
    {"", "line 1, column 1", "found end of input"},
    {"   \n  ", "line 2, column 3", "found end of input"},
    {"[1, 2", "line 1, column 6", "expected ',' or ']'"},
    {"[1 2]", "line 1, column 4", "expected ',' or ']' after an array element, found '2'"},
    {"[1,]", "line 1, column 4", "trailing comma before ']'"},
    {"[,1]", "line 1, column 2", "expected a value"},
    {"{\"a\":1,}", "line 1, column 8", "trailing comma before '}'"},
    {"{\"a\" 1}", "line 1, column 6", "expected ':' after object key \"a\""},
    {"{\"a\":}", "line 1, column 6", "expected a value"},
    {"{a:1}", "line 1, column 2", "expected a string key"},
    {"{1:1}", "line 1, column 2", "expected a string key"},
    {"{\"a\":1 \"b\":2}", "line 1, column 8", "expected ',' or '}'"},
    {"{\"a\":1", "line 1, column 7", "found end of input"},
    {"{\"a\":1, \"a\":2}", "line 1, column 9", "duplicate key \"a\""},
    {"]", "line 1, column 1", "found ']'"},
    {"1 2", "line 1, column 3", "after the JSON value"},
    {"{} x", "line 1, column 4", "after the JSON value"},
    {"nul", "line 1, column 1", "did you mean 'null'"},
    {"tru", "line 1, column 1", "did you mean 'true'"},
    {"fals", "line 1, column 1", "did you mean 'false'"},
    {"True", "line 1, column 1", "expected a value"},
    {"nullx", "line 1, column 5", "after the JSON value"},
    {"NaN", "line 1, column 1", "expected a value"},
    {"Infinity", "line 1, column 1", "expected a value"},
    {"+1", "line 1, column 1", "found '+'"},
    {"-", "line 1, column 2", "expected a digit after '-'"},
    {"-a", "line 1, column 2", "expected a digit after '-'"},
    {"01", "line 1, column 1", "leading zeros"},
    {"-012", "line 1, column 1", "leading zeros"},
    {"1.", "line 1, column 3", "digit after the decimal point"},
    {".5", "line 1, column 1", "found '.'"},
    {"1.e5", "line 1, column 3", "digit after the decimal point"},
    {"1e", "line 1, column 3", "digit in the exponent"},
    {"1e+", "line 1, column 4", "digit in the exponent"},
    {"0x10", "line 1, column 2", "after the JSON value"},
    {"1e400", "line 1, column 1", "out of the range of a double"},
    {"-1e400", "line 1, column 1", "out of the range of a double"},
    {"\"abc", "line 1, column 1", "unterminated string"},
    {"\"abc\\\"", "line 1, column 1", "unterminated string"},
    {"\"ab\\", "line 1, column 1", "unterminated string"},
    {"\"a\nb\"", "line 1, column 3", "control character 0x0A"},
    {"\"a\tb\"", "line 1, column 3", "control character 0x09"},
    {"\"\\x\"", "line 1, column 2", "invalid escape '\\x'"},
    {"\"\\'\"", "line 1, column 2", "invalid escape"},
    {"\"\\u12\"", "line 1, column 2", "4 hex digits"},
    {"\"\\u12G4\"", "line 1, column 2", "4 hex digits"},
    {"\"\\uD800\"", "line 1, column 2", "high surrogate \\uD800 is not followed"},
    {"\"\\uD800x\"", "line 1, column 2", "not followed by a low surrogate"},
    {"\"\\uD800\\u0041\"", "line 1, column 2", "not followed by a low surrogate"},
    {"\"\\uD800\\uD800\"", "line 1, column 2", "not followed by a low surrogate"},
    {"\"\\uDC00\"", "line 1, column 2", "lone low surrogate \\uDC00"},
    {"\"\\uD83D\\uDE0\"", "line 1, column 2", "not followed by a low surrogate"},
    {"\"\x80\"", "line 1, column 2", "invalid UTF-8 byte 0x80"},
    {"\"\xC0\xAF\"", "line 1, column 2", "invalid UTF-8 byte 0xC0"},       /* overlong '/'  */
    {"\"\xE0\x80\xAF\"", "line 1, column 2", "invalid UTF-8 byte 0xE0"},   /* overlong      */
    {"\"\xED\xA0\x80\"", "line 1, column 2", "invalid UTF-8 byte 0xED"},   /* encoded U+D800 */
    {"\"\xF4\x90\x80\x80\"", "line 1, column 2", "invalid UTF-8 byte 0xF4"}, /* > U+10FFFF   */
    {"\"\xF5\x80\x80\x80\"", "line 1, column 2", "invalid UTF-8 byte 0xF5"},
    {"\"\xC3\"", "line 1, column 2", "invalid UTF-8"},                       /* truncated    */
    {"\"\xE2\x82\"", "line 1, column 2", "invalid UTF-8"},
    {"\"\xC3\xA9\xFF\"", "line 1, column 3", "invalid UTF-8 byte 0xFF"},     /* column counts characters */
    {"[1,\n 2,\n x]", "line 3, column 2", "expected a value"},
    {"{\r\n  \"a\": tru\r\n}", "line 2, column 8", "did you mean 'true'"},
    {"\x01", "line 1, column 1", "control character 0x01"},
    {"[1]\x00", "line 1, column 4", "after the JSON value"},
    {"'a'", "line 1, column 1", "found '''"},
    {"[1] // comment", "line 1, column 5", "after the JSON value"},
    {"\xEF\xBB", "line 1, column 1", "byte 0xEF"},
};

static void test_malformed(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
        const bad_case *c = &bad_cases[i];
        /* The NUL case needs an explicit length. */
        size_t len = strcmp(c->text, "[1]") == 0 ? 4 : strlen(c->text);
        vkg_json *v = (vkg_json *)1;
        vkg_error err = {0};
        vkg_status st = vkg_json_parse(c->text, len, &v, &err);
        if (st != VKG_ERR_FORMAT) fail_msg("case %zu <%s>: status %d, expected a format error", i, c->text, (int)st);
        assert_null(v);
        assert_int_equal(err.status, VKG_ERR_FORMAT);
        if (!strstr(err.message, c->where) || !strstr(err.message, c->what))
            fail_msg("case %zu <%s>: message \"%s\" lacks \"%s\" / \"%s\"", i, c->text, err.message, c->where, c->what);
    }
    vkg_json *v = NULL;
    vkg_error err = {0};
    assert_int_equal(vkg_json_parse(NULL, 3, &v, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_int_equal(vkg_json_parse("1", 1, NULL, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_int_equal(vkg_json_parse("[", 1, &v, NULL), VKG_ERR_FORMAT); /* NULL err is fine */
}

/* Every prefix and many single-byte corruptions of a real document: only clean outcomes. */
static void test_truncations_and_corruptions(void **state) {
    (void)state;
    const char *doc = "{\"model\": {\"vocab\": {\"\\u0120the\": 262, \"caf\xC3\xA9\": 7, \"\\uD83D\\uDE00\": -1.5e-3}},"
                      " \"list\": [true, false, null, [0.5, \"x\\n\"], {}], \"n\": 1e10}";
    size_t n = strlen(doc);
    vkg_json *v = NULL;
    vkg_error err;
    assert_int_equal(vkg_json_parse(doc, n, &v, &err), VKG_OK);
    vkg_json_free(v);
    for (size_t k = 0; k < n; k++) {
        assert_int_equal(vkg_json_parse(doc, k, &v, &err), VKG_ERR_FORMAT);
        assert_null(v);
        assert_non_null(strstr(err.message, "line 1, column"));
    }
    char *copy = malloc(n);
    assert_non_null(copy);
    const unsigned char subst[] = {0, '"', '\\', '{', '}', '[', ']', ',', ':', 'u', 0x80, 0xFF, 'e', '-'};
    for (size_t k = 0; k < n; k++) {
        for (size_t s = 0; s < sizeof subst; s++) {
            memcpy(copy, doc, n);
            copy[k] = (char)subst[s];
            vkg_status st = vkg_json_parse(copy, n, &v, &err);
            assert_true(st == VKG_OK || st == VKG_ERR_FORMAT);
            if (st == VKG_OK) vkg_json_free(v);
            else assert_null(v);
        }
    }
    free(copy);
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* A file shaped like GPT-2's vocab.json: 50,257 keys, many with \u escapes, about 1 MB. */
static void test_vocab_sized_file(void **state) {
    (void)state;
    size_t cap = 2u << 20, n = 0;
    char *text = malloc(cap);
    assert_non_null(text);
    text[n++] = '{';
    for (int i = 0; i < 50257; i++) {
        n += (size_t)snprintf(text + n, cap - n, "%s\"%s%s%d\\\"\": %d", i ? ", " : "",
                              (i % 3 == 0) ? "\\u0120" : "", (i % 5 == 0) ? "caf\xC3\xA9" : "tok", i, i);
    }
    text[n++] = '}';
    assert_true(n > 900000);

    char dir[] = "/tmp/vkg_json_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[64];
    snprintf(path, sizeof path, "%s/vocab.json", dir);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, n, f), n);
    fclose(f);

    vkg_json *v = NULL;
    vkg_error err = {0};
    double best = 1e9;
    for (int rep = 0; rep < 3; rep++) {
        double t0 = now_ms();
        vkg_status st = vkg_json_parse_file(path, &v, &err);
        double t1 = now_ms();
        if (st != VKG_OK) fail_msg("%s", err.message);
        if (t1 - t0 < best) best = t1 - t0;
        if (rep < 2) vkg_json_free(v);
    }
    print_message("vocab-sized JSON (%zu bytes, 50257 keys): best parse %.1f ms\n", n, best);
    /* Well under 100 ms in a normal build; sanitizers slow it several-fold, hence the margin. */
    assert_true(best < 1000.0);
    assert_int_equal(vkg_json_length(v), 50257);
    assert_true(vkg_json_number(vkg_json_get(v, "\xC4\xA0" "caf\xC3\xA9" "0\"")) == 0.0);
    assert_true(vkg_json_number(vkg_json_get(v, "tok50254\"")) == 50254.0);
    assert_true(vkg_json_number(vkg_json_get(v, "\xC4\xA0tok50256\"")) == 50256.0);
    size_t klen;
    assert_string_equal(vkg_json_key_at(v, 1, &klen), "tok1\"");
    vkg_json_free(v);

    /* A file error and a parse error both name the file. */
    assert_int_equal(vkg_json_parse_file("/nonexistent/vocab.json", &v, &err), VKG_ERR_IO);
    assert_non_null(strstr(err.message, "/nonexistent/vocab.json"));
    f = fopen(path, "wb");
    assert_non_null(f);
    fputs("{\"a\": 1,\n \"b\": }", f);
    fclose(f);
    assert_int_equal(vkg_json_parse_file(path, &v, &err), VKG_ERR_FORMAT);
    assert_non_null(strstr(err.message, path));
    assert_non_null(strstr(err.message, "line 2, column 7"));
    unlink(path);
    rmdir(dir);
    free(text);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scalars),
        cmocka_unit_test(test_escapes),
        cmocka_unit_test(test_nested_and_accessors),
        cmocka_unit_test(test_large_object_lookup),
        cmocka_unit_test(test_depth_limit),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_truncations_and_corruptions),
        cmocka_unit_test(test_vocab_sized_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
