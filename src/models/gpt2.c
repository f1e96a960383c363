/* Loading GPT-2 weights from a Hugging Face folder: config.json + model.safetensors. */
#include "models/gpt2.h"

#include "base/error.h"
#include "base/json.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* One tensor the model needs: its name (without prefix), shape, and where its pointer goes. */
typedef struct wanted {
    char name[64];
    int ndim;
    int64_t shape[2];
    const float **slot;
    const vkg_st_tensor *found;
} wanted;

/* config.json's tie_word_embeddings (default true, as in Hugging Face's PretrainedConfig). */
static vkg_status read_tie(const char *path, int *tie, vkg_error *err) {
    vkg_json *root = NULL;
    vkg_status st = vkg_json_parse_file(path, &root, err);
    if (st != VKG_OK) return st;
    const vkg_json *v = vkg_json_get(root, "tie_word_embeddings");
    *tie = vkg_json_type_of(v) == VKG_JSON_BOOL ? vkg_json_bool(v) : 1;
    vkg_json_free(root);
    return VKG_OK;
}

static const vkg_st_tensor *find(const vkg_safetensors *st, const char *prefix, const char *name) {
    char full[96];
    snprintf(full, sizeof full, "%s%s", prefix, name);
    return vkg_safetensors_find(st, full);
}

static void want(wanted *w, int *n, const char *name, const float **slot, int64_t d0, int64_t d1) {
    wanted *x = &w[(*n)++];
    memset(x, 0, sizeof *x);
    snprintf(x->name, sizeof x->name, "%s", name);
    x->ndim = d1 ? 2 : 1;
    x->shape[0] = d0;
    x->shape[1] = d1;
    x->slot = slot;
}

/* The list of tensors for m's config; *n gets the count.  The caller frees the list. */
static wanted *list_tensors(vkg_gpt2 *m, int *n) {
    const vkg_gpt2_config *c = &m->config;
    const int64_t C = c->n_embd, V = c->vocab_size, P = c->n_positions, I = vkg_gpt2_inner_size(c);
    wanted *w = calloc((size_t)c->n_layer * 12 + 6, sizeof *w);
    if (!w) return NULL;
    *n = 0;
    want(w, n, "wte.weight", &m->wte, V, C);
    want(w, n, "wpe.weight", &m->wpe, P, C);
    for (int i = 0; i < c->n_layer; i++) {
        vkg_gpt2_layer *L = &m->layers[i];
        char name[64];
#define LAYER(suffix, slot, d0, d1) (snprintf(name, sizeof name, "h.%d.%s", i, suffix), want(w, n, name, slot, d0, d1))
        LAYER("ln_1.weight", &L->ln_1_w, C, 0);
        LAYER("ln_1.bias", &L->ln_1_b, C, 0);
        LAYER("attn.c_attn.weight", &L->attn_w, C, 3 * C);
        LAYER("attn.c_attn.bias", &L->attn_b, 3 * C, 0);
        LAYER("attn.c_proj.weight", &L->attn_proj_w, C, C);
        LAYER("attn.c_proj.bias", &L->attn_proj_b, C, 0);
        LAYER("ln_2.weight", &L->ln_2_w, C, 0);
        LAYER("ln_2.bias", &L->ln_2_b, C, 0);
        LAYER("mlp.c_fc.weight", &L->fc_w, C, I);
        LAYER("mlp.c_fc.bias", &L->fc_b, I, 0);
        LAYER("mlp.c_proj.weight", &L->mlp_proj_w, I, C);
        LAYER("mlp.c_proj.bias", &L->mlp_proj_b, C, 0);
#undef LAYER
    }
    want(w, n, "ln_f.weight", &m->ln_f_w, C, 0);
    want(w, n, "ln_f.bias", &m->ln_f_b, C, 0);
    return w;
}

