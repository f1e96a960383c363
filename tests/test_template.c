/* Chat templates (vkgraph_template.h, src/io/jinja_*.c).
 *
 * Golden: the templates of Llama 2, Llama 3, Llama 3.2, TinyLlama, Mistral v0.1, Mixtral, Qwen2.5,
 * Qwen3 and SmolLM2 (tests/data/templates/) rendered over eight conversations, with and without the
 * generation prompt, must equal byte for byte what Hugging Face's JavaScript Jinja
 * (@huggingface/jinja, tools/make_template_golden.js) rendered; where it raised, we must fail too.
 * Then the semantics the golden cases do not reach, and the refusals: each unsupported construct
 * named with its line, and every bound (steps, depth, output) an error, not a hang. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/json.h"
#include "vkgraph_template.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *data_dir(void) {
    const char *d = getenv("VKG_TEST_DATA");
    return d ? d : "data";
}

static void test_golden(void **state) {
    (void)state;
    char path[1024];
    snprintf(path, sizeof path, "%s/templates/golden.json", data_dir());
    vkg_json *g = NULL;
    vkg_error err;
    assert_int_equal(vkg_json_parse_file(path, &g, &err), VKG_OK);
    const vkg_json *cases = vkg_json_get(g, "cases");
    long long now = (long long)vkg_json_number(vkg_json_get(g, "now"));
    size_t n = vkg_json_length(cases), passed = 0, errors = 0;
    assert_true(n >= 100);
    for (size_t i = 0; i < n; i++) {
        const vkg_json *c = vkg_json_at(cases, i);
        const char *file = vkg_json_string(vkg_json_get(c, "template"), NULL);
        const char *conv = vkg_json_string(vkg_json_get(c, "conversation"), NULL);
        size_t in_len = 0, want_len = 0;
        const char *input = vkg_json_string(vkg_json_get(c, "input"), &in_len);
        const char *want = vkg_json_string(vkg_json_get(c, "output"), &want_len);
        int gen = vkg_json_bool(vkg_json_get(c, "add_generation_prompt"));
        snprintf(path, sizeof path, "%s/templates/%s", data_dir(), file);
        vkg_chat_template *t = NULL;
        if (vkg_chat_template_load(path, &t, &err) != VKG_OK) fail_msg("%s: %s", file, err.message);
        vkg_chat_render_options opt = {.add_generation_prompt = gen, .now = now};
        char *out = NULL;
        size_t out_len = 0;
        vkg_status st = vkg_chat_template_render(t, input, in_len, &opt, &out, &out_len, &err);
        if (!want) {
            if (st == VKG_OK) fail_msg("%s / %s / gen=%d: rendered but the reference raised", file, conv, gen);
            assert_non_null(strstr(err.message, "raised"));
            errors++;
        } else {
            if (st != VKG_OK) fail_msg("%s / %s / gen=%d: %s", file, conv, gen, err.message);
            if (out_len != want_len || memcmp(out, want, want_len) != 0)
                fail_msg("%s / %s / gen=%d:\n--- got ---\n%s\n--- want ---\n%s\n", file, conv, gen, out, want);
            passed++;
        }
        free(out);
        vkg_chat_template_free(t);
    }
    print_message("%zu golden renders equal, %zu refusals as the reference\n", passed, errors);
    assert_true(passed > 100);
    vkg_json_free(g);
}

/* Renders src with the messages / variables in json; returns the text (caller frees) or NULL with
 * err filled. */
static char *render(const char *src, const char *json, int gen, size_t max_output, vkg_error *err) {
    vkg_chat_template *t = NULL;
    if (vkg_chat_template_parse(src, strlen(src), "<s>", "</s>", &t, err) != VKG_OK) return NULL;
    vkg_chat_render_options opt = {.add_generation_prompt = gen, .now = 1796208000, .max_output = max_output};
    char *out = NULL;
    vkg_chat_template_render(t, json, strlen(json), &opt, &out, NULL, err);
    vkg_chat_template_free(t);
    return out;
}

static void expect(const char *src, const char *json, const char *want) {
    vkg_error err;
    char *out = render(src, json, 1, 0, &err);
    if (!out) fail_msg("template %s: %s", src, err.message);
    if (strcmp(out, want) != 0) fail_msg("template %s:\n got  [%s]\n want [%s]", src, out, want);
    free(out);
}

