#include "vkgraph_lesson.h"

#include "base/error.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static float *uniform(vkg_rng *r, size_t n, float bound) {
    float *x = malloc(n * sizeof *x);
    if (x)
        for (size_t i = 0; i < n; i++) x[i] = (2.0f * vkg_rng_uniform(r) - 1.0f) * bound;
    return x;
}

static float *filled(size_t n, float v) {
    float *x = malloc(n * sizeof *x);
    if (x)
        for (size_t i = 0; i < n; i++) x[i] = v;
    return x;
}

vkg_status vkg_block_weights_init(vkg_block_weights *w, const vkg_block_config *cfg, uint64_t seed, vkg_error *err) {
    size_t C = (size_t)cfg->d_model, F = (size_t)cfg->d_ff;
    if (cfg->d_model < 1 || cfg->n_heads < 1 || cfg->d_ff < 1 || cfg->d_model % cfg->n_heads)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "block: d_model %d must be a positive multiple of "
                             "n_heads %d, and d_ff %d positive", cfg->d_model, cfg->n_heads, cfg->d_ff);
    vkg_rng r;
    vkg_rng_seed(&r, seed);
    float bc = 1.0f / sqrtf((float)C), bf = 1.0f / sqrtf((float)F);
    *w = (vkg_block_weights){
        .in_proj_w = uniform(&r, 3 * C * C, bc), .in_proj_b = uniform(&r, 3 * C, bc),
        .out_proj_w = uniform(&r, C * C, bc),    .out_proj_b = uniform(&r, C, bc),
        .norm1_w = filled(C, 1.0f),              .norm1_b = filled(C, 0.0f),
        .norm2_w = filled(C, 1.0f),              .norm2_b = filled(C, 0.0f),
        .ff1_w = uniform(&r, F * C, bc),         .ff1_b = uniform(&r, F, bc),
        .ff2_w = uniform(&r, C * F, bf),         .ff2_b = uniform(&r, C, bf),
    };
    float *all[] = {w->in_proj_w, w->in_proj_b, w->out_proj_w, w->out_proj_b, w->norm1_w, w->norm1_b,
                    w->norm2_w,   w->norm2_b,   w->ff1_w,      w->ff1_b,      w->ff2_w,   w->ff2_b};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (!all[i]) {
            vkg_block_weights_free(w);
            return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory for the block's weights");
        }
    return VKG_OK;
}

void vkg_block_weights_free(vkg_block_weights *w) {
    float *all[] = {w->in_proj_w, w->in_proj_b, w->out_proj_w, w->out_proj_b, w->norm1_w, w->norm1_b,
                    w->norm2_w,   w->norm2_b,   w->ff1_w,      w->ff1_b,      w->ff2_w,   w->ff2_b};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
    *w = (vkg_block_weights){0};
}

static vkg_tensor param(vkg_graph *g, const char *prefix, const char *name, const float *data, int64_t d0, int64_t d1) {
    char full[128];
    snprintf(full, sizeof full, "%s.%s", prefix, name);
    int64_t shape[2] = {d0, d1};
    return vkg_constant(g, full, VKG_F32, d1 ? 2 : 1, shape, data);
}

/* Names t "<prefix>.<what>" (PyTorch module paths: "block.attn.softmax", "block.ff.0") and
 * returns it; on a graph in error nothing happens. */
static vkg_tensor named(vkg_graph *g, const char *prefix, vkg_tensor t, const char *what) {
    char full[128];
    snprintf(full, sizeof full, "%s.%s", prefix, what);
    vkg_name(g, t, full);
    return t;
}

/* Columns [part * C, part * C + C) of x [.., T, 3C] as heads [.., H, T, D]: a view, no copy,
 * named "attn.q" (and "attn.q.slice", "attn.q.reshape" on the way). */
static vkg_tensor split_heads(vkg_graph *g, const char *prefix, vkg_tensor qkv, int part, int64_t lead, int64_t T,
                              int64_t H, int64_t D) {
    int64_t shape[4] = {lead, T, H, D};
    const int axes[4] = {0, 2, 1, 3};
    const char *which = part == 0 ? "attn.q" : part == 1 ? "attn.k" : "attn.v";
    char what[32];
    snprintf(what, sizeof what, "%s.slice", which);
    vkg_tensor x = named(g, prefix, vkg_slice(g, qkv, -1, part * H * D, H * D), what);
    snprintf(what, sizeof what, "%s.reshape", which);
    x = named(g, prefix, vkg_reshape(g, x, 4, shape), what);
    return named(g, prefix, vkg_permute(g, x, axes), which);
}

