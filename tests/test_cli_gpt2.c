/* The GPT-2 commands as a user runs them: vkgraph gpt2-random, logits, generate and attention on
 * small models, their outputs checked against the golden files and against the library. */
#include "gpt2_cli_run.h"

#include <math.h>

#include "vkgraph_heatmap.h"
#include "vkgraph_npy.h"
#include "models/gpt2.h"
#include "models/model_run.h"
#include "models/sampling.h"

/* ---- logits ------------------------------------------------------------------------------------ */

static void test_logits(void **state) {
    (void)state;
    need_binary();
    result r = VKG("logits", "-m", tiny, "--ids", ids_csv, "-o", in_tmp("all.npy"), "--all", "--device", "cpu");
    expect_ok(&r, "logits --all");
    assert_non_null(strstr(r.out, "wrote"));
    assert_non_null(strstr(r.out, "[12, 512] float32"));
    result_free(&r);
    float *got = NULL, *want = NULL;
    int nd = 0;
    int64_t shape[VKG_NPY_MAX_DIMS];
    vkg_error err = {0};
    char golden[1200];
    snprintf(golden, sizeof golden, "%s/logits.npy", tiny);
    assert_int_equal(vkg_npy_read_f32(golden, &want, &nd, shape, &err), VKG_OK);
    assert_int_equal(vkg_npy_read_f32(in_tmp("all.npy"), &got, &nd, shape, &err), VKG_OK);
    assert_int_equal(nd, 2);
    assert_int_equal(shape[0], 12);
    assert_int_equal(shape[1], 512);
    assert_true(test_max_abs_diff(got, want, 12 * 512) < 1e-4);
    free(got);

    r = VKG("logits", "-m", tiny, "--ids", ids_csv, "-o", in_tmp("last.npy"), "--device", "cpu");
    expect_ok(&r, "logits");
    result_free(&r);
    assert_int_equal(vkg_npy_read_f32(in_tmp("last.npy"), &got, &nd, shape, &err), VKG_OK);
    assert_int_equal(nd, 1);
    assert_int_equal(shape[0], 512);
    assert_true(test_max_abs_diff(got, want + 11 * 512, 512) < 1e-4);
    free(got);
    free(want);
}

/* ---- generate ---------------------------------------------------------------------------------- */

/* The greedy continuation computed in-process, without a cache. */
static void greedy_ids(int32_t *seq, int np, int n) {
    vkg_gpt2 *m = NULL;
    vkg_device *cpu = NULL;
    vkg_error err = {0};
    vkg_device_options o = {.cpu_threads = 1, .quiet = 1};
    assert_int_equal(vkg_gpt2_load(tiny, &m, &err), VKG_OK);
    assert_int_equal(vkg_device_open("cpu", &o, &cpu, &err), VKG_OK);
    float logits[512];
    for (int i = 0; i < n; i++) {
        assert_int_equal(vkg_decoder_forward(&m->decoder, cpu, seq, np + i, 0, logits, VKG_NO_ATTENTION, NULL, &err), VKG_OK);
        seq[np + i] = vkg_argmax(logits, 512);
    }
    vkg_device_free(cpu);
    vkg_gpt2_free(m);
}

static void test_generate(void **state) {
    (void)state;
    need_binary();
    result r = VKG("generate", "-m", tiny, "--ids", "17,301,5", "-n", "8", "--device", "cpu");
    expect_ok(&r, "generate");
    int32_t seq[16] = {17, 301, 5};
    greedy_ids(seq, 3, 8);
    char want[256] = "";
    size_t used = 0;
    for (int i = 0; i < 11; i++) used += (size_t)snprintf(want + used, sizeof want - used, i ? ", %d" : "[%d", (int)seq[i]);
    snprintf(want + used, sizeof want - used, "]\n"); /* without a tokenizer, ids as tokenize prints them */
    assert_string_equal(r.out, want);
    assert_non_null(strstr(r.err, " 3 tokens in 1 prefill pass "));
    assert_non_null(strstr(r.err, " 7 tokens decoded, 1 per step ")); /* test_cli_generate parses these */
    assert_non_null(strstr(r.err, " 8 tokens generated: 1 from a prefill pass's logits, 7 from decode steps"));
    result_free(&r);

    /* Sampling: the same seed, the same text; another seed, other text. */
    result a = VKG("generate", "-m", tiny, "--ids", "17,301,5", "-n", "12", "--temperature", "1.5", "--top-k", "100",
                   "--seed", "7", "--device", "cpu", "--no-prompt");
    result b = VKG("generate", "-m", tiny, "--ids", "17,301,5", "-n", "12", "--temperature", "1.5", "--top-k", "100",
                   "--seed", "7", "--device", "cpu", "--no-prompt");
    result c = VKG("generate", "-m", tiny, "--ids", "17,301,5", "-n", "12", "--temperature", "1.5", "--top-k", "100",
                   "--seed", "8", "--device", "cpu", "--no-prompt");
    expect_ok(&a, "generate --seed 7");
    expect_ok(&c, "generate --seed 8");
    assert_string_equal(a.out, b.out);
    assert_string_not_equal(a.out, c.out);
    assert_non_null(strstr(a.err, "seed 7"));
    result_free(&a);
    result_free(&b);
    result_free(&c);

    /* Past the context: generation stops there and says so. */
    r = VKG("generate", "-m", tiny, "--ids", ids_csv, "-n", "100", "--device", "cpu");
    expect_ok(&r, "generate past the context");
    assert_non_null(strstr(r.err, "stopped at the end of the model's context"));
    result_free(&r);
}

