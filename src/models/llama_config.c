/* The Llama family's config.json, read as transformers' config classes read it (llama_config.h). */
#include "models/llama_config.h"

#include "base/error.h"
#include "base/json.h"
#include "models/config_keys.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* Bounds that keep every size product far from overflow (Llama 3.1 405B is well inside). */
#define MAX_HEADS 4096
#define MAX_WIDTH 65536
#define MAX_INNER (8 * MAX_WIDTH)
#define MAX_HEAD_DIM 1024
#define MAX_POSITIONS (1 << 22)
#define MAX_VOCAB (1 << 24)

static const struct {
    const char *model_type, *class_name;
} archs[VKG_LLAMA_N_ARCH] = {
    [VKG_LLAMA_ARCH_LLAMA] = {"llama", "LlamaForCausalLM"},
    [VKG_LLAMA_ARCH_MISTRAL] = {"mistral", "MistralForCausalLM"},
    [VKG_LLAMA_ARCH_QWEN2] = {"qwen2", "Qwen2ForCausalLM"},
    [VKG_LLAMA_ARCH_QWEN3] = {"qwen3", "Qwen3ForCausalLM"},
};

const char *vkg_llama_arch_name(vkg_llama_arch a) { return a < VKG_LLAMA_N_ARCH ? archs[a].model_type : "?"; }
const char *vkg_llama_arch_class(vkg_llama_arch a) { return a < VKG_LLAMA_N_ARCH ? archs[a].class_name : "?"; }

int vkg_llama_arch_find(const char *name) {
    for (int i = 0; name && i < VKG_LLAMA_N_ARCH; i++)
        if (strcmp(name, archs[i].model_type) == 0 || strcmp(name, archs[i].class_name) == 0) return i;
    return -1;
}

void vkg_llama_config_default(vkg_llama_config *c, vkg_llama_arch arch) {
    memset(c, 0, sizeof *c);
    c->arch = arch;
    c->hidden_size = 4096;
    c->n_layer = 32;
    c->n_head = 32;
    c->rms_norm_eps = 1e-6;
    c->rope.type = VKG_ROPE_DEFAULT;
    c->rope.theta = 10000.0;
    c->bos_token_id = c->eos_token_id = VKG_NO_TOKEN;
    switch (arch) {
    case VKG_LLAMA_ARCH_LLAMA:
        c->vocab_size = 32000, c->intermediate_size = 11008, c->n_positions = 2048;
        c->bos_token_id = 1, c->eos_token_id = 2;
        break;
    case VKG_LLAMA_ARCH_MISTRAL:
        c->vocab_size = 32000, c->intermediate_size = 14336, c->n_kv_head = 8, c->n_positions = 4096 * 32;
        c->bos_token_id = 1, c->eos_token_id = 2, c->sliding_window = 4096;
        break;
    case VKG_LLAMA_ARCH_QWEN2:
        c->vocab_size = 151936, c->intermediate_size = 22016, c->n_positions = 32768, c->qkv_bias = 1;
        break;
    case VKG_LLAMA_ARCH_QWEN3:
        c->vocab_size = 151936, c->intermediate_size = 22016, c->n_positions = 32768, c->head_dim = 128;
        c->qk_norm = 1;
        break;
    default: break;
    }
}

static vkg_status check_range(const char *key, int value, int lo, int hi, vkg_error *err) {
    if (value < lo || value > hi)
        return vkg_error_set(err, VKG_ERR_FORMAT, "%s is %d; it must be between %d and %d", key, value, lo, hi);
    return VKG_OK;
}

static int token_ok(int id, int vocab) { return id == VKG_NO_TOKEN || (id >= 0 && id < vocab); }

