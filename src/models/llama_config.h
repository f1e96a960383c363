/*
 * The Llama family's hyperparameters (LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM,
 * Qwen3ForCausalLM), read from a Hugging Face config.json with the meaning and defaults that
 * transformers' LlamaConfig, MistralConfig, Qwen2Config and Qwen3Config give each key.
 *
 * Which architecture: model_type ("llama", "mistral", "qwen2", "qwen3"), as transformers'
 * AutoConfig chooses; without model_type, architectures[0].  Anything else is refused, naming the
 * known ones (vkg_model_architectures, vkgraph_model.h).
 *
 * Keys honoured: hidden_size, intermediate_size, num_hidden_layers, num_attention_heads,
 * vocab_size (defaults: each class's); num_key_value_heads (null: num_attention_heads); head_dim
 * (null: hidden_size / num_attention_heads; Qwen3's default 128); rms_norm_eps;
 * max_position_embeddings; rope_theta; rope_scaling (null, or rope_type/type "default", "linear"
 * (factor), "llama3" (factor, low_freq_factor, high_freq_factor,
 * original_max_position_embeddings) or "yarn" (factor, original_max_position_embeddings,
 * beta_fast, beta_slow, attention_factor, mscale, mscale_all_dim, truncate) or "dynamic"
 * (factor; rope.h); "longrope" and any other type are refused by name; newer files' rope_parameters, with
 * rope_theta inside, read the same);
 * partial_rotary_factor (only 1); tie_word_embeddings (default false); attention_bias (Llama: q,
 * k, v and o; Qwen3: q, k, v and o; Qwen2 always has q, k, v biases and no o bias; Mistral none);
 * mlp_bias (Llama); hidden_act (silu only); sliding_window (Mistral: every layer; Qwen2/Qwen3:
 * with use_sliding_window, the layers from max_window_layers on, or as layer_types lists them);
 * bos_token_id, eos_token_id (an int, a list: the first, or null); torch_dtype (or the newer
 * dtype: what the file should hold; the tensors' own dtype wins).
 * Accepted without effect: dropout rates, initializer_range, use_cache, pad_token_id,
 * pretraining_tp (the same product, only split), transformers_version, _name_or_path,
 * architectures, and other bookkeeping.
 */
#ifndef VKG_MODELS_LLAMA_CONFIG_H
#define VKG_MODELS_LLAMA_CONFIG_H

#include "models/rope.h"
#include "vkgraph_model.h"

typedef enum vkg_llama_arch {
    VKG_LLAMA_ARCH_LLAMA, VKG_LLAMA_ARCH_MISTRAL, VKG_LLAMA_ARCH_QWEN2, VKG_LLAMA_ARCH_QWEN3, VKG_LLAMA_N_ARCH
} vkg_llama_arch;


#define VKG_LLAMA_MAX_LAYERS 4096

typedef struct vkg_llama_config {
    vkg_llama_arch arch;
    int n_layer, n_head, n_kv_head, head_dim, hidden_size, intermediate_size, n_positions, vocab_size;
    double rms_norm_eps;
    vkg_rope_config rope;                 /* dim is head_dim (rope.h)                        */
    int tie_word_embeddings;
    int qkv_bias, o_bias, mlp_bias;       /* which projections carry biases                 */
    int qk_norm;                          /* Qwen3: RMSNorm of each head's q and k          */
    int sliding_window;                   /* the window of the layers that have one; 0 none  */
    unsigned char windowed[VKG_LLAMA_MAX_LAYERS]; /* 1: layer i attends within sliding_window */
    int bos_token_id, eos_token_id;       /* in [0, vocab_size) or VKG_NO_TOKEN             */
    char torch_dtype[16];                 /* as written; "" when absent                     */
    char note[256];
} vkg_llama_config;

/* model_type's name of each architecture ("llama") and its class ("LlamaForCausalLM"). */
const char *vkg_llama_arch_name(vkg_llama_arch a);
const char *vkg_llama_arch_class(vkg_llama_arch a);
/* The architecture named by a model_type or a class name; -1 when none. */
int vkg_llama_arch_find(const char *name);

/* The class defaults of arch (LlamaConfig() etc.). */
void vkg_llama_config_default(vkg_llama_config *c, vkg_llama_arch arch);
/* Reads path; every error names the file and the key. */
vkg_status vkg_llama_config_load(const char *path, vkg_llama_config *c, vkg_error *err);
/* Ranges and consistency (sizes, heads divisible, bos/eos inside the vocabulary). */
vkg_status vkg_llama_config_validate(const vkg_llama_config *c, vkg_error *err);
/* Writes a config.json that transformers reads as the same model (the random writer's). */
vkg_status vkg_llama_config_write(const char *path, const vkg_llama_config *c, vkg_error *err);


#endif
