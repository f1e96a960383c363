/*
 * The Llama family's tensors, one row each of one table (llama_weights.c): Hugging Face's names,
 * shapes in terms of the config, and which configs have them.  The loader reads what the table
 * lists, the graph makes its constants from it, the random writer writes it, the parameter count
 * sums it.  Order: embed_tokens, each layer's (as transformers' state dict lists them), norm,
 * lm_head.
 */
#ifndef VKG_MODELS_LLAMA_WEIGHTS_H
#define VKG_MODELS_LLAMA_WEIGHTS_H

#include "models/llama_config.h"

#include <stddef.h>
#include <stdint.h>

typedef enum vkg_llama_weight {
    VKG_LLAMA_EMBED,
    VKG_LLAMA_ATTN_NORM, VKG_LLAMA_Q_W, VKG_LLAMA_K_W, VKG_LLAMA_V_W, VKG_LLAMA_Q_B, VKG_LLAMA_K_B, VKG_LLAMA_V_B,
    VKG_LLAMA_O_W, VKG_LLAMA_O_B, VKG_LLAMA_Q_NORM, VKG_LLAMA_K_NORM, VKG_LLAMA_MLP_NORM,
    VKG_LLAMA_GATE_W, VKG_LLAMA_GATE_B, VKG_LLAMA_UP_W, VKG_LLAMA_UP_B, VKG_LLAMA_DOWN_W, VKG_LLAMA_DOWN_B,
    VKG_LLAMA_NORM, VKG_LLAMA_LM_HEAD,
    VKG_LLAMA_N_WEIGHTS
} vkg_llama_weight;

typedef enum vkg_llama_dim {
    VKG_LLAMA_DIM_NONE, VKG_LLAMA_DIM_C, VKG_LLAMA_DIM_Q /* H*D */, VKG_LLAMA_DIM_KV /* Hkv*D */,
    VKG_LLAMA_DIM_D, VKG_LLAMA_DIM_I, VKG_LLAMA_DIM_V
} vkg_llama_dim;

/* How the random writer draws a tensor (llama_random.c). */
typedef enum vkg_llama_init { VKG_LLAMA_INIT_EMBED, VKG_LLAMA_INIT_NORM, VKG_LLAMA_INIT_IN, VKG_LLAMA_INIT_OUT,
                              VKG_LLAMA_INIT_BIAS } vkg_llama_init;

typedef struct vkg_llama_weight_spec {
    const char *name;       /* after "model.layers.<i>." for a layer's, else the full name */
    vkg_llama_dim d0, d1;   /* d1 NONE: a vector (f32); else a matrix [out, in]            */
    int per_layer;
    vkg_llama_init init;
} vkg_llama_weight_spec;

extern const vkg_llama_weight_spec vkg_llama_weights[VKG_LLAMA_N_WEIGHTS];

int64_t vkg_llama_dim_size(const vkg_llama_config *c, vkg_llama_dim d);
/* Whether a model of config c with a tied or untied head has tensor w. */
int vkg_llama_weight_present(const vkg_llama_config *c, vkg_llama_weight w, int tied_head);
/* "model.layers.3.self_attn.q_proj.weight", "model.norm.weight"; returns buf. */
const char *vkg_llama_weight_name(vkg_llama_weight w, int layer, char *buf, size_t size);
/* Elements of every tensor a model of c has. */
int64_t vkg_llama_weights_numel(const vkg_llama_config *c, int tied_head);

#endif