static void expect_error(const char *src, const char *json, const char *needle) {
    vkg_error err;
    char *out = render(src, json, 1, 1 << 16, &err);
    if (out) fail_msg("template %s rendered [%s], expected an error containing \"%s\"", src, out, needle);
    if (!strstr(err.message, needle)) fail_msg("template %s: error \"%s\" lacks \"%s\"", src, err.message, needle);
}

#define MSGS "[{\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": \"assistant\", \"content\": \"Yo\"}]"

static void test_semantics(void **state) {
    (void)state;
    /* loop variables */
    expect("{% for m in messages %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}"
           "{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %}",
           MSGS, "1021TrueFalse2;2110FalseTrue2;");
    /* whitespace control and the trim_blocks / lstrip_blocks environment */
    expect("a  \n  {% if true %}\nb\n  {% endif %}\nc", "[]", "a  \nb\nc");
    expect("a  {%- if true -%}  b  {%- endif -%}  c", "[]", "abc");
    expect("x {{- ' y ' -}} z", "[]", "x y z");
    expect("{# a comment #}\nq{#- another -#}  r", "[]", "qr");
    expect("a\n", "[]", "a");
    /* set, set blocks, namespace, scoping of loops */
    expect("{% set x = 1 %}{% for i in [1, 2] %}{% set x = i %}{% endfor %}{{ x }}", "[]", "1");
    expect("{% set ns = namespace(x=1) %}{% for i in [1, 2] %}{% set ns.x = ns.x + i %}{% endfor %}{{ ns.x }}", "[]", "4");
    expect("{% set b %}in {{ 'block' | upper }}{% endset %}[{{ b }}]", "[]", "[in BLOCK]");
    /* macros, defaults, keyword arguments */
    expect("{% macro m(a, b='d') %}<{{ a }}{{ b }}>{% endmacro %}{{ m(1) }}{{ m(2, b=3) }}", "[]", "<1d><23>");
    /* operators, precedence, tests */
    expect("{{ 1 + 2 * 3 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 1 / 2 }} {{ 'a' ~ 1 }}", "[]",
           "7 3 -4 1 2 1024 0.5 a1");
    expect("{{ 'a' + 'b' | upper }} {{ not 1 == 2 }} {{ 'b' in 'abc' }} {{ 'x' not in ['x'] }} {{ 1 if false else 2 }}", "[]",
           "aB True True False 2");
    expect("{{ x is defined }} {{ none is none }} {{ 'a' is string }} {{ {} is mapping }} {{ [] is iterable }} "
           "{{ 3 is equalto 3 }} {{ 3 is odd }} {{ x is not defined }}",
           "[]", "False True True True True True True True");
    /* strings: methods, slicing by characters, filters */
    expect("{{ '  a b  '.strip() }}|{{ 'xxaxx'.lstrip('x') }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|"
           "{{ 'abc'.startswith('ab') }}{{ 'abc'.endswith('bc') }}|{{ 'hello world'.title() }}|{{ 'aXa'.replace('a', 'yy') }}",
           "[]", "a b|axx|['a', 'b', '', 'c']|['a', 'b']|TrueTrue|Hello World|yyXyy");
    expect("{{ 'héllo'[::-1] }} {{ 'héllo'[1:3] }} {{ [1, 2, 3][::-1] }} {{ [1, 2, 3][1:] }} {{ [1, 2, 3][-1] }} {{ 'héllo' | length }}",
           "[]", "olléh él [3, 2, 1] [2, 3] 3 5");
    expect("{{ [1, 2] | join('-') }} {{ ['a', 'b'] | first }}{{ ['a', 'b'] | last }} {{ 'abc' | capitalize }} {{ x | default('d') }} "
           "{{ '' | default('e', true) }} {{ '5' | int + 1 }} {{ 3 | string ~ 'x' }} {{ 'a-b' | replace('-', '+') }}",
           "[]", "1-2 ab Abc d e 6 3x a+b");
    expect("{% for k, v in {'a': 1, 'b': 2} | items %}{{ k }}={{ v }};{% endfor %}", "[]", "a=1;b=2;");
    expect("{{ messages | selectattr('role', 'equalto', 'user') | map(attribute='content') | list }} "
           "{{ messages | rejectattr('role', 'equalto', 'user') | list | length }}",
           MSGS, "['Hi'] 1");
    /* tojson as transformers defines it: ", " / ": " separators, non-ASCII as is, key order kept */
    expect("{{ {'b': [1, 2.5, none, true], 'a': 'é\"\\n'} | tojson }}", "[]",
           "{\"b\": [1, 2.5, null, true], \"a\": \"é\\\"\\n\"}");
    expect("{{ {'a': [1]} | tojson(indent=2) }}", "[]", "{\n  \"a\": [\n    1\n  ]\n}");
    /* break / continue, for-else, loop filters */
    expect("{% for i in [1, 2, 3, 4] %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 4 %}{% break %}{% endif %}{{ i }}{% endfor %}",
           "[]", "13");
    expect("{% for i in [] %}x{% else %}empty{% endfor %}", "[]", "empty");
    expect("{% for m in messages %}{% if m.role == 'assistant' %}{% generation %}[{{ m.content }}]{% endgeneration %}{% endif %}{% endfor %}",
           MSGS, "[Yo]");
    expect("{{ 'a' in nothing }}{% for i in nothing %}x{% endfor %}", "[]", "False");
    expect("{% for i in [1, 2, 3] if i != 2 %}{{ loop.index }}{{ i }}{% endfor %}", "[]", "1123");
    /* the variables apply_chat_template passes, extra ones from an object, strftime_now */
    expect("{{ bos_token }}{{ eos_token }}{{ add_generation_prompt }}{{ messages | length }}", MSGS, "<s></s>True2");
    expect("{{ tools | length }} {{ enable_thinking }}", "{\"messages\": [], \"tools\": [{}], \"enable_thinking\": false}", "1 False");
    expect("{{ strftime_now('%d %b %Y') }}", "[]", "02 Dec 2026");
    /* printing values as Python's str() does */
    expect("{{ none }} {{ true }} {{ 1.0 }} {{ 0.1 }} {{ 1e20 }} {{ [1, 'a', none] }} {{ {'k': 'v'} }}", "[]",
           "None True 1.0 0.1 1e+20 [1, 'a', None] {'k': 'v'}");
}