/* Finds every tensor of the list and checks its shape and dtype. */
static vkg_status match_tensors(vkg_gpt2 *m, wanted *w, int n, const char *path, vkg_error *err) {
    const char *prefix = m->transformer_prefix ? "transformer." : "";
    for (int i = 0; i < n; i++) {
        char want_s[64], got_s[128];
        const vkg_st_tensor *t = find(m->file, prefix, w[i].name);
        if (!t) t = find(m->file, "", w[i].name);
        if (!t) {
            /* The config's sizes help when the file is of another model than config.json. */
            return vkg_error_set(err, VKG_ERR_FORMAT, "%s: tensor %s%s is missing (expected shape %s; config.json "
                                 "says n_layer %d, n_embd %d, n_inner %d, vocab_size %d, n_positions %d)",
                                 path, prefix, w[i].name,
                                 vkg_shape_str(w[i].ndim, w[i].shape, want_s, sizeof want_s), m->config.n_layer,
                                 m->config.n_embd, vkg_gpt2_inner_size(&m->config), m->config.vocab_size,
                                 m->config.n_positions);
        }
        int same = t->ndim == w[i].ndim;
        for (int d = 0; same && d < t->ndim; d++) same = t->shape[d] == w[i].shape[d];
        if (!same)
            return vkg_error_set(err, VKG_ERR_FORMAT, "%s: tensor %s has shape %s, expected %s (from config.json: "
                                 "n_embd %d, n_inner %d, vocab_size %d, n_positions %d)", path, t->name,
                                 vkg_shape_str(t->ndim, t->shape, got_s, sizeof got_s),
                                 vkg_shape_str(w[i].ndim, w[i].shape, want_s, sizeof want_s), m->config.n_embd,
                                 vkg_gpt2_inner_size(&m->config), m->config.vocab_size, m->config.n_positions);
        if (!vkg_st_dtype_convertible(t->dtype))
            return vkg_error_set(err, VKG_ERR_UNSUPPORTED, "%s: tensor %s is %s; only F32, F16 and BF16 weights are "
                                 "supported", path, t->name, vkg_st_dtype_name(t->dtype));
        w[i].found = t;
    }
    return VKG_OK;
}

/* F32 data aligned for float access is used where the mapping holds it. */
static int usable_in_place(const vkg_st_tensor *t) {
    return t->dtype == VKG_ST_F32 && ((uintptr_t)t->data % sizeof(float)) == 0;
}

/* A weight holding NaN or Inf would turn every answer into NaN (printed as token 0), so it is
 * refused at load, naming the first bad element.  One pass over floats already in memory, small
 * beside the upload and a single forward pass. */
static vkg_status check_finite(const char *path, const vkg_st_tensor *t, const float *v, vkg_error *err) {
    const size_t n = (size_t)vkg_st_tensor_numel(t);
    for (size_t i = 0; i < n; i++) {
        if (isfinite(v[i])) continue;
        const char *what = isnan(v[i]) ? "NaN" : v[i] > 0 ? "Inf" : "-Inf";
        char where[64] = "";
        if (t->ndim == 2)
            snprintf(where, sizeof where, " (row %zu, column %zu)", i / (size_t)t->shape[1], i % (size_t)t->shape[1]);
        return vkg_error_set(err, VKG_ERR_FORMAT, "%s: tensor %s holds %s at index %zu%s", path, t->name, what, i,
                             where);
    }
    return VKG_OK;
}

/* Points each slot at its data: in place, or converted into one allocation; checks each is finite. */
static vkg_status place_tensors(vkg_gpt2 *m, wanted *w, int n, const char *path, vkg_error *err) {
    size_t total = 0;
    for (int i = 0; i < n; i++)
        if (!usable_in_place(w[i].found)) total += (size_t)vkg_st_tensor_numel(w[i].found);
    if (total) {
        m->converted = malloc(total * sizeof(float));
        if (!m->converted)
            return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory converting the weights to f32 (%zu MB)",
                                 total * sizeof(float) >> 20);
        m->converted_floats = total;
    }
    size_t used = 0;
    for (int i = 0; i < n; i++) {
        const vkg_st_tensor *t = w[i].found;
        if (usable_in_place(t)) {
            *w[i].slot = t->data;
        } else {
            float *dst = m->converted + used;
            vkg_status st = vkg_st_tensor_to_f32(t, dst, err);
            if (st != VKG_OK) return st;
            *w[i].slot = dst;
            used += (size_t)vkg_st_tensor_numel(t);
        }
        vkg_status st = check_finite(path, t, *w[i].slot, err);
        if (st != VKG_OK) return st;
    }
    return VKG_OK;
}

/* A path dir/name, or NULL when out of memory. */
static char *join(const char *dir, const char *name) {
    size_t len = strlen(dir) + strlen(name) + 2;
    char *p = malloc(len);
    if (p) snprintf(p, len, "%s/%s", dir, name);
    return p;
}

static vkg_status check_folder(const char *dir, vkg_error *err) {
    struct stat sb;
    if (stat(dir, &sb) != 0)
        return vkg_error_set(err, VKG_ERR_IO, "%s: %s (expected a model folder holding config.json and "
                             "model.safetensors)", dir, strerror(errno));
    if (!S_ISDIR(sb.st_mode))
        return vkg_error_set(err, VKG_ERR_IO, "%s is not a folder (expected a model folder holding config.json and "
                             "model.safetensors)", dir);
    return VKG_OK;
}

