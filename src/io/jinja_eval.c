/* Rendering: walks the syntax tree with a chain of scopes.  As in Jinja, a for loop's body and a
 * macro's body get their own scope (a set inside a loop is gone after it; namespace() objects
 * carry values out), while if blocks share their parent's.  Every evaluation step counts toward
 * JINJA_MAX_STEPS, so no template runs unbounded. */
#include "io/jinja.h"

#include "base/error.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct scope {
    jinja_value *vars; /* a dict */
    struct scope *parent;
} scope;

typedef struct eval {
    jinja_render r;
    scope *root;
    int flow; /* 1 break, 2 continue, pending in the innermost loop */
} eval;

int jinja_fail(jinja_render *r, int line, vkg_status st, const char *fmt, ...) {
    if (r->failed) return -1;
    r->failed = 1;
    r->status = st;
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (line > 0) vkg_error_set(r->err, st, "template line %d: %s", line, msg);
    else vkg_error_set(r->err, st, "template: %s", msg);
    return -1;
}

static int step(eval *e, int line) {
    if (++e->r.steps > JINJA_MAX_STEPS)
        return jinja_fail(&e->r, line, VKG_ERR_UNSUPPORTED, "the template ran more than %d steps (a loop too long?)", JINJA_MAX_STEPS);
    return 0;
}

static jinja_value *lookup(scope *s, const char *name) {
    for (; s; s = s->parent) {
        jinja_value *v = jinja_dict_get(s->vars, name, strlen(name));
        if (v) return v;
    }
    return NULL;
}

static scope *new_scope(eval *e, scope *parent) {
    scope *s = jinja_alloc(&e->r, sizeof *s);
    if (!s || !(s->vars = jinja_new(&e->r, JV_DICT))) return NULL;
    s->parent = parent;
    return s;
}

static jinja_value *ev(eval *e, const jinja_node *n, scope *s);
static int exec_nodes(eval *e, const jinja_nodes *body, scope *s, jinja_buf *out);

static int emit(eval *e, jinja_buf *out, const char *p, size_t n, int line) {
    if (out->n + n > e->r.max_output)
        return jinja_fail(&e->r, line, VKG_ERR_UNSUPPORTED, "the output would pass its limit of %zu bytes", e->r.max_output);
    return jinja_buf_add(&e->r, out, p, n);
}

/* ---- operators ---- */

static int is_num(const jinja_value *v) { return v->type == JV_INT || v->type == JV_FLOAT || v->type == JV_BOOL; }
static double as_f(const jinja_value *v) { return v->type == JV_FLOAT ? v->f : v->type == JV_INT ? (double)v->i : v->b; }
static int64_t as_i(const jinja_value *v) { return v->type == JV_INT ? v->i : v->b; }

static jinja_value *type_error(eval *e, int line, const char *op, const jinja_value *a, const jinja_value *b) {
    jinja_fail(&e->r, line, VKG_ERR_INVALID_ARGUMENT, "unsupported operand types for %s: %s and %s", op,
               jinja_type_name(a), jinja_type_name(b));
    return NULL;
}

static jinja_value *concat_str(eval *e, const jinja_value *a, const jinja_value *b) {
    jinja_buf buf = {0};
    if (jinja_to_str(&e->r, a, &buf) || jinja_to_str(&e->r, b, &buf)) return NULL;
    return jinja_str(&e->r, buf.p ? buf.p : "", buf.n);
}

static int contains(eval *e, int line, const jinja_value *item, const jinja_value *box) {
    switch (box->type) {
    case JV_STRING:
        if (item->type != JV_STRING) return jinja_fail(&e->r, line, VKG_ERR_INVALID_ARGUMENT, "'in <string>' needs a string on the left, not %s", jinja_type_name(item));
        if (item->len == 0) return 1;
        for (size_t i = 0; i + item->len <= box->len; i++)
            if (memcmp(box->s + i, item->s, item->len) == 0) return 1;
        return 0;
    case JV_LIST:
        for (size_t i = 0; i < box->n; i++)
            if (jinja_equal(item, box->items[i])) return 1;
        return 0;
    case JV_DICT:
    case JV_NAMESPACE:
        return item->type == JV_STRING && jinja_dict_get(box, item->s, item->len) != NULL;
    case JV_UNDEFINED: /* iterates as empty in Jinja */
        return 0;
    default:
        return jinja_fail(&e->r, line, VKG_ERR_INVALID_ARGUMENT, "'in' needs a string, list or dict on the right, not %s", jinja_type_name(box));
    }
}

