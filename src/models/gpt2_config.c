/* GPT-2 config.json: read with defaults as Hugging Face's GPT2Config has them, check, write. */
#include "models/gpt2_config.h"

#include "core/error.h"
#include "io/json.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* Upper bounds that keep every size product the graph computes far from overflow; the largest
 * GPT-2 (xl: 48 layers, 25 heads, 1600 wide, 1024 positions, 50257 tokens) is well inside. */
#define MAX_LAYERS 4096
#define MAX_HEADS 4096
#define MAX_EMBD 65536
#define MAX_POSITIONS (1 << 20)
#define MAX_VOCAB (1 << 24)

int vkg_gpt2_activation_kind(const char *activation) {
    if (!activation) return 0;
    if (strcmp(activation, "gelu_new") == 0 || strcmp(activation, "gelu_pytorch_tanh") == 0) return 1;
    if (strcmp(activation, "gelu") == 0) return 2;
    if (strcmp(activation, "relu") == 0) return 3;
    return 0;
}

static vkg_status check_range(const char *key, int value, int lo, int hi, vkg_error *err) {
    if (value < lo || value > hi)
        return vkg_error_set(err, VKG_ERR_FORMAT, "%s is %d; it must be between %d and %d", key, value, lo, hi);
    return VKG_OK;
}

vkg_status vkg_gpt2_config_validate(const vkg_gpt2_config *c, vkg_error *err) {
    if (!c) return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_gpt2_config_validate: NULL config");
    vkg_status st;
    if ((st = check_range("n_layer", c->n_layer, 1, MAX_LAYERS, err)) ||
        (st = check_range("n_head", c->n_head, 1, MAX_HEADS, err)) ||
        (st = check_range("n_embd", c->n_embd, 1, MAX_EMBD, err)) ||
        (st = check_range("n_positions", c->n_positions, 1, MAX_POSITIONS, err)) ||
        (st = check_range("vocab_size", c->vocab_size, 1, MAX_VOCAB, err)))
        return st;
    if (c->n_embd % c->n_head != 0)
        return vkg_error_set(err, VKG_ERR_FORMAT, "n_embd %d is not divisible by n_head %d (each head gets n_embd / n_head "
                             "channels)", c->n_embd, c->n_head);
    if (!(c->layer_norm_epsilon > 0.0f) || !isfinite(c->layer_norm_epsilon))
        return vkg_error_set(err, VKG_ERR_FORMAT, "layer_norm_epsilon is %g; it must be a positive finite number",
                             (double)c->layer_norm_epsilon);
    if (!memchr(c->activation, '\0', sizeof c->activation) || !vkg_gpt2_activation_kind(c->activation))
        return vkg_error_set(err, VKG_ERR_UNSUPPORTED,
                             "activation_function \"%.31s\" is not supported (use gelu_new, gelu_pytorch_tanh, gelu "
                             "or relu)", c->activation);
    if (c->bos_token_id < 0 || c->bos_token_id >= c->vocab_size || c->eos_token_id < 0 ||
        c->eos_token_id >= c->vocab_size)
        return vkg_error_set(err, VKG_ERR_FORMAT, "bos_token_id %d / eos_token_id %d must lie in the vocabulary [0, %d)",
                             c->bos_token_id, c->eos_token_id, c->vocab_size);
    return VKG_OK;
}

/* Reads key as an int: *found says whether it was there (null counts as absent). */
static vkg_status read_int(const vkg_json *root, const char *key, int *out, int *found, vkg_error *err) {
    const vkg_json *v = vkg_json_get(root, key);
    *found = v && vkg_json_type_of(v) != VKG_JSON_NULL;
    if (!*found) return VKG_OK;
    double d = vkg_json_number(v);
    if (vkg_json_type_of(v) != VKG_JSON_NUMBER || d != floor(d) || d < -2147483648.0 || d > 2147483647.0)
        return vkg_error_set(err, VKG_ERR_FORMAT, "\"%s\" must be an integer (it is a JSON %s%s)", key,
                             vkg_json_type_name(vkg_json_type_of(v)),
                             vkg_json_type_of(v) == VKG_JSON_NUMBER ? " that is not a whole 32-bit number" : "");
    *out = (int)d;
    return VKG_OK;
}

