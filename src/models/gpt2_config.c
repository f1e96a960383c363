/* GPT-2 config.json: read with defaults as Hugging Face's GPT2Config has them, check, write. */
#include "models/gpt2_config.h"

#include "base/error.h"
#include "base/json.h"
#include "models/config_keys.h"

#include <errno.h>
#include <pthread.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* Upper bounds that keep every size product the graph computes far from overflow; the largest
 * GPT-2 (xl: 48 layers, 25 heads, 1600 wide, 6400 inner, 1024 positions, 50257 tokens) is well
 * inside. */
#define MAX_LAYERS 4096
#define MAX_HEADS 4096
#define MAX_EMBD 65536
#define MAX_INNER (4 * MAX_EMBD)
#define MAX_POSITIONS (1 << 20)
#define MAX_VOCAB (1 << 24)

/* transformers' ACT2FN names for the functions vkgraph computes, exactly as transformers does. */
static const struct {
    const char *name;
    vkg_gpt2_activation kind;
} activations[] = {
    {"gelu_new", VKG_GPT2_ACT_GELU_TANH},      /* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))  */
    {"gelu_pytorch_tanh", VKG_GPT2_ACT_GELU_TANH}, /* the same, in torch's own kernel            */
    {"gelu_fast", VKG_GPT2_ACT_GELU_TANH},     /* written as x * 0.7978845608 * (1 + 0.044715 x^2) */
    {"gelu_accurate", VKG_GPT2_ACT_GELU_TANH}, /* the same formula again                          */
    {"gelu", VKG_GPT2_ACT_GELU_ERF},           /* torch's exact gelu: 0.5 x (1 + erf(x / sqrt 2))  */
    {"gelu_python", VKG_GPT2_ACT_GELU_ERF},    /* the same, written out                           */
    {"quick_gelu", VKG_GPT2_ACT_QUICK_GELU},   /* x sigmoid(1.702 x)                              */
    {"silu", VKG_GPT2_ACT_SILU},               /* x sigmoid(x)                                    */
    {"swish", VKG_GPT2_ACT_SILU},
    {"relu", VKG_GPT2_ACT_RELU},
};
#define N_ACTIVATIONS (sizeof activations / sizeof activations[0])

vkg_gpt2_activation vkg_gpt2_activation_kind(const char *activation) {
    for (size_t i = 0; activation && i < N_ACTIVATIONS; i++)
        if (strcmp(activation, activations[i].name) == 0) return activations[i].kind;
    return VKG_GPT2_ACT_UNKNOWN;
}

/* The names of the table above, ", "-separated, written once (pthread_once: any thread may ask
 * first), so the list in messages cannot drift from what is accepted. */
static char activation_names[256];

static void write_activation_names(void) {
    size_t used = 0;
    for (size_t i = 0; i < N_ACTIVATIONS && used < sizeof activation_names; i++)
        used += (size_t)snprintf(activation_names + used, sizeof activation_names - used, "%s%s", i ? ", " : "",
                                 activations[i].name);
}

const char *vkg_gpt2_activation_names(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, write_activation_names);
    return activation_names;
}

void vkg_gpt2_config_default(vkg_gpt2_config *c) {
    memset(c, 0, sizeof *c);
    c->n_layer = 12;
    c->n_head = 12;
    c->n_embd = 768;
    c->n_positions = 1024;
    c->vocab_size = 50257;
    c->layer_norm_epsilon = 1e-5f;
    snprintf(c->activation, sizeof c->activation, "gelu_new");
    c->scale_attn_weights = 1;
    c->bos_token_id = c->eos_token_id = 50256;
}

int vkg_gpt2_inner_size(const vkg_gpt2_config *c) { return c->n_inner ? c->n_inner : 4 * c->n_embd; }

static vkg_status check_range(const char *key, int value, int lo, int hi, vkg_error *err) {
    if (value < lo || value > hi)
        return vkg_error_set(err, VKG_ERR_FORMAT, "%s is %d; it must be between %d and %d", key, value, lo, hi);
    return VKG_OK;
}

static int token_ok(int id, int vocab_size) { return id == VKG_GPT2_NO_TOKEN || (id >= 0 && id < vocab_size); }

