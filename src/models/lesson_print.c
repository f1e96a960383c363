/* The lesson's results printed as the lesson prints them: numpy-style arrays and the same
 * sentences, so a reader can hold the two side by side. */
#include "vkgraph_lesson.h"

#include <stdio.h>

static const char *py_bool(int b) { return b ? "True" : "False"; }

const char *vkg_lesson_step_title(int step) {
    static const char *const titles[] = {
        "",
        "Attention as a soft lookup: softmax(Q K^T / sqrt(d_k)) V",
        "Why divide by sqrt(d_k)?",
        "Self-attention and multi-head attention",
        "Does attention know the order of the words? (Question 3, Exercise 3)",
        "Positional encoding: moving k positions is a rotation (Question 4, Exercise 4)",
        "The transformer block and the causal mask (Exercises 5 and 1)",
        "Look inside GPT-2 (Exercise 6)",
    };
    return step >= 1 && step <= VKG_LESSON_STEPS ? titles[step] : "";
}

void vkg_lesson_print_lookup(FILE *f, const vkg_lesson_lookup *r) {
    char w[128], o[128];
    fprintf(f, "weights: %s  output: %s\n", vkg_format_array(w, sizeof w, r->weights, 1, 3, 3),
            vkg_format_array(o, sizeof o, r->output, 1, 2, 2));
    fprintf(f, "matches a plain C computation: %s\n", py_bool(r->matches_reference));
    fprintf(f, "key 1 blocked by the mask: weights: %s  output: %s\n",
            vkg_format_array(w, sizeof w, r->masked_weights, 1, 3, 3),
            vkg_format_array(o, sizeof o, r->masked_output, 1, 2, 2));
}

void vkg_lesson_print_scaling(FILE *f, const vkg_lesson_scaling *r) {
    for (int i = 0; i < VKG_LESSON_N_DK; i++)
        fprintf(f, "d_k = %3d: std of q.k = %6.2f   after / sqrt(d_k) = %.2f\n", r->d_k[i], r->std_dots[i],
                r->std_scaled[i]);
    fprintf(f, "%-9s: largest weight %.3f, its gradient p(1-p) = %.4f\n", "unscaled", (double)r->largest_unscaled,
            (double)r->grad_unscaled);
    fprintf(f, "%-9s: largest weight %.3f, its gradient p(1-p) = %.4f\n", "scaled", (double)r->largest_scaled,
            (double)r->grad_scaled);
}

static void print_shape(FILE *f, int ndim, const int64_t *shape) {
    fputc('[', f);
    for (int i = 0; i < ndim; i++) fprintf(f, "%s%lld", i ? ", " : "", (long long)shape[i]);
    fputc(']', f);
}

void vkg_lesson_print_self_attention(FILE *f, const vkg_lesson_self_attention *r) {
    char w[512];
    fprintf(f, "%s\n", vkg_format_array(w, sizeof w, r->weights, VKG_LESSON_TOKENS, VKG_LESSON_TOKENS, 2));
    fprintf(f, "shape: ");
    print_shape(f, r->ndim, r->shape);
    fprintf(f, "\nmulti-head attention, %d heads: shape: ", VKG_LESSON_HEADS);
    print_shape(f, r->multi_head_ndim, r->multi_head_shape);
    fputc('\n', f);
}

void vkg_lesson_print_permutation(FILE *f, const vkg_lesson_permutation *r) {
    fprintf(f, "perm = [%d, %d, %d, %d, %d]\n", r->perm[0], r->perm[1], r->perm[2], r->perm[3], r->perm[4]);
    fprintf(f, "shuffled input gives shuffled output: %s\n", py_bool(r->equivariant));
    fprintf(f, "with a causal mask, shuffled input gives shuffled output: %s (largest difference %.2g)\n",
            py_bool(r->equivariant_causal), r->max_diff_causal);
}

void vkg_lesson_print_positions(FILE *f, const vkg_lesson_positions *r) {
    for (int i = 0; i < VKG_LESSON_N_ROT; i++)
        fprintf(f, "pos %2d: rotating gives position %d: %s\n", r->rot_pos[i], r->rot_pos[i] + r->k,
                py_bool(r->rotation_ok[i]));
    fprintf(f, "PE(pos) . PE(pos + %d):", r->k);
    for (int i = 0; i < VKG_LESSON_N_DOTS; i++) fprintf(f, "  pos %d: %.4f", r->dot_pos[i], (double)r->dots[i]);
    fprintf(f, "\nsum of cos(%d omega_i): %.4f;  depends only on k: %s\n", r->k, (double)r->dot_expected,
            py_bool(r->dots_equal));
}

void vkg_lesson_print_block(FILE *f, const vkg_lesson_block *r) {
    char w[512], o[128], m[128];
    fprintf(f, "input ");
    print_shape(f, r->input_ndim, r->input_shape);
    fprintf(f, " -> shape: ");
    print_shape(f, r->output_ndim, r->output_shape);
    fprintf(f, "\nparameters per block: %lld\n", (long long)r->params);
    fprintf(f, "d_model 768, 12 heads, d_ff 3072: %lld parameters (rule of thumb 12 * 768^2 = %lld)\n",
            (long long)r->params_large, 12LL * 768 * 768);
    fprintf(f, "causal weights:\n%s\n", vkg_format_array(w, sizeof w, r->causal_weights, 5, 5, 2));
    fprintf(f, "Exercise 1, values V = [");
    for (int j = 0; j < VKG_LESSON_AVG_KEYS; j++)
        fprintf(f, "%s[%g, %g]", j ? ", " : "", (double)r->values[2 * j], (double)r->values[2 * j + 1]);
    fprintf(f, "]\n");
    for (int i = 0; i < VKG_LESSON_N_PEAKS; i++) {
        vkg_format_array(w, sizeof w, r->peak_weights[i], 1, VKG_LESSON_AVG_KEYS, 3);
        vkg_format_array(o, sizeof o, r->peak_output[i], 1, 2, 2);
        if (r->lead[i] == 0.0f)
            fprintf(f, "equal scores: weights %s  output %s  plain average of the values %s\n", w, o,
                    vkg_format_array(m, sizeof m, r->values_mean, 1, 2, 2));
        else
            fprintf(f, "key 0 scores %2g higher: weights %s  output %s\n", (double)r->lead[i], w, o);
    }
}
