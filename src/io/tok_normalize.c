/* Normalizers: NFC, NFD, NFKC, NFKD (utf8proc: the Unicode tables come from the library, not
 * from hand-written lists), Lowercase, Strip, Prepend, Replace and Sequence of them. */
#include "io/tok_internal.h"

#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

typedef enum { N_UNICODE, N_LOWER, N_STRIP, N_PREPEND, N_REPLACE, N_SEQUENCE } norm_kind;

struct tok_normalizer {
    norm_kind kind;
    utf8proc_option_t form;   /* N_UNICODE */
    int left, right;          /* N_STRIP */
    char *text;               /* N_PREPEND: the prefix; N_REPLACE: the replacement */
    size_t text_len;
    pcre2_code *pattern;      /* N_REPLACE */
    tok_normalizer **parts;   /* N_SEQUENCE */
    size_t n_parts;
};

void tok_normalizer_free(tok_normalizer *n) {
    if (!n) return;
    for (size_t i = 0; i < n->n_parts; i++) tok_normalizer_free(n->parts[i]);
    free(n->parts);
    free(n->text);
    pcre2_code_free(n->pattern);
    free(n);
}

static vkg_status copy_string(const vkg_json *v, const char *field, const char *where, char **out, size_t *len,
                              vkg_error *err) {
    const char *s = vkg_json_string(v, len);
    if (!s) return vkg_error_set(err, VKG_ERR_FORMAT, "%s: \"%s\" is missing or not a string", where, field);
    *out = malloc(*len + 1);
    if (!*out) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
    memcpy(*out, s, *len + 1);
    return VKG_OK;
}

vkg_status tok_normalizer_parse(const vkg_json *v, const char *where, tok_normalizer **out, vkg_error *err) {
    *out = NULL;
    if (vkg_json_type_of(v) == VKG_JSON_NULL) return VKG_OK;
    const char *type = tok_type(v, where, err);
    if (!type) return err->status;
    tok_normalizer *n = calloc(1, sizeof *n);
    if (!n) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
    vkg_status st = VKG_OK;
    if (!strcmp(type, "NFC") || !strcmp(type, "NFD") || !strcmp(type, "NFKC") || !strcmp(type, "NFKD")) {
        n->kind = N_UNICODE;
        n->form = UTF8PROC_STABLE | (type[2] == 'K' ? UTF8PROC_COMPAT : 0);
        n->form |= type[strlen(type) - 1] == 'C' ? UTF8PROC_COMPOSE : UTF8PROC_DECOMPOSE;
    } else if (!strcmp(type, "Lowercase")) {
        n->kind = N_LOWER;
    } else if (!strcmp(type, "Strip")) {
        n->kind = N_STRIP;
        n->left = vkg_json_bool(vkg_json_get(v, "strip_left"));
        n->right = vkg_json_bool(vkg_json_get(v, "strip_right"));
    } else if (!strcmp(type, "Prepend")) {
        n->kind = N_PREPEND;
        st = copy_string(vkg_json_get(v, "prepend"), "prepend", where, &n->text, &n->text_len, err);
    } else if (!strcmp(type, "Replace")) {
        n->kind = N_REPLACE;
        st = copy_string(vkg_json_get(v, "content"), "content", where, &n->text, &n->text_len, err);
        if (st == VKG_OK && !(n->pattern = tok_compile_pattern(vkg_json_get(v, "pattern"), where, err)))
            st = err->status;
    } else if (!strcmp(type, "Sequence")) {
        n->kind = N_SEQUENCE;
        const vkg_json *list = vkg_json_get(v, "normalizers");
        if (vkg_json_type_of(list) != VKG_JSON_ARRAY)
            st = vkg_error_set(err, VKG_ERR_FORMAT, "%s: Sequence has no \"normalizers\" array", where);
        size_t count = vkg_json_length(list);
        if (st == VKG_OK && count && !(n->parts = calloc(count, sizeof *n->parts)))
            st = vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
        for (size_t i = 0; st == VKG_OK && i < count; i++) {
            st = tok_normalizer_parse(vkg_json_at(list, i), where, &n->parts[i], err);
            if (st == VKG_OK && !n->parts[i])
                st = vkg_error_set(err, VKG_ERR_FORMAT, "%s: normalizers[%zu] is null", where, i);
            if (st == VKG_OK) n->n_parts++;
        }
    } else {
        st = tok_unsupported(where, type, err);
    }
    if (st != VKG_OK) {
        tok_normalizer_free(n);
        return st;
    }
    *out = n;
    return VKG_OK;
}

static vkg_status map_run(const tok_normalizer *n, const char *s, size_t len, tok_buf *out, vkg_error *err) {
    utf8proc_uint8_t *mapped = NULL;
    utf8proc_ssize_t got = utf8proc_map((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)len, &mapped, n->form);
    if (got < 0) {
        free(mapped);
        return vkg_error_set(err, got == UTF8PROC_ERROR_NOMEM ? VKG_ERR_OUT_OF_MEMORY : VKG_ERR_INVALID_ARGUMENT,
                             "Unicode normalization failed: %s", utf8proc_errmsg(got));
    }
    tok_buf_put(out, mapped, (size_t)got);
    free(mapped);
    return VKG_OK;
}

