/*
 * vkgraph models: a Hugging Face model folder opened on a device, its tokenizer, and generation
 * with a KV cache, streamed token by token.  Built on the graph API (vkgraph.h), which it
 * includes: every call returns a vkg_status and, given a vkg_error, a message a person can act on.
 *
 * The model of use:
 *
 *   vkg_device *dev;   vkg_device_open("vulkan", NULL, &dev, &err);
 *   vkg_model *m;      vkg_model_open("gpt2", dev, NULL, &m, &err);
 *   int32_t *ids;      vkg_tokenizer_encode(vkg_model_tokenizer(m), text, len, &ids, &n, &err);
 *   vkg_context *ctx;  vkg_context_new(m, NULL, &ctx, &err);
 *                      vkg_context_prefill(ctx, ids, n, &err);
 *                      vkg_context_generate(ctx, &gen_options, on_token, user, &result, &err);
 *
 * Models.  A folder holds config.json and model.safetensors as Hugging Face writes them for GPT-2
 * (GPT2LMHeadModel or GPT2Model names, a tied or separate lm_head, the attn.bias buffers of old
 * checkpoints, F32, F16 or BF16 tensors), and the tokenizer files when it has them
 * (tokenizer.json, vocab.json + merges.txt, or encoder.json + vocab.bpe).  The weights are read
 * (pread, never mapped) into one block the model owns, and the file is closed: a file changed
 * after the open does not touch the model.  The device's sessions borrow that block (a device
 * whose memory is the host's imports it in place): free contexts before their model, and the
 * model before its device.
 *
 * Contexts.  A context is a KV cache of n_ctx positions and the plans that run over it, all
 * sharing the weights and the cache: one for feeds of n_batch tokens (1, decoding, by default),
 * compiled when the context is made; one for a single token, compiled once on first use; and
 * one for each feed of another size.  Position i of the cache holds the i-th token fed.  What a run computes
 * beyond the next token's logits is chosen when the context is made: logits for every position
 * fed, the attention probabilities of one layer or of all, or no logits at all (only the layers
 * up to the attention asked for run).
 */
#ifndef VKGRAPH_MODEL_H
#define VKGRAPH_MODEL_H

#include "vkgraph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------
 * Tokenizer: a Hugging Face tokenizer (tokenizer.json's BPE pipelines: GPT-2, Llama 2/3,
 * Mistral, Qwen2/3, SmolLM2; or GPT-2's vocab.json + merges.txt / encoder.json + vocab.bpe),
 * UTF-8 bytes <-> token ids, as transformers' fast tokenizers give them (docs/TOKENIZERS.md).
 * By default encode is tokenizer(text)["input_ids"]: special tokens written in the text are
 * read as those tokens and the post-processor's tokens (Llama's BOS) are added.  A loaded
 * tokenizer is read-only: encode and decode may run on several threads at once.
 * ------------------------------------------------------------------------------------------- */

typedef struct vkg_tokenizer vkg_tokenizer;

/* dir holds tokenizer.json, vocab.json + merges.txt (Hugging Face names) or encoder.json +
 * vocab.bpe (OpenAI names), looked for in that order.  Missing files give VKG_ERR_IO naming the
 * files looked for; malformed ones VKG_ERR_FORMAT naming the file and line or entry. */
vkg_status vkg_tokenizer_load(const char *dir, vkg_tokenizer **out, vkg_error *err);
void vkg_tokenizer_free(vkg_tokenizer *t); /* NULL is fine */
/* 1 when dir holds one of the file sets vkg_tokenizer_load reads, as regular files (they may
 * still be malformed). */
int vkg_tokenizer_present(const char *dir);

int32_t vkg_tokenizer_vocab_size(const vkg_tokenizer *t); /* ids are 0..size-1 (50257 for GPT-2) */
int32_t vkg_tokenizer_eot(const vkg_tokenizer *t);        /* <|endoftext|>, -1 if absent */
/* The tokenizer's end token: tokenizer_config.json's eos_token when the folder has that file and
 * the token, else <|endoftext|>; -1 if neither. */
int32_t vkg_tokenizer_eos(const vkg_tokenizer *t);

/* text need not be NUL-terminated.  Invalid UTF-8 (a stray continuation byte, a truncated or
 * overlong sequence, an encoded surrogate, a code point above U+10FFFF) gives
 * VKG_ERR_INVALID_ARGUMENT with the byte offset.  On success the caller frees *ids (it is NULL
 * when *n is 0).  vkg_tokenizer_encode is vkg_tokenizer_encode_with(..., 0, ...). */
vkg_status vkg_tokenizer_encode(const vkg_tokenizer *t, const char *text, size_t len, int32_t **ids,
                                size_t *n, vkg_error *err);
