/* The Llama family at small sizes, fast enough for the sanitizer leg: config.json read and refused
 * as transformers' config classes would have it, hostile shard indexes refused, tensors the
 * config leaves unread refused (older files' rotary buffers and a tied head's copy passed over), and each
 * architecture (llama with llama3 rope scaling, mistral, qwen2 with biases, qwen3 with q/k norms;
 * grouped-query attention; head_dim wider than the width over the heads; tied and untied heads;
 * F32, F16, BF16; one file and shards) against the
 * independent float64 NumPy reference (tools/llama_reference.py) on the CPU executor and on
 * Vulkan, all positions, NMSE <= 1e-6 and the same argmax; then prefill and decode through the KV
 * cache against the same rows.  The full-scale cases are in test_llama_scale.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "models/checkpoint.h"
#include "models/llama.h"
#include "models/llama_random.h"
#include "models/model_run.h"
#include "models/sampling.h"
#include "support/test_util.h"
#include "support/vk_test.h"
#include "vkgraph_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define NMSE_MAX 1e-6
#define T 96

static char *root;
static vkg_device *cpu;

static int setup(void **state) {
    (void)state;
    root = test_tmpdir("llama");
    return (cpu = test_open_cpu()) ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    vkg_device_free(cpu);
    assert_int_equal(test_remove_tree(root), 0);
    free(root);
    return 0;
}

static char *path_in(const char *name) {
    char *p = malloc(strlen(root) + strlen(name) + 2);
    assert_non_null(p);
    sprintf(p, "%s/%s", root, name);
    return p;
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
}

/* ---- config.json ------------------------------------------------------------------------- */

static vkg_status load_config(const char *json, vkg_llama_config *c, vkg_error *err) {
    char *p = path_in("config.json");
    write_text(p, json);
    vkg_status st = vkg_llama_config_load(p, c, err);
    free(p);
    return st;
}

#define BASE "\"hidden_size\": 64, \"intermediate_size\": 96, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, " \
             "\"vocab_size\": 128"

