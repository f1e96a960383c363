/* The lesson "Attention and Transformers" run on vkgraph, one function per step.
 *
 * Each step builds its op graphs, runs them on the device it is given and fills a plain struct
 * with the numbers the lesson prints; a matching print function writes them in the lesson's
 * format (numpy-style arrays, the same sentences).  `vkgraph lesson` calls compute then print,
 * and tests/test_lesson.c (steps 1-6) and tests/test_lesson_gpt2.c (step 7) assert every field
 * on each executor, so what the command prints is what the tests check.  The examples/ programs
 * are the same steps written against vkgraph.h alone, for reading.
 *
 * Random data comes from vkg_rng with fixed seeds: the digits of steps 2, 3 and 6 differ from
 * the lesson's (PyTorch draws other numbers), the properties the lesson shows do not.
 *
 * The graph builders at the top are the lesson's Python functions as graphs and are reused by
 * the steps: attention(Q, K, V, mask) and multi_head_attention(X, W_Q, W_K, W_V, W_O, h, mask). */
#ifndef VKGRAPH_LESSON_H
#define VKGRAPH_LESSON_H

#include "vkgraph.h"

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- graph builders ------------------------------------------------------------------------ */

/* softmax(Q K^T / sqrt(d_k)) V for q [.., Tq, d_k], k [.., Tk, d_k], v [.., Tk, d_v].
 * mask (f32 [.., Tq, Tk] broadcasting to the scores, or VKG_NONE): 0 blocks a key, which then
 * gets weight exactly 0.  *weights (optional) receives the softmax [.., Tq, Tk]. */
vkg_tensor vkg_lesson_attention(vkg_graph *g, vkg_tensor q, vkg_tensor k, vkg_tensor v, vkg_tensor mask,
                                vkg_tensor *weights);

/* Multi-head self-attention of x [T, C] with projections w_q, w_k, w_v, w_o [C, C] (used as
 * x @ W, as in the lesson), n_heads dividing C; mask as for vkg_lesson_attention, shared by
 * every head ([T, T]).  Returns [T, C]. */
vkg_tensor vkg_lesson_multi_head(vkg_graph *g, vkg_tensor x, vkg_tensor w_q, vkg_tensor w_k, vkg_tensor w_v,
                                 vkg_tensor w_o, int n_heads, vkg_tensor mask);

/* The row-wise dot products a[i] . b[i] of a, b [N, D] as a batched matmul [N,1,D] @ [N,D,1];
 * returns [N]. */
vkg_tensor vkg_lesson_row_dots(vkg_graph *g, vkg_tensor a, vkg_tensor b);

/* Running a graph as straight-line code: begin compiles g for dev and opens a session; set,
 * run and get work by input/output name; the first failure sticks (later calls do nothing) and
 * end frees the session and plan and returns it.  Fails with the graph's own message when a
 * builder call went wrong. */
typedef struct vkg_lesson_run {
    const vkg_graph *graph;
    vkg_plan *plan;
    vkg_session *session;
    vkg_status status;
    vkg_error *err;
} vkg_lesson_run;
void vkg_lesson_run_begin(vkg_lesson_run *r, vkg_device *dev, const vkg_graph *g, vkg_error *err);
void vkg_lesson_run_set(vkg_lesson_run *r, const char *name, const void *data, size_t bytes);
void vkg_lesson_run_go(vkg_lesson_run *r);
void vkg_lesson_run_get(vkg_lesson_run *r, const char *name, float *data, size_t n);
vkg_status vkg_lesson_run_end(vkg_lesson_run *r);

/* ---- the transformer block ------------------------------------------------------------------ */

/* The lesson's transformer block, pre-LayerNorm:
 *     x = x + MultiHeadAttention(LayerNorm(x))
 *     x = x + FFN(LayerNorm(x)),   FFN(h) = relu(h W1^T + b1) W2^T + b2
 * with PyTorch's parameter layout (nn.MultiheadAttention in_proj/out_proj, nn.Linear weights
 * stored [out, in]), so the parameter count matches the lesson's: 49,984 for d_model 64, 4 heads,
 * d_ff 256. */
typedef struct vkg_block_config {
    int d_model, n_heads, d_ff;
    int causal;          /* add the causal mask to the attention scores */
} vkg_block_config;

