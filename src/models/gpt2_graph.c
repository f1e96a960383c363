/* GPT-2's forward pass as a graph (see gpt2.h for the shapes and the cache layout). */
#include "models/gpt2.h"

#include "base/error.h"
#include "models/gpt2_weights.h"
#include "models/layers.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* What the builders share: the layers' graph and name prefix, the model and the options. */
typedef struct builder {
    vkg_layers L;
    vkg_graph *g;
    const vkg_gpt2 *m;
    const vkg_forward_options *o;
    int64_t T, C, H, D, S;
} builder;

static vkg_tensor named(builder *b, vkg_tensor t, const char *what) { return vkg_layers_name(&b->L, t, what); }

/* The matmul flags that read weight w as the linear layer x @ W it is. */
static unsigned linear_flags(const builder *b, vkg_gpt2_weight w) {
    return vkg_gpt2_held_transposed(b->m, w) ? VKG_TRANSPOSE_B : 0;
}

/* Weight w (of layer `layer`, for a layer's) as a constant named and shaped as the weight table
 * says: a matrix in the model's weight dtype (f32, f16 or bf16), or a vector in f32; [out, in]
 * where it is held transposed. */
static vkg_tensor weight(builder *b, vkg_gpt2_weight w, int layer) {
    const vkg_gpt2_weight_spec *s = &vkg_gpt2_weights[w];
    const vkg_gpt2_config *c = &b->m->config;
    const int64_t d0 = vkg_gpt2_dim_size(c, s->d0), d1 = vkg_gpt2_dim_size(c, s->d1);
    const int t = vkg_gpt2_held_transposed(b->m, w);
    return vkg_layers_weight(&b->L, s->name, b->m->weight_dtype, t ? d1 : d0, t ? d0 : d1,
                             vkg_gpt2_weight_data(b->m, w, layer));
}

/* activation_function, computed as transformers computes it (gpt2_config.h lists the names). */
static vkg_activation_fn activation(vkg_gpt2_activation a) {
    switch (a) {
    case VKG_GPT2_ACT_GELU_TANH: return vkg_gelu;
    case VKG_GPT2_ACT_GELU_ERF: return vkg_gelu_erf;
    case VKG_GPT2_ACT_QUICK_GELU: return vkg_quick_gelu;
    case VKG_GPT2_ACT_SILU: return vkg_silu;
    case VKG_GPT2_ACT_RELU: return vkg_relu;
    default: return NULL; /* the loader refuses other names */
    }
}

/* What the scores q k^T of a layer are multiplied by: 1 / sqrt(D) unless scale_attn_weights is
 * off, and 1 / (layer + 1) too with scale_attn_by_inverse_layer_idx.  transformers divides by the
 * two one after the other; one product differs from that by a rounding, far below fp32 noise. */
static float score_scale(const builder *b, int layer) {
    const vkg_gpt2_config *c = &b->m->config;
    double s = c->scale_attn_weights ? 1.0 / sqrt((double)b->D) : 1.0;
    if (c->scale_attn_by_inverse_layer_idx) s /= (double)(layer + 1);
    return (float)s;
}

