/* The server's logprobs (src/server/logprobs.c): the log-softmax and the most likely tokens of a
 * row of logits against a float64 reference (ties, -inf, fewer tokens than asked), and the JSON
 * of both endpoints (a byte-fallback token, a model without a tokenizer, repeated strings in
 * completions' map, minus infinity). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/json.h"
#include "server/logprobs.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* log-softmax of x[i] over n, in double */
static double reference(const float *x, int n, int i) {
    double max = -INFINITY, sum = 0;
    for (int k = 0; k < n; k++) max = x[k] > max ? x[k] : max;
    for (int k = 0; k < n; k++) sum += exp((double)x[k] - max);
    return (double)x[i] - max - log(sum);
}

static void test_values_and_order(void **state) {
    (void)state;
    enum { V = 50257 };
    float *x = malloc(V * sizeof *x);
    assert_non_null(x);
    uint32_t seed = 12345;
    for (int i = 0; i < V; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = (float)((seed >> 8) % 20000) / 1000.0f - 10.0f; /* many equal values: ties */
    }
    x[777] = x[40000] = 25.0f; /* the two most likely, equal: the lower id first */
    x[5] = -INFINITY;
    srv_logprobs lp;
    srv_logprobs_of(x, V, 123, SRV_MAX_TOP_LOGPROBS, &lp);
    assert_int_equal(lp.n_top, SRV_MAX_TOP_LOGPROBS);
    assert_true(fabs(lp.logprob - reference(x, V, 123)) < 1e-5);
    assert_int_equal(lp.top_ids[0], 777);
    assert_int_equal(lp.top_ids[1], 40000);
    for (int k = 0; k < lp.n_top; k++) {
        assert_true(fabs(lp.top[k] - reference(x, V, lp.top_ids[k])) < 1e-5);
        /* no token outside the list is more likely than the last one in it, and within it the
           order is by value, then id */
        if (k)
            assert_true(lp.top[k] < lp.top[k - 1] || (lp.top[k] == lp.top[k - 1] && lp.top_ids[k] > lp.top_ids[k - 1]));
    }
    for (int i = 0; i < V; i++) {
        int listed = 0;
        for (int k = 0; k < lp.n_top; k++) listed |= lp.top_ids[k] == i;
        const float last = x[lp.top_ids[lp.n_top - 1]];
        if (!listed) assert_true(x[i] < last || (x[i] == last && i > lp.top_ids[lp.n_top - 1]));
    }
    srv_logprobs_of(x, V, 5, 0, &lp);
    assert_int_equal(lp.n_top, 0);
    assert_true(isinf(lp.logprob) && lp.logprob < 0);
    free(x);
}

static void test_fewer_tokens_than_asked(void **state) {
    (void)state;
    const float x[3] = {1.0f, 3.0f, 2.0f};
    srv_logprobs lp;
    srv_logprobs_of(x, 3, 0, 5, &lp);
    assert_int_equal(lp.n_top, 3);
    assert_int_equal(lp.top_ids[0], 1);
    assert_int_equal(lp.top_ids[1], 2);
    assert_int_equal(lp.top_ids[2], 0);
    double sum = 0;
    for (int k = 0; k < 3; k++) sum += exp(lp.top[k]);
    assert_true(fabs(sum - 1.0) < 1e-6);
    const float one = 7.0f;
    srv_logprobs_of(&one, 1, 0, 1, &lp);
    assert_true(lp.logprob == 0.0f && lp.n_top == 1 && lp.top[0] == 0.0f);
}

static vkg_tokenizer *smol(void) {
    const char *data = getenv("VKG_TEST_DATA");
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/tokenizers/smollm2", data ? data : "data");
    vkg_tokenizer *t = NULL;
    vkg_error err = {0};
    if (vkg_tokenizer_load(dir, &t, &err) != VKG_OK) fail_msg("%s", err.message);
    return t;
}