/* A random model with GPT-2's vocabulary: text in, text out, and the tokenizer found beside it or,
 * when absent, the project's own (said on stderr). */
static void test_random_model_text(void **state) {
    (void)state;
    need_binary();
    char dir[1200];
    snprintf(dir, sizeof dir, "%s", in_tmp("random"));
    result r = VKG("gpt2-random", dir, "--layers", "2", "--heads", "4", "--embd", "32", "--ctx", "32", "--seed", "3");
    expect_ok(&r, "gpt2-random");
    assert_non_null(strstr(r.out, "RANDOM weights"));
    result_free(&r);
    r = VKG("generate", "-m", dir, "-p", "Hello there", "-n", "4", "--device", "cpu");
    expect_ok(&r, "generate -p");
    assert_memory_equal(r.out, "Hello there", 11);
    assert_non_null(strstr(r.err, "RANDOM weights"));
    result_free(&r);

    /* -f takes the exact bytes: the same ids as -p with the same text. */
    FILE *f = fopen(in_tmp("prompt.txt"), "wb");
    assert_non_null(f);
    fputs("Hello there", f);
    fclose(f);
    result p = VKG("generate", "-m", dir, "-f", in_tmp("prompt.txt"), "-n", "4", "--device", "cpu", "--ids-out");
    result q = VKG("generate", "-m", dir, "--ids", "15496,612", "-n", "4", "--device", "cpu", "--ids-out");
    expect_ok(&p, "generate -f");
    expect_ok(&q, "generate --ids");
    assert_string_equal(p.out, q.out);
    assert_memory_equal(p.out, "[15496, 612, ", 13);
    result_free(&p);
    result_free(&q);

    expect_fail(VKG("generate", "-m", dir, "-f", "/nonexistent/prompt.txt"), "generate", "/nonexistent/prompt.txt");

    char cmd[2600];
    snprintf(cmd, sizeof cmd, "rm '%s/encoder.json' '%s/vocab.bpe'", dir, dir);
    assert_int_equal(system(cmd), 0);
    r = VKG("logits", "-m", dir, "-p", "Hello", "-o", in_tmp("r.npy"), "--device", "cpu");
    expect_ok(&r, "logits with the project's tokenizer");
    assert_non_null(strstr(r.err, "using GPT-2's tokenizer from"));
    result_free(&r);
}

/* ---- configs as transformers writes them ------------------------------------------------------------ */

/* Replaces the first `from` in dir/config.json by `to`. */
static void edit_config(const char *dir, const char *from, const char *to) {
    char path[1300];
    snprintf(path, sizeof path, "%s/config.json", dir);
    char *text = test_read_file(path, NULL);
    char *at = strstr(text, from);
    if (!at) fail_msg("%s holds no %s", path, from);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
    fclose(f);
    free(text);
}

/* gpt2-random writes the config keys it is given; a model whose special tokens lie outside its
 * vocabulary runs with a one-line note: generation does not stop at such an eos, and an empty
 * prompt has no bos to start from. */
