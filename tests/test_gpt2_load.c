/* Loading GPT-2 folders: every naming variant real checkpoints use and every weight dtype give the
 * same model, and malformed folders are refused with a message naming the file, the tensor and
 * the shapes.  Models are written here by the project's random-model generator. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "models/gpt2.h"
#include "models/model_run.h"
#include "models/gpt2_random.h"
#include "support/test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static vkg_device *cpu;
static char *tmp;
static const int32_t ids[6] = {3, 60, 17, 0, 41, 63};

static int setup(void **state) {
    (void)state;
    vkg_device_options o = {.cpu_threads = 2, .quiet = 1};
    vkg_error err = {0};
    tmp = test_tmpdir("gpt2load");
    return tmp && vkg_device_open("cpu", &o, &cpu, &err) == VKG_OK ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    vkg_device_free(cpu);
    int rc = test_remove_tree(tmp);
    free(tmp);
    return rc == 0 ? 0 : -1;
}

static const char *path_in(const char *dir, const char *name) {
    static char p[512];
    snprintf(p, sizeof p, "%s/%s%s%s", tmp, dir, name ? "/" : "", name ? name : "");
    return p;
}

/* Writes the default tiny model (2 layers, 4 heads, 32 wide, 16 positions, 64 tokens) under tmp/dir. */
static void write_model(const char *dir, vkg_st_dtype dtype, int prefix, int untied, int buffers) {
    vkg_gpt2_random_options o;
    vkg_gpt2_random_options_default(&o);
    o.dtype = dtype;
    o.prefix_transformer = prefix;
    o.untied_lm_head = untied;
    o.attn_bias_buffers = buffers;
    char d[512];
    snprintf(d, sizeof d, "%s", path_in(dir, NULL));
    vkg_error err = {0};
    if (vkg_gpt2_write_random(d, &o, &err) != VKG_OK) fail_msg("%s", err.message);
}

static vkg_gpt2 *load(const char *dir) {
    char d[512];
    snprintf(d, sizeof d, "%s", path_in(dir, NULL));
    vkg_gpt2 *m = NULL;
    vkg_error err = {0};
    if (vkg_gpt2_load(d, &m, &err) != VKG_OK) fail_msg("%s", err.message);
    return m;
}

static void logits_of(const vkg_gpt2 *m, float *out) {
    vkg_error err = {0};
    if (vkg_decoder_forward(&m->decoder, cpu, ids, 6, 1, out, VKG_NO_ATTENTION, NULL, &err) != VKG_OK)
        fail_msg("%s", err.message);
}

#define NL (6 * 64)

/* The prefix and the buffers change names only: the same weights, bit for bit the same logits. */
static void test_naming_variants(void **state) {
    (void)state;
    write_model("base", VKG_ST_F32, 0, 0, 0);
    vkg_gpt2 *base = load("base");
    assert_true(base->tied_head);
    assert_ptr_equal(base->lm_head, base->wte);
    assert_false(base->transformer_prefix);
    assert_int_equal(vkg_gpt2_parameter_count(base), 64 * 32 + 16 * 32 + 2 * 32 + 2 * (12 * 32 * 32 + 13 * 32));
    float want[NL], got[NL];
    logits_of(base, want);
    static const struct { const char *dir; int prefix, buffers; } v[] = {
        {"prefix", 1, 0}, {"buffers", 0, 1}, {"prefix_buffers", 1, 1}};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        write_model(v[i].dir, VKG_ST_F32, v[i].prefix, 0, v[i].buffers);
        vkg_gpt2 *m = load(v[i].dir);
        assert_int_equal(m->transformer_prefix, v[i].prefix);
        logits_of(m, got);
        assert_memory_equal(got, want, sizeof want);
        vkg_gpt2_free(m);
    }
    vkg_gpt2_free(base);
}

/* An untied head is read from lm_head.weight (never prefixed); the rest is the tied model's.  A
 * tied one is wte, whatever the file stores. */