static int compare_order(eval *e, int line, const char *op, const jinja_value *a, const jinja_value *b) {
    int c;
    if (is_num(a) && is_num(b)) {
        double x = as_f(a), y = as_f(b);
        if (a->type != JV_FLOAT && b->type != JV_FLOAT) c = as_i(a) < as_i(b) ? -1 : as_i(a) > as_i(b);
        else c = x < y ? -1 : x > y ? 1 : 0;
    } else if (a->type == JV_STRING && b->type == JV_STRING) {
        size_t m = a->len < b->len ? a->len : b->len;
        c = memcmp(a->s, b->s, m);
        if (c == 0) c = a->len < b->len ? -1 : a->len > b->len;
    } else {
        type_error(e, line, op, a, b);
        return -1;
    }
    if (!strcmp(op, "<")) return c < 0;
    if (!strcmp(op, "<=")) return c <= 0;
    if (!strcmp(op, ">")) return c > 0;
    return c >= 0;
}

static jinja_value *arith(eval *e, int line, const char *op, jinja_value *a, jinja_value *b) {
    jinja_render *r = &e->r;
    if (!strcmp(op, "~")) return concat_str(e, a, b);
    if (!strcmp(op, "==")) return jinja_bool(r, jinja_equal(a, b));
    if (!strcmp(op, "!=")) return jinja_bool(r, !jinja_equal(a, b));
    if (op[0] == '<' || op[0] == '>') {
        int c = compare_order(e, line, op, a, b);
        return c < 0 ? NULL : jinja_bool(r, c);
    }
    if (!strcmp(op, "in")) {
        int c = contains(e, line, a, b);
        return c < 0 ? NULL : jinja_bool(r, c);
    }
    if (!strcmp(op, "+")) {
        if (a->type == JV_STRING && b->type == JV_STRING) return concat_str(e, a, b);
        if (a->type == JV_LIST && b->type == JV_LIST) {
            jinja_value *l = jinja_new(r, JV_LIST);
            for (size_t i = 0; l && i < a->n + b->n; i++)
                if (jinja_push(r, l, i < a->n ? a->items[i] : b->items[i - a->n])) return NULL;
            return l;
        }
    }
    if (op[0] == '*' && op[1] == 0 && ((a->type == JV_STRING && b->type == JV_INT) || (a->type == JV_INT && b->type == JV_STRING))) {
        const jinja_value *s = a->type == JV_STRING ? a : b;
        int64_t k = a->type == JV_INT ? a->i : b->i;
        jinja_buf buf = {0};
        if (k > 0 && s->len && (uint64_t)k > r->max_output / s->len)
            return jinja_fail(r, line, VKG_ERR_UNSUPPORTED, "a repeated string would pass the output limit"), NULL;
        for (int64_t i = 0; i < k; i++)
            if (jinja_buf_add(r, &buf, s->s, s->len)) return NULL;
        return jinja_str(r, buf.p ? buf.p : "", buf.n);
    }
    if (!is_num(a) || !is_num(b)) return type_error(e, line, op, a, b);
    int ints = a->type != JV_FLOAT && b->type != JV_FLOAT;
    int64_t x = as_i(a), y = as_i(b), z;
    double fx = as_f(a), fy = as_f(b);
    if (!strcmp(op, "/")) {
        if (fy == 0) return jinja_fail(r, line, VKG_ERR_INVALID_ARGUMENT, "division by zero"), NULL;
        return jinja_float(r, fx / fy);
    }
    if (ints) {
        if (!strcmp(op, "+")) { if (__builtin_add_overflow(x, y, &z)) goto overflow; return jinja_int(r, z); }
        if (!strcmp(op, "-")) { if (__builtin_sub_overflow(x, y, &z)) goto overflow; return jinja_int(r, z); }
        if (!strcmp(op, "*")) { if (__builtin_mul_overflow(x, y, &z)) goto overflow; return jinja_int(r, z); }
        if (!strcmp(op, "//") || !strcmp(op, "%")) {
            if (y == 0) return jinja_fail(r, line, VKG_ERR_INVALID_ARGUMENT, "division by zero"), NULL;
            if (x == INT64_MIN && y == -1) goto overflow;
            int64_t q = x / y, m = x % y;
            if (m != 0 && ((m < 0) != (y < 0))) { q--; m += y; } /* Python floors */
            return jinja_int(r, op[0] == '/' ? q : m);
        }
        if (!strcmp(op, "**")) {
            if (y < 0) return jinja_float(r, pow(fx, fy));
            int64_t acc = 1;
            for (int64_t i = 0; i < y; i++) {
                if (__builtin_mul_overflow(acc, x, &acc)) goto overflow;
                if (acc == 0 || acc == 1) break;
                if (step(e, line)) return NULL;
            }
            return jinja_int(r, acc);
        }
    } else {
        if (!strcmp(op, "+")) return jinja_float(r, fx + fy);
        if (!strcmp(op, "-")) return jinja_float(r, fx - fy);
        if (!strcmp(op, "*")) return jinja_float(r, fx * fy);
        if (!strcmp(op, "**")) return jinja_float(r, pow(fx, fy));
        if (fy == 0) return jinja_fail(r, line, VKG_ERR_INVALID_ARGUMENT, "division by zero"), NULL;
        double q = floor(fx / fy);
        return jinja_float(r, op[0] == '/' ? q : fx - q * fy);
    }
    return type_error(e, line, op, a, b);
overflow:
    jinja_fail(r, line, VKG_ERR_UNSUPPORTED, "integer overflow in %s", op);
    return NULL;
}