typedef struct vkg_block_weights {
    float *in_proj_w, *in_proj_b;     /* [3C, C], [3C]  (Q, K, V stacked)           */
    float *out_proj_w, *out_proj_b;   /* [C, C], [C]                                 */
    float *norm1_w, *norm1_b;         /* [C]                                         */
    float *norm2_w, *norm2_b;         /* [C]                                         */
    float *ff1_w, *ff1_b;             /* [F, C], [F]                                 */
    float *ff2_w, *ff2_b;             /* [C, F], [C]                                 */
} vkg_block_weights;

/* Allocates weights initialised like PyTorch's defaults (uniform +-1/sqrt(fan_in), LayerNorm
 * gamma 1 and beta 0) from a seeded generator. */
vkg_status vkg_block_weights_init(vkg_block_weights *w, const vkg_block_config *cfg, uint64_t seed, vkg_error *err);
void vkg_block_weights_free(vkg_block_weights *w);

/* Adds the block's constants (named prefix.*) and ops to g; x is [B, T, C] (or [T, C]).
 * attn_probs, when non-NULL, receives the attention weights [B, H, T, T] ([H, T, T] for x [T, C]). */
vkg_tensor vkg_block_build(vkg_graph *g, vkg_tensor x, const vkg_block_config *cfg, const vkg_block_weights *w,
                           const char *prefix, vkg_tensor *attn_probs);

/* ---- the steps ------------------------------------------------------------------------------ */

enum { VKG_LESSON_STEPS = 7 };
/* A one-line title of step 1..7 ("" otherwise). */
const char *vkg_lesson_step_title(int step);

/* Step 1: attention as a soft lookup.  Q = [[1,0]], K = [[1,0],[0,1],[0.7,0.7]],
 * V = [[10,0],[0,10],[5,5]]. */
typedef struct vkg_lesson_lookup {
    float weights[3], output[2];                /* [1, 3] and [1, 2]                         */
    int matches_reference;                      /* equals a plain C computation (1e-5)       */
    float masked_weights[3], masked_output[2];  /* the same with key 1 blocked by the mask    */
} vkg_lesson_lookup;
vkg_status vkg_lesson_step_lookup(vkg_device *dev, vkg_lesson_lookup *out, vkg_error *err);
void vkg_lesson_print_lookup(FILE *f, const vkg_lesson_lookup *r);

/* Step 2: why divide by sqrt(d_k).  q . k of 10,000 random pairs for each d_k, computed on the
 * device, and the softmax of 10 scores with std 8 before and after dividing by 8.  The draws:
 * vkg_rng seed 0, standard normal q then k ([10000, d_k] each) for d_k = 4, 64, 512 in turn,
 * then the 10 scores (normal times 8). */
enum { VKG_LESSON_PAIRS = 10000, VKG_LESSON_N_DK = 3, VKG_LESSON_N_SCORES = 10 };
typedef struct vkg_lesson_scaling {
    int d_k[VKG_LESSON_N_DK];                   /* 4, 64, 512                                */
    double std_dots[VKG_LESSON_N_DK];           /* sample std (n - 1) of q . k               */
    double std_scaled[VKG_LESSON_N_DK];         /* of q . k / sqrt(d_k)                      */
    float largest_unscaled, largest_scaled;     /* the largest softmax weight p              */
    float grad_unscaled, grad_scaled;           /* its gradient p (1 - p)                    */
} vkg_lesson_scaling;
vkg_status vkg_lesson_step_scaling(vkg_device *dev, vkg_lesson_scaling *out, vkg_error *err);
void vkg_lesson_print_scaling(FILE *f, const vkg_lesson_scaling *r);

/* Step 3: self-attention and multi-head attention on 5 tokens of d_model 16. */
enum { VKG_LESSON_TOKENS = 5, VKG_LESSON_D_MODEL = 16, VKG_LESSON_HEADS = 4 };
#define VKG_LESSON_TD (VKG_LESSON_TOKENS * VKG_LESSON_D_MODEL)
#define VKG_LESSON_DD (VKG_LESSON_D_MODEL * VKG_LESSON_D_MODEL)
/* The lesson's X [5, 16] (standard normal) and W_Q, W_K, W_V, W_O [16, 16] (normal / sqrt(16)),
 * from a fixed seed; steps 3 and 4 share them, and tests recompute from them. */
typedef struct vkg_lesson_tokens {
    float x[VKG_LESSON_TD];
    float w_q[VKG_LESSON_DD], w_k[VKG_LESSON_DD], w_v[VKG_LESSON_DD], w_o[VKG_LESSON_DD];
} vkg_lesson_tokens;
void vkg_lesson_tokens_init(vkg_lesson_tokens *t);

