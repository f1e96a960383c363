/* `vkgraph random`: each architecture's shapes written as transformers writes them (config.json,
 * one file or shards with the index), read back by every command through --ids, each rope
 * scaling written from the command line (a yarn model's logits against the NumPy reference),
 * GPT-2's shapes passed to gpt2-random, and every user error answered with exit status 1 and a
 * message. */
#include "gpt2_cli_run.h"

static void expect_file(const char *dir, const char *name) {
    char p[1400];
    struct stat sb;
    snprintf(p, sizeof p, "%s/%s", dir, name);
    if (stat(p, &sb) != 0) fail_msg("%s was not written", p);
}

static void f_write(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
}

static void test_writes_and_runs(void **state) {
    (void)state;
    need_binary();
    char dir[1200];
    snprintf(dir, sizeof dir, "%s", in_tmp("qwen"));
    result r = VKG("random", dir, "--shape", "qwen2-tiny", "--dtype", "bf16", "--shards", "2", "--untied");
    expect_ok(&r, "random --shards");
    assert_non_null(strstr(r.out, "RANDOM weights"));
    result_free(&r);
    expect_file(dir, "model.safetensors.index.json");
    expect_file(dir, "model-00001-of-00002.safetensors");
    expect_file(dir, "model-00002-of-00002.safetensors");
    expect_file(dir, "RANDOM-WEIGHTS.txt");
    char *cfg = test_read_file(in_tmp("qwen/config.json"), NULL);
    assert_non_null(strstr(cfg, "\"model_type\": \"qwen2\""));
    assert_non_null(strstr(cfg, "\"torch_dtype\": \"bfloat16\""));
    assert_non_null(strstr(cfg, "\"tie_word_embeddings\": false"));
    free(cfg);
    r = VKG("logits", "-m", dir, "--ids", "1,2,3", "-o", in_tmp("q.npy"), "--device", "cpu");
    expect_ok(&r, "logits on a sharded qwen2");
    result_free(&r);
    /* written again as one file: the shards' index goes, so one layout remains */
    r = VKG("random", dir, "--shape", "qwen2-tiny", "--layers", "3");
    expect_ok(&r, "random again");
    assert_non_null(strstr(r.out, "with 3 layers"));
    result_free(&r);
    expect_file(dir, "model.safetensors");
    char p[1400];
    struct stat sb;
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir);
    assert_int_not_equal(stat(p, &sb), 0);
    /* a tokenizer not read yet: the model still runs on ids, says why, and text is refused */
    f_write(in_tmp("qwen/tokenizer.json"), "{\"model\": {\"type\": \"Unigram\", \"vocab\": []}}");
    r = VKG("logits", "-m", dir, "--ids", "1,2", "-o", in_tmp("q.npy"), "--device", "cpu");
    expect_ok(&r, "logits with a tokenizer not read");
    assert_non_null(strstr(r.err, "prompts as token ids only"));
    assert_non_null(strstr(r.err, "Unigram"));
    result_free(&r);
    expect_fail(VKG("logits", "-m", dir, "-p", "hello", "-o", in_tmp("q.npy"), "--device", "cpu"), "logits",
                "has no tokenizer");
    /* a vocabulary and an eos id of a tokenizer's choosing (SmolLM2's test tokenizer: <|im_end|> 325) */
    r = VKG("random", in_tmp("smol"), "--shape", "llama-tiny", "--vocab", "326", "--eos", "325");
    expect_ok(&r, "random --vocab --eos");
    result_free(&r);
    cfg = test_read_file(in_tmp("smol/config.json"), NULL);
    assert_non_null(strstr(cfg, "\"eos_token_id\": 325"));
    assert_non_null(strstr(cfg, "\"vocab_size\": 326"));
    free(cfg);
    /* GPT-2's shapes go to gpt2-random */
    r = VKG("random", in_tmp("g"), "--shape", "gpt2-tiny", "--vocab", "64");
    expect_ok(&r, "random --shape gpt2-tiny");
    assert_non_null(strstr(r.out, "GPT-2-shaped"));
    result_free(&r);
}

/* --rope-scaling, each type written as transformers reads it; a yarn model written so gives the
 * independent NumPy reference's logits at every position, past its original context too. */