/* ---- strings as code points (Python indexes str by character) ---- */

static size_t utf8_len(unsigned char c) { return c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1; }

/* Byte offsets of each character start, plus the end. */
static size_t *char_offsets(eval *e, const jinja_value *s, size_t *count) {
    size_t n = 0;
    for (size_t i = 0; i < s->len; i += utf8_len((unsigned char)s->s[i])) n++;
    size_t *o = jinja_alloc(&e->r, (n + 1) * sizeof *o);
    if (!o) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < s->len; i += utf8_len((unsigned char)s->s[i])) o[k++] = i;
    o[n] = s->len;
    *count = n;
    return o;
}

static jinja_value *index_value(eval *e, int line, jinja_value *obj, jinja_value *idx) {
    jinja_render *r = &e->r;
    if (obj->type == JV_DICT || obj->type == JV_NAMESPACE) {
        jinja_value *v = NULL;
        if (idx->type == JV_STRING) v = jinja_dict_get(obj, idx->s, idx->len);
        return v ? v : jinja_undefined(r);
    }
    if (obj->type == JV_LIST || obj->type == JV_STRING) {
        if (idx->type != JV_INT && idx->type != JV_BOOL) return jinja_undefined(r);
        size_t n = obj->n, *off = NULL;
        if (obj->type == JV_STRING && !(off = char_offsets(e, obj, &n))) return NULL;
        int64_t i = as_i(idx);
        if (i < 0) i += (int64_t)n;
        if (i < 0 || i >= (int64_t)n) return jinja_undefined(r);
        if (obj->type == JV_LIST) return obj->items[i];
        return jinja_str(r, obj->s + off[i], off[i + 1] - off[i]);
    }
    if (obj->type == JV_UNDEFINED)
        return jinja_fail(r, line, VKG_ERR_INVALID_ARGUMENT, "subscript of an undefined value"), NULL;
    return jinja_undefined(r);
}

static int slice_bound(eval *e, int line, const jinja_node *n, scope *s, int64_t *out, int *given) {
    *given = 0;
    if (!n) return 0;
    jinja_value *v = ev(e, n, s);
    if (!v) return -1;
    if (v->type == JV_NONE) return 0;
    if (v->type != JV_INT && v->type != JV_BOOL)
        return jinja_fail(&e->r, line, VKG_ERR_INVALID_ARGUMENT, "slice indices must be integers, not %s", jinja_type_name(v));
    *out = as_i(v);
    *given = 1;
    return 0;
}

static jinja_value *slice_value(eval *e, const jinja_node *n, scope *s) {
    jinja_render *r = &e->r;
    jinja_value *obj = ev(e, n->a, s);
    if (!obj) return NULL;
    int64_t start = 0, stop = 0, stepv = 1;
    int has_start, has_stop, has_step;
    if (slice_bound(e, n->line, n->b, s, &start, &has_start) || slice_bound(e, n->line, n->c, s, &stop, &has_stop) ||
        slice_bound(e, n->line, n->args.n ? n->args.v[0] : NULL, s, &stepv, &has_step))
        return NULL;
    if (!has_step) stepv = 1;
    if (stepv == 0) return jinja_fail(r, n->line, VKG_ERR_INVALID_ARGUMENT, "slice step cannot be zero"), NULL;
    if (obj->type != JV_LIST && obj->type != JV_STRING)
        return jinja_fail(r, n->line, VKG_ERR_INVALID_ARGUMENT, "cannot slice a %s", jinja_type_name(obj)), NULL;
    size_t count = obj->n, *off = NULL;
    if (obj->type == JV_STRING && !(off = char_offsets(e, obj, &count))) return NULL;
    int64_t len = (int64_t)count;
    /* Python's slice.indices() */
    if (stepv > 0) {
        if (!has_start) start = 0;
        else if (start < 0) start = start + len < 0 ? 0 : start + len;
        else if (start > len) start = len;
        if (!has_stop) stop = len;
        else if (stop < 0) stop = stop + len < 0 ? 0 : stop + len;
        else if (stop > len) stop = len;
    } else {
        if (!has_start) start = len - 1;
        else if (start < 0) start = start + len < 0 ? -1 : start + len;
        else if (start >= len) start = len - 1;
        if (!has_stop) stop = -1;
        else if (stop < 0) stop = stop + len < 0 ? -1 : stop + len;
        else if (stop >= len) stop = len - 1;
    }
    jinja_value *out = jinja_new(r, obj->type == JV_LIST ? JV_LIST : JV_STRING);
    jinja_buf buf = {0};
    if (!out) return NULL;
    for (int64_t i = start; stepv > 0 ? i < stop : i > stop; i += stepv) {
        if (step(e, n->line)) return NULL;
        if (obj->type == JV_LIST) {
            if (jinja_push(r, out, obj->items[i])) return NULL;
        } else if (jinja_buf_add(r, &buf, obj->s + off[i], off[i + 1] - off[i])) {
            return NULL;
        }
    }
    if (obj->type == JV_STRING) return jinja_str(r, buf.p ? buf.p : "", buf.n);
    return out;
}

