/* Decoders: token strings -> text.  ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace
 * and a Sequence of them, each working on the list of strings the one before left, as
 * tokenizers' decode_chain does. */
#include "io/tok_internal.h"

#include <stdlib.h>
#include <string.h>

typedef enum { D_BYTE_LEVEL, D_REPLACE, D_BYTE_FALLBACK, D_FUSE, D_STRIP, D_METASPACE, D_SEQUENCE } dec_kind;

struct tok_decoder {
    dec_kind kind;
    pcre2_code *pattern;   /* D_REPLACE */
    char *content;         /* D_REPLACE: the replacement; D_STRIP, D_METASPACE: the character */
    size_t content_len;
    size_t start, stop;    /* D_STRIP */
    int strip_first;       /* D_METASPACE: prepend_scheme is not "never" */
    tok_decoder **parts;
    size_t n_parts;
};

void tok_decoder_free(tok_decoder *d) {
    if (!d) return;
    for (size_t i = 0; i < d->n_parts; i++) tok_decoder_free(d->parts[i]);
    free(d->parts);
    pcre2_code_free(d->pattern);
    free(d->content);
    free(d);
}

static vkg_status set_content(tok_decoder *d, const char *s, size_t len, vkg_error *err) {
    d->content = malloc(len + 1);
    if (!d->content) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
    memcpy(d->content, s, len);
    d->content[len] = '\0';
    d->content_len = len;
    return VKG_OK;
}

static vkg_status parse_one(const vkg_json *v, const char *where, tok_decoder *d, vkg_error *err) {
    const char *type = tok_type(v, where, err);
    if (!type) return err->status;
    size_t len = 0;
    const char *s;
    if (!strcmp(type, "ByteLevel")) d->kind = D_BYTE_LEVEL;
    else if (!strcmp(type, "ByteFallback")) d->kind = D_BYTE_FALLBACK;
    else if (!strcmp(type, "Fuse")) d->kind = D_FUSE;
    else if (!strcmp(type, "Replace")) {
        d->kind = D_REPLACE;
        if (!(s = vkg_json_string(vkg_json_get(v, "content"), &len)))
            return vkg_error_set(err, VKG_ERR_FORMAT, "%s: Replace has no string \"content\"", where);
        if (!(d->pattern = tok_compile_pattern(vkg_json_get(v, "pattern"), where, err))) return err->status;
        return set_content(d, s, len, err);
    } else if (!strcmp(type, "Strip")) {
        d->kind = D_STRIP;
        double a = vkg_json_number(vkg_json_get(v, "start")), b = vkg_json_number(vkg_json_get(v, "stop"));
        if (!(s = vkg_json_string(vkg_json_get(v, "content"), &len)) || len == 0 ||
            tok_utf8_len((unsigned char)s[0]) != len || !(a >= 0 && a < 1e6) || !(b >= 0 && b < 1e6))
            return vkg_error_set(err, VKG_ERR_FORMAT, "%s: Strip needs one character \"content\" and counts \"start\", "
                                 "\"stop\"", where);
        d->start = (size_t)a;
        d->stop = (size_t)b;
        return set_content(d, s, len, err);
    } else if (!strcmp(type, "Metaspace")) {
        d->kind = D_METASPACE;
        if (!(s = vkg_json_string(vkg_json_get(v, "replacement"), &len))) s = "\xE2\x96\x81", len = 3;
        if (len == 0 || tok_utf8_len((unsigned char)s[0]) != len)
            return vkg_error_set(err, VKG_ERR_FORMAT, "%s: Metaspace replacement must be one character", where);
        const char *scheme = vkg_json_string(vkg_json_get(v, "prepend_scheme"), NULL);
        const vkg_json *aps = vkg_json_get(v, "add_prefix_space");
        d->strip_first = scheme ? strcmp(scheme, "never") != 0
                                : (vkg_json_type_of(aps) == VKG_JSON_BOOL ? vkg_json_bool(aps) : 1);
        return set_content(d, s, len, err);
    } else if (!strcmp(type, "Sequence")) {
        d->kind = D_SEQUENCE;
        const vkg_json *list = vkg_json_get(v, "decoders");
        if (vkg_json_type_of(list) != VKG_JSON_ARRAY)
            return vkg_error_set(err, VKG_ERR_FORMAT, "%s: Sequence has no \"decoders\" array", where);
        size_t count = vkg_json_length(list);
        if (count && !(d->parts = calloc(count, sizeof *d->parts)))
            return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
        for (size_t i = 0; i < count; i++) {
            vkg_status st = tok_decoder_parse(vkg_json_at(list, i), where, &d->parts[i], err);
            if (st != VKG_OK) return st;
            d->n_parts++;
            if (!d->parts[i]) return vkg_error_set(err, VKG_ERR_FORMAT, "%s: decoders[%zu] is null", where, i);
        }
    } else return tok_unsupported(where, type, err);
    return VKG_OK;
}