static void test_config_keys_and_foreign_tokens(void **state) {
    (void)state;
    need_binary();
    char dir[1200];
    snprintf(dir, sizeof dir, "%s", in_tmp("keys"));
    result r = VKG("gpt2-random", dir, "--layers", "2", "--heads", "2", "--embd", "16", "--ctx", "16", "--vocab", "53",
                   "--activation", "swish", "--inner", "40", "--unscaled-attn", "--attn-scale-by-layer");
    expect_ok(&r, "gpt2-random with config keys");
    assert_non_null(strstr(r.out, "swish"));
    result_free(&r);
    char path[1300];
    snprintf(path, sizeof path, "%s/config.json", dir);
    char *text = test_read_file(path, NULL);
    assert_non_null(strstr(text, "\"activation_function\": \"swish\""));
    assert_non_null(strstr(text, "\"n_inner\": 40"));
    assert_non_null(strstr(text, "\"scale_attn_weights\": false"));
    assert_non_null(strstr(text, "\"scale_attn_by_inverse_layer_idx\": true"));
    free(text);

    /* GPT-2's 50256 kept as both ids with a 53-token vocabulary, as tiny test models have it. */
    edit_config(dir, "\"bos_token_id\": 52", "\"bos_token_id\": 50256");
    edit_config(dir, "\"eos_token_id\": 52", "\"eos_token_id\": 50256");
    r = VKG("generate", "-m", dir, "--ids", "3,4", "-n", "20", "--device", "cpu");
    expect_ok(&r, "generate with eos outside the vocabulary");
    assert_non_null(strstr(r.err, "vkgraph generate: note: bos_token_id 50256 lies outside the vocabulary [0, 53); an "
                                  "empty prompt has no start token; eos_token_id 50256 lies outside the vocabulary "
                                  "[0, 53); generation will not stop at it\n"));
    assert_non_null(strstr(r.err, " 15 tokens generated")); /* 16 positions: 2 + 14 fed, and one more */
    assert_non_null(strstr(r.err, "stopped at the end of the model's context"));
    result_free(&r);
    expect_fail(VKG("generate", "-m", dir, "--ids", "", "--device", "cpu"), "generate", "no start token");

    /* An eos inside the vocabulary is where generation stops: make the first greedy token the eos. */
    r = VKG("generate", "-m", dir, "--ids", "3,4", "-n", "1", "--device", "cpu", "--ids-out", "--no-prompt");
    expect_ok(&r, "generate one token");
    assert_int_equal(r.out[0], '[');
    int first = atoi(r.out + 1);
    result_free(&r);
    char eos[64];
    snprintf(eos, sizeof eos, "\"eos_token_id\": %d", first);
    edit_config(dir, "\"eos_token_id\": 50256", eos);
    r = VKG("generate", "-m", dir, "--ids", "3,4", "-n", "20", "--device", "cpu");
    expect_ok(&r, "generate stopping at eos");
    assert_non_null(strstr(r.err, "stopped at the end-of-text token"));
    assert_null(strstr(r.err, "eos_token_id"));
    result_free(&r);

    expect_fail(VKG("gpt2-random", in_tmp("bad_act"), "--activation", "mish"), "gpt2-random",
                "--activation: 'mish' is not supported; use one of gelu_new");
    expect_fail(VKG("gpt2-random", in_tmp("bad_inner"), "--inner", "0"), "gpt2-random", "--inner");
}

/* ---- attention --------------------------------------------------------------------------------- */

/* A .npy of float32 with the given shape (rank nd), read whole. */
static float *read_probs(const char *path, int nd, const int64_t *want) {
    float *probs = NULL;
    int got_nd = 0;
    int64_t shape[VKG_NPY_MAX_DIMS];
    vkg_error err = {0};
    if (vkg_npy_read_f32(path, &probs, &got_nd, shape, &err) != VKG_OK) fail_msg("%s: %s", path, err.message);
    assert_int_equal(got_nd, nd);
    for (int d = 0; d < nd; d++) assert_int_equal(shape[d], want[d]);
    return probs;
}

static const char *const SENTENCE = "The animal didn't cross the street because it was too tired";
static const char *const SENTENCE_REPRS[12] = {"'The'", "' animal'", "' didn'", "\"'t\"", "' cross'", "' the'",
                                               "' street'", "' because'", "' it'", "' was'", "' too'", "' tired'"};
static const char *const SENTENCE_TOKENS[12] = {"The", " animal", " didn", "'t", " cross", " the",
                                                " street", " because", " it", " was", " too", " tired"};

/* The lesson's table for one layer, recomputed from its probabilities [4, 12, 12]: " it" is token 8. */
static size_t expected_layer_table(char *want, size_t size, int layer, const float *probs) {
    size_t used = (size_t)snprintf(want, size, "layer %d: ' it' at position 8\n", layer);
    for (int h = 0; h < 4; h++) {
        const float *row = probs + ((size_t)h * 12 + 8) * 12;
        int best = 1;
        for (int j = 2; j <= 8; j++)
            if (row[j] > row[best]) best = j;
        used += (size_t)snprintf(want + used, size - used, "head %2d: ' it' attends most to %-12s (%.2f)\n", h,
                                 SENTENCE_REPRS[best], (double)row[best]);
    }
    return used;
}