static void test_config_defaults(void **state) {
    (void)state;
    vkg_llama_config c;
    vkg_error err = {0};
    /* LlamaConfig: no num_key_value_heads means one per query head; head_dim = 64 / 4 */
    assert_int_equal(load_config("{\"model_type\": \"llama\", " BASE "}", &c, &err), VKG_OK);
    assert_int_equal(c.arch, VKG_LLAMA_ARCH_LLAMA);
    assert_int_equal(c.n_kv_head, 4);
    assert_int_equal(c.head_dim, 16);
    assert_int_equal(c.n_positions, 2048);
    assert_int_equal(c.tie_word_embeddings, 0);
    assert_true(c.rms_norm_eps == 1e-6);
    assert_true(c.rope.theta == 10000.0);
    assert_int_equal(c.bos_token_id, 1);
    /* MistralConfig: 8 key/value heads by default; a null is one per query head */
    assert_int_equal(load_config("{\"model_type\": \"mistral\", \"hidden_size\": 64, \"intermediate_size\": 96, "
                                 "\"num_hidden_layers\": 2, \"num_attention_heads\": 8, \"vocab_size\": 128}", &c, &err),
                     VKG_OK);
    assert_int_equal(c.n_kv_head, 8);
    assert_int_equal(c.sliding_window, 4096);
    assert_int_equal(c.windowed[0], 1);
    assert_int_equal(load_config("{\"model_type\": \"mistral\", \"num_key_value_heads\": null, " BASE "}", &c, &err),
                     VKG_OK);
    assert_int_equal(c.n_kv_head, 4);
    /* Qwen2: q/k/v biases, no window unless use_sliding_window; Qwen3: head_dim 128, q/k norms */
    assert_int_equal(load_config("{\"architectures\": [\"Qwen2ForCausalLM\"], \"sliding_window\": 16, " BASE "}", &c,
                                 &err), VKG_OK);
    assert_int_equal(c.arch, VKG_LLAMA_ARCH_QWEN2);
    assert_int_equal(c.qkv_bias, 1);
    assert_int_equal(c.o_bias, 0);
    assert_int_equal(c.sliding_window, 0);
    assert_int_equal(load_config("{\"model_type\": \"qwen2\", \"use_sliding_window\": true, \"sliding_window\": 16, "
                                 "\"max_window_layers\": 1, " BASE "}", &c, &err), VKG_OK);
    assert_int_equal(c.windowed[0], 0);
    assert_int_equal(c.windowed[1], 1);
    assert_int_equal(load_config("{\"model_type\": \"qwen3\", " BASE "}", &c, &err), VKG_OK);
    assert_int_equal(c.head_dim, 128);
    assert_int_equal(c.qk_norm, 1);
    assert_int_equal(c.bos_token_id, VKG_NO_TOKEN);
    /* Llama 3's list of eos ids: the first is the model's eos (generation stops at all of them) */
    assert_int_equal(load_config("{\"model_type\": \"llama\", \"eos_token_id\": [5, 6, 7], \"attention_bias\": true, "
                                 BASE "}", &c, &err), VKG_OK);
    assert_int_equal(c.eos_token_id, 5);
    assert_int_equal(c.qkv_bias, 1);
    assert_int_equal(c.o_bias, 1);
    assert_string_equal(c.note, "");
    /* an id outside the vocabulary is dropped with a note naming it */
    assert_int_equal(load_config("{\"model_type\": \"llama\", \"eos_token_id\": [999999, 6], " BASE "}", &c, &err),
                     VKG_OK);
    assert_int_equal(c.eos_token_id, 6);
    assert_non_null(strstr(c.note, "eos_token_id 999999 lies outside the vocabulary"));
    /* llama3 scaling read whole, under the older key "type" too */
    assert_int_equal(load_config("{\"model_type\": \"llama\", \"rope_scaling\": {\"type\": \"llama3\", \"factor\": 32, "
                                 "\"low_freq_factor\": 1, \"high_freq_factor\": 4, "
                                 "\"original_max_position_embeddings\": 8192}, " BASE "}", &c, &err), VKG_OK);
    assert_int_equal(c.rope.type, VKG_ROPE_LLAMA3);
    assert_int_equal(c.rope.original_max_position_embeddings, 8192);
    /* yarn as Qwen's model cards have it added; null where transformers takes its defaults */
    assert_int_equal(load_config("{\"model_type\": \"qwen2\", \"rope_scaling\": {\"type\": \"yarn\", \"factor\": 4.0, "
                                 "\"original_max_position_embeddings\": 32768, \"beta_fast\": null}, " BASE "}", &c, &err),
                     VKG_OK);
    assert_int_equal(c.rope.type, VKG_ROPE_YARN);
    assert_true(c.rope.factor == 4.0 && c.rope.original_max_position_embeddings == 32768.0);
    assert_true(c.rope.beta_fast == 0.0 && c.rope.attention_factor == 0.0 && !c.rope.no_truncate);
    /* no factor: the context over the original length; no original length: the context */
    assert_int_equal(load_config("{\"model_type\": \"qwen3\", \"max_position_embeddings\": 131072, \"rope_scaling\": "
                                 "{\"rope_type\": \"yarn\", \"original_max_position_embeddings\": 32768, \"truncate\": false}, "
                                 BASE "}", &c, &err), VKG_OK);
    assert_true(c.rope.factor == 4.0 && c.rope.no_truncate);
    assert_int_equal(load_config("{\"model_type\": \"qwen3\", \"max_position_embeddings\": 4096, \"rope_scaling\": "
                                 "{\"rope_type\": \"yarn\", \"factor\": 2}, " BASE "}", &c, &err), VKG_OK);
    assert_true(c.rope.original_max_position_embeddings == 4096.0);
    /* newer files: rope_parameters holds the theta and the scaling, dtype names the dtype */
    assert_int_equal(load_config("{\"model_type\": \"qwen3\", \"dtype\": \"bfloat16\", \"rope_parameters\": "
                                 "{\"rope_type\": \"linear\", \"factor\": 2, \"rope_theta\": 5000}, " BASE "}", &c,
                                 &err), VKG_OK);
    assert_int_equal(c.rope.type, VKG_ROPE_LINEAR);
    assert_true(c.rope.theta == 5000.0 && c.rope.factor == 2.0);
    assert_string_equal(c.torch_dtype, "bfloat16");
}

static void expect_refused(const char *json, vkg_status want, const char *words) {
    vkg_llama_config c;
    vkg_error err = {0};
    vkg_status st = load_config(json, &c, &err);
    if (st != want || !strstr(err.message, words))
        fail_msg("%s: status %d, message \"%s\"; expected %d with \"%s\"", json, st, err.message, want, words);
}

