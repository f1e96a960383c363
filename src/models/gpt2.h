/*
 * GPT-2: weights from a Hugging Face model folder, the forward pass as a vkgraph graph, and the
 * runs that use it (one forward pass; prompt + token-by-token decoding with a KV cache).
 *
 * Shapes: T tokens in one run, C = n_embd, H = n_head, D = C / H, V = vocab_size,
 * P = n_positions, I = the MLP's width (n_inner, 4C by default), S = positions the KV cache holds
 * (S <= P).
 *
 * Weights (vkg_gpt2_load).  dir/config.json gives the hyperparameters (gpt2_config.h) and
 * dir/model.safetensors the tensors gpt2_weights.c's table lists (wte, wpe, each layer's
 * ln_1, attn.c_attn, attn.c_proj, ln_2, mlp.c_fc, mlp.c_proj, then ln_f and an optional lm_head,
 * tied to wte when absent), named as Hugging Face names them, with or without the "transformer."
 * prefix (GPT2LMHeadModel vs GPT2Model files).  Conv1D weights are stored [in, out], so each
 * projection is x @ W + b.  Other tensors (the
 * attn.bias / attn.masked_bias buffers of older checkpoints) are ignored, never read.  The
 * tensors are read (pread, never mapped) into one page-aligned block the model owns
 * (vkg_gpt2.weights), each at a 256-byte aligned offset, so the block can be handed to a device
 * that imports host memory; after the load the file is closed and may change or vanish without
 * harm.  A file that changes while it is read is VKG_ERR_IO saying so.  The weight matrices
 * (wte, wpe, lm_head, each layer's four projections) are kept as the file stores them (F32, F16
 * or BF16) unless the load options ask for another dtype; biases and layer norms are always f32
 * (the kernels that read them read f32, and they are 0.1% of the weights).  A missing or
 * mis-shaped tensor is VKG_ERR_FORMAT naming it, the shape expected and the shape found; so is a
 * NaN or Inf, also one that converting to f16 made (a value beyond +-65504).
 *
 * The graph (vkg_gpt2_build), pre-LayerNorm blocks as GPT-2 has them:
 *     x = wte[ids] + wpe[positions]                                     [T, C]
 *     per layer:  a = ln_1(x);  q, k, v = split(a @ c_attn + b)          views [H, T, D]
 *                 p = softmax(causal(q k^T * s));  x += merge(p v) @ c_proj + b
 *                 x += act(ln_2(x) @ c_fc + b) @ mlp.c_proj + b
 * with s = 1 / sqrt(D) (1 without scale_attn_weights), divided by i + 1 as well with
 * scale_attn_by_inverse_layer_idx, and act the config's activation_function, as transformers'
 * GPT2Attention and GPT2MLP compute them.
 *     logits = ln_f(x) @ head^T                                         [T, V] or [1, V]
 * With a cache, each layer has states k_cache and v_cache [H, S, D] and the runtime index "pos"
 * (tokens already cached): the run writes its T rows at pos..pos+T-1 (vkg_write_at) and attends
 * over all S rows, the causal mask with dyn_offset pos giving unwritten rows weight exactly 0.
 * Laid out [H, S, D], each head's keys are one contiguous block that the score matmul reads
 * transposed through strides, and the new rows are a strided copy of the qkv projection.
 */
#ifndef VKG_MODELS_GPT2_H
#define VKG_MODELS_GPT2_H

#include "io/safetensors.h"
#include "models/gpt2_config.h"
#include "vkgraph.h"

/* Matrices (const void *) hold elements of vkg_gpt2.weight_dtype; vectors are f32. */
typedef struct vkg_gpt2_layer {
    const float *ln_1_w, *ln_1_b;         /* [C]                 */
    const void *attn_w;                   /* [C, 3C]             */
    const float *attn_b;                  /* [3C]                */
    const void *attn_proj_w;              /* [C, C]              */
    const float *attn_proj_b;             /* [C]                 */
    const float *ln_2_w, *ln_2_b;         /* [C]                 */
    const void *fc_w;                     /* [C, I]              */
    const float *fc_b;                    /* [I]                 */
    const void *mlp_proj_w;               /* [I, C]              */
    const float *mlp_proj_b;              /* [C]                 */
} vkg_gpt2_layer;

