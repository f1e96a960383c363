/* Lesson steps 1 to 4: attention as a soft lookup, why scores are divided by sqrt(d_k),
 * self-attention with one and with several heads, and permutation equivariance. */
#include "vkgraph_lesson.h"

#include "base/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* torch.allclose: |a - b| <= atol + rtol |b| everywhere. */
static int all_close(const float *a, const float *b, size_t n, double rtol, double atol) {
    for (size_t i = 0; i < n; i++)
        if (!(fabs((double)a[i] - (double)b[i]) <= atol + rtol * fabs((double)b[i]))) return 0;
    return 1;
}

/* Plain C attention in double: q [Tq, d], k [Tk, d], v [Tk, dv], Tk <= 16 (step 1 has 3 keys). */
static void host_attention(const float *q, const float *k, const float *v, int Tq, int Tk, int d, int dv,
                           float *out) {
    for (int i = 0; i < Tq; i++) {
        double s[16], top = -INFINITY, sum = 0;
        for (int j = 0; j < Tk; j++) {
            s[j] = 0;
            for (int c = 0; c < d; c++) s[j] += (double)q[i * d + c] * k[j * d + c];
            s[j] /= sqrt((double)d);
            if (s[j] > top) top = s[j];
        }
        for (int j = 0; j < Tk; j++) sum += (s[j] = exp(s[j] - top));
        for (int c = 0; c < dv; c++) {
            double acc = 0;
            for (int j = 0; j < Tk; j++) acc += s[j] / sum * v[j * dv + c];
            out[i * dv + c] = (float)acc;
        }
    }
}

static vkg_graph *new_graph(vkg_error *err) {
    vkg_graph *g = vkg_graph_new();
    if (!g) vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory creating a graph");
    return g;
}

/* ---- step 1 ------------------------------------------------------------------------------- */

vkg_status vkg_lesson_step_lookup(vkg_device *dev, vkg_lesson_lookup *out, vkg_error *err) {
    static const float Q[2] = {1, 0};
    static const float K[6] = {1, 0, 0, 1, 0.7f, 0.7f};      /* matches, unrelated, partly matches */
    static const float V[6] = {10, 0, 0, 10, 5, 5};
    static const float keep[3] = {1, 0, 1};                  /* the mask blocks key 1              */
    memset(out, 0, sizeof *out);
    vkg_graph *g = new_graph(err);
    if (!g) return VKG_ERR_OUT_OF_MEMORY;
    vkg_tensor q = vkg_input(g, "Q", VKG_F32, 2, (int64_t[]){1, 2});
    vkg_tensor k = vkg_input(g, "K", VKG_F32, 2, (int64_t[]){3, 2});
    vkg_tensor v = vkg_input(g, "V", VKG_F32, 2, (int64_t[]){3, 2});
    vkg_tensor mask = vkg_constant(g, "mask", VKG_F32, 2, (int64_t[]){1, 3}, keep);
    vkg_tensor w, wm;
    vkg_output(g, "output", vkg_lesson_attention(g, q, k, v, VKG_NONE, &w));
    vkg_output(g, "weights", w);
    vkg_output(g, "masked_output", vkg_lesson_attention(g, q, k, v, mask, &wm));
    vkg_output(g, "masked_weights", wm);
    vkg_lesson_run run;
    vkg_lesson_run_begin(&run, dev, g, err);
    vkg_lesson_run_set(&run, "Q", Q, sizeof Q);
    vkg_lesson_run_set(&run, "K", K, sizeof K);
    vkg_lesson_run_set(&run, "V", V, sizeof V);
    vkg_lesson_run_go(&run);
    vkg_lesson_run_get(&run, "weights", out->weights, 3);
    vkg_lesson_run_get(&run, "output", out->output, 2);
    vkg_lesson_run_get(&run, "masked_weights", out->masked_weights, 3);
    vkg_lesson_run_get(&run, "masked_output", out->masked_output, 2);
    vkg_status st = vkg_lesson_run_end(&run);
    vkg_graph_free(g);
    if (st != VKG_OK) return st;
    float reference[2];
    host_attention(Q, K, V, 1, 3, 2, 2, reference);
    out->matches_reference = all_close(out->output, reference, 2, 1e-5, 1e-8);
    return VKG_OK;
}

/* ---- step 2 ------------------------------------------------------------------------------- */

