/*
 * The layers every model here is made of, each written once as a composition of graph ops:
 * linear, layer norm, RMS norm, attention with a KV cache (grouped-query attention when there are
 * fewer key/value heads than query heads) and the MLP (plain or gated).  GPT-2 (gpt2_graph.c),
 * the lesson's block (block.c) and the lesson's attention (lesson.c) are written with them.
 *
 * A vkg_layers holds the graph and the prefix that names the nodes ("h.3." makes
 * "h.3.attn.softmax"), so that dumps, profiles and compare reports show module paths as Hugging
 * Face and PyTorch name them.  Like every graph builder, each layer returns VKG_NONE on a graph in
 * error and does nothing else, so a model is straight-line code checked once at the end.
 *
 * Shapes: T tokens, H query heads, Hkv key/value heads (H a multiple of Hkv; G = H / Hkv query
 * heads share each key/value head), D the head size, S the positions a KV cache holds.
 */
#ifndef VKG_MODELS_LAYERS_H
#define VKG_MODELS_LAYERS_H

#include "base/error.h"
#include "models/decoder.h"
#include "vkgraph.h"

typedef struct vkg_layers {
    vkg_graph *g;
    char prefix[48];   /* prepended to every name; "" for none                                */
    int unnamed;       /* 1: leave the nodes unnamed (the lesson's graphs, which show op names) */
} vkg_layers;

/* Sets the prefix, printf-style ("h.%d."). */
void vkg_layers_prefix(vkg_layers *b, const char *fmt, ...) VKG_PRINTF(2, 3);
/* Names t "<prefix><what>" and returns it. */
vkg_tensor vkg_layers_name(vkg_layers *b, vkg_tensor t, const char *what);
/* A constant "<prefix><name>": a matrix [d0, d1] in dtype, or a vector [d0] (d1 = 0) in f32. */
vkg_tensor vkg_layers_weight(vkg_layers *b, const char *name, vkg_dtype dtype, int64_t d0, int64_t d1,
                             const void *data);

/* x [.., in] -> x @ W + bias [.., out], named `name`.  W is [in, out] (Conv1D, flags 0) or
 * [out, in] (torch.nn.Linear, VKG_TRANSPOSE_B); bias [out] or VKG_NONE. */
vkg_tensor vkg_layer_linear(vkg_layers *b, vkg_tensor x, vkg_tensor w, vkg_tensor bias, unsigned flags,
                            const char *name);

/* Over the last axis: gamma * (x - mean) / sqrt(var + eps) + beta (one layernorm step). */
vkg_tensor vkg_layer_layernorm(vkg_layers *b, vkg_tensor x, vkg_tensor gamma, vkg_tensor beta, float eps,
                               const char *name);
/* Over the last axis: gamma * x / sqrt(mean(x^2) + eps), as Llama's RMSNorm (one rms_norm step). */
vkg_tensor vkg_layer_rmsnorm(vkg_layers *b, vkg_tensor x, vkg_tensor gamma, float eps, const char *name);

/* An activation: vkg_gelu, vkg_gelu_erf, vkg_quick_gelu, vkg_silu, vkg_relu. */
typedef vkg_tensor (*vkg_activation_fn)(vkg_graph *g, vkg_tensor x);

/* The MLP: down(act(up(x))), or with a gate down(act(gate(x)) * up(x)) (Llama's SwiGLU with
 * vkg_silu: one vkg_swiglu node, "<gated_name>", fused into the up projection; act_name unused).  Weights as for vkg_layer_linear, all in one layout (flags). */
typedef struct vkg_mlp {
    vkg_tensor up_w, up_b;         /* [C, I] or [I, C]; bias [I] or VKG_NONE            */
    vkg_tensor gate_w, gate_b;     /* the same, or gate_w = VKG_NONE: no gate              */
    vkg_tensor down_w, down_b;     /* [I, C] or [C, I]; bias [C] or VKG_NONE            */
    unsigned flags;                /* 0 or VKG_TRANSPOSE_B                                 */
    vkg_activation_fn act;
    /* Node names: the projections, the activation and (with a gate) the product. */
    const char *up_name, *gate_name, *act_name, *gated_name, *down_name;
} vkg_mlp;
vkg_tensor vkg_layer_mlp(vkg_layers *b, vkg_tensor x, const vkg_mlp *m);

/* Scaled dot-product attention over heads already split: q [.., Tq, D], k [.., Tk, D],
 * v [.., Tk, Dv] (leading dimensions broadcast) -> softmax(mask(q k^T * scale)) v [.., Tq, Dv].
 * scale 1 adds no step.  causal: key j is blocked for query i when j > i + offset + dyn_offset
 * (dyn_offset a vkg_index or VKG_NONE); mask: a boolean mask (0 blocks) or VKG_NONE.  The
 * compiler fuses it into one attention step unless *probs is read.  Nodes "attn.scores",
 * "attn.scale", "attn.mask", "attn.softmax", "attn.heads". */