typedef struct vkg_lesson_self_attention {
    float weights[VKG_LESSON_TOKENS * VKG_LESSON_TOKENS];  /* one head, [5, 5]              */
    int ndim;
    int64_t shape[VKG_MAX_DIMS];                           /* of the output: [5, 16]        */
    float output[VKG_LESSON_TD];
    int multi_head_ndim;
    int64_t multi_head_shape[VKG_MAX_DIMS];                /* 4 heads: [5, 16]              */
    float multi_head_output[VKG_LESSON_TD];
} vkg_lesson_self_attention;
vkg_status vkg_lesson_step_self_attention(vkg_device *dev, vkg_lesson_self_attention *out, vkg_error *err);
void vkg_lesson_print_self_attention(FILE *f, const vkg_lesson_self_attention *r);

/* Step 4: permutation equivariance (Question 3, Exercise 3).  The shuffle X[perm] is done on
 * the device as an embedding lookup of X's rows. */
typedef struct vkg_lesson_permutation {
    int perm[VKG_LESSON_TOKENS];                /* 3, 0, 4, 1, 2                             */
    double max_diff, max_diff_causal;           /* max |MHA(X[perm]) - MHA(X)[perm]|         */
    int equivariant, equivariant_causal;        /* allclose(atol 1e-5, rtol 1e-5)            */
} vkg_lesson_permutation;
vkg_status vkg_lesson_step_permutation(vkg_device *dev, vkg_lesson_permutation *out, vkg_error *err);
void vkg_lesson_print_permutation(FILE *f, const vkg_lesson_permutation *r);

/* Sinusoidal positional encoding [n_positions, d_model] (d_model even) into pe.  The angle
 * table pos * omega_i is computed on the device (a broadcast multiply of positions [P, 1] by
 * frequencies [1, d/2], the lesson's `pos * omega`); sin and cos are taken on the host, because
 * the graph API has no sine op and adding one only for this table would not be honest about
 * what a transformer runs.  The frequencies omega_i = 10000^(-2i/d) are computed on the host. */
vkg_status vkg_lesson_positional_encoding(vkg_device *dev, int n_positions, int d_model, float *pe,
                                          vkg_error *err);

/* Step 5: positional encoding as a rotation (Question 4) and Exercise 4. */
enum { VKG_LESSON_PE_POSITIONS = 50, VKG_LESSON_PE_DIM = 16, VKG_LESSON_N_ROT = 3, VKG_LESSON_N_DOTS = 5 };
typedef struct vkg_lesson_positions {
    float pe[VKG_LESSON_PE_POSITIONS * VKG_LESSON_PE_DIM];
    int k;                                      /* the offset: 3                             */
    int rot_pos[VKG_LESSON_N_ROT];              /* 0, 10, 40                                 */
    float rotated[VKG_LESSON_N_ROT][2];         /* R @ PE[pos, :2], on the device            */
    int rotation_ok[VKG_LESSON_N_ROT];          /* allclose to PE[pos + k, :2] (atol 1e-5)   */
    int dot_pos[VKG_LESSON_N_DOTS];             /* 0, 10, 20, 30, 40                         */
    float dots[VKG_LESSON_N_DOTS];              /* PE(pos) . PE(pos + k), on the device      */
    float dot_expected;                         /* the formula: sum_i cos(k omega_i)         */
    int dots_equal;                             /* all within 1e-4 of each other             */
} vkg_lesson_positions;
vkg_status vkg_lesson_step_positions(vkg_device *dev, vkg_lesson_positions *out, vkg_error *err);
void vkg_lesson_print_positions(FILE *f, const vkg_lesson_positions *r);

/* Step 6: the transformer block, its parameter count (and Exercise 5's), the causal mask and
 * Exercise 1 (equal scores average the values; one dominant score picks its value). */
