/* The builder's error paths: every shape or argument mistake returns VKG_NONE, puts the graph into
 * its error state with a status and a message that names the op, the operands and their shapes,
 * keeps the first error, and makes compilation fail with that message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "vkgraph.h"

/* Checks the result of a failing call: VKG_NONE, the status, and that the message holds each of
 * the NULL-terminated substrings. */
static void expect_error(const vkg_graph *g, vkg_tensor t, vkg_status status, ...) {
    assert_int_equal(t, VKG_NONE);
    assert_int_equal(vkg_graph_status(g), status);
    const char *msg = vkg_graph_error(g);
    va_list ap;
    va_start(ap, status);
    for (const char *sub = va_arg(ap, const char *); sub; sub = va_arg(ap, const char *)) {
        if (!strstr(msg, sub)) {
            fprintf(stderr, "message \"%s\" lacks \"%s\"\n", msg, sub);
            va_end(ap);
            fail();
        }
    }
    va_end(ap);
}

static vkg_tensor in2(vkg_graph *g, const char *name, int64_t d0, int64_t d1) {
    const int64_t shape[2] = {d0, d1};
    return vkg_input(g, name, VKG_F32, 2, shape);
}

static vkg_tensor in1(vkg_graph *g, const char *name, int64_t d0) { return vkg_input(g, name, VKG_F32, 1, &d0); }

static vkg_tensor in3(vkg_graph *g, const char *name, int64_t d0, int64_t d1, int64_t d2) {
    const int64_t shape[3] = {d0, d1, d2};
    return vkg_input(g, name, VKG_F32, 3, shape);
}

static void test_matmul_k_mismatch(void **state) {
    (void)state;
    vkg_graph *g = vkg_graph_new();
    vkg_tensor a = in2(g, "a", 2, 3), b = in2(g, "b", 4, 5);
    expect_error(g, vkg_matmul(g, a, b, VKG_NONE, 0), VKG_ERR_SHAPE, "matmul", "[2, 3]", "[4, 5]", "'a'", "'b'",
                 "K = 3", "K = 4", NULL);
    vkg_graph_free(g);
}

static void test_matmul_transposed_mismatch(void **state) {
    (void)state;
    vkg_graph *g = vkg_graph_new();
    /* a^T is [2, 3] (K = 3) and b^T is [5, 4] (K = 5): the flags decide which dimension is K. */
    vkg_tensor a = in2(g, "a", 3, 2), b = in2(g, "b", 4, 5), b2 = in2(g, "b2", 5, 3);
    vkg_tensor ok = vkg_matmul(g, a, b2, VKG_NONE, VKG_TRANSPOSE_A | VKG_TRANSPOSE_B);
    assert_int_not_equal(ok, VKG_NONE);
    int64_t shape[VKG_MAX_DIMS];
    assert_int_equal(vkg_tensor_shape(g, ok, shape), 2);
    assert_int_equal(shape[0], 2);
    assert_int_equal(shape[1], 5);
    expect_error(g, vkg_matmul(g, a, b, VKG_NONE, VKG_TRANSPOSE_A | VKG_TRANSPOSE_B), VKG_ERR_SHAPE, "matmul",
                 "[3, 2] transposed", "[4, 5] transposed", "'a'", "'b'", "K = 3", "K = 5", NULL);
    vkg_graph_free(g);

    /* Without the flag the same a has K = 2. */
    g = vkg_graph_new();
    a = in2(g, "a", 3, 2);
    b = in2(g, "b", 3, 4);
    expect_error(g, vkg_matmul(g, a, b, VKG_NONE, 0), VKG_ERR_SHAPE, "matmul", "[3, 2]", "[3, 4]", "K = 2", NULL);
    vkg_graph_free(g);

    g = vkg_graph_new();
    a = in2(g, "a", 2, 3);
    b = in2(g, "b", 3, 4);
    expect_error(g, vkg_matmul(g, a, b, VKG_NONE, VKG_TRANSPOSE_B), VKG_ERR_SHAPE, "matmul", "[3, 4] transposed",
                 NULL);
    vkg_graph_free(g);
}

static void test_matmul_batch_and_rank(void **state) {
    (void)state;
    vkg_graph *g = vkg_graph_new();
    vkg_tensor a = in3(g, "a", 2, 3, 4), b = in3(g, "b", 3, 4, 5);
    expect_error(g, vkg_matmul(g, a, b, VKG_NONE, 0), VKG_ERR_SHAPE, "matmul", "batch", "[2, 3, 4]", "[3, 4, 5]",
                 NULL);
    vkg_graph_free(g);

    g = vkg_graph_new();
    a = in1(g, "a", 4);
    b = in2(g, "b", 4, 5);
    expect_error(g, vkg_matmul(g, a, b, VKG_NONE, 0), VKG_ERR_SHAPE, "matmul", "[4]", "[4, 5]", NULL);
    vkg_graph_free(g);

    g = vkg_graph_new();
    a = in2(g, "a", 2, 4);
    b = in2(g, "b", 4, 5);
    expect_error(g, vkg_matmul(g, a, b, VKG_NONE, 8u), VKG_ERR_INVALID_ARGUMENT, "matmul", "flags", NULL);
    vkg_graph_free(g);
}