static void test_rope_scaling(void **state) {
    (void)state;
    need_binary();
    static const struct { const char *spec, *json; } cases[] = {
        {"none", "\"rope_scaling\": null"},
        {"linear:2", "{\"factor\": 2, \"rope_type\": \"linear\"}"},
        {"dynamic:3", "{\"factor\": 3, \"rope_type\": \"dynamic\"}"},
        {"llama3:8", "\"original_max_position_embeddings\": 8192, \"rope_type\": \"llama3\""},
        {"llama3:8:32", "\"low_freq_factor\": 1, \"original_max_position_embeddings\": 32, \"rope_type\": \"llama3\""},
        {"yarn:4", "\"original_max_position_embeddings\": 96, \"rope_type\": \"yarn\""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        result r = VKG("random", in_tmp("rope"), "--shape", "llama-tiny", "--ctx", "96", "--rope-scaling",
                       cases[i].spec, "--force");
        expect_ok(&r, cases[i].spec);
        result_free(&r);
        char *cfg = test_read_file(in_tmp("rope/config.json"), NULL);
        if (!strstr(cfg, cases[i].json)) fail_msg("--rope-scaling %s wrote %s", cases[i].spec, cfg);
        free(cfg);
    }
    enum { T = 64 };
    result r = VKG("random", in_tmp("yarn"), "--shape", "qwen2-tiny", "--rope-scaling", "yarn:4:16");
    expect_ok(&r, "random --rope-scaling yarn:4:16");
    result_free(&r);
    int32_t ids[T];
    char list[T * 8] = "";
    for (int i = 0; i < T; i++) {
        ids[i] = (int32_t)((i * 37 + 11) % 100);
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%d", i ? "," : "", (int)ids[i]);
    }
    r = VKG("logits", "-m", in_tmp("yarn"), "--ids", list, "--all", "-o", in_tmp("yarn.npy"), "--device", "cpu");
    expect_ok(&r, "logits of the yarn model");
    result_free(&r);
    char *cfg = test_read_file(in_tmp("yarn/config.json"), NULL);
    const char *v = strstr(cfg, "\"vocab_size\": ");
    assert_non_null(v);
    const int64_t V = atoll(v + strlen("\"vocab_size\": "));
    free(cfg);
    float *got = test_read_npy_matrix(in_tmp("yarn.npy"), T, V);
    float *want = test_numpy_logits_of("VKG_LLAMA_REFERENCE", in_tmp("yarn"), ids, T, V);
    test_expect_logits(got, want, 0, T, (size_t)V, 1e-6, 1e-4f, "yarn:4:16 from the command line, T = 64");
    free(got);
    free(want);
    /* what it refuses, by name */
    expect_fail(VKG("random", in_tmp("x"), "--shape", "llama-tiny", "--rope-scaling", "yarn"), "random",
                "write TYPE:FACTOR[:ORIGINAL]");
    expect_fail(VKG("random", in_tmp("x"), "--shape", "llama-tiny", "--rope-scaling", "linear:0"), "random",
                "FACTOR must be a positive number");
    expect_fail(VKG("random", in_tmp("x"), "--shape", "llama-tiny", "--rope-scaling", "linear:2:8"), "random",
                "only llama3 and yarn take ORIGINAL");
    expect_fail(VKG("random", in_tmp("x"), "--shape", "llama-tiny", "--rope-scaling", "longrope:2"), "random",
                "rope_scaling type 'longrope' is not supported");
    expect_fail(VKG("random", in_tmp("x"), "--shape", "llama-tiny", "--rope-scaling", "yarn:4:x"), "random",
                "ORIGINAL must be a whole number");
}

static void test_errors(void **state) {
    (void)state;
    need_binary();
    expect_fail(VKG("random", in_tmp("x"), "--shape", "llama-9000"), "random", "no Llama-family shape 'llama-9000'");
    expect_fail(VKG("random", in_tmp("x")), "random", "--shape: say which model's shapes");
    expect_fail(VKG("random", "--shape", "llama-tiny"), "random", "say where to write the model");
    expect_fail(VKG("random", in_tmp("x"), "--shape", "qwen3-tiny", "--arch", "llama"), "random",
                "shape qwen3-tiny is a qwen3 model, not llama");
    expect_fail(VKG("random", in_tmp("x"), "--shape", "llama-tiny", "--shards", "0"), "random", "--shards");
    expect_fail(VKG("random", in_tmp("x"), "--shape", "gpt2-tiny", "--shards", "2"), "random",
                "GPT-2 checkpoints are written as one model.safetensors");
    expect_fail(VKG("random", in_tmp("x"), "--shape", "llama-tiny", "--dtype", "f8"), "random", "--dtype");
    expect_fail(VKG("random", in_tmp("x"), "--shape", "llama-tiny", "--eos", "128"), "random",
                "eos token 128 is outside the vocabulary of 128 tokens");
    expect_fail(VKG("random", in_tmp("x"), "--shape", "llama-tiny", "--eos", "-1"), "random", "--eos");
    /* a folder holding a real model is left alone */
    char dir[1200];
    snprintf(dir, sizeof dir, "%s", in_tmp("real"));
    assert_int_equal(mkdir(dir, 0777), 0);
    FILE *f = fopen(in_tmp("real/config.json"), "w");
    assert_non_null(f);
    fputs("{}", f);
    fclose(f);
    expect_fail(VKG("random", dir, "--shape", "llama-tiny"), "random", "already holds a model");
    /* an architecture not supported, named with those that are */
    f = fopen(in_tmp("real/config.json"), "w");
    assert_non_null(f);
    fputs("{\"model_type\": \"phi3\"}", f);
    fclose(f);
    expect_fail(VKG("logits", "-m", dir, "--ids", "1", "-o", in_tmp("x.npy")), "logits",
                "architecture \"phi3\" is not supported (supported: gpt2 (GPT2LMHeadModel), llama");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_writes_and_runs),
        cmocka_unit_test(test_rope_scaling),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