/* A PNG's width and height, from its IHDR chunk; the file must start with the PNG signature. */
static void png_size(const char *path, int *width, int *height) {
    size_t len = 0;
    unsigned char *png = (unsigned char *)test_read_file(path, &len);
    if (!png) fail_msg("%s was not written", path);
    assert_true(len > 1000);
    assert_memory_equal(png, "\x89PNG\r\n\x1a\n", 8);
    *width = (png[16] << 24) | (png[17] << 16) | (png[18] << 8) | png[19];
    *height = (png[20] << 24) | (png[21] << 16) | (png[22] << 8) | png[23];
    free(png);
}

#define RANDOM_NOTE "RANDOM WEIGHTS (written by vkgraph random or gpt2-random): what the heads attend to means nothing\n"

static void test_attention(void **state) {
    (void)state;
    need_binary();
    char dir[1200];
    snprintf(dir, sizeof dir, "%s", in_tmp("random_attn"));
    result r = VKG("gpt2-random", dir, "--layers", "2", "--heads", "4", "--embd", "32", "--ctx", "32", "--seed", "5");
    expect_ok(&r, "gpt2-random");
    result_free(&r);
    const char *sentence = SENTENCE;

    /* One layer, every head: [4, 12, 12], and the table, labelled as random and numbered twice. */
    char layer_npy[2][1200];
    for (int l = 0; l < 2; l++) {
        char name[32], index[8];
        snprintf(name, sizeof name, "layer%d.npy", l);
        snprintf(index, sizeof index, "%d", l);
        snprintf(layer_npy[l], sizeof layer_npy[l], "%s", in_tmp(name));
        r = VKG("attention", "-m", dir, "-p", sentence, "--layer", index, "--token", " it", "--npy", layer_npy[l],
                "--device", "cpu");
        expect_ok(&r, "attention --layer L");
        float *probs = read_probs(layer_npy[l], 3, (const int64_t[]){4, 12, 12});
        char want[2048];
        size_t used = (size_t)snprintf(want, sizeof want, RANDOM_NOTE "2 layers; 4 heads per layer\n");
        expected_layer_table(want + used, sizeof want - used, l, probs);
        assert_string_equal(r.out, want);
        char said[128];
        snprintf(said, sizeof said, "vkgraph attention: layer %d, token ' it' at position 8 of 12", l);
        assert_non_null(strstr(r.err, said));
        result_free(&r);
        free(probs);
    }

    /* One head: [12, 12], that head of the layer; the PNG is one heatmap with the random label. */
    r = VKG("attention", "-m", dir, "-p", sentence, "--layer", "1", "--token", " it", "--head", "2", "--png",
            in_tmp("a.png"), "--npy", in_tmp("a.npy"), "--device", "cpu");
    expect_ok(&r, "attention --head 2");
    float *one = read_probs(in_tmp("a.npy"), 2, (const int64_t[]){12, 12});
    float *layer1 = read_probs(layer_npy[1], 3, (const int64_t[]){4, 12, 12});
    assert_memory_equal(one, layer1 + 2 * 144, 144 * sizeof *one);
    assert_non_null(strstr(r.err, "heatmap of layer 1, head 2 (RANDOM WEIGHTS) written to "));
    int w = 0, h = 0;
    png_size(in_tmp("a.png"), &w, &h);
    vkg_heatmap_layout l;
    vkg_error err = {0};
    assert_int_equal(vkg_heatmap_measure(12, SENTENCE_TOKENS, "GPT-2 layer 1, head 2 \xe2\x80\x94 RANDOM "
                                         "WEIGHTS: this pattern means nothing", &l, &err), VKG_OK);
    assert_int_equal(w, l.width);
    assert_int_equal(h, l.height);
    result_free(&r);
    free(one);

    /* Every layer from one pass: [2, 4, 12, 12] equal to the per-layer runs, each query row summing
     * to 1 over the keys; a table per layer; a grid of the 4 heads per layer, named by the index. */
    r = VKG("attention", "-m", dir, "-p", sentence, "--layer", "all", "--head", "all", "--token", " it", "--png",
            in_tmp("grid.png"), "--npy", in_tmp("all.npy"), "--device", "cpu");
    expect_ok(&r, "attention --layer all");
    float *all = read_probs(in_tmp("all.npy"), 4, (const int64_t[]){2, 4, 12, 12});
    float *layer0 = read_probs(layer_npy[0], 3, (const int64_t[]){4, 12, 12});
    for (int i = 0; i < 4 * 144; i++) {
        assert_true(fabsf(all[i] - layer0[i]) < 1e-6f);
        assert_true(fabsf(all[4 * 144 + i] - layer1[i]) < 1e-6f);
    }
    for (int row = 0; row < 2 * 4 * 12; row++) {
        double sum = 0;
        for (int j = 0; j < 12; j++) sum += all[row * 12 + j];
        assert_true(fabs(sum - 1.0) < 1e-5);
    }
    char want[4096];
    size_t used = (size_t)snprintf(want, sizeof want, RANDOM_NOTE "2 layers; 4 heads per layer\n");
    used += expected_layer_table(want + used, sizeof want - used, 0, all);
    used += (size_t)snprintf(want + used, sizeof want - used, "\n");
    expected_layer_table(want + used, sizeof want - used, 1, all + 4 * 144);
    assert_string_equal(r.out, want);
    assert_non_null(strstr(r.err, "vkgraph attention: every layer, token ' it' at position 8 of 12"));
    assert_non_null(strstr(r.err, "probabilities [2, 4, 12, 12] (layers, heads, query, key) written to "));
    for (int k = 0; k < 2; k++) {
        char name[64], said[1400], title[160];
        snprintf(name, sizeof name, "grid-layer%d.png", k);
        snprintf(said, sizeof said, "heatmap of layer %d, every head (RANDOM WEIGHTS) written to %s\n",
                 k, in_tmp(name));
        assert_non_null(strstr(r.err, said));
        snprintf(title, sizeof title, "GPT-2 layer %d, every head \xe2\x80\x94 RANDOM WEIGHTS: these "
                 "patterns mean nothing", k);
        assert_int_equal(vkg_heatmap_grid_measure(4, 12, SENTENCE_TOKENS, title, &l, &err), VKG_OK);
        assert_int_equal(l.cols, 2);
        png_size(in_tmp(name), &w, &h);
        assert_int_equal(w, l.width);
        assert_int_equal(h, l.height);
    }
    assert_int_equal(access(in_tmp("grid.png"), F_OK), -1);
    result_free(&r);
    free(all);
    free(layer0);
    free(layer1);

    /* --position and the default (the last token). */
    r = VKG("attention", "-m", dir, "-p", sentence, "--layer", "0", "--position", "3", "--device", "cpu");
    expect_ok(&r, "attention --position");
    assert_non_null(strstr(r.out, "layer 0: \"'t\" at position 3\nhead  0: \"'t\" attends most to "));
    result_free(&r);
    r = VKG("attention", "-m", dir, "-p", sentence, "--layer", "0", "--device", "cpu");
    expect_ok(&r, "attention, last token");
    assert_non_null(strstr(r.out, "head  3: ' tired' attends most to "));
    result_free(&r);

    /* Errors name the true ranges, and the file names must say the format written. */
    expect_fail(VKG("attention", "-m", dir, "-p", sentence, "--device", "cpu"), "attention", "--layer L (its index, "
                "from 0) or --layer all");
    expect_fail(VKG("attention", "-m", dir, "-p", sentence, "--layer", "-1"), "attention",
                "--layer -1: must be 0 to 1 (the model has 2 layers) or all\n");
    expect_fail(VKG("attention", "-m", dir, "-p", sentence, "--layer", "2"), "attention",
                "--layer 2: must be 0 to 1 (the model has 2 layers) or all\n");
    expect_fail(VKG("attention", "-m", dir, "-p", sentence, "--layer", "x1"), "attention", "must be 0 to 1");
    expect_fail(VKG("attention", "-m", dir, "-p", sentence, "--layer", "1", "--head", "4"), "attention",
                "--head 4: must be 0 to 3 (the model has 4 heads) or all\n");
    expect_fail(VKG("attention", "-m", dir, "-p", sentence, "--layer", "1", "--token", " zebra"), "attention",
                "no token of the prompt decodes to \" zebra\"");
    expect_fail(VKG("attention", "-m", dir, "-p", sentence, "--layer", "1", "--position", "12"), "attention",
                "--position 12: must be 0 to 11 (the prompt has 12 tokens)\n");
    expect_fail(VKG("attention", "-m", dir, "-p", sentence, "--layer", "1", "--position", "all"), "attention",
                "--position all: must be 0 to 11 (the prompt has 12 tokens)\n");
    expect_fail(VKG("attention", "-m", dir, "-p", sentence, "--layer", "1", "--png", in_tmp("x.jpg")), "attention",
                "x.jpg: writes PNG; name the file .png\n");
    expect_fail(VKG("attention", "-m", dir, "-p", sentence, "--layer", "1", "--npy", in_tmp("x.txt")), "attention",
                "x.txt: writes NumPy .npy; name the file .npy\n");
    assert_int_equal(access(in_tmp("x.jpg"), F_OK), -1);
    expect_fail(VKG("lesson", "--png", in_tmp("x.jpg"), "1"), "lesson", "x.jpg: writes PNG; name the file .png\n");
}