/* ---- calls ---- */

static int eval_args(eval *e, const jinja_node *n, scope *s, jinja_value ***args, jinja_value ***kw) {
    *args = jinja_alloc(&e->r, (n->args.n + 1) * sizeof **args);
    *kw = jinja_alloc(&e->r, (n->kwarg_values.n + 1) * sizeof **kw);
    if (!*args || !*kw) return -1;
    for (size_t i = 0; i < n->args.n; i++)
        if (!((*args)[i] = ev(e, n->args.v[i], s))) return -1;
    for (size_t i = 0; i < n->kwarg_values.n; i++)
        if (!((*kw)[i] = ev(e, n->kwarg_values.v[i], s))) return -1;
    return 0;
}

static jinja_value *call_macro(eval *e, const jinja_node *call, const jinja_value *m, jinja_value **args, jinja_value **kw) {
    const jinja_node *def = m->macro;
    jinja_render *r = &e->r;
    if (call->args.n > def->ntargets)
        return jinja_fail(r, call->line, VKG_ERR_INVALID_ARGUMENT, "macro '%s' takes %zu arguments, %zu given", def->str, def->ntargets, call->args.n), NULL;
    if (e->r.call_depth >= JINJA_MAX_CALL_DEPTH)
        return jinja_fail(r, call->line, VKG_ERR_UNSUPPORTED, "macro calls nested deeper than %d", JINJA_MAX_CALL_DEPTH), NULL;
    scope *s = new_scope(e, e->root);
    if (!s) return NULL;
    for (size_t i = 0; i < def->ntargets; i++) {
        jinja_value *v = i < call->args.n ? args[i] : NULL;
        for (size_t k = 0; k < call->kwarg_values.n; k++)
            if (!strcmp(call->kwarg_names[k], def->targets[i])) v = kw[k];
        if (!v && def->defaults.v[i] && !(v = ev(e, def->defaults.v[i], s))) return NULL;
        if (!v && !(v = jinja_undefined(r))) return NULL;
        if (jinja_dict_set(r, s->vars, def->targets[i], strlen(def->targets[i]), v)) return NULL;
    }
    for (size_t k = 0; k < call->kwarg_values.n; k++) {
        int found = 0;
        for (size_t i = 0; i < def->ntargets; i++) found |= !strcmp(call->kwarg_names[k], def->targets[i]);
        if (!found) return jinja_fail(r, call->line, VKG_ERR_INVALID_ARGUMENT, "macro '%s' has no parameter '%s'", def->str, call->kwarg_names[k]), NULL;
    }
    jinja_buf out = {0};
    e->r.call_depth++;
    int rc = exec_nodes(e, &def->body, s, &out);
    e->r.call_depth--;
    e->flow = 0;
    if (rc) return NULL;
    return jinja_str(r, out.p ? out.p : "", out.n);
}

static int strftime_spec_ok(char c) { return c && strchr("aAbBdHIjmMpSyYZ%eFTD", c) != NULL; }

