/* Lesson step 6, second half (Exercise 1): the causal mask, and what equal scores do.
 * A causal mask sets every score above the diagonal to -inf before the softmax, so each token
 * attends only to itself and earlier tokens (vkg_mask_causal; the lesson's tril mask).  When all
 * scores in a row are equal, the weights are uniform and attention returns the plain average of
 * the values; as one score pulls ahead, its value takes over.
 *
 *   cc 06_causal.c $(pkg-config --cflags --libs vkgraph) -lm && ./a.out [cpu|vulkan]
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

int main(int argc, char **argv) {
    float qk[2 * 5 * 8];                           /* Q, K [5, 8]: random */
    vkg_rng rng;
    vkg_rng_seed(&rng, 1);
    vkg_rng_fill_normal(&rng, qk, 2 * 5 * 8, 1.0f);
    const float q1[2] = {1, 0}, k1[5 * 2] = {0};      /* Exercise 1: five identical keys ...  */
    const float v1[5 * 2] = {1, 0, 0, 1, 1, 1, 2, 3, 6, 0};   /* ... and their values       */

    vkg_graph *g = vkg_graph_new();
    vkg_tensor q = vkg_constant(g, "Q", VKG_F32, 2, (int64_t[]){5, 8}, qk);
    vkg_tensor k = vkg_constant(g, "K", VKG_F32, 2, (int64_t[]){5, 8}, qk + 40);
    vkg_tensor scores = vkg_scale(g, vkg_matmul(g, q, k, VKG_NONE, VKG_TRANSPOSE_B), 1 / sqrtf(8));
    vkg_tensor causal = vkg_softmax(g, vkg_mask_causal(g, scores, 0, VKG_NONE));
    vkg_tensor equal_scores = vkg_matmul(g, vkg_constant(g, "q1", VKG_F32, 2, (int64_t[]){1, 2}, q1),
                                         vkg_constant(g, "k1", VKG_F32, 2, (int64_t[]){5, 2}, k1), VKG_NONE,
                                         VKG_TRANSPOSE_B);
    vkg_tensor average = vkg_matmul(g, vkg_softmax(g, equal_scores),
                                    vkg_constant(g, "v1", VKG_F32, 2, (int64_t[]){5, 2}, v1), VKG_NONE, 0);
    vkg_output(g, "causal", causal), vkg_output(g, "average", average);

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
    float w[25], out[2], mean[2] = {0, 0};
    char text[512], mean_text[64];
    check(vkg_session_get_output(s, causal, w, sizeof w, &err), &err);
    check(vkg_session_get_output(s, average, out, sizeof out, &err), &err);
    printf("%s\n", vkg_format_array(text, sizeof text, w, 5, 5, 2));   /* zeros above the diagonal */
    for (int j = 0; j < 5; j++) mean[0] += v1[2 * j] / 5, mean[1] += v1[2 * j + 1] / 5;
    printf("equal scores: output %s  plain average of the values %s\n",
           vkg_format_array(text, sizeof text, out, 1, 2, 2),
           vkg_format_array(mean_text, sizeof mean_text, mean, 1, 2, 2));
    vkg_session_free(s), vkg_plan_free(plan), vkg_device_free(dev), vkg_graph_free(g);
    return 0;
}