vkg_tensor vkg_block_build(vkg_graph *g, vkg_tensor x, const vkg_block_config *cfg, const vkg_block_weights *w,
                           const char *prefix, vkg_tensor *attn_probs) {
    int64_t shape[VKG_MAX_DIMS];
    int nd = vkg_tensor_shape(g, x, shape);
    int64_t C = cfg->d_model, H = cfg->n_heads, D = C / H, F = cfg->d_ff;
    int64_t T = nd >= 2 ? shape[nd - 2] : 1, lead = nd >= 3 ? shape[0] : 1;

    /* x + MultiHeadAttention(LayerNorm(x)) */
    vkg_tensor h = named(g, prefix, vkg_layernorm(g, x, param(g, prefix, "norm1.weight", w->norm1_w, C, 0),
                                                  param(g, prefix, "norm1.bias", w->norm1_b, C, 0), 1e-5f), "norm1");
    vkg_tensor qkv = named(g, prefix, vkg_matmul(g, h, param(g, prefix, "attn.in_proj_weight", w->in_proj_w, 3 * C, C),
                                                 param(g, prefix, "attn.in_proj_bias", w->in_proj_b, 3 * C, 0),
                                                 VKG_TRANSPOSE_B), "attn.in_proj");
    vkg_tensor q = split_heads(g, prefix, qkv, 0, lead, T, H, D);
    vkg_tensor k = split_heads(g, prefix, qkv, 1, lead, T, H, D);
    vkg_tensor v = split_heads(g, prefix, qkv, 2, lead, T, H, D);
    vkg_tensor scores = named(g, prefix, vkg_matmul(g, q, k, VKG_NONE, VKG_TRANSPOSE_B), "attn.scores");
    scores = named(g, prefix, vkg_scale(g, scores, 1.0f / sqrtf((float)D)), "attn.scale");
    if (cfg->causal) scores = named(g, prefix, vkg_mask_causal(g, scores, 0, VKG_NONE), "attn.mask");
    vkg_tensor probs = named(g, prefix, vkg_softmax(g, scores), "attn.softmax");
    if (attn_probs) *attn_probs = probs;
    const int back[4] = {0, 2, 1, 3};
    int64_t merged[3] = {lead, T, C};
    vkg_tensor heads = named(g, prefix, vkg_matmul(g, probs, v, VKG_NONE, 0), "attn.heads");
    heads = named(g, prefix, vkg_permute(g, heads, back), "attn.merge.permute");
    heads = named(g, prefix, vkg_reshape(g, heads, 3, merged), "attn.merge");
    vkg_tensor attn = named(g, prefix, vkg_matmul(g, heads, param(g, prefix, "attn.out_proj.weight", w->out_proj_w, C, C),
                                                  param(g, prefix, "attn.out_proj.bias", w->out_proj_b, C, 0),
                                                  VKG_TRANSPOSE_B), "attn.out_proj");
    if (nd == 2) attn = named(g, prefix, vkg_reshape(g, attn, 2, (int64_t[]){T, C}), "attn.out_proj.reshape");
    x = named(g, prefix, vkg_add(g, x, attn), "residual_1");

    /* x + FFN(LayerNorm(x)): ff is nn.Sequential(Linear, ReLU, Linear), so its parts are 0, 1, 2 */
    h = named(g, prefix, vkg_layernorm(g, x, param(g, prefix, "norm2.weight", w->norm2_w, C, 0),
                                       param(g, prefix, "norm2.bias", w->norm2_b, C, 0), 1e-5f), "norm2");
    h = named(g, prefix, vkg_matmul(g, h, param(g, prefix, "ff.0.weight", w->ff1_w, F, C),
                                    param(g, prefix, "ff.0.bias", w->ff1_b, F, 0), VKG_TRANSPOSE_B), "ff.0");
    h = named(g, prefix, vkg_relu(g, h), "ff.1");
    h = named(g, prefix, vkg_matmul(g, h, param(g, prefix, "ff.2.weight", w->ff2_w, C, F),
                                    param(g, prefix, "ff.2.bias", w->ff2_b, C, 0), VKG_TRANSPOSE_B), "ff.2");
    return named(g, prefix, vkg_add(g, x, h), "residual_2");
}