static void test_refusals(void **state) {
    (void)state;
    /* unsupported constructs are refused when parsed, with the line */
    expect_error("line one\n{{ x | wordwrap }}", "[]", "line 2: unsupported filter 'wordwrap'");
    expect_error("{% include 'x' %}", "[]", "line 1: unsupported statement '{% include %}'");
    expect_error("\n\n{% if x is divisibleby 3 %}{% endif %}", "[]", "line 3: unsupported test 'divisibleby'");
    expect_error("{{ 'a'.zfill(3) }}", "[]", "unsupported method 'zfill'");
    expect_error("a\n\n\n{{ cycler(1, 2) }}", "[]", "line 4: unsupported function 'cycler'");
    expect_error("{% macro m() %}{{ lipsum() }}{% endmacro %}", "[]", "unsupported function 'lipsum'");
    /* as in Jinja, a macro exists from its definition on */
    expect_error("{{ later() }}{% macro later() %}ok{% endmacro %}", "[]", "'later' is not callable (undefined)");
    expect_error("{% for x in y recursive %}{% endfor %}", "[]", "unsupported construct");
    expect_error("{% if x %}", "[]", "ends before '{% endif %}'");
    expect_error("{{ 'abc }}", "[]", "unterminated string");
    expect_error("{{ x ", "[]", "not closed");
    expect_error("{% endfor %}", "[]", "unexpected '{% endfor %}'");
    expect_error("a\n{% break %}", "[]", "line 2: '{% break %}' outside a loop");
    expect_error("{% for i in [1] %}{% macro m() %}{% continue %}{% endmacro %}{% endfor %}", "[]", "outside a loop");
    /* the template's own errors */
    expect_error("{{ raise_exception('roles must alternate') }}", "[]", "raised an exception: roles must alternate");
    expect_error("{{ 1 + 'a' }}", "[]", "unsupported operand types for +: int and string");
    expect_error("{{ x.y }}", "[]", "'y' of an undefined value");
    expect_error("{{ 1 // 0 }}", "[]", "division by zero");
    expect_error("{{ 9223372036854775807 + 1 }}", "[]", "integer overflow");
    expect_error("{{ strftime_now('%s') }}", "[]", "unsupported format directive");
    /* bounds */
    expect_error("{% for i in range(100000000) %}{% endfor %}", "[]", "steps");
    expect_error("{% for a in range(3000) %}{% for b in range(3000) %}{% endfor %}{% endfor %}", "[]", "loop iterations");
    expect_error("{% for a in range(900) %}{% for b in range(900) %}{% set x = (a ~ b) | length %}{% endfor %}{% endfor %}", "[]", "loop iterations");
    expect_error("{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}", "[]", "macro calls nested deeper");
    expect_error("{% for i in range(100000) %}xxxxxxxxxx{% endfor %}", "[]", "output would pass its limit");
    expect_error("{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}", "[]",
                 "MiB");
    expect_error("{{ 'ab' * 100000000 }}", "[]", "output limit");
    char deep[2000];
    size_t k = 0;
    k += (size_t)snprintf(deep + k, sizeof deep - k, "{{ ");
    for (int i = 0; i < 300; i++) deep[k++] = '(';
    deep[k++] = '1';
    for (int i = 0; i < 300; i++) deep[k++] = ')';
    snprintf(deep + k, sizeof deep - k, " }}");
    expect_error(deep, "[]", "nested deeper than");
    /* the messages and the config */
    expect_error("x", "{\"role\": \"user\"}", "expected a JSON array of messages");
    expect_error("x", "[", "messages");
    expect_error("x", "{\"messages\": [], \"bos_token\": \"x\"}", "messages:");
}

