/*
 * Llama-family models with random weights, written as transformers' save_pretrained writes them:
 * config.json (llama_config.c) and the tensors of the weight table (llama_weights.c) in
 * model.safetensors or N shards with their index (random_tensors.h).
 *
 * Scales (as GPT-2's random writer, for the same reasons: attention rows peaked but not one-hot,
 * activations where silu is curved, every weight visible in the output): q, k, v, gate and up
 * N(0, 1.5 / sqrt(C)); o and down N(0, 0.02); embeddings and an untied head N(0, 0.1); norms
 * 1 + N(0, 0.1); biases N(0, 0.1).
 */
#ifndef VKG_MODELS_LLAMA_RANDOM_H
#define VKG_MODELS_LLAMA_RANDOM_H

#include "io/safetensors.h"
#include "models/llama_config.h"

typedef struct vkg_llama_random_options {
    vkg_llama_config config;
    uint64_t seed;
    vkg_st_dtype dtype;   /* F32, F16 or BF16 */
    int shards;           /* <= 1: model.safetensors; else that many shards and the index */
    int rotary_buffers;   /* also each layer's self_attn.rotary_emb.inv_freq, as files saved before
                             transformers 4.32 hold (ones: the loader reads none of them)        */
} vkg_llama_random_options;

/* The real models' shapes by name (all layers; set config.n_layer for fewer):
 *   llama-tiny, mistral-tiny, qwen2-tiny, qwen3-tiny   2 layers, 64 wide, 4 heads over 2 (tests)
 *   smollm2-135m     llama  30 x 576,  9 heads over 3, I 1536,  V 49152, tied
 *   smollm-135m      llama  30 x 576,  9 over 3, I 1536, V 49152, tied, 2048 positions
 *   tinyllama-1.1b   llama  22 x 2048, 32 over 4, I 5632, V 32000, untied
 *   llama-2-7b       llama  32 x 4096, 32 over 32, I 11008, V 32000, untied
 *   llama-3.2-1b     llama  16 x 2048, 32 over 8, I 8192, V 128256, tied, llama3 rope x32
 *   mistral-7b-v0.1  mistral 32 x 4096, 32 over 8, I 14336, V 32000, sliding window 4096
 *   qwen2.5-0.5b     qwen2  24 x 896, 14 over 2, I 4864, V 151936, tied, q/k/v biases
 *   qwen3-0.6b       qwen3  28 x 1024, 16 heads of 128 over 8, I 3072, V 151936, tied, q/k norms
 * Fills o->config (and the dtype the config names); VKG_ERR_NOT_FOUND naming the shapes. */
vkg_status vkg_llama_random_shape(const char *name, vkg_llama_random_options *o, vkg_error *err);
const char *vkg_llama_random_shape_names(void);

/* Creates dir and writes config.json and the weights. */
vkg_status vkg_llama_write_random(const char *dir, const vkg_llama_random_options *o, vkg_error *err);

#endif