static void test_matmul_bias_size(void **state) {
    (void)state;
    vkg_graph *g = vkg_graph_new();
    vkg_tensor a = in2(g, "a", 2, 3), b = in2(g, "b", 3, 4), bias = in1(g, "bias", 5);
    expect_error(g, vkg_matmul(g, a, b, bias, 0), VKG_ERR_SHAPE, "matmul", "bias", "[5]", "'bias'", "[4]",
                 "[2, 3]", "[3, 4]", NULL);
    vkg_graph_free(g);

    g = vkg_graph_new();
    a = in2(g, "a", 2, 3);
    b = in2(g, "b", 3, 4);
    bias = in2(g, "bias2d", 1, 4); /* a bias is [N], not [1, N] */
    expect_error(g, vkg_matmul(g, a, b, bias, 0), VKG_ERR_SHAPE, "matmul", "[1, 4]", "'bias2d'", NULL);
    vkg_graph_free(g);
}

static void test_binary_not_broadcasting(void **state) {
    (void)state;
    vkg_graph *g = vkg_graph_new();
    vkg_tensor a = in2(g, "a", 2, 3), b = in1(g, "b", 4);
    expect_error(g, vkg_add(g, a, b), VKG_ERR_SHAPE, "add", "[2, 3]", "[4]", "'a'", "'b'", "broadcast", NULL);
    vkg_graph_free(g);

    g = vkg_graph_new();
    a = in3(g, "x", 4, 2, 3);
    b = in2(g, "y", 3, 3);
    expect_error(g, vkg_mul(g, a, b), VKG_ERR_SHAPE, "mul", "[4, 2, 3]", "[3, 3]", "'x'", "'y'", NULL);
    vkg_graph_free(g);

    /* An i32 operand is a type error, not a shape error. */
    g = vkg_graph_new();
    const int64_t n = 3;
    a = in1(g, "a", 3);
    b = vkg_input(g, "ids", VKG_I32, 1, &n);
    expect_error(g, vkg_add(g, a, b), VKG_ERR_INVALID_ARGUMENT, "add", "'ids'", "f32", NULL);
    vkg_graph_free(g);
}

static void test_layernorm_params(void **state) {
    (void)state;
    vkg_graph *g = vkg_graph_new();
    vkg_tensor x = in2(g, "x", 2, 8), gamma = in1(g, "gamma", 7), beta = in1(g, "beta", 8);
    expect_error(g, vkg_layernorm(g, x, gamma, beta, 1e-5f), VKG_ERR_SHAPE, "layernorm", "gamma", "[7]", "'gamma'",
                 "[8]", "[2, 8]", NULL);
    vkg_graph_free(g);

    g = vkg_graph_new();
    x = in2(g, "x", 2, 8);
    beta = in2(g, "beta", 1, 8);
    expect_error(g, vkg_layernorm(g, x, VKG_NONE, beta, 1e-5f), VKG_ERR_SHAPE, "layernorm", "beta", "[1, 8]",
                 "[2, 8]", NULL);
    vkg_graph_free(g);

    g = vkg_graph_new();
    x = in2(g, "x", 2, 8);
    expect_error(g, vkg_layernorm(g, x, VKG_NONE, VKG_NONE, -1.0f), VKG_ERR_INVALID_ARGUMENT, "layernorm", "eps",
                 NULL);
    vkg_graph_free(g);
}

static void test_embedding_ids(void **state) {
    (void)state;
    vkg_graph *g = vkg_graph_new();
    vkg_tensor table = in2(g, "wte", 10, 4), ids = in1(g, "ids", 3);
    expect_error(g, vkg_embedding(g, table, ids), VKG_ERR_INVALID_ARGUMENT, "embedding", "'ids'", "i32", NULL);
    vkg_graph_free(g);

    g = vkg_graph_new();
    const int64_t four[4] = {1, 2, 3, 4}, three = 3;
    table = in2(g, "wte", 10, 4);
    ids = vkg_input(g, "ids4", VKG_I32, 4, four);
    expect_error(g, vkg_embedding(g, table, ids), VKG_ERR_SHAPE, "embedding", "[1, 2, 3, 4]", NULL);
    vkg_graph_free(g);

    g = vkg_graph_new();
    table = in1(g, "flat", 40);
    ids = vkg_input(g, "ids", VKG_I32, 1, &three);
    expect_error(g, vkg_embedding(g, table, ids), VKG_ERR_SHAPE, "embedding", "[40]", "'flat'", NULL);
    vkg_graph_free(g);
}

