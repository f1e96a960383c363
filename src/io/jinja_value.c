/* Values of a render, allocated from one arena the render frees at its end, and how Python
 * prints them: str() for {{ }} and ~, json.dumps for tojson (transformers' definition:
 * ensure_ascii=False, separators ", " and ": ", keys in insertion order). */
#include "io/jinja.h"

#include "base/error.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The arena: values are bump-allocated from 64 KiB chunks (a larger request gets a chunk of its
 * own), all freed together when the render ends. */
typedef struct block {
    struct block *next;
    size_t used, size;
    max_align_t data[];
} block;

#define JINJA_CHUNK ((size_t)64 << 10)

void *jinja_alloc(jinja_render *r, size_t size) {
    if (r->failed) return NULL;
    size = (size + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
    block *b = r->blocks;
    if (b && b->size - b->used >= size) {
        void *p = (char *)b->data + b->used;
        b->used += size;
        memset(p, 0, size);
        return p;
    }
    size_t chunk = size > JINJA_CHUNK / 4 ? size : JINJA_CHUNK;
    if (size > JINJA_MAX_MEMORY || r->used_memory + chunk > JINJA_MAX_MEMORY) {
        jinja_fail(r, 0, VKG_ERR_OUT_OF_MEMORY, "the render needs more than %u MiB of memory", JINJA_MAX_MEMORY >> 20);
        return NULL;
    }
    block *nb = calloc(1, sizeof *nb + chunk);
    if (!nb) {
        jinja_fail(r, 0, VKG_ERR_OUT_OF_MEMORY, "out of memory");
        return NULL;
    }
    r->used_memory += chunk + sizeof *nb;
    nb->size = chunk;
    nb->used = size;
    if (b && size > JINJA_CHUNK / 4) { /* keep bump-allocating from the current chunk */
        nb->next = b->next;
        b->next = nb;
    } else {
        nb->next = b;
        r->blocks = nb;
    }
    return nb->data;
}

jinja_value *jinja_new(jinja_render *r, jinja_type type) {
    jinja_value *v = jinja_alloc(r, sizeof *v);
    if (v) v->type = type;
    return v;
}
jinja_value *jinja_str(jinja_render *r, const char *s, size_t len) {
    jinja_value *v = jinja_new(r, JV_STRING);
    char *p = v ? jinja_alloc(r, len + 1) : NULL;
    if (!p) return NULL;
    if (len) memcpy(p, s, len);
    p[len] = 0;
    v->s = p;
    v->len = len;
    return v;
}
/* Values are never changed once made (only lists, dicts and namespaces grow, and those are
 * always fresh), so the small integers and the constants are shared, not allocated: a loop's
 * counters then cost no memory per iteration. */
#define SMALL_INTS 1024
#define I1(n) {.type = JV_INT, .i = (n)}
#define I4(n) I1(n), I1((n) + 1), I1((n) + 2), I1((n) + 3)
#define I16(n) I4(n), I4((n) + 4), I4((n) + 8), I4((n) + 12)
#define I64(n) I16(n), I16((n) + 16), I16((n) + 32), I16((n) + 48)
#define I256(n) I64(n), I64((n) + 64), I64((n) + 128), I64((n) + 192)
static jinja_value small_ints[SMALL_INTS] = {I256(0), I256(256), I256(512), I256(768)};
static jinja_value constants[4] = {{.type = JV_BOOL, .b = 0}, {.type = JV_BOOL, .b = 1}, {.type = JV_NONE}, {.type = JV_UNDEFINED}};

jinja_value *jinja_int(jinja_render *r, int64_t i) {
    if (r->failed) return NULL;
    if (i >= 0 && i < SMALL_INTS) return &small_ints[i];
    jinja_value *v = jinja_new(r, JV_INT);
    if (v) v->i = i;
    return v;
}
jinja_value *jinja_float(jinja_render *r, double f) {
    jinja_value *v = jinja_new(r, JV_FLOAT);
    if (v) v->f = f;
    return v;
}
jinja_value *jinja_bool(jinja_render *r, int b) { return r->failed ? NULL : &constants[b != 0]; }
jinja_value *jinja_none(jinja_render *r) { return r->failed ? NULL : &constants[2]; }
jinja_value *jinja_undefined(jinja_render *r) { return r->failed ? NULL : &constants[3]; }

static int grow_to(jinja_render *r, jinja_value *c, size_t cap);
static int grow(jinja_render *r, jinja_value *c) {
    if (c->n < c->cap) return 0;
    return grow_to(r, c, c->cap ? 2 * c->cap : 4);
}
int jinja_reserve(jinja_render *r, jinja_value *c, size_t n) {
    return c->n + n <= c->cap ? 0 : grow_to(r, c, c->n + n);
}
static int grow_to(jinja_render *r, jinja_value *c, size_t cap) {
    jinja_value **items = jinja_alloc(r, cap * sizeof *items);
    jinja_value **keys = c->type == JV_LIST ? NULL : jinja_alloc(r, cap * sizeof *keys);
    if (!items || (c->type != JV_LIST && !keys)) return -1;
    if (c->n) {
        memcpy(items, c->items, c->n * sizeof *items);
        if (keys) memcpy(keys, c->keys, c->n * sizeof *keys);
    }
    c->items = items;
    c->keys = keys;
    c->cap = cap;
    return 0;
}

int jinja_push(jinja_render *r, jinja_value *list, jinja_value *item) {
    if (!item || grow(r, list)) return -1;
    list->items[list->n++] = item;
    return 0;
}

jinja_value *jinja_dict_get(const jinja_value *d, const char *key, size_t klen) {
    if (!d || (d->type != JV_DICT && d->type != JV_NAMESPACE)) return NULL;
    for (size_t i = 0; i < d->n; i++)
        if (d->keys[i]->len == klen && memcmp(d->keys[i]->s, key, klen) == 0) return d->items[i];
    return NULL;
}

int jinja_dict_set(jinja_render *r, jinja_value *d, const char *key, size_t klen, jinja_value *v) {
    if (!v) return -1;
    for (size_t i = 0; i < d->n; i++)
        if (d->keys[i]->len == klen && memcmp(d->keys[i]->s, key, klen) == 0) {
            d->items[i] = v;
            return 0;
        }
    jinja_value *k = jinja_str(r, key, klen);
    if (!k || grow(r, d)) return -1;
    d->keys[d->n] = k;
    d->items[d->n++] = v;
    return 0;
}

int jinja_dict_add(jinja_render *r, jinja_value *d, jinja_value *key, jinja_value *v) {
    if (!key || !v || grow(r, d)) return -1;
    d->keys[d->n] = key;
    d->items[d->n++] = v;
    return 0;
}

jinja_value *jinja_from_json(jinja_render *r, const vkg_json *j) {
    size_t len = 0;
    switch (vkg_json_type_of(j)) {
    case VKG_JSON_NULL: return jinja_none(r);
    case VKG_JSON_BOOL: return jinja_bool(r, vkg_json_bool(j));
    case VKG_JSON_NUMBER: {
        /* the reader keeps numbers as doubles: an integral one is read as Python's json reads
         * "3" (an int); "3.0" also becomes 3 */
        double d = vkg_json_number(j);
        if (d == floor(d) && fabs(d) < 9007199254740992.0) return jinja_int(r, (int64_t)d);
        return jinja_float(r, d);
    }
    case VKG_JSON_STRING: {
        const char *s = vkg_json_string(j, &len);
        return jinja_str(r, s, len);
    }
    case VKG_JSON_ARRAY: {
        jinja_value *l = jinja_new(r, JV_LIST);
        for (size_t i = 0; l && i < vkg_json_length(j); i++)
            if (jinja_push(r, l, jinja_from_json(r, vkg_json_at(j, i)))) return NULL;
        return l;
    }
    case VKG_JSON_OBJECT: {
        jinja_value *d = jinja_new(r, JV_DICT);
        for (size_t i = 0; d && i < vkg_json_length(j); i++) {
            const char *k = vkg_json_key_at(j, i, &len);
            if (jinja_dict_set(r, d, k, len, jinja_from_json(r, vkg_json_at(j, i)))) return NULL;
        }
        return d;
    }
    }
    return NULL;
}

int jinja_truthy(const jinja_value *v) {
    switch (v->type) {
    case JV_UNDEFINED:
    case JV_NONE: return 0;
    case JV_BOOL: return v->b;
    case JV_INT: return v->i != 0;
    case JV_FLOAT: return v->f != 0;
    case JV_STRING: return v->len != 0;
    case JV_LIST:
    case JV_DICT: return v->n != 0;
    default: return 1;
    }
}

static int is_number(const jinja_value *v) { return v->type == JV_INT || v->type == JV_FLOAT || v->type == JV_BOOL; }
static double num(const jinja_value *v) {
    return v->type == JV_FLOAT ? v->f : v->type == JV_INT ? (double)v->i : (double)v->b;
}

int jinja_equal(const jinja_value *a, const jinja_value *b) {
    if (is_number(a) && is_number(b)) {
        if (a->type != JV_FLOAT && b->type != JV_FLOAT)
            return (a->type == JV_INT ? a->i : a->b) == (b->type == JV_INT ? b->i : b->b);
        return num(a) == num(b);
    }
    if (a->type != b->type) return 0;
    switch (a->type) {
    case JV_UNDEFINED:
    case JV_NONE: return 1;
    case JV_STRING: return a->len == b->len && memcmp(a->s, b->s, a->len) == 0;
    case JV_LIST:
        if (a->n != b->n) return 0;
        for (size_t i = 0; i < a->n; i++)
            if (!jinja_equal(a->items[i], b->items[i])) return 0;
        return 1;
    case JV_DICT:
        if (a->n != b->n) return 0;
        for (size_t i = 0; i < a->n; i++) {
            jinja_value *o = jinja_dict_get(b, a->keys[i]->s, a->keys[i]->len);
            if (!o || !jinja_equal(a->items[i], o)) return 0;
        }
        return 1;
    default: return a == b;
    }
}

const char *jinja_type_name(const jinja_value *v) {
    static const char *const names[] = {"undefined", "none", "bool", "int", "float", "string", "list",
                                        "dict", "namespace", "macro", "function"};
    return names[v->type];
}

int jinja_buf_add(jinja_render *r, jinja_buf *b, const char *s, size_t n) {
    if (r->failed) return -1;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->n + n + 1) {
            if (cap > (size_t)JINJA_MAX_MEMORY) return jinja_fail(r, 0, VKG_ERR_OUT_OF_MEMORY, "a string grew past %u MiB", JINJA_MAX_MEMORY >> 20);
            cap *= 2;
        }
        char *p = jinja_alloc(r, cap);
        if (!p) return -1;
        if (b->n) memcpy(p, b->p, b->n);
        b->p = p;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
    return 0;
}