static vkg_tensor block(builder *b, int layer, vkg_tensor x, vkg_forward_graph *gg) {
    vkg_layers *L = &b->L;
    const int64_t C = b->C;
    const float eps = b->m->config.layer_norm_epsilon;
    vkg_layers_prefix(L, "h.%d.", layer);

    /* x += c_proj(attention(ln_1(x))), q, k, v side by side in one c_attn projection */
    vkg_tensor a = vkg_layer_layernorm(L, x, weight(b, VKG_GPT2_LN_1_W, layer),
                                       weight(b, VKG_GPT2_LN_1_B, layer), eps, "ln_1");
    vkg_tensor qkv = vkg_layer_linear(L, a, weight(b, VKG_GPT2_ATTN_W, layer),
                                      weight(b, VKG_GPT2_ATTN_B, layer), linear_flags(b, VKG_GPT2_ATTN_W),
                                      "attn.c_attn");
    const vkg_attention at = {.n_head = b->H, .n_kv_head = b->H, .head_dim = b->D, .scale = score_scale(b, layer),
                              .causal = 1, .mask = VKG_NONE, .rope = VKG_NONE,
                              .kv_cache = b->S ? gg->kv_cache[layer] : VKG_NONE, .pos = gg->pos,
                              .slot = gg->seq_slots ? gg->seq_slots[0] : 0,
                              .rows = gg->seqs > 1 ? gg->seqs : 0, .row_pos = gg->row_pos, .row_slots = gg->seq_slots,
                              .row_tokens = gg->seq_tokens};
    vkg_tensor probs = VKG_NONE;
    vkg_tensor heads = vkg_layer_attention(L, &at, qkv, 0, qkv, C, qkv, 2 * C, &probs);
    vkg_tensor proj = vkg_layer_linear(L, heads, weight(b, VKG_GPT2_ATTN_PROJ_W, layer),
                                       weight(b, VKG_GPT2_ATTN_PROJ_B, layer), linear_flags(b, VKG_GPT2_ATTN_PROJ_W),
                                       "attn.c_proj");
    x = named(b, vkg_add(b->g, x, proj), "residual_1");

    /* x += mlp(ln_2(x)) */
    vkg_tensor m = vkg_layer_layernorm(L, x, weight(b, VKG_GPT2_LN_2_W, layer),
                                       weight(b, VKG_GPT2_LN_2_B, layer), eps, "ln_2");
    const vkg_mlp mlp = {.up_w = weight(b, VKG_GPT2_FC_W, layer), .up_b = weight(b, VKG_GPT2_FC_B, layer),
                         .gate_w = VKG_NONE, .gate_b = VKG_NONE,
                         .down_w = weight(b, VKG_GPT2_MLP_PROJ_W, layer),
                         .down_b = weight(b, VKG_GPT2_MLP_PROJ_B, layer),
                         .act = activation(b->m->activation),
                         .flags = linear_flags(b, VKG_GPT2_FC_W), /* c_fc and c_proj: both Conv1D */
                         .up_name = "mlp.c_fc", .act_name = "mlp.act", .down_name = "mlp.c_proj"};
    m = vkg_layer_mlp(L, m, &mlp);
    x = named(b, vkg_add(b->g, x, m), "residual_2");

    vkg_layer_attention_output(L, b->o, gg, layer, probs);
    return x;
}

vkg_status vkg_gpt2_build_graph(const void *model, const vkg_forward_options *o, vkg_forward_graph *gg,
                                vkg_error *err) {
    const vkg_gpt2 *m = model;
    const vkg_gpt2_config *c = &m->config;
    if (m->activation == VKG_GPT2_ACT_UNKNOWN)
        return vkg_error_set(err, VKG_ERR_UNSUPPORTED, "gpt2: activation_function \"%.31s\" is not supported "
                             "(supported: %s)", c->activation, vkg_gpt2_activation_names());
    builder b = {.m = m, .o = o, .T = o->tokens, .C = c->n_embd, .H = c->n_head, .D = c->n_embd / c->n_head,
                 .S = o->cache_len};
    vkg_graph *g = b.g = b.L.g = gg->graph;

    vkg_layer_forward_inputs(g, o, gg, c->n_layer, b.H, b.D, "h.", "kv_cache");

    b.L.prefix[0] = '\0'; /* the embedding and the head have no layer prefix */
    vkg_tensor wte = weight(&b, VKG_GPT2_WTE, 0);
    vkg_tensor tok = named(&b, vkg_embedding(g, wte, gg->ids), "embed.wte");
    vkg_tensor pos = named(&b, vkg_embedding(g, weight(&b, VKG_GPT2_WPE, 0), gg->positions),
                           "embed.wpe");
    vkg_tensor x = named(&b, vkg_add(g, tok, pos), "embed.sum");
    /* Without logits only the layers up to the last attention asked for are built: with a cache
     * their k/v writes would keep every later layer alive, and no run of this graph reads them. */
    const int layers = o->no_logits && o->attention_layer >= 0 ? o->attention_layer + 1 : c->n_layer;
    for (int i = 0; i < layers; i++) x = block(&b, i, x, gg);

    b.L.prefix[0] = '\0'; /* the embedding and the head have no layer prefix */
    gg->logits = VKG_NONE;
    if (!o->no_logits) {
        x = vkg_layer_logit_rows(&b.L, o, gg, x); /* the head only where it is read */
        x = vkg_layer_layernorm(&b.L, x, weight(&b, VKG_GPT2_LN_F_W, 0),
                                weight(&b, VKG_GPT2_LN_F_B, 0), c->layer_norm_epsilon, "ln_f");
        vkg_tensor head = m->tied_head ? wte : weight(&b, VKG_GPT2_LM_HEAD, 0);
        gg->logits = vkg_layer_linear(&b.L, x, head, VKG_NONE, VKG_TRANSPOSE_B, "logits");
        vkg_output(g, "logits", gg->logits);
    }
    return VKG_OK; /* the graph's status is checked by vkg_decoder_build */
}
