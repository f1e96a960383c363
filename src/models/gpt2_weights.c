/* GPT-2's weight table (see gpt2_weights.h). */
#include "models/gpt2_weights.h"

#include <stddef.h>
#include <stdio.h>

#define GLOBAL(place, field) VKG_GPT2_##place, .slot = offsetof(vkg_gpt2, field)
#define LAYER(field) VKG_GPT2_PER_LAYER, .slot = offsetof(vkg_gpt2_layer, field)
#define C VKG_GPT2_DIM_C
#define NONE VKG_GPT2_DIM_NONE

const vkg_gpt2_weight_spec vkg_gpt2_weights[VKG_GPT2_N_WEIGHTS] = {
    [VKG_GPT2_WTE] = {"wte.weight", VKG_GPT2_DIM_V, C, GLOBAL(BEFORE_LAYERS, wte), .init = VKG_GPT2_INIT_EMBED},
    [VKG_GPT2_WPE] = {"wpe.weight", VKG_GPT2_DIM_P, C, GLOBAL(BEFORE_LAYERS, wpe), .init = VKG_GPT2_INIT_EMBED},
    [VKG_GPT2_LN_1_W] = {"ln_1.weight", C, NONE, LAYER(ln_1_w), .init = VKG_GPT2_INIT_NORM_WEIGHT},
    [VKG_GPT2_LN_1_B] = {"ln_1.bias", C, NONE, LAYER(ln_1_b), .init = VKG_GPT2_INIT_NORM_BIAS},
    [VKG_GPT2_ATTN_W] = {"attn.c_attn.weight", C, VKG_GPT2_DIM_3C, LAYER(attn_w),
                         .conv1d = 1, .init = VKG_GPT2_INIT_WIDE},
    [VKG_GPT2_ATTN_B] = {"attn.c_attn.bias", VKG_GPT2_DIM_3C, NONE, LAYER(attn_b), .init = VKG_GPT2_INIT_SMALL},
    [VKG_GPT2_ATTN_PROJ_W] = {"attn.c_proj.weight", C, C, LAYER(attn_proj_w),
                              .conv1d = 1, .init = VKG_GPT2_INIT_SMALL},
    [VKG_GPT2_ATTN_PROJ_B] = {"attn.c_proj.bias", C, NONE, LAYER(attn_proj_b), .init = VKG_GPT2_INIT_SMALL},
    [VKG_GPT2_LN_2_W] = {"ln_2.weight", C, NONE, LAYER(ln_2_w), .init = VKG_GPT2_INIT_NORM_WEIGHT},
    [VKG_GPT2_LN_2_B] = {"ln_2.bias", C, NONE, LAYER(ln_2_b), .init = VKG_GPT2_INIT_NORM_BIAS},
    [VKG_GPT2_FC_W] = {"mlp.c_fc.weight", C, VKG_GPT2_DIM_I, LAYER(fc_w), .conv1d = 1, .init = VKG_GPT2_INIT_WIDE},
    [VKG_GPT2_FC_B] = {"mlp.c_fc.bias", VKG_GPT2_DIM_I, NONE, LAYER(fc_b), .init = VKG_GPT2_INIT_SMALL},
    [VKG_GPT2_MLP_PROJ_W] = {"mlp.c_proj.weight", VKG_GPT2_DIM_I, C, LAYER(mlp_proj_w),
                             .conv1d = 1, .init = VKG_GPT2_INIT_SMALL},
    [VKG_GPT2_MLP_PROJ_B] = {"mlp.c_proj.bias", C, NONE, LAYER(mlp_proj_b), .init = VKG_GPT2_INIT_SMALL},
    [VKG_GPT2_LN_F_W] = {"ln_f.weight", C, NONE, GLOBAL(AFTER_LAYERS, ln_f_w), .init = VKG_GPT2_INIT_NORM_WEIGHT},
    [VKG_GPT2_LN_F_B] = {"ln_f.bias", C, NONE, GLOBAL(AFTER_LAYERS, ln_f_b), .init = VKG_GPT2_INIT_NORM_BIAS},
    [VKG_GPT2_LM_HEAD] = {"lm_head.weight", VKG_GPT2_DIM_V, C, GLOBAL(AFTER_LAYERS, lm_head), .optional = 1,
                          .init = VKG_GPT2_INIT_EMBED},
};