vkg_status vkg_gpt2_config_validate(const vkg_gpt2_config *c, vkg_error *err) {
    if (!c) return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_gpt2_config_validate: NULL config");
    vkg_status st;
    if ((st = check_range("n_layer", c->n_layer, 1, MAX_LAYERS, err)) ||
        (st = check_range("n_head", c->n_head, 1, MAX_HEADS, err)) ||
        (st = check_range("n_embd", c->n_embd, 1, MAX_EMBD, err)) ||
        (st = check_range("n_positions", c->n_positions, 1, MAX_POSITIONS, err)) ||
        (st = check_range("vocab_size", c->vocab_size, 1, MAX_VOCAB, err)) ||
        (c->n_inner && (st = check_range("n_inner", c->n_inner, 1, MAX_INNER, err))))
        return st;
    if (c->n_embd % c->n_head != 0)
        return vkg_error_set(err, VKG_ERR_FORMAT, "n_embd %d is not divisible by n_head %d (each head gets n_embd / n_head "
                             "channels)", c->n_embd, c->n_head);
    if (!(c->layer_norm_epsilon > 0.0f) || !isfinite(c->layer_norm_epsilon))
        return vkg_error_set(err, VKG_ERR_FORMAT, "layer_norm_epsilon is %g; it must be a positive finite number",
                             (double)c->layer_norm_epsilon);
    if (!memchr(c->activation, '\0', sizeof c->activation) || !vkg_gpt2_activation_kind(c->activation))
        return vkg_error_set(err, VKG_ERR_UNSUPPORTED, "activation_function \"%.31s\" is not supported (supported: %s)",
                             c->activation, vkg_gpt2_activation_names());
    if (!token_ok(c->bos_token_id, c->vocab_size) || !token_ok(c->eos_token_id, c->vocab_size))
        return vkg_error_set(err, VKG_ERR_FORMAT,
                             "bos_token_id %d / eos_token_id %d must lie in the vocabulary [0, %d) or be %d (none)",
                             c->bos_token_id, c->eos_token_id, c->vocab_size, VKG_GPT2_NO_TOKEN);
    return VKG_OK;
}

static vkg_status read_required(const vkg_json *root, const char *key, int *out, vkg_error *err) {
    int found;
    vkg_status st = vkg_config_int(root, key, out, &found, err);
    if (st == VKG_OK && !found) return vkg_error_set(err, VKG_ERR_FORMAT, "missing \"%s\"", key);
    return st;
}

/* Settings that change the network beyond what this library builds: refused. */
static vkg_status check_architecture(const vkg_json *root, vkg_error *err) {
    const vkg_json *v = vkg_json_get(root, "model_type");
    if (v && vkg_json_type_of(v) != VKG_JSON_NULL &&
        (!vkg_json_string(v, NULL) || strcmp(vkg_json_string(v, NULL), "gpt2") != 0))
        return vkg_error_set(err, VKG_ERR_UNSUPPORTED, "model_type is %s%.40s%s, not \"gpt2\"",
                             vkg_json_string(v, NULL) ? "\"" : "a JSON ",
                             vkg_json_string(v, NULL) ? vkg_json_string(v, NULL) : vkg_json_type_name(vkg_json_type_of(v)),
                             vkg_json_string(v, NULL) ? "\"" : "");
    int cross = 0;
    vkg_status st = vkg_config_bool(root, "add_cross_attention", &cross, err);
    if (st != VKG_OK) return st;
    if (cross)
        return vkg_error_set(err, VKG_ERR_UNSUPPORTED, "\"add_cross_attention\": true is not supported (a GPT-2 with "
                             "cross-attention to an encoder is a decoder of an encoder-decoder model)");
    v = vkg_json_get(root, "pruned_heads");
    if (vkg_json_type_of(v) == VKG_JSON_OBJECT && vkg_json_length(v) > 0)
        return vkg_error_set(err, VKG_ERR_UNSUPPORTED, "\"pruned_heads\" is not empty: models with pruned attention "
                             "heads are not supported");
    return VKG_OK;
}

