/* Lesson step 5 (Question 4, Exercise 4): sinusoidal positional encoding.
 *     PE(pos, 2i) = sin(pos w_i),  PE(pos, 2i+1) = cos(pos w_i),  w_i = 1 / 10000^(2i / d_model)
 * Moving k positions along rotates each (sin, cos) pair by the angle k w_i, whatever pos is, so
 * PE(pos) . PE(pos + k) = sum_i cos(k w_i) depends only on k.
 * The angle table pos * w_i is computed on the device (positions [P, 1] times frequencies
 * [1, d/2], broadcast); the graph API has no sine op, so sin and cos are taken on the host.
 *
 *   cc 05_positional.c $(pkg-config --cflags --libs vkgraph) -lm && ./a.out [cpu|vulkan]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "vkgraph.h"

enum { P = 50, D = 16 };

static void check(vkg_status st, const vkg_error *err) {
    if (st != VKG_OK) {
        fprintf(stderr, "error: %s\n", err->message);
        exit(1);
    }
}

static void positional_encoding(vkg_device *dev, float pe[P][D]) {
    float pos[P], omega[D / 2], angles[P][D / 2];
    for (int p = 0; p < P; p++) pos[p] = (float)p;
    for (int i = 0; i < D / 2; i++) omega[i] = (float)pow(10000.0, -2.0 * i / D);
    vkg_graph *g = vkg_graph_new();
    vkg_tensor a = vkg_mul(g, vkg_constant(g, "pos", VKG_F32, 2, (int64_t[]){P, 1}, pos),
                           vkg_constant(g, "omega", VKG_F32, 2, (int64_t[]){1, D / 2}, omega));   /* [P, D/2] */
    vkg_output(g, "angles", a);
    vkg_error err = {0};
    vkg_compile_options opts;
    vkg_plan *plan;
    vkg_session *s;
    vkg_compile_options_default(&opts);
    vkg_device_compile_options(dev, &opts);
    check(vkg_plan_compile(g, &opts, &plan, &err), &err);
    check(vkg_session_new(dev, plan, &s, &err), &err);
    check(vkg_session_run(s, &err), &err);
    check(vkg_session_get_output(s, a, angles, sizeof angles, &err), &err);
    for (int p = 0; p < P; p++)
        for (int i = 0; i < D / 2; i++) {
            pe[p][2 * i] = (float)sin(angles[p][i]);
            pe[p][2 * i + 1] = (float)cos(angles[p][i]);
        }
    vkg_session_free(s), vkg_plan_free(plan), vkg_graph_free(g);
}

int main(int argc, char **argv) {
    vkg_error err = {0};
    vkg_device *dev;
    check(vkg_device_open(argc > 1 ? argv[1] : NULL, NULL, &dev, &err), &err);
    static float pe[P][D];
    positional_encoding(dev, pe);

    const int k = 3;                         /* offset; first frequency w_0 = 1 */
    const float R[2][2] = {{cosf(k), sinf(k)}, {-sinf(k), cosf(k)}};
    const int at[] = {0, 10, 40};
    for (int i = 0; i < 3; i++) {
        const float *v = pe[at[i]], *want = pe[at[i] + k];
        int ok = 1;
        for (int r = 0; r < 2; r++) {        /* R @ pe[pos, :2] == pe[pos + k, :2] ? */
            float got = R[r][0] * v[0] + R[r][1] * v[1];
            ok &= fabsf(got - want[r]) <= 1e-5f + 1e-5f * fabsf(want[r]);
        }
        printf("pos %2d: rotating gives position %d: %s\n", at[i], at[i] + k, ok ? "True" : "False");
    }
    printf("PE(pos) . PE(pos + %d):", k);
    double lo = INFINITY, hi = -INFINITY;
    for (int pos = 0; pos <= 40; pos += 10) {
        double dot = 0;
        for (int c = 0; c < D; c++) dot += (double)pe[pos][c] * pe[pos + k][c];
        printf("  pos %d: %.4f", pos, dot);
        lo = fmin(lo, dot), hi = fmax(hi, dot);
    }
    double expected = 0;
    for (int i = 0; i < D / 2; i++) expected += cos(k * pow(10000.0, -2.0 * i / D));
    printf("\nsum of cos(%d omega_i): %.4f;  depends only on k: %s\n", k, expected, hi - lo <= 1e-4 ? "True" : "False");
    vkg_device_free(dev);
    return 0;
}
