/* GPT-2 config.json reading, checking and writing, against config files as Hugging Face writes
 * them (tests/data/configs) and every key transformers' GPT2Config reads; and the random-model
 * generator, for every combination of its options. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "io/safetensors.h"
#include "models/gpt2_config.h"
#include "models/gpt2_weights.h"
#include "models/gpt2_random.h"
#include "support/test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char tmp_dir[] = "/tmp/vkg_gpt2cfg_XXXXXX";

static int make_dir(void **state) {
    (void)state;
    return mkdtemp(tmp_dir) ? 0 : -1;
}

static int remove_dir(void **state) {
    (void)state;
    return test_remove_tree(tmp_dir);
}

static const char *write_config(const char *text) {
    static char path[128];
    snprintf(path, sizeof path, "%s/config.json", tmp_dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    return path;
}

static void expect_load(const char *path, vkg_gpt2_config *c) {
    vkg_error err = {0};
    if (vkg_gpt2_config_load(path, c, &err) != VKG_OK) fail_msg("%s", err.message);
}

/* GPT-2 124M's config.json as the hub publishes it. */
static void test_load_hub_gpt2(void **state) {
    (void)state;
    vkg_gpt2_config c, want;
    expect_load(test_data_path("configs/gpt2.json"), &c);
    assert_int_equal(c.n_layer, 12);
    assert_int_equal(c.n_head, 12);
    assert_int_equal(c.n_embd, 768);
    assert_int_equal(c.n_positions, 1024);
    assert_int_equal(c.vocab_size, 50257);
    assert_int_equal(c.n_inner, 0);
    assert_int_equal(vkg_gpt2_inner_size(&c), 3072);
    assert_true(c.layer_norm_epsilon == 1e-5f);
    assert_string_equal(c.activation, "gelu_new");
    assert_int_equal(vkg_gpt2_activation_kind(c.activation), VKG_GPT2_ACT_GELU_TANH);
    assert_int_equal(c.scale_attn_weights, 1);
    assert_int_equal(c.scale_attn_by_inverse_layer_idx, 0);
    assert_int_equal(c.reorder_and_upcast_attn, 0);
    assert_int_equal(c.bos_token_id, 50256);
    assert_int_equal(c.eos_token_id, 50256);
    assert_string_equal(c.note, "");
    /* exactly GPT2Config()'s defaults, which are GPT-2 124M */
    vkg_gpt2_config_default(&want);
    assert_memory_equal(&c, &want, sizeof c);
    assert_int_equal(vkg_gpt2_weights_numel(&c, 1), 124439808);
}

/* A config as transformers 4.46 saves it: n_inner null, every attention flag, bookkeeping keys, and
 * bos_token_id 50256 outside its 53-token vocabulary: no token, and a note, never a refusal. */
static void test_load_transformers_4_46(void **state) {
    (void)state;
    vkg_gpt2_config c;
    expect_load(test_data_path("configs/tiny-gpt2-transformers-4.46.json"), &c);
    assert_int_equal(c.n_layer, 2);
    assert_int_equal(c.n_head, 4);
    assert_int_equal(c.n_embd, 32);
    assert_int_equal(c.n_positions, 16);
    assert_int_equal(c.vocab_size, 53);
    assert_int_equal(vkg_gpt2_inner_size(&c), 128);
    assert_int_equal(c.scale_attn_weights, 1);
    assert_int_equal(c.bos_token_id, VKG_GPT2_NO_TOKEN);
    assert_int_equal(c.eos_token_id, 51);
    assert_string_equal(c.note, "bos_token_id 50256 lies outside the vocabulary [0, 53); an empty prompt has no start "
                                "token");

    /* The same with eos_token_id outside too: both notes, one line. */
    char *text = test_read_file(test_data_path("configs/tiny-gpt2-transformers-4.46.json"), NULL);
    char *eos = strstr(text, "\"eos_token_id\": 51,");
    assert_non_null(eos);
    memcpy(eos, "\"eos_token_id\": 99,", 19);
    expect_load(write_config(text), &c);
    free(text);
    assert_int_equal(c.eos_token_id, VKG_GPT2_NO_TOKEN);
    assert_non_null(strstr(c.note, "bos_token_id 50256 lies outside the vocabulary [0, 53); an empty prompt has no "
                                   "start token; eos_token_id 99 lies outside the vocabulary [0, 53); generation will "
                                   "not stop at it"));
    assert_null(strchr(c.note, '\n'));
}