static double sample_std(const float *x, size_t n) {
    double mean = 0, ss = 0;
    for (size_t i = 0; i < n; i++) mean += x[i];
    mean /= (double)n;
    for (size_t i = 0; i < n; i++) ss += ((double)x[i] - mean) * ((double)x[i] - mean);
    return sqrt(ss / (double)(n - 1));
}

static float largest(const float *x, int n) {
    float m = x[0];
    for (int i = 1; i < n; i++) m = x[i] > m ? x[i] : m;
    return m;
}

vkg_status vkg_lesson_step_scaling(vkg_device *dev, vkg_lesson_scaling *out, vkg_error *err) {
    enum { N = VKG_LESSON_PAIRS, S = VKG_LESSON_N_SCORES, NK = VKG_LESSON_N_DK };
    static const int dims[NK] = {4, 64, 512};
    memset(out, 0, sizeof *out);
    float *q[NK] = {0}, *k[NK] = {0}, *dots = malloc(2 * (size_t)N * sizeof *dots);
    int ok = dots != NULL;
    for (int i = 0; i < NK; i++) {
        q[i] = malloc((size_t)N * (size_t)dims[i] * sizeof(float));
        k[i] = malloc((size_t)N * (size_t)dims[i] * sizeof(float));
        ok = ok && q[i] && k[i];
    }
    vkg_graph *g = ok ? new_graph(err) : NULL;
    vkg_status st = VKG_OK;
    if (!g) {
        st = vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory for %d random pairs", N);
        goto done;
    }
    /* q, k: 10,000 pairs of standard normal vectors per d_k; then 10 scores with std 8 */
    vkg_rng rng;
    vkg_rng_seed(&rng, 0);
    for (int i = 0; i < NK; i++) {
        vkg_rng_fill_normal(&rng, q[i], (size_t)N * (size_t)dims[i], 1.0f);
        vkg_rng_fill_normal(&rng, k[i], (size_t)N * (size_t)dims[i], 1.0f);
    }
    float scores[S], p_unscaled[S], p_scaled[S];
    vkg_rng_fill_normal(&rng, scores, S, 8.0f);

    char names[NK][4][16];
    for (int i = 0; i < NK; i++) {
        snprintf(names[i][0], 16, "q%d", dims[i]);
        snprintf(names[i][1], 16, "k%d", dims[i]);
        snprintf(names[i][2], 16, "dots%d", dims[i]);
        snprintf(names[i][3], 16, "scaled%d", dims[i]);
        vkg_tensor qt = vkg_input(g, names[i][0], VKG_F32, 2, (int64_t[]){N, dims[i]});
        vkg_tensor kt = vkg_input(g, names[i][1], VKG_F32, 2, (int64_t[]){N, dims[i]});
        vkg_tensor d = vkg_lesson_row_dots(g, qt, kt);                       /* q . k */
        vkg_output(g, names[i][2], d);
        vkg_output(g, names[i][3], vkg_scale(g, d, 1.0f / sqrtf((float)dims[i])));   /* / sqrt(d_k) */
    }
    vkg_tensor s = vkg_input(g, "scores", VKG_F32, 1, (int64_t[]){S});
    vkg_output(g, "p_unscaled", vkg_softmax(g, s));
    vkg_output(g, "p_scaled", vkg_softmax(g, vkg_scale(g, s, 1.0f / 8.0f)));

    vkg_lesson_run run;
    vkg_lesson_run_begin(&run, dev, g, err);
    for (int i = 0; i < NK; i++) {
        vkg_lesson_run_set(&run, names[i][0], q[i], (size_t)N * (size_t)dims[i] * sizeof(float));
        vkg_lesson_run_set(&run, names[i][1], k[i], (size_t)N * (size_t)dims[i] * sizeof(float));
    }
    vkg_lesson_run_set(&run, "scores", scores, sizeof scores);
    vkg_lesson_run_go(&run);
    for (int i = 0; i < NK; i++) {
        vkg_lesson_run_get(&run, names[i][2], dots, N);
        vkg_lesson_run_get(&run, names[i][3], dots + N, N);
        out->d_k[i] = dims[i];
        out->std_dots[i] = sample_std(dots, N);
        out->std_scaled[i] = sample_std(dots + N, N);
    }
    vkg_lesson_run_get(&run, "p_unscaled", p_unscaled, S);
    vkg_lesson_run_get(&run, "p_scaled", p_scaled, S);
    st = vkg_lesson_run_end(&run);
    if (st == VKG_OK) {
        out->largest_unscaled = largest(p_unscaled, S);
        out->largest_scaled = largest(p_scaled, S);
        out->grad_unscaled = out->largest_unscaled * (1.0f - out->largest_unscaled);
        out->grad_scaled = out->largest_scaled * (1.0f - out->largest_scaled);
    }
done:
    for (int i = 0; i < NK; i++) {
        free(q[i]);
        free(k[i]);
    }
    free(dots);
    vkg_graph_free(g);
    return st;
}