static void test_config_refused(void **state) {
    (void)state;
    expect_refused("{\"model_type\": \"llama\", \"hidden_act\": \"gelu\", " BASE "}", VKG_ERR_UNSUPPORTED,
                   "hidden_act \"gelu\" is not supported (supported: silu)");
    expect_refused("{\"model_type\": \"llama\", \"rope_scaling\": {\"rope_type\": \"su\", \"factor\": 2}, " BASE "}",
                   VKG_ERR_UNSUPPORTED, "rope_scaling type 'su' is not supported");
    expect_refused("{\"model_type\": \"qwen2\", \"rope_scaling\": {\"type\": \"longrope\", \"factor\": 4}, " BASE "}",
                   VKG_ERR_UNSUPPORTED, "'longrope'");
    expect_refused("{\"model_type\": \"llama\", \"rope_scaling\": {\"type\": \"dynamic\"}, " BASE "}", VKG_ERR_FORMAT,
                   "factor");
    expect_refused("{\"model_type\": \"qwen2\", \"rope_scaling\": {\"type\": \"yarn\", \"factor\": 4, \"truncate\": 0}, "
                   BASE "}", VKG_ERR_FORMAT, "truncate");
    expect_refused("{\"model_type\": \"llama\", \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8}, " BASE "}",
                   VKG_ERR_FORMAT, "needs low_freq_factor");
    expect_refused("{\"model_type\": \"llama\", \"rope_scaling\": {\"rope_type\": \"linear\"}, " BASE "}",
                   VKG_ERR_FORMAT, "has no \"factor\"");
    expect_refused("{\"model_type\": \"llama\", \"partial_rotary_factor\": 0.5, " BASE "}", VKG_ERR_UNSUPPORTED,
                   "partial_rotary_factor");
    expect_refused("{\"model_type\": \"llama\", \"num_key_value_heads\": 3, " BASE "}", VKG_ERR_FORMAT,
                   "not a multiple of num_key_value_heads 3");
    expect_refused("{\"model_type\": \"llama\", \"head_dim\": 15, " BASE "}", VKG_ERR_FORMAT, "head_dim 15 is odd");
    expect_refused("{\"model_type\": \"llama\", \"rms_norm_eps\": -1, " BASE "}", VKG_ERR_FORMAT, "rms_norm_eps");
    expect_refused("{\"model_type\": \"llama\", \"num_hidden_layers\": 1e9, " BASE "}", VKG_ERR_FORMAT,
                   "num_hidden_layers");
    expect_refused("{\"model_type\": \"qwen2\", \"use_sliding_window\": true, \"layer_types\": [\"x\", \"y\"], " BASE "}",
                   VKG_ERR_UNSUPPORTED, "layer_types[0]");
    expect_refused("{\"model_type\": \"llama\", \"num_key_value_heads\": \"many\", " BASE "}", VKG_ERR_FORMAT,
                   "\"num_key_value_heads\" must be an integer");
}

/* An architecture that is not supported is refused by vkg_model_open, naming those that are. */
static void test_unknown_architecture(void **state) {
    (void)state;
    char *dir = path_in("bert");
    char *cfg = path_in("bert/config.json");
    assert_int_equal(mkdir(dir, 0777), 0);
    write_text(cfg, "{\"model_type\": \"bert\", \"architectures\": [\"BertForMaskedLM\"]}");
    vkg_model *m = NULL;
    vkg_error err = {0};
    assert_int_equal(vkg_model_open(dir, NULL, NULL, &m, &err), VKG_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.message, "architecture \"bert\" is not supported"));
    assert_non_null(strstr(err.message, "qwen3 (Qwen3ForCausalLM)"));
    assert_null(m);
    /* a rotary table too large for memory is refused before anything is allocated */
    write_text(cfg, "{\"model_type\": \"llama\", \"max_position_embeddings\": 4194304, \"head_dim\": 1024, "
                    BASE "}");
    assert_int_equal(vkg_model_open(dir, NULL, NULL, &m, &err), VKG_ERR_OUT_OF_MEMORY);
    assert_non_null(strstr(err.message, "the rotary table for max_position_embeddings 4194304"));
    free(cfg);
    free(dir);
}

/* ---- the rotary table ------------------------------------------------------------------- */

/* The model's table is rope.h's for its config: llama3 scaling keeps the high frequencies,
 * divides the low ones by factor and blends between (Llama 3.2 1B's numbers). */
