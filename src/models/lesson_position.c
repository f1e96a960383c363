/* Lesson steps 5 and 6: sinusoidal positional encoding as a rotation, and the transformer block
 * with its parameter count, the causal mask and Exercise 1 (equal scores average the values). */
#include "vkgraph_lesson.h"

#include "base/error.h"
#include "vkgraph_lesson.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static vkg_graph *new_graph(vkg_error *err) {
    vkg_graph *g = vkg_graph_new();
    if (!g) vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory creating a graph");
    return g;
}

vkg_status vkg_lesson_positional_encoding(vkg_device *dev, int n_positions, int d_model, float *pe,
                                          vkg_error *err) {
    if (n_positions < 1 || d_model < 2 || d_model % 2)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT,
                             "positional encoding: %d positions of d_model %d; need at least 1 position and an "
                             "even d_model", n_positions, d_model);
    int half = d_model / 2;
    float *pos = malloc((size_t)n_positions * sizeof *pos), *omega = malloc((size_t)half * sizeof *omega);
    float *angles = malloc((size_t)n_positions * (size_t)half * sizeof *angles);
    vkg_graph *g = pos && omega && angles ? new_graph(err) : NULL;
    vkg_status st = VKG_OK;
    if (!g) {
        st = vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory for a %d x %d positional encoding",
                           n_positions, d_model);
        goto done;
    }
    for (int p = 0; p < n_positions; p++) pos[p] = (float)p;
    for (int i = 0; i < half; i++) omega[i] = (float)pow(10000.0, -2.0 * i / d_model);  /* 1 / 10000^(2i/d) */
    vkg_tensor pt = vkg_input(g, "pos", VKG_F32, 2, (int64_t[]){n_positions, 1});
    vkg_tensor wt = vkg_input(g, "omega", VKG_F32, 2, (int64_t[]){1, half});
    vkg_output(g, "angles", vkg_mul(g, pt, wt));              /* pos * omega: [P, 1] * [1, d/2] */
    vkg_lesson_run run;
    vkg_lesson_run_begin(&run, dev, g, err);
    vkg_lesson_run_set(&run, "pos", pos, (size_t)n_positions * sizeof *pos);
    vkg_lesson_run_set(&run, "omega", omega, (size_t)half * sizeof *omega);
    vkg_lesson_run_go(&run);
    vkg_lesson_run_get(&run, "angles", angles, (size_t)n_positions * (size_t)half);
    st = vkg_lesson_run_end(&run);
    for (int p = 0; st == VKG_OK && p < n_positions; p++)
        for (int i = 0; i < half; i++) {
            double a = angles[(size_t)p * (size_t)half + (size_t)i];
            pe[(size_t)p * (size_t)d_model + 2 * (size_t)i] = (float)sin(a);       /* PE(pos, 2i)     */
            pe[(size_t)p * (size_t)d_model + 2 * (size_t)i + 1] = (float)cos(a);   /* PE(pos, 2i + 1) */
        }
done:
    free(pos);
    free(omega);
    free(angles);
    vkg_graph_free(g);
    return st;
}

/* ---- step 5 ------------------------------------------------------------------------------- */