static jinja_value *call_function(eval *e, const jinja_node *call, const char *name, jinja_value **args, jinja_value **kw) {
    jinja_render *r = &e->r;
    size_t na = call->args.n, nk = call->kwarg_values.n;
    int line = call->line;
    if (!strcmp(name, "raise_exception")) {
        jinja_buf b = {0};
        if (na >= 1 && jinja_to_str(r, args[0], &b)) return NULL;
        return jinja_fail(r, line, VKG_ERR_INVALID_ARGUMENT, "the template raised an exception: %s", b.p ? b.p : ""), NULL;
    }
    if (!strcmp(name, "namespace")) {
        jinja_value *ns = jinja_new(r, JV_NAMESPACE);
        if (na > 1 || (na == 1 && args[0]->type != JV_DICT))
            return jinja_fail(r, line, VKG_ERR_INVALID_ARGUMENT, "namespace() takes keyword arguments"), NULL;
        for (size_t i = 0; ns && na == 1 && i < args[0]->n; i++)
            if (jinja_dict_set(r, ns, args[0]->keys[i]->s, args[0]->keys[i]->len, args[0]->items[i])) return NULL;
        for (size_t i = 0; ns && i < nk; i++)
            if (jinja_dict_set(r, ns, call->kwarg_names[i], strlen(call->kwarg_names[i]), kw[i])) return NULL;
        return ns;
    }
    if (!strcmp(name, "range")) {
        int64_t a[3] = {0, 0, 1};
        if (na < 1 || na > 3 || nk) return jinja_fail(r, line, VKG_ERR_INVALID_ARGUMENT, "range() takes 1 to 3 integers"), NULL;
        for (size_t i = 0; i < na; i++) {
            if (args[i]->type != JV_INT) return jinja_fail(r, line, VKG_ERR_INVALID_ARGUMENT, "range() takes integers"), NULL;
            a[na == 1 ? 1 : i] = args[i]->i;
        }
        if (a[2] == 0) return jinja_fail(r, line, VKG_ERR_INVALID_ARGUMENT, "range() step must not be zero"), NULL;
        jinja_value *l = jinja_new(r, JV_LIST);
        for (int64_t i = a[0]; l && (a[2] > 0 ? i < a[1] : i > a[1]); i += a[2]) {
            if (step(e, line) || jinja_push(r, l, jinja_int(r, i))) return NULL;
        }
        return l;
    }
    if (!strcmp(name, "strftime_now")) {
        if (na != 1 || args[0]->type != JV_STRING) return jinja_fail(r, line, VKG_ERR_INVALID_ARGUMENT, "strftime_now() takes a format string"), NULL;
        const char *f = args[0]->s;
        for (size_t i = 0; i < args[0]->len; i++)
            if (f[i] == '%' && !strftime_spec_ok(i + 1 < args[0]->len ? f[++i] : 0))
                return jinja_fail(r, line, VKG_ERR_UNSUPPORTED, "strftime_now: unsupported format directive in '%s'", f), NULL;
        if (strlen(f) != args[0]->len || args[0]->len > 256) return jinja_fail(r, line, VKG_ERR_INVALID_ARGUMENT, "strftime_now: format too long or holds NUL"), NULL;
        struct tm tm;
        time_t now = r->now_fixed ? r->now : time(NULL);
        if (!(r->now_fixed ? gmtime_r(&now, &tm) : localtime_r(&now, &tm))) return jinja_fail(r, line, VKG_ERR_INVALID_ARGUMENT, "strftime_now: bad time"), NULL;
        char buf[1024];
        size_t n = args[0]->len ? strftime(buf, sizeof buf, f, &tm) : 0;
        return jinja_str(r, buf, n);
    }
    return jinja_fail(r, line, VKG_ERR_UNSUPPORTED, "unsupported function '%s'", name), NULL;
}

static jinja_value *call_value(eval *e, const jinja_node *n, scope *s) {
    jinja_value **args, **kw;
    if (n->a->kind == JN_ATTR) {
        jinja_value *obj = ev(e, n->a->a, s);
        if (!obj || eval_args(e, n, s, &args, &kw)) return NULL;
        if (n->kwarg_values.n) return jinja_fail(&e->r, n->line, VKG_ERR_UNSUPPORTED, "keyword arguments to method '%s'", n->a->str), NULL;
        return jinja_call_method(&e->r, n->line, obj, n->a->str, args, n->args.n);
    }
    jinja_value *f = ev(e, n->a, s);
    if (!f || eval_args(e, n, s, &args, &kw)) return NULL;
    if (f->type == JV_MACRO) return call_macro(e, n, f, args, kw);
    if (f->type == JV_FUNCTION) return call_function(e, n, f->s, args, kw);
    return jinja_fail(&e->r, n->line, VKG_ERR_INVALID_ARGUMENT, "%s%s%s is not callable (%s)", n->a->kind == JN_NAME ? "'" : "",
                      n->a->kind == JN_NAME ? n->a->str : "the value", n->a->kind == JN_NAME ? "'" : "", jinja_type_name(f)),
           NULL;
}

/* ---- expressions ---- */

