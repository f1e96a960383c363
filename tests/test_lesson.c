/* Tests of the lesson (src/models/lesson*.c), on the CPU executor and, when a Vulkan device
 * opens, on Vulkan with the validation layer on.  Every value `vkgraph lesson` prints is checked
 * twice: the struct a step fills is compared with a plain double-precision computation written
 * here from the lesson's formulas, and the printed text is parsed back and compared with the
 * same numbers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/backend.h"
#include "vkgraph_lesson.h"
#include "support/test_util.h"
#include "support/vk_test.h"
#include "vkgraph.h"

/* Device results against double-precision host values. */
#define TOL 1e-4

/* ---- host references ---------------------------------------------------------------------- */

/* softmax(q k^T / sqrt(d)) v in double; keep (Tq x Tk, or NULL) blocks keys where 0. */
static void ref_attention(const float *q, const float *k, const float *v, int Tq, int Tk, int d, int dv,
                          const float *keep, double *weights, double *out) {
    for (int i = 0; i < Tq; i++) {
        double s[64], top = -INFINITY, sum = 0;
        for (int j = 0; j < Tk; j++) {
            double dot = 0;
            for (int c = 0; c < d; c++) dot += (double)q[i * d + c] * k[j * d + c];
            s[j] = keep && keep[i * Tk + j] == 0 ? -INFINITY : dot / sqrt((double)d);
            top = fmax(top, s[j]);
        }
        for (int j = 0; j < Tk; j++) sum += (s[j] = exp(s[j] - top));
        for (int j = 0; j < Tk; j++) s[j] /= sum;
        if (weights)
            for (int j = 0; j < Tk; j++) weights[i * Tk + j] = s[j];
        for (int c = 0; c < dv; c++) {
            double acc = 0;
            for (int j = 0; j < Tk; j++) acc += s[j] * v[j * dv + c];
            out[i * dv + c] = acc;
        }
    }
}

/* x [T, C] @ w [C, C] into out (float, to feed ref_attention). */
static void ref_project(const float *x, const float *w, int T, int C, float *out) {
    for (int i = 0; i < T; i++)
        for (int j = 0; j < C; j++) {
            double acc = 0;
            for (int c = 0; c < C; c++) acc += (double)x[i * C + c] * w[c * C + j];
            out[i * C + j] = (float)acc;
        }
}

/* The lesson's multi_head_attention in double (projections rounded to float between steps). */
static void ref_multi_head(const vkg_lesson_tokens *t, const float *x, int H, const float *keep, double *out) {
    enum { T = VKG_LESSON_TOKENS, C = VKG_LESSON_D_MODEL };
    const int D = C / H;
    float q[T * C], k[T * C], v[T * C], qh[T * C], kh[T * C], vh[T * C], joined[T * C];
    ref_project(x, t->w_q, T, C, q);
    ref_project(x, t->w_k, T, C, k);
    ref_project(x, t->w_v, T, C, v);
    for (int h = 0; h < H; h++) {
        for (int i = 0; i < T; i++)
            for (int c = 0; c < D; c++) {
                qh[i * D + c] = q[i * C + h * D + c];
                kh[i * D + c] = k[i * C + h * D + c];
                vh[i * D + c] = v[i * C + h * D + c];
            }
        double o[T * C];
        ref_attention(qh, kh, vh, T, T, D, D, keep, NULL, o);
        for (int i = 0; i < T; i++)
            for (int c = 0; c < D; c++) joined[i * C + h * D + c] = (float)o[i * D + c];
    }
    float tmp[T * C];
    ref_project(joined, t->w_o, T, C, tmp);
    for (int i = 0; i < T * C; i++) out[i] = tmp[i];
}

/* ---- captured printing --------------------------------------------------------------------- */



/* Reads the numbers of a printed numpy array ("[[0.1 0.2]\n [0.3 0.  ]]") from s. */
static int parse_array(const char *s, double *out, int max) {
    int n = 0;
    while (*s && *s != '[') s++;
    while (*s == '[') s++;
    while (*s && n < max) {
        char *end;
        double v = strtod(s, &end);
        if (end == s) {
            if (*s == ']' && s[1] == ']') break;
            s++;
            continue;
        }
        out[n++] = v;
        s = end;
    }
    return n;
}

