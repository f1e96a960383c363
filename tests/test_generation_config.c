/* A model's generation defaults and stop ids, from real-shaped files: generation_config.json
 * (eos list, sampling keys, max_new_tokens / max_length, keys not applied noted by name, bad
 * values refused), config.json's eos list when that file has none, the tokenizer's eos last;
 * generation stopping at any stop id; and tokenizer_config.json's add_bos_token / add_eos_token
 * where transformers honours them (Llama's tokenizer class) and not elsewhere. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "support/test_util.h"
#include "vkgraph_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *root;
static vkg_device *cpu;

static int setup(void **state) {
    (void)state;
    root = test_tmpdir("genconfig");
    return (cpu = test_open_cpu()) ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    vkg_device_free(cpu);
    assert_int_equal(test_remove_tree(root), 0);
    free(root);
    return 0;
}

static const char *in_root(const char *dir, const char *name) {
    static char path[4096];
    snprintf(path, sizeof path, "%s/%s%s%s", root, dir, name ? "/" : "", name ? name : "");
    return path;
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fputs(text, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
}

static void copy_file(const char *from, const char *to) {
    char *text = test_read_file(from, NULL);
    write_text(to, text);
    free(text);
}

/* A random llama-tiny model in root/name, with `vocab` tokens (0: the shape's 128); the caller
 * frees the folder's name. */
static char *random_model(const char *name, int vocab) {
    vkg_random_model_options o;
    vkg_random_model_options_default(&o);
    o.vocab_size = vocab;
    vkg_error err = {0};
    const char *dir = in_root(name, NULL);
    if (vkg_random_model_write(dir, &o, &err) != VKG_OK) fail_msg("%s", err.message);
    char *copy = strdup(dir);
    assert_non_null(copy);
    return copy;
}

