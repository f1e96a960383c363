/* Strict JSON parser: recursive descent over bytes into a tree held in one arena. */
#include "base/json.h"

#include "base/error.h"
#include "base/file_open.h"

#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- arena: every node, key, string and child array of one document --------------------------- */

typedef struct json_chunk {
    struct json_chunk *next;
    size_t used, cap;
} json_chunk;

typedef struct json_arena {
    json_chunk *head;
} json_arena;

#define JSON_ALIGN 16u
#define JSON_CHUNK_HEADER ((sizeof(json_chunk) + JSON_ALIGN - 1) & ~(size_t)(JSON_ALIGN - 1))
#define JSON_CHUNK_MIN ((size_t)64 * 1024)

static void *arena_alloc(json_arena *a, size_t bytes) {
    bytes = (bytes + JSON_ALIGN - 1) & ~(size_t)(JSON_ALIGN - 1);
    json_chunk *c = a->head;
    if (!c || c->cap - c->used < bytes) {
        /* Chunks grow with the document so a large vocabulary costs few mallocs. */
        size_t cap = c ? c->cap * 2 : JSON_CHUNK_MIN;
        if (cap > (size_t)16 << 20) cap = (size_t)16 << 20;
        if (cap < bytes) cap = bytes;
        json_chunk *n = malloc(JSON_CHUNK_HEADER + cap);
        if (!n) return NULL;
        n->next = c;
        n->used = 0;
        n->cap = cap;
        a->head = n;
        c = n;
    }
    void *p = (unsigned char *)c + JSON_CHUNK_HEADER + c->used;
    c->used += bytes;
    return p;
}

static void arena_free(json_arena *a) {
    if (!a) return;
    json_chunk *c = a->head;
    while (c) {
        json_chunk *next = c->next;
        free(c);
        c = next;
    }
    free(a);
}

/* ---- the tree ---------------------------------------------------------------------------------- */

typedef struct json_key {
    const char *s;
    size_t len;
    size_t offset; /* byte offset in the text, for the duplicate-key message */
} json_key;

struct vkg_json {
    vkg_json_type type;
    size_t len; /* bytes of a string, or elements of an array / object */
    union {
        double number;
        int boolean;
        const char *str;
        struct {
            vkg_json **items;
            json_key *keys;      /* objects only                                          */
            uint32_t *index;     /* objects: open addressing, a slot holds key index + 1,
                                    0 = empty; at most half full                             */
            size_t index_mask;
        } c;
    } u;
    json_arena *owner; /* the root only */
};

/* ---- parser state and errors ------------------------------------------------------------------- */

typedef struct json_parser {
    const unsigned char *start, *p, *end;
    json_arena *arena;
    vkg_json **vals; /* children of the containers being parsed, innermost last */
    size_t nvals, capvals;
    json_key *keys;
    size_t nkeys, capkeys;
    vkg_error *err;
    vkg_status status;
} json_parser;

static void describe_byte(const json_parser *ps, const unsigned char *at, char *buf, size_t n) {
    if (at >= ps->end) snprintf(buf, n, "end of input");
    else if (*at >= 0x21 && *at < 0x7f) snprintf(buf, n, "'%c'", *at);
    else if (*at == ' ') snprintf(buf, n, "a space");
    else if (*at < 0x20) snprintf(buf, n, "control character 0x%02X", *at);
    else snprintf(buf, n, "byte 0x%02X", *at);
}

/* Records a format error at byte `at`: "JSON line L, column C (byte B): <what>". */
static vkg_json *json_fail(json_parser *ps, const unsigned char *at, const char *fmt, ...)
    VKG_PRINTF(3, 4);