/* A printed value rounded to `decimals` agrees with the exact one. */
static void assert_printed(double printed, double exact, int decimals) {
    double half = 0.5 * pow(10.0, -decimals) + 1e-6;
    if (!(fabs(printed - exact) <= half)) fail_msg("printed %g but the value is %.9g", printed, exact);
}

/* ---- fixtures ------------------------------------------------------------------------------ */


static void check_ok(vkg_status st, const vkg_error *err) {
    if (st != VKG_OK) fail_msg("%s: %s", vkg_status_name(st), err->message);
}

static void check_validation(vkg_device *d) {
    if (!vkg_device_is_cpu(d)) assert_int_equal(vkg_device_validation_errors(d), 0);
}

/* ---- numpy formatting ---------------------------------------------------------------------- */

/* Strings numpy 1.24 prints for the same float32 arrays. */
static void test_format_like_numpy(void **state) {
    (void)state;
    char buf[256];
    const float lesson3[10] = {0.12f, 0.46f, 0.21f, 0.13f, 0.08f, 0.21f, 0.12f, 0.1f, 0.37f, 0.2f};
    assert_string_equal(vkg_format_array(buf, sizeof buf, lesson3, 2, 5, 2),
                        "[[0.12 0.46 0.21 0.13 0.08]\n [0.21 0.12 0.1  0.37 0.2 ]]");
    const float causal[10] = {1, 0, 0, 0, 0, 0.94f, 0.06f, 0, 0, 0};
    assert_string_equal(vkg_format_array(buf, sizeof buf, causal, 2, 5, 2),
                        "[[1.   0.   0.   0.   0.  ]\n [0.94 0.06 0.   0.   0.  ]]");
    const float masked[3] = {0.55279f, 0.0f, 0.44721f};
    assert_string_equal(vkg_format_array(buf, sizeof buf, masked, 1, 3, 3), "[[0.553 0.    0.447]]");
    const float ints[2] = {2, 1}, signs[2] = {-1.5f, 0.25f}, wide[2] = {10.25f, 0.5f}, negzero[2] = {-0.001f, 0.5f};
    assert_string_equal(vkg_format_array(buf, sizeof buf, ints, 1, 2, 2), "[[2. 1.]]");
    assert_string_equal(vkg_format_array(buf, sizeof buf, signs, 1, 2, 2), "[[-1.5   0.25]]");
    assert_string_equal(vkg_format_array(buf, sizeof buf, wide, 1, 2, 2), "[[10.25  0.5 ]]");
    assert_string_equal(vkg_format_array(buf, sizeof buf, negzero, 1, 2, 2), "[[-0.   0.5]]");
    /* rounding is numpy's: half to even on the float32-scaled value (2.675f * 100 is 267.5f) */
    const float half[1] = {0.125f}, thirds[1] = {0.434471f}, scaled[1] = {2.675f};
    assert_string_equal(vkg_format_array(buf, sizeof buf, half, 1, 1, 2), "[[0.12]]");
    assert_string_equal(vkg_format_array(buf, sizeof buf, thirds, 1, 1, 3), "[[0.434]]");
    assert_string_equal(vkg_format_array(buf, sizeof buf, scaled, 1, 1, 2), "[[2.68]]");
    /* a buffer too small is cut, never overrun */
    char tiny[8];
    vkg_format_array(tiny, sizeof tiny, lesson3, 2, 5, 2);
    assert_int_equal(strlen(tiny), 7);
}

/* ---- step 1 -------------------------------------------------------------------------------- */

static void test_lookup(void **state) {
    vkg_device *d = vk_test_device(state);
    vkg_lesson_lookup r;
    vkg_error err = {0};
    check_ok(vkg_lesson_step_lookup(d, &r, &err), &err);
    const float Q[2] = {1, 0}, K[6] = {1, 0, 0, 1, 0.7f, 0.7f}, V[6] = {10, 0, 0, 10, 5, 5}, keep[3] = {1, 0, 1};
    double w[3], o[2], wm[3], om[2];
    ref_attention(Q, K, V, 1, 3, 2, 2, NULL, w, o);
    ref_attention(Q, K, V, 1, 3, 2, 2, keep, wm, om);
    for (int j = 0; j < 3; j++) {
        assert_true(fabs(r.weights[j] - w[j]) < TOL);
        assert_true(fabs(r.masked_weights[j] - wm[j]) < TOL);
    }
    for (int c = 0; c < 2; c++) {
        assert_true(fabs(r.output[c] - o[c]) < TOL * 10);
        assert_true(fabs(r.masked_output[c] - om[c]) < TOL * 10);
    }
    assert_true(r.masked_weights[1] == 0.0f);   /* blocked: exactly zero */
    assert_true(r.matches_reference);

    test_capture c;
    vkg_lesson_print_lookup(test_capture_begin(&c), &r);
    assert_string_equal(test_capture_end(&c), "weights: [[0.434 0.214 0.351]]  output: [[6.1 3.9]]\n"
                                         "matches a plain C computation: True\n"
                                         "key 1 blocked by the mask: weights: [[0.553 0.    0.447]]  "
                                         "output: [[7.76 2.24]]\n");
    free(c.text);
    check_validation(d);
}

