/* Lesson step 3: self-attention and multi-head attention.
 * Q, K and V are projections of the same tokens X [5, 16]; 4 heads each attend on their own
 * 4-dimensional slice, and W_O mixes the joined heads back to [5, 16].
 *
 *   cc 03_multihead.c $(pkg-config --cflags --libs vkgraph) -lm && ./a.out [cpu|vulkan]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "vkgraph.h"

enum { T = 5, C = 16, HEADS = 4 };

static void check(vkg_status st, const vkg_error *err) {
    if (st != VKG_OK) {
        fprintf(stderr, "error: %s\n", err->message);
        exit(1);
    }
}

static vkg_tensor attention(vkg_graph *g, vkg_tensor q, vkg_tensor k, vkg_tensor v, vkg_tensor *weights) {
    int64_t shape[VKG_MAX_DIMS];
    int nd = vkg_tensor_shape(g, q, shape);
    *weights = vkg_softmax(g, vkg_scale(g, vkg_matmul(g, q, k, VKG_NONE, VKG_TRANSPOSE_B), 1 / sqrtf(shape[nd - 1])));
    return vkg_matmul(g, *weights, v, VKG_NONE, 0);
}

/* [T, C] -> [heads, T, C / heads]: a view, no copy. */
static vkg_tensor split(vkg_graph *g, vkg_tensor m) {
    return vkg_permute(g, vkg_reshape(g, m, 3, (int64_t[]){T, HEADS, C / HEADS}), (int[]){1, 0, 2});
}

static vkg_tensor multi_head(vkg_graph *g, vkg_tensor x, const vkg_tensor w[4]) {
    vkg_tensor q = split(g, vkg_matmul(g, x, w[0], VKG_NONE, 0)), k = split(g, vkg_matmul(g, x, w[1], VKG_NONE, 0));
    vkg_tensor weights, heads = attention(g, q, k, split(g, vkg_matmul(g, x, w[2], VKG_NONE, 0)), &weights);
    vkg_tensor joined = vkg_reshape(g, vkg_permute(g, heads, (int[]){1, 0, 2}), 2, (int64_t[]){T, C});
    return vkg_matmul(g, joined, w[3], VKG_NONE, 0);
}

int main(int argc, char **argv) {
    static float x[T * C], wdata[4][C * C];               /* X, then W_Q, W_K, W_V, W_O */
    vkg_rng rng;
    vkg_rng_seed(&rng, 0);
    vkg_rng_fill_normal(&rng, x, T * C, 1.0f);
    for (int i = 0; i < 4; i++) vkg_rng_fill_normal(&rng, wdata[i], C * C, 1 / sqrtf(C));

    vkg_graph *g = vkg_graph_new();
    vkg_tensor xt = vkg_constant(g, "X", VKG_F32, 2, (int64_t[]){T, C}, x), w[4];
    for (int i = 0; i < 4; i++) w[i] = vkg_constant(g, (const char *[]){"W_Q", "W_K", "W_V", "W_O"}[i], VKG_F32, 2,
                                                    (int64_t[]){C, C}, wdata[i]);
    vkg_tensor weights, out = attention(g, vkg_matmul(g, xt, w[0], VKG_NONE, 0), vkg_matmul(g, xt, w[1], VKG_NONE, 0),
                                        vkg_matmul(g, xt, w[2], VKG_NONE, 0), &weights);
    vkg_tensor mh = multi_head(g, xt, w);
    vkg_output(g, "weights", weights), vkg_output(g, "out", out), vkg_output(g, "multi_head", mh);

    vkg_error err = {0};
    vkg_device *dev;
    vkg_plan *plan;
    vkg_session *s;
    vkg_compile_options opts;
    check(vkg_device_open(argc > 1 ? argv[1] : NULL, NULL, &dev, &err), &err);
    vkg_compile_options_default(&opts);
    vkg_device_compile_options(dev, &opts);
    check(vkg_plan_compile(g, &opts, &plan, &err), &err);
    check(vkg_session_new(dev, plan, &s, &err), &err);
    check(vkg_session_run(s, &err), &err);
    float p[T * T];
    char text[512];
    check(vkg_session_get_output(s, weights, p, sizeof p, &err), &err);
    printf("%s\n", vkg_format_array(text, sizeof text, p, T, T, 2));   /* row i: what token i attends to */
    int64_t shape[VKG_MAX_DIMS];
    vkg_tensor_shape(g, out, shape);
    printf("shape: [%lld, %lld]\n", (long long)shape[0], (long long)shape[1]);
    vkg_tensor_shape(g, mh, shape);
    printf("multi-head attention, %d heads: shape: [%lld, %lld]\n", HEADS, (long long)shape[0], (long long)shape[1]);
    vkg_session_free(s), vkg_plan_free(plan), vkg_device_free(dev), vkg_graph_free(g);
    return 0;
}