static void test_reshape_count(void **state) {
    (void)state;
    vkg_graph *g = vkg_graph_new();
    vkg_tensor x = in2(g, "x", 2, 3);
    const int64_t to[2] = {4, 2};
    expect_error(g, vkg_reshape(g, x, 2, to), VKG_ERR_SHAPE, "reshape", "[2, 3]", "[4, 2]", "'x'", "6 elements",
                 NULL);
    vkg_graph_free(g);

    g = vkg_graph_new();
    x = in2(g, "x", 2, 3);
    const int64_t infer[2] = {-1, 4}; /* 6 is not a multiple of 4 */
    expect_error(g, vkg_reshape(g, x, 2, infer), VKG_ERR_SHAPE, "reshape", "[2, 3]", "[-1, 4]", NULL);
    vkg_graph_free(g);

    g = vkg_graph_new();
    x = in2(g, "x", 2, 3);
    const int64_t two_infer[2] = {-1, -1};
    expect_error(g, vkg_reshape(g, x, 2, two_infer), VKG_ERR_SHAPE, "reshape", "[2, 3]", NULL);
    vkg_graph_free(g);

    g = vkg_graph_new();
    x = in2(g, "x", 2, 3);
    const int64_t five[5] = {1, 1, 1, 2, 3};
    expect_error(g, vkg_reshape(g, x, 5, five), VKG_ERR_SHAPE, "reshape", "[2, 3]", "5 dimensions", NULL);
    vkg_graph_free(g);
}

static void test_permute_axes(void **state) {
    (void)state;
    vkg_graph *g = vkg_graph_new();
    vkg_tensor x = in3(g, "x", 2, 3, 4);
    const int repeated[3] = {0, 0, 1};
    expect_error(g, vkg_permute(g, x, repeated), VKG_ERR_SHAPE, "permute", "[2, 3, 4]", "'x'", NULL);
    vkg_graph_free(g);

    g = vkg_graph_new();
    x = in3(g, "x", 2, 3, 4);
    const int out_of_range[3] = {0, 3, 1};
    expect_error(g, vkg_permute(g, x, out_of_range), VKG_ERR_SHAPE, "permute", "[2, 3, 4]", NULL);
    vkg_graph_free(g);

    g = vkg_graph_new();
    x = in3(g, "x", 2, 3, 4);
    expect_error(g, vkg_transpose(g, x, 0, 3), VKG_ERR_SHAPE, "transpose", "[2, 3, 4]", NULL);
    vkg_graph_free(g);
}

static void test_slice_range(void **state) {
    (void)state;
    vkg_graph *g = vkg_graph_new();
    vkg_tensor x = in2(g, "x", 2, 5);
    expect_error(g, vkg_slice(g, x, 1, 3, 3), VKG_ERR_SHAPE, "slice", "[2, 5]", "'x'", "[3, 6)", NULL);
    vkg_graph_free(g);

    /* start + length past 2^63 (found by fuzz_graph): refused, not an overflow. */
    const int64_t bad[][3] = {{2, 0, 1}, {0, -1, 1}, {0, 0, 0}, {-3, 0, 1}, {1, 3, INT64_MAX}, {1, INT64_MAX, 2}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        g = vkg_graph_new();
        x = in2(g, "x", 2, 5);
        expect_error(g, vkg_slice(g, x, (int)bad[i][0], bad[i][1], bad[i][2]), VKG_ERR_SHAPE, "slice", "[2, 5]", NULL);
        vkg_graph_free(g);
    }
}

/* Found by fuzz_graph: a plan that would split one op into millions of steps to fit a tiny
 * max_binding_bytes is refused with a message (it asked for gigabytes of step table), and a
 * layernorm over rows of 2^32 is refused (its row count divided by a wrapped 0). */