/* ---- step 2 -------------------------------------------------------------------------------- */

static double ref_std(const double *x, int n) {
    double mean = 0, ss = 0;
    for (int i = 0; i < n; i++) mean += x[i];
    mean /= n;
    for (int i = 0; i < n; i++) ss += (x[i] - mean) * (x[i] - mean);
    return sqrt(ss / (n - 1));
}

static void test_scaling(void **state) {
    vkg_device *d = vk_test_device(state);
    vkg_lesson_scaling r;
    vkg_error err = {0};
    check_ok(vkg_lesson_step_scaling(d, &r, &err), &err);

    /* The same draws as the step (seed 0: q and k for each d_k in turn, then 10 scores), with the
     * dot products in double. */
    enum { N = VKG_LESSON_PAIRS };
    vkg_rng rng;
    vkg_rng_seed(&rng, 0);
    double *dots = malloc(N * sizeof *dots);
    float *q = malloc((size_t)N * 512 * sizeof *q), *k = malloc((size_t)N * 512 * sizeof *k);
    assert_true(dots && q && k);
    const int dims[3] = {4, 64, 512};
    for (int i = 0; i < 3; i++) {
        vkg_rng_fill_normal(&rng, q, (size_t)N * dims[i], 1.0f);
        vkg_rng_fill_normal(&rng, k, (size_t)N * dims[i], 1.0f);
        for (int p = 0; p < N; p++) {
            double acc = 0;
            for (int c = 0; c < dims[i]; c++) acc += (double)q[(size_t)p * dims[i] + c] * k[(size_t)p * dims[i] + c];
            dots[p] = acc;
        }
        double sd = ref_std(dots, N), root = sqrt((double)dims[i]);
        assert_int_equal(r.d_k[i], dims[i]);
        assert_true(fabs(r.std_dots[i] - sd) <= 1e-4 * sd);
        assert_true(fabs(r.std_scaled[i] - sd / root) <= 1e-4 * sd / root);
        /* the lesson's point: std of q.k is about sqrt(d_k), and about 1 after scaling */
        assert_true(fabs(r.std_dots[i] / root - 1.0) < 0.03);
        assert_true(fabs(r.std_scaled[i] - 1.0) < 0.03);
    }
    float scores[10];
    vkg_rng_fill_normal(&rng, scores, 10, 8.0f);
    double top[2] = {0, 0};
    for (int s = 0; s < 2; s++) {
        double sum = 0, m = -INFINITY, div = s ? 8.0 : 1.0;
        for (int j = 0; j < 10; j++) m = fmax(m, scores[j] / div);
        for (int j = 0; j < 10; j++) sum += exp(scores[j] / div - m);
        top[s] = 1.0 / sum;   /* the largest weight: exp(0) / sum */
    }
    assert_true(fabs(r.largest_unscaled - top[0]) < TOL && fabs(r.largest_scaled - top[1]) < TOL);
    assert_true(fabs(r.grad_unscaled - top[0] * (1 - top[0])) < TOL);
    assert_true(fabs(r.grad_scaled - top[1] * (1 - top[1])) < TOL);
    assert_true(r.largest_unscaled > 0.95f && r.grad_unscaled < 0.05f);   /* saturated */
    assert_true(r.largest_scaled < 0.6f && r.grad_scaled > 0.15f);        /* moderate  */

    test_capture c;
    vkg_lesson_print_scaling(test_capture_begin(&c), &r);
    const char *text = test_capture_end(&c);
    for (int i = 0; i < 3; i++) {
        char prefix[32];
        int dk = 0;
        double a = 0, b = 0;
        snprintf(prefix, sizeof prefix, "d_k = %3d: ", dims[i]);
        assert_int_equal(sscanf(test_line_with(text, prefix), "d_k = %d: std of q.k = %lf after / sqrt(d_k) = %lf", &dk, &a, &b),
                         3);
        assert_printed(a, r.std_dots[i], 2);
        assert_printed(b, r.std_scaled[i], 2);
    }
    double p = 0, g = 0;
    assert_int_equal(sscanf(test_line_with(text, "unscaled : "), "unscaled : largest weight %lf, its gradient p(1-p) = %lf", &p, &g), 2);
    assert_printed(p, top[0], 3);
    assert_printed(g, top[0] * (1 - top[0]), 4);
    assert_int_equal(sscanf(test_line_with(text, "scaled   : "), "scaled : largest weight %lf, its gradient p(1-p) = %lf", &p, &g), 2);
    assert_printed(p, top[1], 3);
    assert_printed(g, top[1] * (1 - top[1]), 4);
    free(c.text);
    free(dots);
    free(q);
    free(k);
    check_validation(d);
}