/* ASCII is left as it is by all four forms, and no composition has an ASCII character as its
 * second part, so the text can be cut just before any ASCII character: only the stretches that
 * hold other characters (with the ASCII character before them, which may compose with a mark)
 * go through utf8proc, which is most of the cost of the forms on mostly-ASCII text. */
static vkg_status unicode_form(const tok_normalizer *n, const char *s, size_t len, tok_buf *out, vkg_error *err) {
    size_t i = 0;
    while (i < len) {
        size_t p = i;
        while (p < len && (unsigned char)s[p] < 0x80) p++;
        if (p == len) {
            tok_buf_put(out, s + i, len - i);
            break;
        }
        size_t start = p > i ? p - 1 : p, end = p;
        while (end < len && (unsigned char)s[end] >= 0x80) end++;
        tok_buf_put(out, s + i, start - i);
        vkg_status st = map_run(n, s + start, end - start, out, err);
        if (st != VKG_OK) return st;
        i = end;
    }
    return VKG_OK;
}

/* Each character's lowercase, as Rust's char::to_lowercase gives it: utf8proc's simple mapping,
 * and U+0130 to "i" + U+0307, the one character whose full lowercase is two. */
static void lowercase(const char *s, size_t len, tok_buf *out) {
    for (size_t i = 0; i < len;) {
        size_t k;
        uint32_t cp = tok_utf8_decode(s + i, &k);
        if (cp == 0x130) {
            tok_buf_put(out, "i\xCC\x87", 3);
            i += k;
            continue;
        }
        utf8proc_uint8_t enc[4];
        utf8proc_ssize_t m = utf8proc_encode_char(utf8proc_tolower((utf8proc_int32_t)cp), enc);
        tok_buf_put(out, enc, (size_t)m);
        i += k;
    }
}

static void strip(const tok_normalizer *n, const char *s, size_t len, tok_buf *out) {
    size_t a = 0, b = len, k;
    while (n->left && a < b && tok_is_whitespace(tok_utf8_decode(s + a, &k))) a += k;
    while (n->right && b > a) {
        size_t c = b - 1;
        while (c > a && ((unsigned char)s[c] & 0xC0) == 0x80) c--;
        if (!tok_is_whitespace(tok_utf8_decode(s + c, &k))) break;
        b = c;
    }
    tok_buf_put(out, s + a, b - a);
}

static vkg_status replace(const tok_normalizer *n, const char *s, size_t len, tok_buf *out, vkg_error *err) {
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(n->pattern, NULL);
    if (!md) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
    size_t at = 0;
    for (size_t from = 0; from <= len;) {
        int rc = pcre2_match(n->pattern, (PCRE2_SPTR)s, len, from, PCRE2_NO_UTF_CHECK, md, NULL);
        if (rc < 0) break;
        const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        if (ov[1] == ov[0]) { /* an empty match replaces nothing: step over one character */
            if (ov[0] >= len) break;
            from = ov[0] + tok_utf8_len((unsigned char)s[ov[0]]);
            continue;
        }
        tok_buf_put(out, s + at, ov[0] - at);
        tok_buf_put(out, n->text, n->text_len);
        at = from = ov[1];
    }
    tok_buf_put(out, s + at, len - at);
    pcre2_match_data_free(md);
    return VKG_OK;
}

static vkg_status normalize_into(const tok_normalizer *n, const char *s, size_t len, tok_buf *out, vkg_error *err) {
    switch (n->kind) {
    case N_UNICODE: return unicode_form(n, s, len, out, err);
    case N_LOWER: lowercase(s, len, out); return VKG_OK;
    case N_STRIP: strip(n, s, len, out); return VKG_OK;
    case N_PREPEND:
        if (len) tok_buf_put(out, n->text, n->text_len); /* an empty text stays empty */
        tok_buf_put(out, s, len);
        return VKG_OK;
    case N_REPLACE: return replace(n, s, len, out, err);
    case N_SEQUENCE: {
        tok_buf a = {0}, b = {0};
        tok_buf_put(&a, s, len);
        vkg_status st = VKG_OK;
        for (size_t i = 0; st == VKG_OK && i < n->n_parts; i++) {
            b.len = 0;
            st = normalize_into(n->parts[i], a.data, a.len, &b, err);
            tok_buf t = a;
            a = b;
            b = t;
        }
        if (st == VKG_OK) tok_buf_put(out, a.data, a.len);
        if (st == VKG_OK && (a.oom || b.oom)) st = vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
        tok_buf_free(&a);
        tok_buf_free(&b);
        return st;
    }
    }
    return VKG_OK;
}

vkg_status tok_normalize(const tok_normalizer *n, const char *s, size_t len, tok_buf *out, vkg_error *err) {
    out->len = 0;
    out->oom = 0;
    tok_buf_put(out, "", 0);
    vkg_status st = n ? normalize_into(n, s, len, out, err) : (tok_buf_put(out, s, len), VKG_OK);
    if (st == VKG_OK && out->oom) st = vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory normalizing");
    return st;
}