/* The JSON of n entries, parsed back (it must be valid JSON). */
static vkg_json *written(int chat, const vkg_tokenizer *tok, const srv_logprob_entry *e, size_t n, sbuf *o) {
    o->len = 0;
    srv_logprobs_json(o, chat, tok, e, n);
    assert_false(o->oom);
    vkg_json *root = NULL;
    vkg_error err = {0};
    if (vkg_json_parse(o->data, o->len, &root, &err) != VKG_OK) fail_msg("%s: %.*s", err.message, (int)o->len, o->data);
    return root;
}

static const char *str(const vkg_json *v) {
    const char *s = vkg_json_string(v, NULL);
    assert_non_null(s);
    return s;
}

static void test_json(void **state) {
    (void)state;
    vkg_tokenizer *tok = smol();
    /* token 71 is "G", 138 the byte 0x8a alone */
    srv_logprob_entry e[2] = {
        {.id = 71, .text_offset = 0, .lp = {.logprob = -0.5f, .n_top = 2, .top_ids = {71, 138}, .top = {-0.5f, -1.5f}}},
        {.id = 138, .text_offset = 1, .lp = {.logprob = -INFINITY, .n_top = 1, .top_ids = {71}, .top = {-0.25f}}},
    };
    sbuf o = {0};
    vkg_json *j = written(1, tok, e, 2, &o);
    const vkg_json *content = vkg_json_get(j, "content");
    assert_int_equal(vkg_json_length(content), 2);
    const vkg_json *c0 = vkg_json_at(content, 0), *c1 = vkg_json_at(content, 1);
    assert_string_equal(str(vkg_json_get(c0, "token")), "G");
    assert_true(vkg_json_number(vkg_json_get(c0, "logprob")) == -0.5);
    assert_true(vkg_json_number(vkg_json_at(vkg_json_get(c0, "bytes"), 0)) == 71);
    assert_int_equal(vkg_json_length(vkg_json_get(c0, "top_logprobs")), 2);
    assert_string_equal(str(vkg_json_get(vkg_json_at(vkg_json_get(c0, "top_logprobs"), 1), "token")), "bytes:\\x8a");
    assert_true(vkg_json_number(vkg_json_at(vkg_json_get(c1, "bytes"), 0)) == 0x8a);
    assert_true(vkg_json_number(vkg_json_get(c1, "logprob")) == -9999.0);
    vkg_json_free(j);

    /* completions: parallel lists; the chosen token joins its top map unless listed already */
    j = written(0, tok, e, 2, &o);
    assert_string_equal(str(vkg_json_at(vkg_json_get(j, "tokens"), 1)), "bytes:\\x8a");
    assert_true(vkg_json_number(vkg_json_at(vkg_json_get(j, "text_offset"), 1)) == 1);
    const vkg_json *tops = vkg_json_get(j, "top_logprobs");
    assert_int_equal(vkg_json_length(vkg_json_at(tops, 0)), 2);
    assert_int_equal(vkg_json_length(vkg_json_at(tops, 1)), 2);
    assert_true(vkg_json_number(vkg_json_get(vkg_json_at(tops, 1), "G")) == -0.25);
    assert_true(vkg_json_number(vkg_json_get(vkg_json_at(tops, 1), "bytes:\\x8a")) == -9999.0);
    vkg_json_free(j);

    /* no tokenizer: tokens by id, bytes null */
    j = written(1, NULL, e, 1, &o);
    const vkg_json *n0 = vkg_json_at(vkg_json_get(j, "content"), 0);
    assert_string_equal(str(vkg_json_get(n0, "token")), "token_id:71");
    assert_int_equal(vkg_json_type_of(vkg_json_get(n0, "bytes")), VKG_JSON_NULL);
    vkg_json_free(j);

    /* nothing to say: null */
    o.len = 0;
    srv_logprobs_json(&o, 1, tok, e, 0);
    assert_int_equal(o.len, 4);
    assert_memory_equal(o.data, "null", 4);
    sbuf_free(&o);
    vkg_tokenizer_free(tok);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_values_and_order),
        cmocka_unit_test(test_fewer_tokens_than_asked),
        cmocka_unit_test(test_json),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
