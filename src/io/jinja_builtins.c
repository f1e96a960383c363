/* The filters, tests and methods chat templates use, each as Jinja (with Python's str methods)
 * defines it; tojson as transformers redefines it.  The name tables here are what the parser
 * checks names against, so a template naming anything else is refused before it renders. */
#include "io/jinja.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const FILTERS[] = {"trim", "tojson", "length", "count", "upper", "lower", "capitalize", "title",
                                      "default", "d", "join", "items", "list", "string", "int", "float", "replace",
                                      "first", "last", "selectattr", "rejectattr", "map", "reverse", "abs", "unique", NULL};
static const char *const TESTS[] = {"defined", "undefined", "none", "string", "number", "integer", "float",
                                    "mapping", "iterable", "sequence", "boolean", "true", "false", "equalto",
                                    "eq", "sameas", "odd", "even", "in", "ne", NULL};
static const char *const METHODS[] = {"strip", "lstrip", "rstrip", "startswith", "endswith", "split", "upper",
                                      "lower", "replace", "title", "capitalize", "items", "keys", "values", "get", NULL};

static int known(const char *const *list, const char *name) {
    for (int i = 0; list[i]; i++)
        if (!strcmp(list[i], name)) return 1;
    return 0;
}
int jinja_filter_known(const char *name) { return known(FILTERS, name); }
int jinja_test_known(const char *name) { return known(TESTS, name); }
int jinja_method_known(const char *name) { return known(METHODS, name); }

static int is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

/* Python's str.strip() family; chars NULL strips whitespace. */
static jinja_value *strip(jinja_render *r, const jinja_value *s, const jinja_value *chars, int left, int right) {
    size_t a = 0, b = s->len;
#define STRIPPABLE(c) (chars ? memchr(chars->s, (c), chars->len) != NULL : is_ws(c))
    if (left)
        while (a < b && STRIPPABLE(s->s[a])) a++;
    if (right)
        while (b > a && STRIPPABLE(s->s[b - 1])) b--;
#undef STRIPPABLE
    return jinja_str(r, s->s + a, b - a);
}

static jinja_value *change_case(jinja_render *r, const jinja_value *s, int mode) {
    /* mode 0 lower, 1 upper, 2 capitalize, 3 title; ASCII letters only (UTF-8 bytes pass) */
    jinja_value *o = jinja_str(r, s->s, s->len);
    if (!o) return NULL;
    char *p = (char *)o->s;
    int word_start = 1;
    for (size_t i = 0; i < o->len; i++) {
        char c = p[i];
        int up;
        if (mode == 0) up = 0;
        else if (mode == 1) up = 1;
        else if (mode == 2) up = i == 0;
        else up = word_start;
        if (up && c >= 'a' && c <= 'z') p[i] = (char)(c - 32);
        if (!up && c >= 'A' && c <= 'Z') p[i] = (char)(c + 32);
        int alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || ((unsigned char)c >= 0x80);
        word_start = !alpha && !(c >= '0' && c <= '9') ? 1 : 0;
        if (mode == 3 && alpha) word_start = 0;
    }
    return o;
}

static jinja_value *replace(jinja_render *r, int line, const jinja_value *s, const jinja_value *old,
                            const jinja_value *new_, int64_t count) {
    jinja_buf b = {0};
    size_t i = 0;
    int64_t done = 0;
    if (old->len == 0) {
        /* Python inserts `new` before every character and at the end */
        for (i = 0; i <= s->len; i++) {
            if (count < 0 || done < count) {
                if (jinja_buf_add(r, &b, new_->s, new_->len)) return NULL;
                done++;
            }
            if (i < s->len && jinja_buf_add(r, &b, s->s + i, 1)) return NULL;
        }
    } else {
        while (i < s->len) {
            if ((count < 0 || done < count) && i + old->len <= s->len && memcmp(s->s + i, old->s, old->len) == 0) {
                if (jinja_buf_add(r, &b, new_->s, new_->len)) return NULL;
                i += old->len;
                done++;
            } else {
                if (jinja_buf_add(r, &b, s->s + i, 1)) return NULL;
                i++;
            }
        }
    }
    if (b.n > r->max_output) return jinja_fail(r, line, VKG_ERR_UNSUPPORTED, "replace() result passes the output limit"), NULL;
    return jinja_str(r, b.p ? b.p : "", b.n);
}

