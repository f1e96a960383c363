/* Llama-family checkpoints with random weights (see llama_random.h). */
#include "models/llama_random.h"

#include "base/error.h"
#include "models/checkpoint.h"
#include "models/llama_weights.h"
#include "models/random_tensors.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct shape {
    const char *name;
    vkg_llama_arch arch;
    int n_layer, hidden, heads, kv, head_dim, inner, vocab, positions;
    double theta;
    double eps;
    int tied, bos, eos;
} shapes[] = {
    {"llama-tiny", VKG_LLAMA_ARCH_LLAMA, 2, 64, 4, 2, 16, 96, 128, 512, 10000, 1e-5, 1, 1, 2},
    {"mistral-tiny", VKG_LLAMA_ARCH_MISTRAL, 2, 64, 4, 2, 16, 96, 128, 512, 10000, 1e-5, 0, 1, 2},
    {"qwen2-tiny", VKG_LLAMA_ARCH_QWEN2, 2, 64, 4, 2, 16, 96, 128, 512, 1000000, 1e-6, 1, 0, 1},
    {"qwen3-tiny", VKG_LLAMA_ARCH_QWEN3, 2, 64, 4, 2, 32, 96, 128, 512, 1000000, 1e-6, 1, 0, 1},
    {"smollm2-135m", VKG_LLAMA_ARCH_LLAMA, 30, 576, 9, 3, 64, 1536, 49152, 8192, 100000, 1e-5, 1, 1, 2},
    {"smollm-135m", VKG_LLAMA_ARCH_LLAMA, 30, 576, 9, 3, 64, 1536, 49152, 2048, 10000, 1e-5, 1, 0, 0},
    {"tinyllama-1.1b", VKG_LLAMA_ARCH_LLAMA, 22, 2048, 32, 4, 64, 5632, 32000, 2048, 10000, 1e-5, 0, 1, 2},
    {"llama-2-7b", VKG_LLAMA_ARCH_LLAMA, 32, 4096, 32, 32, 128, 11008, 32000, 4096, 10000, 1e-5, 0, 1, 2},
    {"llama-3.2-1b", VKG_LLAMA_ARCH_LLAMA, 16, 2048, 32, 8, 64, 8192, 128256, 131072, 500000, 1e-5, 1, 128000,
     128001},
    {"mistral-7b-v0.1", VKG_LLAMA_ARCH_MISTRAL, 32, 4096, 32, 8, 128, 14336, 32000, 32768, 10000, 1e-5, 0, 1, 2},
    {"qwen2.5-0.5b", VKG_LLAMA_ARCH_QWEN2, 24, 896, 14, 2, 64, 4864, 151936, 32768, 1000000, 1e-6, 1, 151643,
     151643},
    {"qwen3-0.6b", VKG_LLAMA_ARCH_QWEN3, 28, 1024, 16, 8, 128, 3072, 151936, 40960, 1000000, 1e-6, 1, 151643,
     151645},
};
enum { N_SHAPES = sizeof shapes / sizeof shapes[0] };

const char *vkg_llama_random_shape_names(void) {
    static char names[256];
    if (!names[0])
        for (int i = 0; i < N_SHAPES; i++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "", shapes[i].name);
    return names;
}

vkg_status vkg_llama_random_shape(const char *name, vkg_llama_random_options *o, vkg_error *err) {
    for (int i = 0; i < N_SHAPES; i++) {
        const struct shape *s = &shapes[i];
        if (strcmp(name, s->name) != 0) continue;
        vkg_llama_config *c = &o->config;
        vkg_llama_config_default(c, s->arch);
        c->n_layer = s->n_layer, c->hidden_size = s->hidden, c->n_head = s->heads, c->n_kv_head = s->kv;
        c->head_dim = s->head_dim, c->intermediate_size = s->inner, c->vocab_size = s->vocab;
        c->n_positions = s->positions, c->rope.theta = s->theta, c->rms_norm_eps = s->eps;
        c->tie_word_embeddings = s->tied, c->bos_token_id = s->bos, c->eos_token_id = s->eos;
        c->sliding_window = 0;
        if (strcmp(name, "mistral-7b-v0.1") == 0) {
            c->sliding_window = 4096;
            for (int l = 0; l < c->n_layer; l++) c->windowed[l] = 1;
        }
        if (strcmp(name, "llama-3.2-1b") == 0) {
            c->rope.type = VKG_ROPE_LLAMA3;
            c->rope.factor = 32, c->rope.low_freq_factor = 1, c->rope.high_freq_factor = 4;
            c->rope.original_max_position_embeddings = 8192;
        }
        return VKG_OK;
    }
    return vkg_error_set(err, VKG_ERR_NOT_FOUND, "no Llama-family shape '%s'; the shapes are %s", name,
                         vkg_llama_random_shape_names());
}

