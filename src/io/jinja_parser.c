/* Tokens -> syntax tree.  Expression precedence is Jinja's (lowest first): conditional
 * "a if b else c", or, and, not, comparisons and in / not in, + -, ~, * / // %, **, unary - +,
 * then a primary with its postfixes (.attr, [index], [a:b:c], (call)) and its filters (|f) and
 * tests (is t), which bind tighter than any operator: a + b | trim is a + (b | trim).
 * Names of filters, tests and methods are checked here, so an unsupported one is refused before
 * anything renders. */
#include "io/jinja.h"

#include "base/error.h"

#include <stdlib.h>
#include <string.h>

typedef struct parser {
    const jinja_tokens *t;
    size_t pos;
    int depth;
    int loops; /* for bodies open around the current statement (break / continue need one) */
    vkg_error *err;
    int failed;
    vkg_status status;
} parser;

static const jinja_token *peek(parser *p) { return &p->t->v[p->pos]; }
static const jinja_token *peek_at(parser *p, size_t k) {
    size_t i = p->pos + k;
    return i < p->t->n ? &p->t->v[i] : &p->t->v[p->t->n - 1];
}
static const jinja_token *next(parser *p) {
    const jinja_token *k = &p->t->v[p->pos];
    if (k->kind != JT_END) p->pos++;
    return k;
}
static int is_op(const jinja_token *k, const char *op) { return k->kind == JT_OP && strcmp(k->text, op) == 0; }
static int is_name(const jinja_token *k, const char *n) { return k->kind == JT_NAME && strcmp(k->text, n) == 0; }

static void *fail(parser *p, int line, vkg_status st, const char *fmt, const char *a) {
    if (!p->failed) {
        p->failed = 1;
        p->status = st;
        char msg[400];
        snprintf(msg, sizeof msg, fmt, a);
        vkg_error_set(p->err, st, "template line %d: %s", line, msg);
    }
    return NULL;
}

static const char *describe(const jinja_token *k) {
    switch (k->kind) {
    case JT_TEXT: return "text";
    case JT_EXPR_OPEN: return "{{";
    case JT_EXPR_CLOSE: return "}}";
    case JT_STMT_OPEN: return "{%";
    case JT_STMT_CLOSE: return "%}";
    case JT_STRING: return "a string";
    case JT_INT:
    case JT_FLOAT: return "a number";
    case JT_END: return "the end of the template";
    default: return k->text;
    }
}

static int expect_op(parser *p, const char *op) {
    const jinja_token *k = peek(p);
    if (!is_op(k, op)) {
        char m[128];
        snprintf(m, sizeof m, "expected '%s' but found '%%s'", op);
        fail(p, k->line, VKG_ERR_FORMAT, m, describe(k));
        return -1;
    }
    next(p);
    return 0;
}

static jinja_node *node(parser *p, jinja_node_kind kind, int line) {
    jinja_node *n = calloc(1, sizeof *n);
    if (!n) return fail(p, line, VKG_ERR_OUT_OF_MEMORY, "%s", "out of memory");
    n->kind = kind;
    n->line = line;
    return n;
}

static char *dup(const char *s, size_t len) {
    char *d = malloc(len + 1);
    if (d) {
        memcpy(d, s, len);
        d[len] = 0;
    }
    return d;
}

static void node_free(jinja_node *n);
static void nodes_free(jinja_nodes *v) {
    for (size_t i = 0; i < v->n; i++) node_free(v->v[i]);
    free(v->v);
}
static void node_free(jinja_node *n) {
    if (!n) return;
    free(n->str);
    node_free(n->a);
    node_free(n->b);
    node_free(n->c);
    nodes_free(&n->body);
    nodes_free(&n->orelse);
    nodes_free(&n->args);
    nodes_free(&n->kwarg_values);
    for (size_t i = 0; i < n->kwarg_values.n; i++) free(n->kwarg_names[i]);
    free(n->kwarg_names);
    for (size_t i = 0; i < n->ntargets; i++) free(n->targets[i]);
    free(n->targets);
    nodes_free(&n->defaults);
    free(n);
}

static int add(parser *p, jinja_nodes *v, jinja_node *n) {
    if (v->n == v->cap) {
        size_t cap = v->cap ? 2 * v->cap : 4;
        jinja_node **nv = realloc(v->v, cap * sizeof *nv);
        if (!nv) {
            node_free(n);
            fail(p, 0, VKG_ERR_OUT_OF_MEMORY, "%s", "out of memory");
            return -1;
        }
        v->v = nv;
        v->cap = cap;
    }
    v->v[v->n++] = n;
    return 0;
}