vkg_status tok_decoder_parse(const vkg_json *v, const char *where, tok_decoder **out, vkg_error *err) {
    *out = NULL;
    if (vkg_json_type_of(v) == VKG_JSON_NULL) return VKG_OK;
    tok_decoder *d = calloc(1, sizeof *d);
    if (!d) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
    vkg_status st = parse_one(v, where, d, err);
    if (st != VKG_OK) {
        tok_decoder_free(d);
        return st;
    }
    *out = d;
    return VKG_OK;
}

vkg_status tok_decoder_byte_level(tok_decoder **out, vkg_error *err) {
    *out = calloc(1, sizeof **out);
    if (!*out) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
    (*out)->kind = D_BYTE_LEVEL;
    return VKG_OK;
}

/* ByteLevel: each token back to the bytes its characters spell; a token with a character
 * outside the alphabet (an added token) stands for its own UTF-8.  The bytes are kept as they
 * are (tokenizers replaces an invalid sequence with U+FFFD), so that a text decoded piece by
 * piece joins up. */
static void byte_level(const tok_pieces *in, tok_pieces *out) {
    tok_pieces_begin(out, 1);
    for (size_t i = 0; i < in->n; i++) {
        const char *s = tok_piece(in, i);
        size_t len = in->span[i].len, k;
        int all = 1;
        for (size_t j = 0; all && j < len; j += k) all = tok_char_byte(tok_utf8_decode(s + j, &k)) >= 0;
        if (!all) {
            tok_pieces_put(out, s, len);
            continue;
        }
        for (size_t j = 0; j < len; j += k) {
            char b = (char)tok_char_byte(tok_utf8_decode(s + j, &k));
            tok_pieces_put(out, &b, 1);
        }
    }
}

static void replace(const tok_decoder *d, const tok_pieces *in, tok_pieces *out, pcre2_match_data *md) {
    for (size_t i = 0; i < in->n; i++) {
        const char *s = tok_piece(in, i);
        size_t len = in->span[i].len, at = 0;
        tok_pieces_begin(out, 0);
        for (size_t from = 0; from < len;) {
            if (pcre2_match(d->pattern, (PCRE2_SPTR)s, len, from, 0, md, NULL) < 0) break;
            const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
            if (ov[1] == ov[0]) {
                from = ov[0] + 1;
                continue;
            }
            tok_pieces_put(out, s + at, ov[0] - at);
            tok_pieces_put(out, d->content, d->content_len);
            at = from = ov[1];
        }
        tok_pieces_put(out, s + at, len - at);
    }
}