vkg_status vkg_llama_config_validate(const vkg_llama_config *c, vkg_error *err) {
    vkg_status st;
    if ((st = check_range("num_hidden_layers", c->n_layer, 1, VKG_LLAMA_MAX_LAYERS, err)) ||
        (st = check_range("num_attention_heads", c->n_head, 1, MAX_HEADS, err)) ||
        (st = check_range("num_key_value_heads", c->n_kv_head, 1, MAX_HEADS, err)) ||
        (st = check_range("hidden_size", c->hidden_size, 1, MAX_WIDTH, err)) ||
        (st = check_range("head_dim", c->head_dim, 2, MAX_HEAD_DIM, err)) ||
        (st = check_range("intermediate_size", c->intermediate_size, 1, MAX_INNER, err)) ||
        (st = check_range("max_position_embeddings", c->n_positions, 1, MAX_POSITIONS, err)) ||
        (st = check_range("vocab_size", c->vocab_size, 1, MAX_VOCAB, err)))
        return st;
    if (c->n_head % c->n_kv_head != 0)
        return vkg_error_set(err, VKG_ERR_FORMAT, "num_attention_heads %d is not a multiple of num_key_value_heads %d "
                             "(each key/value head serves a whole group of query heads)", c->n_head, c->n_kv_head);
    if (c->head_dim % 2 != 0)
        return vkg_error_set(err, VKG_ERR_FORMAT, "head_dim %d is odd; rotary embeddings rotate pairs of channels",
                             c->head_dim);
    if ((int64_t)c->n_head * c->head_dim > 4 * (int64_t)MAX_WIDTH)
        return vkg_error_set(err, VKG_ERR_FORMAT, "num_attention_heads %d x head_dim %d is too wide", c->n_head,
                             c->head_dim);
    if (!(c->rms_norm_eps > 0.0f) || !isfinite(c->rms_norm_eps))
        return vkg_error_set(err, VKG_ERR_FORMAT, "rms_norm_eps is %g; it must be a positive finite number",
                             (double)c->rms_norm_eps);
    vkg_rope_config rope = c->rope;
    rope.dim = c->head_dim;
    double inv_freq[MAX_HEAD_DIM / 2], attention_factor;
    vkg_error rope_err = {0};
    if (vkg_rope_inv_freq(&rope, inv_freq, &attention_factor, &rope_err) != VKG_OK)
        return vkg_error_set(err, VKG_ERR_FORMAT, "%s", rope_err.message);
    if (c->sliding_window < 0)
        return vkg_error_set(err, VKG_ERR_FORMAT, "sliding_window is %d; it must be positive or null",
                             c->sliding_window);
    if (!token_ok(c->bos_token_id, c->vocab_size) || !token_ok(c->eos_token_id, c->vocab_size))
        return vkg_error_set(err, VKG_ERR_FORMAT, "bos_token_id %d / eos_token_id %d must lie in the vocabulary "
                             "[0, %d) or be null", c->bos_token_id, c->eos_token_id, c->vocab_size);
    return VKG_OK;
}

/* YaRN's keys, as transformers 5 reads them: each optional (absent or null keeps rope.h's default);
 * without a factor, the model's context over original_max_position_embeddings; without
 * original_max_position_embeddings, the model's context.  (Some transformers 4.x releases took
 * that ratio even where a factor was given; their figures differ where the two disagree.) */
static vkg_status read_yarn(const vkg_json *rs, int factor_found, vkg_llama_config *c, vkg_error *err) {
    vkg_rope_config *r = &c->rope;
    int o = 0, truncate = 1;
    vkg_status st;
    if ((st = vkg_config_number(rs, "original_max_position_embeddings", &r->original_max_position_embeddings, &o,
                                err)) ||
        (st = vkg_config_number(rs, "beta_fast", &r->beta_fast, NULL, err)) ||
        (st = vkg_config_number(rs, "beta_slow", &r->beta_slow, NULL, err)) ||
        (st = vkg_config_number(rs, "attention_factor", &r->attention_factor, NULL, err)) ||
        (st = vkg_config_number(rs, "mscale", &r->mscale, NULL, err)) ||
        (st = vkg_config_number(rs, "mscale_all_dim", &r->mscale_all_dim, NULL, err)) ||
        (st = vkg_config_bool(rs, "truncate", &truncate, err)))
        return st;
    if (!o) r->original_max_position_embeddings = c->n_positions;
    if (!factor_found) r->factor = c->n_positions / r->original_max_position_embeddings;
    r->no_truncate = !truncate;
    return VKG_OK;
}

/* rope_scaling: refused by name unless computed here, exactly as transformers'
 * ROPE_INIT_FUNCTIONS do (rope.c). */
