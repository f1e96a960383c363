/* The server's output buffer and JSON string writer (sbuf.h). */
#include "server/sbuf.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sbuf_free(sbuf *b) {
    free(b->data);
    memset(b, 0, sizeof *b);
}

static int reserve(sbuf *b, size_t extra) {
    if (b->oom) return 0;
    if (b->len + extra + 1 <= b->cap) return 1;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1) cap *= 2;
    char *p = realloc(b->data, cap);
    if (!p) {
        b->oom = 1;
        return 0;
    }
    b->data = p;
    b->cap = cap;
    return 1;
}

void sbuf_add(sbuf *b, const char *s, size_t n) {
    if (!reserve(b, n)) return;
    if (n) memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = 0;
}

void sbuf_adds(sbuf *b, const char *s) { sbuf_add(b, s, strlen(s)); }

void sbuf_printf(sbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char small[256];
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof small) {
        sbuf_add(b, small, (size_t)n);
        return;
    }
    if (!reserve(b, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

/* Length of the valid UTF-8 character at s (1-4), or 0 when it is not one. */
static size_t utf8_char(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    if (c < 0x80) return 1;
    size_t len;
    uint32_t cp;
    if (c >= 0xC2 && c <= 0xDF) len = 2, cp = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF) len = 3, cp = c & 0x0F;
    else if (c >= 0xF0 && c <= 0xF4) len = 4, cp = c & 0x07;
    else return 0;
    if (n < len) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return len;
}

int sbuf_utf8_valid(const char *s, size_t n) {
    for (size_t i = 0, len; i < n; i += len)
        if (!(len = utf8_char((const unsigned char *)s + i, n - i))) return 0;
    return 1;
}

void sbuf_json_string(sbuf *b, const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    sbuf_add(b, "\"", 1);
    for (size_t i = 0; i < n;) {
        unsigned c = u[i];
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            sbuf_add(b, e, 2);
            i++;
        } else if (c < 0x20) {
            if (c == '\n') sbuf_adds(b, "\\n");
            else if (c == '\t') sbuf_adds(b, "\\t");
            else if (c == '\r') sbuf_adds(b, "\\r");
            else sbuf_printf(b, "\\u%04x", c);
            i++;
        } else {
            size_t len = utf8_char(u + i, n - i);
            if (len) sbuf_add(b, s + i, len), i += len;
            else sbuf_adds(b, "\xEF\xBF\xBD"), i++;
        }
    }
    sbuf_add(b, "\"", 1);
}
