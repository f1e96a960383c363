/* A GPT-2 with random weights, for tests that need a whole model without downloading one.
 *
 * Scales.  GPT-2's own initialisation (every weight N(0, 0.02), layer norms at exactly 1 and 0)
 * makes a poor test model: with n_embd 32, query.key scores have a spread of about
 * 0.02^2 * C = 0.013, so every attention row is uniform and a bug in masking or softmax hides.
 * Instead (x below is the layer-normed input, about unit scale per channel):
 *   - c_attn and c_fc weights N(0, 1.5 / sqrt(C)): scores q.k / sqrt(d) then spread by about
 *     (1.5^2) = 2.25, so attention rows are peaked but not one-hot, and MLP pre-activations are
 *     of order 1, where gelu is curved;
 *   - output projections (attn.c_proj, mlp.c_proj) and every bias N(0, 0.02), as GPT-2, so the
 *     residual stream grows slowly through the layers;
 *   - wte, wpe (and an untied lm_head) N(0, 0.1): tokens and positions both shape attention, and
 *     the logits spread by about 0.1 * sqrt(C);
 *   - layer-norm weights 1 + N(0, 0.1) and biases N(0, 0.05): far enough from 1 and 0 that
 *     swapping or dropping gamma / beta changes the output visibly.
 */
#include "models/gpt2_random.h"

#include "base/error.h"
#include "models/gpt2_weights.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void vkg_gpt2_random_options_default(vkg_gpt2_random_options *o) {
    memset(o, 0, sizeof *o);
    vkg_gpt2_config_default(&o->config); /* gelu_new, eps 1e-5, n_inner null, scaled attention */
    o->config.n_layer = 2;
    o->config.n_head = 4;
    o->config.n_embd = 32;
    o->config.n_positions = 16;
    o->config.vocab_size = 64;
    o->config.bos_token_id = o->config.eos_token_id = 63;
    o->seed = 1;
    o->dtype = VKG_ST_F32;
}

static const struct gpt2_size {
    const char *name;
    int n_layer, n_head, n_embd, n_positions;
} sizes[] = {
    {"gpt2-tiny", 2, 4, 64, 128},
    {"gpt2", 12, 12, 768, 1024},
    {"gpt2-medium", 24, 16, 1024, 1024},
    {"gpt2-large", 36, 20, 1280, 1024},
    {"gpt2-xl", 48, 25, 1600, 1024},
};
enum { N_SIZES = sizeof sizes / sizeof sizes[0] };

const char *vkg_gpt2_random_size_names(void) {
    static char names[128];
    if (!names[0])
        for (int i = 0; i < N_SIZES; i++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "", sizes[i].name);
    return names;
}

vkg_status vkg_gpt2_random_size(const char *name, vkg_gpt2_random_options *o, vkg_error *err) {
    for (int i = 0; i < N_SIZES; i++) {
        if (strcmp(name, sizes[i].name) != 0) continue;
        vkg_gpt2_config *c = &o->config;
        c->n_layer = sizes[i].n_layer;
        c->n_head = sizes[i].n_head;
        c->n_embd = sizes[i].n_embd;
        c->n_positions = sizes[i].n_positions;
        c->n_inner = 0;
        c->vocab_size = 50257;
        c->bos_token_id = c->eos_token_id = 50256;
        return VKG_OK;
    }
    return vkg_error_set(err, VKG_ERR_NOT_FOUND, "no GPT-2 size '%s'; the sizes are %s", name,
                         vkg_gpt2_random_size_names());
}

/* The tensors being built: names and data are owned here until written. */
typedef struct tensor_set {
    vkg_st_write *items;
    int n, cap;
    vkg_st_dtype dtype;
    const char *prefix;
    vkg_rng rng;
} tensor_set;

static void tensor_set_free(tensor_set *s) {
    for (int i = 0; i < s->n; i++) {
        free((void *)s->items[i].name);
        free((void *)s->items[i].data);
    }
    free(s->items);
}