static jinja_value *split(jinja_render *r, const jinja_value *s, const jinja_value *sep, int64_t maxsplit) {
    jinja_value *l = jinja_new(r, JV_LIST);
    if (!l) return NULL;
    size_t i = 0;
    int64_t done = 0;
    if (!sep) { /* runs of whitespace, ends trimmed */
        while (i < s->len) {
            while (i < s->len && is_ws(s->s[i])) i++;
            if (i >= s->len) break;
            size_t j = i;
            if (maxsplit >= 0 && done >= maxsplit) {
                size_t e = s->len;
                while (e > i && is_ws(s->s[e - 1])) e--;
                return jinja_push(r, l, jinja_str(r, s->s + i, e - i)) ? NULL : l;
            }
            while (j < s->len && !is_ws(s->s[j])) j++;
            if (jinja_push(r, l, jinja_str(r, s->s + i, j - i))) return NULL;
            done++;
            i = j;
        }
        return l;
    }
    size_t start = 0;
    for (i = 0; i + sep->len <= s->len;) {
        if ((maxsplit < 0 || done < maxsplit) && memcmp(s->s + i, sep->s, sep->len) == 0) {
            if (jinja_push(r, l, jinja_str(r, s->s + start, i - start))) return NULL;
            i += sep->len;
            start = i;
            done++;
        } else {
            i++;
        }
    }
    return jinja_push(r, l, jinja_str(r, s->s + start, s->len - start)) ? NULL : l;
}

static size_t char_count(const jinja_value *s) {
    size_t n = 0;
    for (size_t i = 0; i < s->len; i++) n += ((unsigned char)s->s[i] & 0xC0) != 0x80;
    return n;
}

static jinja_value *items_of(jinja_render *r, const jinja_value *d) {
    jinja_value *l = jinja_new(r, JV_LIST);
    for (size_t i = 0; l && i < d->n; i++) {
        jinja_value *pair = jinja_new(r, JV_LIST);
        if (!pair || jinja_push(r, pair, d->keys[i]) || jinja_push(r, pair, d->items[i]) || jinja_push(r, l, pair)) return NULL;
    }
    return l;
}

static jinja_value *need(jinja_render *r, int line, const char *what, jinja_value *v, jinja_type t) {
    if (v->type != t) {
        jinja_value tmp = {.type = t};
        jinja_fail(r, line, VKG_ERR_INVALID_ARGUMENT, "%s needs a %s, not a %s", what, jinja_type_name(&tmp), jinja_type_name(v));
        return NULL;
    }
    return v;
}

/* An attribute of an item, "a.b" walks into dicts, as Jinja's make_attrgetter. */
static jinja_value *attr_of(jinja_render *r, jinja_value *item, const jinja_value *path) {
    const char *p = path->s, *end = p + path->len;
    while (item) {
        const char *dot = memchr(p, '.', (size_t)(end - p));
        size_t n = dot ? (size_t)(dot - p) : (size_t)(end - p);
        item = jinja_dict_get(item, p, n);
        if (!dot) break;
        p = dot + 1;
    }
    return item ? item : jinja_undefined(r);
}