static void test_load_config(void **state) {
    (void)state;
    vkg_error err;
    vkg_chat_template *t = NULL;
    char path[1024];
    snprintf(path, sizeof path, "%s/templates/does-not-exist", data_dir());
    assert_int_not_equal(vkg_chat_template_load(path, &t, &err), VKG_OK);
    assert_null(t);
    /* a config without chat_template: the gpt2 tokenizer folder has none */
    snprintf(path, sizeof path, "%s/templates/conversations.json", data_dir());
    assert_int_equal(vkg_chat_template_load(path, &t, &err), VKG_ERR_NOT_FOUND);
    assert_non_null(strstr(err.message, "no chat_template"));
}

/* The command prints exactly what the library renders, and fails with status 1 on a refusal. */
static void test_cli(void **state) {
    (void)state;
    const char *bin = getenv("VKG_BINARY");
    if (!bin) skip();
    char cmd[2048], path[1024];
    snprintf(path, sizeof path, "%s/templates/golden.json", data_dir());
    vkg_json *g = NULL;
    vkg_error err;
    assert_int_equal(vkg_json_parse_file(path, &g, &err), VKG_OK);
    const vkg_json *c = vkg_json_at(vkg_json_get(g, "cases"), 0);
    size_t in_len, want_len;
    const char *input = vkg_json_string(vkg_json_get(c, "input"), &in_len);
    const char *want = vkg_json_string(vkg_json_get(c, "output"), &want_len);
    assert_non_null(want);
    char msgs[] = "/tmp/vkg_test_template_XXXXXX";
    int fd = mkstemp(msgs);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fwrite(input, 1, in_len, f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "'%s' template --tokenizer '%s/templates/%s' --messages %s --now %lld %s", bin, data_dir(),
             vkg_json_string(vkg_json_get(c, "template"), NULL), msgs, (long long)vkg_json_number(vkg_json_get(g, "now")),
             vkg_json_bool(vkg_json_get(c, "add_generation_prompt")) ? "" : "--no-generation-prompt");
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char *got = calloc(1, want_len + 64);
    size_t n = fread(got, 1, want_len + 63, p);
    int status = pclose(p);
    assert_int_equal(status, 0);
    assert_int_equal(n, want_len);
    assert_memory_equal(got, want, want_len);
    free(got);
    snprintf(cmd, sizeof cmd, "'%s' template --tokenizer '%s/templates/mistral.json' --messages %s 2>/dev/null", bin, data_dir(), msgs);
    /* the first case is Llama 2 with a system message; Mistral v0.1 refuses a system role */
    p = popen(cmd, "r");
    while (fread(cmd, 1, sizeof cmd, p) > 0) {
    }
    assert_int_equal(WEXITSTATUS(pclose(p)), 1);
    remove(msgs);
    vkg_json_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden),
        cmocka_unit_test(test_semantics),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_load_config),
        cmocka_unit_test(test_cli),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