/* ---- dump ---------------------------------------------------------------------------------------- */

/* The GPT-2 graph and plan as vkgraph dump prints them: the decode plan writes the cache through
 * a runtime index, and the planner's arena beats the naive sum. */
static void test_dump_model(void **state) {
    (void)state;
    need_binary();
    result r = VKG("dump", "-m", tiny, "--plan", "--decode");
    expect_ok(&r, "dump --plan --decode");
    unsigned long long arena = 0, naive = 0;
    assert_int_equal(sscanf(r.out, "memory: arena %llu bytes (naive %llu", &arena, &naive), 2);
    assert_true(arena > 0 && arena < naive);
    assert_non_null(strstr(r.out, "write_at"));
    assert_non_null(strstr(r.out, "attention+scale+causal"));
    assert_non_null(strstr(r.out, "indices+"));
    result_free(&r);
    r = VKG("dump", "-m", tiny, "--seq", "5", "--format", "json");
    expect_ok(&r, "dump --format json");
    assert_true(r.out[0] == '{');
    assert_non_null(strstr(r.out, "\"op\": \"embedding\""));
    assert_non_null(strstr(r.out, "\"name\": \"h.1.attn.softmax\", \"layer\": 1"));
    result_free(&r);
}

/* Steps named by the node they compute, --layers, and the plan DOT with a cluster per layer. */
static void test_dump_names_and_layers(void **state) {
    (void)state;
    need_binary();
    result r = VKG("dump", "-m", tiny, "--plan");
    expect_ok(&r, "dump --plan");
    /* the probabilities are no output: fused attention, named by the product it computes */
    const char *line = strstr(r.out, "  attention+scale+causal  h.1.attn.heads   [4, 10, 8]");
    assert_non_null(line);
    assert_non_null(strstr(r.out, "  matmul+bias+gelu        h.0.mlp.act "));
    result_free(&r);

    r = VKG("dump", "-m", tiny, "--plan", "--decode", "--layers", "1:2");
    expect_ok(&r, "dump --plan --decode --layers 1:2");
    assert_non_null(strstr(r.out, "steps (| = barrier before the step, * = in place): 10 of 21, layer 1 of 2 "
                                  "with the head:"));
    assert_non_null(strstr(r.out, "  h.1.attn.kv_cache.write  "));
    assert_null(strstr(r.out, "h.0."));
    result_free(&r);

    r = VKG("dump", "-m", tiny, "--layers", "0");
    expect_ok(&r, "dump --layers 0");
    assert_non_null(strstr(r.out, " embed.sum "));
    assert_non_null(strstr(r.out, " h.0.residual_2 "));
    assert_null(strstr(r.out, "h.1."));
    result_free(&r);

    r = VKG("dump", "-m", tiny, "--plan", "--format", "dot");
    expect_ok(&r, "dump --plan --format dot");
    assert_non_null(strstr(r.out, "subgraph cluster_layer0 {"));
    assert_non_null(strstr(r.out, "subgraph cluster_layer1 {"));
    assert_non_null(strstr(r.out, "\\nh.1.attn.heads\\n"));
    result_free(&r);

    expect_fail(VKG("dump", "-m", tiny, "--layers", "1:3"), "dump",
                "--layers 1:3: the model has 2 layers, indices 0 to 1; A:B takes layers A to B-1, so 0 <= A < B <= 2");
    expect_fail(VKG("dump", "-m", tiny, "--layers", "1:1"), "dump", "so 0 <= A < B <= 2");
    expect_fail(VKG("dump", "-m", tiny, "--layers", "2"), "dump", "indices 0 to 1");
    expect_fail(VKG("dump", "-m", tiny, "--layers", "one"), "dump", "expected A:B (layers A to B-1), A:, :B or A");
    expect_fail(VKG("dump", "-m", tiny, "--layers", ""), "dump", "expected A:B");
    expect_fail(VKG("dump", "--example", "block", "--decode"), "dump", "--decode needs -m DIR");
    expect_fail(VKG("dump", "--example", "block", "--layers", "0:1"), "dump", "--layers needs -m DIR");
    expect_fail(VKG("dump", "-m", tiny, "--batch", "2"), "dump", "--batch is for --example block");
    expect_fail(VKG("dump", "-m", tiny, "--causal"), "dump", "--causal is for --example block");
    expect_fail(VKG("dump", "-m", tiny, "--decode", "--seq", "3"), "dump", "the decode step takes one token");
    expect_fail(VKG("dump", "-m", tiny, "--seq", "33"), "dump", "1 to 32");
}