static vkg_status load_into(vkg_gpt2 *m, const char *dir, vkg_error *err) {
    vkg_status st = check_folder(dir, err);
    if (st != VKG_OK) return st;
    char *config_path = join(dir, "config.json"), *weights_path = join(dir, "model.safetensors");
    if (!config_path || !weights_path) {
        free(config_path);
        free(weights_path);
        return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
    }
    struct stat sb;
    int tie = 1;
    if (stat(config_path, &sb) != 0)
        st = vkg_error_set(err, VKG_ERR_IO, "%s: no config.json (a Hugging Face GPT-2 folder holds config.json and "
                           "model.safetensors)", dir);
    if (st == VKG_OK) st = vkg_gpt2_config_load(config_path, &m->config, err); /* checks it, names the file */
    if (st == VKG_OK) st = read_tie(config_path, &tie, err);
    if (st == VKG_OK && stat(weights_path, &sb) != 0) {
        char *bin = join(dir, "pytorch_model.bin");
        int has_bin = bin && stat(bin, &sb) == 0;
        free(bin);
        st = vkg_error_set(err, VKG_ERR_IO, "%s: no model.safetensors%s", dir,
                           has_bin ? " (only pytorch_model.bin, which is not read: save the model with "
                                     "safe_serialization=True, or download model.safetensors)" : "");
    }
    if (st == VKG_OK) st = vkg_safetensors_open(weights_path, &m->file, err);
    if (st == VKG_OK) {
        m->transformer_prefix = vkg_safetensors_find(m->file, "transformer.wte.weight") != NULL;
        m->layers = calloc((size_t)m->config.n_layer, sizeof *m->layers);
        if (!m->layers) st = vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
    }
    int n = 0;
    wanted *w = st == VKG_OK ? list_tensors(m, &n) : NULL;
    if (st == VKG_OK && !w) st = vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
    if (st == VKG_OK) {
        /* The head: lm_head.weight when the file has it (never prefixed), else tied to wte. */
        m->tied_head = !vkg_safetensors_find(m->file, "lm_head.weight") &&
                       !vkg_safetensors_find(m->file, "transformer.lm_head.weight");
        if (!m->tied_head) {
            want(w, &n, "lm_head.weight", &m->lm_head, m->config.vocab_size, m->config.n_embd);
        } else if (!tie) {
            st = vkg_error_set(err, VKG_ERR_FORMAT, "%s: config.json sets tie_word_embeddings to false, but the file "
                               "has no lm_head.weight for the untied output head", weights_path);
        }
    }
    if (st == VKG_OK) st = match_tensors(m, w, n, weights_path, err);
    if (st == VKG_OK) {
        m->dtype = w[0].found->dtype;
        st = place_tensors(m, w, n, weights_path, err);
    }
    if (st == VKG_OK && m->tied_head) m->lm_head = m->wte;
    if (st == VKG_OK) {
        m->activation = vkg_gpt2_activation_kind(m->config.activation);
        snprintf(m->note, sizeof m->note, "%s", m->config.note);
    }
    free(w);
    free(config_path);
    free(weights_path);
    return st;
}

vkg_status vkg_gpt2_load(const char *dir, vkg_gpt2 **out, vkg_error *err) {
    *out = NULL;
    if (!dir) return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_gpt2_load: no folder given");
    vkg_gpt2 *m = calloc(1, sizeof *m);
    if (!m) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory loading %s", dir);
    vkg_status st = load_into(m, dir, err);
    if (st != VKG_OK) {
        vkg_gpt2_free(m);
        return st;
    }
    *out = m;
    return VKG_OK;
}

void vkg_gpt2_free(vkg_gpt2 *m) {
    if (!m) return;
    free(m->converted);
    free(m->layers);
    vkg_safetensors_close(m->file);
    free(m);
}

int64_t vkg_gpt2_parameter_count(const vkg_gpt2 *m) {
    return vkg_gpt2_config_parameter_count(&m->config, m->tied_head);
}

vkg_status vkg_gpt2_check_ids(const vkg_gpt2 *m, const int32_t *ids, size_t n, vkg_error *err) {
    if (n == 0) return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "the prompt is empty: give at least one token");
    if (n > (size_t)m->config.n_positions)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "the prompt has %zu tokens, more than the model's context "
                             "of %d positions (n_positions)", n, m->config.n_positions);
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= m->config.vocab_size)
            return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "token id %d at position %zu is outside the "
                                 "vocabulary [0, %d)", (int)ids[i], i, m->config.vocab_size);
    return VKG_OK;
}