/* ---- step 3 -------------------------------------------------------------------------------- */

static void test_self_attention(void **state) {
    enum { T = VKG_LESSON_TOKENS, C = VKG_LESSON_D_MODEL };
    vkg_device *d = vk_test_device(state);
    vkg_lesson_self_attention *r = malloc(sizeof *r);
    vkg_lesson_tokens *t = malloc(sizeof *t);
    assert_true(r && t);
    vkg_error err = {0};
    check_ok(vkg_lesson_step_self_attention(d, r, &err), &err);
    vkg_lesson_tokens_init(t);

    float q[T * C], k[T * C], v[T * C];
    double w[T * T], o[T * C], mh[T * C];
    ref_project(t->x, t->w_q, T, C, q);
    ref_project(t->x, t->w_k, T, C, k);
    ref_project(t->x, t->w_v, T, C, v);
    ref_attention(q, k, v, T, T, C, C, NULL, w, o);
    ref_multi_head(t, t->x, VKG_LESSON_HEADS, NULL, mh);
    for (int i = 0; i < T; i++) {
        double row = 0;
        for (int j = 0; j < T; j++) row += r->weights[i * T + j];
        assert_true(fabs(row - 1.0) < 1e-5);                 /* each row is a distribution */
    }
    for (int i = 0; i < T * T; i++) assert_true(fabs(r->weights[i] - w[i]) < TOL);
    for (int i = 0; i < T * C; i++) {
        assert_true(fabs(r->output[i] - o[i]) < TOL);
        assert_true(fabs(r->multi_head_output[i] - mh[i]) < TOL);
    }
    assert_int_equal(r->ndim, 2);
    assert_true(r->shape[0] == T && r->shape[1] == C);
    assert_int_equal(r->multi_head_ndim, 2);
    assert_true(r->multi_head_shape[0] == T && r->multi_head_shape[1] == C);

    test_capture c;
    vkg_lesson_print_self_attention(test_capture_begin(&c), r);
    const char *text = test_capture_end(&c);
    double printed[T * T];
    assert_int_equal(parse_array(text, printed, T * T), T * T);
    for (int i = 0; i < T * T; i++) assert_printed(printed[i], w[i], 2);
    assert_non_null(strstr(text, "]]\nshape: [5, 16]\nmulti-head attention, 4 heads: shape: [5, 16]\n"));
    free(c.text);
    free(r);
    free(t);
    check_validation(d);
}

/* ---- step 4 -------------------------------------------------------------------------------- */