/* Without the optional keys, or with them null: GPT2Config's defaults (ids outside a small
 * vocabulary become no token); null ids are no token. */
static void test_defaults_nulls_and_n_ctx(void **state) {
    (void)state;
    vkg_gpt2_config c;
    expect_load(write_config("{\"n_layer\": 2, \"n_head\": 2, \"n_embd\": 8, \"n_ctx\": 32, \"vocab_size\": 50257}"), &c);
    assert_int_equal(c.n_positions, 32);
    assert_true(c.layer_norm_epsilon == 1e-5f);
    assert_string_equal(c.activation, "gelu_new");
    assert_int_equal(c.bos_token_id, 50256);
    assert_int_equal(c.eos_token_id, 50256);
    assert_int_equal(c.scale_attn_weights, 1);

    expect_load(write_config("{\"n_layer\": 2, \"n_head\": 2, \"n_embd\": 8, \"n_ctx\": 32, \"n_positions\": null,"
                             " \"vocab_size\": 64, \"n_inner\": null, \"bos_token_id\": null, \"eos_token_id\": null,"
                             " \"activation_function\": null, \"layer_norm_epsilon\": null, \"model_type\": null,"
                             " \"scale_attn_weights\": null, \"scale_attn_by_inverse_layer_idx\": null,"
                             " \"reorder_and_upcast_attn\": null, \"add_cross_attention\": null,"
                             " \"pruned_heads\": null, \"tie_word_embeddings\": null, \"architectures\": null,"
                             " \"torch_dtype\": null, \"summary_type\": null, \"use_cache\": null}"), &c);
    assert_int_equal(c.n_positions, 32);
    assert_int_equal(c.n_inner, 0);
    assert_int_equal(c.bos_token_id, VKG_GPT2_NO_TOKEN);
    assert_int_equal(c.eos_token_id, VKG_GPT2_NO_TOKEN);
    assert_string_equal(c.note, ""); /* null is no token, nothing to say */
    assert_string_equal(c.activation, "gelu_new");
    assert_int_equal(c.scale_attn_weights, 1);

    /* The defaults 50256 outside a 64-token vocabulary: no token, with a note. */
    expect_load(write_config("{\"n_layer\": 2, \"n_head\": 2, \"n_embd\": 8, \"n_positions\": 16, \"vocab_size\": 64}"),
                &c);
    assert_int_equal(c.bos_token_id, VKG_GPT2_NO_TOKEN);
    assert_int_equal(c.eos_token_id, VKG_GPT2_NO_TOKEN);
    assert_non_null(strstr(c.note, "eos_token_id 50256 lies outside the vocabulary [0, 64); generation will not stop"));

    /* n_positions wins over n_ctx; the other keys as given. */
    expect_load(write_config("{\"n_layer\": 1, \"n_head\": 1, \"n_embd\": 4, \"n_ctx\": 8, \"n_positions\": 16,"
                             " \"vocab_size\": 10, \"bos_token_id\": 0, \"eos_token_id\": 9, \"n_inner\": 6,"
                             " \"activation_function\": \"gelu_pytorch_tanh\", \"layer_norm_epsilon\": 1e-6,"
                             " \"scale_attn_weights\": false, \"scale_attn_by_inverse_layer_idx\": true,"
                             " \"reorder_and_upcast_attn\": true, \"add_cross_attention\": false, \"pruned_heads\": {},"
                             " \"gradient_checkpointing\": false, \"n_special\": 0, \"predict_special_tokens\": true}"),
                &c);
    assert_int_equal(c.n_positions, 16);
    assert_int_equal(c.bos_token_id, 0);
    assert_int_equal(c.eos_token_id, 9);
    assert_int_equal(c.n_inner, 6);
    assert_int_equal(vkg_gpt2_inner_size(&c), 6);
    assert_true(c.layer_norm_epsilon == 1e-6f);
    assert_int_equal(c.scale_attn_weights, 0);
    assert_int_equal(c.scale_attn_by_inverse_layer_idx, 1);
    assert_int_equal(c.reorder_and_upcast_attn, 1);
    assert_int_equal(vkg_gpt2_activation_kind(c.activation), VKG_GPT2_ACT_GELU_TANH);
}

