/* The Llama family's weight table (see llama_weights.h). */
#include "models/llama_weights.h"

#include <stdio.h>

#define M(n, a, b, i) {n, VKG_LLAMA_DIM_##a, VKG_LLAMA_DIM_##b, 1, VKG_LLAMA_INIT_##i}
const vkg_llama_weight_spec vkg_llama_weights[VKG_LLAMA_N_WEIGHTS] = {
    [VKG_LLAMA_EMBED] = {"model.embed_tokens.weight", VKG_LLAMA_DIM_V, VKG_LLAMA_DIM_C, 0, VKG_LLAMA_INIT_EMBED},
    [VKG_LLAMA_ATTN_NORM] = M("input_layernorm.weight", C, NONE, NORM),
    [VKG_LLAMA_Q_W] = M("self_attn.q_proj.weight", Q, C, IN),
    [VKG_LLAMA_Q_B] = M("self_attn.q_proj.bias", Q, NONE, BIAS),
    [VKG_LLAMA_K_W] = M("self_attn.k_proj.weight", KV, C, IN),
    [VKG_LLAMA_K_B] = M("self_attn.k_proj.bias", KV, NONE, BIAS),
    [VKG_LLAMA_V_W] = M("self_attn.v_proj.weight", KV, C, IN),
    [VKG_LLAMA_V_B] = M("self_attn.v_proj.bias", KV, NONE, BIAS),
    [VKG_LLAMA_O_W] = M("self_attn.o_proj.weight", C, Q, OUT),
    [VKG_LLAMA_O_B] = M("self_attn.o_proj.bias", C, NONE, BIAS),
    [VKG_LLAMA_Q_NORM] = M("self_attn.q_norm.weight", D, NONE, NORM),
    [VKG_LLAMA_K_NORM] = M("self_attn.k_norm.weight", D, NONE, NORM),
    [VKG_LLAMA_MLP_NORM] = M("post_attention_layernorm.weight", C, NONE, NORM),
    [VKG_LLAMA_GATE_W] = M("mlp.gate_proj.weight", I, C, IN),
    [VKG_LLAMA_GATE_B] = M("mlp.gate_proj.bias", I, NONE, BIAS),
    [VKG_LLAMA_UP_W] = M("mlp.up_proj.weight", I, C, IN),
    [VKG_LLAMA_UP_B] = M("mlp.up_proj.bias", I, NONE, BIAS),
    [VKG_LLAMA_DOWN_W] = M("mlp.down_proj.weight", C, I, OUT),
    [VKG_LLAMA_DOWN_B] = M("mlp.down_proj.bias", C, NONE, BIAS),
    [VKG_LLAMA_NORM] = {"model.norm.weight", VKG_LLAMA_DIM_C, VKG_LLAMA_DIM_NONE, 0, VKG_LLAMA_INIT_NORM},
    [VKG_LLAMA_LM_HEAD] = {"lm_head.weight", VKG_LLAMA_DIM_V, VKG_LLAMA_DIM_C, 0, VKG_LLAMA_INIT_EMBED},
};
#undef M

int64_t vkg_llama_dim_size(const vkg_llama_config *c, vkg_llama_dim d) {
    switch (d) {
    case VKG_LLAMA_DIM_C: return c->hidden_size;
    case VKG_LLAMA_DIM_Q: return (int64_t)c->n_head * c->head_dim;
    case VKG_LLAMA_DIM_KV: return (int64_t)c->n_kv_head * c->head_dim;
    case VKG_LLAMA_DIM_D: return c->head_dim;
    case VKG_LLAMA_DIM_I: return c->intermediate_size;
    case VKG_LLAMA_DIM_V: return c->vocab_size;
    default: return 0;
    }
}

int vkg_llama_weight_present(const vkg_llama_config *c, vkg_llama_weight w, int tied_head) {
    switch (w) {
    case VKG_LLAMA_Q_B: case VKG_LLAMA_K_B: case VKG_LLAMA_V_B: return c->qkv_bias;
    case VKG_LLAMA_O_B: return c->o_bias;
    case VKG_LLAMA_Q_NORM: case VKG_LLAMA_K_NORM: return c->qk_norm;
    case VKG_LLAMA_GATE_B: case VKG_LLAMA_UP_B: case VKG_LLAMA_DOWN_B: return c->mlp_bias;
    case VKG_LLAMA_LM_HEAD: return !tied_head;
    default: return w < VKG_LLAMA_N_WEIGHTS;
    }
}

const char *vkg_llama_weight_name(vkg_llama_weight w, int layer, char *buf, size_t size) {
    if (vkg_llama_weights[w].per_layer) snprintf(buf, size, "model.layers.%d.%s", layer, vkg_llama_weights[w].name);
    else snprintf(buf, size, "%s", vkg_llama_weights[w].name);
    return buf;
}

int64_t vkg_llama_weights_numel(const vkg_llama_config *c, int tied_head) {
    int64_t n = 0;
    for (int w = 0; w < VKG_LLAMA_N_WEIGHTS; w++) {
        if (!vkg_llama_weight_present(c, (vkg_llama_weight)w, tied_head)) continue;
        const vkg_llama_weight_spec *s = &vkg_llama_weights[w];
        int64_t e = vkg_llama_dim_size(c, s->d0) * (s->d1 == VKG_LLAMA_DIM_NONE ? 1 : vkg_llama_dim_size(c, s->d1));
        n += s->per_layer ? e * c->n_layer : e;
    }
    return n;
}
