/*
 * GPT-2 hyperparameters, read from (and written as) a Hugging Face config.json.
 *
 * Keys read: n_layer, n_head, n_embd, vocab_size (required); n_positions, or the older n_ctx
 * (one is required; n_positions wins when both are present, as it sizes wpe); layer_norm_epsilon
 * (default 1e-5); activation_function (default "gelu_new"); bos_token_id and eos_token_id
 * (default 50256).  Keys that would change the architecture in ways this library does not build
 * are checked and refused with a message: model_type other than "gpt2", n_inner other than
 * null or 4 * n_embd, scale_attn_weights false, scale_attn_by_inverse_layer_idx true,
 * reorder_and_upcast_attn true, add_cross_attention true.  Other keys (dropout rates,
 * architectures, task settings) do not affect inference and are ignored.
 */
#ifndef VKG_MODELS_GPT2_CONFIG_H
#define VKG_MODELS_GPT2_CONFIG_H

#include "vkgraph.h"

typedef struct vkg_gpt2_config {
    int n_layer, n_head, n_embd, n_positions, vocab_size;
    float layer_norm_epsilon;
    /* "gelu_new" and "gelu_pytorch_tanh" are both the tanh approximation GPT-2 was trained with;
     * "gelu" is the exact erf form, which differs from it by up to about 1e-3 (a model trained
     * with one and run with the other drifts slightly); "relu". */
    char activation[32];
    int bos_token_id, eos_token_id;
} vkg_gpt2_config;

/* Reads config_json_path; every error names the file and the key. */
vkg_status vkg_gpt2_config_load(const char *config_json_path, vkg_gpt2_config *cfg, vkg_error *err);

/* Checks ranges and consistency (positive sizes, n_embd divisible by n_head, a known activation,
 * bos/eos inside the vocabulary). */
vkg_status vkg_gpt2_config_validate(const vkg_gpt2_config *cfg, vkg_error *err);

/* Writes a config.json that Hugging Face transformers loads as a GPT2LMHeadModel. */
vkg_status vkg_gpt2_config_write(const char *path, const vkg_gpt2_config *cfg, vkg_error *err);
/* The same, saying whether lm_head shares wte's weights ("tie_word_embeddings"). */
vkg_status vkg_gpt2_config_write_tied(const char *path, const vkg_gpt2_config *cfg, int tie_word_embeddings,
                                      vkg_error *err);

/* The activation's canonical meaning: 1 for the tanh GELU (gelu_new, gelu_pytorch_tanh), 2 for
 * the exact GELU ("gelu"), 3 for relu, 0 for anything else. */
int vkg_gpt2_activation_kind(const char *activation);

#endif