static vkg_status read_rope_scaling(const vkg_json *root, vkg_llama_config *c, vkg_error *err) {
    const vkg_json *rs = vkg_json_get(root, "rope_scaling");
    /* newer transformers write rope_parameters: the same keys, with rope_theta among them */
    const vkg_json *params = vkg_json_get(root, "rope_parameters");
    if ((!rs || vkg_json_type_of(rs) == VKG_JSON_NULL) && vkg_json_type_of(params) == VKG_JSON_OBJECT) {
        vkg_status st = vkg_config_number(params, "rope_theta", &c->rope.theta, NULL, err);
        if (st != VKG_OK) return st;
        rs = params;
    }
    if (!rs || vkg_json_type_of(rs) == VKG_JSON_NULL) return VKG_OK;
    if (vkg_json_type_of(rs) != VKG_JSON_OBJECT)
        return vkg_error_set(err, VKG_ERR_FORMAT, "\"rope_scaling\" must be an object or null (it is a JSON %s)",
                             vkg_json_type_name(vkg_json_type_of(rs)));
    char type[32] = "";
    int found = 0;
    vkg_status st = vkg_config_string(rs, "rope_type", type, sizeof type, &found, err);
    if (st == VKG_OK && !found) st = vkg_config_string(rs, "type", type, sizeof type, &found, err); /* older name */
    if (st != VKG_OK) return st;
    if (!found) return vkg_error_set(err, VKG_ERR_FORMAT, "\"rope_scaling\" names no \"rope_type\" (or \"type\")");
    if ((st = vkg_rope_type_parse(type, &c->rope.type, err)) != VKG_OK) return st;
    if (c->rope.type == VKG_ROPE_DEFAULT) return VKG_OK;
    int f_found = 0;
    if ((st = vkg_config_number(rs, "factor", &c->rope.factor, &f_found, err)) != VKG_OK) return st;
    if (c->rope.type == VKG_ROPE_YARN) return read_yarn(rs, f_found, c, err);
    if (!f_found) return vkg_error_set(err, VKG_ERR_FORMAT, "rope_scaling (%s) has no \"factor\"", type);
    if (c->rope.type == VKG_ROPE_LLAMA3) {
        int a = 0, b = 0, o = 0;
        if ((st = vkg_config_number(rs, "low_freq_factor", &c->rope.low_freq_factor, &a, err)) ||
            (st = vkg_config_number(rs, "high_freq_factor", &c->rope.high_freq_factor, &b, err)) ||
            (st = vkg_config_number(rs, "original_max_position_embeddings",
                                    &c->rope.original_max_position_embeddings, &o, err)))
            return st;
        if (!a || !b || !o)
            return vkg_error_set(err, VKG_ERR_FORMAT, "rope_scaling (llama3) needs low_freq_factor, high_freq_factor "
                                 "and original_max_position_embeddings");
    }
    return VKG_OK;
}

/* bos/eos: an int, a list or null (none).  The first of a list is the model's token: generation
 * stops at every id of the list (generation_config.c reads the list whole). */
static vkg_status read_token(const vkg_json *root, const char *key, int *id, vkg_llama_config *c, vkg_error *err) {
    int32_t ids[VKG_CONFIG_MAX_TOKEN_IDS];
    int n = 0, found = 0;
    vkg_status st = vkg_config_token_list(root, key, c->vocab_size, ids, VKG_CONFIG_MAX_TOKEN_IDS, &n, &found, c->note,
                                          sizeof c->note, err);
    if (st == VKG_OK && found) *id = n ? ids[0] : VKG_NO_TOKEN;
    return st;
}

