/*
 * A Jinja interpreter for the chat templates of instruct models (tokenizer_config.json's
 * chat_template), in the environment transformers renders them with: trim_blocks and
 * lstrip_blocks on, a single trailing newline of the template dropped, the loopcontrols
 * extension (break, continue), and the globals raise_exception, strftime_now, namespace, range.
 *
 * It covers what those templates use (docs/TEMPLATES.md lists it) and refuses, when parsing, any
 * statement, filter, test or method it does not know, naming it and its line: a template is
 * rendered as Jinja would render it, or not at all.
 *
 * Templates are untrusted input: parsing bounds nesting (JINJA_MAX_DEPTH), rendering bounds the
 * work (JINJA_MAX_STEPS evaluation steps, JINJA_MAX_ITERATIONS loop iterations), the macro call depth
 * (JINJA_MAX_CALL_DEPTH), the output (options.max_output) and the memory one render may take
 * (JINJA_MAX_MEMORY); each limit reached is an error saying which.
 *
 * Pipeline: jinja_lexer.c (text -> tokens, whitespace control), jinja_parser.c (tokens -> AST),
 * jinja_eval.c (AST + context -> text) with values from jinja_value.c and the filters, tests and
 * methods of jinja_builtins.c.
 */
#ifndef VKG_IO_JINJA_H
#define VKG_IO_JINJA_H

#include "base/json.h"
#include "vkgraph.h"

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define JINJA_MAX_DEPTH 128          /* nesting of statements and expressions in the source */
#define JINJA_MAX_STEPS 1000000      /* evaluation steps of one render */
#define JINJA_MAX_ITERATIONS 100000  /* loop iterations of one render, all loops together */
#define JINJA_MAX_CALL_DEPTH 32      /* macro calls inside macro calls */
#define JINJA_MAX_MEMORY (256u << 20) /* bytes of values one render may allocate */
#define JINJA_DEFAULT_MAX_OUTPUT (8u << 20)

/* ---- tokens (jinja_lexer.c) ---- */
typedef enum jinja_tok_kind {
    JT_TEXT,      /* template text, whitespace control already applied */
    JT_EXPR_OPEN, /* {{ */
    JT_EXPR_CLOSE,
    JT_STMT_OPEN, /* {% */
    JT_STMT_CLOSE,
    JT_NAME,
    JT_STRING, /* text holds the decoded bytes */
    JT_INT,
    JT_FLOAT,
    JT_OP, /* text holds the operator: + - * / // % ** ~ == != < <= > >= = ( ) [ ] { } , . : | */
    JT_END
} jinja_tok_kind;

typedef struct jinja_token {
    jinja_tok_kind kind;
    int line;
    char *text; /* NUL-terminated; len may count NULs inside strings */
    size_t len;
    int64_t ival;
    double fval;
} jinja_token;

typedef struct jinja_tokens {
    jinja_token *v;
    size_t n, cap;
} jinja_tokens;

vkg_status jinja_lex(const char *src, size_t len, jinja_tokens *out, vkg_error *err);
void jinja_tokens_free(jinja_tokens *t);

/* ---- the syntax tree (jinja_parser.c) ---- */
typedef enum jinja_node_kind {
    /* statements */
    JN_TEXT, JN_OUTPUT, JN_IF, JN_FOR, JN_SET, JN_SET_BLOCK, JN_MACRO, JN_BREAK, JN_CONTINUE,
    /* expressions */
    JN_LITERAL_STR, JN_LITERAL_INT, JN_LITERAL_FLOAT, JN_LITERAL_BOOL, JN_LITERAL_NONE,
    JN_NAME, JN_LIST, JN_DICT, JN_TUPLE, JN_ATTR, JN_INDEX, JN_SLICE, JN_CALL, JN_FILTER, JN_TEST,
    JN_UNARY, JN_BINARY, JN_AND, JN_OR, JN_NOT, JN_COND
} jinja_node_kind;

typedef struct jinja_node jinja_node;
typedef struct jinja_nodes {
    jinja_node **v;
    size_t n, cap;
} jinja_nodes;

struct jinja_node {
    jinja_node_kind kind;
    int line;
    char *str; /* text, name, attribute, operator, filter/test/macro name */
    size_t len;
    int64_t ival;
    double fval;
    int negated; /* JN_TEST: "is not" */
    jinja_node *a, *b, *c; /* operands: object/index, condition, slice parts, ... */
    jinja_nodes body, orelse;  /* statement bodies; JN_IF's elif chain lives in orelse */
    jinja_nodes args;          /* call / filter / test arguments, list / tuple items, dict keys+values */
    jinja_nodes kwarg_values;  /* keyword arguments; names in kwarg_names */
    char **kwarg_names;
    char **targets;           /* JN_FOR loop variables, JN_MACRO parameter names */
    size_t ntargets;
    jinja_nodes defaults;     /* JN_MACRO: default values (NULL where none) */
};

typedef struct jinja_template {
    jinja_nodes body;
} jinja_template;

