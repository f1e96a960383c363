/* Jinja source -> tokens, with the whitespace rules of transformers' environment applied to the
 * text between tags: {%- / -%} (and {{- / -}}, {#- / -#}) strip all whitespace on that side;
 * trim_blocks drops the first newline after a block or comment tag; lstrip_blocks drops the
 * spaces and tabs between a line's start and a block or comment tag ({%+ keeps them); the
 * template's single trailing newline is dropped (keep_trailing_newline is off). */
#include "io/jinja.h"

#include "base/error.h"

#include <stdlib.h>
#include <string.h>

static int push(jinja_tokens *t, jinja_tok_kind kind, int line, const char *text, size_t len) {
    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 64;
        jinja_token *v = realloc(t->v, cap * sizeof *v);
        if (!v) return -1;
        t->v = v;
        t->cap = cap;
    }
    jinja_token *k = &t->v[t->n];
    memset(k, 0, sizeof *k);
    k->kind = kind;
    k->line = line;
    k->text = malloc(len + 1);
    if (!k->text) return -1;
    if (len) memcpy(k->text, text, len);
    k->text[len] = 0;
    k->len = len;
    t->n++;
    return 0;
}

void jinja_tokens_free(jinja_tokens *t) {
    for (size_t i = 0; i < t->n; i++) free(t->v[i].text);
    free(t->v);
    memset(t, 0, sizeof *t);
}

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
static int is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static int is_digit(char c) { return c >= '0' && c <= '9'; }

static int count_lines(const char *s, size_t n) {
    int k = 0;
    for (size_t i = 0; i < n; i++) k += s[i] == '\n';
    return k;
}

/* Appends the UTF-8 encoding of code point c. */
static size_t put_utf8(char *o, unsigned c) {
    if (c < 0x80) { o[0] = (char)c; return 1; }
    if (c < 0x800) { o[0] = (char)(0xC0 | c >> 6); o[1] = (char)(0x80 | (c & 63)); return 2; }
    if (c < 0x10000) {
        o[0] = (char)(0xE0 | c >> 12); o[1] = (char)(0x80 | ((c >> 6) & 63)); o[2] = (char)(0x80 | (c & 63));
        return 3;
    }
    o[0] = (char)(0xF0 | c >> 18); o[1] = (char)(0x80 | ((c >> 12) & 63));
    o[2] = (char)(0x80 | ((c >> 6) & 63)); o[3] = (char)(0x80 | (c & 63));
    return 4;
}

static int hex_value(const char *s, int n, unsigned *out) {
    unsigned v = 0;
    for (int i = 0; i < n; i++) {
        char c = s[i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
        else return -1;
    }
    *out = v;
    return 0;
}

/* A string literal at s[*i] (the quote); decodes Python's escapes. */
static vkg_status lex_string(const char *s, size_t len, size_t *i, int *line, jinja_tokens *out, vkg_error *err) {
    char q = s[*i];
    int start_line = *line;
    size_t j = *i + 1;
    char *buf = malloc(len - *i + 1);
    if (!buf) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "template: out of memory");
    size_t n = 0;
    for (;;) {
        if (j >= len) {
            free(buf);
            return vkg_error_set(err, VKG_ERR_FORMAT, "template line %d: unterminated string", start_line);
        }
        char c = s[j];
        if (c == q) break;
        if (c == '\n') (*line)++;
        if (c != '\\' || j + 1 >= len) {
            buf[n++] = c;
            j++;
            continue;
        }
        char e = s[j + 1];
        unsigned cp;
        j += 2;
        switch (e) {
        case 'n': buf[n++] = '\n'; break;
        case 't': buf[n++] = '\t'; break;
        case 'r': buf[n++] = '\r'; break;
        case '0': buf[n++] = '\0'; break;
        case 'b': buf[n++] = '\b'; break;
        case 'f': buf[n++] = '\f'; break;
        case 'v': buf[n++] = '\v'; break;
        case 'a': buf[n++] = '\a'; break;
        case '\\': buf[n++] = '\\'; break;
        case '\'': buf[n++] = '\''; break;
        case '"': buf[n++] = '"'; break;
        case '\n': (*line)++; break; /* a backslash-newline continues the line */
        case 'x':
        case 'u':
        case 'U': {
            int w = e == 'x' ? 2 : e == 'u' ? 4 : 8;
            if (j + (size_t)w > len || hex_value(s + j, w, &cp) != 0 || cp > 0x10FFFF || (cp >= 0xD800 && cp < 0xE000)) {
                free(buf);
                return vkg_error_set(err, VKG_ERR_FORMAT, "template line %d: bad \\%c escape in a string", *line, e);
            }
            n += put_utf8(buf + n, cp); /* at most w + 2 bytes of source give at most 4 bytes */
            j += (size_t)w;
            break;
        }
        default: /* Python keeps an unknown escape as written */
            buf[n++] = '\\';
            buf[n++] = e;
        }
    }
    *i = j + 1;
    int rc = push(out, JT_STRING, start_line, buf, n);
    free(buf);
    return rc ? vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "template: out of memory") : VKG_OK;
}

