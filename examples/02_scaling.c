/* Lesson step 2: why attention divides the scores by sqrt(d_k).
 * For random q, k with independent unit-variance entries, q . k has variance d_k: its std grows
 * like sqrt(d_k), and large scores saturate the softmax (a weight p near 1 has gradient
 * p (1 - p) near 0).  The dot products and softmaxes run on the device; std is taken on the host.
 *
 *   cc 02_scaling.c $(pkg-config --cflags --libs vkgraph) -lm && ./a.out [cpu|vulkan]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "vkgraph.h"

enum { PAIRS = 10000 };

static void check(vkg_status st, const vkg_error *err) {
    if (st != VKG_OK) {
        fprintf(stderr, "error: %s\n", err->message);
        exit(1);
    }
}

/* Compiles g for dev, runs it once, and reads output t (n floats). */
static void run(vkg_device *dev, vkg_graph *g, vkg_tensor t, float *out, size_t n) {
    vkg_error err = {0};
    vkg_compile_options opts;
    vkg_plan *plan;
    vkg_session *s;
    vkg_compile_options_default(&opts);
    vkg_device_compile_options(dev, &opts);
    check(vkg_plan_compile(g, &opts, &plan, &err), &err);
    check(vkg_session_new(dev, plan, &s, &err), &err);
    check(vkg_session_run(s, &err), &err);
    check(vkg_session_get_output(s, t, out, n * sizeof *out, &err), &err);
    vkg_session_free(s);
    vkg_plan_free(plan);
}

static double std_dev(const float *x, int n) {
    double mean = 0, ss = 0;
    for (int i = 0; i < n; i++) mean += x[i] / n;
    for (int i = 0; i < n; i++) ss += (x[i] - mean) * (x[i] - mean);
    return sqrt(ss / (n - 1));
}

int main(int argc, char **argv) {
    vkg_error err = {0};
    vkg_device *dev;
    check(vkg_device_open(argc > 1 ? argv[1] : NULL, NULL, &dev, &err), &err);
    vkg_rng rng;
    vkg_rng_seed(&rng, 0);
    static float dots[2 * PAIRS];
    const int dims[] = {4, 64, 512};
    for (int i = 0; i < 3; i++) {
        int64_t d = dims[i], rows[3] = {PAIRS, 1, d};     /* each pair as a [1, d] @ [d, 1] product */
        float *q = malloc(PAIRS * d * sizeof *q), *k = malloc(PAIRS * d * sizeof *k);
        vkg_rng_fill_normal(&rng, q, PAIRS * d, 1.0f);
        vkg_rng_fill_normal(&rng, k, PAIRS * d, 1.0f);
        vkg_graph *g = vkg_graph_new();
        vkg_tensor qt = vkg_constant(g, "q", VKG_F32, 3, rows, q), kt = vkg_constant(g, "k", VKG_F32, 3, rows, k);
        vkg_tensor qk = vkg_reshape(g, vkg_matmul(g, qt, kt, VKG_NONE, VKG_TRANSPOSE_B), 1, (int64_t[]){PAIRS});
        vkg_tensor both = vkg_concat(g, qk, vkg_scale(g, qk, 1.0f / sqrtf((float)d)), 0);   /* q.k, q.k/sqrt(d) */
        vkg_output(g, "dots", both);
        run(dev, g, both, dots, 2 * PAIRS);
        printf("d_k = %3d: std of q.k = %6.2f   after / sqrt(d_k) = %.2f\n", dims[i], std_dev(dots, PAIRS),
               std_dev(dots + PAIRS, PAIRS));
        vkg_graph_free(g);
        free(q), free(k);
    }

    float scores[10], p[2][10];
    vkg_rng_fill_normal(&rng, scores, 10, 8.0f);          /* unscaled scores for d_k = 64: std 8 */
    vkg_graph *g = vkg_graph_new();
    vkg_tensor s = vkg_constant(g, "scores", VKG_F32, 2, (int64_t[]){1, 10}, scores);
    vkg_tensor probs = vkg_concat(g, vkg_softmax(g, s), vkg_softmax(g, vkg_scale(g, s, 1.0f / 8)), 0);
    vkg_output(g, "probs", probs);
    run(dev, g, probs, &p[0][0], 20);
    for (int i = 0; i < 2; i++) {
        float top = 0;
        for (int j = 0; j < 10; j++) top = fmaxf(top, p[i][j]);
        printf("%-9s: largest weight %.3f, its gradient p(1-p) = %.4f\n", i ? "scaled" : "unscaled", top, top * (1 - top));
    }
    vkg_graph_free(g);
    vkg_device_free(dev);
    return 0;
}