static vkg_status read_required(const vkg_json *root, const char *key, int *out, vkg_error *err) {
    int found;
    vkg_status st = read_int(root, key, out, &found, err);
    if (st == VKG_OK && !found) return vkg_error_set(err, VKG_ERR_FORMAT, "missing \"%s\"", key);
    return st;
}

/* Settings that would change the network: present with a value other than GPT-2's, refused. */
static vkg_status check_architecture(const vkg_json *root, const vkg_gpt2_config *c, vkg_error *err) {
    const vkg_json *v = vkg_json_get(root, "model_type");
    if (v && (!vkg_json_string(v, NULL) || strcmp(vkg_json_string(v, NULL), "gpt2") != 0))
        return vkg_error_set(err, VKG_ERR_UNSUPPORTED, "model_type is %s%.40s%s, not \"gpt2\"",
                             vkg_json_string(v, NULL) ? "\"" : "a JSON ",
                             vkg_json_string(v, NULL) ? vkg_json_string(v, NULL) : vkg_json_type_name(vkg_json_type_of(v)),
                             vkg_json_string(v, NULL) ? "\"" : "");
    int n_inner, found;
    vkg_status st = read_int(root, "n_inner", &n_inner, &found, err);
    if (st != VKG_OK) return st;
    if (found && n_inner != 4 * c->n_embd)
        return vkg_error_set(err, VKG_ERR_UNSUPPORTED, "n_inner is %d; only 4 * n_embd (%d) is supported", n_inner,
                             4 * c->n_embd);
    static const struct { const char *key; int gpt2_value; } flags[] = {
        {"scale_attn_weights", 1},
        {"scale_attn_by_inverse_layer_idx", 0},
        {"reorder_and_upcast_attn", 0},
        {"add_cross_attention", 0},
    };
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
        v = vkg_json_get(root, flags[i].key);
        if (!v || vkg_json_type_of(v) == VKG_JSON_NULL) continue;
        if (vkg_json_type_of(v) != VKG_JSON_BOOL)
            return vkg_error_set(err, VKG_ERR_FORMAT, "\"%s\" must be true or false", flags[i].key);
        if (vkg_json_bool(v) != flags[i].gpt2_value)
            return vkg_error_set(err, VKG_ERR_UNSUPPORTED, "\"%s\": %s is not supported (GPT-2 uses %s)", flags[i].key,
                                 vkg_json_bool(v) ? "true" : "false", flags[i].gpt2_value ? "true" : "false");
    }
    return VKG_OK;
}

static vkg_status parse_config(const vkg_json *root, vkg_gpt2_config *c, vkg_error *err) {
    if (vkg_json_type_of(root) != VKG_JSON_OBJECT)
        return vkg_error_set(err, VKG_ERR_FORMAT, "the file holds a JSON %s, expected an object",
                             vkg_json_type_name(vkg_json_type_of(root)));
    vkg_status st;
    int found, found_ctx, n_ctx = 0;
    if ((st = read_required(root, "n_layer", &c->n_layer, err)) ||
        (st = read_required(root, "n_head", &c->n_head, err)) ||
        (st = read_required(root, "n_embd", &c->n_embd, err)) ||
        (st = read_required(root, "vocab_size", &c->vocab_size, err)) ||
        (st = read_int(root, "n_positions", &c->n_positions, &found, err)) ||
        (st = read_int(root, "n_ctx", &n_ctx, &found_ctx, err)))
        return st;
    if (!found) {
        if (!found_ctx) return vkg_error_set(err, VKG_ERR_FORMAT, "missing \"n_positions\" (or the older \"n_ctx\")");
        c->n_positions = n_ctx;
    }
    c->bos_token_id = c->eos_token_id = 50256;
    if ((st = read_int(root, "bos_token_id", &c->bos_token_id, &found, err)) ||
        (st = read_int(root, "eos_token_id", &c->eos_token_id, &found, err)))
        return st;

    c->layer_norm_epsilon = 1e-5f;
    const vkg_json *v = vkg_json_get(root, "layer_norm_epsilon");
    if (v && vkg_json_type_of(v) != VKG_JSON_NULL) {
        if (vkg_json_type_of(v) != VKG_JSON_NUMBER)
            return vkg_error_set(err, VKG_ERR_FORMAT, "\"layer_norm_epsilon\" must be a number (it is a JSON %s)",
                                 vkg_json_type_name(vkg_json_type_of(v)));
        c->layer_norm_epsilon = (float)vkg_json_number(v);
    }

    snprintf(c->activation, sizeof c->activation, "gelu_new");
    v = vkg_json_get(root, "activation_function");
    if (v && vkg_json_type_of(v) != VKG_JSON_NULL) {
        size_t len;
        const char *s = vkg_json_string(v, &len);
        if (!s)
            return vkg_error_set(err, VKG_ERR_FORMAT, "\"activation_function\" must be a string (it is a JSON %s)",
                                 vkg_json_type_name(vkg_json_type_of(v)));
        if (len >= sizeof c->activation || strlen(s) != len || !vkg_gpt2_activation_kind(s))
            return vkg_error_set(err, VKG_ERR_UNSUPPORTED,
                                 "activation_function \"%.40s\" is not supported (use gelu_new, gelu_pytorch_tanh, "
                                 "gelu or relu)", s);
        memset(c->activation, 0, sizeof c->activation); /* no stale bytes: configs compare with memcmp */
        memcpy(c->activation, s, len);
    }
    if ((st = vkg_gpt2_config_validate(c, err)) != VKG_OK) return st;
    return check_architecture(root, c, err);
}