typedef enum fill_kind { FILL_NORMAL, FILL_TRIL, FILL_CONSTANT } fill_kind;

/* Adds a tensor named prefix + name: mean + N(0, std) (FILL_NORMAL), the lower triangle of ones
 * over the last two dimensions (FILL_TRIL), or `mean` everywhere (FILL_CONSTANT). */
static vkg_status add(tensor_set *s, const char *name, int ndim, const int64_t *shape, fill_kind kind, float mean,
                      float std, vkg_error *err) {
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 64;
        vkg_st_write *items = realloc(s->items, (size_t)cap * sizeof *items);
        if (!items) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory listing tensors");
        s->items = items;
        s->cap = cap;
    }
    size_t numel = 1;
    for (int d = 0; d < ndim; d++) numel *= (size_t)shape[d];
    float *x = malloc(numel * sizeof *x + 1);
    size_t name_len = strlen(s->prefix) + strlen(name) + 1;
    char *full = malloc(name_len);
    if (!x || !full) {
        free(x);
        free(full);
        return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory for tensor %s (%zu elements)", name, numel);
    }
    snprintf(full, name_len, "%s%s", s->prefix, name);
    if (kind == FILL_NORMAL) {
        vkg_rng_fill_normal(&s->rng, x, numel, std);
        for (size_t i = 0; i < numel; i++) x[i] += mean;
    } else if (kind == FILL_TRIL) {
        size_t cols = (size_t)shape[ndim - 1], rows = (size_t)shape[ndim - 2];
        for (size_t i = 0; i < numel; i++) x[i] = ((i / cols) % rows) >= (i % cols) ? 1.0f : 0.0f;
    } else {
        for (size_t i = 0; i < numel; i++) x[i] = mean;
    }
    void *data = x;
    if (s->dtype != VKG_ST_F32) {
        uint16_t *h = malloc(numel * sizeof *h + 1);
        if (!h) {
            free(x);
            free(full);
            return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory for tensor %s", name);
        }
        for (size_t i = 0; i < numel; i++) h[i] = s->dtype == VKG_ST_F16 ? vkg_f32_to_f16(x[i]) : vkg_f32_to_bf16(x[i]);
        free(x);
        data = h;
    }
    vkg_st_write *w = &s->items[s->n++];
    memset(w, 0, sizeof *w);
    w->name = full;
    w->dtype = s->dtype;
    w->ndim = ndim;
    memcpy(w->shape, shape, (size_t)ndim * sizeof *shape);
    w->data = data;
    return VKG_OK;
}

/* mkdir -p: creates dir and any missing parents. */
static vkg_status make_dirs(const char *dir, vkg_error *err) {
    char *path = strdup(dir);
    if (!path) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
    vkg_status st = VKG_OK;
    for (char *p = path + 1;; p++) {
        if (*p != '/' && *p != '\0') continue;
        char saved = *p;
        *p = '\0';
        if (mkdir(path, 0777) != 0 && errno != EEXIST) {
            st = vkg_error_set(err, VKG_ERR_IO, "%s: cannot create directory: %s", path, strerror(errno));
            break;
        }
        *p = saved;
        if (!saved) break;
    }
    free(path);
    struct stat sb;
    if (st == VKG_OK && (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)))
        st = vkg_error_set(err, VKG_ERR_IO, "%s: exists and is not a directory", dir);
    return st;
}

typedef struct drawing {
    tensor_set *s;
    const vkg_gpt2_random_options *o;
    vkg_error *err;
} drawing;

/* Writes one tensor of the weight table, drawn as its init class says (the scales: see the top of
 * this file); the buffers old checkpoints carry go before attn.c_attn.weight, where the attention
 * module's state dict lists them. */