static vkg_json *json_fail(json_parser *ps, const unsigned char *at, const char *fmt, ...) {
    if (ps->status != VKG_OK) return NULL; /* keep the first, innermost message */
    if (at > ps->end) at = ps->end;
    size_t line = 1, col = 1;
    for (const unsigned char *q = ps->start; q < at; q++) {
        if (*q == '\n') {
            line++;
            col = 1;
        } else if ((*q & 0xC0) != 0x80) {
            col++; /* count characters: UTF-8 continuation bytes do not start one */
        }
    }
    char what[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    ps->status = vkg_error_set(ps->err, VKG_ERR_FORMAT, "JSON line %zu, column %zu (byte %zu): %s", line,
                               col, (size_t)(at - ps->start), what);
    return NULL;
}

static vkg_json *json_oom(json_parser *ps) {
    if (ps->status == VKG_OK)
        ps->status = vkg_error_set(ps->err, VKG_ERR_OUT_OF_MEMORY, "out of memory while parsing JSON");
    return NULL;
}

static vkg_json *new_node(json_parser *ps, vkg_json_type type) {
    vkg_json *v = arena_alloc(ps->arena, sizeof *v);
    if (!v) return json_oom(ps);
    memset(v, 0, sizeof *v);
    v->type = type;
    return v;
}

static void skip_ws(json_parser *ps) {
    const unsigned char *p = ps->p, *end = ps->end;
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) p++;
    ps->p = p;
}

/* ---- strings ----------------------------------------------------------------------------------- */

static int hex_value(unsigned char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Reads 4 hex digits at p (the closing quote stops it, so it never passes the string's end). */
static long read_hex4(const unsigned char *p) {
    long v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hex_value(p[i]);
        if (h < 0) return -1;
        v = v * 16 + h;
    }
    return v;
}

/* ps->p is at the opening quote.  Decodes into the arena; *out is NUL-terminated. */
static int parse_string(json_parser *ps, const char **out, size_t *out_len) {
    const unsigned char *open = ps->p, *q = open + 1, *end = ps->end;
    /* Find the closing quote first: the decoded text is never longer than the raw text, so one
     * allocation of the raw size holds it. */
    while (q < end && *q != '"') q += (*q == '\\' && end - q > 1) ? 2 : 1;
    if (q >= end) {
        json_fail(ps, open, "unterminated string (no closing '\"' before the end of input)");
        return 0;
    }
    char *buf = arena_alloc(ps->arena, (size_t)(q - open));
    if (!buf) {
        json_oom(ps);
        return 0;
    }
    char *o = buf;
    const unsigned char *p = open + 1;
    while (p < q) {
        unsigned char c = *p;
        if (c >= 0x20 && c < 0x80 && c != '\\') {
            *o++ = (char)c;
            p++;
        } else if (c < 0x20) {
            json_fail(ps, p, "control character 0x%02X inside a string (write it as an escape, e.g. "
                             "\\n or \\u%04X)", c, c);
            return 0;
        } else if (c >= 0x80) {
            uint32_t cp;
            size_t n = vkg_utf8_decode((const char *)p, (size_t)(q - p), &cp);
            if (cp == VKG_UTF8_INVALID) {
                json_fail(ps, p, "invalid UTF-8 byte 0x%02X in string", c);
                return 0;
            }
            memcpy(o, p, n);
            o += n;
            p += n;
        } else {
            unsigned char e = p[1]; /* p + 1 < q + 1: the raw scan kept escapes paired */
            switch (e) {
            case '"': *o++ = '"'; break;
            case '\\': *o++ = '\\'; break;
            case '/': *o++ = '/'; break;
            case 'b': *o++ = '\b'; break;
            case 'f': *o++ = '\f'; break;
            case 'n': *o++ = '\n'; break;
            case 'r': *o++ = '\r'; break;
            case 't': *o++ = '\t'; break;
            case 'u': {
                long cp = read_hex4(p + 2);
                if (cp < 0) {
                    json_fail(ps, p, "\\u must be followed by 4 hex digits");
                    return 0;
                }
                if (cp >= 0xDC00 && cp <= 0xDFFF) {
                    json_fail(ps, p, "lone low surrogate \\u%04lX (it must follow a high surrogate "
                                     "\\uD800-\\uDBFF)", cp);
                    return 0;
                }
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    long lo = (q - p >= 12 && p[6] == '\\' && p[7] == 'u') ? read_hex4(p + 8) : -1;
                    if (lo < 0xDC00 || lo > 0xDFFF) {
                        json_fail(ps, p, "high surrogate \\u%04lX is not followed by a low surrogate "
                                         "\\uDC00-\\uDFFF", cp);
                        return 0;
                    }
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    p += 6;
                }
                o += vkg_utf8_encode((uint32_t)cp, o);
                p += 4;
                break;
            }
            default:
                json_fail(ps, p, "invalid escape '\\%c' in string (valid: \\\" \\\\ \\/ \\b \\f \\n \\r \\t "
                                 "\\uXXXX)", (e >= 0x20 && e < 0x7f) ? e : '?');
                return 0;
            }
            p += 2;
        }
    }
    *o = '\0';
    *out = buf;
    *out_len = (size_t)(o - buf);
    ps->p = q + 1;
    return 1;
}