/* Every name of transformers' ACT2FN that vkgraph computes, and what it computes. */
static void test_activation_names(void **state) {
    (void)state;
    static const struct { const char *name; vkg_gpt2_activation kind; } names[] = {
        {"gelu_new", VKG_GPT2_ACT_GELU_TANH}, {"gelu_pytorch_tanh", VKG_GPT2_ACT_GELU_TANH},
        {"gelu_fast", VKG_GPT2_ACT_GELU_TANH}, {"gelu_accurate", VKG_GPT2_ACT_GELU_TANH},
        {"gelu", VKG_GPT2_ACT_GELU_ERF},       {"gelu_python", VKG_GPT2_ACT_GELU_ERF},
        {"quick_gelu", VKG_GPT2_ACT_QUICK_GELU}, {"silu", VKG_GPT2_ACT_SILU},
        {"swish", VKG_GPT2_ACT_SILU},          {"relu", VKG_GPT2_ACT_RELU},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        assert_int_equal(vkg_gpt2_activation_kind(names[i].name), names[i].kind);
        assert_non_null(strstr(vkg_gpt2_activation_names(), names[i].name));
        char json[256];
        snprintf(json, sizeof json, "{" "\"n_layer\": 1, \"n_head\": 1, \"n_embd\": 4, \"n_positions\": 4, "
                 "\"vocab_size\": 8, \"activation_function\": \"%s\"}", names[i].name);
        vkg_gpt2_config c;
        expect_load(write_config(json), &c);
        assert_string_equal(c.activation, names[i].name);
    }
    /* ACT2FN has these too; they are refused by name, with the list of what is supported. */
    static const char *const refused[] = {"mish", "relu6", "relu2", "gelu_10", "linear", "tanh", "sigmoid",
                                          "leaky_relu", "laplace", "prelu", "GELU", "gelu_new "};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        char json[256];
        snprintf(json, sizeof json, "{" "\"n_layer\": 1, \"n_head\": 1, \"n_embd\": 4, \"n_positions\": 4, "
                 "\"vocab_size\": 8, \"activation_function\": \"%s\"}", refused[i]);
        vkg_gpt2_config c;
        vkg_error err = {0};
        assert_int_equal(vkg_gpt2_config_load(write_config(json), &c, &err), VKG_ERR_UNSUPPORTED);
        char want[64];
        snprintf(want, sizeof want, "activation_function \"%s\" is not supported (supported: gelu_new,", refused[i]);
        if (!strstr(err.message, want)) fail_msg("%s: %s", refused[i], err.message);
        assert_non_null(strstr(err.message, "quick_gelu, silu, swish, relu)"));
    }
}

typedef struct bad_config {
    const char *json;
    vkg_status status;
    const char *expect;
} bad_config;

#define BASE "\"n_layer\": 2, \"n_head\": 2, \"n_embd\": 8, \"n_positions\": 16, \"vocab_size\": 64, " \
             "\"bos_token_id\": 1, \"eos_token_id\": 2"