jinja_value *jinja_apply_filter(jinja_render *r, int line, const char *name, jinja_value *v, jinja_value **args,
                                size_t nargs, char **kwnames, jinja_value **kwargs, size_t nkw) {
    jinja_buf b = {0};
    if (!strcmp(name, "tojson")) {
        int indent = -1;
        for (size_t i = 0; i < nkw; i++) {
            if (!strcmp(kwnames[i], "indent") && kwargs[i]->type == JV_INT && kwargs[i]->i >= 0 && kwargs[i]->i <= 64) indent = (int)kwargs[i]->i;
            else if (!strcmp(kwnames[i], "indent") && kwargs[i]->type == JV_NONE) indent = -1;
            else return jinja_fail(r, line, VKG_ERR_UNSUPPORTED, "tojson: unsupported argument '%s'", kwnames[i]), NULL;
        }
        if (nargs == 1 && args[0]->type == JV_INT && args[0]->i >= 0 && args[0]->i <= 64) indent = (int)args[0]->i;
        else if (nargs) return jinja_fail(r, line, VKG_ERR_UNSUPPORTED, "tojson: unsupported positional argument"), NULL;
        if (jinja_to_json(r, v, indent, 0, &b)) return NULL;
        return jinja_str(r, b.p ? b.p : "", b.n);
    }
    if (nkw && strcmp(name, "default") && strcmp(name, "d") && strcmp(name, "map") && strcmp(name, "join"))
        return jinja_fail(r, line, VKG_ERR_UNSUPPORTED, "filter '%s' takes no keyword arguments", name), NULL;
    if (!strcmp(name, "default") || !strcmp(name, "d")) {
        int boolean = nargs >= 2 && jinja_truthy(args[1]);
        for (size_t i = 0; i < nkw; i++) {
            if (!strcmp(kwnames[i], "boolean")) boolean = jinja_truthy(kwargs[i]);
            else return jinja_fail(r, line, VKG_ERR_UNSUPPORTED, "default: unsupported argument '%s'", kwnames[i]), NULL;
        }
        int use_default = v->type == JV_UNDEFINED || (boolean && !jinja_truthy(v));
        if (!use_default) return v;
        return nargs >= 1 ? args[0] : jinja_str(r, "", 0);
    }
    if (!strcmp(name, "length") || !strcmp(name, "count")) {
        if (v->type == JV_STRING) return jinja_int(r, (int64_t)char_count(v));
        if (v->type == JV_LIST || v->type == JV_DICT) return jinja_int(r, (int64_t)v->n);
        if (v->type == JV_UNDEFINED) return jinja_int(r, 0);
        return jinja_fail(r, line, VKG_ERR_INVALID_ARGUMENT, "length of a %s", jinja_type_name(v)), NULL;
    }
    if (!strcmp(name, "string")) {
        if (jinja_to_str(r, v, &b)) return NULL;
        return jinja_str(r, b.p ? b.p : "", b.n);
    }
    if (!strcmp(name, "int") || !strcmp(name, "float")) {
        int is_int = name[0] == 'i';
        double d = 0;
        if (v->type == JV_INT || v->type == JV_BOOL) d = (double)(v->type == JV_INT ? v->i : v->b);
        else if (v->type == JV_FLOAT) d = v->f;
        else if (v->type == JV_STRING) {
            char *end;
            d = strtod(v->s, &end);
            if (end == v->s) d = nargs ? NAN : 0;
            if (is_int && end != v->s && v->type == JV_STRING && v->len < 19 && !memchr(v->s, '.', v->len) &&
                !memchr(v->s, 'e', v->len) && !memchr(v->s, 'E', v->len))
                return jinja_int(r, strtoll(v->s, NULL, 10));
        }
        if (isnan(d)) return args[0];
        if (is_int) {
            if (!(fabs(d) < 9.2e18)) return jinja_fail(r, line, VKG_ERR_INVALID_ARGUMENT, "int() of a number too large"), NULL;
            if (v->type == JV_INT) return v;
            return jinja_int(r, (int64_t)d);
        }
        return jinja_float(r, d);
    }
    if (!strcmp(name, "list")) {
        if (v->type == JV_LIST) return v;
        if (v->type == JV_DICT) {
            jinja_value *l = jinja_new(r, JV_LIST);
            for (size_t i = 0; l && i < v->n; i++)
                if (jinja_push(r, l, v->keys[i])) return NULL;
            return l;
        }
        if (v->type == JV_STRING) {
            jinja_value *l = jinja_new(r, JV_LIST);
            for (size_t i = 0; l && i < v->len;) {
                size_t k = i + 1;
                while (k < v->len && ((unsigned char)v->s[k] & 0xC0) == 0x80) k++;
                if (jinja_push(r, l, jinja_str(r, v->s + i, k - i))) return NULL;
                i = k;
            }
            return l;
        }
        return jinja_fail(r, line, VKG_ERR_INVALID_ARGUMENT, "list of a %s", jinja_type_name(v)), NULL;
    }
    if (!strcmp(name, "items")) {
        if (v->type == JV_UNDEFINED) return jinja_new(r, JV_LIST);
        if (!need(r, line, "items", v, JV_DICT)) return NULL;
        return items_of(r, v);
    }
    if (!strcmp(name, "first") || !strcmp(name, "last")) {
        if (v->type == JV_STRING) {
            if (!v->len) return jinja_undefined(r);
            size_t i = 0, e = v->len;
            if (name[0] == 'f') {
                e = 1;
                while (e < v->len && ((unsigned char)v->s[e] & 0xC0) == 0x80) e++;
            } else {
                i = v->len - 1;
                while (i > 0 && ((unsigned char)v->s[i] & 0xC0) == 0x80) i--;
            }
            return jinja_str(r, v->s + i, e - i);
        }
        if (v->type == JV_DICT && name[0] == 'f') return v->n ? v->keys[0] : jinja_undefined(r);
        if (!need(r, line, name, v, JV_LIST)) return NULL;
        if (!v->n) return jinja_undefined(r);
        return name[0] == 'f' ? v->items[0] : v->items[v->n - 1];
    }
    if (!strcmp(name, "reverse")) {
        if (v->type == JV_STRING) {
            jinja_value *o = jinja_str(r, v->s, v->len);
            if (!o) return NULL;
            char *p = (char *)o->s;
            /* reverse the characters, keeping each UTF-8 sequence in order */
            size_t w = 0;
            for (size_t i = v->len; i > 0;) {
                size_t k = i - 1;
                while (k > 0 && ((unsigned char)v->s[k] & 0xC0) == 0x80) k--;
                memcpy(p + w, v->s + k, i - k);
                w += i - k;
                i = k;
            }
            return o;
        }
        if (!need(r, line, "reverse", v, JV_LIST)) return NULL;
        jinja_value *l = jinja_new(r, JV_LIST);
        for (size_t i = v->n; l && i > 0; i--)
            if (jinja_push(r, l, v->items[i - 1])) return NULL;
        return l;
    }
    if (!strcmp(name, "unique")) {
        if (!need(r, line, "unique", v, JV_LIST)) return NULL;
        jinja_value *l = jinja_new(r, JV_LIST);
        for (size_t i = 0; l && i < v->n; i++) {
            int seen = 0;
            for (size_t k = 0; k < l->n && !seen; k++) seen = jinja_equal(l->items[k], v->items[i]);
            if (!seen && jinja_push(r, l, v->items[i])) return NULL;
        }
        return l;
    }
    if (!strcmp(name, "abs")) {
        if (v->type == JV_INT && v->i != INT64_MIN) return jinja_int(r, v->i < 0 ? -v->i : v->i);
        if (v->type == JV_FLOAT) return jinja_float(r, fabs(v->f));
        return jinja_fail(r, line, VKG_ERR_INVALID_ARGUMENT, "abs of a %s", jinja_type_name(v)), NULL;
    }
    if (!strcmp(name, "join")) {
        const jinja_value *attr = NULL;
        for (size_t i = 0; i < nkw; i++) {
            if (!strcmp(kwnames[i], "attribute") && kwargs[i]->type == JV_STRING) attr = kwargs[i];
            else return jinja_fail(r, line, VKG_ERR_UNSUPPORTED, "join: unsupported argument '%s'", kwnames[i]), NULL;
        }
        jinja_value *list = v;
        if (v->type == JV_STRING) list = jinja_apply_filter(r, line, "list", v, NULL, 0, NULL, NULL, 0);
        if (!list || !need(r, line, "join", list, JV_LIST)) return NULL;
        for (size_t i = 0; i < list->n; i++) {
            if (i && nargs && jinja_to_str(r, args[0], &b)) return NULL;
            jinja_value *item = attr ? attr_of(r, list->items[i], attr) : list->items[i];
            if (!item || jinja_to_str(r, item, &b)) return NULL;
        }
        return jinja_str(r, b.p ? b.p : "", b.n);
    }
    if (!strcmp(name, "map")) {
        const jinja_value *attr = NULL, *def = NULL;
        for (size_t i = 0; i < nkw; i++) {
            if (!strcmp(kwnames[i], "attribute") && kwargs[i]->type == JV_STRING) attr = kwargs[i];
            else if (!strcmp(kwnames[i], "default")) def = kwargs[i];
            else return jinja_fail(r, line, VKG_ERR_UNSUPPORTED, "map: unsupported argument '%s'", kwnames[i]), NULL;
        }
        if (!need(r, line, "map", v, JV_LIST)) return NULL;
        if (!attr && nargs != 1) return jinja_fail(r, line, VKG_ERR_UNSUPPORTED, "map: give attribute= or a filter name"), NULL;
        if (!attr && (args[0]->type != JV_STRING || !jinja_filter_known(args[0]->s) || !strcmp(args[0]->s, "map")))
            return jinja_fail(r, line, VKG_ERR_UNSUPPORTED, "map: unsupported filter '%s'", args[0]->type == JV_STRING ? args[0]->s : "?"), NULL;
        jinja_value *l = jinja_new(r, JV_LIST);
        for (size_t i = 0; l && i < v->n; i++) {
            jinja_value *item = attr ? attr_of(r, v->items[i], attr)
                                     : jinja_apply_filter(r, line, args[0]->s, v->items[i], args + 1, nargs - 1, NULL, NULL, 0);
            if (item && item->type == JV_UNDEFINED && def) item = (jinja_value *)def;
            if (jinja_push(r, l, item)) return NULL;
        }
        return l;
    }
    if (!strcmp(name, "selectattr") || !strcmp(name, "rejectattr")) {
        int keep_true = name[0] == 's';
        if (v->type == JV_UNDEFINED) return jinja_new(r, JV_LIST);
        if (!need(r, line, name, v, JV_LIST)) return NULL;
        if (nargs < 1 || args[0]->type != JV_STRING) return jinja_fail(r, line, VKG_ERR_INVALID_ARGUMENT, "%s needs an attribute name", name), NULL;
        if (nargs >= 2 && (args[1]->type != JV_STRING || !jinja_test_known(args[1]->s)))
            return jinja_fail(r, line, VKG_ERR_UNSUPPORTED, "%s: unsupported test '%s'", name, args[1]->type == JV_STRING ? args[1]->s : "?"), NULL;
        jinja_value *l = jinja_new(r, JV_LIST);
        for (size_t i = 0; l && i < v->n; i++) {
            jinja_value *a = attr_of(r, v->items[i], args[0]);
            if (!a) return NULL;
            int t = nargs >= 2 ? jinja_apply_test(r, line, args[1]->s, a, args + 2, nargs - 2) : jinja_truthy(a);
            if (t < 0) return NULL;
            if (t == keep_true && jinja_push(r, l, v->items[i])) return NULL;
        }
        return l;
    }
    /* the string filters */
    if (v->type == JV_UNDEFINED) v = jinja_str(r, "", 0);
    if (!v) return NULL;
    if (v->type != JV_STRING) {
        if (jinja_to_str(r, v, &b) || !(v = jinja_str(r, b.p ? b.p : "", b.n))) return NULL;
    }
    if (!strcmp(name, "trim")) return strip(r, v, nargs && args[0]->type == JV_STRING ? args[0] : NULL, 1, 1);
    if (!strcmp(name, "upper")) return change_case(r, v, 1);
    if (!strcmp(name, "lower")) return change_case(r, v, 0);
    if (!strcmp(name, "capitalize")) return change_case(r, v, 2);
    if (!strcmp(name, "title")) return change_case(r, v, 3);
    if (!strcmp(name, "replace")) {
        if (nargs < 2 || args[0]->type != JV_STRING || args[1]->type != JV_STRING)
            return jinja_fail(r, line, VKG_ERR_INVALID_ARGUMENT, "replace needs two strings"), NULL;
        return replace(r, line, v, args[0], args[1], nargs >= 3 && args[2]->type == JV_INT ? args[2]->i : -1);
    }
    return jinja_fail(r, line, VKG_ERR_UNSUPPORTED, "unsupported filter '%s'", name), NULL;
}