static int add_name(parser *p, char ***names, size_t *n, const char *s) {
    char **nv = realloc(*names, (*n + 1) * sizeof *nv);
    if (!nv) return fail(p, 0, VKG_ERR_OUT_OF_MEMORY, "%s", "out of memory"), -1;
    *names = nv;
    if (!(nv[*n] = dup(s, strlen(s)))) return fail(p, 0, VKG_ERR_OUT_OF_MEMORY, "%s", "out of memory"), -1;
    (*n)++;
    return 0;
}

static jinja_node *expr(parser *p);
static jinja_node *or_expr(parser *p);
static jinja_node *unary(parser *p);

static int enter(parser *p, int line) {
    if (++p->depth > JINJA_MAX_DEPTH) {
        fail(p, line, VKG_ERR_UNSUPPORTED, "nested deeper than %s levels", "128");
        return -1;
    }
    return 0;
}

/* "(a, b=c)" after the open parenthesis was consumed: positional args then keyword args. */
static int call_args(parser *p, jinja_node *n) {
    size_t nkw = 0;
    while (!is_op(peek(p), ")")) {
        const jinja_token *k = peek(p);
        if (k->kind == JT_NAME && is_op(peek_at(p, 1), "=")) {
            next(p);
            next(p);
            jinja_node *v = expr(p);
            if (!v || add(p, &n->kwarg_values, v)) return -1;
            char **names = realloc(n->kwarg_names, (nkw + 1) * sizeof *names);
            if (!names) return fail(p, k->line, VKG_ERR_OUT_OF_MEMORY, "%s", "out of memory"), -1;
            n->kwarg_names = names;
            if (!(names[nkw++] = dup(k->text, k->len))) return fail(p, k->line, VKG_ERR_OUT_OF_MEMORY, "%s", "out of memory"), -1;
        } else {
            if (n->kwarg_values.n) return fail(p, k->line, VKG_ERR_FORMAT, "%s", "a positional argument after a keyword argument"), -1;
            jinja_node *v = expr(p);
            if (!v || add(p, &n->args, v)) return -1;
        }
        if (is_op(peek(p), ",")) next(p);
        else if (!is_op(peek(p), ")")) return expect_op(p, ")");
    }
    next(p);
    return 0;
}

static jinja_node *primary(parser *p) {
    const jinja_token *k = next(p);
    jinja_node *n = NULL;
    switch (k->kind) {
    case JT_STRING:
        if (!(n = node(p, JN_LITERAL_STR, k->line))) return NULL;
        n->str = dup(k->text, k->len);
        n->len = k->len;
        /* adjacent string literals join, as in Python */
        while (peek(p)->kind == JT_STRING) {
            const jinja_token *m = next(p);
            char *s = realloc(n->str, n->len + m->len + 1);
            if (!s) break;
            memcpy(s + n->len, m->text, m->len + 1);
            n->str = s;
            n->len += m->len;
        }
        if (!n->str) return node_free(n), fail(p, k->line, VKG_ERR_OUT_OF_MEMORY, "%s", "out of memory");
        return n;
    case JT_INT:
        if ((n = node(p, JN_LITERAL_INT, k->line))) n->ival = k->ival;
        return n;
    case JT_FLOAT:
        if ((n = node(p, JN_LITERAL_FLOAT, k->line))) n->fval = k->fval;
        return n;
    case JT_NAME:
        if (!strcmp(k->text, "true") || !strcmp(k->text, "True") || !strcmp(k->text, "false") || !strcmp(k->text, "False")) {
            if ((n = node(p, JN_LITERAL_BOOL, k->line))) n->ival = k->text[0] == 't' || k->text[0] == 'T';
            return n;
        }
        if (!strcmp(k->text, "none") || !strcmp(k->text, "None")) return node(p, JN_LITERAL_NONE, k->line);
        if (!(n = node(p, JN_NAME, k->line))) return NULL;
        if (!(n->str = dup(k->text, k->len))) return node_free(n), fail(p, k->line, VKG_ERR_OUT_OF_MEMORY, "%s", "out of memory");
        return n;
    case JT_OP:
        if (is_op(k, "(")) {
            jinja_node *first = expr(p);
            if (!first) return NULL;
            if (is_op(peek(p), ")")) {
                next(p);
                return first;
            }
            /* a tuple: evaluated as a list */
            if (!(n = node(p, JN_TUPLE, k->line)) || add(p, &n->args, first)) return node_free(n), NULL;
            while (is_op(peek(p), ",")) {
                next(p);
                if (is_op(peek(p), ")")) break;
                jinja_node *v = expr(p);
                if (!v || add(p, &n->args, v)) return node_free(n), NULL;
            }
            if (expect_op(p, ")")) return node_free(n), NULL;
            return n;
        }
        if (is_op(k, "[")) {
            if (!(n = node(p, JN_LIST, k->line))) return NULL;
            while (!is_op(peek(p), "]")) {
                jinja_node *v = expr(p);
                if (!v || add(p, &n->args, v)) return node_free(n), NULL;
                if (is_op(peek(p), ",")) next(p);
                else if (!is_op(peek(p), "]")) return expect_op(p, "]"), node_free(n), NULL;
            }
            next(p);
            return n;
        }
        if (is_op(k, "{")) {
            if (!(n = node(p, JN_DICT, k->line))) return NULL;
            while (!is_op(peek(p), "}")) {
                jinja_node *key = expr(p);
                if (!key || add(p, &n->args, key) || expect_op(p, ":")) return node_free(n), NULL;
                jinja_node *v = expr(p);
                if (!v || add(p, &n->args, v)) return node_free(n), NULL;
                if (is_op(peek(p), ",")) next(p);
                else if (!is_op(peek(p), "}")) return expect_op(p, "}"), node_free(n), NULL;
            }
            next(p);
            return n;
        }
        break;
    default:
        break;
    }
    return fail(p, k->line, VKG_ERR_FORMAT, "expected an expression but found '%s'", describe(k));
}