/* ---- steps 3 and 4 ------------------------------------------------------------------------ */

void vkg_lesson_tokens_init(vkg_lesson_tokens *t) {
    vkg_rng rng;
    vkg_rng_seed(&rng, 0);
    float w_std = 1.0f / sqrtf((float)VKG_LESSON_D_MODEL);    /* torch.randn(d, d) / d ** 0.5 */
    vkg_rng_fill_normal(&rng, t->x, VKG_LESSON_TD, 1.0f);
    vkg_rng_fill_normal(&rng, t->w_q, VKG_LESSON_DD, w_std);
    vkg_rng_fill_normal(&rng, t->w_k, VKG_LESSON_DD, w_std);
    vkg_rng_fill_normal(&rng, t->w_v, VKG_LESSON_DD, w_std);
    vkg_rng_fill_normal(&rng, t->w_o, VKG_LESSON_DD, w_std);
}

/* The projections as constants W_Q, W_K, W_V, W_O [16, 16] (borrowed from t). */
static void add_projections(vkg_graph *g, const vkg_lesson_tokens *t, vkg_tensor w[4]) {
    const int64_t dd[2] = {VKG_LESSON_D_MODEL, VKG_LESSON_D_MODEL};
    w[0] = vkg_constant(g, "W_Q", VKG_F32, 2, dd, t->w_q);
    w[1] = vkg_constant(g, "W_K", VKG_F32, 2, dd, t->w_k);
    w[2] = vkg_constant(g, "W_V", VKG_F32, 2, dd, t->w_v);
    w[3] = vkg_constant(g, "W_O", VKG_F32, 2, dd, t->w_o);
}

vkg_status vkg_lesson_step_self_attention(vkg_device *dev, vkg_lesson_self_attention *out, vkg_error *err) {
    memset(out, 0, sizeof *out);
    vkg_lesson_tokens *t = malloc(sizeof *t);
    vkg_graph *g = t ? new_graph(err) : NULL;
    if (!g) {
        free(t);
        return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory for the lesson's tokens");
    }
    vkg_lesson_tokens_init(t);
    vkg_tensor w[4], weights;
    add_projections(g, t, w);
    vkg_tensor x = vkg_input(g, "X", VKG_F32, 2, (int64_t[]){VKG_LESSON_TOKENS, VKG_LESSON_D_MODEL});
    /* attention(X @ W_Q, X @ W_K, X @ W_V) */
    vkg_tensor o = vkg_lesson_attention(g, vkg_matmul(g, x, w[0], VKG_NONE, 0), vkg_matmul(g, x, w[1], VKG_NONE, 0),
                                        vkg_matmul(g, x, w[2], VKG_NONE, 0), VKG_NONE, &weights);
    vkg_tensor mh = vkg_lesson_multi_head(g, x, w[0], w[1], w[2], w[3], VKG_LESSON_HEADS, VKG_NONE);
    vkg_output(g, "weights", weights);
    vkg_output(g, "output", o);
    vkg_output(g, "multi_head", mh);
    if (vkg_graph_status(g) == VKG_OK) {
        out->ndim = vkg_tensor_shape(g, o, out->shape);
        out->multi_head_ndim = vkg_tensor_shape(g, mh, out->multi_head_shape);
    }
    vkg_lesson_run run;
    vkg_lesson_run_begin(&run, dev, g, err);
    vkg_lesson_run_set(&run, "X", t->x, sizeof t->x);
    vkg_lesson_run_go(&run);
    vkg_lesson_run_get(&run, "weights", out->weights, VKG_LESSON_TOKENS * VKG_LESSON_TOKENS);
    vkg_lesson_run_get(&run, "output", out->output, VKG_LESSON_TD);
    vkg_lesson_run_get(&run, "multi_head", out->multi_head_output, VKG_LESSON_TD);
    vkg_status st = vkg_lesson_run_end(&run);
    vkg_graph_free(g);
    free(t);
    return st;
}

