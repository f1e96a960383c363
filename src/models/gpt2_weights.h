/*
 * GPT-2's tensors, one row each of one table (gpt2_weights.c): the names Hugging Face gives them,
 * their shapes in terms of the config, and where the loaded model holds them.  The loader
 * (gpt2.c) reads what the table lists, the graph builder (gpt2_graph.c) makes its constants from
 * it, the random-checkpoint writer (gpt2_random.c) writes it, and the parameter count sums it.
 *
 * Order: the tensors before the layers (wte, wpe), then each layer's, then those after (ln_f,
 * lm_head), as Hugging Face's state dict lists them; the random writer draws them in this order.
 */
#ifndef VKG_MODELS_GPT2_WEIGHTS_H
#define VKG_MODELS_GPT2_WEIGHTS_H

#include "models/gpt2.h"

typedef enum vkg_gpt2_weight {
    VKG_GPT2_WTE, VKG_GPT2_WPE,
    VKG_GPT2_LN_1_W, VKG_GPT2_LN_1_B, VKG_GPT2_ATTN_W, VKG_GPT2_ATTN_B, VKG_GPT2_ATTN_PROJ_W, VKG_GPT2_ATTN_PROJ_B,
    VKG_GPT2_LN_2_W, VKG_GPT2_LN_2_B, VKG_GPT2_FC_W, VKG_GPT2_FC_B, VKG_GPT2_MLP_PROJ_W, VKG_GPT2_MLP_PROJ_B,
    VKG_GPT2_LN_F_W, VKG_GPT2_LN_F_B, VKG_GPT2_LM_HEAD,
    VKG_GPT2_N_WEIGHTS
} vkg_gpt2_weight;

/* A dimension in terms of the config. */
typedef enum vkg_gpt2_dim {
    VKG_GPT2_DIM_NONE,   /* no second dimension: a vector                  */
    VKG_GPT2_DIM_C,      /* n_embd                                         */
    VKG_GPT2_DIM_3C,     /* 3 * n_embd: q, k, v side by side               */
    VKG_GPT2_DIM_I,      /* the MLP's width (vkg_gpt2_inner_size)          */
    VKG_GPT2_DIM_V,      /* vocab_size                                     */
    VKG_GPT2_DIM_P       /* n_positions                                    */
} vkg_gpt2_dim;

/* Where a tensor sits among the layers. */
typedef enum vkg_gpt2_place { VKG_GPT2_BEFORE_LAYERS, VKG_GPT2_PER_LAYER, VKG_GPT2_AFTER_LAYERS } vkg_gpt2_place;

/* How the random-checkpoint writer draws a tensor (gpt2_random.c gives the scales and why). */
typedef enum vkg_gpt2_init {
    VKG_GPT2_INIT_EMBED,       /* embeddings and the head                       */
    VKG_GPT2_INIT_NORM_WEIGHT, /* layer-norm gamma, around 1                    */
    VKG_GPT2_INIT_NORM_BIAS,   /* layer-norm beta, around 0                     */
    VKG_GPT2_INIT_WIDE,        /* the projections into attention and the MLP    */
    VKG_GPT2_INIT_SMALL        /* output projections and biases                 */
} vkg_gpt2_init;

typedef struct vkg_gpt2_weight_spec {
    const char *name;          /* after "h.<i>." for a layer's; without the "transformer." prefix */
    vkg_gpt2_dim d0, d1;       /* d1 NONE: a vector, held in f32; else a matrix, held in the
                                  model's weight dtype; Conv1D matrices are [in, out]          */
    vkg_gpt2_place place;
    size_t slot;               /* offset of its pointer in vkg_gpt2 (or, per layer, in
                                  vkg_gpt2_layer): const void * for a matrix, const float * for
                                  a vector                                                      */
    int optional;              /* lm_head: read only when config.json unties it from wte       */
    int conv1d;                /* a projection, [in, out] in the file (Conv1D): may be held
                                  [out, in] (vkg_gpt2.transposed), read with VKG_TRANSPOSE_B   */
    vkg_gpt2_init init;
} vkg_gpt2_weight_spec;

extern const vkg_gpt2_weight_spec vkg_gpt2_weights[VKG_GPT2_N_WEIGHTS];

int64_t vkg_gpt2_dim_size(const vkg_gpt2_config *c, vkg_gpt2_dim d);
/* The name of weight w of layer `layer` (ignored for a tensor outside the layers):
 * "h.3.attn.c_attn.weight", "wte.weight".  Returns buf. */
const char *vkg_gpt2_weight_name(vkg_gpt2_weight w, int layer, char *buf, size_t size);
/* Where the loaded model holds it; the loader writes the pointer through vkg_gpt2_weight_set. */
const void *vkg_gpt2_weight_data(const vkg_gpt2 *m, vkg_gpt2_weight w, int layer);
/* Whether m holds w transposed, [out, in]: a Conv1D matrix of a model that holds them so
 * (vkg_gpt2.transposed).  The loader reads it so and the graph reads it with VKG_TRANSPOSE_B. */
int vkg_gpt2_held_transposed(const vkg_gpt2 *m, vkg_gpt2_weight w);
void vkg_gpt2_weight_set(vkg_gpt2 *m, vkg_gpt2_weight w, int layer, const void *data);

/* Calls fn for every tensor of a model with n_layer layers, in the table's order (a layer's
 * tensors for layer 0, then layer 1, ...); stops at the first status that is not VKG_OK and
 * returns it. */
typedef vkg_status (*vkg_gpt2_weight_fn)(void *user, vkg_gpt2_weight w, int layer);
vkg_status vkg_gpt2_weights_each(int n_layer, vkg_gpt2_weight_fn fn, void *user);

/* Elements of every tensor for c (without the head when it is tied). */
int64_t vkg_gpt2_weights_numel(const vkg_gpt2_config *c, int tied_head);

#endif