typedef struct vkg_gpt2 {
    vkg_gpt2_config config;
    const void *wte, *wpe;               /* [V, C], [P, C]                                 */
    const float *ln_f_w, *ln_f_b;        /* [C]                                           */
    const void *lm_head;                 /* [V, C]; == wte when the head is tied           */
    vkg_gpt2_layer *layers;              /* n_layer                                       */
    vkg_dtype weight_dtype;              /* of the matrices in memory: f32, f16 or bf16    */
    int tied_head;
    vkg_gpt2_activation activation;      /* what the config's activation_function computes */
    int transformer_prefix;              /* names carried "transformer."                  */
    vkg_st_dtype dtype;                  /* of wte in the file                            */
    char note[256];                      /* what a user should know about this model (e.g. a
                                            special token outside the vocabulary); ""
                                            when nothing                                  */
    /* Owned: every tensor above lies in this one block, page-aligned and a whole number of
     * pages long (an import of host memory into a device takes it as it is). */
    void *weights;
    size_t weights_bytes;
} vkg_gpt2;

/* How to load.  dtype: VKG_GPT2_DTYPE_AS_STORED keeps each matrix as the file stores it (the
 * dtype of wte.weight; matrices stored otherwise are converted to it); VKG_F32, VKG_F16 or
 * VKG_BF16 converts them to that at load (f32 -> f16 and bf16 round to nearest even). */
#define VKG_GPT2_DTYPE_AS_STORED (-1)
typedef struct vkg_gpt2_load_options {
    int dtype;
} vkg_gpt2_load_options;
void vkg_gpt2_load_options_default(vkg_gpt2_load_options *o);

/* Loads dir (config.json + model.safetensors).  Errors name the file, the tensor and the shapes.
 * opts may be NULL (as stored). */
vkg_status vkg_gpt2_load_with(const char *dir, const vkg_gpt2_load_options *opts, vkg_gpt2 **out, vkg_error *err);
vkg_status vkg_gpt2_load(const char *dir, vkg_gpt2 **out, vkg_error *err);
void vkg_gpt2_free(vkg_gpt2 *m); /* NULL is fine */
int64_t vkg_gpt2_parameter_count(const vkg_gpt2 *m); /* without a tied head's second count */

/* ---- the graph -------------------------------------------------------------------------------- */

#define VKG_GPT2_NO_ATTENTION (-1)
#define VKG_GPT2_ALL_LAYERS (-2)

typedef struct vkg_gpt2_build_options {
    int tokens;            /* T, tokens per run, >= 1                                         */
    int cache_len;         /* 0: no cache (positions 0..T-1, attention over the T tokens);
                              else S, the KV cache's length (T <= S <= n_positions)           */
    int all_logits;        /* logits for every position [T, V]; else the last one [1, V]     */
    int no_logits;         /* no logits output: only the attention asked for is computed
                              (the layers after it and the head are not built, nor their
                              caches written)                                                 */
    int attention_layer;   /* VKG_GPT2_NO_ATTENTION, a layer, or VKG_GPT2_ALL_LAYERS: those
                              layers' probabilities become outputs "attention.L"             */
    int attention_keys;    /* with a cache: 0 gives [H, T, S]; k > 0 gives keys [0, k) only,
                              [H, T, k] (k = T: the square pattern of a prefill from pos 0)  */
} vkg_gpt2_build_options;

void vkg_gpt2_build_options_default(vkg_gpt2_build_options *o, int tokens);