/* ---- numbers and literals ---------------------------------------------------------------------- */

static int is_digit(const json_parser *ps, const unsigned char *p) {
    return p < ps->end && *p >= '0' && *p <= '9';
}

static vkg_json *parse_number(json_parser *ps) {
    const unsigned char *s = ps->p, *p = s;
    int negative = 0, simple = 1;
    if (*p == '-') {
        negative = 1;
        p++;
    }
    if (!is_digit(ps, p)) return json_fail(ps, p, "expected a digit after '-'");
    if (*p == '0') {
        p++;
        if (is_digit(ps, p)) return json_fail(ps, s, "leading zeros are not allowed in numbers");
    } else {
        while (is_digit(ps, p)) p++;
    }
    if (p < ps->end && *p == '.') {
        simple = 0;
        p++;
        if (!is_digit(ps, p)) return json_fail(ps, p, "expected a digit after the decimal point");
        while (is_digit(ps, p)) p++;
    }
    if (p < ps->end && (*p == 'e' || *p == 'E')) {
        simple = 0;
        p++;
        if (p < ps->end && (*p == '+' || *p == '-')) p++;
        if (!is_digit(ps, p)) return json_fail(ps, p, "expected a digit in the exponent");
        while (is_digit(ps, p)) p++;
    }
    size_t n = (size_t)(p - s);
    vkg_json *v = new_node(ps, VKG_JSON_NUMBER);
    if (!v) return NULL;
    if (simple && n - (size_t)negative <= 15) {
        /* Integers of up to 15 digits are exact in a double: no strtod needed. */
        int64_t x = 0;
        for (const unsigned char *d = s + negative; d < p; d++) x = x * 10 + (*d - '0');
        v->u.number = negative ? -(double)x : (double)x;
    } else {
        char small[64], *buf = n < sizeof small ? small : malloc(n + 1);
        if (!buf) return json_oom(ps);
        memcpy(buf, s, n);
        buf[n] = '\0';
        /* strtod follows the C locale's decimal point; JSON's is always '.'. */
        const char *dp = localeconv()->decimal_point;
        if (dp && dp[0] && dp[0] != '.' && !dp[1]) {
            char *dot = strchr(buf, '.');
            if (dot) *dot = dp[0];
        }
        double d = strtod(buf, NULL);
        if (buf != small) free(buf);
        if (isinf(d))
            return json_fail(ps, s, "number %.*s is out of the range of a double", (int)(n > 40 ? 40 : n),
                             (const char *)s);
        v->u.number = d;
    }
    ps->p = p;
    return v;
}

static vkg_json *parse_literal(json_parser *ps, const char *word, vkg_json_type type, int value) {
    size_t n = strlen(word);
    if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0)
        return json_fail(ps, ps->p, "invalid literal (did you mean '%s'?)", word);
    vkg_json *v = new_node(ps, type);
    if (!v) return NULL;
    v->u.boolean = value;
    ps->p += n;
    return v;
}

/* ---- containers -------------------------------------------------------------------------------- */

