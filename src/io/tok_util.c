/* Buffers, UTF-8 helpers, patterns and the byte alphabet shared by the tokenizer's components. */
#include "io/tok_internal.h"

#include <stdlib.h>
#include <string.h>

void tok_buf_put(tok_buf *b, const void *s, size_t len) {
    if (b->oom) return;
    if (b->len + len + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + len + 1) cap *= 2;
        char *bigger = realloc(b->data, cap);
        if (!bigger) {
            b->oom = 1;
            return;
        }
        b->data = bigger;
        b->cap = cap;
    }
    if (len) memcpy(b->data + b->len, s, len);
    b->len += len;
    b->data[b->len] = '\0';
}

void tok_buf_free(tok_buf *b) {
    free(b->data);
    *b = (tok_buf){0};
}

void tok_pieces_begin(tok_pieces *p, int first) {
    if (p->n == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 64;
        tok_span *bigger = realloc(p->span, cap * sizeof *bigger);
        if (!bigger) {
            p->text.oom = 1;
            return;
        }
        p->span = bigger;
        p->cap = cap;
    }
    p->span[p->n++] = (tok_span){p->text.len, 0, first};
}

void tok_pieces_put(tok_pieces *p, const void *s, size_t len) {
    if (p->text.oom || p->n == 0) return;
    tok_buf_put(&p->text, s, len);
    p->span[p->n - 1].len += len;
}

char *tok_pieces_extend(tok_pieces *p, size_t len) {
    if (p->text.oom || p->n == 0) return NULL;
    size_t at = p->text.len;
    tok_buf_put(&p->text, NULL, 0);
    if (!p->text.oom && at + len + 1 > p->text.cap) {
        size_t cap = p->text.cap;
        while (cap < at + len + 1) cap *= 2;
        char *bigger = realloc(p->text.data, cap);
        if (!bigger) p->text.oom = 1;
        else {
            p->text.data = bigger;
            p->text.cap = cap;
        }
    }
    if (p->text.oom) return NULL;
    p->text.len += len;
    p->text.data[p->text.len] = '\0';
    p->span[p->n - 1].len += len;
    return p->text.data + at;
}

void tok_pieces_add(tok_pieces *p, const void *s, size_t len, int first) {
    tok_pieces_begin(p, first);
    tok_pieces_put(p, s, len);
}

void tok_pieces_clear(tok_pieces *p) {
    p->text.len = 0;
    p->text.oom = 0;
    p->n = 0;
}

void tok_pieces_free(tok_pieces *p) {
    tok_buf_free(&p->text);
    free(p->span);
    *p = (tok_pieces){0};
}

int tok_pieces_failed(const tok_pieces *p) { return p->text.oom; }

void tok_pieces_swap(tok_pieces *a, tok_pieces *b) {
    tok_pieces t = *a;
    *a = *b;
    *b = t;
}

size_t tok_utf8_len(unsigned char lead) { return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4; }

uint32_t tok_utf8_decode(const char *s, size_t *n) {
    const unsigned char *u = (const unsigned char *)s;
    size_t k = tok_utf8_len(u[0]);
    uint32_t cp = k == 1 ? u[0] : (uint32_t)(u[0] & (0x3F >> (k - 1)));
    for (size_t j = 1; j < k; j++) cp = (cp << 6) | (u[j] & 0x3F);
    *n = k;
    return cp;
}

int tok_is_whitespace(uint32_t cp) {
    return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
           cp == 0x3000;
}

pcre2_code *tok_compile_regex(const char *regex, size_t len, uint32_t options, const char *where, vkg_error *err) {
    int code;
    PCRE2_SIZE at;
    /* PCRE2 takes no UCP with a literal pattern (it has no classes to read anyway). */
    uint32_t unicode = options & PCRE2_LITERAL ? PCRE2_UTF : PCRE2_UTF | PCRE2_UCP;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)regex, len, unicode | options, &code, &at, NULL);
    if (!re) {
        PCRE2_UCHAR message[256];
        pcre2_get_error_message(code, message, sizeof message);
        int shown = len > 120 ? 120 : (int)len;
        vkg_error_set(err, VKG_ERR_UNSUPPORTED, "%s: cannot compile the pattern \"%.*s\" (at offset %zu): %s", where,
                      shown, regex, (size_t)at, (const char *)message);
        return NULL;
    }
    /* JIT makes matching several times faster; without it the interpreter gives the same
     * matches, so a failure here is not an error. */
    (void)pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);
    return re;
}