static void test_compile_split_limits(void **state) {
    (void)state;
    vkg_graph *g = vkg_graph_new();
    vkg_tensor a = in2(g, "a", 4096, 1), b = in2(g, "b", 1, 4096);
    vkg_output(g, "c", vkg_matmul(g, a, b, VKG_NONE, 0));
    vkg_compile_options o;
    vkg_compile_options_default(&o);
    o.alignment = 4;
    o.max_binding_bytes = 64;
    vkg_plan *p = NULL;
    vkg_error err;
    assert_int_equal(vkg_plan_compile(g, &o, &p, &err), VKG_ERR_UNSUPPORTED);
    assert_null(p);
    assert_non_null(strstr(err.message, "matmul"));
    assert_non_null(strstr(err.message, "65536"));
    vkg_graph_free(g);

    g = vkg_graph_new();
    const int64_t table_shape[2] = {1000000, 1}, ids_shape[1] = {2};
    static float table[1000000]; /* 66,667 blocks of 15 rows */
    vkg_tensor t = vkg_constant(g, "table", VKG_F32, 2, table_shape, table);
    vkg_output(g, "e", vkg_embedding(g, t, vkg_input(g, "ids", VKG_I32, 1, ids_shape)));
    assert_int_equal(vkg_plan_compile(g, &o, &p, &err), VKG_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.message, "embedding"));
    vkg_graph_free(g);

    /* A layernorm row of 2^32 floats (its 32-bit size wraps to 0) is refused, not divided by. */
    g = vkg_graph_new();
    vkg_output(g, "y", vkg_layernorm(g, in2(g, "x", 1, (int64_t)1 << 32), VKG_NONE, VKG_NONE, 1e-5f));
    assert_int_equal(vkg_plan_compile(g, NULL, &p, &err), VKG_ERR_UNSUPPORTED);
    assert_null(p);
    o.max_binding_bytes = (uint64_t)1 << 33; /* bindings past 4 GiB would wrap 32-bit offsets */
    assert_int_equal(vkg_plan_compile(g, &o, &p, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "4 GiB"));
    vkg_graph_free(g);
}

static void test_concat_mismatch(void **state) {
    (void)state;
    vkg_graph *g = vkg_graph_new();
    vkg_tensor a = in2(g, "a", 2, 3), b = in2(g, "b", 3, 4);
    expect_error(g, vkg_concat(g, a, b, 0), VKG_ERR_SHAPE, "concat", "[2, 3]", "[3, 4]", "'a'", "'b'", "axis 0",
                 NULL);
    vkg_graph_free(g);

    g = vkg_graph_new();
    a = in2(g, "a", 2, 3);
    b = in3(g, "b", 1, 2, 3);
    expect_error(g, vkg_concat(g, a, b, 0), VKG_ERR_SHAPE, "concat", "[2, 3]", "[1, 2, 3]", NULL);
    vkg_graph_free(g);

    g = vkg_graph_new();
    a = in2(g, "a", 2, 3);
    b = in2(g, "b", 2, 3);
    expect_error(g, vkg_concat(g, a, b, 2), VKG_ERR_SHAPE, "concat", "axis 2", NULL);
    vkg_graph_free(g);
}

static void test_write_at_errors(void **state) {
    (void)state;
    const int64_t cache[2] = {8, 4};
    vkg_graph *g = vkg_graph_new();
    vkg_tensor not_state = in2(g, "kv", 8, 4), x = in2(g, "x", 1, 4);
    expect_error(g, vkg_write_at(g, not_state, x, 0, 0, VKG_NONE), VKG_ERR_INVALID_ARGUMENT, "write_at", "'kv'",
                 "state", NULL);
    vkg_graph_free(g);

    g = vkg_graph_new();
    vkg_tensor st = vkg_state(g, "cache", 2, cache);
    x = in2(g, "x", 1, 5);
    expect_error(g, vkg_write_at(g, st, x, 0, 0, VKG_NONE), VKG_ERR_SHAPE, "write_at", "[1, 5]", "'x'", "[8, 4]",
                 "'cache'", NULL);
    vkg_graph_free(g);

    g = vkg_graph_new();
    st = vkg_state(g, "cache", 2, cache);
    x = in2(g, "x", 2, 4);
    expect_error(g, vkg_write_at(g, st, x, 0, 7, VKG_NONE), VKG_ERR_SHAPE, "write_at", "[2, 4]", "[8, 4]", "at 7",
                 NULL);
    vkg_graph_free(g);

    g = vkg_graph_new();
    st = vkg_state(g, "cache", 2, cache);
    x = in2(g, "x", 1, 4);
    vkg_tensor not_index = in1(g, "pos", 1);
    expect_error(g, vkg_write_at(g, st, x, 0, 0, not_index), VKG_ERR_INVALID_ARGUMENT, "write_at", "vkg_index",
                 NULL);
    vkg_graph_free(g);

    /* A chain of writes is fine; the result of one is a valid state for the next. */
    g = vkg_graph_new();
    st = vkg_state(g, "cache", 2, cache);
    x = in2(g, "x", 1, 4);
    vkg_tensor w = vkg_write_at(g, st, x, 0, 0, VKG_NONE);
    assert_int_not_equal(vkg_write_at(g, w, x, 0, 1, VKG_NONE), VKG_NONE);
    assert_int_equal(vkg_graph_status(g), VKG_OK);
    vkg_graph_free(g);
}

