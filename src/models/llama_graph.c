/* The Llama family's forward pass as a graph (see llama.h for the shapes and the formulas). */
#include "models/llama.h"

#include "base/error.h"
#include "models/layers.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct builder {
    vkg_layers L;
    vkg_graph *g;
    const vkg_llama *m;
    const vkg_forward_options *o;
    int64_t T, C, H, Hkv, D, S;
    vkg_tensor cos, sin;        /* [T, 1, D]: the rotation of each of the run's positions */
} builder;

static vkg_tensor named(builder *b, vkg_tensor t, const char *what) { return vkg_layers_name(&b->L, t, what); }

/* Weight w of `layer` as a constant named by its module path: a matrix [out, in] in the model's
 * dtype, or a vector in f32. */
static vkg_tensor weight(builder *b, vkg_llama_weight w, int layer) {
    const vkg_llama_weight_spec *s = &vkg_llama_weights[w];
    const vkg_llama_config *c = &b->m->config;
    if (!vkg_llama_weight_present(c, w, b->m->tied_head)) return VKG_NONE;
    const void *data = s->per_layer ? b->m->layers[layer][w] : b->m->global[w];
    return vkg_layers_weight(&b->L, s->name, b->m->weight_dtype, vkg_llama_dim_size(c, s->d0),
                             vkg_llama_dim_size(c, s->d1), data);
}

static vkg_tensor linear(builder *b, vkg_tensor x, vkg_llama_weight w, vkg_llama_weight bias, int layer,
                         const char *name) {
    return vkg_layer_linear(&b->L, x, weight(b, w, layer), weight(b, bias, layer), VKG_TRANSPOSE_B, name);
}

/* The cos and sin rows of the run's positions, [T, 1, D] ([c, c] along D: rotate_half's layout),
 * looked up from the model's table [2, n_ctx, D/2]. */
static void rotations(builder *b, vkg_tensor positions) {
    vkg_graph *g = b->g;
    const int64_t half = b->D / 2, P = b->m->n_ctx;
    const int64_t tab[2] = {P, half}, rows[3] = {b->T, 1, b->D};
    vkg_tensor c = vkg_constant(g, "rope.cos", VKG_F32, 2, tab, b->m->rope);
    vkg_tensor s = vkg_constant(g, "rope.sin", VKG_F32, 2, tab, b->m->rope + P * half);
    c = named(b, vkg_embedding(g, c, positions), "rope.cos.rows");
    s = named(b, vkg_embedding(g, s, positions), "rope.sin.rows");
    b->cos = named(b, vkg_reshape(g, vkg_concat(g, c, c, 1), 3, rows), "rope.cos.full");
    b->sin = named(b, vkg_reshape(g, vkg_concat(g, s, s, 1), 3, rows), "rope.sin.full");
}

/* x [T, n, D] -> x cos + rotate_half(x) sin, rotate_half(x) = [-x2, x1] (transformers'). */
static vkg_tensor rope(builder *b, vkg_tensor x, const char *name) {
    vkg_graph *g = b->g;
    char what[64];
    const int64_t half = b->D / 2;
    vkg_tensor x1 = vkg_slice(g, x, 2, 0, half), x2 = vkg_slice(g, x, 2, half, half);
    snprintf(what, sizeof what, "%s.rotate_half", name);
    vkg_tensor rot = named(b, vkg_concat(g, vkg_scale(g, x2, -1.0f), x1, 2), what);
    vkg_tensor out = vkg_add(g, vkg_mul(g, x, b->cos), vkg_mul(g, rot, b->sin));
    return named(b, out, name);
}

/* q or k [T, n*D]: (Qwen3) RMSNorm over each head, then the rotation; back to [T, n*D]. */
static vkg_tensor position(builder *b, vkg_tensor x, int64_t n, vkg_llama_weight norm, int layer, const char *norm_name,
                           const char *rope_name) {
    const int64_t heads[3] = {b->T, n, b->D}, flat[2] = {b->T, n * b->D};
    x = vkg_reshape(b->g, x, 3, heads);
    if (b->m->config.qk_norm)
        x = vkg_layer_rmsnorm(&b->L, x, weight(b, norm, layer), (float)b->m->config.rms_norm_eps, norm_name);
    x = rope(b, x, rope_name);
    return vkg_reshape(b->g, x, 2, flat);
}

