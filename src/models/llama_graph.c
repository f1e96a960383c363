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
    vkg_tensor rope;            /* the cos/sin table's first rows [positions reached, D] */
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

/* q, k and v [T, (H + 2 Hkv) D] as one product: the loader lays their weights (and biases) one
 * after another (llama.c), so one constant spans the three; each column is the dot product the
 * separate projections would compute. */
static vkg_tensor qkv_proj(builder *b, vkg_tensor x, int layer) {
    const vkg_llama_config *c = &b->m->config;
    const int64_t rows = (b->H + 2 * b->Hkv) * b->D;
    const void *const *w = b->m->layers[layer];
    vkg_tensor weight = vkg_layers_weight(&b->L, "self_attn.qkv_proj.weight", b->m->weight_dtype, rows, b->C, w[VKG_LLAMA_Q_W]);
    vkg_tensor bias = c->qkv_bias ? vkg_layers_weight(&b->L, "self_attn.qkv_proj.bias", VKG_F32, rows, 0, w[VKG_LLAMA_Q_B]) : VKG_NONE;
    return vkg_layer_linear(&b->L, x, weight, bias, VKG_TRANSPOSE_B, "self_attn.qkv_proj");
}

/* Qwen3: q or k [T, n*D] through an RMSNorm of each head over D, back to [T, n*D]. */
static vkg_tensor head_norm(builder *b, vkg_tensor x, int64_t n, vkg_llama_weight norm, int layer, const char *name) {
    if (!b->m->config.qk_norm) return x;
    const int64_t heads[3] = {b->T, n, b->D}, flat[2] = {b->T, n * b->D};
    x = vkg_reshape(b->g, x, 3, heads);
    x = vkg_layer_rmsnorm(&b->L, x, weight(b, norm, layer), (float)b->m->config.rms_norm_eps, name);
    return vkg_reshape(b->g, x, 2, flat);
}

static vkg_tensor block(builder *b, int layer, vkg_tensor x, vkg_forward_graph *gg) {
    vkg_layers *L = &b->L;
    const float eps = (float)b->m->config.rms_norm_eps;
    vkg_layers_prefix(L, "model.layers.%d.", layer);

    vkg_tensor a = vkg_layer_rmsnorm(L, x, weight(b, VKG_LLAMA_ATTN_NORM, layer), eps, "input_layernorm");
    vkg_tensor qkv = qkv_proj(b, a, layer);
    const int64_t Q = b->H * b->D, KV = b->Hkv * b->D;
    vkg_tensor q = qkv, k = qkv, v = qkv;
    int64_t q_col = 0, k_col = Q, v_col = Q + KV;
    if (b->m->config.qk_norm) {
        q = head_norm(b, named(b, vkg_slice(b->g, qkv, 1, 0, Q), "self_attn.q"), b->H, VKG_LLAMA_Q_NORM, layer, "self_attn.q_norm");
        k = head_norm(b, named(b, vkg_slice(b->g, qkv, 1, Q, KV), "self_attn.k"), b->Hkv, VKG_LLAMA_K_NORM, layer, "self_attn.k_norm");
        k_col = 0;
    }
    const vkg_llama_config *c = &b->m->config;
    const vkg_attention at = {.n_head = b->H, .n_kv_head = b->Hkv, .head_dim = b->D,
                              .scale = (float)(1.0 / sqrt((double)b->D)), .causal = 1, .mask = VKG_NONE,
                              .window = c->windowed[layer] ? (uint32_t)c->sliding_window : 0, .rope = b->rope,
                              .kv_cache = b->S ? gg->kv_cache[layer] : VKG_NONE, .pos = gg->pos,
                              .slot = gg->seq_slots ? gg->seq_slots[0] : 0,
                              .rows = gg->seqs > 1 ? gg->seqs : 0, .row_pos = gg->row_pos, .row_slots = gg->seq_slots,
                              .row_tokens = gg->seq_tokens, .positions = &gg->positions};
    vkg_tensor probs = VKG_NONE;
    vkg_tensor heads = vkg_layer_attention(L, &at, q, q_col, k, k_col, v, v_col, &probs);
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

    vkg_layer_attention_output(L, b->o, gg, layer, probs);
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
    vkg_layer_forward_inputs(g, o, gg, c->n_layer, b.Hkv, b.D, "model.layers.", "self_attn.kv_cache");
    b.L.prefix[0] = '\0';
    /* The table's first rows, one for each position the graph can reach (its cache's, else its
     * tokens'): a model trained for a million positions of 128-wide heads has a 512 MiB table,
     * more than a binding holds, for a context that uses a few thousand of them. */
    const int64_t reach = o->cache_len ? o->cache_len : o->tokens;
    const int64_t table[2] = {reach < m->n_ctx ? reach : m->n_ctx, b.D};
    b.rope = vkg_constant(g, "rope.cos_sin", VKG_F32, 2, table, m->rope);
    vkg_tensor embed = weight(&b, VKG_LLAMA_EMBED, 0);
    vkg_tensor x = named(&b, vkg_embedding(g, embed, gg->ids), "model.embed_tokens");
    const int layers = o->no_logits && o->attention_layer >= 0 ? o->attention_layer + 1 : c->n_layer;
    for (int i = 0; i < layers; i++) x = block(&b, i, x, gg);

    b.L.prefix[0] = '\0';
    gg->logits = VKG_NONE;
    if (!o->no_logits) {
        x = vkg_layer_logit_rows(&b.L, o, gg, x); /* the head only where it is read */
        x = vkg_layer_rmsnorm(&b.L, x, weight(&b, VKG_LLAMA_NORM, 0), (float)c->rms_norm_eps, "model.norm");
        vkg_tensor head = m->tied_head ? embed : weight(&b, VKG_LLAMA_LM_HEAD, 0);
        gg->logits = vkg_layer_linear(&b.L, x, head, VKG_NONE, VKG_TRANSPOSE_B, "lm_head");
        vkg_output(g, "logits", gg->logits);
    }
    return VKG_OK;
}