void jinja_format_float(double f, char *out, size_t size) {
    if (isnan(f)) {
        snprintf(out, size, "nan");
        return;
    }
    if (isinf(f)) {
        snprintf(out, size, f > 0 ? "inf" : "-inf");
        return;
    }
    /* the shortest %.{p}e that reads back exactly, laid out as Python's repr does */
    char e[40];
    int p;
    for (p = 1; p <= 17; p++) {
        snprintf(e, sizeof e, "%.*e", p - 1, f);
        if (strtod(e, NULL) == f) break;
    }
    char digits[20];
    int nd = 0, neg = e[0] == '-';
    const char *q = e + neg;
    for (; *q && *q != 'e'; q++)
        if (*q >= '0' && *q <= '9') digits[nd++] = *q;
    int exp10 = atoi(q + 1);
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    digits[nd] = 0;
    char *o = out;
    size_t left = size;
#define PUT(...) do { int w_ = snprintf(o, left, __VA_ARGS__); if (w_ < 0 || (size_t)w_ >= left) return; o += w_; left -= (size_t)w_; } while (0)
    if (neg) PUT("-");
    if (exp10 >= 16 || exp10 < -4) {
        PUT("%c", digits[0]);
        if (nd > 1) PUT(".%s", digits + 1);
        PUT("e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
    } else if (exp10 >= 0) {
        for (int i = 0; i <= exp10; i++) PUT("%c", i < nd ? digits[i] : '0');
        PUT(".");
        if (nd > exp10 + 1) PUT("%s", digits + exp10 + 1);
        else PUT("0");
    } else {
        PUT("0.");
        for (int i = 0; i < -exp10 - 1; i++) PUT("0");
        PUT("%s", digits);
    }
#undef PUT
}

/* Python's repr of a str: single quotes unless the text holds ' and no ". */
static int repr_str(jinja_render *r, const jinja_value *v, jinja_buf *b) {
    int has_sq = memchr(v->s, '\'', v->len) != NULL, has_dq = memchr(v->s, '"', v->len) != NULL;
    char q = has_sq && !has_dq ? '"' : '\'';
    if (jinja_buf_add(r, b, &q, 1)) return -1;
    for (size_t i = 0; i < v->len; i++) {
        unsigned char c = (unsigned char)v->s[i];
        char esc[8];
        const char *s = esc;
        size_t n = 2;
        if (c == '\\') s = "\\\\";
        else if (c == (unsigned char)q) { esc[0] = '\\'; esc[1] = q; }
        else if (c == '\n') s = "\\n";
        else if (c == '\r') s = "\\r";
        else if (c == '\t') s = "\\t";
        else if (c < 0x20 || c == 0x7f) n = (size_t)snprintf(esc, sizeof esc, "\\x%02x", c);
        else { esc[0] = (char)c; n = 1; }
        if (jinja_buf_add(r, b, s, n)) return -1;
    }
    return jinja_buf_add(r, b, &q, 1);
}

static int repr(jinja_render *r, const jinja_value *v, jinja_buf *b, int depth);

static int str_of(jinja_render *r, const jinja_value *v, jinja_buf *b, int depth) {
    char tmp[64];
    if (depth > JINJA_MAX_DEPTH) return jinja_fail(r, 0, VKG_ERR_UNSUPPORTED, "a value nested deeper than %d levels", JINJA_MAX_DEPTH);
    switch (v->type) {
    case JV_UNDEFINED: return 0;
    case JV_NONE: return jinja_buf_add(r, b, "None", 4);
    case JV_BOOL: return v->b ? jinja_buf_add(r, b, "True", 4) : jinja_buf_add(r, b, "False", 5);
    case JV_INT: snprintf(tmp, sizeof tmp, "%lld", (long long)v->i); return jinja_buf_add(r, b, tmp, strlen(tmp));
    case JV_FLOAT: jinja_format_float(v->f, tmp, sizeof tmp); return jinja_buf_add(r, b, tmp, strlen(tmp));
    case JV_STRING: return jinja_buf_add(r, b, v->s, v->len);
    case JV_LIST:
        if (jinja_buf_add(r, b, "[", 1)) return -1;
        for (size_t i = 0; i < v->n; i++)
            if ((i && jinja_buf_add(r, b, ", ", 2)) || repr(r, v->items[i], b, depth + 1)) return -1;
        return jinja_buf_add(r, b, "]", 1);
    case JV_DICT:
        if (jinja_buf_add(r, b, "{", 1)) return -1;
        for (size_t i = 0; i < v->n; i++)
            if ((i && jinja_buf_add(r, b, ", ", 2)) || repr_str(r, v->keys[i], b) || jinja_buf_add(r, b, ": ", 2) ||
                repr(r, v->items[i], b, depth + 1))
                return -1;
        return jinja_buf_add(r, b, "}", 1);
    default:
        return jinja_fail(r, 0, VKG_ERR_UNSUPPORTED, "cannot print a %s", jinja_type_name(v));
    }
}

static int repr(jinja_render *r, const jinja_value *v, jinja_buf *b, int depth) {
    if (v->type == JV_STRING) return repr_str(r, v, b);
    return str_of(r, v, b, depth);
}

int jinja_to_str(jinja_render *r, const jinja_value *v, jinja_buf *b) { return str_of(r, v, b, 0); }

static int json_str(jinja_render *r, const char *s, size_t len, jinja_buf *b) {
    if (jinja_buf_add(r, b, "\"", 1)) return -1;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[8];
        const char *e = NULL;
        size_t n = 2;
        switch (c) {
        case '"': e = "\\\""; break;
        case '\\': e = "\\\\"; break;
        case '\n': e = "\\n"; break;
        case '\r': e = "\\r"; break;
        case '\t': e = "\\t"; break;
        case '\b': e = "\\b"; break;
        case '\f': e = "\\f"; break;
        default:
            if (c < 0x20) {
                n = (size_t)snprintf(esc, sizeof esc, "\\u%04x", c);
                e = esc;
            }
        }
        if (e ? jinja_buf_add(r, b, e, n) : jinja_buf_add(r, b, (const char *)&s[i], 1)) return -1;
    }
    return jinja_buf_add(r, b, "\"", 1);
}