/* Replaces the first `from` in dir/config.json by `to`. */
static void edit_config(const char *dir, const char *from, const char *to) {
    char path[4200];
    snprintf(path, sizeof path, "%s/config.json", dir);
    char *text = test_read_file(path, NULL);
    char *at = strstr(text, from);
    assert_non_null(at);
    char *out = malloc(strlen(text) + strlen(to) + 1);
    assert_non_null(out);
    sprintf(out, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
    write_text(path, out);
    free(out);
    free(text);
}

static void write_generation_config(const char *dir, const char *json) {
    char path[4200];
    snprintf(path, sizeof path, "%s/generation_config.json", dir);
    write_text(path, json);
}

static vkg_model *open_model(const char *dir, vkg_device *dev) {
    vkg_model *m = NULL;
    vkg_error err = {0};
    if (vkg_model_open(dir, dev, NULL, &m, &err) != VKG_OK) fail_msg("%s", err.message);
    return m;
}

/* Llama 3.2 Instruct's and Qwen2.5 Instruct's generation_config.json, with ids of this
 * vocabulary and keys that are noted or ignored. */
static void test_generation_config_read(void **state) {
    (void)state;
    char *dir = random_model("read", 0);
    write_generation_config(dir, "{\n  \"bos_token_id\": 3,\n  \"do_sample\": true,\n  \"eos_token_id\": [2, 5, 7],\n"
                                 "  \"temperature\": 0.6,\n  \"top_p\": 0.9,\n  \"repetition_penalty\": 1.05,\n"
                                 "  \"max_new_tokens\": 77,\n  \"max_length\": 300,\n  \"num_beams\": 4,\n"
                                 "  \"typical_p\": 1.0,\n  \"pad_token_id\": 0,\n  \"made_up_key\": 3,\n"
                                 "  \"transformers_version\": \"4.45.0.dev0\"\n}\n");
    vkg_model *m = open_model(dir, NULL);
    int32_t ids[8] = {0};
    assert_int_equal(vkg_model_stop_ids(m, ids, 8), 3);
    assert_int_equal(ids[0], 2);
    assert_int_equal(ids[1], 5);
    assert_int_equal(ids[2], 7);
    assert_int_equal(vkg_model_stop_ids(m, NULL, 0), 3);
    vkg_model_info info;
    assert_int_equal(vkg_model_get_info(m, &info, NULL), VKG_OK);
    assert_int_equal(info.bos_token, 3);
    assert_int_equal(info.eos_token, 2);
    assert_int_equal(info.max_length, 300);
    assert_non_null(strstr(info.generation_note, "num_beams 4"));
    assert_non_null(strstr(info.generation_note, "made_up_key"));
    assert_null(strstr(info.generation_note, "typical_p"));
    assert_null(strstr(info.generation_note, "pad_token_id"));
    assert_null(strstr(info.generation_note, "transformers_version"));
    vkg_generate_options o;
    vkg_model_generate_defaults(m, &o);
    assert_int_equal(o.max_tokens, 77);
    assert_float_equal(o.sampling.temperature, 0.6f, 0);
    assert_int_equal(o.sampling.top_k, 50); /* GenerationConfig's default */
    assert_float_equal(o.sampling.top_p, 0.9f, 0);
    assert_float_equal(o.sampling.min_p, 0.0f, 0);
    assert_float_equal(o.sampling.repeat_penalty, 1.05f, 0);
    assert_int_equal(o.sampling.repeat_last_n, -1);
    vkg_model_free(m);

    /* without do_sample the choice is greedy whatever temperature says, as transformers */
    write_generation_config(dir, "{\"eos_token_id\": 4, \"temperature\": 0.6, \"top_k\": 20}");
    m = open_model(dir, NULL);
    assert_int_equal(vkg_model_stop_ids(m, ids, 8), 1);
    assert_int_equal(ids[0], 4);
    vkg_model_generate_defaults(m, &o);
    assert_true(vkg_sampling_is_greedy(&o.sampling));
    assert_int_equal(o.max_tokens, 50);
    assert_float_equal(o.sampling.repeat_penalty, 1.0f, 0);
    assert_int_equal(vkg_model_get_info(m, &info, NULL), VKG_OK);
    assert_int_equal(info.max_length, 0);
    assert_string_equal(info.generation_note, "");
    vkg_model_free(m);

    /* an id outside the vocabulary is dropped, with a note */
    write_generation_config(dir, "{\"eos_token_id\": [500, 6]}");
    m = open_model(dir, NULL);
    assert_int_equal(vkg_model_stop_ids(m, ids, 8), 1);
    assert_int_equal(ids[0], 6);
    assert_int_equal(vkg_model_get_info(m, &info, NULL), VKG_OK);
    assert_non_null(strstr(info.generation_note, "eos_token_id 500 lies outside the vocabulary"));
    vkg_model_free(m);
    free(dir);
}

/* Values transformers refuses are refused, naming the file and the key. */
static void test_generation_config_refused(void **state) {
    (void)state;
    char *dir = random_model("refused", 0);
    static const char *const bad[][2] = {
        {"{\"top_p\": 1.5}", "top_p"},
        {"{\"top_p\": 0}", "top_p"},
        {"{\"temperature\": -1}", "temperature"},
        {"{\"top_k\": -3}", "top_k"},
        {"{\"repetition_penalty\": 0}", "repetition_penalty"},
        {"{\"max_new_tokens\": 0}", "max_new_tokens"},
        {"{\"do_sample\": \"yes\"}", "do_sample"},
        {"{\"eos_token_id\": \"</s>\"}", "eos_token_id"},
        {"{\"eos_token_id\": [1, 2.5]}", "eos_token_id"},
        {"[1, 2]", "expected a JSON object"},
        {"{\"temperature\": 0.6,}", "generation_config.json"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        write_generation_config(dir, bad[i][0]);
        vkg_model *m = NULL;
        vkg_error err = {0};
        assert_int_equal(vkg_model_open(dir, NULL, NULL, &m, &err), VKG_ERR_FORMAT);
        assert_null(m);
        if (!strstr(err.message, bad[i][1]) || !strstr(err.message, "generation_config.json"))
            fail_msg("%s: %s", bad[i][0], err.message);
    }
    free(dir);
}

/* Without generation_config.json: config.json's eos list, its class default, the tokenizer's. */
static void test_stop_ids_fallbacks(void **state) {
    (void)state;
    char *dir = random_model("fallback", 384);
    int32_t ids[8];
    /* llama-tiny's config names eos 2 */
    vkg_model *m = open_model(dir, NULL);
    assert_int_equal(vkg_model_stop_ids(m, ids, 8), 1);
    assert_int_equal(ids[0], 2);
    vkg_generate_options o;
    vkg_model_generate_defaults(m, &o);
    assert_true(vkg_sampling_is_greedy(&o.sampling));
    vkg_model_free(m);
    /* a list in config.json: every id */
    edit_config(dir, "\"eos_token_id\": 2", "\"eos_token_id\": [2, 9, 11]");
    m = open_model(dir, NULL);
    assert_int_equal(vkg_model_stop_ids(m, ids, 8), 3);
    assert_int_equal(ids[1], 9);
    assert_int_equal(ids[2], 11);
    vkg_model_free(m);
    /* null: the tokenizer's eos, tokenizer_config.json's eos_token (SmolLM2's <|im_end|>, 325) */
    edit_config(dir, "\"eos_token_id\": [2, 9, 11]", "\"eos_token_id\": null");
    copy_file(test_data_path("tokenizers/smollm2/tokenizer.json"), in_root("fallback", "tokenizer.json"));
    m = open_model(dir, NULL);
    assert_int_equal(vkg_model_stop_ids(m, ids, 8), 1);
    assert_int_equal(ids[0], 323); /* no tokenizer_config.json: <|endoftext|> */
    vkg_model_free(m);
    copy_file(test_data_path("templates/smollm2.json"), in_root("fallback", "tokenizer_config.json"));
    m = open_model(dir, NULL);
    assert_int_equal(vkg_model_stop_ids(m, ids, 8), 1);
    assert_int_equal(ids[0], 325);
    assert_int_equal(vkg_tokenizer_eos(vkg_model_tokenizer(m)), 325);
    assert_int_equal(vkg_tokenizer_eot(vkg_model_tokenizer(m)), 323);
    vkg_model_free(m);
    /* generation_config.json's null eos falls through too */
    write_generation_config(dir, "{\"eos_token_id\": null, \"bos_token_id\": 324}");
    m = open_model(dir, NULL);
    assert_int_equal(vkg_model_stop_ids(m, ids, 8), 1);
    assert_int_equal(ids[0], 325);
    vkg_model_free(m);
    free(dir);
}

typedef test_tokens collected;

static void generate(const char *dir, int ignore_eos, collected *out, vkg_generate_result *res) {
    vkg_model *m = open_model(dir, cpu);
    vkg_context *ctx = NULL;
    vkg_error err = {0};
    vkg_context_options co;
    vkg_context_options_default(&co);
    co.n_ctx = 32;
    if (vkg_context_new(m, &co, &ctx, &err) != VKG_OK) fail_msg("%s", err.message);
    const int32_t prompt[3] = {10, 20, 30};
    vkg_generate_options o;
    vkg_generate_options_default(&o);
    o.max_tokens = 8;
    o.prompt = prompt;
    o.n_prompt = 3;
    o.ignore_eos = ignore_eos;
    memset(out, 0, sizeof *out);
    if (vkg_context_generate(ctx, &o, test_collect_token, out, res, &err) != VKG_OK) fail_msg("%s", err.message);
    vkg_context_free(ctx);
    vkg_model_free(m);
}

/* Generation ends at any stop id, not only the model's eos; ignore_eos masks them all. */
static void test_generation_stops_at_any_stop_id(void **state) {
    (void)state;
    char *dir = random_model("stops", 0);
    write_generation_config(dir, "{\"eos_token_id\": []}");
    edit_config(dir, "\"eos_token_id\": 2", "\"eos_token_id\": null");
    collected free_run, stopped, ignored;
    vkg_generate_result res;
    generate(dir, 0, &free_run, &res);
    assert_int_equal(res.reason, VKG_STOP_MAX_TOKENS);
    assert_int_equal(free_run.n, 8);
    /* the third token generated becomes the second of two stop ids */
    const int32_t x = free_run.ids[2];
    int before = 0;
    for (int i = 0; i < 2; i++) before |= free_run.ids[i] == x;
    if (before) free(dir), skip(); /* the random model repeats itself early: no distinct third token */
    char json[128];
    snprintf(json, sizeof json, "{\"eos_token_id\": [%d, %d]}", x == 127 ? 126 : 127, (int)x);
    write_generation_config(dir, json);
    generate(dir, 0, &stopped, &res);
    assert_int_equal(res.reason, VKG_STOP_EOS);
    assert_int_equal(stopped.n, 2);
    assert_memory_equal(stopped.ids, free_run.ids, 2 * sizeof(int32_t));
    generate(dir, 1, &ignored, &res);
    assert_int_equal(ignored.n, 8);
    assert_memory_equal(ignored.ids, free_run.ids, 2 * sizeof(int32_t));
    for (int i = 0; i < ignored.n; i++) assert_int_not_equal(ignored.ids[i], x);
    free(dir);
}

static void encode(const char *dir, const char *text, int32_t **ids, size_t *n) {
    vkg_tokenizer *t = NULL;
    vkg_error err = {0};
    if (vkg_tokenizer_load(dir, &t, &err) != VKG_OK) fail_msg("%s", err.message);
    if (vkg_tokenizer_encode(t, text, strlen(text), ids, n, &err) != VKG_OK) fail_msg("%s", err.message);
    vkg_tokenizer_free(t);
}

/* Llama 2's tokenizer.json (its post-processor adds <s>): LlamaTokenizerFast rebuilds the
 * post-processor from add_bos_token / add_eos_token; PreTrainedTokenizerFast keeps it. */
static void test_add_bos_eos_tokens(void **state) {
    (void)state;
    const char *dir = in_root("llama2tok", NULL);
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
    assert_int_equal(system(cmd), 0);
    char tok_dir[4096];
    snprintf(tok_dir, sizeof tok_dir, "%s", dir);
    copy_file(test_data_path("tokenizers/llama2/tokenizer.json"), in_root("llama2tok", "tokenizer.json"));
    const char *text = "Hello world";
    int32_t *plain = NULL, *ids = NULL;
    size_t n_plain = 0, n = 0;
    encode(tok_dir, text, &plain, &n_plain);
    assert_true(n_plain >= 2);
    assert_int_equal(plain[0], 1); /* <s> from tokenizer.json's TemplateProcessing */
    static const struct {
        const char *config;
        int bos, eos;
    } cases[] = {
        {"{\"tokenizer_class\": \"LlamaTokenizer\", \"add_bos_token\": false, \"add_eos_token\": true}", 0, 1},
        {"{\"tokenizer_class\": \"LlamaTokenizerFast\", \"add_eos_token\": true, \"eos_token\": {\"content\": "
         "\"</s>\"}}", 1, 1},
        {"{\"tokenizer_class\": \"LlamaTokenizer\"}", 1, 0},
        {"{\"tokenizer_class\": \"PreTrainedTokenizerFast\", \"add_bos_token\": false, \"add_eos_token\": true}", 1, 0},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        write_text(in_root("llama2tok", "tokenizer_config.json"), cases[c].config);
        encode(tok_dir, text, &ids, &n);
        const size_t body = n_plain - 1;
        assert_int_equal(n, body + (size_t)cases[c].bos + (size_t)cases[c].eos);
        if (cases[c].bos) assert_int_equal(ids[0], 1);
        assert_memory_equal(ids + cases[c].bos, plain + 1, body * sizeof *ids);
        if (cases[c].eos) assert_int_equal(ids[n - 1], 2);
        free(ids);
    }
    /* a bos_token the vocabulary lacks cannot be added: refused, naming it */
    write_text(in_root("llama2tok", "tokenizer_config.json"),
               "{\"tokenizer_class\": \"LlamaTokenizer\", \"bos_token\": \"<nope>\"}");
    vkg_tokenizer *t = NULL;
    vkg_error err = {0};
    assert_int_equal(vkg_tokenizer_load(tok_dir, &t, &err), VKG_ERR_FORMAT);
    assert_non_null(strstr(err.message, "<nope>"));
    free(plain);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_generation_config_read),
        cmocka_unit_test(test_generation_config_refused),
        cmocka_unit_test(test_stop_ids_fallbacks),
        cmocka_unit_test(test_generation_stops_at_any_stop_id),
        cmocka_unit_test(test_add_bos_eos_tokens),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
