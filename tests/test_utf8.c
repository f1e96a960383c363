/* The one UTF-8 encoder and decoder (vkgraph.h): every length's boundaries round-trip, and each
 * kind of ill-formed sequence is one invalid run of its maximal subpart, as Python's "replace"
 * decoding counts U+FFFD. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "vkgraph.h"

#include <string.h>

static void test_round_trip(void **state) {
    (void)state;
    const uint32_t cps[] = {0, 0x41, 0x7F, 0x80, 0x7FF, 0x800, 0xD7FF, 0xE000, 0xFFFD, 0xFFFF, 0x10000, 0x1F600, 0x10FFFF};
    const size_t lens[] = {1, 1, 1, 2, 2, 3, 3, 3, 3, 3, 4, 4, 4};
    for (size_t i = 0; i < sizeof cps / sizeof cps[0]; i++) {
        char buf[4];
        assert_int_equal(vkg_utf8_encode(cps[i], buf), lens[i]);
        uint32_t cp = 0;
        assert_int_equal(vkg_utf8_decode(buf, lens[i], &cp), lens[i]);
        assert_int_equal(cp, cps[i]);
    }
    char euro[4];
    assert_int_equal(vkg_utf8_encode(0x20AC, euro), 3);
    assert_memory_equal(euro, "\xE2\x82\xAC", 3);
}

static void test_ill_formed(void **state) {
    (void)state;
    static const struct { const char *bytes; size_t len, used; } cases[] = {
        {"\x80", 1, 1},             /* a stray continuation byte          */
        {"\xC0\xAF", 2, 1},         /* C0 only starts overlong forms      */
        {"\xE0\x80\x80", 3, 1},     /* overlong: E0 needs A0..BF next     */
        {"\xED\xA0\x80", 3, 1},     /* an encoded surrogate               */
        {"\xF4\x90\x80\x80", 4, 1}, /* past U+10FFFF                      */
        {"\xF5\x80", 2, 1},         /* never in UTF-8                     */
        {"\xE2\x82", 2, 2},         /* cut short: one run of both bytes   */
        {"\xE2\x82x", 3, 2},        /* a missing continuation             */
        {"\xF0\x9F\x98", 3, 3},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint32_t cp = 0;
        assert_int_equal(vkg_utf8_decode(cases[i].bytes, cases[i].len, &cp), cases[i].used);
        assert_int_equal(cp, VKG_UTF8_INVALID);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_round_trip), cmocka_unit_test(test_ill_formed)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