/* [index] or [a:b:c] after the '[' */
static jinja_node *subscript(parser *p, jinja_node *obj, int line) {
    jinja_node *parts[3] = {NULL, NULL, NULL};
    int colons = 0;
    for (;;) {
        if (is_op(peek(p), "]")) break;
        if (is_op(peek(p), ":")) {
            if (++colons > 2) {
                for (int i = 0; i < 3; i++) node_free(parts[i]);
                return fail(p, line, VKG_ERR_FORMAT, "%s", "too many ':' in a slice");
            }
            next(p);
            continue;
        }
        if (parts[colons]) {
            for (int i = 0; i < 3; i++) node_free(parts[i]);
            return expect_op(p, "]"), NULL;
        }
        if (!(parts[colons] = expr(p))) {
            for (int i = 0; i < 3; i++) node_free(parts[i]);
            return NULL;
        }
    }
    next(p);
    jinja_node *n = node(p, colons ? JN_SLICE : JN_INDEX, line);
    if (!n || (!colons && !parts[0])) {
        for (int i = 0; i < 3; i++) node_free(parts[i]);
        node_free(n);
        return n ? fail(p, line, VKG_ERR_FORMAT, "%s", "empty subscript []") : NULL;
    }
    n->a = obj;
    if (colons) {
        n->b = parts[0];
        n->c = parts[1];
        if (parts[2] && add(p, &n->args, parts[2])) return node_free(n), NULL;
    } else {
        n->b = parts[0];
    }
    return n;
}

static jinja_node *postfix(parser *p, jinja_node *n) {
    for (;;) {
        const jinja_token *k = peek(p);
        if (is_op(k, ".")) {
            next(p);
            const jinja_token *a = next(p);
            jinja_node *m;
            if (a->kind == JT_NAME) {
                if (!(m = node(p, JN_ATTR, a->line))) return node_free(n), NULL;
                m->str = dup(a->text, a->len);
            } else if (a->kind == JT_INT) { /* x.0 is x[0] */
                if (!(m = node(p, JN_INDEX, a->line))) return node_free(n), NULL;
                if ((m->b = node(p, JN_LITERAL_INT, a->line))) m->b->ival = a->ival;
            } else {
                node_free(n);
                return fail(p, a->line, VKG_ERR_FORMAT, "expected a name after '.' but found '%s'", describe(a));
            }
            m->a = n;
            n = m;
            if (n->kind == JN_ATTR && is_op(peek(p), "(") && !jinja_method_known(n->str))
                return node_free(n), fail(p, a->line, VKG_ERR_UNSUPPORTED, "unsupported method '%s'", a->text);
        } else if (is_op(k, "[")) {
            next(p);
            jinja_node *m = subscript(p, n, k->line);
            if (!m) return node_free(n), NULL;
            n = m;
        } else if (is_op(k, "(")) {
            next(p);
            jinja_node *m = node(p, JN_CALL, k->line);
            if (!m) return node_free(n), NULL;
            m->a = n;
            n = m;
            if (call_args(p, n)) return node_free(n), NULL;
        } else {
            return n;
        }
    }
}

