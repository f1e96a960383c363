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
#include "models/random_tensors.h"

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

typedef struct drawing {
    vkg_random_tensors *s;
    const char *prefix;
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
        snprintf(name, sizeof name, "%sh.%d.attn.bias", d->prefix, layer);
        if ((st = vkg_random_tensors_add(d->s, name, 4, tril, VKG_FILL_TRIL, 0.0f, 0.0f, d->err)) != VKG_OK) return st;
        snprintf(name, sizeof name, "%sh.%d.attn.masked_bias", d->prefix, layer);
        if ((st = vkg_random_tensors_add(d->s, name, 0, tril, VKG_FILL_CONSTANT, -1e4f, 0.0f, d->err)) != VKG_OK)
            return st;
    }
    if (spec->optional) { /* the head: only untied, and Hugging Face keeps it outside "transformer." */
        if (!d->o->untied_lm_head) return VKG_OK;
        d->prefix = "";
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
    char bare[80];
    snprintf(name, sizeof name, "%s%s", d->prefix, vkg_gpt2_weight_name(w, layer, bare, sizeof bare));
    return vkg_random_tensors_add(d->s, name, spec->d1 == VKG_GPT2_DIM_NONE ? 1 : 2, shape, VKG_FILL_NORMAL, mean, std,
                                  d->err);
}

static vkg_status build_tensors(vkg_random_tensors *s, const vkg_gpt2_random_options *o, vkg_error *err) {
    drawing d = {.s = s, .o = o, .err = err, .prefix = o->prefix_transformer ? "transformer." : ""};
    return vkg_gpt2_weights_each(o->config.n_layer, draw, &d);
}

vkg_status vkg_gpt2_write_random(const char *dir, const vkg_gpt2_random_options *o, vkg_error *err) {
    if (!dir || !o) return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_gpt2_write_random: NULL argument");
    if (o->dtype != VKG_ST_F32 && o->dtype != VKG_ST_F16 && o->dtype != VKG_ST_BF16)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_gpt2_write_random: dtype %s; use F32, F16 or BF16",
                             vkg_st_dtype_name(o->dtype));
    vkg_status st = vkg_gpt2_config_validate(&o->config, err);
    if (st != VKG_OK) return st;
    if ((st = vkg_make_dirs(dir, err)) != VKG_OK) return st;

    size_t path_len = strlen(dir) + 32;
    char *path = malloc(path_len);
    if (!path) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
    snprintf(path, path_len, "%s/config.json", dir);
    st = vkg_gpt2_config_write_tied(path, &o->config, !o->untied_lm_head, err);

    vkg_random_tensors s;
    vkg_random_tensors_init(&s, o->dtype, o->seed);
    if (st == VKG_OK) st = build_tensors(&s, o, err);
    if (st == VKG_OK) st = vkg_random_tensors_write(&s, dir, 1, err);
    vkg_random_tensors_free(&s);
    free(path);
    return st;
}

int vkg_gpt2_dir_is_random(const char *dir) {
    char path[4096];
    struct stat sb;
    if (snprintf(path, sizeof path, "%s/%s", dir, VKG_GPT2_RANDOM_MARKER) >= (int)sizeof path) return 0;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}
