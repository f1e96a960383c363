/* Lesson step 1: attention as a soft lookup.
 *     Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V
 * built as a vkgraph graph and run on a device.  A mask can block keys: they get weight exactly 0.
 *
 *   cc 01_attention.c $(pkg-config --cflags --libs vkgraph) -lm && ./a.out [cpu|vulkan]
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

/* The lesson's attention(Q, K, V, mask); mask is VKG_NONE or holds 0 where a key is blocked. */
static vkg_tensor attention(vkg_graph *g, vkg_tensor q, vkg_tensor k, vkg_tensor v, vkg_tensor mask,
                            vkg_tensor *weights) {
    int64_t shape[VKG_MAX_DIMS];
    int nd = vkg_tensor_shape(g, q, shape);
    float d_k = (float)shape[nd - 1];
    vkg_tensor scores = vkg_scale(g, vkg_matmul(g, q, k, VKG_NONE, VKG_TRANSPOSE_B), 1.0f / sqrtf(d_k));
    if (mask != VKG_NONE) scores = vkg_mask(g, scores, mask, VKG_MASK_BOOL);   /* blocked: -inf */
    *weights = vkg_softmax(g, scores);                                       /* rows sum to 1 */
    return vkg_matmul(g, *weights, v, VKG_NONE, 0);
}

int main(int argc, char **argv) {
    const float Q[] = {1, 0};
    const float K[] = {1, 0, 0, 1, 0.7f, 0.7f};   /* matches, unrelated, partly matches */
    const float V[] = {10, 0, 0, 10, 5, 5};
    const float keep[] = {1, 0, 1};               /* a mask that blocks key 1 */

    vkg_graph *g = vkg_graph_new();
    vkg_tensor q = vkg_constant(g, "Q", VKG_F32, 2, (int64_t[]){1, 2}, Q);
    vkg_tensor k = vkg_constant(g, "K", VKG_F32, 2, (int64_t[]){3, 2}, K);
    vkg_tensor v = vkg_constant(g, "V", VKG_F32, 2, (int64_t[]){3, 2}, V);
    vkg_tensor mask = vkg_constant(g, "mask", VKG_F32, 2, (int64_t[]){1, 3}, keep);
    vkg_tensor w, w_masked, out = attention(g, q, k, v, VKG_NONE, &w);
    vkg_tensor out_masked = attention(g, q, k, v, mask, &w_masked);
    vkg_output(g, "weights", w), vkg_output(g, "output", out);
    vkg_output(g, "weights_masked", w_masked), vkg_output(g, "output_masked", out_masked);

    vkg_error err = {0};
    vkg_device *dev;
    vkg_plan *plan;
    vkg_session *s;
    vkg_compile_options opts;   /* the device's limits (alignment, largest binding) shape the plan */
    check(vkg_device_open(argc > 1 ? argv[1] : NULL, NULL, &dev, &err), &err);
    vkg_compile_options_default(&opts);
    vkg_device_compile_options(dev, &opts);
    check(vkg_plan_compile(g, &opts, &plan, &err), &err);
    check(vkg_session_new(dev, plan, &s, &err), &err);
    check(vkg_session_run(s, &err), &err);

    float weights[3], output[2];
    char wtext[64], otext[64];   /* numpy-style text, e.g. [[0.434 0.214 0.351]] */
    const vkg_tensor shown[2][2] = {{w, out}, {w_masked, out_masked}};
    for (int i = 0; i < 2; i++) {
        check(vkg_session_get_output(s, shown[i][0], weights, sizeof weights, &err), &err);
        check(vkg_session_get_output(s, shown[i][1], output, sizeof output, &err), &err);
        printf("%sweights: %s  output: %s\n", i ? "key 1 blocked by the mask: " : "",
               vkg_format_array(wtext, sizeof wtext, weights, 1, 3, 3),
               vkg_format_array(otext, sizeof otext, output, 1, 2, 2));
    }
    vkg_session_free(s), vkg_plan_free(plan), vkg_device_free(dev), vkg_graph_free(g);
    return 0;
}