static void test_rope_table_of_model(void **state) {
    (void)state;
    char *dir = path_in("rope");
    vkg_llama_random_options o;
    memset(&o, 0, sizeof o);
    vkg_error err = {0};
    assert_int_equal(vkg_llama_random_shape("llama-tiny", &o, &err), VKG_OK);
    o.config.head_dim = 64, o.config.n_head = 4, o.config.hidden_size = 256, o.config.n_positions = 64;
    o.config.rope = (vkg_rope_config){.type = VKG_ROPE_LLAMA3, .theta = 500000, .factor = 32, .low_freq_factor = 1,
                                      .high_freq_factor = 4, .original_max_position_embeddings = 8192};
    o.dtype = VKG_ST_F32;
    if (vkg_llama_write_random(dir, &o, &err) != VKG_OK) fail_msg("%s", err.message);
    vkg_llama *m = NULL;
    if (vkg_llama_load(dir, -1, NULL, &m, &err) != VKG_OK) fail_msg("%s", err.message);
    assert_int_equal(m->config.rope.type, VKG_ROPE_LLAMA3);
    const float *row = m->rope + 1 * 64; /* position 1: cos(inv_freq[i]), then sin */
    assert_true(m->rope[0] == 1.0f && m->rope[32] == 0.0f); /* position 0 */
    assert_true(fabsf(row[0] - (float)cos(1.0)) < 1e-7f);  /* i = 0: wavelength 2 pi, kept */
    const double lowest = 1.0 / pow(500000.0, 62.0 / 64.0) / 32.0; /* wavelength > 8192: / 32 */
    assert_true(fabsf(row[32 + 31] - (float)sin(lowest)) < 1e-9f);
    vkg_llama_free(m);
    free(dir);
}

/* ---- checkpoints: hostile shard indexes, tensors left unread -------------------------- */

/* s with its first `from` replaced by `to` (the caller frees it). */
static char *replace(const char *s, const char *from, const char *to) {
    const char *at = strstr(s, from);
    assert_non_null(at);
    char *out = malloc(strlen(s) + strlen(to) + 1);
    assert_non_null(out);
    sprintf(out, "%.*s%s%s", (int)(at - s), s, to, at + strlen(from));
    return out;
}

/* A tiny Llama written with o adjusted by `adjust`, its config.json then edited (the first `from`
 * replaced by `to`, when given): the folder (the caller frees it). */
static char *edited_model(const char *name, void (*adjust)(vkg_llama_random_options *), const char *from,
                          const char *to) {
    char *dir = path_in(name);
    vkg_llama_random_options o;
    memset(&o, 0, sizeof o);
    vkg_error err = {0};
    assert_int_equal(vkg_llama_random_shape("llama-tiny", &o, &err), VKG_OK);
    o.dtype = VKG_ST_F32;
    o.seed = 3;
    adjust(&o);
    if (vkg_llama_write_random(dir, &o, &err) != VKG_OK) fail_msg("%s", err.message);
    if (from) {
        char *config = malloc(strlen(dir) + 16);
        assert_non_null(config);
        sprintf(config, "%s/config.json", dir);
        char *text = test_read_file(config, NULL), *edited = replace(text, from, to);
        write_text(config, edited);
        free(edited);
        free(text);
        free(config);
    }
    return dir;
}
static void two_shards(vkg_llama_random_options *o) { o->shards = 2; }

static void expect_index_refused(const char *dir, const char *index, const char *words) {
    char *p = malloc(strlen(dir) + 64);
    assert_non_null(p);
    sprintf(p, "%s/%s", dir, VKG_CHECKPOINT_INDEX);
    if (index) write_text(p, index);
    vkg_llama *m = NULL;
    vkg_error err = {0};
    vkg_status st = vkg_llama_load(dir, -1, NULL, &m, &err);
    if (st == VKG_OK || !strstr(err.message, words))
        fail_msg("index %s: status %d, \"%s\"; expected an error with \"%s\"", index ? index : "(as written)", st,
                 err.message, words);
    assert_null(m);
    free(p);
}