/* A test's argument written without parentheses: "is divisibleby 3", "is sameas false". */
static int starts_bare_argument(const jinja_token *k) {
    if (k->kind == JT_STRING || k->kind == JT_INT || k->kind == JT_FLOAT) return 1;
    if (k->kind != JT_NAME) return 0;
    static const char *const stop[] = {"and", "or", "else", "in", "is", "if", "not", "recursive", NULL};
    for (int i = 0; stop[i]; i++)
        if (!strcmp(k->text, stop[i])) return 0;
    return 1;
}

static jinja_node *filters_and_tests(parser *p, jinja_node *n) {
    for (;;) {
        const jinja_token *k = peek(p);
        if (is_op(k, "|")) {
            next(p);
            const jinja_token *f = next(p);
            if (f->kind != JT_NAME)
                return node_free(n), fail(p, f->line, VKG_ERR_FORMAT, "expected a filter name but found '%s'", describe(f));
            if (!jinja_filter_known(f->text))
                return node_free(n), fail(p, f->line, VKG_ERR_UNSUPPORTED, "unsupported filter '%s'", f->text);
            jinja_node *m = node(p, JN_FILTER, f->line);
            if (!m) return node_free(n), NULL;
            m->a = n;
            n = m;
            if (!(m->str = dup(f->text, f->len))) return node_free(n), fail(p, f->line, VKG_ERR_OUT_OF_MEMORY, "%s", "out of memory");
            if (is_op(peek(p), "(")) {
                next(p);
                if (call_args(p, m)) return node_free(n), NULL;
            }
        } else if (is_name(k, "is")) {
            next(p);
            int negated = 0;
            if (is_name(peek(p), "not")) {
                next(p);
                negated = 1;
            }
            const jinja_token *t = next(p);
            const char *tname = t->kind == JT_NAME ? t->text : NULL;
            /* "is none", "is true": names that are also literals */
            if (!tname)
                return node_free(n), fail(p, t->line, VKG_ERR_FORMAT, "expected a test name but found '%s'", describe(t));
            if (!jinja_test_known(tname))
                return node_free(n), fail(p, t->line, VKG_ERR_UNSUPPORTED, "unsupported test '%s'", tname);
            jinja_node *m = node(p, JN_TEST, t->line);
            if (!m) return node_free(n), NULL;
            m->a = n;
            n = m;
            m->negated = negated;
            if (!(m->str = dup(tname, strlen(tname)))) return node_free(n), fail(p, t->line, VKG_ERR_OUT_OF_MEMORY, "%s", "out of memory");
            if (is_op(peek(p), "(")) {
                next(p);
                if (call_args(p, m)) return node_free(n), NULL;
            } else if (starts_bare_argument(peek(p))) {
                jinja_node *arg = primary(p);
                if (!arg || !(arg = postfix(p, arg)) || add(p, &m->args, arg)) return node_free(n), NULL;
            }
        } else {
            return n;
        }
    }
}

static jinja_node *unary(parser *p) {
    const jinja_token *k = peek(p);
    if (enter(p, k->line)) return NULL;
    jinja_node *n;
    if (is_op(k, "-") || is_op(k, "+")) {
        next(p);
        jinja_node *operand = unary(p);
        if (!operand) return NULL;
        if (!(n = node(p, JN_UNARY, k->line))) return node_free(operand), NULL;
        n->str = dup(k->text, 1);
        n->a = operand;
    } else {
        n = primary(p);
        if (n) n = postfix(p, n);
        if (n) n = filters_and_tests(p, n);
    }
    p->depth--;
    return n;
}

static jinja_node *binary(parser *p, jinja_node *l, const jinja_token *op, jinja_node *r) {
    if (!r) return node_free(l), NULL;
    jinja_node *n = node(p, JN_BINARY, op->line);
    if (!n) return node_free(l), node_free(r), NULL;
    n->str = dup(op->text, op->len);
    n->a = l;
    n->b = r;
    return n;
}