/* Which layers attend within the sliding window, as each class decides. */
static vkg_status read_window(const vkg_json *root, vkg_llama_config *c, vkg_error *err) {
    int window = c->sliding_window, found = 0, use = 0, max_window_layers = 28;
    vkg_status st;
    if ((st = vkg_config_int(root, "sliding_window", &window, &found, err))) return st;
    const vkg_json *v = vkg_json_get(root, "sliding_window");
    if (v && vkg_json_type_of(v) == VKG_JSON_NULL) window = 0;
    c->sliding_window = window;
    if (window < 0)
        return vkg_error_set(err, VKG_ERR_FORMAT, "sliding_window is %d; it must be positive or null", window);
    memset(c->windowed, 0, sizeof c->windowed);
    if (c->arch == VKG_LLAMA_ARCH_LLAMA) {
        c->sliding_window = 0; /* LlamaConfig has no window */
        return VKG_OK;
    }
    if (c->arch == VKG_LLAMA_ARCH_MISTRAL) {
        for (int i = 0; i < c->n_layer && window; i++) c->windowed[i] = 1;
        return VKG_OK;
    }
    /* Qwen2, Qwen3: the window exists only with use_sliding_window; layer_types, when given,
     * says per layer, else the layers from max_window_layers on use it. */
    if ((st = vkg_config_bool(root, "use_sliding_window", &use, err)) ||
        (st = vkg_config_int(root, "max_window_layers", &max_window_layers, NULL, err)))
        return st;
    if (!use) {
        c->sliding_window = 0;
        return VKG_OK;
    }
    const vkg_json *types = vkg_json_get(root, "layer_types");
    if (types && vkg_json_type_of(types) != VKG_JSON_NULL) {
        if (vkg_json_type_of(types) != VKG_JSON_ARRAY || vkg_json_length(types) != (size_t)c->n_layer)
            return vkg_error_set(err, VKG_ERR_FORMAT, "\"layer_types\" must list one type per layer (%d)", c->n_layer);
        for (int i = 0; i < c->n_layer; i++) {
            const char *s = vkg_json_string(vkg_json_at(types, (size_t)i), NULL);
            if (s && strcmp(s, "sliding_attention") == 0) c->windowed[i] = window > 0;
            else if (!s || strcmp(s, "full_attention") != 0)
                return vkg_error_set(err, VKG_ERR_UNSUPPORTED, "layer_types[%d] is %s%.40s%s; supported: "
                                     "\"full_attention\", \"sliding_attention\"", i, s ? "\"" : "a non-string",
                                     s ? s : "", s ? "\"" : "");
        }
        return VKG_OK;
    }
    for (int i = max_window_layers < 0 ? 0 : max_window_layers; i < c->n_layer && window; i++) c->windowed[i] = 1;
    return VKG_OK;
}

/* Keys whose values change the math in ways not built: refused by name unless harmless. */
static vkg_status check_refused(const vkg_json *root, vkg_llama_config *c, vkg_error *err) {
    char act[32] = "silu";
    vkg_status st = vkg_config_string(root, "hidden_act", act, sizeof act, NULL, err);
    if (st != VKG_OK) return st;
    if (strcmp(act, "silu") != 0 && strcmp(act, "swish") != 0)
        return vkg_error_set(err, VKG_ERR_UNSUPPORTED, "hidden_act \"%s\" is not supported (supported: silu)", act);
    double partial = 1.0;
    if ((st = vkg_config_number(root, "partial_rotary_factor", &partial, NULL, err))) return st;
    if (partial != 1.0)
        return vkg_error_set(err, VKG_ERR_UNSUPPORTED, "partial_rotary_factor %g is not supported (only 1: every "
                             "channel of a head rotates)", partial);
    (void)c;
    return VKG_OK;
}