static const bad_config bad_configs[] = {
    {"{\"n_head\": 2, \"n_embd\": 8, \"n_positions\": 16, \"vocab_size\": 64}", VKG_ERR_FORMAT, "missing \"n_layer\""},
    {"{\"n_layer\": 2, \"n_embd\": 8, \"n_positions\": 16, \"vocab_size\": 64}", VKG_ERR_FORMAT, "missing \"n_head\""},
    {"{\"n_layer\": 2, \"n_head\": 2, \"n_positions\": 16, \"vocab_size\": 64}", VKG_ERR_FORMAT, "missing \"n_embd\""},
    {"{\"n_layer\": 2, \"n_head\": 2, \"n_embd\": 8, \"n_positions\": 16}", VKG_ERR_FORMAT, "missing \"vocab_size\""},
    {"{\"n_layer\": 2, \"n_head\": 2, \"n_embd\": 8, \"vocab_size\": 64}", VKG_ERR_FORMAT,
     "missing \"n_positions\" (or the older \"n_ctx\")"},
    {"{" BASE ", \"n_layer\": 0}", VKG_ERR_FORMAT, "duplicate key \"n_layer\""},
    {"{\"n_layer\": 0, \"n_head\": 2, \"n_embd\": 8, \"n_positions\": 16, \"vocab_size\": 64}", VKG_ERR_FORMAT,
     "n_layer is 0; it must be between 1 and"},
    {"{\"n_layer\": 2, \"n_head\": -2, \"n_embd\": 8, \"n_positions\": 16, \"vocab_size\": 64}", VKG_ERR_FORMAT,
     "n_head is -2"},
    {"{\"n_layer\": 2, \"n_head\": 3, \"n_embd\": 8, \"n_positions\": 16, \"vocab_size\": 64, \"bos_token_id\": 1,"
     " \"eos_token_id\": 1}", VKG_ERR_FORMAT, "n_embd 8 is not divisible by n_head 3"},
    {"{\"n_layer\": 2.5, \"n_head\": 2, \"n_embd\": 8, \"n_positions\": 16, \"vocab_size\": 64}", VKG_ERR_FORMAT,
     "\"n_layer\" must be an integer"},
    {"{\"n_layer\": \"2\", \"n_head\": 2, \"n_embd\": 8, \"n_positions\": 16, \"vocab_size\": 64}", VKG_ERR_FORMAT,
     "\"n_layer\" must be an integer (it is a JSON string)"},
    {"{\"n_layer\": 1e12, \"n_head\": 2, \"n_embd\": 8, \"n_positions\": 16, \"vocab_size\": 64}", VKG_ERR_FORMAT,
     "not a whole 32-bit number"},
    {"{\"n_layer\": 2, \"n_head\": 2, \"n_embd\": 8, \"n_positions\": 0, \"vocab_size\": 64}", VKG_ERR_FORMAT,
     "n_positions is 0"},
    {"{\"n_layer\": 2, \"n_head\": 2, \"n_embd\": 8, \"n_positions\": 16, \"vocab_size\": 0}", VKG_ERR_FORMAT,
     "vocab_size is 0"},
    {"{\"n_layer\": 2, \"n_head\": 2, \"n_embd\": 8, \"n_positions\": 16, \"vocab_size\": 64, \"eos_token_id\": [1]}",
     VKG_ERR_FORMAT, "\"eos_token_id\" must be an integer (it is a JSON array)"},
    {"{" BASE ", \"layer_norm_epsilon\": -1e-5}", VKG_ERR_FORMAT, "layer_norm_epsilon is -1e-05"},
    {"{" BASE ", \"layer_norm_epsilon\": 0}", VKG_ERR_FORMAT, "positive finite"},
    {"{" BASE ", \"layer_norm_epsilon\": \"1e-5\"}", VKG_ERR_FORMAT, "\"layer_norm_epsilon\" must be a finite number"},
    {"{" BASE ", \"activation_function\": \"mish\"}", VKG_ERR_UNSUPPORTED, "activation_function \"mish\" is not"},
    {"{" BASE ", \"activation_function\": 3}", VKG_ERR_FORMAT, "\"activation_function\" must be a string"},
    {"{" BASE ", \"activation_function\": \"gelu\\u0000_new\"}", VKG_ERR_UNSUPPORTED, "is not supported"},
    {"{" BASE ", \"model_type\": \"llama\"}", VKG_ERR_UNSUPPORTED, "model_type is \"llama\", not \"gpt2\""},
    {"{" BASE ", \"model_type\": 2}", VKG_ERR_UNSUPPORTED, "model_type is a JSON number, not \"gpt2\""},
    {"{" BASE ", \"n_inner\": 0}", VKG_ERR_FORMAT, "n_inner is 0; it must be positive, or null for 4 * n_embd"},
    {"{" BASE ", \"n_inner\": -16}", VKG_ERR_FORMAT, "n_inner is -16"},
    {"{" BASE ", \"n_inner\": 1000000}", VKG_ERR_FORMAT, "n_inner is 1000000; it must be between 1 and"},
    {"{" BASE ", \"add_cross_attention\": true}", VKG_ERR_UNSUPPORTED, "\"add_cross_attention\": true is not supported"},
    {"{" BASE ", \"pruned_heads\": {\"0\": [1]}}", VKG_ERR_UNSUPPORTED, "\"pruned_heads\" is not empty"},
    {"{" BASE ", \"scale_attn_weights\": 0}", VKG_ERR_FORMAT, "\"scale_attn_weights\" must be true or false"},
    {"{" BASE ", \"reorder_and_upcast_attn\": 1}", VKG_ERR_FORMAT, "must be true or false (it is a JSON number)"},
    {"[" BASE "]", VKG_ERR_FORMAT, "line 1, column 11"},
    {"[1, 2]", VKG_ERR_FORMAT, "the file holds a JSON array, expected an object"},
    {"{" BASE ",\n}", VKG_ERR_FORMAT, "line 2, column 1 (byte"},
    {"", VKG_ERR_FORMAT, "found end of input"},
};