static jinja_value *ev(eval *e, const jinja_node *n, scope *s) {
    jinja_render *r = &e->r;
    if (step(e, n->line)) return NULL;
    jinja_value *a, *b;
    switch (n->kind) {
    case JN_LITERAL_STR: return jinja_str(r, n->str, n->len);
    case JN_LITERAL_INT: return jinja_int(r, n->ival);
    case JN_LITERAL_FLOAT: return jinja_float(r, n->fval);
    case JN_LITERAL_BOOL: return jinja_bool(r, (int)n->ival);
    case JN_LITERAL_NONE: return jinja_none(r);
    case JN_NAME: {
        jinja_value *v = lookup(s, n->str);
        return v ? v : jinja_undefined(r);
    }
    case JN_LIST:
    case JN_TUPLE: {
        jinja_value *l = jinja_new(r, JV_LIST);
        for (size_t i = 0; l && i < n->args.n; i++)
            if (jinja_push(r, l, ev(e, n->args.v[i], s))) return NULL;
        return l;
    }
    case JN_DICT: {
        jinja_value *d = jinja_new(r, JV_DICT);
        for (size_t i = 0; d && i + 1 < n->args.n; i += 2) {
            jinja_value *k = ev(e, n->args.v[i], s), *v = k ? ev(e, n->args.v[i + 1], s) : NULL;
            if (!v) return NULL;
            if (k->type != JV_STRING) return jinja_fail(r, n->line, VKG_ERR_UNSUPPORTED, "dict keys must be strings here, not %s", jinja_type_name(k)), NULL;
            if (jinja_dict_set(r, d, k->s, k->len, v)) return NULL;
        }
        return d;
    }
    case JN_ATTR:
        if (!(a = ev(e, n->a, s))) return NULL;
        if (a->type == JV_DICT || a->type == JV_NAMESPACE) {
            jinja_value *v = jinja_dict_get(a, n->str, strlen(n->str));
            return v ? v : jinja_undefined(r);
        }
        if (a->type == JV_UNDEFINED)
            return jinja_fail(r, n->line, VKG_ERR_INVALID_ARGUMENT, "'%s' of an undefined value", n->str), NULL;
        return jinja_undefined(r);
    case JN_INDEX:
        if (!(a = ev(e, n->a, s)) || !(b = ev(e, n->b, s))) return NULL;
        return index_value(e, n->line, a, b);
    case JN_SLICE: return slice_value(e, n, s);
    case JN_CALL: return call_value(e, n, s);
    case JN_FILTER: {
        jinja_value **args, **kw;
        if (!(a = ev(e, n->a, s)) || eval_args(e, n, s, &args, &kw)) return NULL;
        return jinja_apply_filter(r, n->line, n->str, a, args, n->args.n, n->kwarg_names, kw, n->kwarg_values.n);
    }
    case JN_TEST: {
        jinja_value **args, **kw;
        if (!(a = ev(e, n->a, s)) || eval_args(e, n, s, &args, &kw)) return NULL;
        int t = jinja_apply_test(r, n->line, n->str, a, args, n->args.n);
        return t < 0 ? NULL : jinja_bool(r, n->negated ? !t : t);
    }
    case JN_UNARY:
        if (!(a = ev(e, n->a, s))) return NULL;
        if (a->type == JV_INT || a->type == JV_BOOL) {
            if (n->str[0] == '+') return jinja_int(r, as_i(a));
            if (as_i(a) == INT64_MIN) return jinja_fail(r, n->line, VKG_ERR_UNSUPPORTED, "integer overflow in -"), NULL;
            return jinja_int(r, -as_i(a));
        }
        if (a->type == JV_FLOAT) return jinja_float(r, n->str[0] == '-' ? -a->f : a->f);
        return jinja_fail(r, n->line, VKG_ERR_INVALID_ARGUMENT, "bad operand type for unary %s: %s", n->str, jinja_type_name(a)), NULL;
    case JN_BINARY:
        if (!(a = ev(e, n->a, s)) || !(b = ev(e, n->b, s))) return NULL;
        return arith(e, n->line, n->str, a, b);
    case JN_AND:
        if (!(a = ev(e, n->a, s))) return NULL;
        return jinja_truthy(a) ? ev(e, n->b, s) : a;
    case JN_OR:
        if (!(a = ev(e, n->a, s))) return NULL;
        return jinja_truthy(a) ? a : ev(e, n->b, s);
    case JN_NOT:
        if (!(a = ev(e, n->a, s))) return NULL;
        return jinja_bool(r, !jinja_truthy(a));
    case JN_COND:
        if (!(b = ev(e, n->b, s))) return NULL;
        if (jinja_truthy(b)) return ev(e, n->a, s);
        return n->c ? ev(e, n->c, s) : jinja_undefined(r);
    default:
        return jinja_fail(r, n->line, VKG_ERR_UNSUPPORTED, "a statement where an expression belongs"), NULL;
    }
}

/* ---- statements ---- */

