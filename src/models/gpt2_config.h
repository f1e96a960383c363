/*
 * GPT-2 hyperparameters, read from (and written as) a Hugging Face config.json, with the meaning and
 * the defaults that transformers' GPT2Config gives each key.
 *
 * Keys read:
 *   n_layer, n_head, n_embd, vocab_size (required); n_positions, or the older n_ctx (one is
 *   required; n_positions wins when both are present, as it sizes wpe);
 *   n_inner: the MLP's width, null meaning 4 * n_embd (the default);
 *   activation_function (default "gelu_new"), by transformers' names (ACT2FN): gelu_new,
 *   gelu_pytorch_tanh, gelu_fast and gelu_accurate are the tanh GELU; gelu and gelu_python the exact
 *   erf GELU; quick_gelu; silu and swish; relu.  Any other name is refused, naming those;
 *   layer_norm_epsilon (default 1e-5);
 *   scale_attn_weights (default true: scores / sqrt(head size)); scale_attn_by_inverse_layer_idx
 *   (default false; true: the scores of layer i are also divided by i + 1);
 *   reorder_and_upcast_attn (default false): transformers then computes the scores in fp32 under
 *   fp16 autocast; vkgraph computes in fp32 anyway, so either value gives the same model;
 *   bos_token_id, eos_token_id (default 50256): an id that is null, or outside the vocabulary (as
 *   in tiny test models that keep GPT-2's 50256 with a small vocab_size, which transformers loads),
 *   becomes VKG_GPT2_NO_TOKEN, with a note saying so.
 * Refused with a message, as they change the network beyond what is built here: model_type other
 * than "gpt2", add_cross_attention true, a non-empty pruned_heads.  Every other key (dropout rates,
 * architectures, task_specific_params, summary_*, torch_dtype, transformers_version, use_cache,
 * _name_or_path, initializer_range, tie_word_embeddings, which gpt2.c reads) does not change the
 * forward pass and is accepted whatever its value; a null anywhere counts as the key's default.
 */
#ifndef VKG_MODELS_GPT2_CONFIG_H
#define VKG_MODELS_GPT2_CONFIG_H

#include "vkgraph_model.h"

#include <stddef.h>

/* A special token the model does not have. */
#define VKG_GPT2_NO_TOKEN (-1)

/* What activation_function computes (vkg_gpt2_activation_kind). */
typedef enum vkg_gpt2_activation {
    VKG_GPT2_ACT_UNKNOWN = 0,
    VKG_GPT2_ACT_GELU_TANH = 1,  /* gelu_new, gelu_pytorch_tanh, gelu_fast, gelu_accurate: vkg_gelu */
    VKG_GPT2_ACT_GELU_ERF = 2,   /* gelu, gelu_python: vkg_gelu_erf                                 */
    VKG_GPT2_ACT_RELU = 3,       /* relu: vkg_relu                                                  */
    VKG_GPT2_ACT_QUICK_GELU = 4, /* quick_gelu: vkg_quick_gelu                                      */
    VKG_GPT2_ACT_SILU = 5        /* silu, swish: vkg_silu                                           */
} vkg_gpt2_activation;

typedef struct vkg_gpt2_config {
    int n_layer, n_head, n_embd, n_positions, vocab_size;
    int n_inner;                          /* the MLP's width; 0 (null) means 4 * n_embd      */
    float layer_norm_epsilon;
    char activation[32];                  /* activation_function, as the file names it     */
    int scale_attn_weights;               /* 1: scores / sqrt(n_embd / n_head)              */
    int scale_attn_by_inverse_layer_idx;  /* 1: layer i's scores also / (i + 1)             */
    int reorder_and_upcast_attn;          /* kept for writing; no effect in fp32            */
    int bos_token_id, eos_token_id;       /* in [0, vocab_size), or VKG_GPT2_NO_TOKEN       */
    char note[256];                       /* set by vkg_gpt2_config_load: what a user should
                                             know (an id outside the vocabulary); "" when
                                             nothing                                        */
} vkg_gpt2_config;

/* GPT2Config()'s defaults, the 124M model: 12 layers, 12 heads, 768 wide, 1024 positions, 50257
 * tokens, n_inner null, gelu_new, eps 1e-5, scaled attention, bos = eos = 50256. */
void vkg_gpt2_config_default(vkg_gpt2_config *cfg);

/* Reads config_json_path; every error names the file and the key. */
vkg_status vkg_gpt2_config_load(const char *config_json_path, vkg_gpt2_config *cfg, vkg_error *err);

/* Checks ranges and consistency (positive sizes, n_embd divisible by n_head, a known activation,
 * bos/eos inside the vocabulary or VKG_GPT2_NO_TOKEN). */
vkg_status vkg_gpt2_config_validate(const vkg_gpt2_config *cfg, vkg_error *err);

/* Writes a config.json that Hugging Face transformers loads as a GPT2LMHeadModel with the same
 * forward pass (n_inner 0 and VKG_GPT2_NO_TOKEN are written as null). */
vkg_status vkg_gpt2_config_write(const char *path, const vkg_gpt2_config *cfg, vkg_error *err);
/* The same, saying whether lm_head shares wte's weights ("tie_word_embeddings"). */
vkg_status vkg_gpt2_config_write_tied(const char *path, const vkg_gpt2_config *cfg, int tie_word_embeddings,
                                      vkg_error *err);

/* What an activation_function name computes; VKG_GPT2_ACT_UNKNOWN for a name not supported. */
vkg_gpt2_activation vkg_gpt2_activation_kind(const char *activation);
/* vkg_gpt2_activation_names is public (vkgraph_model.h). */

/* The MLP's width: n_inner, or 4 * n_embd when it is 0. */
int vkg_gpt2_inner_size(const vkg_gpt2_config *cfg);

#endif