static int newline_indent(jinja_render *r, jinja_buf *b, int indent, int level) {
    if (jinja_buf_add(r, b, "\n", 1)) return -1;
    for (int i = 0; i < indent * level; i++)
        if (jinja_buf_add(r, b, " ", 1)) return -1;
    return 0;
}

int jinja_to_json(jinja_render *r, const jinja_value *v, int indent, int depth, jinja_buf *b) {
    char tmp[64];
    if (depth > JINJA_MAX_DEPTH) return jinja_fail(r, 0, VKG_ERR_UNSUPPORTED, "a value nested deeper than %d levels", JINJA_MAX_DEPTH);
    const char *item_sep = indent >= 0 ? "," : ", ";
    switch (v->type) {
    case JV_UNDEFINED:
        return jinja_fail(r, 0, VKG_ERR_INVALID_ARGUMENT, "tojson of an undefined value");
    case JV_NONE: return jinja_buf_add(r, b, "null", 4);
    case JV_BOOL: return v->b ? jinja_buf_add(r, b, "true", 4) : jinja_buf_add(r, b, "false", 5);
    case JV_INT: snprintf(tmp, sizeof tmp, "%lld", (long long)v->i); return jinja_buf_add(r, b, tmp, strlen(tmp));
    case JV_FLOAT:
        if (isnan(v->f)) return jinja_buf_add(r, b, "NaN", 3);
        if (isinf(v->f)) return v->f > 0 ? jinja_buf_add(r, b, "Infinity", 8) : jinja_buf_add(r, b, "-Infinity", 9);
        jinja_format_float(v->f, tmp, sizeof tmp);
        return jinja_buf_add(r, b, tmp, strlen(tmp));
    case JV_STRING: return json_str(r, v->s, v->len, b);
    case JV_LIST:
    case JV_DICT:
    case JV_NAMESPACE: {
        int is_list = v->type == JV_LIST;
        if (jinja_buf_add(r, b, is_list ? "[" : "{", 1)) return -1;
        for (size_t i = 0; i < v->n; i++) {
            if (i && jinja_buf_add(r, b, item_sep, strlen(item_sep))) return -1;
            if (indent >= 0 && newline_indent(r, b, indent, depth + 1)) return -1;
            if (!is_list && (json_str(r, v->keys[i]->s, v->keys[i]->len, b) || jinja_buf_add(r, b, ": ", 2))) return -1;
            if (jinja_to_json(r, v->items[i], indent, depth + 1, b)) return -1;
        }
        if (v->n && indent >= 0 && newline_indent(r, b, indent, depth)) return -1;
        return jinja_buf_add(r, b, is_list ? "]" : "}", 1);
    }
    default:
        return jinja_fail(r, 0, VKG_ERR_UNSUPPORTED, "tojson of a %s", jinja_type_name(v));
    }
}