static vkg_tensor block(builder *b, int layer, vkg_tensor x, vkg_forward_graph *gg) {
    vkg_layers *L = &b->L;
    const float eps = (float)b->m->config.rms_norm_eps;
    vkg_layers_prefix(L, "model.layers.%d.", layer);

    vkg_tensor a = vkg_layer_rmsnorm(L, x, weight(b, VKG_LLAMA_ATTN_NORM, layer), eps, "input_layernorm");
    vkg_tensor q = linear(b, a, VKG_LLAMA_Q_W, VKG_LLAMA_Q_B, layer, "self_attn.q_proj");
    vkg_tensor k = linear(b, a, VKG_LLAMA_K_W, VKG_LLAMA_K_B, layer, "self_attn.k_proj");
    vkg_tensor v = linear(b, a, VKG_LLAMA_V_W, VKG_LLAMA_V_B, layer, "self_attn.v_proj");
    q = position(b, q, b->H, VKG_LLAMA_Q_NORM, layer, "self_attn.q_norm", "self_attn.rope_q");
    k = position(b, k, b->Hkv, VKG_LLAMA_K_NORM, layer, "self_attn.k_norm", "self_attn.rope_k");
    const vkg_attention at = {.n_head = b->H, .n_kv_head = b->Hkv, .head_dim = b->D,
                              .scale = (float)(1.0 / sqrt((double)b->D)), .causal = 1, .mask = VKG_NONE,
                              .kv_cache = b->S ? gg->kv_cache[layer] : VKG_NONE, .pos = gg->pos};
    vkg_tensor probs = VKG_NONE;
    vkg_tensor heads = vkg_layer_attention(L, &at, q, 0, k, 0, v, 0, &probs);
    vkg_tensor o = linear(b, heads, VKG_LLAMA_O_W, VKG_LLAMA_O_B, layer, "self_attn.o_proj");
    x = named(b, vkg_add(b->g, x, o), "residual_attn");

    vkg_tensor m = vkg_layer_rmsnorm(L, x, weight(b, VKG_LLAMA_MLP_NORM, layer), eps, "post_attention_layernorm");
    const vkg_mlp mlp = {.up_w = weight(b, VKG_LLAMA_UP_W, layer), .up_b = weight(b, VKG_LLAMA_UP_B, layer),
                         .gate_w = weight(b, VKG_LLAMA_GATE_W, layer), .gate_b = weight(b, VKG_LLAMA_GATE_B, layer),
                         .down_w = weight(b, VKG_LLAMA_DOWN_W, layer), .down_b = weight(b, VKG_LLAMA_DOWN_B, layer),
                         .act = vkg_silu, .flags = VKG_TRANSPOSE_B, .up_name = "mlp.up_proj",
                         .gate_name = "mlp.gate_proj", .act_name = "mlp.act_fn", .gated_name = "mlp.gated",
                         .down_name = "mlp.down_proj"};
    m = vkg_layer_mlp(L, m, &mlp);
    x = named(b, vkg_add(b->g, x, m), "residual_mlp");

    if (b->o->attention_layer == VKG_ALL_LAYERS || b->o->attention_layer == layer) {
        char name[32];
        snprintf(name, sizeof name, "attention.%d", layer);
        vkg_tensor out = probs;
        if (b->S && b->o->attention_keys > 0)
            out = named(b, vkg_slice(b->g, probs, 2, 0, b->o->attention_keys), "attn.softmax.slice");
        if (vkg_output(b->g, name, out) == VKG_OK) gg->attention[layer] = out;
    }
    return x;
}

vkg_status vkg_llama_build_graph(const void *model, const vkg_forward_options *o, vkg_forward_graph *gg,
                                 vkg_error *err) {
    (void)err;
    const vkg_llama *m = model;
    const vkg_llama_config *c = &m->config;
    builder b = {.m = m, .o = o, .T = o->tokens, .C = c->hidden_size, .H = c->n_head, .Hkv = c->n_kv_head,
                 .D = c->head_dim, .S = o->cache_len};
    vkg_graph *g = b.g = b.L.g = gg->graph;
    const int64_t tokens[1] = {b.T};
    gg->ids = vkg_input(g, "ids", VKG_I32, 1, tokens);
    gg->positions = vkg_input(g, "positions", VKG_I32, 1, tokens);
    gg->pos = VKG_NONE;
    if (b.S) {
        gg->pos = vkg_index(g, "pos");
        const int64_t cache_shape[4] = {2, b.Hkv, b.S, b.D};
        for (int i = 0; i < c->n_layer; i++) {
            char name[64];
            snprintf(name, sizeof name, "model.layers.%d.self_attn.kv_cache", i);
            gg->kv_cache[i] = vkg_state(g, name, 4, cache_shape);
        }
    }
    b.L.prefix[0] = '\0';
    rotations(&b, gg->positions);
    vkg_tensor embed = weight(&b, VKG_LLAMA_EMBED, 0);
    vkg_tensor x = named(&b, vkg_embedding(g, embed, gg->ids), "model.embed_tokens");
    const int layers = o->no_logits && o->attention_layer >= 0 ? o->attention_layer + 1 : c->n_layer;
    for (int i = 0; i < layers; i++) x = block(&b, i, x, gg);

    b.L.prefix[0] = '\0';
    gg->logits = VKG_NONE;
    if (!o->no_logits) {
        if (!o->all_logits && b.T > 1) x = named(&b, vkg_slice(g, x, 0, b.T - 1, 1), "last_position");
        x = vkg_layer_rmsnorm(&b.L, x, weight(&b, VKG_LLAMA_NORM, 0), (float)c->rms_norm_eps, "model.norm");
        vkg_tensor head = m->tied_head ? embed : weight(&b, VKG_LLAMA_LM_HEAD, 0);
        gg->logits = vkg_layer_linear(&b.L, x, head, VKG_NONE, VKG_TRANSPOSE_B, "lm_head");
        vkg_output(g, "logits", gg->logits);
    }
    return VKG_OK;
}