static void test_permutation(void **state) {
    enum { T = VKG_LESSON_TOKENS, C = VKG_LESSON_D_MODEL };
    vkg_device *d = vk_test_device(state);
    vkg_lesson_permutation r;
    vkg_error err = {0};
    check_ok(vkg_lesson_step_permutation(d, &r, &err), &err);
    const int perm[T] = {3, 0, 4, 1, 2};
    for (int i = 0; i < T; i++) assert_int_equal(r.perm[i], perm[i]);
    assert_true(r.equivariant);
    assert_true(r.max_diff < 1e-5);
    assert_false(r.equivariant_causal);

    /* the host agrees: without the mask the outputs are shuffled rows; with it they are not */
    vkg_lesson_tokens *t = malloc(sizeof *t);
    assert_non_null(t);
    vkg_lesson_tokens_init(t);
    float xp[T * C], tril[T * T];
    for (int i = 0; i < T; i++) memcpy(xp + i * C, t->x + perm[i] * C, C * sizeof(float));
    for (int i = 0; i < T; i++)
        for (int j = 0; j < T; j++) tril[i * T + j] = j <= i;
    double a[T * C], b[T * C], ac[T * C], bc[T * C], worst = 0, worst_causal = 0;
    ref_multi_head(t, t->x, VKG_LESSON_HEADS, NULL, a);
    ref_multi_head(t, xp, VKG_LESSON_HEADS, NULL, b);
    ref_multi_head(t, t->x, VKG_LESSON_HEADS, tril, ac);
    ref_multi_head(t, xp, VKG_LESSON_HEADS, tril, bc);
    for (int i = 0; i < T; i++)
        for (int c = 0; c < C; c++) {
            worst = fmax(worst, fabs(b[i * C + c] - a[perm[i] * C + c]));
            worst_causal = fmax(worst_causal, fabs(bc[i * C + c] - ac[perm[i] * C + c]));
        }
    assert_true(worst < 1e-6);
    assert_true(fabs(r.max_diff_causal - worst_causal) < TOL);
    assert_true(worst_causal > 0.1);

    test_capture c;
    vkg_lesson_print_permutation(test_capture_begin(&c), &r);
    char want[512];
    snprintf(want, sizeof want, "perm = [3, 0, 4, 1, 2]\nshuffled input gives shuffled output: True\n"
             "with a causal mask, shuffled input gives shuffled output: False (largest difference %.2g)\n",
             r.max_diff_causal);
    assert_string_equal(test_capture_end(&c), want);
    free(c.text);
    free(t);
    check_validation(d);
}

/* ---- step 5 -------------------------------------------------------------------------------- */

static void test_positions(void **state) {
    enum { P = VKG_LESSON_PE_POSITIONS, D = VKG_LESSON_PE_DIM };
    vkg_device *d = vk_test_device(state);
    vkg_lesson_positions *r = malloc(sizeof *r);
    assert_non_null(r);
    vkg_error err = {0};
    check_ok(vkg_lesson_step_positions(d, r, &err), &err);
    for (int p = 0; p < P; p++)
        for (int i = 0; i < D / 2; i++) {
            double angle = p * pow(10000.0, -2.0 * i / D);
            assert_true(fabs(r->pe[p * D + 2 * i] - sin(angle)) < 1e-5);
            assert_true(fabs(r->pe[p * D + 2 * i + 1] - cos(angle)) < 1e-5);
        }
    assert_int_equal(r->k, 3);
    const int rot[3] = {0, 10, 40}, dots_at[5] = {0, 10, 20, 30, 40};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(r->rot_pos[i], rot[i]);
        assert_true(r->rotation_ok[i]);
        assert_true(fabs(r->rotated[i][0] - sin(rot[i] + 3.0)) < 1e-5);
        assert_true(fabs(r->rotated[i][1] - cos(rot[i] + 3.0)) < 1e-5);
    }
    double expected = 0;
    for (int i = 0; i < D / 2; i++) expected += cos(3 * pow(10000.0, -2.0 * i / D));
    assert_true(fabs(r->dot_expected - expected) < 1e-6);
    for (int i = 0; i < 5; i++) {
        assert_int_equal(r->dot_pos[i], dots_at[i]);
        assert_true(fabs(r->dots[i] - expected) < 1e-4);
    }
    assert_true(r->dots_equal);

    test_capture c;
    vkg_lesson_print_positions(test_capture_begin(&c), r);
    const char *text = test_capture_end(&c);
    assert_non_null(strstr(text, "pos  0: rotating gives position 3: True\n"
                                 "pos 10: rotating gives position 13: True\n"
                                 "pos 40: rotating gives position 43: True\n"));
    const char *dl = test_line_with(text, "PE(pos) . PE(pos + 3):");
    for (int i = 0; i < 5; i++) {
        char key[16];
        snprintf(key, sizeof key, "pos %d: ", dots_at[i]);
        const char *at = strstr(dl, key);
        assert_non_null(at);
        assert_printed(strtod(at + strlen(key), NULL), expected, 4);
    }
    double sum = 0;
    assert_int_equal(sscanf(test_line_with(text, "sum of cos"), "sum of cos(3 omega_i): %lf;", &sum), 1);
    assert_printed(sum, expected, 4);
    assert_non_null(strstr(text, "depends only on k: True\n"));
    free(c.text);
    free(r);
    check_validation(d);
}