static void test_mask_errors(void **state) {
    (void)state;
    vkg_graph *g = vkg_graph_new();
    vkg_tensor x = in2(g, "scores", 2, 3), m = in3(g, "m", 4, 2, 3);
    expect_error(g, vkg_mask(g, x, m, VKG_MASK_BOOL), VKG_ERR_SHAPE, "mask", "[4, 2, 3]", "'m'", "[2, 3]", "widen",
                 NULL);
    vkg_graph_free(g);

    g = vkg_graph_new();
    x = in2(g, "scores", 2, 3);
    m = in2(g, "m", 2, 4);
    expect_error(g, vkg_mask(g, x, m, VKG_MASK_ADDITIVE), VKG_ERR_SHAPE, "mask", "[2, 3]", "[2, 4]", NULL);
    vkg_graph_free(g);

    g = vkg_graph_new();
    x = in2(g, "scores", 2, 3);
    m = in2(g, "m", 2, 3);
    expect_error(g, vkg_mask(g, x, m, (vkg_mask_kind)7), VKG_ERR_INVALID_ARGUMENT, "mask", "kind", NULL);
    vkg_graph_free(g);

    g = vkg_graph_new();
    x = in1(g, "scores", 3);
    expect_error(g, vkg_mask_causal(g, x, 0, VKG_NONE), VKG_ERR_SHAPE, "mask_causal", "[3]", NULL);
    vkg_graph_free(g);

    g = vkg_graph_new();
    x = in2(g, "scores", 2, 3);
    m = in1(g, "pos", 1);
    expect_error(g, vkg_mask_causal(g, x, 0, m), VKG_ERR_INVALID_ARGUMENT, "mask_causal", "'pos'", "vkg_index", NULL);
    vkg_graph_free(g);
}

static void test_duplicate_names(void **state) {
    (void)state;
    vkg_graph *g = vkg_graph_new();
    vkg_tensor x = in2(g, "x", 2, 3);
    assert_int_not_equal(x, VKG_NONE);
    expect_error(g, in2(g, "x", 4, 4), VKG_ERR_INVALID_ARGUMENT, "input", "'x'", "already", NULL);
    vkg_graph_free(g);

    g = vkg_graph_new();
    x = in2(g, "x", 2, 3);
    vkg_tensor y = vkg_relu(g, x);
    assert_int_equal(vkg_output(g, "x", y), VKG_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(vkg_graph_error(g), "'x'"));
    vkg_graph_free(g);

    g = vkg_graph_new();
    x = in2(g, "x", 2, 3);
    y = vkg_relu(g, x);
    assert_int_equal(vkg_output(g, "y", y), VKG_OK);
    assert_int_equal(vkg_find(g, "y"), y);
    assert_int_equal(vkg_output(g, "y2", y), VKG_ERR_INVALID_ARGUMENT); /* one name per output */
    assert_non_null(strstr(vkg_graph_error(g), "'y'"));
    vkg_graph_free(g);

    g = vkg_graph_new();
    expect_error(g, vkg_index(g, NULL), VKG_ERR_INVALID_ARGUMENT, "index", "name", NULL);
    vkg_graph_free(g);

    g = vkg_graph_new();
    vkg_tensor pos = vkg_index(g, "pos");
    assert_int_equal(vkg_output(g, "out", pos), VKG_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(vkg_graph_error(g), "index"));
    vkg_graph_free(g);
}

static void test_bad_handles(void **state) {
    (void)state;
    vkg_graph *g = vkg_graph_new();
    vkg_tensor x = in2(g, "x", 2, 3);
    expect_error(g, vkg_add(g, x, 99), VKG_ERR_INVALID_ARGUMENT, "add", "b", "99", NULL);
    vkg_graph_free(g);

    g = vkg_graph_new();
    expect_error(g, vkg_relu(g, -5), VKG_ERR_INVALID_ARGUMENT, "relu", "-5", NULL);
    vkg_graph_free(g);

    g = vkg_graph_new();
    x = in2(g, "x", 2, 3);
    expect_error(g, vkg_matmul(g, x, VKG_NONE, VKG_NONE, 0), VKG_ERR_INVALID_ARGUMENT, "matmul", NULL);
    vkg_graph_free(g);

    g = vkg_graph_new();
    x = in2(g, "x", 2, 3);
    assert_int_equal(vkg_output(g, "out", 7), VKG_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(vkg_graph_error(g), "output"));
    vkg_graph_free(g);

    /* Each data-movement op checks its handle too. */
    const int axes[2] = {1, 0};
    const int64_t shape[1] = {6};
    for (int op = 0; op < 6; op++) {
        g = vkg_graph_new();
        x = in2(g, "x", 2, 3);
        vkg_tensor t = op == 0 ? vkg_reshape(g, 42, 1, shape) : op == 1 ? vkg_permute(g, 42, axes)
                     : op == 2 ? vkg_slice(g, 42, 0, 0, 1)   : op == 3 ? vkg_concat(g, x, 42, 0)
                     : op == 4 ? vkg_copy(g, 42)             : vkg_layernorm(g, x, 42, VKG_NONE, 1e-5f);
        expect_error(g, t, VKG_ERR_INVALID_ARGUMENT, "42", NULL);
        vkg_graph_free(g);
    }
}