/* Makes room for one more element in a growable array of `size`-byte elements. */
static int grow(json_parser *ps, void **items, size_t n, size_t *cap, size_t size) {
    if (n < *cap) return 1;
    size_t ncap = *cap ? *cap * 2 : 256;
    void *grown = realloc(*items, ncap * size);
    if (!grown) return json_oom(ps), 0;
    *items = grown;
    *cap = ncap;
    return 1;
}

static int push_value(json_parser *ps, vkg_json *v) {
    if (!grow(ps, (void **)&ps->vals, ps->nvals, &ps->capvals, sizeof *ps->vals)) return 0;
    ps->vals[ps->nvals++] = v;
    return 1;
}

static int push_key(json_parser *ps, json_key k) {
    if (!grow(ps, (void **)&ps->keys, ps->nkeys, &ps->capkeys, sizeof *ps->keys)) return 0;
    ps->keys[ps->nkeys++] = k;
    return 1;
}

static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ull;
    }
    return h;
}

/* Moves the children pushed since `base` into the node; builds the key index of an object (so a
 * 50,257-key vocabulary answers lookups at once) and rejects duplicate keys. */
static vkg_json *finish_container(json_parser *ps, vkg_json *v, size_t base, size_t kbase) {
    size_t n = ps->nvals - base;
    v->len = n;
    if (n) {
        v->u.c.items = arena_alloc(ps->arena, n * sizeof(vkg_json *));
        if (!v->u.c.items) return json_oom(ps);
        memcpy(v->u.c.items, ps->vals + base, n * sizeof(vkg_json *));
    }
    ps->nvals = base;
    if (v->type != VKG_JSON_OBJECT || !n) return v;
    json_key *keys = arena_alloc(ps->arena, n * sizeof *keys);
    if (!keys) return json_oom(ps);
    memcpy(keys, ps->keys + kbase, n * sizeof *keys);
    ps->nkeys = kbase;
    v->u.c.keys = keys;
    size_t cap = 4;
    while (cap < 2 * n) cap *= 2;
    uint32_t *index = arena_alloc(ps->arena, cap * sizeof *index);
    if (!index) return json_oom(ps);
    memset(index, 0, cap * sizeof *index);
    for (size_t i = 0; i < n; i++) {
        size_t slot = (size_t)hash_bytes(keys[i].s, keys[i].len) & (cap - 1);
        while (index[slot]) {
            const json_key *o = &keys[index[slot] - 1];
            if (o->len == keys[i].len && memcmp(o->s, keys[i].s, o->len) == 0)
                return json_fail(ps, ps->start + keys[i].offset, "duplicate key \"%.*s\" in object",
                                 (int)(keys[i].len > 100 ? 100 : keys[i].len), keys[i].s);
            slot = (slot + 1) & (cap - 1);
        }
        index[slot] = (uint32_t)(i + 1);
    }
    v->u.c.index = index;
    v->u.c.index_mask = cap - 1;
    return v;
}

static vkg_json *parse_value(json_parser *ps, int depth);

#define JSON_VALUE_KINDS "object, array, string, number, true, false or null"

/* An array or object: ps->p is at '[' or '{'.  Children go on the parser's stacks until the
 * closing bracket, then move into the node in one piece. */
