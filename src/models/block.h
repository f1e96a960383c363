/* The lesson's transformer block, pre-LayerNorm:
 *     x = x + MultiHeadAttention(LayerNorm(x))
 *     x = x + FFN(LayerNorm(x)),   FFN(h) = relu(h W1^T + b1) W2^T + b2
 * with PyTorch's parameter layout (nn.MultiheadAttention in_proj/out_proj, nn.Linear weights
 * stored [out, in]), so the parameter count matches the lesson's: 49,984 for d_model 64, 4 heads,
 * d_ff 256. */
#ifndef VKG_MODELS_BLOCK_H
#define VKG_MODELS_BLOCK_H

#include "vkgraph.h"

typedef struct vkg_block_config {
    int d_model, n_heads, d_ff;
    int causal;          /* add the causal mask to the attention scores */
} vkg_block_config;

typedef struct vkg_block_weights {
    float *in_proj_w, *in_proj_b;     /* [3C, C], [3C]  (Q, K, V stacked)           */
    float *out_proj_w, *out_proj_b;   /* [C, C], [C]                                 */
    float *norm1_w, *norm1_b;         /* [C]                                         */
    float *norm2_w, *norm2_b;         /* [C]                                         */
    float *ff1_w, *ff1_b;             /* [F, C], [F]                                 */
    float *ff2_w, *ff2_b;             /* [C, F], [C]                                 */
} vkg_block_weights;

/* Allocates weights initialised like PyTorch's defaults (uniform +-1/sqrt(fan_in), LayerNorm
 * gamma 1 and beta 0) from a seeded generator. */
vkg_status vkg_block_weights_init(vkg_block_weights *w, const vkg_block_config *cfg, uint64_t seed, vkg_error *err);
void vkg_block_weights_free(vkg_block_weights *w);

/* Adds the block's constants (named prefix.*) and ops to g; x is [B, T, C] (or [T, C]).
 * attn_probs, when non-NULL, receives the attention weights [B, H, T, T]. */
vkg_tensor vkg_block_build(vkg_graph *g, vkg_tensor x, const vkg_block_config *cfg, const vkg_block_weights *w,
                           const char *prefix, vkg_tensor *attn_probs);

#endif