vkg_status jinja_parse(const char *src, size_t len, jinja_template **out, vkg_error *err);
void jinja_template_free(jinja_template *t);

/* ---- values (jinja_value.c) ---- */
typedef enum jinja_type {
    JV_UNDEFINED, JV_NONE, JV_BOOL, JV_INT, JV_FLOAT, JV_STRING, JV_LIST, JV_DICT,
    JV_NAMESPACE, JV_MACRO, JV_FUNCTION
} jinja_type;

typedef struct jinja_value jinja_value;
typedef struct jinja_render jinja_render;

struct jinja_value {
    jinja_type type;
    int b;
    int64_t i;
    double f;
    const char *s; /* JV_STRING bytes (NUL-terminated), JV_FUNCTION name */
    size_t len;
    /* JV_LIST items; JV_DICT / JV_NAMESPACE: keys[k] (strings) and items[k] */
    jinja_value **items;
    jinja_value **keys;
    size_t n, cap;
    const jinja_node *macro; /* JV_MACRO */
};

/* Allocation from the render's arena: every value lives until the render ends. */
void *jinja_alloc(jinja_render *r, size_t size);
jinja_value *jinja_new(jinja_render *r, jinja_type type);
jinja_value *jinja_str(jinja_render *r, const char *s, size_t len);
jinja_value *jinja_int(jinja_render *r, int64_t i);
jinja_value *jinja_float(jinja_render *r, double f);
jinja_value *jinja_bool(jinja_render *r, int b);
jinja_value *jinja_none(jinja_render *r);
jinja_value *jinja_undefined(jinja_render *r);
int jinja_push(jinja_render *r, jinja_value *list, jinja_value *item);
/* Sets key in a dict or namespace (replacing an existing key). */
int jinja_dict_set(jinja_render *r, jinja_value *d, const char *key, size_t klen, jinja_value *v);
jinja_value *jinja_dict_get(const jinja_value *d, const char *key, size_t klen); /* NULL if absent */
/* Adds key (a string value, shared, not copied) -> v to a dict known not to hold it yet. */
int jinja_dict_add(jinja_render *r, jinja_value *d, jinja_value *key, jinja_value *v);
/* Makes room for n more entries at once. */
int jinja_reserve(jinja_render *r, jinja_value *c, size_t n);
jinja_value *jinja_from_json(jinja_render *r, const vkg_json *j);

int jinja_truthy(const jinja_value *v);
int jinja_equal(const jinja_value *a, const jinja_value *b);
const char *jinja_type_name(const jinja_value *v);

/* A growing byte buffer in the arena. */
typedef struct jinja_buf {
    char *p;
    size_t n, cap;
} jinja_buf;
int jinja_buf_add(jinja_render *r, jinja_buf *b, const char *s, size_t n);
/* Python's str(v) (what {{ }} and ~ print) and json.dumps(v, ensure_ascii=False, indent=indent)
 * (transformers' tojson; indent < 0 for none).  0 on success, else the render's error is set. */
int jinja_to_str(jinja_render *r, const jinja_value *v, jinja_buf *b);
int jinja_to_json(jinja_render *r, const jinja_value *v, int indent, int depth, jinja_buf *b);
/* Python's repr() of a float (shortest text that reads back the same). */
void jinja_format_float(double f, char *out, size_t size);

/* ---- rendering (jinja_eval.c) ---- */
struct jinja_render {
    vkg_error *err;
    int failed;
    vkg_status status; /* of the first failure */
    /* arena */
    void *blocks;
    size_t used_memory;
    /* limits */
    uint64_t steps;
    uint64_t iterations;
    int call_depth;
    size_t max_output;
    time_t now;
    int now_fixed; /* strftime_now formats `now` as UTC instead of the local clock */
};

/* Records an error (the first one wins) and returns -1. */
int jinja_fail(jinja_render *r, int line, vkg_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

typedef struct jinja_options {
    size_t max_output; /* 0: JINJA_DEFAULT_MAX_OUTPUT */
    time_t now;        /* what strftime_now formats; 0: the current local time */
} jinja_options;

/* Renders with the JSON object `context` as the template's variables. */
vkg_status jinja_render_template(const jinja_template *t, const vkg_json *context, const jinja_options *opt,
                                 char **out, size_t *out_len, vkg_error *err);

/* ---- filters, tests, methods (jinja_builtins.c) ---- */
int jinja_filter_known(const char *name);
int jinja_test_known(const char *name);
int jinja_method_known(const char *name);
/* Each returns NULL after recording an error. */
jinja_value *jinja_apply_filter(jinja_render *r, int line, const char *name, jinja_value *v, jinja_value **args,
                                size_t nargs, char **kwnames, jinja_value **kwargs, size_t nkw);
/* Returns 0/1, or -1 after recording an error. */
int jinja_apply_test(jinja_render *r, int line, const char *name, jinja_value *v, jinja_value **args, size_t nargs);
jinja_value *jinja_call_method(jinja_render *r, int line, jinja_value *obj, const char *name, jinja_value **args,
                               size_t nargs);

#endif