/* ---- compare ------------------------------------------------------------------------------------- */

/* vkgraph compare: the default device against the CPU, step by step, on the tiny model and the
 * lesson block; every step within its threshold (exit 0); a table line per step. */
static void test_compare(void **state) {
    (void)state;
    need_binary();
    result r = VKG("compare", "-m", tiny, "--ids", ids_csv);
    expect_ok(&r, "compare -m");
    assert_non_null(strstr(r.out, "GPT-2 forward pass over 12 tokens"));
    assert_non_null(test_line_with(r.out, "all "));
    assert_non_null(strstr(r.out, "steps within their thresholds"));
    assert_non_null(strstr(r.out, "attention+scale+causal"));
    assert_null(strstr(r.out, "FAIL"));
    assert_non_null(strstr(r.out, "drift nmse"));
    assert_non_null(test_line_with(r.out, "drift (running freely): largest nmse"));
    result_free(&r);
    /* one decode step over a cache its own prefill filled on each device */
    r = VKG("compare", "-m", tiny, "--ids", ids_csv, "--decode");
    expect_ok(&r, "compare --decode");
    assert_non_null(strstr(r.out, "GPT-2 decode step at position 11 over a KV cache of 12 positions (11 prefilled)"));
    assert_non_null(strstr(r.out, "h.0.attn.kv_cache.write"));
    assert_non_null(test_line_with(r.out, "all 21 steps within their thresholds on their own inputs"));
    assert_null(strstr(r.out, "FAIL"));
    result_free(&r);
    /* a batched decode step: 4 sequences of 11, 8, 5 and 2 tokens, each prefilled into its own
     * slot, their next tokens the rows of one step; 2 layers of 4 rows: one cache write and one
     * attention step a layer for the 4 rows, each at its own position (no concat steps) */
    r = VKG("compare", "-m", tiny, "--ids", ids_csv, "--decode", "--batch", "4");
    expect_ok(&r, "compare --decode --batch 4");
    assert_non_null(strstr(r.out, "GPT-2 batched decode step of 4 sequences over KV caches of 12 positions: rows at "
                                  "positions 11 down to 2, 3 apart"));
    assert_non_null(test_line_with(r.out, "all 21 steps within their thresholds on their own inputs"));
    assert_null(strstr(r.out, "FAIL"));
    assert_null(strstr(r.out, "concat"));
    int writes = 0;
    for (const char *p = r.out; (p = strstr(p, "h.1.attn.kv_cache.write")); p++) writes++;
    assert_int_equal(writes, 1);
    result_free(&r);
    /* as many sequences as the prompt allows: 11, at positions 11 down to 1 */
    r = VKG("compare", "-m", tiny, "--ids", ids_csv, "--decode", "--batch", "11", "-q");
    expect_ok(&r, "compare --decode --batch 11");
    assert_non_null(strstr(r.out, "rows at positions 11 down to 1, 1 apart"));
    assert_non_null(test_line_with(r.out, "all "));
    result_free(&r);
    r = VKG("compare", "--example", "block", "--quiet");
    expect_ok(&r, "compare --example block");
    assert_non_null(test_line_with(r.out, "all 9 steps within their thresholds"));
    result_free(&r);
    r = VKG("compare", "--example", "block", "--device", "cpu", "--against", "cpu");
    expect_ok(&r, "compare cpu against cpu");
    assert_non_null(strstr(r.err, "both sides run on the CPU executor"));
    result_free(&r);
    expect_fail(VKG("compare"), "compare", "say what to compare");
    expect_fail(VKG("compare", "--example", "tower"), "compare", "unknown example 'tower'");
    expect_fail(VKG("compare", "--example", "block", "--ids", "1,2"), "compare", "takes no prompt");
    expect_fail(VKG("compare", "-m", tiny), "compare", NULL);
    expect_fail(VKG("compare", "-m", tiny, "--ids", "5", "--decode"), "compare", "--decode needs at least 2 tokens");
    expect_fail(VKG("compare", "--example", "block", "--decode"), "compare", "--decode is for -m DIR");
    expect_fail(VKG("compare", "-m", tiny, "--ids", ids_csv, "--decode", "--batch", "1"), "compare",
                "--batch: '1' is not a whole number from 2 to 64");
    expect_fail(VKG("compare", "-m", tiny, "--ids", ids_csv, "--decode", "--batch", "65"), "compare",
                "--batch: '65' is not a whole number from 2 to 64");
    expect_fail(VKG("compare", "-m", tiny, "--ids", ids_csv, "--decode", "--batch", "12"), "compare",
                "--batch 12 needs a prompt of at least 13 tokens (each of the 12 sequences prefills at least one "
                "before the token it decodes); this one has 12");
    expect_fail(VKG("compare", "-m", tiny, "--ids", ids_csv, "--batch", "2"), "compare", "--batch 2 needs --decode");
    expect_fail(VKG("compare", "-m", tiny, "--ids", ids_csv, "--decode", "--batch"), "compare", NULL);
    expect_fail(VKG("compare", "--example", "block", "--against", "vulkan:99"), "compare", NULL);
}