static void test_untied_head(void **state) {
    (void)state;
    write_model("base", VKG_ST_F32, 0, 0, 0);
    write_model("untied", VKG_ST_F32, 1, 1, 0);
    vkg_gpt2 *base = load("base"), *m = load("untied");
    assert_false(m->tied_head);
    assert_ptr_not_equal(m->lm_head, m->wte);
    assert_memory_equal(m->wte, base->wte, 64 * 32 * sizeof(float));
    assert_true(memcmp(m->lm_head, m->wte, 64 * 32 * sizeof(float)) != 0);
    float tied[NL], untied[NL], swapped[NL];
    logits_of(base, tied);
    logits_of(m, untied);
    assert_true(test_max_abs_diff(untied, tied, NL) > 0.01);
    /* The untied model with its head pointed back at wte is the tied model. */
    vkg_gpt2 copy = *m;
    copy.lm_head = copy.wte;
    copy.tied_head = 1;
    vkg_gpt2_decoder_init(&copy); /* the decoder of the copy, not of m */
    logits_of(&copy, swapped);
    assert_memory_equal(swapped, tied, sizeof tied);
    vkg_gpt2_free(m);
    /* The same file with config.json tying the head: the stored lm_head.weight is passed over, as
       transformers ties over it, and the model is the tied one. */
    vkg_gpt2_random_options o;
    vkg_gpt2_random_options_default(&o);
    vkg_error err = {0};
    if (vkg_gpt2_config_write_tied(path_in("untied", "config.json"), &o.config, 1, &err) != VKG_OK)
        fail_msg("%s", err.message);
    m = load("untied");
    assert_true(m->tied_head);
    assert_ptr_equal(m->lm_head, m->wte);
    logits_of(m, swapped);
    assert_memory_equal(swapped, tied, sizeof tied);
    vkg_gpt2_free(m);
    vkg_gpt2_free(base);
}

/* The matrix element k of a loaded model, as f32. */
static float matrix_at(const vkg_gpt2 *m, const void *matrix, int k) {
    const uint16_t *h = matrix;
    return m->weight_dtype == VKG_F16 ? vkg_f16_to_f32(h[k]) : m->weight_dtype == VKG_BF16 ? vkg_bf16_to_f32(h[k])
                                                                                            : ((const float *)matrix)[k];
}

static vkg_gpt2 *load_with(const char *dir, int dtype, int transposed) {
    char d[512];
    snprintf(d, sizeof d, "%s", path_in(dir, NULL));
    vkg_gpt2_load_options o;
    vkg_gpt2_load_options_default(&o);
    o.dtype = dtype;
    o.transposed = transposed;
    vkg_gpt2 *m = NULL;
    vkg_error err = {0};
    if (vkg_gpt2_load_with(d, &o, &m, &err) != VKG_OK) fail_msg("%s", err.message);
    return m;
}

/* F16 and BF16 files are used as stored (never widened: half the weight bytes); each weight is
 * the rounded f32 value, and the logits stay close.  The same holds for an F32 file converted at
 * load, and an F16 file widened at load gives the F16 model's logits exactly. */
