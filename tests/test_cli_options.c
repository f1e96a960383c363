/* How options may be spelled, for every command (tools/cli_args.c): --opt=value, llama.cpp's
 * spellings, "did you mean" for commands and options; and the option fixes that came with them:
 * devices --device, gpt2-random keeping a real model, messages with true ranges. */
#include "gpt2_cli_run.h"

static char tok_dir[1200];

static int setup_all(void **state) {
    if (setup(state)) return -1;
    snprintf(tok_dir, sizeof tok_dir, "%s/../../data/gpt2-tokenizer", data_dir);
    return 0;
}

/* stdout of a run that must succeed (the caller frees it). */
static char *out_of(result r, const char *what) {
    expect_ok(&r, what);
    free(r.err);
    return r.out;
}

static void expect_same_output(result a, result b, const char *what) {
    char *x = out_of(a, what), *y = out_of(b, what);
    if (strcmp(x, y) != 0) fail_msg("%s: \"%s\" and \"%s\" differ", what, x, y);
    assert_true(strlen(x) > 0);
    free(x);
    free(y);
}

static void test_unknown_command(void **state) {
    (void)state;
    need_binary();
    result r = VKG("generte");
    assert_int_equal(r.status, 1);
    assert_string_equal(r.err, "vkgraph: unknown command 'generte'; did you mean 'generate'?\n");
    result_free(&r);
    r = VKG("tokenise");
    assert_string_equal(r.err, "vkgraph: unknown command 'tokenise'; did you mean 'tokenize'?\n");
    result_free(&r);
    r = VKG("xyzzy");
    assert_int_equal(r.status, 1);
    assert_string_equal(r.err, "vkgraph: unknown command 'xyzzy' (vkgraph --help lists the commands)\n");
    result_free(&r);
}

static void test_unknown_option(void **state) {
    (void)state;
    need_binary();
    result r = VKG("generate", "-m", tiny, "--ids", "1", "--top_k", "4");
    assert_int_equal(r.status, 1);
    assert_string_equal(r.err, "vkgraph generate: unknown option '--top_k'; did you mean '--top-k'? "
                               "(see vkgraph generate --help)\n");
    result_free(&r);
    expect_fail(VKG("tokenize", "--tokenizer", tok_dir, "--promt", "x"), "tokenize", "did you mean '--prompt'?");
    expect_fail(VKG("dump", "--exmaple", "block"), "dump", "did you mean '--example'?");
    expect_fail(VKG("devices", "--devcie", "cpu"), "devices", "did you mean '--device'?");
    expect_fail(VKG("gpt2-random", in_tmp("m"), "--layer", "2"), "gpt2-random", "did you mean '--layers'?");
    /* Nothing close: no guess, and one line, not the whole usage. */
    r = VKG("logits", "-m", tiny, "--ids", "1", "--zzzzzzzz");
    assert_string_equal(r.err, "vkgraph logits: unknown option '--zzzzzzzz' (see vkgraph logits --help)\n");
    result_free(&r);
    /* A value given to an option that takes none. */
    expect_fail(VKG("generate", "-m", tiny, "--ids", "1", "--ids-out=1"), "generate",
                "--ids-out takes no value (given '--ids-out=1'");
}