/* An id outside the vocabulary becomes VKG_GPT2_NO_TOKEN, and the note says what that means. */
static void drop_foreign_token(vkg_gpt2_config *c, const char *key, int *id, const char *consequence) {
    if (*id == VKG_GPT2_NO_TOKEN || (*id >= 0 && *id < c->vocab_size)) return;
    size_t used = strlen(c->note);
    snprintf(c->note + used, sizeof c->note - used, "%s%s %d lies outside the vocabulary [0, %d); %s",
             used ? "; " : "", key, *id, c->vocab_size, consequence);
    *id = VKG_GPT2_NO_TOKEN;
}

static vkg_status read_tokens(const vkg_json *root, vkg_gpt2_config *c, vkg_error *err) {
    static const char *const keys[2] = {"bos_token_id", "eos_token_id"};
    int *ids[2] = {&c->bos_token_id, &c->eos_token_id};
    for (int i = 0; i < 2; i++) {
        const vkg_json *v = vkg_json_get(root, keys[i]);
        int found;
        vkg_status st = vkg_config_int(root, keys[i], ids[i], &found, err);
        if (st != VKG_OK) return st;
        if (v && !found) *ids[i] = VKG_GPT2_NO_TOKEN; /* present as null: the model has none */
    }
    drop_foreign_token(c, "bos_token_id", &c->bos_token_id, "an empty prompt has no start token");
    drop_foreign_token(c, "eos_token_id", &c->eos_token_id, "generation will not stop at it");
    return VKG_OK;
}

static vkg_status read_activation(const vkg_json *root, vkg_gpt2_config *c, vkg_error *err) {
    /* read wider than the field, so that a long unknown name is refused with the supported list */
    char name[64] = "";
    int found;
    vkg_error local;
    vkg_status st = vkg_config_string(root, "activation_function", name, sizeof name, &found, &local);
    if (st == VKG_ERR_UNSUPPORTED) /* longer than the buffer, or a NUL inside: no name of the list */
        snprintf(name, sizeof name, "%s", vkg_json_string(vkg_json_get(root, "activation_function"), NULL));
    else if (st != VKG_OK)
        return vkg_error_set(err, st, "%s", local.message);
    if (!found && st == VKG_OK) return VKG_OK;
    if (st != VKG_OK || strlen(name) >= sizeof c->activation || !vkg_gpt2_activation_kind(name))
        return vkg_error_set(err, VKG_ERR_UNSUPPORTED, "activation_function \"%.40s\" is not supported (supported: %s)",
                             name, vkg_gpt2_activation_names());
    memset(c->activation, 0, sizeof c->activation); /* no stale bytes: configs compare with memcmp */
    memcpy(c->activation, name, strlen(name));
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
        (st = vkg_config_int(root, "n_positions", &c->n_positions, &found, err)) ||
        (st = vkg_config_int(root, "n_ctx", &n_ctx, &found_ctx, err)))
        return st;
    if (!found) {
        if (!found_ctx) return vkg_error_set(err, VKG_ERR_FORMAT, "missing \"n_positions\" (or the older \"n_ctx\")");
        c->n_positions = n_ctx;
    }
    if ((st = vkg_config_int(root, "n_inner", &c->n_inner, &found, err)) != VKG_OK) return st;
    if (found && c->n_inner < 1)
        return vkg_error_set(err, VKG_ERR_FORMAT, "n_inner is %d; it must be positive, or null for 4 * n_embd",
                             c->n_inner);

    double eps = c->layer_norm_epsilon;
    if ((st = vkg_config_number(root, "layer_norm_epsilon", &eps, NULL, err)) != VKG_OK) return st;
    c->layer_norm_epsilon = (float)eps;
    if ((st = read_activation(root, c, err)) ||
        (st = vkg_config_bool(root, "scale_attn_weights", &c->scale_attn_weights, err)) ||
        (st = vkg_config_bool(root, "scale_attn_by_inverse_layer_idx", &c->scale_attn_by_inverse_layer_idx, err)) ||
        (st = vkg_config_bool(root, "reorder_and_upcast_attn", &c->reorder_and_upcast_attn, err)) ||
        (st = check_architecture(root, err)))
        return st;
    /* Sizes first: the ids are judged against vocab_size, and n_inner against its bounds. */
    if ((st = check_range("vocab_size", c->vocab_size, 1, MAX_VOCAB, err)) != VKG_OK) return st;
    if ((st = read_tokens(root, c, err)) != VKG_OK) return st;
    return vkg_gpt2_config_validate(c, err);
}