static int exec_for(eval *e, const jinja_node *n, scope *s, jinja_buf *out) {
    jinja_render *r = &e->r;
    jinja_value *seq = ev(e, n->a, s);
    if (!seq) return -1;
    jinja_value *items = seq;
    if (seq->type == JV_DICT) { /* iterating a dict gives its keys */
        items = jinja_new(r, JV_LIST);
        for (size_t i = 0; items && i < seq->n; i++)
            if (jinja_push(r, items, seq->keys[i])) return -1;
    } else if (seq->type == JV_STRING) {
        size_t count, *off = char_offsets(e, seq, &count);
        if (!off || !(items = jinja_new(r, JV_LIST))) return -1;
        for (size_t i = 0; i < count; i++)
            if (jinja_push(r, items, jinja_str(r, seq->s + off[i], off[i + 1] - off[i]))) return -1;
    } else if (seq->type == JV_UNDEFINED || seq->type == JV_NONE) {
        if (seq->type == JV_NONE) return jinja_fail(r, n->line, VKG_ERR_INVALID_ARGUMENT, "cannot loop over none");
        items = jinja_new(r, JV_LIST);
    } else if (seq->type != JV_LIST) {
        return jinja_fail(r, n->line, VKG_ERR_INVALID_ARGUMENT, "cannot loop over a %s", jinja_type_name(seq));
    }
    if (!items) return -1;
    scope *inner = new_scope(e, s);
    if (!inner) return -1;
    /* "for x in xs if cond": the filter runs first, and loop.* counts what it kept */
    jinja_value *kept = items;
    if (n->b) {
        kept = jinja_new(r, JV_LIST);
        if (!kept) return -1;
        for (size_t i = 0; i < items->n; i++) {
            if (n->ntargets == 1 && jinja_dict_set(r, inner->vars, n->targets[0], strlen(n->targets[0]), items->items[i])) return -1;
            if (n->ntargets > 1) {
                const jinja_value *it = items->items[i];
                for (size_t t = 0; t < n->ntargets; t++)
                    if (jinja_dict_set(r, inner->vars, n->targets[t], strlen(n->targets[t]),
                                       it->type == JV_LIST && t < it->n ? it->items[t] : jinja_undefined(r)))
                        return -1;
            }
            jinja_value *c = ev(e, n->b, inner);
            if (!c) return -1;
            if (jinja_truthy(c) && jinja_push(r, kept, items->items[i])) return -1;
        }
    }
    size_t len = kept->n;
    jinja_value *loop = NULL;
    /* the names bound each iteration, made once */
    jinja_value **keys = jinja_alloc(r, (n->ntargets + 1) * sizeof *keys);
    if (!keys) return -1;
    for (size_t t = 0; t < n->ntargets; t++)
        if (!(keys[t] = jinja_str(r, n->targets[t], strlen(n->targets[t])))) return -1;
    if (!(keys[n->ntargets] = jinja_str(r, "loop", 4))) return -1;
    for (size_t i = 0; i < len; i++) {
        if (step(e, n->line)) return -1;
        if (++r->iterations > JINJA_MAX_ITERATIONS)
            return jinja_fail(r, n->line, VKG_ERR_UNSUPPORTED, "the template ran more than %d loop iterations", JINJA_MAX_ITERATIONS);
        scope *it_scope = new_scope(e, s);
        if (!it_scope || jinja_reserve(r, it_scope->vars, n->ntargets + 1)) return -1;
        jinja_value *item = kept->items[i];
        if (n->ntargets == 1) {
            if (jinja_dict_add(r, it_scope->vars, keys[0], item)) return -1;
        } else {
            if (item->type != JV_LIST || item->n != n->ntargets)
                return jinja_fail(r, n->line, VKG_ERR_INVALID_ARGUMENT, "cannot unpack a %s into %zu loop variables", jinja_type_name(item), n->ntargets);
            for (size_t t = 0; t < n->ntargets; t++)
                if (!keys[t] || jinja_dict_set(r, it_scope->vars, keys[t]->s, keys[t]->len, item->items[t])) return -1;
        }
        /* one loop object per loop, its values replaced each iteration */
        if (!loop && !(loop = jinja_new(r, JV_DICT))) return -1;
        if (jinja_dict_set(r, loop, "index", 5, jinja_int(r, (int64_t)i + 1)) ||
            jinja_dict_set(r, loop, "index0", 6, jinja_int(r, (int64_t)i)) ||
            jinja_dict_set(r, loop, "revindex", 8, jinja_int(r, (int64_t)(len - i))) ||
            jinja_dict_set(r, loop, "revindex0", 9, jinja_int(r, (int64_t)(len - i - 1))) ||
            jinja_dict_set(r, loop, "first", 5, jinja_bool(r, i == 0)) ||
            jinja_dict_set(r, loop, "last", 4, jinja_bool(r, i + 1 == len)) ||
            jinja_dict_set(r, loop, "length", 6, jinja_int(r, (int64_t)len)) ||
            jinja_dict_set(r, loop, "previtem", 8, i ? kept->items[i - 1] : jinja_undefined(r)) ||
            jinja_dict_set(r, loop, "nextitem", 8, i + 1 < len ? kept->items[i + 1] : jinja_undefined(r)) ||
            jinja_dict_add(r, it_scope->vars, keys[n->ntargets], loop))
            return -1;
        if (exec_nodes(e, &n->body, it_scope, out)) return -1;
        int flow = e->flow;
        e->flow = 0;
        if (flow == 1) break;
    }
    if (len == 0 && n->orelse.n) return exec_nodes(e, &n->orelse, s, out);
    return 0;
}