typedef struct vkg_gpt2_graph {
    vkg_graph *graph;
    int n_layer, tokens, cache_len;
    vkg_tensor ids, positions;           /* i32 inputs [T]                                   */
    vkg_tensor pos;                      /* the runtime index; VKG_NONE without a cache      */
    vkg_tensor logits;                   /* output [T, V] or [1, V]; VKG_NONE with no_logits */
    vkg_tensor *attention;               /* n_layer entries; VKG_NONE where not requested    */
    vkg_tensor *k_cache, *v_cache;       /* states [H, S, D], n_layer each; NULL without one */
} vkg_gpt2_graph;

/* Builds the graph over m's weights (borrowed: keep m alive while the graph, its plans and
 * sessions live). */
vkg_status vkg_gpt2_build(const vkg_gpt2 *m, const vkg_gpt2_build_options *o, vkg_gpt2_graph *out,
                          vkg_error *err);
void vkg_gpt2_graph_free(vkg_gpt2_graph *gg);

/* ---- running ---------------------------------------------------------------------------------- */

/* A graph compiled for a device and opened as a session. */
typedef struct vkg_gpt2_runner {
    const vkg_gpt2 *model;
    vkg_gpt2_graph gg;
    vkg_plan *plan;
    vkg_session *session;
    int32_t *position_buf;               /* [T] scratch for the positions input             */
    int32_t start;                       /* the first position of the last run              */
} vkg_gpt2_runner;

vkg_status vkg_gpt2_runner_new(const vkg_gpt2 *m, vkg_device *dev, const vkg_gpt2_build_options *o,
                               vkg_gpt2_runner *out, vkg_error *err);
/* The same, sharing the weights and the KV cache with another runner's session `with` (which
 * must outlive this one): a prefill beside a decode runner. */
vkg_status vkg_gpt2_runner_new_shared(const vkg_gpt2 *m, vkg_device *dev, const vkg_gpt2_build_options *o,
                                      vkg_session *with, vkg_gpt2_runner *out, vkg_error *err);
void vkg_gpt2_runner_free(vkg_gpt2_runner *r);
/* Runs T ids (exactly the graph's T) at positions start..start+T-1.  With a cache, start is the
 * number of tokens already cached (start + T <= S); without one it must be 0.  Ids outside the
 * vocabulary and runs past the cache are VKG_ERR_INVALID_ARGUMENT naming the id / position. */
vkg_status vkg_gpt2_runner_run(vkg_gpt2_runner *r, const int32_t *ids, int32_t start, vkg_error *err);
/* After a run: logits (T*V or V floats, as built) and a layer's attention probabilities. */
vkg_status vkg_gpt2_runner_logits(vkg_gpt2_runner *r, float *out, size_t floats, vkg_error *err);
vkg_status vkg_gpt2_runner_attention(vkg_gpt2_runner *r, int layer, float *out, size_t floats, vkg_error *err);

/* Checks ids against the vocabulary and the count against n_positions, with messages a user
 * can act on ("token id 60000 at position 3 is outside the vocabulary [0, 50257)"). */
vkg_status vkg_gpt2_check_ids(const vkg_gpt2 *m, const int32_t *ids, size_t n, vkg_error *err);

/* One forward pass over n ids without a cache: the last position's logits [V] (or, all_logits,
 * [n, V]) into logits, and when attention_out is non-NULL, layer attention_layer's
 * probabilities [H, n, n] into it, or with VKG_GPT2_ALL_LAYERS every layer's, [n_layer, H, n, n],
 * from the same one pass.  logits may be NULL when attention_out is not: then only the layers up
 * to attention_layer run. */
vkg_status vkg_gpt2_forward(const vkg_gpt2 *m, vkg_device *dev, const int32_t *ids, int n, int all_logits,
                            float *logits, int attention_layer, float *attention_out, vkg_error *err);

/* ---- generation ------------------------------------------------------------------------------ */

/* Decoding over a KV cache.  One plan for one new token (T = 1) over a cache of cache_len
 * positions is compiled once and run for every token with only the positions and the "pos"
 * index changing.  Several tokens fed at once (a prompt) go through one T-token prefill plan
 * whose session shares the weights and the cache with the decode session. */