/* max |shuffled[i] - original[perm[i]]| and whether they are allclose. */
static double compare_shuffled(const float *shuffled, const float *original, const int *perm, int *close) {
    double worst = 0;
    *close = 1;
    for (int i = 0; i < VKG_LESSON_TOKENS; i++) {
        const float *a = shuffled + i * VKG_LESSON_D_MODEL, *b = original + perm[i] * VKG_LESSON_D_MODEL;
        double d = 0;
        for (int c = 0; c < VKG_LESSON_D_MODEL; c++)
            if (fabs((double)a[c] - (double)b[c]) > d) d = fabs((double)a[c] - (double)b[c]);
        worst = d > worst ? d : worst;
        *close = *close && all_close(a, b, VKG_LESSON_D_MODEL, 1e-5, 1e-5);
    }
    return worst;
}

vkg_status vkg_lesson_step_permutation(vkg_device *dev, vkg_lesson_permutation *out, vkg_error *err) {
    enum { T = VKG_LESSON_TOKENS };
    static const int32_t perm[T] = {3, 0, 4, 1, 2};
    static const float causal[T * T] = {1, 0, 0, 0, 0, 1, 1, 0, 0, 0, 1, 1, 1, 0, 0, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1};
    memset(out, 0, sizeof *out);
    vkg_lesson_tokens *t = malloc(sizeof *t);
    float *outs = malloc(4 * VKG_LESSON_TD * sizeof *outs);
    vkg_graph *g = t && outs ? new_graph(err) : NULL;
    if (!g) {
        free(t);
        free(outs);
        return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory for the lesson's tokens");
    }
    vkg_lesson_tokens_init(t);
    vkg_tensor w[4];
    add_projections(g, t, w);
    vkg_tensor x = vkg_input(g, "X", VKG_F32, 2, (int64_t[]){T, VKG_LESSON_D_MODEL});
    vkg_tensor ids = vkg_constant(g, "perm", VKG_I32, 1, (int64_t[]){T}, perm);
    vkg_tensor xp = vkg_embedding(g, x, ids);                    /* X[perm]: row perm[i] of X */
    vkg_tensor mask = vkg_constant(g, "causal", VKG_F32, 2, (int64_t[]){T, T}, causal);
    vkg_output(g, "original", vkg_lesson_multi_head(g, x, w[0], w[1], w[2], w[3], VKG_LESSON_HEADS, VKG_NONE));
    vkg_output(g, "shuffled", vkg_lesson_multi_head(g, xp, w[0], w[1], w[2], w[3], VKG_LESSON_HEADS, VKG_NONE));
    vkg_output(g, "original_causal", vkg_lesson_multi_head(g, x, w[0], w[1], w[2], w[3], VKG_LESSON_HEADS, mask));
    vkg_output(g, "shuffled_causal", vkg_lesson_multi_head(g, xp, w[0], w[1], w[2], w[3], VKG_LESSON_HEADS, mask));
    vkg_lesson_run run;
    vkg_lesson_run_begin(&run, dev, g, err);
    vkg_lesson_run_set(&run, "X", t->x, sizeof t->x);
    vkg_lesson_run_go(&run);
    vkg_lesson_run_get(&run, "original", outs, VKG_LESSON_TD);
    vkg_lesson_run_get(&run, "shuffled", outs + VKG_LESSON_TD, VKG_LESSON_TD);
    vkg_lesson_run_get(&run, "original_causal", outs + 2 * VKG_LESSON_TD, VKG_LESSON_TD);
    vkg_lesson_run_get(&run, "shuffled_causal", outs + 3 * VKG_LESSON_TD, VKG_LESSON_TD);
    vkg_status st = vkg_lesson_run_end(&run);
    if (st == VKG_OK) {
        for (int i = 0; i < T; i++) out->perm[i] = perm[i];
        out->max_diff = compare_shuffled(outs + VKG_LESSON_TD, outs, out->perm, &out->equivariant);
        out->max_diff_causal =
            compare_shuffled(outs + 3 * VKG_LESSON_TD, outs + 2 * VKG_LESSON_TD, out->perm, &out->equivariant_causal);
    }
    vkg_graph_free(g);
    free(t);
    free(outs);
    return st;
}
