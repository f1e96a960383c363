/*
 * The model interface: what the runner and the generator (model_run.c, model_generate.c) and the
 * public model API (model.c) need of a decoder-only language model, so that each of them is
 * written once for every model.  A model fills a vkg_decoder: its facts, and a function that
 * builds its forward graph for T tokens, over a KV cache or not.  GPT-2's is vkg_gpt2.decoder,
 * filled by the loader (gpt2.c) and built by gpt2_graph.c.
 *
 * Shapes: T tokens in one run, H query heads, Hkv key/value heads, D the head size, V the
 * vocabulary, S the positions the KV cache holds (S <= n_ctx).
 */
#ifndef VKG_MODELS_DECODER_H
#define VKG_MODELS_DECODER_H

#include "vkgraph_model.h"

/* What a run's graph computes (the attention sentinels are the public VKG_NO_ATTENTION and
 * VKG_ALL_LAYERS). */
typedef struct vkg_forward_options {
    int tokens;            /* T, tokens per run, >= 1                                         */
    int cache_len;         /* 0: no cache (positions 0..T-1, attention over the T tokens);
                              else S, the KV cache's length (T <= S <= n_ctx)                 */
    int all_logits;        /* logits for every position [T, V]; else the last one [1, V]     */
    int no_logits;         /* no logits output: only the attention asked for is computed
                              (the layers after it and the head are not built, nor their
                              caches written)                                                 */
    int attention_layer;   /* VKG_NO_ATTENTION, a layer, or VKG_ALL_LAYERS: those layers'
                              probabilities become outputs "attention.L", [H, T, T or S]     */
    int attention_keys;    /* with a cache: 0 gives [H, T, S]; k > 0 gives keys [0, k) only,
                              [H, T, k] (k = T: the square pattern of a prefill from pos 0)  */
    /* Sequence slots (a batch context's, model_batch.c): each layer's KV cache holds n_slots
     * slots' blocks, one state "<cache>.slots" [2 n_slots, Hkv, S, D] (slot s's keys at plane
     * 2s, its values at 2s + 1) that every plan of the context shares by name.
     * seqs 0: one unnamed sequence (the plain cache).  seqs 1: the T tokens all belong to slot
     * first_slot.  seqs > 1 (needs a cache, no attention outputs): sequence r's tokens are
     * seq_tokens[r] rows next to each other (NULL: one row each, T == seqs), of slot
     * seq_slots[r] (NULL: first_slot + r), from the position given by the runtime index
     * "pos.<r>", attending to their own slot's cache alone; logits for each sequence's last row
     * [seqs, V].  The arrays are read while the graph is built. */
    int seqs, first_slot, n_slots;
    const int *seq_tokens, *seq_slots;
} vkg_forward_options;

void vkg_forward_options_default(vkg_forward_options *o, int tokens);

/* A forward graph and the handles a run sets and reads. */
typedef struct vkg_forward_graph {
    vkg_graph *graph;
    int n_layer, tokens, cache_len;
    vkg_tensor ids, positions;           /* i32 inputs [T]                                   */
    vkg_tensor pos;                      /* the runtime index "pos" (tokens already cached);
                                            VKG_NONE without a cache or with seqs > 1        */
    int seqs;                            /* the options' seqs                                */
    vkg_tensor *row_pos;                 /* seqs > 1: sequence r's index "pos.<r>"; else NULL */
    int *seq_tokens;                     /* seqs > 1: sequence r's rows; else NULL           */
    int *seq_slots;                      /* seqs >= 1: sequence r's slot; else NULL          */
    vkg_tensor logits;                   /* output [T, V] or [1, V]; VKG_NONE with no_logits */
    vkg_tensor *attention;               /* n_layer entries; VKG_NONE where not requested    */
    vkg_tensor *kv_cache;                /* n_layer states [2, Hkv, S, D], with seqs
                                            [2 n_slots, Hkv, S, D]; NULL without a cache     */
} vkg_forward_graph;

void vkg_forward_graph_free(vkg_forward_graph *gg);

/* The facts of a model that the code around its graph reads. */
typedef struct vkg_decoder_facts {
    const char *architecture;   /* "gpt2": vkg_model_info's, and the start of every message  */
    const char *ctx_key;        /* the config key of n_ctx, for messages ("n_positions")      */
    int n_layer, n_head, n_kv_head, n_embd, n_inner;
    int head_dim;               /* channels per head                                          */
    double rope_theta;          /* 0: no rotary embeddings                                    */
    const char *rope_scaling;   /* "default", "linear", "llama3"; "" without rotary embeddings */
    int n_ctx;                  /* positions: the longest sequence                           */
    int n_vocab;
    int32_t bos_token, eos_token; /* or VKG_NO_TOKEN                                         */
    int tied_head;
    int64_t n_params;           /* a tied head counted once                                   */
    vkg_dtype weight_dtype;     /* of the weight matrices in memory: f32, f16 or bf16         */
    int weights_transposed;     /* projections held [out, in] (vkg_model_info's)              */
    const char *note;           /* what a user should know about this model; "" when nothing  */
} vkg_decoder_facts;

typedef struct vkg_decoder {
    const void *model;          /* the model's own struct (vkg_gpt2), borrowed                */
    vkg_decoder_facts facts;
    /* Builds the forward graph for o (checked by vkg_decoder_build before) into out, whose
     * graph, attention (n_layer entries, VKG_NONE) and caches are already made: the model
     * writes ids, positions, pos and the states as it declares them, its logits and the
     * attention outputs asked for. */
    vkg_status (*build)(const void *model, const vkg_forward_options *o, vkg_forward_graph *out, vkg_error *err);
    void (*free)(void *model);  /* frees the model (and so this decoder)                        */
} vkg_decoder;

/* Checks o against the model, then builds the graph (out is zeroed first; freed on error).
 * Errors name the model ("gpt2: 2000 tokens per run; the model takes 1 to 1024 (n_positions)"). */
vkg_status vkg_decoder_build(const vkg_decoder *d, const vkg_forward_options *o, vkg_forward_graph *out,
                             vkg_error *err);

/* Checks ids against the vocabulary and the count against n_ctx, with messages a user can act on
 * ("token id 60000 at position 3 is outside the vocabulary [0, 50257)"). */
vkg_status vkg_decoder_check_ids(const vkg_decoder *d, const int32_t *ids, size_t n, vkg_error *err);

#endif