static vkg_json *parse_container(json_parser *ps, int depth) {
    const int is_object = *ps->p == '{';
    const char close = is_object ? '}' : ']';
    vkg_json *v = new_node(ps, is_object ? VKG_JSON_OBJECT : VKG_JSON_ARRAY);
    if (!v) return NULL;
    size_t base = ps->nvals, kbase = ps->nkeys;
    char found[48];
    ps->p++;
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == close) {
        ps->p++;
        return finish_container(ps, v, base, kbase);
    }
    for (;;) {
        if (is_object) {
            if (ps->p >= ps->end || *ps->p != '"') {
                describe_byte(ps, ps->p, found, sizeof found);
                return json_fail(ps, ps->p, "expected a string key in object, found %s", found);
            }
            json_key k;
            k.offset = (size_t)(ps->p - ps->start);
            if (!parse_string(ps, &k.s, &k.len) || !push_key(ps, k)) return NULL;
            skip_ws(ps);
            if (ps->p >= ps->end || *ps->p != ':') {
                describe_byte(ps, ps->p, found, sizeof found);
                return json_fail(ps, ps->p, "expected ':' after object key \"%.*s\", found %s",
                                 (int)(k.len > 100 ? 100 : k.len), k.s, found);
            }
            ps->p++;
            skip_ws(ps);
        }
        vkg_json *item = parse_value(ps, depth + 1);
        if (!item || !push_value(ps, item)) return NULL;
        skip_ws(ps);
        if (ps->p < ps->end && *ps->p == ',') {
            ps->p++;
            skip_ws(ps);
            if (ps->p < ps->end && *ps->p == close) return json_fail(ps, ps->p, "trailing comma before '%c'", close);
            continue;
        }
        if (ps->p < ps->end && *ps->p == close) {
            ps->p++;
            return finish_container(ps, v, base, kbase);
        }
        describe_byte(ps, ps->p, found, sizeof found);
        return json_fail(ps, ps->p, "expected ',' or '%c' after an %s, found %s", close,
                         is_object ? "object member" : "array element", found);
    }
}

static vkg_json *parse_value(json_parser *ps, int depth) {
    if (ps->p >= ps->end)
        return json_fail(ps, ps->p, "expected a value (%s), found end of input", JSON_VALUE_KINDS);
    switch (*ps->p) {
    case '{':
    case '[':
        if (depth >= VKG_JSON_MAX_DEPTH)
            return json_fail(ps, ps->p, "arrays and objects nested deeper than %d levels",
                             VKG_JSON_MAX_DEPTH);
        return parse_container(ps, depth);
    case '"': {
        vkg_json *v = new_node(ps, VKG_JSON_STRING);
        if (!v || !parse_string(ps, &v->u.str, &v->len)) return NULL;
        return v;
    }
    case 't': return parse_literal(ps, "true", VKG_JSON_BOOL, 1);
    case 'f': return parse_literal(ps, "false", VKG_JSON_BOOL, 0);
    case 'n': return parse_literal(ps, "null", VKG_JSON_NULL, 0);
    default:
        if (*ps->p == '-' || (*ps->p >= '0' && *ps->p <= '9')) return parse_number(ps);
        {
            char found[48];
            describe_byte(ps, ps->p, found, sizeof found);
            return json_fail(ps, ps->p, "expected a value (%s), found %s", JSON_VALUE_KINDS, found);
        }
    }
}

/* ---- entry points ------------------------------------------------------------------------------ */

vkg_status vkg_json_parse(const char *text, size_t len, vkg_json **out, vkg_error *err) {
    if (out) *out = NULL;
    if (!out || (!text && len))
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_json_parse: NULL text or output pointer");
    json_parser ps;
    memset(&ps, 0, sizeof ps);
    ps.start = ps.p = (const unsigned char *)(text ? text : "");
    ps.end = ps.start + len;
    ps.err = err;
    ps.arena = calloc(1, sizeof *ps.arena);
    if (!ps.arena) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory while parsing JSON");
    if (len >= 3 && memcmp(ps.p, "\xEF\xBB\xBF", 3) == 0) ps.p += 3;
    skip_ws(&ps);
    vkg_json *root = parse_value(&ps, 0);
    if (root) {
        skip_ws(&ps);
        if (ps.p < ps.end) {
            char found[48];
            describe_byte(&ps, ps.p, found, sizeof found);
            root = json_fail(&ps, ps.p, "unexpected %s after the JSON value (only whitespace may follow it)",
                             found);
        }
    }
    free(ps.vals);
    free(ps.keys);
    if (!root) {
        arena_free(ps.arena);
        return ps.status;
    }
    root->owner = ps.arena;
    *out = root;
    return VKG_OK;
}