enum { VKG_LESSON_N_PEAKS = 3, VKG_LESSON_AVG_KEYS = 5 };
typedef struct vkg_lesson_block {
    int input_ndim, output_ndim;
    int64_t input_shape[VKG_MAX_DIMS];          /* [2, 10, 64]                               */
    int64_t output_shape[VKG_MAX_DIMS];         /* the same: a block keeps the shape         */
    int output_finite;                          /* the block really ran: every value finite  */
    int64_t params;                             /* 49,984 for 64 / 4 / 256                   */
    int64_t params_large;                       /* 7,087,872 for 768 / 12 / 3072             */
    float causal_weights[25];                   /* [5, 5], zero above the diagonal; Q, K, V
                                                   [5, 8] drawn in turn from seed 1           */
    float values[VKG_LESSON_AVG_KEYS * 2];      /* V [5, 2] of Exercise 1                    */
    float values_mean[2];                       /* their plain average                       */
    float lead[VKG_LESSON_N_PEAKS];             /* how far key 0's score is above the rest   */
    float peak_weights[VKG_LESSON_N_PEAKS][VKG_LESSON_AVG_KEYS];
    float peak_output[VKG_LESSON_N_PEAKS][2];
} vkg_lesson_block;
vkg_status vkg_lesson_step_block(vkg_device *dev, vkg_lesson_block *out, vkg_error *err);
void vkg_lesson_print_block(FILE *f, const vkg_lesson_block *r);

/* Step 7: look inside GPT-2 (needs a GPT-2 folder).  For each sentence, per (layer, head), the
 * token in 1..it (the first token ignored, as in the lesson) that " it" attends to most.  Layers and heads
 * are numbered from 0, as the lesson indexes them: "layer 4" is model.h[4], the fifth. */
#define VKG_LESSON_SENTENCE_TIRED "The animal didn't cross the street because it was too tired"
#define VKG_LESSON_SENTENCE_WIDE "The animal didn't cross the street because it was too wide"
/* The heatmap's default name, for the layer and head it shows (4 and 3 in GPT-2 124M):
 * "lesson-gpt2-layer4-head3.png".  Given as png_path, "" means this name. */
#define VKG_LESSON_HEATMAP_PATTERN "lesson-gpt2-layer%d-head%d.png"
#define VKG_LESSON_HEATMAP_DEFAULT ""
/* Step 7's first line for a model folder marked as random (vkgraph gpt2-random). */
#define VKG_LESSON_RANDOM_NOTE "RANDOM WEIGHTS (written by vkgraph random or gpt2-random): what the heads attend to means nothing"
enum { VKG_LESSON_GPT2_LAYER = 4, VKG_LESSON_GPT2_HEAD = 3 };
typedef struct vkg_lesson_sentence {
    const char *text;
    int n_tokens;
    char **tokens;              /* each token's text, as tokenizer.decode([t]) (owned)         */
    int it;                     /* index of the token " it"                                    */
    int *best;                  /* [n_layer * n_head]: the token " it" attends to most         */
    float *best_weight;         /* its weight                                                  */
    float *heat;                /* [T, T]: the pattern of (layer, head)                        */
} vkg_lesson_sentence;
typedef struct vkg_lesson_gpt2 {
    int n_layer, n_head;
    int layer, head;            /* 4 and 3 (smaller models: their last layer / head)           */
    int random_weights;         /* the model folder says its weights are random                */
    vkg_lesson_sentence tired, wide;
} vkg_lesson_gpt2;
/* tokenizer_dir NULL: the tokenizer files are in model_dir. */
vkg_status vkg_lesson_gpt2_run(vkg_device *dev, const char *model_dir, const char *tokenizer_dir,
                               vkg_lesson_gpt2 *out, vkg_error *err);
void vkg_lesson_gpt2_free(vkg_lesson_gpt2 *r);
/* Exercise 6: the heads (layer, head) whose choice moves from " animal" to " street"; writes up
 * to max of them and returns how many there are. */
int vkg_lesson_gpt2_moves(const vkg_lesson_gpt2 *r, int *layers, int *heads, int max);
void vkg_lesson_print_gpt2(FILE *f, const vkg_lesson_gpt2 *r);
/* The heatmap of (layer, head) for the "tired" sentence as a PNG. */
vkg_status vkg_lesson_gpt2_heatmap(const vkg_lesson_gpt2 *r, const char *path, vkg_error *err);
/* Run, print, and write the heatmap to png_path (when non-NULL; VKG_LESSON_HEATMAP_DEFAULT: the
 * file VKG_LESSON_HEATMAP_PATTERN names for the layer and head shown, in the current folder). */
vkg_status vkg_lesson_step_gpt2(vkg_device *dev, const char *model_dir, const char *tokenizer_dir,
                                const char *png_path, FILE *f, vkg_error *err);
/* Python's repr() of a str (the quotes the lesson prints tokens with); returns its length in
 * characters, for padding. */
int vkg_lesson_py_repr(char *buf, size_t size, const char *text);

#ifdef __cplusplus
}
#endif
#endif