vkg_status vkg_lesson_step_positions(vkg_device *dev, vkg_lesson_positions *out, vkg_error *err) {
    enum { P = VKG_LESSON_PE_POSITIONS, D = VKG_LESSON_PE_DIM, NR = VKG_LESSON_N_ROT, ND = VKG_LESSON_N_DOTS };
    static const int32_t rot_ids[NR] = {0, 10, 40}, dot_ids[ND] = {0, 10, 20, 30, 40};
    const int k = 3;
    const double w0 = 1.0;                       /* the first frequency: omega_0 = 1 */
    memset(out, 0, sizeof *out);
    vkg_status st = vkg_lesson_positional_encoding(dev, P, D, out->pe, err);
    if (st != VKG_OK) return st;
    out->k = k;
    int32_t dot_ids_k[ND];
    for (int i = 0; i < ND; i++) dot_ids_k[i] = dot_ids[i] + k;
    /* R = [[cos k w, sin k w], [-sin k w, cos k w]]: "k positions later" as a rotation */
    const float R[4] = {(float)cos(k * w0), (float)sin(k * w0), (float)-sin(k * w0), (float)cos(k * w0)};

    vkg_graph *g = new_graph(err);
    if (!g) return VKG_ERR_OUT_OF_MEMORY;
    vkg_tensor pe = vkg_input(g, "pe", VKG_F32, 2, (int64_t[]){P, D});
    /* rows of PE picked on the device by an embedding lookup */
    vkg_tensor rows = vkg_embedding(g, pe, vkg_constant(g, "rot_pos", VKG_I32, 1, (int64_t[]){NR}, rot_ids));
    vkg_tensor first_pair = vkg_slice(g, rows, 1, 0, 2);                        /* pe[pos, :2] */
    vkg_tensor r = vkg_constant(g, "R", VKG_F32, 2, (int64_t[]){2, 2}, R);
    vkg_output(g, "rotated", vkg_matmul(g, first_pair, r, VKG_NONE, VKG_TRANSPOSE_B));  /* R @ v, per row */
    vkg_tensor a = vkg_embedding(g, pe, vkg_constant(g, "dot_pos", VKG_I32, 1, (int64_t[]){ND}, dot_ids));
    vkg_tensor b = vkg_embedding(g, pe, vkg_constant(g, "dot_pos_k", VKG_I32, 1, (int64_t[]){ND}, dot_ids_k));
    vkg_output(g, "dots", vkg_lesson_row_dots(g, a, b));                        /* PE(pos) . PE(pos+k) */
    vkg_lesson_run run;
    vkg_lesson_run_begin(&run, dev, g, err);
    vkg_lesson_run_set(&run, "pe", out->pe, sizeof out->pe);
    vkg_lesson_run_go(&run);
    vkg_lesson_run_get(&run, "rotated", &out->rotated[0][0], NR * 2);
    vkg_lesson_run_get(&run, "dots", out->dots, ND);
    st = vkg_lesson_run_end(&run);
    vkg_graph_free(g);
    if (st != VKG_OK) return st;

    for (int i = 0; i < NR; i++) {
        const float *want = &out->pe[(rot_ids[i] + k) * D];
        out->rot_pos[i] = rot_ids[i];
        out->rotation_ok[i] = 1;
        for (int c = 0; c < 2; c++)    /* torch.allclose(atol=1e-5): rtol stays 1e-5 */
            if (!(fabs((double)out->rotated[i][c] - want[c]) <= 1e-5 + 1e-5 * fabs((double)want[c])))
                out->rotation_ok[i] = 0;
    }
    /* sin a sin(a + k w) + cos a cos(a + k w) = cos(k w): each pair of dimensions adds cos(k w_i) */
    double expected = 0, lo = INFINITY, hi = -INFINITY;
    for (int i = 0; i < D / 2; i++) expected += cos(k * pow(10000.0, -2.0 * i / D));
    out->dot_expected = (float)expected;
    for (int i = 0; i < ND; i++) {
        out->dot_pos[i] = dot_ids[i];
        lo = fmin(lo, out->dots[i]);
        hi = fmax(hi, out->dots[i]);
    }
    out->dots_equal = hi - lo <= 1e-4;
    return VKG_OK;
}

/* ---- step 6 ------------------------------------------------------------------------------- */