static vkg_status draw(void *user, vkg_gpt2_weight w, int layer) {
    drawing *d = user;
    const vkg_gpt2_config *c = &d->o->config;
    const vkg_gpt2_weight_spec *spec = &vkg_gpt2_weights[w];
    const int64_t C = c->n_embd, P = c->n_positions;
    char name[96];
    vkg_status st;
    if (w == VKG_GPT2_ATTN_W && d->o->attn_bias_buffers) {
        const int64_t tril[4] = {1, 1, P, P};
        snprintf(name, sizeof name, "h.%d.attn.bias", layer);
        if ((st = add(d->s, name, 4, tril, FILL_TRIL, 0.0f, 0.0f, d->err)) != VKG_OK) return st;
        snprintf(name, sizeof name, "h.%d.attn.masked_bias", layer);
        if ((st = add(d->s, name, 0, tril, FILL_CONSTANT, -1e4f, 0.0f, d->err)) != VKG_OK) return st;
    }
    if (spec->optional) { /* the head: only untied, and Hugging Face keeps it outside "transformer." */
        if (!d->o->untied_lm_head) return VKG_OK;
        d->s->prefix = "";
    }
    float mean = 0.0f, std = 0.02f;
    switch (spec->init) {
    case VKG_GPT2_INIT_EMBED: std = 0.1f; break;
    case VKG_GPT2_INIT_NORM_WEIGHT: mean = 1.0f, std = 0.1f; break;
    case VKG_GPT2_INIT_NORM_BIAS: std = 0.05f; break;
    case VKG_GPT2_INIT_WIDE: std = 1.5f / sqrtf((float)C); break;
    case VKG_GPT2_INIT_SMALL: std = 0.02f; break;
    }
    const int64_t shape[2] = {vkg_gpt2_dim_size(c, spec->d0), vkg_gpt2_dim_size(c, spec->d1)};
    return add(d->s, vkg_gpt2_weight_name(w, layer, name, sizeof name), spec->d1 == VKG_GPT2_DIM_NONE ? 1 : 2, shape,
               FILL_NORMAL, mean, std, d->err);
}

static vkg_status build_tensors(tensor_set *s, const vkg_gpt2_random_options *o, vkg_error *err) {
    drawing d = {.s = s, .o = o, .err = err};
    return vkg_gpt2_weights_each(o->config.n_layer, draw, &d);
}

vkg_status vkg_gpt2_write_random(const char *dir, const vkg_gpt2_random_options *o, vkg_error *err) {
    if (!dir || !o) return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_gpt2_write_random: NULL argument");
    if (o->dtype != VKG_ST_F32 && o->dtype != VKG_ST_F16 && o->dtype != VKG_ST_BF16)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_gpt2_write_random: dtype %s; use F32, F16 or BF16",
                             vkg_st_dtype_name(o->dtype));
    vkg_status st = vkg_gpt2_config_validate(&o->config, err);
    if (st != VKG_OK) return st;
    if ((st = make_dirs(dir, err)) != VKG_OK) return st;

    size_t path_len = strlen(dir) + 32;
    char *path = malloc(path_len);
    if (!path) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
    snprintf(path, path_len, "%s/config.json", dir);
    st = vkg_gpt2_config_write_tied(path, &o->config, !o->untied_lm_head, err);

    tensor_set s;
    memset(&s, 0, sizeof s);
    s.dtype = o->dtype;
    s.prefix = o->prefix_transformer ? "transformer." : "";
    vkg_rng_seed(&s.rng, o->seed);
    if (st == VKG_OK) st = build_tensors(&s, o, err);
    if (st == VKG_OK) {
        snprintf(path, path_len, "%s/model.safetensors", dir);
        st = vkg_safetensors_write(path, s.items, s.n, err);
    }
    tensor_set_free(&s);
    free(path);
    return st;
}

int vkg_gpt2_dir_is_random(const char *dir) {
    char path[4096];
    struct stat sb;
    if (snprintf(path, sizeof path, "%s/%s", dir, VKG_GPT2_RANDOM_MARKER) >= (int)sizeof path) return 0;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}
