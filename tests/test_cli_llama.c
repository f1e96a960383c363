/* The commands that take -m DIR, run on Llama-family folders as they run on GPT-2's: what each
 * prints that depends on the architecture (layers found by their "model.layers.N." names, the
 * model named by its model_type, the random-weights note), and the one command that looks inside
 * GPT-2 alone (lesson step 7) refusing another architecture by name.  Tiny random models, so that
 * it runs in every leg; the scale of these models is tests/test_llama_scale.c and
 * tests/test_compare_scale.c. */
#include "gpt2_cli_run.h"

static char llama[1200], mistral[1200];

static void write_models(void) {
    static int written;
    if (written++) return;
    snprintf(llama, sizeof llama, "%s", in_tmp("llama"));
    snprintf(mistral, sizeof mistral, "%s", in_tmp("mistral"));
    result r = VKG("random", llama, "--shape", "llama-tiny", "--force");
    expect_ok(&r, "random llama-tiny");
    result_free(&r);
    r = VKG("random", mistral, "--shape", "mistral-tiny", "--force");
    expect_ok(&r, "random mistral-tiny");
    result_free(&r);
}

/* The line of text that starts with prefix, or fail. */
static const char *line_of(const char *text, const char *prefix) {
    for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (!strncmp(p, prefix, strlen(prefix))) return p;
    fail_msg("no line starts with \"%s\" in:\n%s", prefix, text);
    return NULL;
}

/* dump --layers keeps the layers asked for (layer 1 of 2, with the head), DOT clusters a layer. */
static void test_dump_layers(void **state) {
    (void)state;
    need_binary();
    write_models();
    result r = VKG("dump", "-m", llama, "--seq", "4", "--layers", "1:2");
    expect_ok(&r, "dump --layers 1:2");
    assert_non_null(strstr(r.out, "layer 1 of 2 with the head"));
    assert_non_null(strstr(r.out, "model.layers.1.self_attn.qkv_proj"));
    assert_null(strstr(r.out, "model.layers.0.self_attn.qkv_proj"));
    /* q and k rotated in one step over the projection's heads, the values copied beside them */
    assert_non_null(strstr(r.out, "model.layers.1.attn.qkv.rope"));
    assert_non_null(strstr(r.out, "rotated=6"));
    assert_null(strstr(r.out, "attn.kv.concat"));
    result_free(&r);
    r = VKG("dump", "-m", llama, "--seq", "4", "--format", "dot");
    expect_ok(&r, "dump --format dot");
    assert_non_null(strstr(r.out, "cluster_layer1"));
    result_free(&r);
}

/* dump --decode --plan over a context whose one head's keys are longer than one binding holds
 * (2^20 positions of Qwen3-0.6B's 128-wide heads: 512 MiB against 128 MiB) takes the largest half
 * that fits and says so; a --ctx that does not fit is refused with the reason, and --ctx without
 * --decode by name. */
static void test_dump_long_context(void **state) {
    (void)state;
    need_binary();
    const char *dir = in_tmp("qwen3-long");
    result r = VKG("random", dir, "--shape", "qwen3-0.6b", "--layers", "1", "--vocab", "512", "--ctx", "1048576",
                   "--dtype", "bf16", "--force");
    expect_ok(&r, "random --ctx 1048576");
    result_free(&r);
    r = VKG("dump", "-m", dir, "--decode", "--plan");
    expect_ok(&r, "dump --decode --plan");
    assert_non_null(strstr(r.err, "note: a KV cache of 262144 positions: the model's 1048576 do not fit"));
    /* the cache: 2 x 8 heads x 128 floats a position; written and read in runs of heads */
    assert_non_null(strstr(line_of(strstr(r.out, "regions:"), "  r4 "), "kv_cache              2147483648 bytes"));
    assert_non_null(strstr(r.out, "write_at[1/"));
    assert_non_null(strstr(r.out, "attention+scale+causal[1/"));
    result_free(&r);
    r = VKG("dump", "-m", dir, "--decode", "--plan", "--ctx", "1024");
    expect_ok(&r, "dump --decode --plan --ctx 1024");
    assert_null(strstr(r.err, "note:"));
    assert_non_null(strstr(line_of(strstr(r.out, "regions:"), "  r4 "), " 8388608 bytes"));
    assert_null(strstr(r.out, "write_at["));
    result_free(&r);
    expect_fail(VKG("dump", "-m", dir, "--decode", "--plan", "--ctx", "1048576"), "dump",
                "more than the largest binding");
    expect_fail(VKG("dump", "-m", dir, "--plan", "--ctx", "1024"), "dump", "--ctx needs --decode");
}

/* --group-by layer sums each layer's steps under "layer N"; the step table's node column holds
 * the long module names whole, the shape column aligned after it. */