static void test_bad_configs(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof bad_configs / sizeof bad_configs[0]; i++) {
        const bad_config *b = &bad_configs[i];
        const char *path = write_config(b->json);
        vkg_gpt2_config c;
        vkg_error err = {0};
        vkg_status st = vkg_gpt2_config_load(path, &c, &err);
        if (st != b->status || !strstr(err.message, b->expect) || !strstr(err.message, path))
            fail_msg("case %zu: got %s \"%s\", expected %s with \"%s\"", i, vkg_status_name(st), err.message,
                     vkg_status_name(b->status), b->expect);
    }
    vkg_gpt2_config c;
    vkg_error err = {0};
    assert_int_equal(vkg_gpt2_config_load("/nonexistent/config.json", &c, &err), VKG_ERR_IO);
    assert_non_null(strstr(err.message, "/nonexistent/config.json"));
    assert_int_equal(vkg_gpt2_config_load(NULL, &c, &err), VKG_ERR_INVALID_ARGUMENT);
}

static void test_write_and_reload(void **state) {
    (void)state;
    vkg_gpt2_config c;
    vkg_gpt2_config_default(&c);
    c.n_layer = 3, c.n_head = 5, c.n_embd = 40, c.n_positions = 77, c.vocab_size = 300, c.n_inner = 90;
    c.layer_norm_epsilon = 1.2345e-6f, c.bos_token_id = 7, c.eos_token_id = 299;
    memset(c.activation, 0, sizeof c.activation); /* the loader leaves no stale bytes either */
    snprintf(c.activation, sizeof c.activation, "relu");
    vkg_error err = {0};
    char path[128];
    snprintf(path, sizeof path, "%s/written.json", tmp_dir);
    assert_int_equal(vkg_gpt2_config_write(path, &c, &err), VKG_OK);
    vkg_gpt2_config back;
    expect_load(path, &back);
    assert_memory_equal(&back, &c, sizeof c);

    /* No tokens, n_inner null, the attention flags: written as transformers reads them. */
    c.bos_token_id = c.eos_token_id = VKG_GPT2_NO_TOKEN;
    c.n_inner = 0;
    c.scale_attn_weights = 0, c.scale_attn_by_inverse_layer_idx = 1, c.reorder_and_upcast_attn = 1;
    memset(c.activation, 0, sizeof c.activation);
    snprintf(c.activation, sizeof c.activation, "quick_gelu");
    assert_int_equal(vkg_gpt2_config_write_tied(path, &c, 0, &err), VKG_OK);
    expect_load(path, &back);
    assert_memory_equal(&back, &c, sizeof c);
    char *text = test_read_file(path, NULL);
    assert_non_null(strstr(text, "\"tie_word_embeddings\": false"));
    assert_non_null(strstr(text, "\"model_type\": \"gpt2\""));
    assert_non_null(strstr(text, "\"bos_token_id\": null"));
    assert_non_null(strstr(text, "\"n_inner\": null"));
    assert_non_null(strstr(text, "\"scale_attn_weights\": false"));
    assert_non_null(strstr(text, "\"scale_attn_by_inverse_layer_idx\": true"));
    free(text);

    /* Writing checks the config first, and reports unwritable paths. */
    c.n_head = 3;
    assert_int_equal(vkg_gpt2_config_write(path, &c, &err), VKG_ERR_FORMAT);
    assert_non_null(strstr(err.message, "not divisible"));
    c.n_head = 5;
    c.eos_token_id = 300;
    assert_int_equal(vkg_gpt2_config_validate(&c, &err), VKG_ERR_FORMAT);
    assert_non_null(strstr(err.message, "must lie in the vocabulary [0, 300) or be -1 (none)"));
    c.eos_token_id = 1;
    c.n_inner = -4;
    assert_int_equal(vkg_gpt2_config_validate(&c, &err), VKG_ERR_FORMAT);
    assert_non_null(strstr(err.message, "n_inner is -4"));
    c.n_inner = 0;
    memset(c.activation, 'x', sizeof c.activation); /* no terminating NUL */
    assert_int_equal(vkg_gpt2_config_validate(&c, &err), VKG_ERR_UNSUPPORTED);
    snprintf(c.activation, sizeof c.activation, "gelu");
    assert_int_equal(vkg_gpt2_config_write("/nonexistent/dir/config.json", &c, &err), VKG_ERR_IO);
}

