/* The one UTF-8 encoder and decoder (vkgraph.h).  Well-formed means RFC 3629 / Unicode table
 * 3-7: no overlong forms, no surrogates, nothing above U+10FFFF. */
#include "vkgraph.h"

size_t vkg_utf8_encode(uint32_t cp, char *out) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

size_t vkg_utf8_decode(const char *text, size_t len, uint32_t *cp) {
    const unsigned char *s = (const unsigned char *)text;
    const unsigned char b = s[0];
    *cp = VKG_UTF8_INVALID;
    if (b < 0x80) {
        *cp = b;
        return 1;
    }
    const size_t need = (b >= 0xC2 && b <= 0xDF) ? 1 : (b >= 0xE0 && b <= 0xEF) ? 2 : (b >= 0xF0 && b <= 0xF4) ? 3 : 0;
    if (!need) return 1; /* a stray continuation, or a byte that never starts a sequence */
    /* The second byte's range rules out overlong forms, surrogates and code points past U+10FFFF,
     * so a sequence is well-formed exactly when each byte is in range: the maximal subpart ends
     * at the first one that is not. */
    unsigned char lo = 0x80, hi = 0xBF;
    if (b == 0xE0) lo = 0xA0;
    if (b == 0xED) hi = 0x9F;
    if (b == 0xF0) lo = 0x90;
    if (b == 0xF4) hi = 0x8F;
    uint32_t value = b & (0x3Fu >> need);
    for (size_t k = 1; k <= need; k++) {
        if (k >= len || s[k] < lo || s[k] > hi) return k;
        value = (value << 6) | (s[k] & 0x3Fu);
        lo = 0x80, hi = 0xBF;
    }
    *cp = value;
    return need + 1;
}