/* --opt=value and llama.cpp's spellings give exactly what vkgraph's own spellings give. */
static void test_spellings(void **state) {
    (void)state;
    need_binary();
    expect_same_output(VKG("generate", "-m", tiny, "--ids", ids_csv, "--device", "cpu", "--ids-out", "-n", "4",
                           "--temperature", "0.9", "--top-k", "40", "--seed", "7", "--threads", "1"),
                       VKG("generate", "-m", tiny, "--ids", ids_csv, "--device=cpu", "--ids-out", "--n-predict=4",
                           "--temp", "0.9", "--top-k=40", "-s", "7", "-t", "1"),
                       "generate with llama.cpp's spellings");
    char tok_opt[1300];
    snprintf(tok_opt, sizeof tok_opt, "--tokenizer=%s", tok_dir);
    expect_same_output(VKG("tokenize", "--tokenizer", tok_dir, "-p", "a=b"), VKG("tokenize", tok_opt, "--prompt=a=b"),
                       "tokenize --prompt=a=b");
    /* The value of an option that always takes one is never split or renamed. */
    char *dash_s = out_of(VKG("tokenize", "--tokenizer", tok_dir, "-p", "-s"), "-p -s");
    assert_string_equal(dash_s, "[12, 82]\n");
    free(dash_s);
    char *dashes = out_of(VKG("tokenize", "--tokenizer", tok_dir, "-p", "--x=y"), "-p --x=y");
    char *eq = out_of(VKG("tokenize", "--tokenizer", tok_dir, "--prompt=--x=y"), "--prompt=--x=y");
    assert_string_equal(dashes, eq);
    assert_string_equal(dashes, "[438, 87, 28, 88]\n");
    free(dashes);
    free(eq);
    /* llama.cpp's spelling of an option a command lacks is named as typed. */
    expect_fail(VKG("dump", "--example", "block", "-s", "3"), "dump",
                "unknown option '-s' (llama.cpp's spelling of --seed, which vkgraph dump does not take");
}

/* -c / --ctx-size: the context of the model random or gpt2-random writes, the KV cache of generate
 * and chat (their --ctx), and serve's per slot; refused by name elsewhere. */