/* The block of d_model 64, 4 heads, d_ff 256 on [2, 10, 64] = random + positional encoding. */
static vkg_status run_block(vkg_device *dev, vkg_lesson_block *out, vkg_error *err) {
    enum { B = 2, T = 10, C = 64 };
    vkg_block_config cfg = {.d_model = C, .n_heads = 4, .d_ff = 256, .causal = 0};
    vkg_block_weights w;
    vkg_status st = vkg_block_weights_init(&w, &cfg, 0, err);
    if (st != VKG_OK) return st;
    float *x = malloc(2 * B * T * C * sizeof *x), *pe = malloc(T * C * sizeof *pe), *y = x + B * T * C;
    vkg_graph *g = x && pe ? new_graph(err) : NULL;
    if (!g) {
        st = vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory for the block's tokens");
        goto done;
    }
    st = vkg_lesson_positional_encoding(dev, T, C, pe, err);
    if (st != VKG_OK) goto done;
    vkg_rng rng;
    vkg_rng_seed(&rng, 0);
    vkg_rng_fill_normal(&rng, x, B * T * C, 1.0f);
    for (int i = 0; i < B * T * C; i++) x[i] += pe[i % (T * C)];     /* torch.randn(2, 10, 64) + PE */

    vkg_tensor xt = vkg_input(g, "tokens", VKG_F32, 3, (int64_t[]){B, T, C});
    vkg_tensor yt = vkg_block_build(g, xt, &cfg, &w, "block", NULL);
    vkg_output(g, "y", yt);
    if (vkg_graph_status(g) == VKG_OK) {
        out->input_ndim = vkg_tensor_shape(g, xt, out->input_shape);
        out->output_ndim = vkg_tensor_shape(g, yt, out->output_shape);
    }
    out->params = vkg_graph_constant_numel(g);            /* every constant is a parameter */
    vkg_lesson_run run;
    vkg_lesson_run_begin(&run, dev, g, err);
    vkg_lesson_run_set(&run, "tokens", x, B * T * C * sizeof *x);
    vkg_lesson_run_go(&run);
    vkg_lesson_run_get(&run, "y", y, B * T * C);
    st = vkg_lesson_run_end(&run);
    out->output_finite = st == VKG_OK;
    for (int i = 0; st == VKG_OK && i < B * T * C; i++) out->output_finite &= isfinite(y[i]) != 0;
done:
    vkg_graph_free(g);
    free(x);
    free(pe);
    vkg_block_weights_free(&w);
    return st;
}

/* Exercise 5: d_model 768, 12 heads, d_ff 3072.  Counting needs shapes, not values, so every
 * weight borrows one zero buffer and the graph is built but never run. */
static vkg_status count_large_block(int64_t *params, vkg_error *err) {
    enum { C = 768, F = 3072 };
    vkg_block_config cfg = {.d_model = C, .n_heads = 12, .d_ff = F, .causal = 0};
    float *zeros = calloc((size_t)C * F, sizeof *zeros);       /* the largest weight: [F, C] */
    vkg_graph *g = zeros ? new_graph(err) : NULL;
    if (!g) {
        free(zeros);
        return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory for a d_model 768 block");
    }
    vkg_block_weights w = {zeros, zeros, zeros, zeros, zeros, zeros, zeros, zeros, zeros, zeros, zeros, zeros};
    vkg_tensor x = vkg_input(g, "tokens", VKG_F32, 3, (int64_t[]){1, 1, C});
    vkg_output(g, "y", vkg_block_build(g, x, &cfg, &w, "block", NULL));
    vkg_status st = vkg_graph_status(g);
    if (st != VKG_OK) vkg_error_set(err, st, "lesson block 768: %s", vkg_graph_error(g));
    *params = vkg_graph_constant_numel(g);
    vkg_graph_free(g);
    free(zeros);
    return st;
}