static vkg_status parse(const vkg_json *root, vkg_llama_config *c, vkg_error *err) {
    if (vkg_json_type_of(root) != VKG_JSON_OBJECT)
        return vkg_error_set(err, VKG_ERR_FORMAT, "the file holds a JSON %s, expected an object",
                             vkg_json_type_name(vkg_json_type_of(root)));
    char type[40] = "";
    int found = 0;
    vkg_status st = vkg_config_string(root, "model_type", type, sizeof type, &found, err);
    if (st != VKG_OK) return st;
    if (!found) {
        const vkg_json *a = vkg_json_get(root, "architectures");
        const char *s = vkg_json_type_of(a) == VKG_JSON_ARRAY ? vkg_json_string(vkg_json_at(a, 0), NULL) : NULL;
        if (s) snprintf(type, sizeof type, "%s", s);
    }
    const int arch = vkg_llama_arch_find(type);
    if (arch < 0) return vkg_error_set(err, VKG_ERR_UNSUPPORTED, "model_type \"%s\" is not of the Llama family", type);
    vkg_llama_config_default(c, (vkg_llama_arch)arch);
    int kv_found = 0, hd_found = 0;
    double eps = c->rms_norm_eps;
    if ((st = vkg_config_int(root, "hidden_size", &c->hidden_size, NULL, err)) ||
        (st = vkg_config_int(root, "intermediate_size", &c->intermediate_size, NULL, err)) ||
        (st = vkg_config_int(root, "num_hidden_layers", &c->n_layer, NULL, err)) ||
        (st = vkg_config_int(root, "num_attention_heads", &c->n_head, NULL, err)) ||
        (st = vkg_config_int(root, "num_key_value_heads", &c->n_kv_head, &kv_found, err)) ||
        (st = vkg_config_int(root, "head_dim", &c->head_dim, &hd_found, err)) ||
        (st = vkg_config_int(root, "max_position_embeddings", &c->n_positions, NULL, err)) ||
        (st = vkg_config_int(root, "vocab_size", &c->vocab_size, NULL, err)) ||
        (st = vkg_config_number(root, "rms_norm_eps", &eps, NULL, err)) ||
        (st = vkg_config_number(root, "rope_theta", &c->rope.theta, NULL, err)) ||
        (st = vkg_config_bool(root, "tie_word_embeddings", &c->tie_word_embeddings, err)) ||
        (st = check_refused(root, c, err)))
        return st;
    c->rms_norm_eps = eps;
    if ((st = check_range("num_hidden_layers", c->n_layer, 1, VKG_LLAMA_MAX_LAYERS, err)) ||
        (st = check_range("num_attention_heads", c->n_head, 1, MAX_HEADS, err)) ||
        (st = check_range("vocab_size", c->vocab_size, 1, MAX_VOCAB, err)))
        return st;
    /* num_key_value_heads null means one per query head; absent, the class default (Mistral's 8) */
    if (!kv_found && (c->arch != VKG_LLAMA_ARCH_MISTRAL || vkg_json_get(root, "num_key_value_heads")))
        c->n_kv_head = c->n_head;
    /* head_dim: given, else hidden_size / num_attention_heads (Qwen3 keeps its 128) */
    if (!hd_found && c->arch != VKG_LLAMA_ARCH_QWEN3) c->head_dim = c->hidden_size / c->n_head;
    int attention_bias = 0;
    if (c->arch == VKG_LLAMA_ARCH_LLAMA || c->arch == VKG_LLAMA_ARCH_QWEN3) {
        if ((st = vkg_config_bool(root, "attention_bias", &attention_bias, err))) return st;
        c->qkv_bias = c->o_bias = attention_bias;
    }
    if (c->arch == VKG_LLAMA_ARCH_LLAMA && (st = vkg_config_bool(root, "mlp_bias", &c->mlp_bias, err))) return st;
    int dt_found = 0;
    if ((st = vkg_config_string(root, "torch_dtype", c->torch_dtype, sizeof c->torch_dtype, &dt_found, err)) ||
        (!dt_found && (st = vkg_config_string(root, "dtype", c->torch_dtype, sizeof c->torch_dtype, NULL, err))) ||
        (st = read_rope_scaling(root, c, err)) || (st = read_window(root, c, err)) ||
        (st = read_token(root, "bos_token_id", &c->bos_token_id, c, err)) ||
        (st = read_token(root, "eos_token_id", &c->eos_token_id, c, err)))
        return st;
    return vkg_llama_config_validate(c, err);
}

vkg_status vkg_llama_config_load(const char *path, vkg_llama_config *c, vkg_error *err) {
    vkg_json *root = NULL;
    vkg_status st = vkg_json_parse_file(path, &root, err);
    if (st != VKG_OK) return st;
    vkg_error local = {0};
    st = parse(root, c, &local);
    vkg_json_free(root);
    if (st != VKG_OK) return vkg_error_set(err, st, "%s: %s", path, local.message);
    return VKG_OK;
}

static const char *tok(int id, char *buf, size_t size) {
    if (id == VKG_NO_TOKEN) return "null";
    snprintf(buf, size, "%d", id);
    return buf;
}

/* An optional number of rope_scaling: "null" where it is 0 (transformers' default), else v. */
static const char *number_or_null(double v, char *buf, size_t size) {
    if (v == 0.0) return "null";
    snprintf(buf, size, "%.17g", v);
    return buf;
}