#undef GLOBAL
#undef LAYER
#undef C
#undef NONE

int64_t vkg_gpt2_dim_size(const vkg_gpt2_config *c, vkg_gpt2_dim d) {
    switch (d) {
    case VKG_GPT2_DIM_NONE: return 0;
    case VKG_GPT2_DIM_C: return c->n_embd;
    case VKG_GPT2_DIM_3C: return 3 * (int64_t)c->n_embd;
    case VKG_GPT2_DIM_I: return vkg_gpt2_inner_size(c);
    case VKG_GPT2_DIM_V: return c->vocab_size;
    case VKG_GPT2_DIM_P: return c->n_positions;
    }
    return 0;
}

const char *vkg_gpt2_weight_name(vkg_gpt2_weight w, int layer, char *buf, size_t size) {
    const vkg_gpt2_weight_spec *s = &vkg_gpt2_weights[w];
    if (s->place == VKG_GPT2_PER_LAYER) snprintf(buf, size, "h.%d.%s", layer, s->name);
    else snprintf(buf, size, "%s", s->name);
    return buf;
}

/* The address of the pointer that holds w. */
static const void *const *slot_of(const vkg_gpt2 *m, vkg_gpt2_weight w, int layer) {
    const vkg_gpt2_weight_spec *s = &vkg_gpt2_weights[w];
    const char *base = s->place == VKG_GPT2_PER_LAYER ? (const char *)&m->layers[layer] : (const char *)m;
    return (const void *const *)(const void *)(base + s->slot);
}

const void *vkg_gpt2_weight_data(const vkg_gpt2 *m, vkg_gpt2_weight w, int layer) {
    const void *p = slot_of(m, w, layer);
    if (vkg_gpt2_weights[w].d1 == VKG_GPT2_DIM_NONE) return *(const float *const *)p;
    return *(const void *const *)p;
}

int vkg_gpt2_held_transposed(const vkg_gpt2 *m, vkg_gpt2_weight w) {
    return m->transposed && vkg_gpt2_weights[w].conv1d;
}

void vkg_gpt2_weight_set(vkg_gpt2 *m, vkg_gpt2_weight w, int layer, const void *data) {
    void *p = (void *)slot_of(m, w, layer);
    if (vkg_gpt2_weights[w].d1 == VKG_GPT2_DIM_NONE) *(const float **)p = data;
    else *(const void **)p = data;
}

static vkg_status each_placed(vkg_gpt2_place place, int layer, vkg_gpt2_weight_fn fn, void *user) {
    for (int w = 0; w < VKG_GPT2_N_WEIGHTS; w++) {
        if (vkg_gpt2_weights[w].place != place) continue;
        vkg_status st = fn(user, (vkg_gpt2_weight)w, layer);
        if (st != VKG_OK) return st;
    }
    return VKG_OK;
}

vkg_status vkg_gpt2_weights_each(int n_layer, vkg_gpt2_weight_fn fn, void *user) {
    vkg_status st = each_placed(VKG_GPT2_BEFORE_LAYERS, 0, fn, user);
    for (int i = 0; st == VKG_OK && i < n_layer; i++) st = each_placed(VKG_GPT2_PER_LAYER, i, fn, user);
    return st == VKG_OK ? each_placed(VKG_GPT2_AFTER_LAYERS, 0, fn, user) : st;
}

int64_t vkg_gpt2_weights_numel(const vkg_gpt2_config *c, int tied_head) {
    int64_t n = 0;
    for (int w = 0; w < VKG_GPT2_N_WEIGHTS; w++) {
        const vkg_gpt2_weight_spec *s = &vkg_gpt2_weights[w];
        if (w == VKG_GPT2_LM_HEAD && tied_head) continue;
        const int64_t d1 = s->d1 == VKG_GPT2_DIM_NONE ? 1 : vkg_gpt2_dim_size(c, s->d1);
        n += vkg_gpt2_dim_size(c, s->d0) * d1 * (s->place == VKG_GPT2_PER_LAYER ? c->n_layer : 1);
    }
    return n;
}
