/*
 * GPT-2: weights from a Hugging Face model folder and the forward pass as a vkgraph graph,
 * written with the shared layers (layers.h) and offered through the model interface (decoder.h:
 * vkg_gpt2.decoder), over which model_run.h runs and decodes it.
 *
 * Shapes: T tokens in one run, C = n_embd, H = n_head, D = C / H, V = vocab_size,
 * P = n_positions, I = the MLP's width (n_inner, 4C by default), S = positions the KV cache holds
 * (S <= P).
 *
 * Weights (vkg_gpt2_load).  dir/config.json gives the hyperparameters (gpt2_config.h) and
 * dir/model.safetensors the tensors gpt2_weights.c's table lists (wte, wpe, each layer's ln_1,
 * attn.c_attn, attn.c_proj, ln_2, mlp.c_fc, mlp.c_proj, then ln_f, and lm_head unless config.json's
 * tie_word_embeddings (default true) ties the head to wte), named as Hugging Face names them, with
 * or without the "transformer." prefix (GPT2LMHeadModel vs GPT2Model files).  Conv1D weights are
 * stored [in, out], so each projection is x @ W + b.  Other tensors (the attn.bias /
 * attn.masked_bias buffers of older checkpoints, a stored lm_head the config ties) are ignored,
 * never read; any other tensor is refused.  The tensors are read (pread, never mapped) into one
 * page-aligned block the model owns (vkg_gpt2.weights), each at a 256-byte aligned offset, so the
 * block can be handed to a device that imports host memory; after the load the file is closed and
 * may change or vanish without harm.  A file that changes while it is read is VKG_ERR_IO saying so.
 * The weight matrices (wte, wpe, lm_head, each layer's four projections) are kept as the file
 * stores them (F32, F16 or BF16) unless the load options ask for another dtype; biases and layer
 * norms are always f32 (the kernels that read them read f32, and they are 0.1% of the weights).  A
 * missing or mis-shaped tensor is VKG_ERR_FORMAT naming it, the shape expected and the shape found;
 * so is a NaN or Inf, also one that converting to f16 made (a value beyond +-65504).
 *
 * The graph (vkg_gpt2_build_graph, called by vkg_decoder_build), pre-LayerNorm blocks as GPT-2
 * has them:
 *     x = wte[ids] + wpe[positions]                                     [T, C]
 *     per layer:  a = ln_1(x);  q, k, v = split(a @ c_attn + b)          views [H, T, D]
 *                 p = softmax(causal(q k^T * s));  x += merge(p v) @ c_proj + b
 *                 x += act(ln_2(x) @ c_fc + b) @ mlp.c_proj + b
 * with s = 1 / sqrt(D) (1 without scale_attn_weights), divided by i + 1 as well with
 * scale_attn_by_inverse_layer_idx, and act the config's activation_function, as transformers'
 * GPT2Attention and GPT2MLP compute them.
 *     logits = ln_f(x) @ head^T                                         [T, V] or [1, V]
 * With a cache, each layer has a state kv_cache [2, H, S, D] (keys, then values) and the runtime
 * index "pos" (tokens already cached): the run writes its T rows of keys and values at
 * pos..pos+T-1 in one step (vkg_write_at: a strided copy of the qkv projection's k and v
 * columns, which sit side by side) and attends over all S rows, the causal mask with dyn_offset
 * pos giving unwritten rows weight exactly 0 (vkg_layer_attention).  Laid out [H, S, D], each
 * head's keys are one contiguous block that the score matmul reads transposed through strides.
 */
#ifndef VKG_MODELS_GPT2_H
#define VKG_MODELS_GPT2_H

#include "io/safetensors.h"
#include "models/decoder.h"
#include "models/gpt2_config.h"
#include "vkgraph.h"

/* Matrices (const void *) hold elements of vkg_gpt2.weight_dtype; vectors are f32.  The four
 * projections are [in, out] as the file stores them, or [out, in] in a model held transposed
 * (vkg_gpt2.transposed). */
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
    int transposed;                      /* the Conv1D matrices (attn_w .. mlp_proj_w) held
                                            [out, in], transposed from the file's [in, out] */
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
    vkg_decoder decoder;                 /* this model behind the model interface (decoder.h) */
} vkg_gpt2;

/* How to load.  dtype: VKG_GPT2_DTYPE_AS_STORED keeps each matrix as the file stores it (the
 * dtype of wte.weight; matrices stored otherwise are converted to it); VKG_F32, VKG_F16 or
 * VKG_BF16 converts them to that at load (f32 -> f16 and bf16 round to nearest even). */
#define VKG_GPT2_DTYPE_AS_STORED (-1)
typedef struct vkg_gpt2_load_options {
    int dtype;
    int transposed;   /* hold the Conv1D matrices [out, in] (vkg_device_prefers_transposed_weights) */
    int (*progress)(void *user, float fraction); /* NULL, or told the fraction read; 0 cancels */
    void *progress_user;
} vkg_gpt2_load_options;
void vkg_gpt2_load_options_default(vkg_gpt2_load_options *o);

/* Loads dir (config.json + model.safetensors).  Errors name the file, the tensor and the shapes.
 * opts may be NULL (as stored). */
vkg_status vkg_gpt2_load_with(const char *dir, const vkg_gpt2_load_options *opts, vkg_gpt2 **out, vkg_error *err);
vkg_status vkg_gpt2_load(const char *dir, vkg_gpt2 **out, vkg_error *err);
void vkg_gpt2_free(vkg_gpt2 *m); /* NULL is fine */
int64_t vkg_gpt2_parameter_count(const vkg_gpt2 *m); /* without a tied head's second count */

/* Fills m->decoder: GPT-2's facts from its config and its graph builder (gpt2_graph.c).  The
 * loader calls it; a model put together by hand calls it once its fields are set. */
void vkg_gpt2_decoder_init(vkg_gpt2 *m);
/* The decoder's build: GPT-2's forward graph over m's weights (borrowed: keep m alive while the
 * graph, its plans and sessions live). */
vkg_status vkg_gpt2_build_graph(const void *m, const vkg_forward_options *o, vkg_forward_graph *out, vkg_error *err);

#endif