vkg_status vkg_llama_config_write(const char *path, const vkg_llama_config *c, vkg_error *err) {
    vkg_status st = vkg_llama_config_validate(c, err);
    if (st != VKG_OK) return st;
    FILE *f = fopen(path, "w");
    if (!f) return vkg_error_set(err, VKG_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    char bos[16], eos[16], rope[512] = "null";
    const vkg_rope_config *r = &c->rope;
    if (r->type == VKG_ROPE_YARN) {
        char af[32], bf[32], bs[32], ms[32], ma[32];
        snprintf(rope, sizeof rope, "{\"attention_factor\": %s, \"beta_fast\": %s, \"beta_slow\": %s, \"factor\": "
                 "%.17g, \"mscale\": %s, \"mscale_all_dim\": %s, \"original_max_position_embeddings\": %.17g, "
                 "\"rope_type\": \"yarn\", \"truncate\": %s}", number_or_null(r->attention_factor, af, sizeof af),
                 number_or_null(r->beta_fast, bf, sizeof bf), number_or_null(r->beta_slow, bs, sizeof bs), r->factor,
                 number_or_null(r->mscale, ms, sizeof ms), number_or_null(r->mscale_all_dim, ma, sizeof ma),
                 r->original_max_position_embeddings, r->no_truncate ? "false" : "true");
    } else if (c->rope.type == VKG_ROPE_LINEAR || c->rope.type == VKG_ROPE_DYNAMIC)
        snprintf(rope, sizeof rope, "{\"factor\": %.17g, \"rope_type\": \"%s\"}", c->rope.factor,
                 vkg_rope_type_name(c->rope.type));
    else if (c->rope.type == VKG_ROPE_LLAMA3)
        snprintf(rope, sizeof rope, "{\"factor\": %.17g, \"high_freq_factor\": %.17g, \"low_freq_factor\": %.17g, "
                 "\"original_max_position_embeddings\": %.17g, \"rope_type\": \"llama3\"}", c->rope.factor,
                 c->rope.high_freq_factor, c->rope.low_freq_factor, c->rope.original_max_position_embeddings);
    fprintf(f, "{\n  \"architectures\": [\"%s\"],\n  \"model_type\": \"%s\",\n", vkg_llama_arch_class(c->arch),
            vkg_llama_arch_name(c->arch));
    fprintf(f, "  \"attention_dropout\": 0.0,\n  \"bos_token_id\": %s,\n  \"eos_token_id\": %s,\n",
            tok(c->bos_token_id, bos, sizeof bos), tok(c->eos_token_id, eos, sizeof eos));
    fprintf(f, "  \"head_dim\": %d,\n  \"hidden_act\": \"silu\",\n  \"hidden_size\": %d,\n"
               "  \"initializer_range\": 0.02,\n  \"intermediate_size\": %d,\n  \"max_position_embeddings\": %d,\n",
            c->head_dim, c->hidden_size, c->intermediate_size, c->n_positions);
    if (c->arch == VKG_LLAMA_ARCH_LLAMA || c->arch == VKG_LLAMA_ARCH_QWEN3)
        fprintf(f, "  \"attention_bias\": %s,\n", c->qkv_bias ? "true" : "false");
    if (c->arch == VKG_LLAMA_ARCH_LLAMA)
        fprintf(f, "  \"mlp_bias\": %s,\n  \"pretraining_tp\": 1,\n", c->mlp_bias ? "true" : "false");
    int first_windowed = c->n_layer;
    for (int i = c->n_layer - 1; i >= 0; i--)
        if (c->windowed[i]) first_windowed = i;
    if (c->arch == VKG_LLAMA_ARCH_MISTRAL && c->sliding_window)
        fprintf(f, "  \"sliding_window\": %d,\n", c->sliding_window);
    else if (c->arch == VKG_LLAMA_ARCH_MISTRAL)
        fprintf(f, "  \"sliding_window\": null,\n");
    if (c->arch == VKG_LLAMA_ARCH_QWEN2 || c->arch == VKG_LLAMA_ARCH_QWEN3)
        fprintf(f, "  \"max_window_layers\": %d,\n  \"sliding_window\": %d,\n  \"use_sliding_window\": %s,\n",
                first_windowed, c->sliding_window ? c->sliding_window : c->n_positions,
                c->sliding_window ? "true" : "false");
    fprintf(f, "  \"num_attention_heads\": %d,\n  \"num_hidden_layers\": %d,\n  \"num_key_value_heads\": %d,\n"
               "  \"rms_norm_eps\": %.17g,\n  \"rope_scaling\": %s,\n  \"rope_theta\": %.17g,\n"
               "  \"tie_word_embeddings\": %s,\n  \"torch_dtype\": \"%s\",\n  \"use_cache\": true,\n"
               "  \"vocab_size\": %d\n}\n",
            c->n_head, c->n_layer, c->n_kv_head, c->rms_norm_eps, rope, c->rope.theta,
            c->tie_word_embeddings ? "true" : "false", c->torch_dtype[0] ? c->torch_dtype : "float32", c->vocab_size);
    int failed = ferror(f);
    if (fclose(f) != 0) failed = 1;
    if (failed) return vkg_error_set(err, VKG_ERR_IO, "%s: write failed: %s", path, strerror(errno));
    return VKG_OK;
}