static void test_profile_layers(void **state) {
    (void)state;
    need_binary();
    write_models();
    result r = VKG("logits", "-m", llama, "--ids", "1,2,3", "-o", in_tmp("l.npy"), "--device", "cpu", "--group-by",
                   "layer", "--trace", in_tmp("t.json"));
    expect_ok(&r, "logits --group-by layer");
    assert_non_null(line_of(r.err, "  embed "));
    assert_non_null(line_of(r.err, "  layer 0 "));
    assert_non_null(line_of(r.err, "  layer 1 "));
    assert_non_null(line_of(r.err, "  head "));
    assert_null(strstr(r.err, "  other "));
    const char *header = line_of(r.err, " step  op"), *row = line_of(r.err, "    1  rms_norm");
    const char *name = strstr(row, "model.layers.0.input_layernorm");
    assert_non_null(name);
    /* the row's shape starts under the header's "shape" */
    const char *shape = strchr(row, '[');
    assert_int_equal(shape - row, strstr(header, "shape") - header);
    assert_true(shape > name + strlen("model.layers.0.input_layernorm"));
    result_free(&r);
}

/* compare names the model by its architecture, and exits 0 when every step agrees, for the
 * forward pass, for a decode step over Mistral's windowed cache, and for a batched decode step. */
static void test_compare(void **state) {
    (void)state;
    need_binary();
    write_models();
    result r = VKG("compare", "-m", llama, "--ids", "1,2,3,4,5", "-q");
    expect_ok(&r, "compare llama-tiny");
    assert_non_null(strstr(r.out, "llama forward pass over 5 tokens"));
    assert_non_null(strstr(r.out, "all 23 steps within their thresholds"));
    result_free(&r);
    r = VKG("compare", "-m", mistral, "--ids", "1,2,3,4,5,6", "--decode", "-q");
    expect_ok(&r, "compare --decode mistral-tiny");
    assert_non_null(strstr(r.out, "mistral decode step at position 5"));
    assert_non_null(strstr(r.out, "steps within their thresholds"));
    result_free(&r);
    /* a batched decode step: 3 sequences of 7, 4 and 1 tokens, grouped-query attention and
     * rotary positions per row */
    r = VKG("compare", "-m", llama, "--ids", "1,2,3,4,5,6,7,8", "--decode", "--batch", "3", "-q");
    expect_ok(&r, "compare --decode --batch 3 llama-tiny");
    assert_non_null(strstr(r.out, "llama batched decode step of 3 sequences over KV caches of 8 positions: rows at "
                                  "positions 7 down to 1, 3 apart"));
    assert_non_null(strstr(r.out, "steps within their thresholds"));
    assert_null(strstr(r.out, "FAIL"));
    result_free(&r);
}

/* attention's random-weights line names the command that wrote the folder. */
static void test_attention_note(void **state) {
    (void)state;
    need_binary();
    write_models();
    result r = VKG("attention", "-m", llama, "--ids", "1,2,3,4", "--layer", "1", "--device", "cpu");
    expect_ok(&r, "attention");
    assert_non_null(strstr(r.out, "RANDOM WEIGHTS (written by vkgraph random or gpt2-random)"));
    assert_non_null(strstr(r.out, "2 layers; 4 heads per layer"));
    result_free(&r);
}

/* bench --random takes a Llama-family shape and reports its architecture and key/value heads;
 * an unknown name lists both families' names. */
static void test_bench_random(void **state) {
    (void)state;
    need_binary();
    result r = VKG("bench", "--random", "llama-tiny", "-T", "4", "--decode", "2", "--repeat", "1", "--device", "cpu",
                   "--threads", "1");
    expect_ok(&r, "bench --random llama-tiny");
    assert_non_null(strstr(r.out, "model    llama-tiny (llama): 2 layers, 4 heads over 2 KV heads, 64 wide"));
    assert_non_null(strstr(r.out, "decode   a prompt of 4, then 2 tokens"));
    result_free(&r);
    expect_fail(VKG("bench", "--random", "llama-9000", "--device", "cpu"), "bench",
                "not a shape vkgraph knows (GPT-2: gpt2-tiny");
}

/* lesson step 7 looks inside GPT-2's own modules: a Llama folder is refused by name. */
static void test_lesson_refuses(void **state) {
    (void)state;
    need_binary();
    write_models();
    expect_fail(VKG("lesson", "-m", llama, "7", "--device", "cpu"), "lesson",
                "is a Llama-family model; this step looks inside GPT-2");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dump_layers),     cmocka_unit_test(test_profile_layers),
        cmocka_unit_test(test_compare),         cmocka_unit_test(test_attention_note),
        cmocka_unit_test(test_bench_random),    cmocka_unit_test(test_lesson_refuses),
        cmocka_unit_test(test_dump_long_context),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