/* The positional encoding checks its arguments. */
static void test_positional_encoding_arguments(void **state) {
    vkg_device *d = vk_test_device(state);
    float pe[16];
    vkg_error err = {0};
    assert_int_equal(vkg_lesson_positional_encoding(d, 2, 3, pe, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "even d_model"));
    assert_int_equal(vkg_lesson_positional_encoding(d, 0, 4, pe, &err), VKG_ERR_INVALID_ARGUMENT);
}

/* The run helper: a graph in error, a name that is not there; the first failure sticks. */
static void test_run_errors(void **state) {
    vkg_device *d = vk_test_device(state);
    vkg_error err = {0};
    vkg_graph *g = vkg_graph_new();
    vkg_tensor a = vkg_input(g, "a", VKG_F32, 2, (int64_t[]){2, 3});
    vkg_output(g, "y", vkg_matmul(g, a, a, VKG_NONE, 0));             /* [2, 3] @ [2, 3]: K mismatch */
    vkg_lesson_run run;
    vkg_lesson_run_begin(&run, d, g, &err);
    vkg_lesson_run_go(&run);
    assert_int_equal(vkg_lesson_run_end(&run), VKG_ERR_SHAPE);
    assert_non_null(strstr(err.message, "lesson graph: matmul"));
    vkg_graph_free(g);

    g = vkg_graph_new();
    a = vkg_input(g, "a", VKG_F32, 1, (int64_t[]){4});
    vkg_output(g, "y", vkg_scale(g, a, 2.0f));
    const float x[4] = {1, 2, 3, 4};
    float y[4] = {0};
    vkg_lesson_run_begin(&run, d, g, &err);
    vkg_lesson_run_set(&run, "b", x, sizeof x);
    vkg_lesson_run_set(&run, "a", x, sizeof x);                      /* skipped: already failed */
    vkg_lesson_run_go(&run);
    vkg_lesson_run_get(&run, "y", y, 4);
    assert_int_equal(vkg_lesson_run_end(&run), VKG_ERR_NOT_FOUND);
    assert_non_null(strstr(err.message, "no input 'b'"));
    assert_true(y[0] == 0.0f);
    vkg_lesson_run_begin(&run, d, g, &err);                           /* and the right names work */
    vkg_lesson_run_set(&run, "a", x, sizeof x);
    vkg_lesson_run_go(&run);
    vkg_lesson_run_get(&run, "y", y, 4);
    assert_int_equal(vkg_lesson_run_end(&run), VKG_OK);
    assert_true(y[3] == 8.0f);
    vkg_graph_free(g);
    check_validation(d);
}

/* ---- step 6 -------------------------------------------------------------------------------- */