static void test_hostile_index(void **state) {
    (void)state;
    char *dir = edited_model("shards", two_shards, NULL, NULL);
    vkg_llama *m = NULL;
    vkg_error err = {0};
    assert_int_equal(vkg_llama_load(dir, -1, NULL, &m, &err), VKG_OK); /* as written it loads */
    vkg_llama_free(m);
    char *index_path = malloc(strlen(dir) + 64), *good;
    assert_non_null(index_path);
    sprintf(index_path, "%s/%s", dir, VKG_CHECKPOINT_INDEX);
    good = test_read_file(index_path, NULL);
    /* a shard name that leaves the folder, absolute or relative */
    char *bad = replace(good, "\"model-00002-of-00002.safetensors\"", "\"../../../etc/passwd\"");
    expect_index_refused(dir, bad, "shard \"../../../etc/passwd\" (of tensor");
    free(bad);
    bad = replace(good, "\"model-00002-of-00002.safetensors\"", "\"/etc/passwd\"");
    expect_index_refused(dir, bad, "is not a plain file name in the model folder");
    free(bad);
    /* a shard that is missing */
    bad = replace(good, "model-00002-of-00002.safetensors", "model-00003-of-00002.safetensors");
    expect_index_refused(dir, bad, "shard model-00003-of-00002.safetensors, which the index lists, is missing");
    free(bad);
    /* a tensor listed twice (JSON's duplicate key) */
    bad = replace(good, "\"weight_map\": {",
                  "\"weight_map\": {\"model.norm.weight\": \"model-00002-of-00002.safetensors\",");
    expect_index_refused(dir, bad, "duplicate key");
    free(bad);
    /* a tensor the index puts in the other shard */
    bad = replace(good, "\"model.norm.weight\": \"model-00002", "\"model.norm.weight\": \"model-00001");
    expect_index_refused(dir, bad, "tensor model.norm.weight is in shard model-00002-of-00002.safetensors, but the "
                                   "index puts it in model-00001-of-00002.safetensors");
    free(bad);
    /* a tensor of a shard that the index leaves out, and one the index lists that no shard has */
    bad = replace(good, "\"model.norm.weight\"", "\"model.norm.weighX\"");
    expect_index_refused(dir, bad, "holds tensor model.norm.weight, which the index does not list");
    free(bad);
    bad = replace(good, "\"weight_map\": {", "\"weight_map\": {\"extra\": \"model-00001-of-00002.safetensors\",");
    expect_index_refused(dir, bad, "tensor \"extra\" is not in shard model-00001-of-00002.safetensors");
    free(bad);
    /* not an object, no weight_map */
    expect_index_refused(dir, "[1, 2]", "\"weight_map\" must be an object");
    expect_index_refused(dir, "{\"weight_map\": {\"a\": 7}}", "maps to a JSON number");
    free(good);
    free(index_path);
    free(dir);
}

static void with_rotary_buffers(vkg_llama_random_options *o) { o->rotary_buffers = 1; }
static void untied(vkg_llama_random_options *o) { o->config.tie_word_embeddings = 0; }
static void biased(vkg_llama_random_options *o) { o->config.qkv_bias = o->config.o_bias = 1; }

/* Every tensor of a checkpoint is read, or one the model may leave: older files' rotary buffers,
 * the copy of a tied head.  A weight left unread means config.json is another model's. */
static void test_unread_tensors(void **state) {
    (void)state;
    vkg_llama *m = NULL;
    vkg_error err = {0};
    char *dir = edited_model("rotary-buffers", with_rotary_buffers, NULL, NULL);
    if (vkg_llama_load(dir, -1, NULL, &m, &err) != VKG_OK) fail_msg("rotary buffers: %s", err.message);
    vkg_llama_free(m);
    free(dir);
    /* an lm_head.weight beside a tied head: transformers ties, the embedding is the head */
    dir = edited_model("tied-with-head", untied, "\"tie_word_embeddings\": false", "\"tie_word_embeddings\": true");
    if (vkg_llama_load(dir, -1, NULL, &m, &err) != VKG_OK) fail_msg("tied with a head: %s", err.message);
    assert_ptr_equal(m->global[VKG_LLAMA_LM_HEAD], m->global[VKG_LLAMA_EMBED]);
    vkg_llama_free(m);
    free(dir);
    /* biases the config leaves out */
    dir = edited_model("unread-bias", biased, "\"attention_bias\": true", "\"attention_bias\": false");
    assert_int_equal(vkg_llama_load(dir, -1, NULL, &m, &err), VKG_ERR_FORMAT);
    assert_null(m);
    if (!strstr(err.message, "tensor model.layers.0.self_attn.q_proj.bias is not a weight of the model config.json "
                             "describes (LlamaForCausalLM with 2 layers"))
        fail_msg("unread bias: \"%s\"", err.message);
    free(dir);
}