/* One numbering, from 0, in what is printed, drawn and named: --layer all writes one picture per
 * layer with the index zero-padded to the last one's width (so that the names sort), and lesson 7's
 * default picture is named for the layer and head it shows, on a model smaller than GPT-2 too. */
static void test_file_names(void **state) {
    (void)state;
    need_binary();
    char twelve[1200], six[1200], stem[1300], name[1400];
    snprintf(twelve, sizeof twelve, "%s", in_tmp("twelve"));
    result r = VKG("gpt2-random", twelve, "--layers", "12", "--heads", "2", "--embd", "8", "--ctx", "16");
    expect_ok(&r, "gpt2-random 12 layers");
    result_free(&r);
    snprintf(stem, sizeof stem, "%s/a.png", twelve);
    r = VKG("attention", "-m", twelve, "--ids", "1,2,3", "--layer", "all", "--head", "1", "--png", stem, "--device",
            "cpu");
    expect_ok(&r, "attention --layer all --png");
    for (int l = 0; l < 12; l++) {
        snprintf(name, sizeof name, "%s/a-layer%02d.png", twelve, l);
        if (access(name, F_OK) != 0) fail_msg("%s was not written; stderr: %s", name, r.err);
        char said[1500];
        snprintf(said, sizeof said, "heatmap of layer %d, head 1 (RANDOM WEIGHTS) written to %s\n", l, name);
        assert_non_null(strstr(r.err, said));
    }
    snprintf(name, sizeof name, "%s/a-layer0.png", twelve);
    assert_int_equal(access(name, F_OK), -1);
    assert_int_equal(access(stem, F_OK), -1);
    result_free(&r);

    /* 6 layers of 2 heads: the lesson's layer 4 exists, its head 3 does not: head 1 is shown, and
     * the file says so */
    snprintf(six, sizeof six, "%s", in_tmp("six"));
    r = VKG("gpt2-random", six, "--layers", "6", "--heads", "2", "--embd", "8", "--ctx", "16");
    expect_ok(&r, "gpt2-random 6 layers");
    result_free(&r);
    char line[4000];
    snprintf(line, sizeof line, "cd '%s' && exec '%s' lesson -m '%s' 7 --device cpu", six, bin, six);
    r = run((const char *const[]){"/bin/sh", "-c", line, NULL}, NULL);
    expect_ok(&r, "lesson 7 on 6 layers of 2 heads");
    assert_non_null(strstr(r.out, "\", layer 4:\n"));
    assert_non_null(strstr(r.out, "heatmap of layer 4, head 1 (RANDOM WEIGHTS): lesson-gpt2-layer4-head1.png\n"));
    assert_null(strstr(r.out, "index"));
    snprintf(name, sizeof name, "%s/lesson-gpt2-layer4-head1.png", six);
    png_size(name, &(int){0}, &(int){0});
    snprintf(name, sizeof name, "%s/lesson-gpt2-layer4-head3.png", six);
    assert_int_equal(access(name, F_OK), -1);
    result_free(&r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_file_names),
        cmocka_unit_test(test_logits),
        cmocka_unit_test(test_generate),
        cmocka_unit_test(test_random_model_text),
        cmocka_unit_test(test_config_keys_and_foreign_tokens),
        cmocka_unit_test(test_attention),
        cmocka_unit_test(test_dump_model),
        cmocka_unit_test(test_dump_names_and_layers),
        cmocka_unit_test(test_compare),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