static void test_block(void **state) {
    vkg_device *d = vk_test_device(state);
    vkg_lesson_block *r = malloc(sizeof *r);
    assert_non_null(r);
    vkg_error err = {0};
    check_ok(vkg_lesson_step_block(d, r, &err), &err);
    const int64_t shape[3] = {2, 10, 64};
    assert_int_equal(r->input_ndim, 3);
    assert_int_equal(r->output_ndim, 3);
    assert_memory_equal(r->input_shape, shape, sizeof shape);
    assert_memory_equal(r->output_shape, shape, sizeof shape);
    assert_true(r->output_finite);
    /* 4 C^2 + 4 C (attention) + 2 C F + F + C (feed-forward) + 4 C (two LayerNorms) */
    assert_int_equal(r->params, 4 * 64 * 64 + 4 * 64 + 2 * 64 * 256 + 256 + 64 + 4 * 64);
    assert_int_equal(r->params, 49984);
    assert_int_equal(r->params_large, 7087872);

    /* causal weights: the lesson's attention with the lower-triangle mask on seed-1 draws */
    float qkv[3 * 5 * 8];
    vkg_rng rng;
    vkg_rng_seed(&rng, 1);
    vkg_rng_fill_normal(&rng, qkv, 3 * 5 * 8, 1.0f);
    float tril[25];
    for (int i = 0; i < 25; i++) tril[i] = i % 5 <= i / 5;
    double w[25], o[40];
    ref_attention(qkv, qkv + 40, qkv + 80, 5, 5, 8, 8, tril, w, o);
    for (int i = 0; i < 5; i++) {
        double row = 0;
        for (int j = 0; j < 5; j++) {
            row += r->causal_weights[i * 5 + j];
            if (j > i) assert_true(r->causal_weights[i * 5 + j] == 0.0f);   /* exactly zero */
            assert_true(fabs(r->causal_weights[i * 5 + j] - w[i * 5 + j]) < TOL);
        }
        assert_true(fabs(row - 1.0) < 1e-5);
    }
    assert_true(r->causal_weights[0] == 1.0f);

    /* Exercise 1: equal scores give the plain average; a large lead picks key 0's value */
    assert_true(r->lead[0] == 0.0f);
    for (int j = 0; j < 5; j++) assert_true(fabs(r->peak_weights[0][j] - 0.2) < 1e-6);
    const double mean[2] = {2.0, 1.0};
    for (int c = 0; c < 2; c++) {
        assert_true(fabs(r->values_mean[c] - mean[c]) < 1e-6);
        assert_true(fabs(r->peak_output[0][c] - mean[c]) < 1e-5);
    }
    for (int i = 1; i < VKG_LESSON_N_PEAKS; i++) {
        double e = exp(r->lead[i]), w0 = e / (e + 4);
        assert_true(fabs(r->peak_weights[i][0] - w0) < 1e-5);
        for (int c = 0; c < 2; c++) {
            double want = w0 * r->values[c];
            for (int j = 1; j < 5; j++) want += (1 - w0) / 4 * r->values[2 * j + c];
            assert_true(fabs(r->peak_output[i][c] - want) < 1e-4);
        }
    }
    assert_true(r->peak_weights[VKG_LESSON_N_PEAKS - 1][0] > 0.999f);

    test_capture c;
    vkg_lesson_print_block(test_capture_begin(&c), r);
    const char *text = test_capture_end(&c);
    assert_non_null(strstr(text, "input [2, 10, 64] -> shape: [2, 10, 64]\nparameters per block: 49984\n"
                                 "d_model 768, 12 heads, d_ff 3072: 7087872 parameters (rule of thumb "
                                 "12 * 768^2 = 7077888)\n"));
    double printed[25];
    assert_int_equal(parse_array(test_line_with(text, "causal weights:") + strlen("causal weights:"), printed, 25), 25);
    for (int i = 0; i < 25; i++) assert_printed(printed[i], w[i], 2);
    assert_non_null(strstr(text, "Exercise 1, values V = [[1, 0], [0, 1], [1, 1], [2, 3], [6, 0]]\n"
                                 "equal scores: weights [[0.2 0.2 0.2 0.2 0.2]]  output [[2. 1.]]  "
                                 "plain average of the values [[2. 1.]]\n"));
    assert_non_null(strstr(text, "key 0 scores  2 higher: weights [[0.649 0.088 0.088 0.088 0.088]]  "
                                 "output [[1.44 0.44]]\n"));
    assert_non_null(strstr(text, "key 0 scores 10 higher: weights [[1. 0. 0. 0. 0.]]  output [[1. 0.]]\n"));
    free(c.text);
    free(r);
    check_validation(d);
}

#define DEVICE_TESTS                                                                                      \
    cmocka_unit_test(test_lookup), cmocka_unit_test(test_scaling), cmocka_unit_test(test_self_attention), \
        cmocka_unit_test(test_permutation), cmocka_unit_test(test_positions),                             \
        cmocka_unit_test(test_positional_encoding_arguments), cmocka_unit_test(test_block),               \
        cmocka_unit_test(test_run_errors)

int main(void) {
    const struct CMUnitTest host_tests[] = {
        cmocka_unit_test(test_format_like_numpy),
    };
    const struct CMUnitTest cpu_tests[] = {DEVICE_TESTS};
    const struct CMUnitTest vulkan_tests[] = {DEVICE_TESTS};
    int failed = cmocka_run_group_tests_name("lesson: formatting", host_tests, NULL, NULL);
    failed += cmocka_run_group_tests_name("lesson on the CPU", cpu_tests, vk_test_cpu_group_setup, vk_test_group_teardown);
    failed += cmocka_run_group_tests_name("lesson on Vulkan", vulkan_tests, vk_test_group_setup, vk_test_group_teardown);
    return vk_test_exit_status(failed);
}