typedef struct vkg_sdpa {
    float scale;
    int causal;
    uint32_t window;            /* causal within the last `window` positions (Mistral); 0: none */
    int32_t offset;
    vkg_tensor dyn_offset;
    vkg_tensor mask;
    int rows;                   /* > 0: dyn_offset is the first of `rows` indices, one for each
                                   entry of the scores' axis 0 (vkg_mask_causal_rows)            */
    int one_position;           /* with rows: the query rows of an entry at one position        */
} vkg_sdpa;
vkg_tensor vkg_layer_sdpa(vkg_layers *b, vkg_tensor q, vkg_tensor k, vkg_tensor v, const vkg_sdpa *a,
                          vkg_tensor *probs);

/* Multi-head causal self-attention with an optional KV cache.  Each key/value head serves
 * n_head / n_kv_head query heads (query head h reads key/value head h / G, as transformers'
 * repeat_kv); n_kv_head == n_head is plain multi-head attention. */
typedef struct vkg_attention {
    int64_t n_head, n_kv_head, head_dim;
    float scale;                /* multiplies the scores (1 / sqrt(D) as a rule; 1: no step) */
    int causal;
    vkg_tensor mask;            /* a boolean mask (0 blocks) broadcasting to the scores, or VKG_NONE */
    uint32_t window;            /* causal: each query sees the last `window` positions alone
                                   (Mistral's sliding_window); 0: no window */
    /* Rotary position embeddings (vkg_rope): the cos/sin table [P, head_dim] (rope.h fills
     * it), applied to the query and key heads at positions pos + t; VKG_NONE: none (GPT-2). */
    vkg_tensor rope;
    /* The KV cache: a state [2 slots, n_kv_head, S, head_dim] (slot s's keys at plane 2s, its
     * values at 2s + 1; one slot for a plain context) and the runtime index of the tokens already
     * in the sequence's slot `slot`.  The run's T rows of both are written at pos..pos+T-1 in
     * one step and attention reads all S rows of the slot; the causal mask, offset by pos, gives
     * the rows not yet written weight exactly 0.  VKG_NONE: attention over the run's T tokens
     * alone. */
    vkg_tensor kv_cache, pos;
    int slot;
    /* rows > 1: the T tokens belong to `rows` sequences, row_tokens[r] rows each (1 for a
     * decode step's) next to each other, sequence r in slot row_slots[r] of kv_cache from the
     * index row_pos[r]; each attends to its own slot alone, as it would in a run of its own
     * (slot and pos unused).  0: one sequence. */
    int rows;
    const vkg_tensor *row_pos;
    const int *row_tokens, *row_slots;
    /* rows > 1 with rope: the i32 tensor [T] of each row's position (the forward's "positions"),
     * so that a q/k/v projection's rows are rotated in one step; NULL: each sequence's rows
     * rotated apart (a pointer, so that an initializer that leaves it out means none). */
    const vkg_tensor *positions;
} vkg_attention;

/* q [.., T, H*D], k and v [.., T, Hkv*D]: token-major, as projections give them; each may be a
 * wider tensor (a fused qkv projection [.., T, (H + 2 Hkv) * D]) with its columns starting at
 * q_col, k_col, v_col, which are then sliced out ("attn.q.slice").  The heads are views
 * ("attn.q.reshape", "attn.q": [.., H, T, D], or [Hkv, G, T, D] when G > 1, which needs the
 * tokens without leading dimensions).  Returns the heads merged back, [.., T, H*D] ("attn.merge"),
 * before the output projection; *probs (may be NULL) the probabilities [.., H, T, T or S]. */
vkg_tensor vkg_layer_attention(vkg_layers *b, const vkg_attention *a, vkg_tensor q, int64_t q_col, vkg_tensor k,
                               int64_t k_col, vkg_tensor v, int64_t v_col, vkg_tensor *probs);

/* A forward graph's inputs: "ids" and "positions" [T]; with a cache (o->cache_len = S) the index
 * "pos" and each layer's KV cache state [2, n_kv_head, S, head_dim], named
 * "<cache_prefix><layer>.<cache_suffix>" ("h." and "kv_cache" make "h.3.kv_cache").  With
 * sequence slots (o->seqs, decoder.h) one state a layer holds o->n_slots slots, [2 n_slots,
 * n_kv_head, S, head_dim], named "<...>.slots" ("h.3.kv_cache.slots"), and with seqs > 1
 * sequence r has the index "pos.<r>" instead of "pos" (made one after another: the attention
 * of a decode step reads them as one run). */
void vkg_layer_forward_inputs(vkg_graph *g, const vkg_forward_options *o, vkg_forward_graph *gg, int n_layer,
                              int64_t n_kv_head, int64_t head_dim, const char *cache_prefix, const char *cache_suffix);

/* The rows of x [T, C] whose logits the run gives: the last (one sequence, unless o->all_logits)
 * or each sequence's last (o->seqs > 1: "last_rows"), else all of them. */
vkg_tensor vkg_layer_logit_rows(vkg_layers *b, const vkg_forward_options *o, const vkg_forward_graph *gg,
                                vkg_tensor x);

/* When o asks for layer `layer`'s attention (o->attention_layer is it or VKG_ALL_LAYERS), makes
 * probs [H, T, T or S] the output "attention.<layer>" (with a cache and o->attention_keys = k > 0,
 * its keys [0, k) alone: "attn.softmax.slice") and records it in gg->attention[layer]. */
void vkg_layer_attention_output(vkg_layers *b, const vkg_forward_options *o, vkg_forward_graph *gg, int layer,
                                vkg_tensor probs);

#endif