static void test_leaf_errors(void **state) {
    (void)state;
    const int64_t shape[5] = {1, 2, 3, 4, 5};
    vkg_graph *g = vkg_graph_new();
    expect_error(g, vkg_constant(g, "w", VKG_F32, 2, shape, NULL), VKG_ERR_INVALID_ARGUMENT, "constant", "'w'",
                 "NULL", NULL);
    vkg_graph_free(g);

    g = vkg_graph_new();
    expect_error(g, vkg_input(g, "x", VKG_F32, 5, shape), VKG_ERR_SHAPE, "input", "'x'", "5 dimensions", NULL);
    vkg_graph_free(g);

    g = vkg_graph_new();
    expect_error(g, vkg_state(g, "s", 0, shape), VKG_ERR_SHAPE, "state", "'s'", NULL);
    vkg_graph_free(g);

    g = vkg_graph_new();
    const int64_t zero[2] = {2, 0};
    expect_error(g, vkg_input(g, "x", VKG_F32, 2, zero), VKG_ERR_SHAPE, "input", "'x'", "dimension 1", NULL);
    vkg_graph_free(g);

    g = vkg_graph_new();
    expect_error(g, vkg_input(g, "x", (vkg_dtype)9, 2, shape), VKG_ERR_INVALID_ARGUMENT, "input", "'x'", "dtype",
                 NULL);
    vkg_graph_free(g);
}

/* vkg_name: the name shows in vkg_tensor_name and vkg_find, the leaf and output names keep their
 * bindings and their uniqueness, and mistakes put the graph into its error state. */
static void test_name(void **state) {
    (void)state;
    vkg_graph *g = vkg_graph_new();
    vkg_tensor x = in2(g, "x", 2, 3), r = vkg_relu(g, x), s = vkg_softmax(g, r);
    assert_string_equal(vkg_tensor_name(g, r), "relu"); /* unnamed: the op */
    assert_int_equal(vkg_name(g, r, "h.0.mlp.act"), VKG_OK);
    assert_string_equal(vkg_tensor_name(g, r), "h.0.mlp.act");
    assert_int_equal(vkg_find(g, "h.0.mlp.act"), r);
    char name[8] = "first";
    assert_int_equal(vkg_name(g, s, name), VKG_OK);
    strcpy(name, "gone");                                 /* the graph keeps its own copy */
    assert_string_equal(vkg_tensor_name(g, s), "first");
    assert_int_equal(vkg_name(g, s, "h.0.attn.softmax"), VKG_OK); /* renaming replaces */
    assert_string_equal(vkg_tensor_name(g, s), "h.0.attn.softmax");
    assert_int_equal(vkg_find(g, "first"), VKG_NONE);
    /* Names need not be unique, and they do not take a leaf's or an output's name away. */
    assert_int_equal(vkg_name(g, s, "x"), VKG_OK);
    assert_int_equal(vkg_find(g, "x"), x);
    assert_int_equal(vkg_output(g, "y", s), VKG_OK);
    assert_int_equal(vkg_find(g, "y"), s);
    assert_string_equal(vkg_tensor_name(g, s), "x");
    assert_int_equal(vkg_name(g, x, "input of layer 0"), VKG_OK);
    assert_int_equal(vkg_find(g, "x"), x);
    assert_int_equal(vkg_graph_status(g), VKG_OK);
    vkg_graph_free(g);

    g = vkg_graph_new();
    x = in2(g, "x", 2, 3);
    assert_int_equal(vkg_name(g, 7, "h.0.ln_1"), VKG_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(vkg_graph_error(g), "name: operand t is not a tensor of this graph (7)"));
    vkg_graph_free(g);
    g = vkg_graph_new();
    x = in2(g, "x", 2, 3);
    assert_int_equal(vkg_name(g, VKG_NONE, "h.0.ln_1"), VKG_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(vkg_graph_error(g), "(-1)"));
    vkg_graph_free(g);
    for (int empty = 0; empty < 2; empty++) {
        g = vkg_graph_new();
        x = in2(g, "x", 2, 3);
        assert_int_equal(vkg_name(g, x, empty ? "" : NULL), VKG_ERR_INVALID_ARGUMENT);
        assert_string_equal(vkg_graph_error(g), "name: tensor 0 ('x') needs a non-empty name");
        assert_string_equal(vkg_tensor_name(g, x), "x");
        vkg_graph_free(g);
    }
    /* On a graph in error nothing is named and the first message stays. */
    g = vkg_graph_new();
    x = in2(g, "x", 2, 3);
    r = vkg_relu(g, x);
    expect_error(g, vkg_add(g, x, 99), VKG_ERR_INVALID_ARGUMENT, "add", NULL);
    assert_int_equal(vkg_name(g, r, "h.0.mlp.act"), VKG_ERR_INVALID_ARGUMENT);
    assert_string_equal(vkg_tensor_name(g, r), "relu");
    assert_non_null(strstr(vkg_graph_error(g), "add"));
    vkg_graph_free(g);
}