static void test_half_precision(void **state) {
    (void)state;
    write_model("base", VKG_ST_F32, 0, 0, 0);
    vkg_gpt2 *base = load("base");
    float want[NL], got[NL];
    logits_of(base, want);
    assert_int_equal(base->weight_dtype, VKG_F32);
    const vkg_st_dtype dtypes[2] = {VKG_ST_F16, VKG_ST_BF16};
    const vkg_dtype held[2] = {VKG_F16, VKG_BF16};
    const double nmse_max[2] = {1e-5, 1e-3}; /* 11 and 8 significant bits */
    for (int i = 0; i < 2; i++) {
        write_model(i ? "bf16" : "f16", dtypes[i], i, 0, 1);
        for (int convert = 0; convert < 2; convert++) {
            vkg_gpt2 *m = convert ? load_with("base", held[i], 0) : load(i ? "bf16" : "f16");
            assert_int_equal(m->dtype, convert ? VKG_ST_F32 : dtypes[i]);
            assert_int_equal(m->weight_dtype, held[i]);
            /* matrices at 2 bytes, vectors at 4: about half the f32 model's block */
            assert_true(m->weights_bytes < base->weights_bytes * 6 / 10);
            assert_int_equal((uintptr_t)m->weights % 4096, 0);
            assert_int_equal(m->weights_bytes % 4096, 0);
            for (int k = 0; k < 64 * 32; k++) {
                float f = ((const float *)base->wte)[k];
                float r = i ? vkg_bf16_to_f32(vkg_f32_to_bf16(f)) : vkg_f16_to_f32(vkg_f32_to_f16(f));
                assert_true(matrix_at(m, m->wte, k) == r);
            }
            float f = ((const float *)base->layers[1].fc_w)[77];
            float r = i ? vkg_bf16_to_f32(vkg_f32_to_bf16(f)) : vkg_f16_to_f32(vkg_f32_to_f16(f));
            assert_true(matrix_at(m, m->layers[1].fc_w, 77) == r);
            logits_of(m, got);
            double e = test_nmse(got, want, NL);
            if (!(e < nmse_max[i])) fail_msg("%s logits: nmse %g against F32", i ? "BF16" : "F16", e);
            if (!convert) {
                /* widened at load: the same values as f32, so the same sums */
                vkg_gpt2 *wide = load_with(i ? "bf16" : "f16", VKG_F32, 0);
                float wide_logits[NL];
                logits_of(wide, wide_logits);
                assert_memory_equal(wide_logits, got, sizeof got);
                vkg_gpt2_free(wide);
            }
            vkg_gpt2_free(m);
        }
    }
    vkg_gpt2_free(base);
}

/* ---- malformed folders ------------------------------------------------------------------------- */

