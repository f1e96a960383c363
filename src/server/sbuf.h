/* A growable byte buffer with the few JSON writers the server's responses need.  A failed
 * allocation sets oom and turns every later append into a no-op, so a response is built without
 * a check per call and refused once at the end. */
#ifndef VKG_SERVER_SBUF_H
#define VKG_SERVER_SBUF_H

#include <stddef.h>

typedef struct sbuf {
    char *data; /* NUL-terminated when len > 0 */
    size_t len, cap;
    int oom;
} sbuf;

void sbuf_free(sbuf *b);
void sbuf_add(sbuf *b, const char *s, size_t n);
void sbuf_adds(sbuf *b, const char *s);
void sbuf_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* s as a JSON string, quotes included.  Invalid UTF-8 (a token may end inside a character)
 * becomes U+FFFD, as Python's decode(errors="replace") does, so the output is always valid JSON. */
void sbuf_json_string(sbuf *b, const char *s, size_t n);
/* 1 when the n bytes at s are whole, valid UTF-8 characters. */
int sbuf_utf8_valid(const char *s, size_t n);

#endif