static vkg_status draw(vkg_random_tensors *s, const vkg_llama_config *c, int tied, vkg_llama_weight w, int layer,
                       vkg_error *err) {
    if (!vkg_llama_weight_present(c, w, tied)) return VKG_OK;
    const vkg_llama_weight_spec *spec = &vkg_llama_weights[w];
    float mean = 0.0f, std = 0.02f;
    switch (spec->init) {
    case VKG_LLAMA_INIT_EMBED: std = 0.1f; break;
    case VKG_LLAMA_INIT_NORM: mean = 1.0f, std = 0.1f; break;
    case VKG_LLAMA_INIT_IN: std = 1.5f / sqrtf((float)c->hidden_size); break;
    case VKG_LLAMA_INIT_OUT: std = 0.02f; break;
    case VKG_LLAMA_INIT_BIAS: std = 0.1f; break;
    }
    const int64_t shape[2] = {vkg_llama_dim_size(c, spec->d0), vkg_llama_dim_size(c, spec->d1)};
    char name[96];
    return vkg_random_tensors_add(s, vkg_llama_weight_name(w, layer, name, sizeof name),
                                  spec->d1 == VKG_LLAMA_DIM_NONE ? 1 : 2, shape, VKG_FILL_NORMAL, mean, std, err);
}

vkg_status vkg_llama_write_random(const char *dir, const vkg_llama_random_options *o, vkg_error *err) {
    if (o->dtype != VKG_ST_F32 && o->dtype != VKG_ST_F16 && o->dtype != VKG_ST_BF16)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "random weights: dtype %s; use F32, F16 or BF16",
                             vkg_st_dtype_name(o->dtype));
    vkg_llama_config c = o->config;
    snprintf(c.torch_dtype, sizeof c.torch_dtype, "%s",
             o->dtype == VKG_ST_BF16 ? "bfloat16" : o->dtype == VKG_ST_F16 ? "float16" : "float32");
    vkg_status st = vkg_llama_config_validate(&c, err);
    if (st == VKG_OK) st = vkg_make_dirs(dir, err);
    char *path = st == VKG_OK ? vkg_path_join(dir, "config.json") : NULL;
    if (st == VKG_OK && !path) st = vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
    if (st == VKG_OK) st = vkg_llama_config_write(path, &c, err);
    free(path);
    if (st != VKG_OK) return st;
    vkg_random_tensors s;
    vkg_random_tensors_init(&s, o->dtype, o->seed);
    const int tied = c.tie_word_embeddings;
    /* in the order of transformers' state dict: the embedding, each layer's, the norm, the head */
    st = draw(&s, &c, tied, VKG_LLAMA_EMBED, 0, err);
    for (int l = 0; st == VKG_OK && l < c.n_layer; l++)
        for (int w = 0; st == VKG_OK && w < VKG_LLAMA_N_WEIGHTS; w++)
            if (vkg_llama_weights[w].per_layer) st = draw(&s, &c, tied, (vkg_llama_weight)w, l, err);
    for (int l = 0; st == VKG_OK && o->rotary_buffers && l < c.n_layer; l++) {
        char name[96];
        const int64_t half = c.head_dim / 2;
        snprintf(name, sizeof name, "model.layers.%d.self_attn.rotary_emb.inv_freq", l);
        st = vkg_random_tensors_add(&s, name, 1, &half, VKG_FILL_CONSTANT, 1.0f, 0.0f, err);
    }
    if (st == VKG_OK) st = draw(&s, &c, tied, VKG_LLAMA_NORM, 0, err);
    if (st == VKG_OK) st = draw(&s, &c, tied, VKG_LLAMA_LM_HEAD, 0, err);
    if (st == VKG_OK) st = vkg_random_tensors_write(&s, dir, o->shards, err);
    vkg_random_tensors_free(&s);
    return st;
}
