/* Lesson step 4 (Question 3, Exercise 3): self-attention does not know the order of the words.
 * Shuffling the input rows shuffles the multi-head output the same way (permutation
 * equivariance); with a causal mask the shuffle changes which tokens each one may see, and the
 * outputs are no longer a shuffle of each other.
 *
 *   cc 04_permutation.c $(pkg-config --cflags --libs vkgraph) -lm && ./a.out [cpu|vulkan]
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

/* [T, C] -> [heads, T, C / heads]: a view, no copy. */
static vkg_tensor split(vkg_graph *g, vkg_tensor m) {
    return vkg_permute(g, vkg_reshape(g, m, 3, (int64_t[]){T, HEADS, C / HEADS}), (int[]){1, 0, 2});
}

/* The lesson's multi_head_attention; mask (f32 [T, T], 0 = blocked) or VKG_NONE. */
static vkg_tensor multi_head(vkg_graph *g, vkg_tensor x, const vkg_tensor w[4], vkg_tensor mask) {
    vkg_tensor q = split(g, vkg_matmul(g, x, w[0], VKG_NONE, 0)), k = split(g, vkg_matmul(g, x, w[1], VKG_NONE, 0));
    vkg_tensor scores = vkg_scale(g, vkg_matmul(g, q, k, VKG_NONE, VKG_TRANSPOSE_B), 1 / sqrtf(C / HEADS));
    if (mask != VKG_NONE) scores = vkg_mask(g, scores, mask, VKG_MASK_BOOL);
    vkg_tensor heads = vkg_matmul(g, vkg_softmax(g, scores), split(g, vkg_matmul(g, x, w[2], VKG_NONE, 0)), VKG_NONE, 0);
    vkg_tensor joined = vkg_reshape(g, vkg_permute(g, heads, (int[]){1, 0, 2}), 2, (int64_t[]){T, C});
    return vkg_matmul(g, joined, w[3], VKG_NONE, 0);
}

int main(int argc, char **argv) {
    static float x[T * C], wdata[4][C * C], causal[T * T], out[4][T * C];
    const int32_t perm[T] = {3, 0, 4, 1, 2};
    vkg_rng rng;                                     /* the same X and weights as step 3 */
    vkg_rng_seed(&rng, 0);
    vkg_rng_fill_normal(&rng, x, T * C, 1.0f);
    for (int i = 0; i < 4; i++) vkg_rng_fill_normal(&rng, wdata[i], C * C, 1 / sqrtf(C));
    for (int i = 0; i < T * T; i++) causal[i] = i % T <= i / T;      /* lower triangle allowed */

    vkg_graph *g = vkg_graph_new();
    vkg_tensor xt = vkg_constant(g, "X", VKG_F32, 2, (int64_t[]){T, C}, x), w[4];
    for (int i = 0; i < 4; i++) w[i] = vkg_constant(g, (const char *[]){"W_Q", "W_K", "W_V", "W_O"}[i], VKG_F32, 2,
                                                    (int64_t[]){C, C}, wdata[i]);
    vkg_tensor shuffled = vkg_embedding(g, xt, vkg_constant(g, "perm", VKG_I32, 1, (int64_t[]){T}, perm));  /* X[perm] */
    vkg_tensor mask = vkg_constant(g, "causal", VKG_F32, 2, (int64_t[]){T, T}, causal);
    vkg_tensor outs[4] = {multi_head(g, xt, w, VKG_NONE), multi_head(g, shuffled, w, VKG_NONE),
                          multi_head(g, xt, w, mask), multi_head(g, shuffled, w, mask)};
    for (int i = 0; i < 4; i++) vkg_output(g, (const char *[]){"a", "b", "a_causal", "b_causal"}[i], outs[i]);

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
    for (int i = 0; i < 4; i++) check(vkg_session_get_output(s, outs[i], out[i], sizeof out[i], &err), &err);
    for (int m = 0; m < 2; m++) {    /* is f(X[perm]) == f(X)[perm], to 1e-5 as torch.allclose? */
        int same = 1;
        for (int i = 0; i < T; i++)
            for (int c = 0; c < C; c++) {
                float got = out[2 * m + 1][i * C + c], want = out[2 * m][perm[i] * C + c];
                same &= fabsf(got - want) <= 1e-5f + 1e-5f * fabsf(want);
            }
        printf("%sshuffled input gives shuffled output: %s\n", m ? "with a causal mask, " : "", same ? "True" : "False");
    }
    vkg_session_free(s), vkg_plan_free(plan), vkg_device_free(dev), vkg_graph_free(g);
    return 0;
}