vkg_status vkg_gpt2_config_load(const char *path, vkg_gpt2_config *cfg, vkg_error *err) {
    if (!path || !cfg) return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_gpt2_config_load: NULL argument");
    memset(cfg, 0, sizeof *cfg);
    vkg_json *root = NULL;
    vkg_status st = vkg_json_parse_file(path, &root, err); /* its messages name the file */
    if (st != VKG_OK) return st;
    vkg_gpt2_config c;
    memset(&c, 0, sizeof c);
    vkg_error local;
    st = parse_config(root, &c, &local);
    vkg_json_free(root);
    if (st != VKG_OK) return vkg_error_set(err, st, "%s: %s", path, local.message);
    *cfg = c;
    return VKG_OK;
}

vkg_status vkg_gpt2_config_write_tied(const char *path, const vkg_gpt2_config *c, int tie_word_embeddings,
                                      vkg_error *err) {
    if (!path || !c) return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_gpt2_config_write: NULL argument");
    vkg_status st = vkg_gpt2_config_validate(c, err);
    if (st != VKG_OK) return st;
    FILE *f = fopen(path, "w");
    if (!f) return vkg_error_set(err, VKG_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    /* %.9g prints a float exactly enough to read back the same float. */
    fprintf(f,
            "{\n"
            "  \"architectures\": [\"GPT2LMHeadModel\"],\n"
            "  \"model_type\": \"gpt2\",\n"
            "  \"activation_function\": \"%s\",\n"
            "  \"bos_token_id\": %d,\n"
            "  \"eos_token_id\": %d,\n"
            "  \"layer_norm_epsilon\": %.9g,\n"
            "  \"n_ctx\": %d,\n"
            "  \"n_embd\": %d,\n"
            "  \"n_head\": %d,\n"
            "  \"n_layer\": %d,\n"
            "  \"n_positions\": %d,\n"
            "  \"tie_word_embeddings\": %s,\n"
            "  \"vocab_size\": %d\n"
            "}\n",
            c->activation, c->bos_token_id, c->eos_token_id, (double)c->layer_norm_epsilon, c->n_positions,
            c->n_embd, c->n_head, c->n_layer, c->n_positions, tie_word_embeddings ? "true" : "false",
            c->vocab_size);
    int failed = ferror(f);
    if (fclose(f) != 0) failed = 1;
    if (failed) return vkg_error_set(err, VKG_ERR_IO, "%s: write failed: %s", path, strerror(errno));
    return VKG_OK;
}

vkg_status vkg_gpt2_config_write(const char *path, const vkg_gpt2_config *cfg, vkg_error *err) {
    return vkg_gpt2_config_write_tied(path, cfg, 1, err);
}