/* ---- whole models against the NumPy reference ------------------------------------------ */

static int32_t ids[T];

static void expect_close(const float *got, const float *want, size_t rows, size_t V, const char *what) {
    double e = test_nmse(got, want, rows * V);
    if (!(e <= NMSE_MAX)) fail_msg("%s: NMSE %.3e against the NumPy reference exceeds %.0e", what, e, NMSE_MAX);
    for (size_t r = 0; r < rows; r++)
        if (vkg_argmax(got + r * V, (int)V) != vkg_argmax(want + r * V, (int)V))
            fail_msg("%s: position %zu: argmax %d, the reference's %d", what, r, vkg_argmax(got + r * V, (int)V),
                     vkg_argmax(want + r * V, (int)V));
    fprintf(stderr, "  %-56s NMSE %.2e\n", what, e);
}

/* Writes the model, checks every position on the CPU and on Vulkan, then prefill + decode. */
static void check_model(const char *shape, void (*adjust)(vkg_llama_random_options *), vkg_device *gpu) {
    char *dir = path_in(shape);
    vkg_llama_random_options o;
    memset(&o, 0, sizeof o);
    vkg_error err = {0};
    assert_int_equal(vkg_llama_random_shape(strchr(shape, ':') ? strchr(shape, ':') + 1 : shape, &o, &err), VKG_OK);
    o.dtype = VKG_ST_F32;
    o.seed = 7;
    if (adjust) adjust(&o);
    if (vkg_llama_write_random(dir, &o, &err) != VKG_OK) fail_msg("%s", err.message);
    vkg_llama *m = NULL;
    if (vkg_llama_load(dir, -1, NULL, &m, &err) != VKG_OK) fail_msg("%s: %s", shape, err.message);
    const size_t V = (size_t)m->config.vocab_size;
    for (int i = 0; i < T; i++) ids[i] = (int32_t)((i * 37 + 11) % (int)V);
    float *want = test_numpy_logits_of("VKG_LLAMA_REFERENCE", dir, ids, T, (int64_t)V);
    float *got = malloc(T * V * sizeof *got);
    assert_non_null(got);
    vkg_device *devs[2] = {cpu, gpu};
    for (int d = 0; d < 2 && devs[d]; d++) {
        char what[128];
        if (vkg_decoder_forward(&m->decoder, devs[d], ids, T, 1, got, VKG_NO_ATTENTION, NULL, &err) != VKG_OK)
            fail_msg("%s: %s", shape, err.message);
        snprintf(what, sizeof what, "%s, T = %d, %s", shape, T, d ? "Vulkan" : "CPU");
        expect_close(got, want, T, V, what);
        /* prefill 80, then decode the rest one token at a time through the cache */
        vkg_generator gen;
        if (vkg_generator_new(&m->decoder, devs[d], T, &gen, &err) != VKG_OK) fail_msg("%s", err.message);
        if (vkg_generator_feed(&gen, ids, 80, &err) != VKG_OK) fail_msg("%s", err.message);
        memcpy(got, gen.logits, V * sizeof *got);
        for (int p = 80; p < T; p++) {
            if (vkg_generator_feed(&gen, &ids[p], 1, &err) != VKG_OK) fail_msg("%s", err.message);
            memcpy(got + (size_t)(p - 79) * V, gen.logits, V * sizeof *got);
        }
        vkg_generator_free(&gen);
        snprintf(what, sizeof what, "%s, prefill 80 + decode to %d, %s", shape, T, d ? "Vulkan" : "CPU");
        expect_close(got, want + 79 * V, T - 79, V, what);
    }
    free(got);
    free(want);
    vkg_llama_free(m);
    free(dir);
}

/* positions beyond the original length: llama3's blend decides the rotations of every one */
static void llama3_short(vkg_llama_random_options *o) {
    o->config.rope.type = VKG_ROPE_LLAMA3;
    o->config.rope.factor = 8, o->config.rope.low_freq_factor = 1, o->config.rope.high_freq_factor = 4;
    o->config.rope.original_max_position_embeddings = 32;
    o->config.rope.theta = 500000;
}
static void linear_untied(vkg_llama_random_options *o) {
    o->config.rope.type = VKG_ROPE_LINEAR;
    o->config.rope.factor = 4;
    o->config.tie_word_embeddings = 0;
    o->config.qkv_bias = o->config.o_bias = o->config.mlp_bias = 1;
}
/* yarn over an original context of 24, past which most positions lie; with mscale and
 * mscale_all_dim the cos/sin factor is their ratio (1.06 here), not the default's */