static jinja_node *power(parser *p) {
    jinja_node *l = unary(p);
    while (l && is_op(peek(p), "**")) {
        const jinja_token *op = next(p);
        l = binary(p, l, op, unary(p));
    }
    return l;
}
static jinja_node *math2(parser *p) {
    jinja_node *l = power(p);
    while (l && (is_op(peek(p), "*") || is_op(peek(p), "/") || is_op(peek(p), "//") || is_op(peek(p), "%"))) {
        const jinja_token *op = next(p);
        l = binary(p, l, op, power(p));
    }
    return l;
}
static jinja_node *concat(parser *p) {
    jinja_node *l = math2(p);
    while (l && is_op(peek(p), "~")) {
        const jinja_token *op = next(p);
        l = binary(p, l, op, math2(p));
    }
    return l;
}
static jinja_node *math1(parser *p) {
    jinja_node *l = concat(p);
    while (l && (is_op(peek(p), "+") || is_op(peek(p), "-"))) {
        const jinja_token *op = next(p);
        l = binary(p, l, op, concat(p));
    }
    return l;
}
static jinja_node *compare(parser *p) {
    jinja_node *l = math1(p);
    static const char *const ops[] = {"==", "!=", "<", "<=", ">", ">=", NULL};
    while (l) {
        const jinja_token *k = peek(p);
        int is_cmp = 0;
        for (int i = 0; ops[i]; i++) is_cmp |= is_op(k, ops[i]);
        if (is_cmp) {
            next(p);
            l = binary(p, l, k, math1(p));
        } else if (is_name(k, "in")) {
            next(p);
            l = binary(p, l, k, math1(p));
        } else if (is_name(k, "not") && is_name(peek_at(p, 1), "in")) {
            next(p);
            const jinja_token *in = next(p);
            jinja_node *b = binary(p, l, in, math1(p));
            if (!b) return NULL;
            if (!(l = node(p, JN_NOT, k->line))) return node_free(b), NULL;
            l->a = b;
        } else {
            break;
        }
    }
    return l;
}
static jinja_node *not_expr(parser *p) {
    const jinja_token *k = peek(p);
    if (is_name(k, "not")) {
        next(p);
        if (enter(p, k->line)) return NULL;
        jinja_node *a = not_expr(p);
        p->depth--;
        if (!a) return NULL;
        jinja_node *n = node(p, JN_NOT, k->line);
        if (!n) return node_free(a), NULL;
        n->a = a;
        return n;
    }
    return compare(p);
}
static jinja_node *logic(parser *p, int is_or) {
    jinja_node *l = is_or ? logic(p, 0) : not_expr(p);
    while (l && is_name(peek(p), is_or ? "or" : "and")) {
        const jinja_token *op = next(p);
        jinja_node *r = is_or ? logic(p, 0) : not_expr(p);
        if (!r) return node_free(l), NULL;
        jinja_node *n = node(p, is_or ? JN_OR : JN_AND, op->line);
        if (!n) return node_free(l), node_free(r), NULL;
        n->a = l;
        n->b = r;
        l = n;
    }
    return l;
}
static jinja_node *or_expr(parser *p) { return logic(p, 1); }

static jinja_node *expr(parser *p) {
    const jinja_token *k = peek(p);
    if (enter(p, k->line)) return NULL;
    jinja_node *n = or_expr(p);
    while (n && is_name(peek(p), "if")) {
        const jinja_token *q = next(p);
        jinja_node *cond = or_expr(p);
        if (!cond) return node_free(n), NULL;
        jinja_node *c = node(p, JN_COND, q->line);
        if (!c) return node_free(n), node_free(cond), NULL;
        c->a = n;
        c->b = cond;
        if (is_name(peek(p), "else")) {
            next(p);
            if (!(c->c = expr(p))) return node_free(c), NULL;
        }
        n = c;
    }
    p->depth--;
    return n;
}

/* ---- statements ---- */

static int body(parser *p, jinja_nodes *out, const char *const *ends, const char **which);

static int expect_close(parser *p) {
    const jinja_token *k = peek(p);
    if (k->kind != JT_STMT_CLOSE) {
        fail(p, k->line, VKG_ERR_FORMAT, "expected '%%}' but found '%s'", describe(k));
        return -1;
    }
    next(p);
    return 0;
}

static jinja_node *stmt_if(parser *p, int line) {
    jinja_node *n = node(p, JN_IF, line);
    if (!n || !(n->a = expr(p)) || expect_close(p)) return node_free(n), NULL;
    static const char *const ends[] = {"elif", "else", "endif", NULL};
    const char *which = NULL;
    if (body(p, &n->body, ends, &which)) return node_free(n), NULL;
    if (!strcmp(which, "elif")) {
        jinja_node *e = stmt_if(p, peek(p)->line);
        if (!e || add(p, &n->orelse, e)) return node_free(n), NULL;
        return n;
    }
    if (!strcmp(which, "else")) {
        static const char *const ends2[] = {"endif", NULL};
        if (expect_close(p) || body(p, &n->orelse, ends2, &which)) return node_free(n), NULL;
    }
    if (expect_close(p)) return node_free(n), NULL;
    return n;
}