typedef struct vkg_gpt2_generator_options {
    int cache_len;                       /* the longest sequence (prompt + generated) the
                                            generator will hold, 1 to n_positions; 0 means
                                            n_positions                                       */
    int all_logits;                      /* logits after every token of a feed, [n, V]       */
    int no_logits;                       /* no logits: only the layers up to the attention run */
    int attention_layer;                 /* VKG_GPT2_NO_ATTENTION, a layer or VKG_GPT2_ALL_LAYERS:
                                            each feed keeps their probabilities [H, n, S]     */
    int batch;                           /* the tokens of the feeds the generator is made for:
                                            its first plan runs this many (0 means 1, decoding);
                                            a feed of another size compiles its own plan     */
} vkg_gpt2_generator_options;

typedef struct vkg_gpt2_generator {
    const vkg_gpt2 *model;
    vkg_device *device;
    vkg_gpt2_generator_options opts;
    vkg_gpt2_runner base;                /* the first plan (opts.batch tokens a run): its session
                                            owns the weights and the KV cache                */
    vkg_gpt2_runner step;                /* one token a run, sharing base's weights and cache;
                                            made on the first one-token feed (batch > 1)     */
    vkg_gpt2_runner other;               /* a feed of another size: kept until the next feed,
                                            so that its outputs can still be read           */
    int has_step, has_other;
    vkg_gpt2_runner *last;               /* the runner of the last feed; NULL before any    */
    int32_t length;                      /* tokens in the cache                             */
    int32_t fed;                         /* tokens of the last feed (0 before any)          */
    float *logits;                       /* [V]: the prediction after the last token fed
                                            (read after each feed; with all_logits only when
                                            vkg_gpt2_generator_last_logits asks for it)     */
    size_t logits_cap;                   /* floats allocated                                */
} vkg_gpt2_generator;

/* cache_len: the longest sequence (prompt + generated) the generator will hold, 1 to
 * n_positions; 0 means n_positions.  Last-position logits, no attention. */
vkg_status vkg_gpt2_generator_new(const vkg_gpt2 *m, vkg_device *dev, int cache_len, vkg_gpt2_generator *out,
                                  vkg_error *err);
/* The same with what each feed keeps chosen by o. */
vkg_status vkg_gpt2_generator_new_with(const vkg_gpt2 *m, vkg_device *dev, const vkg_gpt2_generator_options *o,
                                       vkg_gpt2_generator *out, vkg_error *err);
void vkg_gpt2_generator_free(vkg_gpt2_generator *gen);
/* Runs n ids after those already fed; gen->logits then predicts the next one.  Feeding past the
 * cache is VKG_ERR_INVALID_ARGUMENT saying how long the cache is. */
vkg_status vkg_gpt2_generator_feed(vkg_gpt2_generator *gen, const int32_t *ids, int n, vkg_error *err);
/* The prediction after the last token fed: *out = gen->logits, [V]. */
vkg_status vkg_gpt2_generator_last_logits(vkg_gpt2_generator *gen, float **out, vkg_error *err);
/* The last feed's outputs, read from its session: logits (fed * V floats with all_logits, else
 * V) and layer `layer`'s probabilities [H, fed, S] (a layer the generator was made to keep). */
vkg_status vkg_gpt2_generator_logits(vkg_gpt2_generator *gen, float *out, size_t floats, vkg_error *err);
vkg_status vkg_gpt2_generator_attention(vkg_gpt2_generator *gen, int layer, float *out, size_t floats,
                                        vkg_error *err);
/* Forgets every token fed (the cache is cleared). */
vkg_status vkg_gpt2_generator_reset(vkg_gpt2_generator *gen, vkg_error *err);
/* Keeps the first n tokens (0 <= n <= length): the next feed writes position n, and the rows
 * after it get weight exactly 0 from the causal mask until they are written again. */
vkg_status vkg_gpt2_generator_truncate(vkg_gpt2_generator *gen, int n, vkg_error *err);

#endif