static void yarn_short(vkg_llama_random_options *o) {
    o->config.rope = (vkg_rope_config){.type = VKG_ROPE_YARN, .theta = 1e6, .factor = 4,
                                       .original_max_position_embeddings = 24, .beta_fast = 16, .mscale = 1.5,
                                       .mscale_all_dim = 1};
}
/* dynamic NTK scaling: inside the model's context, the default rotation */
static void dynamic_ntk(vkg_llama_random_options *o) {
    o->config.rope.type = VKG_ROPE_DYNAMIC;
    o->config.rope.factor = 2;
}
static void bf16_shards(vkg_llama_random_options *o) {
    o->dtype = VKG_ST_BF16;
    o->shards = 3;
}
static void f16_three_layers(vkg_llama_random_options *o) {
    o->dtype = VKG_ST_F16;
    o->config.n_layer = 3;
}

/* heads wider than the width over the heads (Mistral Nemo's kind): 4 query heads of 32 over a
 * width of 64, so q is 128 wide and k, v 64 each */
static void wide_heads(vkg_llama_random_options *o) { o->config.head_dim = 32; }

/* a window shorter than the run: every query past 24 sees its last 24 positions alone */
static void window_24(vkg_llama_random_options *o) {
    o->config.sliding_window = 24;
    for (int l = 0; l < o->config.n_layer; l++) o->config.windowed[l] = 1;
}
/* Qwen2's use_sliding_window: the layers from max_window_layers (1) on */
static void window_from_layer_1(vkg_llama_random_options *o) {
    o->config.sliding_window = 17;
    o->config.windowed[1] = 1;
}

static void test_models(void **state) {
    (void)state;
    vkg_device *gpu = vk_test_open();
    check_model("llama-tiny", llama3_short, gpu);
    check_model("biases:llama-tiny", linear_untied, gpu);
    check_model("heads:llama-tiny", wide_heads, gpu);
    check_model("mistral-tiny", NULL, gpu);
    check_model("window:mistral-tiny", window_24, gpu);
    check_model("window:qwen2-tiny", window_from_layer_1, gpu);
    check_model("qwen2-tiny", bf16_shards, gpu);
    check_model("yarn:qwen2-tiny", yarn_short, gpu);
    check_model("dynamic:llama-tiny", dynamic_ntk, gpu);
    check_model("qwen3-tiny", f16_three_layers, gpu);
    vk_test_close(gpu);
}

/* vkg_model_open finds the architecture and reports its facts. */
static void test_model_info(void **state) {
    (void)state;
    char *dir = path_in("info");
    vkg_random_model_options o;
    vkg_random_model_options_default(&o);
    o.shape = "qwen3-tiny";
    o.shards = 2;
    o.dtype = VKG_WEIGHTS_BF16;
    vkg_error err = {0};
    if (vkg_random_model_write(dir, &o, &err) != VKG_OK) fail_msg("%s", err.message);
    vkg_model *m = NULL;
    if (vkg_model_open(dir, NULL, NULL, &m, &err) != VKG_OK) fail_msg("%s", err.message);
    vkg_model_info info;
    assert_int_equal(vkg_model_get_info(m, &info, &err), VKG_OK);
    assert_string_equal(info.architecture, "qwen3");
    assert_int_equal(info.n_kv_head, 2);
    assert_int_equal(info.head_dim, 32);
    assert_true(info.rope_theta == 1000000.0);
    assert_string_equal(info.rope_scaling, "default");
    assert_int_equal(info.dtype, VKG_WEIGHTS_BF16);
    assert_int_equal(info.tied_head, 1);
    vkg_model_free(m);
    o.arch = "llama"; /* qwen3-tiny is not a llama */
    assert_int_equal(vkg_random_model_write(dir, &o, &err), VKG_ERR_INVALID_ARGUMENT);
    free(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_defaults),   cmocka_unit_test(test_config_refused),
        cmocka_unit_test(test_unknown_architecture), cmocka_unit_test(test_rope_table_of_model),
        cmocka_unit_test(test_hostile_index),     cmocka_unit_test(test_unread_tensors),
        cmocka_unit_test(test_models),
        cmocka_unit_test(test_model_info),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