static const char *const OPS[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<", ">",
                                   "=", "(", ")", "[", "]", "{", "}", ",", ".", ":", "|", NULL};

/* The inside of a tag from s[*i] up to its close; returns the close's strip flags. */
static vkg_status lex_tag(const char *s, size_t len, size_t *i, int *line, int is_expr, jinja_tokens *out,
                          int *strip_after, int *keep_after, vkg_error *err) {
    int depth = 0, open_line = *line;
    size_t j = *i;
    for (;;) {
        while (j < len && is_space(s[j])) {
            if (s[j] == '\n') (*line)++;
            j++;
        }
        if (j >= len)
            return vkg_error_set(err, VKG_ERR_FORMAT, "template line %d: %s not closed", open_line,
                                 is_expr ? "{{" : "{%");
        char c = s[j];
        char close = is_expr ? '}' : '%';
        /* the close: "}}" or "%}", maybe after "-" or "+"; inside brackets "}}" closes a dict */
        size_t k = j;
        int strip = 0, keep = 0;
        if ((c == '-' || c == '+') && j + 2 < len + 0 && s[j + 1] == close && s[j + 2] == '}') {
            strip = c == '-';
            keep = c == '+';
            k = j + 1;
        }
        if (k + 1 < len && s[k] == close && s[k + 1] == '}' && (depth == 0 || !is_expr)) {
            *strip_after = strip;
            *keep_after = keep;
            *i = k + 2;
            return push(out, is_expr ? JT_EXPR_CLOSE : JT_STMT_CLOSE, *line, "", 0)
                       ? vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "template: out of memory")
                       : VKG_OK;
        }
        if (c == '\'' || c == '"') {
            vkg_status st = lex_string(s, len, &j, line, out, err);
            if (st != VKG_OK) return st;
            continue;
        }
        if (is_name_start(c)) {
            size_t e = j;
            while (e < len && (is_name_start(s[e]) || is_digit(s[e]))) e++;
            if (push(out, JT_NAME, *line, s + j, e - j)) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "template: out of memory");
            j = e;
            continue;
        }
        if (is_digit(c)) {
            size_t e = j;
            int is_float = 0;
            while (e < len && (is_digit(s[e]) || s[e] == '_')) e++;
            if (e + 1 < len && s[e] == '.' && is_digit(s[e + 1])) {
                is_float = 1;
                e++;
                while (e < len && is_digit(s[e])) e++;
            }
            if (e < len && (s[e] == 'e' || s[e] == 'E')) {
                size_t x = e + 1;
                if (x < len && (s[x] == '+' || s[x] == '-')) x++;
                if (x < len && is_digit(s[x])) {
                    is_float = 1;
                    e = x;
                    while (e < len && is_digit(s[e])) e++;
                }
            }
            char num[64];
            size_t nn = 0;
            for (size_t x = j; x < e && nn < sizeof num - 1; x++)
                if (s[x] != '_') num[nn++] = s[x];
            num[nn] = 0;
            if (e - j >= sizeof num - 1)
                return vkg_error_set(err, VKG_ERR_FORMAT, "template line %d: number too long", *line);
            if (push(out, is_float ? JT_FLOAT : JT_INT, *line, num, nn))
                return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "template: out of memory");
            jinja_token *t = &out->v[out->n - 1];
            if (is_float) {
                t->fval = strtod(num, NULL);
            } else {
                int64_t v = 0;
                for (size_t x = 0; x < nn; x++) {
                    if (v > (INT64_MAX - (num[x] - '0')) / 10)
                        return vkg_error_set(err, VKG_ERR_UNSUPPORTED, "template line %d: integer %s too large", *line, num);
                    v = v * 10 + (num[x] - '0');
                }
                t->ival = v;
            }
            j = e;
            continue;
        }
        int matched = 0;
        for (int o = 0; OPS[o]; o++) {
            size_t ol = strlen(OPS[o]);
            if (j + ol <= len && memcmp(s + j, OPS[o], ol) == 0) {
                if (push(out, JT_OP, *line, OPS[o], ol)) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "template: out of memory");
                if (OPS[o][0] == '(' || OPS[o][0] == '[' || OPS[o][0] == '{') depth++;
                if ((OPS[o][0] == ')' || OPS[o][0] == ']' || OPS[o][0] == '}') && depth > 0) depth--;
                j += ol;
                matched = 1;
                break;
            }
        }
        if (!matched) {
            unsigned char u = (unsigned char)c;
            return vkg_error_set(err, VKG_ERR_FORMAT, "template line %d: unexpected character %s%c%s (byte 0x%02x)",
                                 *line, u >= 0x20 && u < 0x7f ? "'" : "", u >= 0x20 && u < 0x7f ? c : ' ',
                                 u >= 0x20 && u < 0x7f ? "'" : "", u);
        }
    }
}