int jinja_apply_test(jinja_render *r, int line, const char *name, jinja_value *v, jinja_value **args, size_t nargs) {
    if (!strcmp(name, "defined")) return v->type != JV_UNDEFINED;
    if (!strcmp(name, "undefined")) return v->type == JV_UNDEFINED;
    if (!strcmp(name, "none")) return v->type == JV_NONE;
    if (!strcmp(name, "string")) return v->type == JV_STRING;
    if (!strcmp(name, "number")) return v->type == JV_INT || v->type == JV_FLOAT;
    if (!strcmp(name, "integer")) return v->type == JV_INT;
    if (!strcmp(name, "float")) return v->type == JV_FLOAT;
    if (!strcmp(name, "boolean")) return v->type == JV_BOOL;
    if (!strcmp(name, "true")) return v->type == JV_BOOL && v->b;
    if (!strcmp(name, "false")) return v->type == JV_BOOL && !v->b;
    if (!strcmp(name, "mapping")) return v->type == JV_DICT;
    if (!strcmp(name, "iterable")) return v->type == JV_LIST || v->type == JV_DICT || v->type == JV_STRING;
    if (!strcmp(name, "sequence")) return v->type == JV_LIST || v->type == JV_DICT || v->type == JV_STRING;
    if (!strcmp(name, "odd") || !strcmp(name, "even")) {
        if (v->type != JV_INT) return jinja_fail(r, line, VKG_ERR_INVALID_ARGUMENT, "'%s' test of a %s", name, jinja_type_name(v));
        return (int)((v->i & 1) == (name[0] == 'o'));
    }
    if (nargs != 1) return jinja_fail(r, line, VKG_ERR_INVALID_ARGUMENT, "test '%s' takes one argument", name);
    if (!strcmp(name, "equalto") || !strcmp(name, "eq")) return jinja_equal(v, args[0]);
    if (!strcmp(name, "ne")) return !jinja_equal(v, args[0]);
    if (!strcmp(name, "sameas")) {
        /* identity: the singletons none, true and false, else the same object */
        if (v->type == JV_NONE || v->type == JV_BOOL) return v->type == args[0]->type && v->b == args[0]->b;
        return v == args[0];
    }
    if (!strcmp(name, "in")) {
        jinja_value *box = args[0];
        if (box->type == JV_LIST) {
            for (size_t i = 0; i < box->n; i++)
                if (jinja_equal(v, box->items[i])) return 1;
            return 0;
        }
        if (box->type == JV_DICT) return v->type == JV_STRING && jinja_dict_get(box, v->s, v->len) != NULL;
        if (box->type == JV_STRING && v->type == JV_STRING) {
            if (!v->len) return 1;
            for (size_t i = 0; i + v->len <= box->len; i++)
                if (!memcmp(box->s + i, v->s, v->len)) return 1;
            return 0;
        }
        return jinja_fail(r, line, VKG_ERR_INVALID_ARGUMENT, "'in' test against a %s", jinja_type_name(box));
    }
    return jinja_fail(r, line, VKG_ERR_UNSUPPORTED, "unsupported test '%s'", name);
}