static void test_ctx_size(void **state) {
    (void)state;
    need_binary();
    expect_fail(VKG("logits", "-m", tiny, "--ids", "1", "-c", "512"), "logits",
                "-c is llama.cpp's context size, which vkgraph logits has no use for");
    expect_fail(VKG("logits", "-m", tiny, "--ids", "1", "--ctx-size=512"), "logits", "--ctx-size is llama.cpp's");
    /* generate takes both spellings as its --ctx: a size beyond the model's context reaches its check */
    expect_fail(VKG("generate", "-m", tiny, "--ids", "1", "-c", "512"), "generate",
                "--ctx 512: the model's context holds 32 positions");
    expect_fail(VKG("generate", "-m", tiny, "--ids", "1", "--ctx-size=512"), "generate",
                "--ctx 512: the model's context holds 32 positions");
    const char *dir = in_tmp("ctx");
    result r = VKG("gpt2-random", dir, "--layers", "1", "--heads", "2", "--embd", "8", "--ctx-size", "24", "--vocab",
                   "300");
    expect_ok(&r, "gpt2-random --ctx-size");
    result_free(&r);
    char path[1300];
    snprintf(path, sizeof path, "%s/config.json", dir);
    char *config = test_read_file(path, NULL);
    assert_non_null(strstr(config, "\"n_positions\": 24"));
    free(config);
    /* vkgraph random takes it for a Llama-family shape too (max_position_embeddings). */
    const char *llama = in_tmp("ctx-llama");
    r = VKG("random", llama, "--shape", "llama-tiny", "-c", "48");
    expect_ok(&r, "random -c");
    result_free(&r);
    snprintf(path, sizeof path, "%s/config.json", llama);
    config = test_read_file(path, NULL);
    assert_non_null(strstr(config, "\"max_position_embeddings\": 48"));
    free(config);
    /* serve takes both spellings: a size beyond the model's context reaches serve's own check. */
    expect_fail(VKG("serve", "-m", dir, "--port", "0", "--device", "cpu", "--ctx-size", "25"), "serve",
                "--ctx-size 25 is more than the model's context of 24 positions");
    expect_fail(VKG("serve", "-m", dir, "--port", "0", "--device", "cpu", "-c", "25"), "serve",
                "--ctx-size 25 is more than the model's context of 24 positions");
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* gpt2-random never overwrites a model it did not write, unless --force. */
static void test_gpt2_random_keeps_models(void **state) {
    (void)state;
    need_binary();
    const char *dir = in_tmp("real");
    assert_int_equal(mkdir(dir, 0700), 0);
    char config[1300];
    snprintf(config, sizeof config, "%s/config.json", dir);
    write_text(config, "{\"model_type\": \"gpt2\"}\n");
    expect_fail(VKG("gpt2-random", dir, "--vocab", "300", "--embd", "8", "--heads", "2", "--ctx", "8"), "gpt2-random",
                "already holds a model (config.json), which random weights would overwrite: choose another folder, "
                "or give --force");
    char *kept = test_read_file(config, NULL);
    assert_string_equal(kept, "{\"model_type\": \"gpt2\"}\n");
    free(kept);
    result r = VKG("gpt2-random", dir, "--vocab", "300", "--embd", "8", "--heads", "2", "--ctx", "8", "--force");
    expect_ok(&r, "gpt2-random --force");
    result_free(&r);
    /* Its own random model it may write again: the seed recreates it. */
    r = VKG("gpt2-random", dir, "--vocab", "300", "--embd", "8", "--heads", "2", "--ctx", "8");
    expect_ok(&r, "gpt2-random over a random model");
    result_free(&r);
}

static void test_devices(void **state) {
    (void)state;
    need_binary();
    char *cpu = out_of(VKG("devices", "--device", "cpu"), "devices --device cpu");
    assert_memory_equal(cpu, "cpu  CPU (", 10);
    assert_non_null(strstr(cpu, "vkgraph's CPU executor"));
    free(cpu);
    expect_fail(VKG("devices", "--device", "tpu"), "devices", "--device 'tpu': expected cpu, vulkan or vulkan:N");
    result all = VKG("devices");
    if (all.status != 0) { /* no Vulkan here: the CPU lines above are what can be checked */
        result_free(&all);
        return;
    }
    char *one = out_of(VKG("devices", "--device=vulkan:0"), "devices --device=vulkan:0");
    assert_memory_equal(one, "vulkan:0  ", 10);
    assert_null(strstr(one, "\nvulkan:1 ")); /* that device alone */
    assert_memory_equal(one, all.out, strlen(one)); /* the same lines as in the whole list */
    free(one);
    result_free(&all);
    expect_fail(VKG("devices", "--device", "vulkan:999"), "devices", "vulkan:999 requested but there");
}

/* A bound that only guards the arithmetic is not shown as if it were the model's. */
static void test_true_ranges(void **state) {
    (void)state;
    need_binary();
    expect_fail(VKG("attention", "-m", tiny, "--ids", "1,2", "--layer", "-1"), "attention",
                "--layer -1: must be 0 to 1 (the model has 2 layers) or all");
    expect_fail(VKG("generate", "-m", tiny, "--ids", "1", "--seed", "99999999999999999999"), "generate",
                "--seed: '99999999999999999999' is too large (at most 9223372036854775807)");
    expect_fail(VKG("gpt2-random", in_tmp("x"), "--layers", "0"), "gpt2-random",
                "--layers: '0' is not a whole number from 1 to 256");
}

/* The library reads no environment: the tool maps its VKG_* variables onto vkg_device_options,
 * refusing values it cannot read, and each one still does what it says. */
#define VKG_ENV(env, ...) run((const char *const[]){bin, __VA_ARGS__, NULL}, env)
static void test_environment(void **state) {
    (void)state;
    const char *npy = in_tmp("env.npy");
    expect_fail(VKG_ENV("VKG_MATMUL=fast", "logits", "-m", tiny, "--ids", "1,2", "-o", npy, "--device", "cpu"), "logits",
                "VKG_MATMUL=fast: use texel or tiled");
    expect_fail(VKG_ENV("VKG_TIMEOUT_MS=soon", "logits", "-m", tiny, "--ids", "1,2", "-o", npy, "--device", "cpu"),
                "logits", "VKG_TIMEOUT_MS");
    /* Steps printed as the Vulkan session is made, and both matmul shader families give the
     * same next token. */
    result steps = VKG_ENV("VKG_VULKAN_STEPS=1", "logits", "-m", tiny, "--ids", "1,2", "-o", npy, "--device", "vulkan");
    expect_ok(&steps, "logits with VKG_VULKAN_STEPS=1");
    assert_non_null(strstr(steps.err, "vkgraph: step   0 "));
    result quiet = VKG("logits", "-m", tiny, "--ids", "1,2", "-o", npy, "--device", "vulkan");
    expect_ok(&quiet, "logits on Vulkan");
    assert_null(strstr(quiet.err, "vkgraph: step"));
    result texel = VKG_ENV("VKG_MATMUL=texel", "logits", "-m", tiny, "--ids", "1,2", "-o", npy, "--device", "vulkan");
    result tiled = VKG_ENV("VKG_MATMUL=tiled", "logits", "-m", tiny, "--ids", "1,2", "-o", npy, "--device", "vulkan");
    expect_ok(&texel, "logits with VKG_MATMUL=texel");
    expect_ok(&tiled, "logits with VKG_MATMUL=tiled");
    assert_string_equal(strstr(texel.out, "most likely"), strstr(tiled.out, "most likely"));
    result_free(&steps), result_free(&quiet), result_free(&texel), result_free(&tiled);
}

/* The options main lists for several commands: a command honours each or refuses it by name,
 * never accepts it to do nothing. */
static void test_shared_options(void **state) {
    (void)state;
    need_binary();
    expect_fail(VKG("tokenize", "--tokenizer", tok_dir, "-p", "x", "--device", "cpu"), "tokenize",
                "--device does not apply to vkgraph tokenize: tokenize reads only the tokenizer files and runs no "
                "model");
    expect_fail(VKG("tokenize", "--tokenizer", tok_dir, "-p", "x", "--threads", "2"), "tokenize",
                "--threads does not apply to vkgraph tokenize");
    expect_fail(VKG("gpt2-random", in_tmp("nodevice"), "--device", "cpu"), "gpt2-random",
                "--device does not apply to vkgraph gpt2-random: gpt2-random only writes files");
    assert_int_equal(access(in_tmp("nodevice"), F_OK), -1);
    /* --profile, --trace and --group-by where no graph runs */
    expect_fail(VKG("tokenize", "--tokenizer", tok_dir, "-p", "x", "--profile"), "tokenize",
                "--profile does not apply to vkgraph tokenize: this command runs no graph, so there is no step to "
                "time");
    expect_fail(VKG("gpt2-random", in_tmp("noprofile"), "--trace", in_tmp("t.json")), "gpt2-random",
                "--trace does not apply to vkgraph gpt2-random");
    assert_int_equal(access(in_tmp("noprofile"), F_OK), -1);
    expect_fail(VKG("devices", "--group-by", "layer"), "devices", "--group-by does not apply to vkgraph devices");
    expect_fail(VKG("dump", "--example", "block", "--profile"), "dump", "--profile does not apply to vkgraph dump");
    /* ... but a prompt that reads "--profile" is a prompt */
    expect_same_output(VKG("tokenize", "--tokenizer", tok_dir, "-p", "--profile"),
                       VKG("tokenize", "--tokenizer", tok_dir, "--prompt=--profile"), "tokenize -p --profile");
    /* --threads sets the CPU executor's threads: refused on a Vulkan device, before the model loads */
    result vk = VKG("devices");
    const int has_vulkan = vk.status == 0 && strstr(vk.out, "vulkan:0") != NULL;
    result_free(&vk);
    if (has_vulkan) {
        result r = VKG("logits", "-m", tiny, "--ids", "1,2", "-o", in_tmp("threads.npy"), "--device", "vulkan",
                       "--threads", "2");
        assert_int_equal(r.status, 1);
        assert_memory_equal(r.err, "vkgraph logits: --threads 2: sets the CPU executor's threads, and the device is ",
                            strlen("vkgraph logits: --threads 2: sets the CPU executor's threads, and the device is "));
        assert_non_null(strstr(r.err, "give --device cpu to run on the CPU, or leave --threads out\n"));
        assert_null(strstr(r.err, "RANDOM")); /* the model was not loaded */
        assert_int_equal(access(in_tmp("threads.npy"), F_OK), -1);
        result_free(&r);
        /* compare: --threads is the CPU reference's, so refused only when neither side is the CPU */
        expect_fail(VKG("compare", "--example", "block", "--device", "vulkan", "--against", "vulkan", "--threads", "2"),
                    "compare", "--threads 2: sets the CPU executor's threads, and the device is ");
        r = VKG("compare", "--example", "block", "--device", "vulkan", "--threads", "2", "--quiet");
        expect_ok(&r, "compare --threads for the CPU reference");
        result_free(&r);
    }
    /* the help says which commands take which */
    char *help = out_of(VKG("--help"), "vkgraph --help");
    assert_non_null(strstr(help, "options of the commands that open a device (devices, dump, generate, chat, logits, "
                                 "attention, serve, conformance, compare, bench, lesson):\n  --device D "));
    assert_non_null(strstr(help, "options of the commands that run graphs (generate, logits, attention, conformance, "
                                 "compare, bench, lesson):\n  --profile "));
    assert_null(strstr(help, "options of every command"));
    free(help);
}

/* Flags that contradict each other are refused; a value that is not one of the names gets the
 * closest, as an unknown option does, in one line. */
static void test_contradictions_and_values(void **state) {
    (void)state;
    need_binary();
    result r = VKG("conformance", "--quick", "--full", "--device", "cpu");
    assert_int_equal(r.status, 1);
    assert_string_equal(r.err, "vkgraph conformance: --quick and --full contradict each other: give one\n");
    assert_string_equal(r.out, "");
    result_free(&r);
    expect_fail(VKG("conformance", "--full", "--quick"), "conformance", "--full and --quick contradict each other");
    r = VKG("conformance", "--op", "matmull", "--device", "cpu");
    assert_int_equal(r.status, 1);
    const char *want = "vkgraph conformance: --op 'matmull' is unknown; did you mean 'matmul'? (one of: add ";
    assert_memory_equal(r.err, want, strlen(want));
    assert_non_null(strstr(r.err, " attention block model)\n"));
    assert_ptr_equal(strchr(r.err, '\n') + 1, r.err + strlen(r.err)); /* one line, not the usage */
    assert_string_equal(r.out, "");
    result_free(&r);
    expect_fail(VKG("bench", "matmull"), "bench", "unknown benchmark 'matmull'; did you mean 'matmul'? (one of: ");
    expect_fail(VKG("dump", "--example", "block", "--format", "jsn"), "dump",
                "--format 'jsn' is unknown; did you mean 'json'? (one of: text dot json)");
    expect_fail(VKG("dump", "--example", "blok"), "dump", "--example 'blok' is unknown; did you mean 'block'?");
    r = VKG("conformance", "--op", "zzzzzz", "--device", "cpu");
    assert_int_equal(r.status, 1);
    assert_memory_equal(r.err, "vkgraph conformance: --op 'zzzzzz' is unknown (one of: add ",
                        strlen("vkgraph conformance: --op 'zzzzzz' is unknown (one of: add "));
    result_free(&r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unknown_command),
        cmocka_unit_test(test_unknown_option),
        cmocka_unit_test(test_spellings),
        cmocka_unit_test(test_ctx_size),
        cmocka_unit_test(test_gpt2_random_keeps_models),
        cmocka_unit_test(test_devices),
        cmocka_unit_test(test_true_ranges),
        cmocka_unit_test(test_environment),
        cmocka_unit_test(test_shared_options),
        cmocka_unit_test(test_contradictions_and_values),
    };
    return cmocka_run_group_tests_name("cli options", tests, setup_all, teardown);
}