/* ---- random models ----------------------------------------------------------------------------- */

static int tensor_count(const vkg_gpt2_random_options *o) {
    return 2 + o->config.n_layer * (12 + (o->attn_bias_buffers ? 2 : 0)) + 2 + (o->untied_lm_head ? 1 : 0);
}

static const vkg_st_tensor *expect_tensor(const vkg_safetensors *st, const vkg_gpt2_random_options *o,
                                          const char *name, int ndim, int64_t d0, int64_t d1, int64_t d2,
                                          int64_t d3) {
    char full[128];
    int prefixed = o->prefix_transformer && strcmp(name, "lm_head.weight") != 0;
    snprintf(full, sizeof full, "%s%s", prefixed ? "transformer." : "", name);
    const vkg_st_tensor *t = vkg_safetensors_find(st, full);
    if (!t) fail_msg("tensor %s is missing", full);
    const int64_t want[4] = {d0, d1, d2, d3};
    assert_int_equal(t->dtype, o->dtype);
    if (t->ndim != ndim) fail_msg("%s: ndim %d, expected %d", full, t->ndim, ndim);
    for (int i = 0; i < ndim; i++)
        if (t->shape[i] != want[i]) fail_msg("%s: dim %d is %lld, expected %lld", full, i, (long long)t->shape[i],
                                             (long long)want[i]);
    return t;
}

static void stats(const vkg_safetensors *st, const vkg_st_tensor *t, double *mean, double *std) {
    int64_t n = vkg_st_tensor_numel(t);
    float *x = malloc((size_t)n * sizeof *x);
    assert_non_null(x);
    assert_int_equal(vkg_safetensors_read(st, t, VKG_ST_F32, x, NULL), VKG_OK);
    double s = 0, s2 = 0;
    for (int64_t i = 0; i < n; i++) s += x[i];
    *mean = s / (double)n;
    for (int64_t i = 0; i < n; i++) s2 += (x[i] - *mean) * (x[i] - *mean);
    *std = sqrt(s2 / (double)n);
    free(x);
}