/* The first error stays; later calls return VKG_NONE and do not overwrite it. */
static void test_first_error_kept(void **state) {
    (void)state;
    vkg_graph *g = vkg_graph_new();
    vkg_tensor a = in2(g, "a", 2, 3), b = in2(g, "b", 4, 5);
    expect_error(g, vkg_matmul(g, a, b, VKG_NONE, 0), VKG_ERR_SHAPE, "matmul", NULL);
    char first[512];
    snprintf(first, sizeof first, "%s", vkg_graph_error(g));

    assert_int_equal(vkg_relu(g, a), VKG_NONE);                         /* valid, but the graph is in error */
    assert_int_equal(in2(g, "c", 2, 2), VKG_NONE);
    assert_int_equal(vkg_add(g, a, 1234), VKG_NONE);                    /* would be another error */
    const int64_t bad[2] = {7, 7};
    assert_int_equal(vkg_reshape(g, a, 2, bad), VKG_NONE);
    assert_int_equal(vkg_output(g, "out", a), VKG_ERR_SHAPE);
    assert_int_equal(vkg_graph_status(g), VKG_ERR_SHAPE);
    assert_string_equal(vkg_graph_error(g), first);
    assert_int_equal(vkg_find(g, "c"), VKG_NONE);

    /* Compiling a graph in error fails with that message. */
    vkg_plan *p = (vkg_plan *)1;
    vkg_error err;
    assert_int_equal(vkg_plan_compile(g, NULL, &p, &err), VKG_ERR_SHAPE);
    assert_null(p);
    assert_int_equal(err.status, VKG_ERR_SHAPE);
    assert_non_null(strstr(err.message, first));
    vkg_graph_free(g);
}