static jinja_node *stmt_for(parser *p, int line) {
    jinja_node *n = node(p, JN_FOR, line);
    if (!n) return NULL;
    for (;;) {
        const jinja_token *k = next(p);
        if (k->kind != JT_NAME) return node_free(n), fail(p, k->line, VKG_ERR_FORMAT, "expected a loop variable but found '%s'", describe(k));
        if (add_name(p, &n->targets, &n->ntargets, k->text)) return node_free(n), NULL;
        if (!is_op(peek(p), ",")) break;
        next(p);
    }
    if (!is_name(peek(p), "in")) return node_free(n), fail(p, peek(p)->line, VKG_ERR_FORMAT, "expected 'in' but found '%s'", describe(peek(p)));
    next(p);
    /* the iterable may not hold a bare conditional: "for x in xs if cond" filters */
    if (!(n->a = or_expr(p))) return node_free(n), NULL;
    if (is_name(peek(p), "if")) {
        next(p);
        if (!(n->b = or_expr(p))) return node_free(n), NULL;
    }
    if (is_name(peek(p), "recursive"))
        return node_free(n), fail(p, peek(p)->line, VKG_ERR_UNSUPPORTED, "unsupported construct '%s'", "for ... recursive");
    if (expect_close(p)) return node_free(n), NULL;
    static const char *const ends[] = {"else", "endfor", NULL};
    const char *which = NULL;
    p->loops++;
    int rc = body(p, &n->body, ends, &which);
    p->loops--;
    if (rc) return node_free(n), NULL;
    if (!strcmp(which, "else")) {
        static const char *const ends2[] = {"endfor", NULL};
        if (expect_close(p) || body(p, &n->orelse, ends2, &which)) return node_free(n), NULL;
    }
    if (expect_close(p)) return node_free(n), NULL;
    return n;
}

static jinja_node *stmt_set(parser *p, int line) {
    const jinja_token *k = next(p);
    if (k->kind != JT_NAME) return fail(p, k->line, VKG_ERR_FORMAT, "expected a name after 'set' but found '%s'", describe(k));
    jinja_node *n = node(p, JN_SET, line);
    if (!n || add_name(p, &n->targets, &n->ntargets, k->text)) return node_free(n), NULL;
    if (is_op(peek(p), ".")) { /* set ns.attr = value */
        next(p);
        const jinja_token *a = next(p);
        if (a->kind != JT_NAME) return node_free(n), fail(p, a->line, VKG_ERR_FORMAT, "expected a name after '.' but found '%s'", describe(a));
        n->str = dup(a->text, a->len);
    } else if (is_op(peek(p), ",")) {
        return node_free(n), fail(p, k->line, VKG_ERR_UNSUPPORTED, "unsupported construct '%s'", "set a, b = ...");
    }
    if (peek(p)->kind == JT_STMT_CLOSE && !n->str) { /* {% set x %}...{% endset %} */
        next(p);
        n->kind = JN_SET_BLOCK;
        static const char *const ends[] = {"endset", NULL};
        const char *which = NULL;
        if (body(p, &n->body, ends, &which) || expect_close(p)) return node_free(n), NULL;
        return n;
    }
    if (expect_op(p, "=") || !(n->a = expr(p)) || expect_close(p)) return node_free(n), NULL;
    return n;
}