vkg_status vkg_json_parse_file(const char *path, vkg_json **out, vkg_error *err) {
    if (out) *out = NULL;
    if (!path || !out)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_json_parse_file: NULL argument");
    struct stat info;
    const char *what;
    FILE *f = vkg_fopen_regular(path, &info, &what);
    if (!f && what) return vkg_error_set(err, VKG_ERR_IO, "%s: is %s, not a regular file", path, what);
    if (!f) return vkg_error_set(err, VKG_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    long size = (long)info.st_size;
    char *buf = malloc((size_t)size + 1);
    if (!buf) {
        fclose(f);
        return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "%s: out of memory for %ld bytes", path, size);
    }
    size_t got = fread(buf, 1, (size_t)size, f);
    fclose(f);
    if (got != (size_t)size) {
        free(buf);
        return vkg_error_set(err, VKG_ERR_IO, "%s: read %zu of %ld bytes", path, got, size);
    }
    vkg_error local;
    vkg_status st = vkg_json_parse(buf, got, out, &local);
    free(buf);
    return st == VKG_OK ? VKG_OK : vkg_error_set(err, st, "%s: %s", path, local.message);
}

void vkg_json_free(vkg_json *root) {
    if (root) arena_free(root->owner);
}

/* ---- accessors --------------------------------------------------------------------------------- */

vkg_json_type vkg_json_type_of(const vkg_json *v) { return v ? v->type : VKG_JSON_NULL; }

const char *vkg_json_type_name(vkg_json_type t) {
    switch (t) {
    case VKG_JSON_NULL: return "null";
    case VKG_JSON_BOOL: return "boolean";
    case VKG_JSON_NUMBER: return "number";
    case VKG_JSON_STRING: return "string";
    case VKG_JSON_ARRAY: return "array";
    case VKG_JSON_OBJECT: return "object";
    }
    return "unknown";
}

size_t vkg_json_length(const vkg_json *v) {
    return (v && (v->type == VKG_JSON_ARRAY || v->type == VKG_JSON_OBJECT)) ? v->len : 0;
}

const vkg_json *vkg_json_at(const vkg_json *v, size_t i) {
    return i < vkg_json_length(v) ? v->u.c.items[i] : NULL;
}

const char *vkg_json_key_at(const vkg_json *v, size_t i, size_t *len) {
    if (!v || v->type != VKG_JSON_OBJECT || i >= v->len) {
        if (len) *len = 0;
        return NULL;
    }
    if (len) *len = v->u.c.keys[i].len;
    return v->u.c.keys[i].s;
}

const vkg_json *vkg_json_get_n(const vkg_json *obj, const char *key, size_t key_len) {
    if (!obj || obj->type != VKG_JSON_OBJECT || !obj->len || !key) return NULL;
    const json_key *keys = obj->u.c.keys;
    size_t mask = obj->u.c.index_mask, slot = (size_t)hash_bytes(key, key_len) & mask;
    for (uint32_t k; (k = obj->u.c.index[slot]) != 0; slot = (slot + 1) & mask) {
        const json_key *o = &keys[k - 1];
        if (o->len == key_len && memcmp(o->s, key, key_len) == 0) return obj->u.c.items[k - 1];
    }
    return NULL;
}

const vkg_json *vkg_json_get(const vkg_json *obj, const char *key) {
    return key ? vkg_json_get_n(obj, key, strlen(key)) : NULL;
}

const char *vkg_json_string(const vkg_json *v, size_t *len) {
    if (!v || v->type != VKG_JSON_STRING) {
        if (len) *len = 0;
        return NULL;
    }
    if (len) *len = v->len;
    return v->u.str;
}

double vkg_json_number(const vkg_json *v) { return (v && v->type == VKG_JSON_NUMBER) ? v->u.number : 0.0; }

int vkg_json_bool(const vkg_json *v) { return (v && v->type == VKG_JSON_BOOL) ? v->u.boolean : 0; }

void vkg_json_write_string(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
        else fputc(*p, f);
    }
    fputc('"', f);
}