/* The causal mask on random Q, K, V [5, 8]. */
static vkg_status run_causal(vkg_device *dev, vkg_lesson_block *out, vkg_error *err) {
    enum { N = 5, D = 8 };
    static const float tril[N * N] = {1, 0, 0, 0, 0, 1, 1, 0, 0, 0, 1, 1, 1, 0, 0, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1};
    float qkv[3 * N * D];
    vkg_rng rng;
    vkg_rng_seed(&rng, 1);
    vkg_rng_fill_normal(&rng, qkv, 3 * N * D, 1.0f);
    vkg_graph *g = new_graph(err);
    if (!g) return VKG_ERR_OUT_OF_MEMORY;
    vkg_tensor q = vkg_input(g, "Q", VKG_F32, 2, (int64_t[]){N, D});
    vkg_tensor k = vkg_input(g, "K", VKG_F32, 2, (int64_t[]){N, D});
    vkg_tensor v = vkg_input(g, "V", VKG_F32, 2, (int64_t[]){N, D});
    vkg_tensor mask = vkg_constant(g, "causal", VKG_F32, 2, (int64_t[]){N, N}, tril);  /* lower triangle */
    vkg_tensor w;
    vkg_lesson_attention(g, q, k, v, mask, &w);
    vkg_output(g, "weights", w);
    vkg_lesson_run run;
    vkg_lesson_run_begin(&run, dev, g, err);
    vkg_lesson_run_set(&run, "Q", qkv, N * D * sizeof(float));
    vkg_lesson_run_set(&run, "K", qkv + N * D, N * D * sizeof(float));
    vkg_lesson_run_set(&run, "V", qkv + 2 * N * D, N * D * sizeof(float));
    vkg_lesson_run_go(&run);
    vkg_lesson_run_get(&run, "weights", out->causal_weights, N * N);
    vkg_status st = vkg_lesson_run_end(&run);
    vkg_graph_free(g);
    return st;
}

/* Exercise 1: query [[1, 0]]; key 0 is [lead * sqrt(2), 0] and the others zero, so key 0's score
 * is `lead` above the rest's.  lead 0: all scores equal. */
static vkg_status run_equal_scores(vkg_device *dev, vkg_lesson_block *out, vkg_error *err) {
    enum { N = VKG_LESSON_AVG_KEYS };
    static const float Q[2] = {1, 0}, V[N * 2] = {1, 0, 0, 1, 1, 1, 2, 3, 6, 0};
    static const float leads[VKG_LESSON_N_PEAKS] = {0, 2, 10};
    memcpy(out->values, V, sizeof V);
    for (int c = 0; c < 2; c++) {
        double sum = 0;
        for (int j = 0; j < N; j++) sum += V[j * 2 + c];
        out->values_mean[c] = (float)(sum / N);
    }
    vkg_graph *g = new_graph(err);
    if (!g) return VKG_ERR_OUT_OF_MEMORY;
    vkg_tensor q = vkg_constant(g, "Q", VKG_F32, 2, (int64_t[]){1, 2}, Q);
    vkg_tensor k = vkg_input(g, "K", VKG_F32, 2, (int64_t[]){N, 2});
    vkg_tensor v = vkg_constant(g, "V", VKG_F32, 2, (int64_t[]){N, 2}, V);
    vkg_tensor w;
    vkg_output(g, "output", vkg_lesson_attention(g, q, k, v, VKG_NONE, &w));
    vkg_output(g, "weights", w);
    vkg_lesson_run run;
    vkg_lesson_run_begin(&run, dev, g, err);
    for (int i = 0; i < VKG_LESSON_N_PEAKS; i++) {    /* one plan, run once per K */
        float K[N * 2] = {0};
        K[0] = leads[i] * sqrtf(2.0f);
        out->lead[i] = leads[i];
        vkg_lesson_run_set(&run, "K", K, sizeof K);
        vkg_lesson_run_go(&run);
        vkg_lesson_run_get(&run, "weights", out->peak_weights[i], N);
        vkg_lesson_run_get(&run, "output", out->peak_output[i], 2);
    }
    vkg_status st = vkg_lesson_run_end(&run);
    vkg_graph_free(g);
    return st;
}

vkg_status vkg_lesson_step_block(vkg_device *dev, vkg_lesson_block *out, vkg_error *err) {
    memset(out, 0, sizeof *out);
    vkg_status st = run_block(dev, out, err);
    if (st == VKG_OK) st = count_large_block(&out->params_large, err);
    if (st == VKG_OK) st = run_causal(dev, out, err);
    if (st == VKG_OK) st = run_equal_scores(dev, out, err);
    return st;
}