static int exec_nodes(eval *e, const jinja_nodes *body, scope *s, jinja_buf *out) {
    jinja_render *r = &e->r;
    for (size_t i = 0; i < body->n && !e->flow; i++) {
        const jinja_node *n = body->v[i];
        if (step(e, n->line)) return -1;
        switch (n->kind) {
        case JN_TEXT:
            if (emit(e, out, n->str, n->len, n->line)) return -1;
            break;
        case JN_OUTPUT: {
            jinja_value *v = ev(e, n->a, s);
            jinja_buf tmp = {0};
            if (!v || jinja_to_str(r, v, &tmp) || emit(e, out, tmp.p ? tmp.p : "", tmp.n, n->line)) return -1;
            break;
        }
        case JN_IF: {
            jinja_value *c = ev(e, n->a, s);
            if (!c) return -1;
            if (exec_nodes(e, jinja_truthy(c) ? &n->body : &n->orelse, s, out)) return -1;
            break;
        }
        case JN_FOR:
            if (exec_for(e, n, s, out)) return -1;
            break;
        case JN_SET: {
            jinja_value *v = ev(e, n->a, s);
            if (!v) return -1;
            if (n->str) { /* ns.attr = v */
                jinja_value *ns = lookup(s, n->targets[0]);
                if (!ns || ns->type != JV_NAMESPACE)
                    return jinja_fail(r, n->line, VKG_ERR_INVALID_ARGUMENT, "cannot set '%s.%s': '%s' is not a namespace", n->targets[0], n->str, n->targets[0]);
                if (jinja_dict_set(r, ns, n->str, strlen(n->str), v)) return -1;
            } else if (jinja_dict_set(r, s->vars, n->targets[0], strlen(n->targets[0]), v)) {
                return -1;
            }
            break;
        }
        case JN_SET_BLOCK: {
            jinja_buf tmp = {0};
            if (exec_nodes(e, &n->body, s, &tmp)) return -1;
            if (jinja_dict_set(r, s->vars, n->targets[0], strlen(n->targets[0]), jinja_str(r, tmp.p ? tmp.p : "", tmp.n))) return -1;
            break;
        }
        case JN_MACRO: {
            jinja_value *m = jinja_new(r, JV_MACRO);
            if (!m) return -1;
            m->macro = n;
            if (jinja_dict_set(r, s->vars, n->str, strlen(n->str), m)) return -1;
            break;
        }
        case JN_BREAK:
        case JN_CONTINUE:
            e->flow = n->kind == JN_BREAK ? 1 : 2;
            break;
        default:
            return jinja_fail(r, n->line, VKG_ERR_UNSUPPORTED, "an expression where a statement belongs");
        }
    }
    return 0;
}

static void free_arena(jinja_render *r) {
    struct blk { struct blk *next; } *b = r->blocks;
    while (b) {
        struct blk *nx = b->next;
        free(b);
        b = nx;
    }
    r->blocks = NULL;
}

vkg_status jinja_render_template(const jinja_template *t, const vkg_json *context, const jinja_options *opt,
                                 char **out, size_t *out_len, vkg_error *err) {
    *out = NULL;
    if (out_len) *out_len = 0;
    eval e;
    memset(&e, 0, sizeof e);
    e.r.err = err;
    e.r.max_output = opt && opt->max_output ? opt->max_output : JINJA_DEFAULT_MAX_OUTPUT;
    if (opt && opt->now) {
        e.r.now = opt->now;
        e.r.now_fixed = 1;
    }
    vkg_status st = VKG_OK;
    jinja_buf buf = {0};
    e.root = new_scope(&e, NULL);
    static const char *const globals[] = {"raise_exception", "strftime_now", "namespace", "range", NULL};
    for (int i = 0; e.root && globals[i]; i++) {
        jinja_value *f = jinja_new(&e.r, JV_FUNCTION);
        if (!f) break;
        f->s = globals[i];
        jinja_dict_set(&e.r, e.root->vars, globals[i], strlen(globals[i]), f);
    }
    if (vkg_json_type_of(context) == VKG_JSON_OBJECT) {
        for (size_t i = 0; !e.r.failed && i < vkg_json_length(context); i++) {
            size_t klen;
            const char *k = vkg_json_key_at(context, i, &klen);
            jinja_dict_set(&e.r, e.root->vars, k, klen, jinja_from_json(&e.r, vkg_json_at(context, i)));
        }
    }
    if (!e.r.failed) exec_nodes(&e, &t->body, e.root, &buf);
    if (e.r.failed) {
        st = e.r.status;
    } else {
        char *o = malloc(buf.n + 1);
        if (!o) {
            st = vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "template: out of memory");
        } else {
            if (buf.n) memcpy(o, buf.p, buf.n);
            o[buf.n] = 0;
            *out = o;
            if (out_len) *out_len = buf.n;
        }
    }
    free_arena(&e.r);
    return st;
}