vkg_status jinja_lex(const char *src, size_t len, jinja_tokens *out, vkg_error *err) {
    memset(out, 0, sizeof *out);
    if (len > 0 && src[len - 1] == '\n') len--; /* keep_trailing_newline=False */
    size_t i = 0;
    int line = 1;
    int strip_next = 0, trim_next = 0; /* what the previous tag's close asks of the next text */
    vkg_status st = VKG_OK;
    while (i <= len) {
        /* the text up to the next tag */
        size_t t = i;
        while (t + 1 < len && !(src[t] == '{' && (src[t + 1] == '{' || src[t + 1] == '%' || src[t + 1] == '#'))) t++;
        if (t + 1 >= len) t = len;
        size_t a = i, b = t;
        int text_line = line;
        line += count_lines(src + i, t - i);
        if (strip_next) {
            while (a < b && is_space(src[a])) a++;
        } else if (trim_next && a < b && src[a] == '\n') {
            a++;
        }
        if (t < len) {
            char kind = src[t + 1];
            char mod = t + 2 < len ? src[t + 2] : 0;
            if (mod == '-') {
                while (b > a && is_space(src[b - 1])) b--;
            } else if (kind != '{' && mod != '+') {
                /* lstrip_blocks: only spaces and tabs back to the line's start */
                size_t k = b;
                while (k > i && (src[k - 1] == ' ' || src[k - 1] == '\t')) k--;
                if (k == 0 || src[k - 1] == '\n') {
                    if (k > a) b = k;
                    else b = a;
                }
            }
        }
        if (b > a) {
            int skipped = count_lines(src + i, a - i);
            if (push(out, JT_TEXT, text_line + skipped, src + a, b - a)) goto oom;
        }
        if (t >= len) break;
        char kind = src[t + 1];
        i = t + 2;
        if (i < len && (src[i] == '-' || src[i] == '+')) i++;
        int strip_after = 0, keep_after = 0;
        if (kind == '#') {
            size_t e = i;
            while (e + 1 < len && !(src[e] == '#' && src[e + 1] == '}')) e++;
            if (e + 1 >= len) {
                st = vkg_error_set(err, VKG_ERR_FORMAT, "template line %d: comment not closed", line);
                goto fail;
            }
            strip_after = e > i && src[e - 1] == '-';
            keep_after = e > i && src[e - 1] == '+';
            line += count_lines(src + i, e + 2 - i);
            i = e + 2;
            strip_next = strip_after;
            trim_next = !strip_after && !keep_after;
            continue;
        }
        if (push(out, kind == '{' ? JT_EXPR_OPEN : JT_STMT_OPEN, line, "", 0)) goto oom;
        st = lex_tag(src, len, &i, &line, kind == '{', out, &strip_after, &keep_after, err);
        if (st != VKG_OK) goto fail;
        strip_next = strip_after;
        trim_next = kind == '%' && !strip_after && !keep_after;
    }
    if (push(out, JT_END, line, "", 0)) goto oom;
    return VKG_OK;
oom:
    st = vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "template: out of memory");
fail:
    jinja_tokens_free(out);
    return st;
}