static void expect_error(const char *dir, vkg_status status, const char *part1, const char *part2) {
    char d[512];
    snprintf(d, sizeof d, "%s", path_in(dir, NULL));
    vkg_gpt2 *m = (vkg_gpt2 *)1;
    vkg_error err = {0};
    vkg_status st = vkg_gpt2_load(d, &m, &err);
    if (st != status) fail_msg("%s: status %s, expected %s (%s)", dir, vkg_status_name(st), vkg_status_name(status), err.message);
    assert_null(m);
    if (part1 && !strstr(err.message, part1)) fail_msg("message \"%s\" lacks \"%s\"", err.message, part1);
    if (part2 && !strstr(err.message, part2)) fail_msg("message \"%s\" lacks \"%s\"", err.message, part2);
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* Rewrites dir's model.safetensors from base's tensors, changed by edit (index, entry). */
typedef void (*edit_fn)(int i, vkg_st_write *w, int *keep);

static void rewrite(const char *dir, edit_fn edit) {
    write_model(dir, VKG_ST_F32, 0, 0, 0);
    char p[512];
    snprintf(p, sizeof p, "%s", path_in("base", "model.safetensors"));
    vkg_safetensors *st = NULL;
    vkg_error err = {0};
    assert_int_equal(vkg_safetensors_open(p, &st, &err), VKG_OK);
    int n = vkg_safetensors_count(st), k = 0;
    vkg_st_write *w = calloc((size_t)n, sizeof *w);
    void **data = calloc((size_t)n, sizeof *data);
    for (int i = 0; i < n; i++) {
        const vkg_st_tensor *t = vkg_safetensors_tensor(st, i);
        data[i] = malloc(t->bytes + 1);
        assert_int_equal(vkg_safetensors_read(st, t, t->dtype, data[i], &err), VKG_OK);
        vkg_st_write e = {.name = t->name, .dtype = t->dtype, .ndim = t->ndim, .data = data[i]};
        memcpy(e.shape, t->shape, sizeof e.shape);
        int keep = 1;
        edit(i, &e, &keep);
        if (keep) w[k++] = e;
    }
    snprintf(p, sizeof p, "%s", path_in(dir, "model.safetensors"));
    if (vkg_safetensors_write(p, w, k, &err) != VKG_OK) fail_msg("%s", err.message);
    for (int i = 0; i < n; i++) free(data[i]);
    free(data);
    free(w);
    vkg_safetensors_close(st);
}

static void drop_fc_bias(int i, vkg_st_write *w, int *keep) {
    (void)i;
    *keep = strcmp(w->name, "h.1.mlp.c_fc.bias") != 0;
}

static void transpose_c_attn(int i, vkg_st_write *w, int *keep) {
    (void)i;
    (void)keep;
    if (strcmp(w->name, "h.0.attn.c_attn.weight") == 0) {
        w->shape[0] = 96;
        w->shape[1] = 32;
    }
}

static void wpe_as_i32(int i, vkg_st_write *w, int *keep) {
    (void)i;
    (void)keep;
    if (strcmp(w->name, "wpe.weight") == 0) w->dtype = VKG_ST_I32;
}

/* Loaded for a device that reads [N, K] faster (transposed), each layer's four projections are
 * the file's [in, out] matrices transposed, element for element, in every dtype; every other
 * tensor is as a plain load holds it; and the CPU's logits over either layout agree. */
static void test_transposed_projections(void **state) {
    (void)state;
    write_model("plain", VKG_ST_F32, 0, 0, 0);
    const int dtypes[3] = {VKG_F32, VKG_F16, VKG_BF16};
    for (int d = 0; d < 3; d++) {
        vkg_gpt2 *plain = load_with("plain", dtypes[d], 0), *t = load_with("plain", dtypes[d], 1);
        assert_int_equal(plain->transposed, 0);
        assert_int_equal(t->transposed, 1);
        assert_int_equal(t->weights_bytes, plain->weights_bytes);
        const int C = plain->config.n_embd, I = vkg_gpt2_inner_size(&plain->config);
        for (int l = 0; l < plain->config.n_layer; l++) {
            const struct { const void *p, *t; int in, out; } mats[4] = {
                {plain->layers[l].attn_w, t->layers[l].attn_w, C, 3 * C},
                {plain->layers[l].attn_proj_w, t->layers[l].attn_proj_w, C, C},
                {plain->layers[l].fc_w, t->layers[l].fc_w, C, I},
                {plain->layers[l].mlp_proj_w, t->layers[l].mlp_proj_w, I, C}};
            for (int k = 0; k < 4; k++)
                for (int i = 0; i < mats[k].in; i++)
                    for (int j = 0; j < mats[k].out; j++) {
                        const float held = matrix_at(t, mats[k].t, j * mats[k].in + i);
                        if (held != matrix_at(plain, mats[k].p, i * mats[k].out + j))
                            fail_msg("%s, layer %d, matrix %d: [%d, %d] is not the file's [%d, %d]",
                                     vkg_dtype_name(plain->weight_dtype), l, k, j, i, i, j);
                    }
            assert_memory_equal(t->layers[l].ln_1_w, plain->layers[l].ln_1_w, (size_t)C * 4);
            assert_memory_equal(t->layers[l].fc_b, plain->layers[l].fc_b, (size_t)I * 4);
        }
        const size_t es = dtypes[d] == VKG_F32 ? 4 : 2;
        assert_memory_equal(t->wte, plain->wte, (size_t)plain->config.vocab_size * C * es);
        float a[NL], b[NL];
        logits_of(plain, a);
        logits_of(t, b);
        double e = test_nmse(b, a, NL);
        if (!(e <= 1e-12)) fail_msg("%s: logits over the transposed projections differ, nmse %.3e",
                                    vkg_dtype_name(plain->weight_dtype), e);
        vkg_gpt2_free(plain);
        vkg_gpt2_free(t);
    }
}

static void test_malformed_folders(void **state) {
    (void)state;
    expect_error("nonexistent", VKG_ERR_IO, "nonexistent", "config.json and model.safetensors");

    char p[512];
    snprintf(p, sizeof p, "%s", path_in("empty", NULL));
    assert_int_equal(mkdir(p, 0700), 0);
    expect_error("empty", VKG_ERR_IO, "no config.json", NULL);

    write_model("no_weights", VKG_ST_F32, 0, 0, 0);
    assert_int_equal(unlink(path_in("no_weights", "model.safetensors")), 0);
    expect_error("no_weights", VKG_ERR_IO, "no model.safetensors", NULL);
    write_text(path_in("no_weights", "pytorch_model.bin"), "not read");
    expect_error("no_weights", VKG_ERR_IO, "only pytorch_model.bin", "safe_serialization");

    write_model("bad_config", VKG_ST_F32, 0, 0, 0);
    write_text(path_in("bad_config", "config.json"), "{\"n_layer\": 2, \"n_head\": 4,");
    expect_error("bad_config", VKG_ERR_FORMAT, "config.json", NULL);
    write_text(path_in("bad_config", "config.json"), "{\"n_layer\": 2, \"n_head\": 4, \"n_embd\": 30, \"vocab_size\": 64, "
                                                     "\"n_positions\": 16}");
    expect_error("bad_config", VKG_ERR_FORMAT, "config.json", "n_embd 30 is not divisible by n_head 4");

    write_model("base", VKG_ST_F32, 0, 0, 0);
    rewrite("missing", drop_fc_bias);
    expect_error("missing", VKG_ERR_FORMAT, "tensor h.1.mlp.c_fc.bias is missing", "expected shape [128]");
    rewrite("shape", transpose_c_attn);
    expect_error("shape", VKG_ERR_FORMAT, "tensor h.0.attn.c_attn.weight has shape [96, 32], expected [32, 96]", NULL);
    rewrite("dtype", wpe_as_i32);
    expect_error("dtype", VKG_ERR_UNSUPPORTED, "wpe.weight is I32", "F32, F16 and BF16");

    /* A config of another size than the file's tensors. */
    write_model("other_config", VKG_ST_F32, 0, 0, 0);
    write_text(path_in("other_config", "config.json"), "{\"n_layer\": 2, \"n_head\": 4, \"n_embd\": 32, \"vocab_size\": 100, "
                                                       "\"n_positions\": 16, \"bos_token_id\": 0, \"eos_token_id\": 0}");
    expect_error("other_config", VKG_ERR_FORMAT, "wte.weight has shape [64, 32], expected [100, 32]", "vocab_size 100");
    write_text(path_in("other_config", "config.json"), "{\"n_layer\": 3, \"n_head\": 4, \"n_embd\": 32, \"vocab_size\": 64, "
                                                       "\"n_positions\": 16, \"bos_token_id\": 0, \"eos_token_id\": 0}");
    expect_error("other_config", VKG_ERR_FORMAT, "tensor h.2.ln_1.weight is missing", "n_layer 3");
    write_text(path_in("other_config", "config.json"), "{\"n_layer\": 2, \"n_head\": 4, \"n_embd\": 32, \"vocab_size\": 64, "
                                                       "\"n_positions\": 16, \"bos_token_id\": 0, \"eos_token_id\": 0, "
                                                       "\"tie_word_embeddings\": false}");
    expect_error("other_config", VKG_ERR_FORMAT, "tie_word_embeddings to false", "no lm_head.weight");

    /* Truncated weights: the safetensors reader names the file and what does not fit. */
    write_model("truncated", VKG_ST_F32, 0, 0, 0);
    snprintf(p, sizeof p, "%s", path_in("truncated", "model.safetensors"));
    assert_int_equal(truncate(p, 20000), 0);
    expect_error("truncated", VKG_ERR_FORMAT, "model.safetensors", NULL);
    assert_int_equal(truncate(p, 5), 0);
    expect_error("truncated", VKG_ERR_FORMAT, "model.safetensors", NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_naming_variants),
        cmocka_unit_test(test_untied_head),
        cmocka_unit_test(test_half_precision),
        cmocka_unit_test(test_transposed_projections),
        cmocka_unit_test(test_malformed_folders),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