static jinja_node *stmt_macro(parser *p, int line) {
    const jinja_token *k = next(p);
    if (k->kind != JT_NAME) return fail(p, k->line, VKG_ERR_FORMAT, "expected a macro name but found '%s'", describe(k));
    jinja_node *n = node(p, JN_MACRO, line);
    if (!n || !(n->str = dup(k->text, k->len)) || expect_op(p, "(")) return node_free(n), NULL;
    while (!is_op(peek(p), ")")) {
        const jinja_token *a = next(p);
        if (a->kind != JT_NAME) return node_free(n), fail(p, a->line, VKG_ERR_FORMAT, "expected a parameter name but found '%s'", describe(a));
        if (add_name(p, &n->targets, &n->ntargets, a->text)) return node_free(n), NULL;
        jinja_node *def = NULL;
        if (is_op(peek(p), "=")) {
            next(p);
            if (!(def = expr(p))) return node_free(n), NULL;
        }
        /* defaults holds one slot per parameter (NULL where none) */
        if (n->defaults.n == n->defaults.cap) {
            size_t cap = n->defaults.cap ? 2 * n->defaults.cap : 4;
            jinja_node **v = realloc(n->defaults.v, cap * sizeof *v);
            if (!v) return node_free(def), node_free(n), fail(p, a->line, VKG_ERR_OUT_OF_MEMORY, "%s", "out of memory");
            n->defaults.v = v;
            n->defaults.cap = cap;
        }
        n->defaults.v[n->defaults.n++] = def;
        if (is_op(peek(p), ",")) next(p);
        else if (!is_op(peek(p), ")")) return expect_op(p, ")"), node_free(n), NULL;
    }
    next(p);
    static const char *const ends[] = {"endmacro", NULL};
    const char *which = NULL;
    int outer_loops = p->loops;
    p->loops = 0; /* a macro's body is not inside the loop around its definition */
    int rc = expect_close(p) || body(p, &n->body, ends, &which) || expect_close(p);
    p->loops = outer_loops;
    if (rc) return node_free(n), NULL;
    return n;
}

/* {% generation %}...{% endgeneration %}: transformers' AssistantTracker marks the assistant's
 * text with it (for return_assistant_tokens_mask) and renders the body as it is; so does this,
 * as an if whose condition is true. */
static jinja_node *stmt_generation(parser *p, int line) {
    jinja_node *n = node(p, JN_IF, line);
    if (!n || !(n->a = node(p, JN_LITERAL_BOOL, line)) || expect_close(p)) return node_free(n), NULL;
    n->a->ival = 1;
    static const char *const ends[] = {"endgeneration", NULL};
    const char *which = NULL;
    if (body(p, &n->body, ends, &which) || expect_close(p)) return node_free(n), NULL;
    return n;
}

static const char *const KNOWN_ENDS[] = {"elif", "else", "endif", "endfor", "endset", "endmacro", "endgeneration", NULL};

/* Statements until one of `ends` (whose name is left in *which, the "%}" after it unread). */
static int body(parser *p, jinja_nodes *out, const char *const *ends, const char **which) {
    if (enter(p, peek(p)->line)) return -1;
    for (;;) {
        const jinja_token *k = next(p);
        jinja_node *n = NULL;
        if (k->kind == JT_END) {
            if (!ends) break;
            size_t last = 0;
            while (ends[last + 1]) last++;
            fail(p, k->line, VKG_ERR_FORMAT, "the template ends before '{%% %s %%}'", ends[last]);
            return -1;
        }
        if (k->kind == JT_TEXT) {
            if (!(n = node(p, JN_TEXT, k->line)) || !(n->str = dup(k->text, k->len))) return node_free(n), -1;
            n->len = k->len;
        } else if (k->kind == JT_EXPR_OPEN) {
            if (!(n = node(p, JN_OUTPUT, k->line)) || !(n->a = expr(p))) return node_free(n), -1;
            if (peek(p)->kind != JT_EXPR_CLOSE)
                return node_free(n), fail(p, peek(p)->line, VKG_ERR_FORMAT, "expected '}}' but found '%s'", describe(peek(p))), -1;
            next(p);
        } else if (k->kind == JT_STMT_OPEN) {
            const jinja_token *s = next(p);
            if (s->kind != JT_NAME) return fail(p, s->line, VKG_ERR_FORMAT, "expected a statement but found '%s'", describe(s)), -1;
            for (int i = 0; ends && ends[i]; i++)
                if (!strcmp(s->text, ends[i])) {
                    *which = ends[i];
                    p->depth--;
                    return 0;
                }
            for (int i = 0; KNOWN_ENDS[i]; i++)
                if (!strcmp(s->text, KNOWN_ENDS[i]))
                    return fail(p, s->line, VKG_ERR_FORMAT, "unexpected '{%% %s %%}'", s->text), -1;
            if (!strcmp(s->text, "if")) n = stmt_if(p, s->line);
            else if (!strcmp(s->text, "for")) n = stmt_for(p, s->line);
            else if (!strcmp(s->text, "set")) n = stmt_set(p, s->line);
            else if (!strcmp(s->text, "macro")) n = stmt_macro(p, s->line);
            else if (!strcmp(s->text, "generation")) n = stmt_generation(p, s->line);
            else if (!strcmp(s->text, "break") || !strcmp(s->text, "continue")) {
                if (!p->loops) return fail(p, s->line, VKG_ERR_FORMAT, "'{%% %s %%}' outside a loop", s->text), -1;
                n = node(p, s->text[0] == 'b' ? JN_BREAK : JN_CONTINUE, s->line);
                if (n && expect_close(p)) return node_free(n), -1;
            } else
                return fail(p, s->line, VKG_ERR_UNSUPPORTED, "unsupported statement '{%% %s %%}'", s->text), -1;
            if (!n) return -1;
        } else {
            return fail(p, k->line, VKG_ERR_FORMAT, "unexpected '%s'", describe(k)), -1;
        }
        if (add(p, out, n)) return -1;
    }
    p->depth--;
    return 0;
}