/* tokenizers compiles its patterns with Oniguruma, whose \s is Unicode's White_Space; PCRE2's
 * also holds U+180E.  A pattern's \s is spelled out as Oniguruma's, and \S outside a class as
 * its complement (inside a class \S is left to PCRE2: they differ at U+180E alone). */
pcre2_code *tok_compile_onig(const char *regex, size_t len, const char *where, vkg_error *err) {
    tok_buf b = {0};
    int in_class = 0;
    for (size_t i = 0; i < len; i++) {
        char c = regex[i];
        if (c == '\\' && i + 1 < len) {
            char e = regex[++i];
            if (e == 's') tok_buf_put(&b, in_class ? TOK_ONIG_SPACE : "[" TOK_ONIG_SPACE "]",
                                      in_class ? sizeof TOK_ONIG_SPACE - 1 : sizeof TOK_ONIG_SPACE + 1);
            else if (e == 'S' && !in_class) tok_buf_put(&b, "[^" TOK_ONIG_SPACE "]", sizeof TOK_ONIG_SPACE + 2);
            else {
                tok_buf_put(&b, regex + i - 1, 2);
            }
            continue;
        }
        if (c == '[' && !in_class) {
            in_class = 1;
            tok_buf_put(&b, &c, 1);
            /* a ']' right after '[' or '[^' is a member, not the end */
            if (i + 1 < len && regex[i + 1] == '^') tok_buf_put(&b, regex + ++i, 1);
            if (i + 1 < len && regex[i + 1] == ']') tok_buf_put(&b, regex + ++i, 1);
            continue;
        }
        if (c == ']' && in_class) in_class = 0;
        tok_buf_put(&b, &c, 1);
    }
    if (b.oom) {
        tok_buf_free(&b);
        vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
        return NULL;
    }
    pcre2_code *re = tok_compile_regex(b.data ? b.data : "", b.len, 0, where, err);
    tok_buf_free(&b);
    return re;
}

pcre2_code *tok_compile_pattern(const vkg_json *pattern, const char *where, vkg_error *err) {
    size_t len = 0;
    const char *s = vkg_json_string(vkg_json_get(pattern, "String"), &len);
    if (s) return tok_compile_regex(s, len, PCRE2_LITERAL, where, err);
    s = vkg_json_string(vkg_json_get(pattern, "Regex"), &len);
    if (s) return tok_compile_onig(s, len, where, err);
    vkg_error_set(err, VKG_ERR_FORMAT, "%s: pattern is not {\"String\": ...} or {\"Regex\": ...}", where);
    return NULL;
}

const char *tok_type(const vkg_json *v, const char *where, vkg_error *err) {
    const char *type = vkg_json_string(vkg_json_get(v, "type"), NULL);
    if (!type)
        vkg_error_set(err, VKG_ERR_FORMAT, "%s: expected an object with a string \"type\", found %s", where,
                      vkg_json_type_name(vkg_json_type_of(v)));
    return type;
}

vkg_status tok_unsupported(const char *where, const char *type, vkg_error *err) {
    return vkg_error_set(err, VKG_ERR_UNSUPPORTED, "%s: type \"%s\" is not supported (docs/TOKENIZERS.md lists "
                         "the components vkgraph reads)", where, type);
}

/* GPT-2's bytes_to_unicode: the 188 printable Latin-1 bytes stand for themselves, the other 68
 * get U+0100.. in increasing byte order, so every byte has a visible, non-space spelling. */
static int byte_is_printable(unsigned b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE; }

/* The 68 others, in order: 0x00..0x20 (33), 0x7F..0xA0 (34), 0xAD. */
uint32_t tok_byte_char(unsigned b) {
    if (byte_is_printable(b)) return b;
    if (b <= 0x20) return 0x100 + b;
    if (b <= 0xA0) return 0x100 + 33 + (b - 0x7F);
    return 0x143; /* 0xAD */
}

int tok_char_byte(uint32_t cp) {
    if (cp < 0x100) return byte_is_printable(cp) ? (int)cp : -1;
    if (cp >= 0x144) return -1;
    uint32_t k = cp - 0x100;
    return k < 33 ? (int)k : k < 67 ? (int)(0x7F + k - 33) : 0xAD;
}