static int hex(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static int valid_utf8(const unsigned char *s, size_t len) {
    for (size_t i = 0; i < len;) {
        unsigned c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t need = (c >= 0xC2 && c <= 0xDF) ? 1 : (c >= 0xE0 && c <= 0xEF) ? 2 : (c >= 0xF0 && c <= 0xF4) ? 3 : 0;
        if (need == 0 || need >= len - i) return 0;
        uint32_t cp = c & (0x7F >> (need + 1));
        for (size_t k = 1; k <= need; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return 0;
            cp = (cp << 6) | (s[i + k] & 0x3F);
        }
        if ((need == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
            (need == 3 && (cp < 0x10000 || cp > 0x10FFFF)))
            return 0;
        i += need + 1;
    }
    return 1;
}

/* ByteFallback: a run of <0xNN> tokens becomes the bytes; in a whole sequence a run that is not
 * valid UTF-8 becomes one U+FFFD a byte, as tokenizers does.  A token alone keeps its byte. */
static void byte_fallback(const tok_pieces *in, tok_pieces *out, int whole) {
    tok_buf run = {0};
    for (size_t i = 0; i <= in->n; i++) {
        const char *s = i < in->n ? tok_piece(in, i) : NULL;
        int byte = -1;
        if (s && in->span[i].len == 6 && !memcmp(s, "<0x", 3) && s[5] == '>' && hex(s[3]) >= 0 && hex(s[4]) >= 0)
            byte = hex(s[3]) * 16 + hex(s[4]);
        if (byte >= 0) {
            char b = (char)byte;
            tok_buf_put(&run, &b, 1);
            continue;
        }
        if (run.len) {
            if (!whole || valid_utf8((const unsigned char *)run.data, run.len)) tok_pieces_add(out, run.data, run.len, 0);
            else
                for (size_t k = 0; k < run.len; k++) tok_pieces_add(out, "\xEF\xBF\xBD", 3, 0);
            run.len = 0;
        }
        if (s) tok_pieces_add(out, s, in->span[i].len, 0);
    }
    if (run.oom) out->text.oom = 1;
    tok_buf_free(&run);
}

static void strip(const tok_decoder *d, const tok_pieces *in, tok_pieces *out) {
    size_t c = d->content_len;
    for (size_t i = 0; i < in->n; i++) {
        const char *s = tok_piece(in, i);
        size_t a = 0, b = in->span[i].len;
        for (size_t k = 0; k < d->start && b - a >= c && !memcmp(s + a, d->content, c); k++) a += c;
        for (size_t k = 0; k < d->stop && b - a >= c && !memcmp(s + b - c, d->content, c); k++) b -= c;
        tok_pieces_add(out, s + a, b - a, 0);
    }
}

/* Metaspace: the replacement character back to a space; in the first token of a sequence it
 * is dropped instead (the space the pre-tokenizer prepended), as tokenizers does. */
static void metaspace(const tok_decoder *d, const tok_pieces *in, tok_pieces *out, int whole) {
    size_t c = d->content_len;
    for (size_t i = 0; i < in->n; i++) {
        const char *s = tok_piece(in, i);
        size_t len = in->span[i].len;
        int drop = whole && i == 0 && d->strip_first;
        tok_pieces_begin(out, 0);
        for (size_t k = 0; k < len;) {
            if (len - k >= c && !memcmp(s + k, d->content, c)) {
                if (!drop) tok_pieces_put(out, " ", 1);
                k += c;
            } else {
                tok_pieces_put(out, s + k, 1);
                k++;
            }
        }
    }
}

static vkg_status run(const tok_decoder *d, tok_pieces *p, int whole, vkg_error *err) {
    if (d->kind == D_SEQUENCE) {
        for (size_t i = 0; i < d->n_parts; i++) {
            vkg_status st = run(d->parts[i], p, whole, err);
            if (st != VKG_OK) return st;
        }
        return VKG_OK;
    }
    tok_pieces out = {0};
    pcre2_match_data *md = NULL;
    switch (d->kind) {
    case D_BYTE_LEVEL: byte_level(p, &out); break;
    case D_REPLACE:
        if (!(md = pcre2_match_data_create_from_pattern(d->pattern, NULL))) out.text.oom = 1;
        else replace(d, p, &out, md);
        pcre2_match_data_free(md);
        break;
    case D_BYTE_FALLBACK: byte_fallback(p, &out, whole); break;
    case D_FUSE:
        tok_pieces_begin(&out, 0);
        for (size_t i = 0; i < p->n; i++) tok_pieces_put(&out, tok_piece(p, i), p->span[i].len);
        break;
    case D_STRIP:
        if (whole) strip(d, p, &out);
        else tok_pieces_swap(&out, p);
        break;
    case D_METASPACE: metaspace(d, p, &out, whole); break;
    case D_SEQUENCE: break;
    }
    tok_pieces_swap(&out, p);
    int failed = tok_pieces_failed(p);
    tok_pieces_free(&out);
    return failed ? vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory decoding") : VKG_OK;
}

vkg_status tok_decode(const tok_decoder *d, tok_pieces *p, int whole, vkg_error *err) {
    if (d) return run(d, p, whole, err);
    if (!whole || p->n < 2) return VKG_OK;
    tok_pieces out = {0};
    tok_pieces_begin(&out, 0);
    for (size_t i = 0; i < p->n; i++) {
        if (i) tok_pieces_put(&out, " ", 1);
        tok_pieces_put(&out, tok_piece(p, i), p->span[i].len);
    }
    tok_pieces_swap(&out, p);
    int failed = tok_pieces_failed(p);
    tok_pieces_free(&out);
    return failed ? vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory decoding") : VKG_OK;
}