static void check_model(const char *dir, const vkg_gpt2_random_options *o) {
    char path[256];
    vkg_error err = {0};
    snprintf(path, sizeof path, "%s/config.json", dir);
    vkg_gpt2_config c;
    if (vkg_gpt2_config_load(path, &c, &err) != VKG_OK) fail_msg("%s", err.message);
    assert_memory_equal(&c, &o->config, sizeof c);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    vkg_safetensors *st = NULL;
    if (vkg_safetensors_open(path, &st, &err) != VKG_OK) fail_msg("%s", err.message);
    assert_int_equal(vkg_safetensors_count(st), tensor_count(o));
    const int64_t C = c.n_embd, V = c.vocab_size, P = c.n_positions, I = vkg_gpt2_inner_size(&c);
    expect_tensor(st, o, "wte.weight", 2, V, C, 0, 0);
    expect_tensor(st, o, "wpe.weight", 2, P, C, 0, 0);
    for (int i = 0; i < c.n_layer; i++) {
        char n[64];
#define L(s) (snprintf(n, sizeof n, "h.%d.%s", i, s), n)
        expect_tensor(st, o, L("ln_1.weight"), 1, C, 0, 0, 0);
        expect_tensor(st, o, L("ln_1.bias"), 1, C, 0, 0, 0);
        expect_tensor(st, o, L("attn.c_attn.weight"), 2, C, 3 * C, 0, 0);
        expect_tensor(st, o, L("attn.c_attn.bias"), 1, 3 * C, 0, 0, 0);
        expect_tensor(st, o, L("attn.c_proj.weight"), 2, C, C, 0, 0);
        expect_tensor(st, o, L("attn.c_proj.bias"), 1, C, 0, 0, 0);
        expect_tensor(st, o, L("ln_2.weight"), 1, C, 0, 0, 0);
        expect_tensor(st, o, L("ln_2.bias"), 1, C, 0, 0, 0);
        expect_tensor(st, o, L("mlp.c_fc.weight"), 2, C, I, 0, 0);
        expect_tensor(st, o, L("mlp.c_fc.bias"), 1, I, 0, 0, 0);
        expect_tensor(st, o, L("mlp.c_proj.weight"), 2, I, C, 0, 0);
        expect_tensor(st, o, L("mlp.c_proj.bias"), 1, C, 0, 0, 0);
        if (o->attn_bias_buffers) {
            const vkg_st_tensor *mask = expect_tensor(st, o, L("attn.bias"), 4, 1, 1, P, P);
            float *m = malloc((size_t)(P * P) * sizeof *m);
            assert_int_equal(vkg_safetensors_read(st, mask, VKG_ST_F32, m, NULL), VKG_OK);
            for (int64_t r = 0; r < P; r++)
                for (int64_t k = 0; k < P; k++) assert_true(m[r * P + k] == (k <= r ? 1.0f : 0.0f));
            free(m);
            const vkg_st_tensor *mb = expect_tensor(st, o, L("attn.masked_bias"), 0, 0, 0, 0, 0);
            float v;
            assert_int_equal(vkg_safetensors_read(st, mb, VKG_ST_F32, &v, NULL), VKG_OK);
            assert_true(v == (o->dtype == VKG_ST_BF16 ? -9984.0f : -10000.0f)); /* bf16 rounds -1e4 */
        }
#undef L
    }
    const vkg_st_tensor *lnf = expect_tensor(st, o, "ln_f.weight", 1, C, 0, 0, 0);
    expect_tensor(st, o, "ln_f.bias", 1, C, 0, 0, 0);
    if (o->untied_lm_head) expect_tensor(st, o, "lm_head.weight", 2, V, C, 0, 0);
    else assert_null(vkg_safetensors_find(st, "lm_head.weight"));

    /* The documented scales, loosely (small samples). */
    double mean, std;
    stats(st, expect_tensor(st, o, "wte.weight", 2, V, C, 0, 0), &mean, &std);
    assert_true(fabs(mean) < 0.02 && std > 0.08 && std < 0.12);
    stats(st, expect_tensor(st, o, "h.0.attn.c_attn.weight", 2, C, 3 * C, 0, 0), &mean, &std);
    assert_true(fabs(std - 1.5 / sqrt((double)C)) < 0.1 * 1.5 / sqrt((double)C));
    stats(st, lnf, &mean, &std);
    assert_true(fabs(mean - 1.0) < 0.06 && std > 0.05 && std < 0.15);
    vkg_safetensors_close(st);
}