vkg_status vkg_gpt2_config_load(const char *path, vkg_gpt2_config *cfg, vkg_error *err) {
    if (!path || !cfg) return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_gpt2_config_load: NULL argument");
    memset(cfg, 0, sizeof *cfg);
    vkg_json *root = NULL;
    vkg_status st = vkg_json_parse_file(path, &root, err); /* its messages name the file */
    if (st != VKG_OK) return st;
    /* Only the keys every config names are left to read; the rest start at GPT2Config's defaults. */
    vkg_gpt2_config c;
    vkg_gpt2_config_default(&c);
    c.n_layer = c.n_head = c.n_embd = c.n_positions = c.vocab_size = 0;
    vkg_error local;
    st = parse_config(root, &c, &local);
    vkg_json_free(root);
    if (st != VKG_OK) return vkg_error_set(err, st, "%s: %s", path, local.message);
    *cfg = c;
    return VKG_OK;
}

/* "null" for VKG_GPT2_NO_TOKEN (and n_inner 0), else the number, into buf. */
static const char *int_or_null(int value, int null_value, char *buf, size_t size) {
    if (value == null_value) return "null";
    snprintf(buf, size, "%d", value);
    return buf;
}

vkg_status vkg_gpt2_config_write_tied(const char *path, const vkg_gpt2_config *c, int tie_word_embeddings,
                                      vkg_error *err) {
    if (!path || !c) return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_gpt2_config_write: NULL argument");
    vkg_status st = vkg_gpt2_config_validate(c, err);
    if (st != VKG_OK) return st;
    FILE *f = fopen(path, "w");
    if (!f) return vkg_error_set(err, VKG_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    char bos[16], eos[16], inner[16];
    /* %.9g prints a float exactly enough to read back the same float. */
    fprintf(f,
            "{\n"
            "  \"architectures\": [\"GPT2LMHeadModel\"],\n"
            "  \"model_type\": \"gpt2\",\n"
            "  \"activation_function\": \"%s\",\n"
            "  \"bos_token_id\": %s,\n"
            "  \"eos_token_id\": %s,\n"
            "  \"layer_norm_epsilon\": %.9g,\n"
            "  \"n_ctx\": %d,\n"
            "  \"n_embd\": %d,\n"
            "  \"n_head\": %d,\n"
            "  \"n_inner\": %s,\n"
            "  \"n_layer\": %d,\n"
            "  \"n_positions\": %d,\n"
            "  \"reorder_and_upcast_attn\": %s,\n"
            "  \"scale_attn_by_inverse_layer_idx\": %s,\n"
            "  \"scale_attn_weights\": %s,\n"
            "  \"tie_word_embeddings\": %s,\n"
            "  \"vocab_size\": %d\n"
            "}\n",
            c->activation, int_or_null(c->bos_token_id, VKG_GPT2_NO_TOKEN, bos, sizeof bos),
            int_or_null(c->eos_token_id, VKG_GPT2_NO_TOKEN, eos, sizeof eos), (double)c->layer_norm_epsilon,
            c->n_positions, c->n_embd, c->n_head, int_or_null(c->n_inner, 0, inner, sizeof inner), c->n_layer,
            c->n_positions, c->reorder_and_upcast_attn ? "true" : "false",
            c->scale_attn_by_inverse_layer_idx ? "true" : "false", c->scale_attn_weights ? "true" : "false",
            tie_word_embeddings ? "true" : "false", c->vocab_size);
    int failed = ferror(f);
    if (fclose(f) != 0) failed = 1;
    if (failed) return vkg_error_set(err, VKG_ERR_IO, "%s: write failed: %s", path, strerror(errno));
    return VKG_OK;
}

vkg_status vkg_gpt2_config_write(const char *path, const vkg_gpt2_config *cfg, vkg_error *err) {
    return vkg_gpt2_config_write_tied(path, cfg, 1, err);
}