static void test_compile_errors(void **state) {
    (void)state;
    vkg_plan *p = NULL;
    vkg_error err;

    vkg_graph *g = vkg_graph_new();
    vkg_tensor x = in2(g, "x", 2, 3);
    vkg_tensor y = vkg_relu(g, x);
    assert_int_not_equal(y, VKG_NONE);
    assert_int_equal(vkg_plan_compile(g, NULL, &p, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_null(p);
    assert_non_null(strstr(err.message, "no outputs"));

    /* An output that is not computed (an input) is refused with a hint. */
    assert_int_equal(vkg_output(g, "same", x), VKG_OK);
    assert_int_equal(vkg_plan_compile(g, NULL, &p, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_null(p);
    assert_non_null(strstr(err.message, "'same'"));
    assert_non_null(strstr(err.message, "vkg_copy"));
    vkg_graph_free(g);

    /* Bad compile options. */
    g = vkg_graph_new();
    x = in2(g, "x", 2, 3);
    assert_int_equal(vkg_output(g, "y", vkg_relu(g, x)), VKG_OK);
    vkg_compile_options opts;
    vkg_compile_options_default(&opts);
    opts.alignment = 24;
    assert_int_equal(vkg_plan_compile(g, &opts, &p, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "alignment"));
    vkg_compile_options_default(&opts);
    opts.max_binding_bytes = 16;
    assert_int_equal(vkg_plan_compile(g, &opts, &p, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_null(p);
    /* and the healthy graph compiles with the defaults */
    assert_int_equal(vkg_plan_compile(g, NULL, &p, &err), VKG_OK);
    assert_non_null(p);
    vkg_plan_free(p);
    vkg_graph_free(g);
}

/* Reading a state through a handle that a write_at already replaced would see the newer
 * contents (steps run in creation order): compile refuses it and names the fix. */
static void test_stale_state_read(void **state) {
    (void)state;
    vkg_graph *g = vkg_graph_new();
    vkg_tensor st = vkg_state(g, "kv", 2, (int64_t[]){2, 3});
    vkg_tensor x = in2(g, "x", 1, 3);
    vkg_tensor w1 = vkg_write_at(g, st, x, 0, 0, VKG_NONE);
    vkg_tensor w2 = vkg_write_at(g, w1, x, 0, 1, VKG_NONE);
    assert_int_equal(vkg_output(g, "latest", vkg_copy(g, w2)), VKG_OK);
    vkg_plan *p = NULL;
    vkg_error err;
    assert_int_equal(vkg_plan_compile(g, NULL, &p, &err), VKG_OK);
    vkg_plan_free(p);
    p = NULL;
    assert_int_equal(vkg_output(g, "stale", vkg_copy(g, w1)), VKG_OK);
    assert_int_equal(vkg_plan_compile(g, NULL, &p, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_null(p);
    assert_non_null(strstr(err.message, "'kv'"));
    assert_non_null(strstr(err.message, "already replaced"));
    vkg_graph_free(g);
}

/* Shapes whose element count, byte size (4 bytes an element) or strides do not fit in 63 bits are
 * refused by every builder, leaves and ops alike, so nothing downstream (numel, strides, the
 * planner's byte offsets) can overflow.  The largest count allowed is (2^63 - 1) / 4. */
static void test_shape_too_large(void **state) {
    (void)state;
    const int64_t G = (int64_t)1 << 32;
    vkg_graph *g = vkg_graph_new();
    expect_error(g, in3(g, "x", G, G, G), VKG_ERR_SHAPE, "input 'x'", "[4294967296, 4294967296, 4294967296]",
                 "63 bits", NULL);
    vkg_plan *p = NULL;
    vkg_error err;
    assert_int_equal(vkg_plan_compile(g, NULL, &p, &err), VKG_ERR_SHAPE);
    assert_null(p);
    assert_non_null(strstr(err.message, "63 bits"));
    vkg_graph_free(g);

    /* 2^61 elements: the count fits, the byte size (2^63) does not */
    g = vkg_graph_new();
    expect_error(g, vkg_state(g, "kv", 3, (int64_t[]){G, G / 8, 4}), VKG_ERR_SHAPE, "state 'kv'", "63 bits", NULL);
    vkg_graph_free(g);

    /* 2^61 - 2^29 elements (just below the limit) are accepted, and vkg_tensor_numel says so */
    g = vkg_graph_new();
    vkg_tensor ok = in2(g, "ok", G, G / 8 - 1);
    assert_int_not_equal(ok, VKG_NONE);
    assert_int_equal(vkg_tensor_numel(g, ok), G * (G / 8 - 1));
    vkg_graph_free(g);

    /* an op whose result is too large: [2^31, 2] @ [2, 2^31] is [2^31, 2^31] */
    g = vkg_graph_new();
    vkg_tensor a = in2(g, "a", G / 2, 2), b = in2(g, "b", 2, G / 2);
    expect_error(g, vkg_matmul(g, a, b, VKG_NONE, 0), VKG_ERR_SHAPE, "matmul", "[2147483648, 2147483648]",
                 "63 bits", NULL);
    vkg_graph_free(g);

    /* concat of two halves that fit into a whole that does not */
    g = vkg_graph_new();
    vkg_tensor h1 = in2(g, "h1", G, G / 16), h2 = in2(g, "h2", G, G / 16);
    expect_error(g, vkg_concat(g, h1, h2, 1), VKG_ERR_SHAPE, "concat", "63 bits", NULL);
    vkg_graph_free(g);

    /* a reshape target whose own product overflows, with and without an inferred dimension */
    g = vkg_graph_new();
    vkg_tensor r = in1(g, "r", 8);
    expect_error(g, vkg_reshape(g, r, 4, (int64_t[]){-1, G, G, G}), VKG_ERR_SHAPE, "reshape", "[8]", NULL);
    vkg_graph_free(g);
    g = vkg_graph_new();
    r = in1(g, "r", 8);
    expect_error(g, vkg_reshape(g, r, 4, (int64_t[]){2, G, G, G}), VKG_ERR_SHAPE, "reshape", "[8]", NULL);
    vkg_graph_free(g);

    /* negative dimensions */
    g = vkg_graph_new();
    expect_error(g, in2(g, "neg", 2, -3), VKG_ERR_SHAPE, "input 'neg'", "-3", NULL);
    vkg_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matmul_k_mismatch),
        cmocka_unit_test(test_matmul_transposed_mismatch),
        cmocka_unit_test(test_matmul_batch_and_rank),
        cmocka_unit_test(test_matmul_bias_size),
        cmocka_unit_test(test_binary_not_broadcasting),
        cmocka_unit_test(test_layernorm_params),
        cmocka_unit_test(test_embedding_ids),
        cmocka_unit_test(test_reshape_count),
        cmocka_unit_test(test_permute_axes),
        cmocka_unit_test(test_slice_range),
        cmocka_unit_test(test_compile_split_limits),
        cmocka_unit_test(test_concat_mismatch),
        cmocka_unit_test(test_write_at_errors),
        cmocka_unit_test(test_mask_errors),
        cmocka_unit_test(test_duplicate_names),
        cmocka_unit_test(test_bad_handles),
        cmocka_unit_test(test_leaf_errors),
        cmocka_unit_test(test_name),
        cmocka_unit_test(test_first_error_kept),
        cmocka_unit_test(test_compile_errors),
        cmocka_unit_test(test_stale_state_read),
        cmocka_unit_test(test_shape_too_large),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
