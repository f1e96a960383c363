/*
 * The Llama family (Llama 2 and 3.x, TinyLlama, SmolLM, Mistral, Qwen2, Qwen3): weights from a
 * Hugging Face folder as downloaded and the forward pass as transformers' LlamaForCausalLM (and
 * its Mistral/Qwen2/Qwen3 variants) computes it, offered through the model interface
 * (decoder.h: vkg_llama.decoder).
 *
 * Shapes: T tokens, C = hidden_size, H query heads, Hkv key/value heads, D = head_dim,
 * I = intermediate_size, V = vocab_size, S = positions a KV cache holds.
 *
 * Weights (vkg_llama_load): config.json (llama_config.h) and the tensors of llama_weights.c's
 * table from model.safetensors or its shards (checkpoint.h), read by the loader every model
 * shares (weights_read.h).  Matrices are nn.Linear weights, [out, in], held as stored (F32, F16,
 * BF16) unless asked otherwise; norms and biases in f32.  The head is lm_head.weight, or the
 * embedding when tie_word_embeddings is true (as transformers ties it, ignoring a stored head).
 *
 * The graph (llama_graph.c), pre-norm blocks:
 *     x = embed_tokens[ids]
 *     per layer:  a = RMSNorm(x);  q = a Wq^T (+bq), k = a Wk^T (+bk), v = a Wv^T (+bv)
 *                 (Qwen3: q, k = RMSNorm per head over D);  q, k = rope(q, k, positions)
 *                 x += attention(q, k, v) Wo^T (+bo)   (query head h reads kv head h / (H / Hkv))
 *                 m = RMSNorm(x);  x += (silu(m Wg^T) * (m Wu^T)) Wd^T
 *     logits = RMSNorm(x) head^T
 * with scores scaled by 1 / sqrt(D).
 */
#ifndef VKG_MODELS_LLAMA_H
#define VKG_MODELS_LLAMA_H

#include "models/decoder.h"
#include "models/llama_config.h"
#include "models/llama_weights.h"
#include "models/weights_read.h"

typedef struct vkg_llama {
    vkg_llama_config config;
    const void *global[VKG_LLAMA_N_WEIGHTS];   /* the tensors outside the layers            */
    const void *(*layers)[VKG_LLAMA_N_WEIGHTS]; /* n_layer rows: each layer's tensors       */
    vkg_dtype weight_dtype;                    /* of the matrices in memory                 */
    int tied_head;
    int n_ctx;                                 /* max_position_embeddings                   */
    float *rope;                               /* [n_ctx, D]: cos, then sin (rope.h)        */
    char note[320];
    void *weights;                             /* owned: every tensor lies in this block    */
    size_t weights_bytes;
    vkg_decoder decoder;
} vkg_llama;

/* dtype: VKG_GPT2_DTYPE_AS_STORED (-1, the embedding's dtype) or VKG_F32/F16/BF16; progress
 * (may be NULL) hears how far the read is and may cancel it. */
vkg_status vkg_llama_load(const char *dir, int dtype, const vkg_weights_progress *progress, vkg_llama **out,
                          vkg_error *err);
void vkg_llama_free(vkg_llama *m);
vkg_status vkg_llama_build_graph(const void *m, const vkg_forward_options *o, vkg_forward_graph *out, vkg_error *err);

#endif
