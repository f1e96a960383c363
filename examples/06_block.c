/* Lesson step 6 (Exercises 5 and 1): the transformer block and the causal mask.
 *     x = x + MultiHeadAttention(LayerNorm(x));   x = x + FFN(LayerNorm(x))
 * with PyTorch's parameter layout (nn.MultiheadAttention, nn.Linear [out, in]), so counting the
 * graph's constants gives PyTorch's parameter count.
 *
 *   cc 06_block.c $(pkg-config --cflags --libs vkgraph) -lm && ./a.out [cpu|vulkan]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "vkgraph.h"

static void check(vkg_status st, const vkg_error *err) {
    if (st != VKG_OK) {
        fprintf(stderr, "error: %s\n", err->message);
        exit(1);
    }
}

/* Weights come from one pool: uniform in [lo, hi) when rng is set, zeros when only counting. */
typedef struct block { vkg_graph *g; float *pool; size_t used; vkg_rng *rng; } block;

static vkg_tensor param(block *b, const char *name, int64_t rows, int64_t cols, float lo, float hi) {
    float *w = b->pool + b->used;
    b->used += (size_t)(rows * (cols ? cols : 1));
    for (float *p = w; b->rng && p < b->pool + b->used; p++) *p = lo + (hi - lo) * vkg_rng_uniform(b->rng);
    return vkg_constant(b->g, name, VKG_F32, cols ? 2 : 1, (int64_t[]){rows, cols}, w);
}

static vkg_tensor transformer_block(block *b, vkg_tensor x, int64_t B, int64_t T, int64_t C, int64_t H, int64_t F) {
    vkg_graph *g = b->g;
    float u = 1 / sqrtf((float)C);     /* PyTorch's default init bound, 1 / sqrt(fan_in) */
    const int heads_first[4] = {0, 2, 1, 3};          /* [B, T, H, D] <-> [B, H, T, D] */
    vkg_tensor h = vkg_layernorm(g, x, param(b, "norm1.weight", C, 0, 1, 1), param(b, "norm1.bias", C, 0, 0, 0), 1e-5f);
    vkg_tensor qkv = vkg_matmul(g, h, param(b, "attn.in_proj_weight", 3 * C, C, -u, u),
                                param(b, "attn.in_proj_bias", 3 * C, 0, -u, u), VKG_TRANSPOSE_B);
    vkg_tensor qkvh[3];
    for (int i = 0; i < 3; i++)
        qkvh[i] = vkg_permute(g, vkg_reshape(g, vkg_slice(g, qkv, 2, i * C, C), 4, (int64_t[]){B, T, H, C / H}), heads_first);
    vkg_tensor scores = vkg_scale(g, vkg_matmul(g, qkvh[0], qkvh[1], VKG_NONE, VKG_TRANSPOSE_B), 1 / sqrtf((float)(C / H)));
    vkg_tensor heads = vkg_matmul(g, vkg_softmax(g, scores), qkvh[2], VKG_NONE, 0);
    vkg_tensor joined = vkg_reshape(g, vkg_permute(g, heads, heads_first), 3, (int64_t[]){B, T, C});
    x = vkg_add(g, x, vkg_matmul(g, joined, param(b, "attn.out_proj.weight", C, C, -u, u),
                                 param(b, "attn.out_proj.bias", C, 0, -u, u), VKG_TRANSPOSE_B));
    h = vkg_layernorm(g, x, param(b, "norm2.weight", C, 0, 1, 1), param(b, "norm2.bias", C, 0, 0, 0), 1e-5f);
    h = vkg_relu(g, vkg_matmul(g, h, param(b, "ff.0.weight", F, C, -u, u), param(b, "ff.0.bias", F, 0, -u, u), VKG_TRANSPOSE_B));
    float v = 1 / sqrtf((float)F);
    return vkg_add(g, x, vkg_matmul(g, h, param(b, "ff.2.weight", C, F, -v, v), param(b, "ff.2.bias", C, 0, -v, v), VKG_TRANSPOSE_B));
}

int main(int argc, char **argv) {
    vkg_error err = {0};
    vkg_device *dev;
    check(vkg_device_open(argc > 1 ? argv[1] : NULL, NULL, &dev, &err), &err);
    vkg_rng rng;
    vkg_rng_seed(&rng, 0);

    /* d_model 64, 4 heads, d_ff 256 on a batch of 2 x 10 tokens: random + positional encoding */
    static float tokens[2 * 10 * 64], y[2 * 10 * 64];
    vkg_rng_fill_normal(&rng, tokens, 2 * 10 * 64, 1.0f);
    for (int i = 0; i < 2 * 10 * 64; i++) {          /* + PE(t, c): sin for even c, cos for odd c */
        int t = i / 64 % 10, c = i % 64;
        double angle = t * pow(10000.0, -(double)(c - c % 2) / 64);
        tokens[i] += (float)(c % 2 ? cos(angle) : sin(angle));
    }
    block small = {vkg_graph_new(), calloc(49984, sizeof(float)), 0, &rng};
    vkg_tensor x = vkg_input(small.g, "tokens", VKG_F32, 3, (int64_t[]){2, 10, 64});
    vkg_tensor out = transformer_block(&small, x, 2, 10, 64, 4, 256);
    vkg_output(small.g, "y", out);

    vkg_compile_options opts;
    vkg_plan *plan;
    vkg_session *s;
    vkg_compile_options_default(&opts);
    vkg_device_compile_options(dev, &opts);
    check(vkg_plan_compile(small.g, &opts, &plan, &err), &err);
    check(vkg_session_new(dev, plan, &s, &err), &err);
    check(vkg_session_set_input(s, x, tokens, sizeof tokens, &err), &err);
    check(vkg_session_run(s, &err), &err);
    check(vkg_session_get_output(s, out, y, sizeof y, &err), &err);
    int64_t shape[VKG_MAX_DIMS];
    vkg_tensor_shape(small.g, out, shape);          /* the shape never changes */
    printf("shape: [%lld, %lld, %lld]\n", (long long)shape[0], (long long)shape[1], (long long)shape[2]);
    printf("parameters per block: %lld\n", (long long)vkg_graph_constant_numel(small.g));

    /* Exercise 5: d_model 768, 12 heads, d_ff 3072: built to count, never run */
    block big = {vkg_graph_new(), calloc(7087872, sizeof(float)), 0, NULL};
    transformer_block(&big, vkg_input(big.g, "x", VKG_F32, 3, (int64_t[]){1, 1, 768}), 1, 1, 768, 12, 3072);
    printf("d_model 768, 12 heads, d_ff 3072: %lld parameters (rule of thumb 12 * 768^2 = %d)\n",
           (long long)vkg_graph_constant_numel(big.g), 12 * 768 * 768);

    vkg_session_free(s), vkg_plan_free(plan), vkg_device_free(dev);
    vkg_graph_free(small.g), vkg_graph_free(big.g);
    free(small.pool), free(big.pool);
    return 0;
}