/* Switches of vkg_tokenizer_encode_with; 0 is transformers' default. */
#define VKG_TOKENIZE_NO_SPECIAL 1u    /* add_special_tokens=False: no BOS/EOS from the post-processor */
#define VKG_TOKENIZE_SPLIT_SPECIAL 2u /* split_special_tokens=True: special tokens in the text are plain
                                         text (as OpenAI's GPT-2 encoder reads "<|endoftext|>") */
vkg_status vkg_tokenizer_encode_with(const vkg_tokenizer *t, const char *text, size_t len, unsigned flags,
                                     int32_t **ids, size_t *n, vkg_error *err);
/* tokenizer.decode(ids) (special tokens kept).  An id outside the vocabulary gives
 * VKG_ERR_INVALID_ARGUMENT naming it and its position.  On success the caller frees *text, which
 * holds *len bytes plus a terminating NUL.  Byte-level tokens give their bytes as they are, so a
 * prefix of ids may end inside a character. */
vkg_status vkg_tokenizer_decode(const vkg_tokenizer *t, const int32_t *ids, size_t n, char **text,
                                size_t *len, vkg_error *err);
/* The bytes of one token as decoded alone (not NUL-terminated; U+2581 of SentencePiece
 * vocabularies a space, <0xNN> its byte), NULL if id is not in the vocabulary. */
const char *vkg_tokenizer_token_bytes(const vkg_tokenizer *t, int32_t id, size_t *len);

/* ---------------------------------------------------------------------------------------------
 * Models
 * ------------------------------------------------------------------------------------------- */

typedef struct vkg_model vkg_model;

/* A special token the model does not have. */
#define VKG_NO_TOKEN (-1)

/* The precision the weight matrices are kept in (biases and layer norms are always f32; the
 * arithmetic is f32 throughout).  AS_STORED keeps each matrix as the file stores it, so an F16 or
 * BF16 checkpoint is never widened; the others convert at load (to 16 bits: round to nearest
 * even, and a value beyond f16's range is refused). */
typedef enum vkg_weight_dtype {
    VKG_WEIGHTS_AS_STORED = 0,
    VKG_WEIGHTS_F32 = 1,
    VKG_WEIGHTS_F16 = 2,
    VKG_WEIGHTS_BF16 = 3
} vkg_weight_dtype;

/* "f32", "f16", "bf16", "as stored". */
const char *vkg_weight_dtype_name(vkg_weight_dtype d);

/* Called while the weights load, with the fraction read so far (0 at the start, 1 at the end,
 * rising in between, once per tensor).  Return nonzero to go on, 0 to cancel: vkg_model_open
 * then frees what it loaded and returns VKG_ERR_CANCELLED. */
typedef int (*vkg_progress_callback)(void *user, float fraction);

typedef struct vkg_model_options {
    vkg_weight_dtype dtype;     /* default VKG_WEIGHTS_AS_STORED                                */
    const char *tokenizer_dir;  /* NULL: the model folder's own tokenizer, if it has one        */
    int no_tokenizer;           /* load no tokenizer (a model for graphs and ids only)          */
    vkg_progress_callback progress; /* NULL: none                                               */
    void *progress_user;        /* passed to progress                                           */
} vkg_model_options;

void vkg_model_options_default(vkg_model_options *o);

/* Opens dir on dev (weights are uploaded when the first context is made).  dev may be NULL for a
 * model used only for its facts and its tokenizer; contexts then refuse to start.  opts may be
 * NULL for the defaults.  Errors name the file, the tensor and the shapes; a folder without
 * tokenizer files is not an error (vkg_model_tokenizer is NULL). */
vkg_status vkg_model_open(const char *dir, vkg_device *dev, const vkg_model_options *opts, vkg_model **out,
                          vkg_error *err);
void vkg_model_free(vkg_model *m); /* NULL is fine */
/* "gpt2 (GPT2LMHeadModel), llama (LlamaForCausalLM), ...": the architectures vkg_model_open
 * reads, by model_type and class, for messages. */
const char *vkg_model_architectures(void);

typedef struct vkg_model_info {
    char architecture[16];     /* config.json's model_type: "gpt2", "llama", "mistral", "qwen2", "qwen3" */
    int n_layer, n_head, n_embd;
    int n_kv_head;             /* heads of keys and values: n_head (GPT-2), fewer with grouped
                                  queries; the KV cache holds [2, n_kv_head, positions, head] a layer */
    int head_dim;              /* channels per head (n_embd / n_head for GPT-2; Qwen3's own)     */
    double rope_theta;         /* rotary embeddings' base; 0 for a model without them (GPT-2)    */
    char rope_scaling[16];     /* "default", "linear", "llama3", "yarn", "dynamic"; "" without
                                  rotary embeddings                                             */
    int n_ctx;                 /* the context: positions the model was trained for (n_positions) */
    int n_vocab;
    int n_inner;               /* the MLP's width                                                */
    int64_t n_params;          /* parameters, a tied head counted once                          */
    int32_t bos_token, eos_token; /* or VKG_NO_TOKEN; bos: generation_config.json's bos_token_id
                                  when it gives one, else config.json's.  eos: config.json's
                                  (the first of a list); generation stops at every id of
                                  vkg_model_stop_ids                                             */
    int tied_head;
    vkg_weight_dtype dtype;    /* what the weight matrices are kept in: F32, F16 or BF16        */
    int weights_transposed;    /* the layers' projections held [out, in] for the device
                                  (vkg_device_prefers_transposed_weights), else [in, out] as
                                  GPT-2's files store them; a plan dump shows the layout too     */
    int random_weights;        /* the folder says its weights are random (vkgraph gpt2-random)   */
    char note[640];            /* what a user should know (a special token outside the
                                  vocabulary, a tokenizer not read); "" when nothing             */
    int max_new_tokens;        /* generation_config.json's max_new_tokens; 0 when it gives none  */
    int max_length;            /* generation_config.json's max_length: tokens in all, prompt
                                  included; 0 when it gives none                                 */
    char generation_note[320]; /* generation_config.json's keys that change the choice of tokens
                                  and are not applied, by name ("num_beams 4"); "" when none     */
} vkg_model_info;

vkg_status vkg_model_get_info(const vkg_model *m, vkg_model_info *info, vkg_error *err);
vkg_device *vkg_model_device(const vkg_model *m);
/* The tokenizer of the folder (or of opts.tokenizer_dir); NULL when there is none.  Owned by m. */
const vkg_tokenizer *vkg_model_tokenizer(const vkg_model *m);
/* Loads the tokenizer from dir in place of the model's own (for a folder without one). */
vkg_status vkg_model_load_tokenizer(vkg_model *m, const char *dir, vkg_error *err);
/* Checks ids against the vocabulary and their count against the context, with messages a user
 * can act on ("token id 60000 at position 3 is outside the vocabulary [0, 50257)"). */
vkg_status vkg_model_check_ids(const vkg_model *m, const int32_t *ids, size_t n, vkg_error *err);

/* What a run computes beyond the cache. */
typedef enum vkg_logits_mode {
    VKG_LOGITS_LAST = 0,       /* the prediction after the last token fed: [n_vocab]             */
    VKG_LOGITS_ALL = 1,        /* the prediction after every token of the last feed: [n, n_vocab] */
    VKG_LOGITS_NONE = 2        /* none: only the layers up to the attention asked for run        */
} vkg_logits_mode;

#define VKG_NO_ATTENTION (-1)
#define VKG_ALL_LAYERS (-2)

/* The forward pass as a graph of the graph API, for dumps, device comparisons and runs of one's
 * own.  Inputs "ids" and "positions" (i32 [tokens]); with n_ctx, the runtime index "pos" (tokens
 * already cached) and the states "h.L.kv_cache" [2, n_head, n_ctx, n_embd / n_head] (keys, then
 * values).
 * Outputs "logits" ([1, n_vocab], or [tokens, n_vocab] with VKG_LOGITS_ALL) and "attention.L"
 * for the layers asked for ([n_head, tokens, tokens or n_ctx]).  Nodes are named by module path
 * as Hugging Face names them ("h.3.attn.softmax").  The graph borrows the model's weights: free
 * it (and its plans and sessions) before the model.
 * Sequence slots, as a batch context's plans use them (vkg_batch_*): each layer's cache is one
 * state holding n_slots slots, [2 n_slots, n_kv_head, S, head_dim] (slot s's keys at plane 2s,
 * its values at 2s + 1), named as above with ".slots" added ("h.L.kv_cache.slots"; the Llama
 * family's "model.layers.L.self_attn.kv_cache.slots"); with seqs 1, the tokens belong to slot
 * first_slot; with seqs > 1
 * (a cache, tokens == seqs, no attention outputs), row r is the one new token of slot
 * first_slot + r at the position given by the runtime index "pos.<r>" (there is no "pos"),
 * attending to its own slot's cache alone, with logits for every row [seqs, n_vocab].  Plans of
 * one model share a slot's cache by name (vkg_session_new_shared). */
typedef struct vkg_model_graph_options {
    int tokens;                /* tokens per run, 1 to n_ctx                                     */
    int n_ctx;                 /* 0: no cache (positions from 0); else the cache's positions     */
    vkg_logits_mode logits;
    int attention_layer;       /* VKG_NO_ATTENTION, a layer, or VKG_ALL_LAYERS                   */
    int seqs;                  /* 0: one unnamed sequence (the plain cache); else see above      */
    int first_slot;            /* the slot of row 0 (0 unless seqs >= 1)                         */
    int n_slots;               /* with seqs: the slots each cache holds (0: first_slot + seqs);
                                  plans that share the caches give the same                      */
} vkg_model_graph_options;

void vkg_model_graph_options_default(vkg_model_graph_options *o, int tokens);
vkg_status vkg_model_build_graph(const vkg_model *m, const vkg_model_graph_options *o, vkg_graph **out,
                                 vkg_error *err);
/* The graph of o (a cache of o->n_ctx > 0 positions) and its plan for opts, with the cache as a
 * context left to the model sizes it: o->n_ctx where the plan fits opts' limits, else the largest
 * half, quarter, ... of it that does (down to 256 positions and o->tokens); o->n_ctx says which
 * was taken.  On failure the reason of the last size tried, and *graph and *plan NULL. */
vkg_status vkg_model_compile_fitted(const vkg_model *m, vkg_model_graph_options *o, const vkg_compile_options *opts,
                                    vkg_graph **graph, vkg_plan **plan, vkg_error *err);

/* ---------------------------------------------------------------------------------------------
 * GPT-2 checkpoints with random weights, written exactly as Hugging Face lays a GPT-2 folder out
 * (config.json, model.safetensors): models of any shape for tests and trials.  The same options
 * give the same files on every machine.
 * ------------------------------------------------------------------------------------------- */

/* The file `vkgraph gpt2-random` writes beside random weights, so that every output made from
 * them can say so (vkg_model_info.random_weights). */
#define VKG_RANDOM_WEIGHTS_MARKER "RANDOM-WEIGHTS.txt"

typedef struct vkg_random_gpt2_options {
    int n_layer, n_head, n_embd, n_positions, vocab_size;
    int n_inner;                    /* the MLP's width; 0: 4 * n_embd                           */
    char activation[32];            /* activation_function, by transformers' names (gelu_new..) */
    int scale_attn_weights;         /* 1: scores / sqrt(n_embd / n_head)                        */
    int scale_attn_by_inverse_layer_idx;
    int32_t bos_token, eos_token;   /* in the vocabulary, or VKG_NO_TOKEN                       */
    uint64_t seed;
    vkg_weight_dtype dtype;         /* of the tensors in the file; AS_STORED writes F32        */
    int prefix_transformer;         /* names start with "transformer." (GPT2Model's)            */
    int untied_lm_head;             /* a separate lm_head.weight (tie_word_embeddings false)    */
    int attn_bias_buffers;          /* the h.N.attn.bias / masked_bias buffers of old files     */
} vkg_random_gpt2_options;

/* Sets the defaults: a tiny model for tests (not the shape `vkgraph gpt2-random` writes, which is
 * 64 wide with 64 positions and GPT-2's 50257 tokens): 2 layers, 4 heads, n_embd 32, 16
 * positions, a vocabulary of 64 with bos = eos = 63 (too small for GPT-2's tokenizer: prompts go
 * in as ids), n_inner 0 (4 * n_embd), "gelu_new", scale_attn_weights 1,
 * scale_attn_by_inverse_layer_idx 0, seed 1, VKG_WEIGHTS_F32, no "transformer." prefix, a tied
 * head, no attention buffers. */
void vkg_random_gpt2_options_default(vkg_random_gpt2_options *o);
/* Creates dir (and missing parents) and writes dir/config.json and dir/model.safetensors. */
vkg_status vkg_random_gpt2_write(const char *dir, const vkg_random_gpt2_options *o, vkg_error *err);

/* A Llama-family model (llama, mistral, qwen2, qwen3) with random weights and a real model's
 * shapes, written as transformers' save_pretrained writes it (config.json, model.safetensors or
 * shards with model.safetensors.index.json). */
typedef struct vkg_random_model_options {
    const char *shape;          /* "smollm2-135m", "qwen2.5-0.5b", ... (vkg_random_model_shapes)   */
    const char *arch;           /* NULL: the shape's; else must be the shape's model_type          */
    int n_layer;                /* 0: the shape's                                                  */
    int n_positions;            /* 0: the shape's max_position_embeddings                          */
    int vocab_size;             /* 0: the shape's; else that many tokens (a bos / eos id outside
                                   them becomes null)                                              */
    int tied;                   /* -1: the shape's; 0: a separate lm_head.weight; 1: tied          */
    int shards;                 /* 0 or 1: model.safetensors; else that many shards                */
    vkg_weight_dtype dtype;     /* AS_STORED means f32                                             */
    uint64_t seed;
    int eos_token;              /* -1: the shape's eos_token_id; else this id (< the vocabulary)     */
    const char *rope_scaling;   /* NULL: the shape's; "none"; or TYPE:FACTOR[:ORIGINAL], TYPE one of
                                   linear, dynamic, llama3 (Llama 3.1's bands, 1 and 4) and yarn,
                                   ORIGINAL their original_max_position_embeddings (default: 8192
                                   for llama3, the model's context for yarn)                      */
} vkg_random_model_options;
void vkg_random_model_options_default(vkg_random_model_options *o); /* llama-tiny, seed 1, f32 */
/* An eos_token outside the vocabulary is VKG_ERR_INVALID_ARGUMENT. */
vkg_status vkg_random_model_write(const char *dir, const vkg_random_model_options *o, vkg_error *err);
/* "llama-tiny, ..., qwen3-0.6b": the shapes, for messages. */
const char *vkg_random_model_shapes(void);
/* Sets the shape (layers, heads, width, positions, vocabulary and special tokens) of a GPT-2
 * release by its Hugging Face name ("gpt2", "gpt2-medium", ...), or "gpt2-tiny" for tests;
 * VKG_ERR_NOT_FOUND naming the sizes for any other name. */
vkg_status vkg_random_gpt2_size(const char *name, vkg_random_gpt2_options *o, vkg_error *err);
/* "gpt2-tiny, gpt2, ...": every size name, for messages. */
const char *vkg_random_gpt2_size_names(void);
/* Parameters of a model of that shape (a tied head counted once). */
int64_t vkg_random_gpt2_parameter_count(const vkg_random_gpt2_options *o);
/* 1 when transformers' activation_function name is one vkgraph computes. */
int vkg_gpt2_activation_supported(const char *name);
/* "gelu_new, gelu_pytorch_tanh, ...": every supported name, for messages. */
const char *vkg_gpt2_activation_names(void);

/* ---------------------------------------------------------------------------------------------
 * Generation contexts
 * ------------------------------------------------------------------------------------------- */

typedef struct vkg_context vkg_context;


typedef struct vkg_context_options {
    int n_ctx;                 /* positions of the KV cache, 1 to the model's n_ctx; 0: n_ctx,
                                  or where the device cannot hold a cache that long (one
                                  binding, its memory) the largest half, quarter, ... of it
                                  that it can (vkg_context_size says which)                   */
    vkg_logits_mode logits;    /* default VKG_LOGITS_LAST                                        */
    int attention_layer;       /* VKG_NO_ATTENTION (default), a layer index, or VKG_ALL_LAYERS   */
    int n_batch;               /* the tokens of the feeds the context is made for: its first
                                  plan (compiled by vkg_context_new) runs this many; 0 means 1,
                                  for decoding.  A feed of another size compiles a plan of its
                                  own (one token: kept for the next ones).  One pass over a
                                  prompt of n tokens: n_batch = n_ctx = n                       */
    int n_ctx_fit;             /* with n_ctx 0: the length to fit from instead of the model's
                                  n_ctx (generation_config.json's max_length, say): that, or the
                                  largest half, quarter, ... of it the device holds; 0: n_ctx   */
} vkg_context_options;

void vkg_context_options_default(vkg_context_options *o);
/* opts may be NULL for the defaults.  Compiles the decode plan and uploads the weights. */
vkg_status vkg_context_new(vkg_model *m, const vkg_context_options *opts, vkg_context **out, vkg_error *err);
void vkg_context_free(vkg_context *ctx); /* NULL is fine */

/* Feeds n >= 1 tokens after those in the cache, in one pass (one token: the decode plan), with
 * any token vkg_context_generate left pending first.  Ids outside the vocabulary and feeds past
 * the cache are VKG_ERR_INVALID_ARGUMENT saying which. */
vkg_status vkg_context_prefill(vkg_context *ctx, const int32_t *ids, int n, vkg_error *err);
/* Feeds one token: vkg_context_prefill(ctx, &id, 1, err). */
vkg_status vkg_context_decode(vkg_context *ctx, int32_t id, vkg_error *err);
/* The model the context runs. */
vkg_model *vkg_context_model(const vkg_context *ctx);
/* Tokens in the cache. */
int vkg_context_length(const vkg_context *ctx);
/* The tokens of the context, oldest first: the n_cached in the cache, then a token that
 * vkg_context_generate chose last and did not feed (it goes in with the next feed).  *n gets the
 * count; the array stays valid until the next call on ctx. */
const int32_t *vkg_context_tokens(const vkg_context *ctx, int *n);
int vkg_context_size(const vkg_context *ctx);   /* n_ctx: positions of the cache */
/* The plan a feed of `tokens` runs (for vkg_plan_memory, vkg_plan_matmul_flops); NULL while no
 * feed of that size has compiled it (the first plan, of n_batch tokens, exists from the start).
 * Owned by ctx. */
const vkg_plan *vkg_context_plan(const vkg_context *ctx, int tokens);
/* Turns profiling on or off for the sessions ctx has now (those of the plans compiled so far;
 * the device's profile receives the steps: vkg_device_profile_*). */
vkg_status vkg_context_enable_profiling(vkg_context *ctx, int enable, vkg_error *err);
/* Empties the cache (and the pending token) and ends the conversation: the next
 * vkg_context_generate starts its sampler's random stream from the seed again, so that a reset
 * context given the same options and prompt gives the same tokens. */
vkg_status vkg_context_reset(vkg_context *ctx, vkg_error *err);
/* Keeps the first n tokens (0 <= n <= length) and drops the pending token: the next feed writes
 * position n.  The rows past n are not cleared: the causal mask gives them weight exactly 0. */
vkg_status vkg_context_truncate(vkg_context *ctx, int n, vkg_error *err);

/* The last feed's logits: n_vocab floats (VKG_LOGITS_LAST) or n * n_vocab (VKG_LOGITS_ALL, n the
 * tokens of that feed).  floats must be exactly that.  VKG_ERR_INVALID_ARGUMENT before any feed,
 * or with VKG_LOGITS_NONE. */
vkg_status vkg_context_get_logits(vkg_context *ctx, float *out, size_t floats, vkg_error *err);
/* The last feed's probabilities of layer `layer` (which the context asked for): [n_head, n, L],
 * n the tokens of that feed and L = vkg_context_length() after it, queries against every key in
 * the cache (keys after a query's own position are exactly 0).  floats must be n_head * n * L. */
vkg_status vkg_context_get_attention(vkg_context *ctx, int layer, float *out, size_t floats, vkg_error *err);

/* The last feed's logits of chosen rows: rows[i] is a token of that feed (0 its first, n - 1
 * its last; negative counts from the end, -1 the last), out gets n_rows * n_vocab floats in the
 * order asked.  A VKG_LOGITS_ALL context has every row; a VKG_LOGITS_LAST one only the last.
 * A row outside the feed is VKG_ERR_INVALID_ARGUMENT naming it. */
vkg_status vkg_context_get_logits_rows(vkg_context *ctx, const int *rows, int n_rows, float *out, size_t floats,
                                       vkg_error *err);

/* ---- batches of sequences ----------------------------------------------------------------------
 * A batch context holds n_seq sequences at once, each with its own KV cache of n_ctx positions
 * (its slot; sequence ids are the slots 0 .. n_seq-1), sharing one copy of the weights.  Add
 * tokens to any sequences, then one vkg_batch_step runs them all: the sequences given one token
 * each go through one decode step together (their tokens are the rows of every matmul, so the
 * weights are read once for all of them; each row attends to its own sequence's cache alone),
 * and a sequence given several tokens (a prompt) goes through prefill passes of its own first,
 * in chunks of prefill_chunk tokens (chunked prefill; a step runs at most prefill_chunk prompt
 * tokens in all), so that a long prompt holds the decoding sequences for one chunk a step; its
 * logits come with the step that runs its last token (vkg_batch_seq_queued says how many are
 * still to run).  A sequence's logits do not depend on the others in the step: bit for bit on the
 * CPU executor those of a plain context fed the same tokens in the same chunks; on Vulkan within
 * the conformance thresholds.
 *
 * Plans for 1, 2, 4, .. and n_seq rows are compiled on first use and kept (a step runs the
 * smallest that covers the highest slot stepping: keep busy sequences in low slots, as
 * vkg_batch_seq_claim does); prefill plans are compiled for a slot and a chunk's length, and the
 * last few used are kept.
 *
 *   vkg_batch_context *b;  vkg_batch_context_new(model, &opts, &b, &err);
 *   int s;  vkg_batch_seq_claim(b, &s, &err);          // a free slot
 *   vkg_batch_add(b, s, prompt, n, &err);              // any number of sequences
 *   vkg_batch_step(b, &err);
 *   vkg_batch_get_logits(b, s, logits, n_vocab, &err); // then add the chosen token, step, ...
 *   vkg_batch_seq_remove(b, s, &err);                  // the slot is free at once
 */
typedef struct vkg_batch_context vkg_batch_context;

typedef struct vkg_batch_options {
    int n_seq;                 /* sequences held at once, 1 to VKG_BATCH_MAX_SEQ; default 8      */
    int n_ctx;                 /* positions of each sequence's cache, 1 to the model's n_ctx;
                                  0: the model's, or as vkg_context_options' n_ctx the largest
                                  half, quarter, ... of it the device holds (vkg_batch_n_ctx)   */
    int prefill_chunk;         /* a prompt's tokens run in one pass, and a step's in all
                                  (default 256); 0: each prompt whole, in the step after it is
                                  added                                                          */
} vkg_batch_options;
#define VKG_BATCH_MAX_SEQ 64

void vkg_batch_options_default(vkg_batch_options *o);
/* opts may be NULL for the defaults.  Compiles the n_seq-row decode plan and uploads the
 * weights once; the caches take n_seq * n_ctx positions of device memory. */
vkg_status vkg_batch_context_new(vkg_model *m, const vkg_batch_options *opts, vkg_batch_context **out,
                                 vkg_error *err);
void vkg_batch_context_free(vkg_batch_context *b); /* NULL is fine */
int vkg_batch_n_seq(const vkg_batch_context *b);
int vkg_batch_n_ctx(const vkg_batch_context *b);
/* Tokens in sequence seq's cache (0 for an empty slot or a bad id). */
int vkg_batch_seq_length(const vkg_batch_context *b, int seq);
/* Tokens added to sequence seq and not yet run (0 for a bad id): a prompt longer than a step's
 * chunk keeps some queued after a step, and has no logits until they have run. */
int vkg_batch_seq_queued(const vkg_batch_context *b, int seq);
/* Marks the lowest free slot used and gives its id; every slot in use is VKG_ERR_UNSUPPORTED
 * ("all 8 sequence slots are in use"). */
vkg_status vkg_batch_seq_claim(vkg_batch_context *b, int *seq, vkg_error *err);
/* Queues n >= 1 tokens for sequence seq (a slot claimed or not: adding marks it used) for the
 * next step.  A bad id, ids outside the vocabulary, or tokens past the sequence's cache
 * (queued ones counted) are VKG_ERR_INVALID_ARGUMENT naming which; nothing is queued then. */
vkg_status vkg_batch_add(vkg_batch_context *b, int seq, const int32_t *ids, int n, vkg_error *err);
/* Runs this step's chunk of the queued prompts, then every sequence with one token queued
 * (nothing queued: nothing runs).  On an error the queued tokens of the sequences not yet run
 * stay queued and the others' are consumed. */
vkg_status vkg_batch_step(vkg_batch_context *b, vkg_error *err);
/* The prediction after sequence seq's last token: n_vocab floats.  VKG_ERR_INVALID_ARGUMENT
 * while none is known (nothing run since the sequence was emptied, claimed or copied into, or a
 * prompt part-way through its chunks).  VKG_ERR_NOT_FINITE for a failed sequence: one whose
 * logits overflowed (finite weights too large for its tokens), saying where; it alone fails (the
 * others in the step run on), and takes no tokens and no copies until removed. */
vkg_status vkg_batch_get_logits(vkg_batch_context *b, int seq, float *out, size_t floats, vkg_error *err);
/* The logits of every token of seq's prompt passes (a prompt's log-likelihood: an evaluation's
 * "echo"): while fn is set, each prefill pass of seq (a chunk of its queued tokens, run alone)
 * calls fn(user, seq, first, rows, logits) before vkg_batch_step returns, logits [rows, n_vocab]
 * the predictions after the tokens at positions first .. first + rows - 1; a row that is not
 * finite fails the sequence instead (vkg_batch_get_logits).  NULL fn stops it; so does
 * vkg_batch_seq_remove.  Such a pass computes the LM head for every row (rows x n_vocab more
 * work and output than the last row alone). */
typedef void (*vkg_batch_rows_fn)(void *user, int seq, int32_t first, int rows, const float *logits);
vkg_status vkg_batch_seq_watch_prompt(vkg_batch_context *b, int seq, vkg_batch_rows_fn fn, void *user,
                                      vkg_error *err);
/* Empties sequence seq and frees its slot (queued tokens dropped). */
vkg_status vkg_batch_seq_remove(vkg_batch_context *b, int seq, vkg_error *err);
/* Prompt caching within a slot: sequence seq keeps its first n cached tokens (0 <= n <= its
 * length; tokens queued and not yet run are dropped), as if it had been fed only them: the next
 * tokens added go after them and give the logits a prefill of all of them would (within
 * rounding: a prompt's rows summed over other passes).  Its logits are unknown until it runs
 * again.  A failed sequence is refused (remove it). */
vkg_status vkg_batch_seq_truncate(vkg_batch_context *b, int seq, int n, vkg_error *err);
/* Prompt caching: sequence dst (any slot but src; its queue must be empty) gets the first n
 * cached tokens of src (0 <= n <= src's length), as if it had been fed them: the next tokens
 * added to dst go after them and give the logits a prefill of all of them would. */
vkg_status vkg_batch_seq_copy(vkg_batch_context *b, int src, int dst, int n, vkg_error *err);

/* ---- saving and loading a context's state -----------------------------------------------------
 * A state holds a context's tokens (with a token vkg_context_generate left pending), the KV
 * cache rows they filled, the prediction after the last token (VKG_LOGITS_LAST contexts), and
 * vkg_context_generate's sampler (its options and where its random stream is).  Loaded into a
 * context of the same model (any n_ctx that holds the tokens, the same logits mode for the
 * logits to come back), the next feed gives the same logits bit for bit as it would have given
 * in the saved context, and generation goes on with the same tokens.  A state is for the
 * build and machine that wrote it (numbers in the machine's byte order; another byte order or
 * version is refused).  A state that does not fit the context (another model's shapes, more
 * tokens than n_ctx) is VKG_ERR_INVALID_ARGUMENT; a damaged or cut-short one VKG_ERR_FORMAT;
 * the context is unchanged by either, and left empty by an error while writing the cache. */
/* *data: a buffer of *bytes bytes the caller frees with free(). */
vkg_status vkg_context_state_save(vkg_context *ctx, void **data, size_t *bytes, vkg_error *err);
vkg_status vkg_context_state_load(vkg_context *ctx, const void *data, size_t bytes, vkg_error *err);
vkg_status vkg_context_state_save_file(vkg_context *ctx, const char *path, vkg_error *err);
vkg_status vkg_context_state_load_file(vkg_context *ctx, const char *path, vkg_error *err);

/* ---- sampling and streaming ------------------------------------------------------------------ */

/* The next token from logits, in transformers' order: repetition penalty, then greedy
 * (temperature <= 0 or top_k == 1) or temperature, top-k, top-p, min-p, and a draw from a seeded
 * generator: the same seed gives the same tokens on every machine. */
typedef struct vkg_sampling_options {
    float temperature;    /* <= 0: greedy                                                     */
    int top_k;            /* 0: no limit                                                      */
    float top_p;          /* >= 1 (or <= 0): no limit                                         */
    float min_p;          /* 0: no limit; else in (0, 1], relative to the best token          */
    float repeat_penalty; /* 1: none; else > 0, dividing a positive logit, multiplying others */
    int repeat_last_n;    /* the penalties' window: 0 none, -1 the whole context              */
    uint64_t seed;
    float frequency_penalty; /* 0: none; subtracted once per occurrence in the window          */
    float presence_penalty;  /* 0: none; subtracted once from every id in the window           */
} vkg_sampling_options;

/* temperature 1, no top-k, top-p or min-p, no penalty (window 64), seed 0. */
void vkg_sampling_options_default(vkg_sampling_options *o);
/* Checks the options (temperature finite, top_k >= 0, top_p finite, min_p in [0, 1],
 * repeat_penalty finite and > 0, repeat_last_n >= -1). */
vkg_status vkg_sampling_options_check(const vkg_sampling_options *o, vkg_error *err);
/* 1 when the options choose the most likely token (temperature <= 0 or top_k == 1). */
int vkg_sampling_is_greedy(const vkg_sampling_options *o);

/* The largest finite logit's id (the lowest among equals): the greedy choice; 0 when none is
 * finite. */
int32_t vkg_argmax(const float *logits, int n);

/* ---- sampler chains ------------------------------------------------------------------------------
 * A sampler chain chooses a token from any logits row (vkg_context_get_logits, a row of
 * VKG_LOGITS_ALL, logits of one's own): stages added in order narrow a candidate set, and the
 * last stage chooses.  vkg_context_generate runs the same chain, built from its
 * vkg_sampling_options by vkg_sampler_chain_from_options.
 *
 *   vkg_sampler_chain *c;  vkg_sampler_chain_new(n_vocab, &c, &err);
 *                          vkg_sampler_chain_add_penalties(c, 64, 1.1f, 0.0f, 0.0f, &err);
 *                          vkg_sampler_chain_add_top_k(c, 40, &err);
 *                          vkg_sampler_chain_add_temperature(c, 0.8f, &err);
 *                          vkg_sampler_chain_add_top_p(c, 0.95f, &err);
 *                          vkg_sampler_chain_add_dist(c, seed, &err);
 *   per token:             vkg_sampler_chain_sample(c, logits, n_vocab, &id, &err);
 *                          vkg_sampler_chain_accept(c, id, &err);   (the penalties' history)
 *
 * The stages (see docs/API.md, "Sampling, state and progress", for the exact arithmetic):
 *   penalties    first in the chain if at all: each distinct id among the last `last_n`
 *                accepted tokens (-1: all of them) has its logit divided by `repeat` when
 *                positive, multiplied by it otherwise, then lowered by frequency * its count
 *                and by presence;
 *   temperature  T <= 0 keeps only the best token (greedy); else probabilities follow
 *                softmax(logit / T), T multiplying any earlier temperature;
 *   top_k        k <= 0: no limit; else the k best (largest logit, the lower id among equals);
 *   top_p        p >= 1 or <= 0: no limit; else the shortest run of best tokens whose
 *                probabilities sum to at least p of the set's;
 *   min_p        p <= 0: no limit; else the tokens whose probability is at least p times the
 *                best one's;
 *   greedy       the best token (ends the chain);
 *   dist         a draw from the set's probabilities, from a generator seeded with `seed`
 *                (ends the chain; the same seed gives the same tokens on every machine).
 * A chain that ends without greedy or dist chooses the best token left.  Logits may hold -inf
 * (never chosen); a NaN or +inf is refused (VKG_ERR_INVALID_ARGUMENT naming the id), and so is
 * a row where every logit is -inf.  A chain is not thread-safe; use one per thread. */
typedef struct vkg_sampler_chain vkg_sampler_chain;

vkg_status vkg_sampler_chain_new(int n_vocab, vkg_sampler_chain **out, vkg_error *err);
/* The chain vkg_context_generate runs for o: penalties (when any is set; window
 * o->repeat_last_n), then greedy when vkg_sampling_is_greedy(o), else top-k, temperature, top-p,
 * min-p and a draw seeded with o->seed. */
vkg_status vkg_sampler_chain_from_options(const vkg_sampling_options *o, int n_vocab, vkg_sampler_chain **out,
                                          vkg_error *err);
void vkg_sampler_chain_free(vkg_sampler_chain *c); /* NULL is fine */
/* Adding a stage after greedy or dist, penalties after another stage, or a value out of range
 * (a NaN, a negative penalty, last_n < -1) is VKG_ERR_INVALID_ARGUMENT; the chain is unchanged. */
vkg_status vkg_sampler_chain_add_penalties(vkg_sampler_chain *c, int last_n, float repeat, float frequency,
                                           float presence, vkg_error *err);
vkg_status vkg_sampler_chain_add_temperature(vkg_sampler_chain *c, float t, vkg_error *err);
vkg_status vkg_sampler_chain_add_top_k(vkg_sampler_chain *c, int k, vkg_error *err);
vkg_status vkg_sampler_chain_add_top_p(vkg_sampler_chain *c, float p, vkg_error *err);
vkg_status vkg_sampler_chain_add_min_p(vkg_sampler_chain *c, float p, vkg_error *err);
vkg_status vkg_sampler_chain_add_greedy(vkg_sampler_chain *c, vkg_error *err);
vkg_status vkg_sampler_chain_add_dist(vkg_sampler_chain *c, uint64_t seed, vkg_error *err);
/* Chooses a token from logits[0..n) (n must be the chain's n_vocab).  Does not accept it. */
vkg_status vkg_sampler_chain_sample(vkg_sampler_chain *c, const float *logits, size_t n, int32_t *token,
                                    vkg_error *err);
/* Adds token to the history the penalties read (a prompt's tokens too, one by one). */
vkg_status vkg_sampler_chain_accept(vkg_sampler_chain *c, int32_t token, vkg_error *err);
/* Forgets the history and starts the draw's generator again from its seed. */
void vkg_sampler_chain_reset(vkg_sampler_chain *c);

/* Why vkg_context_generate stopped. */
typedef enum vkg_stop_reason {
    VKG_STOP_MAX_TOKENS = 0,   /* max_tokens were generated                                      */
    VKG_STOP_EOS = 1,          /* the model chose one of its stop ids (vkg_model_stop_ids; not
                                  kept)                                                          */
    VKG_STOP_STRING = 2,       /* the text ended with a stop string (stop_index says which)      */
    VKG_STOP_CONTEXT_FULL = 3, /* the cache is full                                              */
    VKG_STOP_CALLBACK = 4      /* the callback returned nonzero                                  */
} vkg_stop_reason;

/* Called once per token generated, with the text that can be shown now: the token's bytes, less
 * what might still begin a stop string (held back until the next token decides), and never the
 * stop string or anything after it.  After the last token, text held back for a stop string that
 * never completed comes in one more call with id VKG_NO_TOKEN.  text is empty when the model has
 * no tokenizer.  Return 0 to go on, nonzero to stop (VKG_STOP_CALLBACK). */
typedef int (*vkg_token_callback)(void *user, int32_t id, const char *text, size_t len);

typedef struct vkg_generate_options {
    int max_tokens;                 /* at most this many tokens (default 50); 0 generates none  */
    vkg_sampling_options sampling;  /* default: greedy (temperature 0)                          */
    int ignore_eos;                 /* never choose a stop id (vkg_model_stop_ids)              */
    const char *const *stops;       /* n_stops non-empty stop strings (need a tokenizer)        */
    int n_stops;
    const int32_t *prompt;          /* n_prompt tokens fed first, with any pending token, in one
                                       pass (a prompt, or a conversation's next line)           */
    int n_prompt;
} vkg_generate_options;

void vkg_generate_options_default(vkg_generate_options *o);

/* The ids that end a turn, which vkg_context_generate stops at (VKG_STOP_EOS): the eos_token_id
 * of the folder's generation_config.json (an id or a list), else config.json's (an id or a
 * list; absent, the model class's default, as transformers), else the tokenizer's
 * (vkg_tokenizer_eos).  Ids outside the vocabulary are dropped (info.note says so).  Writes up
 * to cap ids to out (out may be NULL with cap 0) and returns how many there are. */
int vkg_model_stop_ids(const vkg_model *m, int32_t *out, int cap);

/* o as the model's generation_config.json sets generation up, as transformers'
 * GenerationConfig reads it: vkg_generate_options_default, then max_new_tokens as max_tokens;
 * repetition_penalty over the whole context; and when do_sample is true (transformers' default is
 * false: greedy), temperature, top_k (50 when not given), top_p and min_p.  max_length is
 * vkg_model_info.max_length (for the caller: it counts the prompt); keys that change the choice
 * and are not applied are named in vkg_model_info.generation_note (docs/API.md).  The seed is
 * left 0. */
void vkg_model_generate_defaults(const vkg_model *m, vkg_generate_options *o);

typedef struct vkg_generate_result {
    int generated;                  /* tokens passed to the callback (the eos is not)          */
    vkg_stop_reason reason;
    int stop_index;                 /* with VKG_STOP_STRING: which stop string; else -1         */
} vkg_generate_result;

/* Feeds what is pending and opts->prompt, then chooses up to max_tokens tokens from the logits, each fed before
 * the next is chosen; the last one chosen is left pending (vkg_context_tokens), so a next turn
 * feeds it with its own tokens.  The context's tokens (prompt included) are the repetition
 * penalty's window.  The sampler's random stream goes on from one call to the next while the
 * sampling options stay the same (a conversation is one stream); new options start it again
 * from their seed.  With a device that profiles, each token is a span on the trace's marks
 * track.  result may be NULL. */
vkg_status vkg_context_generate(vkg_context *ctx, const vkg_generate_options *opts, vkg_token_callback on_token,
                                void *user, vkg_generate_result *result, vkg_error *err);

/* ---- timings ----------------------------------------------------------------------------------- */

/* Seconds and counts of each stage since the context was made (or vkg_context_reset_timings):
 * the stages do not overlap. */
typedef struct vkg_context_timings {
    double setup_s;                 /* vkg_context_new: plan compiled, weights uploaded        */
    double prefill_s;               /* feeds through vkg_context_prefill (and the pending token
                                       vkg_context_generate feeds first)                       */
    long prefill_tokens, prefill_passes;
    double decode_s;                /* the feeds inside vkg_context_generate, one token a step  */
    long decode_steps;
    double sample_s;                /* choosing tokens                                          */
    long samples;
} vkg_context_timings;

vkg_status vkg_context_get_timings(const vkg_context *ctx, vkg_context_timings *out, vkg_error *err);
void vkg_context_reset_timings(vkg_context *ctx);

#ifdef __cplusplus
}
#endif
#endif
