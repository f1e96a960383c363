/*
 * Small GPT-2-shaped models with random weights, written exactly as Hugging Face lays a GPT-2
 * checkpoint out: dir/config.json and dir/model.safetensors with the tensors of GPT-2's weight
 * table (gpt2_weights.c: names, shapes, order), and optionally lm_head.weight [V, C] (never
 * prefixed), h.{i}.attn.bias [1, 1, P, P] (lower triangle of ones) and h.{i}.attn.masked_bias []
 * (-1e4), the buffers old checkpoints carry.
 *
 * The weights are drawn so that the model exercises every op in a test (see gpt2_random.c for
 * the scales and why), from vkg_rng seeded with `seed`, in the table's order: the same options
 * give the same files on every machine.
 */
#ifndef VKG_MODELS_GPT2_RANDOM_H
#define VKG_MODELS_GPT2_RANDOM_H

#include "io/safetensors.h"
#include "models/gpt2_config.h"

typedef struct vkg_gpt2_random_options {
    vkg_gpt2_config config;
    uint64_t seed;
    vkg_st_dtype dtype;      /* F32, F16 or BF16 (buffers too, as a converted checkpoint has them) */
    int prefix_transformer;  /* names start with "transformer." (lm_head.weight never does)   */
    int untied_lm_head;      /* write lm_head.weight separately; config says tie_word_embeddings false */
    int attn_bias_buffers;   /* write h.N.attn.bias / masked_bias buffers like old checkpoints */
} vkg_gpt2_random_options;

/* A tiny model: 2 layers, 4 heads, n_embd 32, 16 positions, 64 tokens (bos = eos = 63), n_inner
 * null (4C), gelu_new, eps 1e-5, scaled attention, seed 1, F32, no prefix, tied head, no buffers. */
void vkg_gpt2_random_options_default(vkg_gpt2_random_options *o);

/* The shapes of OpenAI's GPT-2 releases by their Hugging Face names, and "gpt2-tiny" for tests:
 *   gpt2-tiny     2 layers,  4 heads,  64 wide,  128 positions
 *   gpt2         12 layers, 12 heads,  768 wide (124M parameters)
 *   gpt2-medium  24 layers, 16 heads, 1024 wide (355M)
 *   gpt2-large   36 layers, 20 heads, 1280 wide (774M)
 *   gpt2-xl      48 layers, 25 heads, 1600 wide (1.56B)
 * each with GPT-2's 50257 tokens (bos = eos = 50256) and, but for gpt2-tiny, 1024 positions.
 * Sets those fields of o->config; VKG_ERR_NOT_FOUND naming the sizes for any other name. */
vkg_status vkg_gpt2_random_size(const char *name, vkg_gpt2_random_options *o, vkg_error *err);
/* "gpt2-tiny, gpt2, ...": every size name, for messages. */
const char *vkg_gpt2_random_size_names(void);

/* The file `vkgraph gpt2-random` writes beside the weights, so that every output made from them
 * can say the weights are random. */
#define VKG_GPT2_RANDOM_MARKER VKG_RANDOM_WEIGHTS_MARKER /* vkgraph_model.h */
/* 1 when dir holds VKG_GPT2_RANDOM_MARKER. */
int vkg_gpt2_dir_is_random(const char *dir);

/* Creates dir (and missing parents) and writes dir/config.json and dir/model.safetensors. */
vkg_status vkg_gpt2_write_random(const char *dir, const vkg_gpt2_random_options *o, vkg_error *err);

#endif