static int prefix_match(const jinja_value *s, const jinja_value *p, int at_end) {
    if (p->len > s->len) return 0;
    return memcmp(s->s + (at_end ? s->len - p->len : 0), p->s, p->len) == 0;
}

jinja_value *jinja_call_method(jinja_render *r, int line, jinja_value *obj, const char *name, jinja_value **args,
                               size_t nargs) {
    if (obj->type == JV_DICT) {
        if (!strcmp(name, "items") && !nargs) return items_of(r, obj);
        if ((!strcmp(name, "keys") || !strcmp(name, "values")) && !nargs) {
            jinja_value *l = jinja_new(r, JV_LIST);
            for (size_t i = 0; l && i < obj->n; i++)
                if (jinja_push(r, l, name[0] == 'k' ? obj->keys[i] : obj->items[i])) return NULL;
            return l;
        }
        if (!strcmp(name, "get") && (nargs == 1 || nargs == 2)) {
            jinja_value *v = args[0]->type == JV_STRING ? jinja_dict_get(obj, args[0]->s, args[0]->len) : NULL;
            return v ? v : nargs == 2 ? args[1] : jinja_none(r);
        }
    }
    if (obj->type == JV_STRING) {
        for (size_t i = 0; i < nargs; i++)
            if (args[i]->type != JV_STRING && args[i]->type != JV_NONE && args[i]->type != JV_INT)
                return jinja_fail(r, line, VKG_ERR_INVALID_ARGUMENT, "%s() argument %zu is a %s", name, i + 1, jinja_type_name(args[i])), NULL;
        const jinja_value *a0 = nargs >= 1 && args[0]->type == JV_STRING ? args[0] : NULL;
        if (!strcmp(name, "strip") && nargs <= 1) return strip(r, obj, a0, 1, 1);
        if (!strcmp(name, "lstrip") && nargs <= 1) return strip(r, obj, a0, 1, 0);
        if (!strcmp(name, "rstrip") && nargs <= 1) return strip(r, obj, a0, 0, 1);
        if (!strcmp(name, "upper") && !nargs) return change_case(r, obj, 1);
        if (!strcmp(name, "lower") && !nargs) return change_case(r, obj, 0);
        if (!strcmp(name, "title") && !nargs) return change_case(r, obj, 3);
        if (!strcmp(name, "capitalize") && !nargs) return change_case(r, obj, 2);
        if ((!strcmp(name, "startswith") || !strcmp(name, "endswith")) && nargs == 1 && a0)
            return jinja_bool(r, prefix_match(obj, a0, name[0] == 'e'));
        if (!strcmp(name, "split") && nargs <= 2) {
            if (a0 && a0->len == 0) return jinja_fail(r, line, VKG_ERR_INVALID_ARGUMENT, "split(): empty separator"), NULL;
            return split(r, obj, a0, nargs == 2 && args[1]->type == JV_INT ? args[1]->i : -1);
        }
        if (!strcmp(name, "replace") && (nargs == 2 || nargs == 3) && a0 && args[1]->type == JV_STRING)
            return replace(r, line, obj, a0, args[1], nargs == 3 && args[2]->type == JV_INT ? args[2]->i : -1);
    }
    return jinja_fail(r, line, VKG_ERR_UNSUPPORTED, "unsupported method %s.%s() with %zu argument%s", jinja_type_name(obj), name,
                      nargs, nargs == 1 ? "" : "s"),
           NULL;
}