/* ---- calls of names: each must be a global or a macro of this template ---- */

static const char *const GLOBAL_FUNCTIONS[] = {"raise_exception", "strftime_now", "namespace", "range", NULL};

static void collect_macros(const jinja_node *n, char ***names, size_t *count, parser *p);
static void collect_macros_in(const jinja_nodes *v, char ***names, size_t *count, parser *p) {
    for (size_t i = 0; i < v->n; i++) collect_macros(v->v[i], names, count, p);
}
static void collect_macros(const jinja_node *n, char ***names, size_t *count, parser *p) {
    if (!n || p->failed) return;
    if (n->kind == JN_MACRO) add_name(p, names, count, n->str);
    collect_macros_in(&n->body, names, count, p);
    collect_macros_in(&n->orelse, names, count, p);
}

static int is_callable_name(const char *name, char **macros, size_t nmacros) {
    for (int i = 0; GLOBAL_FUNCTIONS[i]; i++)
        if (!strcmp(name, GLOBAL_FUNCTIONS[i])) return 1;
    for (size_t i = 0; i < nmacros; i++)
        if (!strcmp(name, macros[i])) return 1;
    return 0;
}

static void check_calls(const jinja_node *n, char **macros, size_t nmacros, parser *p);
static void check_calls_in(const jinja_nodes *v, char **macros, size_t nmacros, parser *p) {
    for (size_t i = 0; i < v->n; i++) check_calls(v->v[i], macros, nmacros, p);
}
static void check_calls(const jinja_node *n, char **macros, size_t nmacros, parser *p) {
    if (!n || p->failed) return;
    if (n->kind == JN_CALL && n->a && n->a->kind == JN_NAME && !is_callable_name(n->a->str, macros, nmacros)) {
        fail(p, n->line, VKG_ERR_UNSUPPORTED, "unsupported function '%s'", n->a->str);
        return;
    }
    check_calls(n->a, macros, nmacros, p);
    check_calls(n->b, macros, nmacros, p);
    check_calls(n->c, macros, nmacros, p);
    check_calls_in(&n->body, macros, nmacros, p);
    check_calls_in(&n->orelse, macros, nmacros, p);
    check_calls_in(&n->args, macros, nmacros, p);
    check_calls_in(&n->kwarg_values, macros, nmacros, p);
    check_calls_in(&n->defaults, macros, nmacros, p);
}

vkg_status jinja_parse(const char *src, size_t len, jinja_template **out, vkg_error *err) {
    *out = NULL;
    jinja_tokens toks;
    vkg_status st = jinja_lex(src, len, &toks, err);
    if (st != VKG_OK) return st;
    jinja_template *t = calloc(1, sizeof *t);
    if (!t) {
        jinja_tokens_free(&toks);
        return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "template: out of memory");
    }
    parser p = {.t = &toks, .err = err};
    const char *which = NULL;
    if (body(&p, &t->body, NULL, &which) != 0 || p.failed) {
        jinja_tokens_free(&toks);
        jinja_template_free(t);
        return p.failed ? p.status : VKG_ERR_FORMAT;
    }
    jinja_tokens_free(&toks);
    char **macros = NULL;
    size_t nmacros = 0;
    collect_macros_in(&t->body, &macros, &nmacros, &p);
    check_calls_in(&t->body, macros, nmacros, &p);
    for (size_t i = 0; i < nmacros; i++) free(macros[i]);
    free(macros);
    if (p.failed) {
        jinja_template_free(t);
        return p.status;
    }
    *out = t;
    return VKG_OK;
}

void jinja_template_free(jinja_template *t) {
    if (!t) return;
    nodes_free(&t->body);
    free(t);
}
