/* The lesson's transformer block: its weights, drawn as PyTorch draws them, and its graph, written
 * with the shared layers (layers.h). */
#include "vkgraph_lesson.h"

#include "base/error.h"
#include "models/layers.h"

#include <math.h>
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

vkg_tensor vkg_block_build(vkg_graph *g, vkg_tensor x, const vkg_block_config *cfg, const vkg_block_weights *w,
                           const char *prefix, vkg_tensor *attn_probs) {
    vkg_layers L = {.g = g};
    vkg_layers_prefix(&L, "%s.", prefix); /* PyTorch module paths: "block.attn.softmax", "block.ff.0" */
    const int64_t C = cfg->d_model, H = cfg->n_heads, D = C / H, F = cfg->d_ff;

    /* x + MultiHeadAttention(LayerNorm(x)), nn.MultiheadAttention's weights [out, in] */
    vkg_tensor h = vkg_layer_layernorm(&L, x, vkg_layers_weight(&L, "norm1.weight", VKG_F32, C, 0, w->norm1_w),
                                       vkg_layers_weight(&L, "norm1.bias", VKG_F32, C, 0, w->norm1_b), 1e-5f, "norm1");
    vkg_tensor qkv = vkg_layer_linear(&L, h, vkg_layers_weight(&L, "attn.in_proj_weight", VKG_F32, 3 * C, C, w->in_proj_w),
                                      vkg_layers_weight(&L, "attn.in_proj_bias", VKG_F32, 3 * C, 0, w->in_proj_b),
                                      VKG_TRANSPOSE_B, "attn.in_proj");
    const vkg_attention at = {.n_head = H, .n_kv_head = H, .head_dim = D, .scale = 1.0f / sqrtf((float)D),
                              .causal = cfg->causal, .mask = VKG_NONE, .rope = VKG_NONE, .kv_cache = VKG_NONE, .pos = VKG_NONE};
    vkg_tensor heads = vkg_layer_attention(&L, &at, qkv, 0, qkv, C, qkv, 2 * C, attn_probs);
    vkg_tensor attn = vkg_layer_linear(&L, heads, vkg_layers_weight(&L, "attn.out_proj.weight", VKG_F32, C, C, w->out_proj_w),
                                       vkg_layers_weight(&L, "attn.out_proj.bias", VKG_F32, C, 0, w->out_proj_b),
                                       VKG_TRANSPOSE_B, "attn.out_proj");
    x = vkg_layers_name(&L, vkg_add(g, x, attn), "residual_1");

    /* x + FFN(LayerNorm(x)): ff is nn.Sequential(Linear, ReLU, Linear), so its parts are 0, 1, 2 */
    h = vkg_layer_layernorm(&L, x, vkg_layers_weight(&L, "norm2.weight", VKG_F32, C, 0, w->norm2_w),
                            vkg_layers_weight(&L, "norm2.bias", VKG_F32, C, 0, w->norm2_b), 1e-5f, "norm2");
    const vkg_mlp ff = {.up_w = vkg_layers_weight(&L, "ff.0.weight", VKG_F32, F, C, w->ff1_w),
                        .up_b = vkg_layers_weight(&L, "ff.0.bias", VKG_F32, F, 0, w->ff1_b),
                        .gate_w = VKG_NONE, .gate_b = VKG_NONE,
                        .down_w = vkg_layers_weight(&L, "ff.2.weight", VKG_F32, C, F, w->ff2_w),
                        .down_b = vkg_layers_weight(&L, "ff.2.bias", VKG_F32, C, 0, w->ff2_b),
                        .flags = VKG_TRANSPOSE_B, .act = vkg_relu,
                        .up_name = "ff.0", .act_name = "ff.1", .down_name = "ff.2"};
    return vkg_layers_name(&L, vkg_add(g, x, vkg_layer_mlp(&L, h, &ff)), "residual_2");
}