static void test_random_model_every_option(void **state) {
    (void)state;
    const vkg_st_dtype dtypes[3] = {VKG_ST_F32, VKG_ST_F16, VKG_ST_BF16};
    int k = 0;
    for (int d = 0; d < 3; d++)
        for (int bits = 0; bits < 8; bits++, k++) {
            vkg_gpt2_random_options o;
            vkg_gpt2_random_options_default(&o);
            o.dtype = dtypes[d];
            o.prefix_transformer = bits & 1;
            o.untied_lm_head = (bits >> 1) & 1;
            o.attn_bias_buffers = (bits >> 2) & 1;
            o.seed = (uint64_t)k;
            if (k % 2) o.config.n_layer = 3; /* vary the shape and the config too */
            if (k % 3 == 1) o.config.n_inner = 40;
            if (k % 4 == 2) o.config.scale_attn_weights = 0;
            if (k % 5 == 3) o.config.scale_attn_by_inverse_layer_idx = 1;
            static const char *const acts[] = {"gelu_new", "gelu", "quick_gelu", "silu", "relu", "swish"};
            memset(o.config.activation, 0, sizeof o.config.activation);
            snprintf(o.config.activation, sizeof o.config.activation, "%s", acts[k % 6]);
            char dir[160];
            snprintf(dir, sizeof dir, "%s/models/m%d", tmp_dir, k); /* parents made as needed */
            vkg_error err = {0};
            if (vkg_gpt2_write_random(dir, &o, &err) != VKG_OK) fail_msg("%s", err.message);
            check_model(dir, &o);
        }
}

static void read_file(const char *path, unsigned char **data, long *size) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    *size = ftell(f);
    fseek(f, 0, SEEK_SET);
    *data = malloc((size_t)*size);
    assert_int_equal(fread(*data, 1, (size_t)*size, f), (size_t)*size);
    fclose(f);
}

static void test_random_model_determinism_and_errors(void **state) {
    (void)state;
    vkg_gpt2_random_options o;
    vkg_gpt2_random_options_default(&o);
    vkg_error err = {0};
    char a[160], b[160], c[160];
    snprintf(a, sizeof a, "%s/same1", tmp_dir);
    snprintf(b, sizeof b, "%s/same2", tmp_dir);
    snprintf(c, sizeof c, "%s/other", tmp_dir);
    assert_int_equal(vkg_gpt2_write_random(a, &o, &err), VKG_OK);
    assert_int_equal(vkg_gpt2_write_random(b, &o, &err), VKG_OK);
    o.seed = 2;
    assert_int_equal(vkg_gpt2_write_random(c, &o, &err), VKG_OK);
    unsigned char *da, *db, *dc;
    long na, nb, nc;
    char p[200];
    snprintf(p, sizeof p, "%s/model.safetensors", a);
    read_file(p, &da, &na);
    snprintf(p, sizeof p, "%s/model.safetensors", b);
    read_file(p, &db, &nb);
    snprintf(p, sizeof p, "%s/model.safetensors", c);
    read_file(p, &dc, &nc);
    assert_int_equal(na, nb);
    assert_int_equal(na, nc);
    assert_memory_equal(da, db, (size_t)na);
    assert_memory_not_equal(da, dc, (size_t)na);
    free(da);
    free(db);
    free(dc);

    o.dtype = VKG_ST_I32;
    assert_int_equal(vkg_gpt2_write_random(a, &o, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "I32"));
    o.dtype = VKG_ST_F32;
    o.config.n_head = 5;
    assert_int_equal(vkg_gpt2_write_random(a, &o, &err), VKG_ERR_FORMAT);
    assert_non_null(strstr(err.message, "not divisible"));
    o.config.n_head = 4;
    snprintf(p, sizeof p, "%s/model.safetensors/sub", a); /* a file where a directory must go */
    assert_int_equal(vkg_gpt2_write_random(p, &o, &err), VKG_ERR_IO);
    assert_non_null(strstr(err.message, "cannot create directory"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_load_hub_gpt2),
        cmocka_unit_test(test_load_transformers_4_46),
        cmocka_unit_test(test_defaults_nulls_and_n_ctx),
        cmocka_unit_test(test_activation_names),
        cmocka_unit_test(test_bad_configs),
        cmocka_unit_test(test_write_and_reload),
        cmocka_unit_test(test_random_model_every_option),
        cmocka_unit_test(test_random_model_determinism_and_errors),
    };
    return cmocka_run_group_tests(tests, make_dir, remove_dir);
}
