/* Stop strings over streamed tokens: what is released after each token, a stop string split over
 * tokens or inside one, partial matches held back and released when they come to nothing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "models/stop_strings.h"

#include <stdio.h>
#include <string.h>

/* Pushes the tokens in order until a stop string matches, collecting what is released after each
 * ("|" between tokens) and, without a match, the flush at the end ("#" before it).  Returns the
 * index of the stop string matched, or -1. */
static int stream(const char *const *stops, int n_stops, const char *const *tokens, int n_tokens, char *out,
                  size_t size) {
    vkg_stop s;
    vkg_error err = {0};
    assert_int_equal(vkg_stop_init(&s, stops, n_stops, &err), VKG_OK);
    size_t used = 0;
    out[0] = '\0';
    for (int i = 0; i < n_tokens && s.matched < 0; i++) {
        const char *ready;
        size_t len;
        assert_int_equal(vkg_stop_push(&s, tokens[i], strlen(tokens[i]), &ready, &len, &err), VKG_OK);
        used += (size_t)snprintf(out + used, size - used, "%s%.*s", i ? "|" : "", (int)len, ready);
    }
    int matched = s.matched;
    if (matched < 0) {
        size_t len;
        const char *rest = vkg_stop_flush(&s, &len);
        snprintf(out + used, size - used, "#%.*s", (int)len, rest);
    }
    vkg_stop_free(&s);
    return matched;
}

#define STREAM(stops, tokens, out) \
    stream(stops, (int)(sizeof stops / sizeof stops[0]), tokens, (int)(sizeof tokens / sizeof tokens[0]), out, sizeof out)

static void test_split_across_tokens(void **state) {
    (void)state;
    char out[256];
    const char *stops[] = {"END"};
    const char *t1[] = {"Hello", " wor", "ld E", "N", "D more", "never"};
    assert_int_equal(STREAM(stops, t1, out), 0);
    assert_string_equal(out, "Hello| wor|ld ||"); /* "E" and "N" held back, then dropped with "D more" */

    /* Inside one token, with text after it in the same token: neither is printed. */
    const char *t2[] = {"ab", "cENDde"};
    assert_int_equal(STREAM(stops, t2, out), 0);
    assert_string_equal(out, "ab|c");

    /* A partial match that comes to nothing is released as soon as it cannot match any more. */
    const char *t3[] = {"xE", "Nd", "!"};
    assert_int_equal(STREAM(stops, t3, out), -1);
    assert_string_equal(out, "x|ENd|!#");

    /* Held back at the end of generation: flushed, since it never completed. */
    const char *t4[] = {"so E", "N"};
    assert_int_equal(STREAM(stops, t4, out), -1);
    assert_string_equal(out, "so |#EN");
}

static void test_several_stops(void **state) {
    (void)state;
    char out[256];
    /* The earliest occurrence wins; among stops at the same place, the first given. */
    const char *stops[] = {"\n\n", "User:", "\n"};
    const char *t1[] = {"Hi", " there.\n", "\nUser:"};
    assert_int_equal(STREAM(stops, t1, out), 2); /* "\n" completes first, inside the second token */
    assert_string_equal(out, "Hi| there.");
    const char *stops2[] = {"User:", "Us"};
    const char *t2[] = {"a U", "ser: b"};
    assert_int_equal(STREAM(stops2, t2, out), 0);
    assert_string_equal(out, "a |");
    /* A prefix shared by two stops is held back as long as either may still match. */
    const char *stops3[] = {"abc", "abd"};
    const char *t3[] = {"x", "a", "b", "e"};
    assert_int_equal(STREAM(stops3, t3, out), -1);
    assert_string_equal(out, "x|||abe#");
}

static void test_no_stops_and_errors(void **state) {
    (void)state;
    char out[256];
    vkg_stop s;
    vkg_error err = {0};
    const char *none[] = {"unused"};
    assert_int_equal(vkg_stop_init(&s, none, 0, &err), VKG_OK);
    const char *ready;
    size_t len;
    assert_int_equal(vkg_stop_push(&s, "all of it", 9, &ready, &len, &err), VKG_OK);
    assert_int_equal(len, 9);
    assert_memory_equal(ready, "all of it", 9);
    vkg_stop_free(&s);
    const char *empty[] = {"ok", ""};
    assert_int_equal(vkg_stop_init(&s, empty, 2, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "stop string 2 is empty"));
    vkg_stop_free(&s);
    /* A long generation, one byte at a time: nothing held without a possible match. */
    const char *stops[] = {"zz"};
    const char *t[] = {"a", "b", "z", "y", "z", "z"};
    assert_int_equal(STREAM(stops, t, out), 0);
    assert_string_equal(out, "a|b||zy||");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split_across_tokens),
        cmocka_unit_test(test_several_stops),
        cmocka_unit_test(test_no_stops_and_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
