/*
 * Running a model through the model interface (decoder.h), written once for every model: a
 * runner is one forward graph compiled for a device and opened as a session (model_run.c); a
 * generator decodes over a KV cache with one plan per feed size, all sharing the weights and the
 * cache (model_generate.c).  Messages start with the model's architecture ("gpt2: ...").
 */
#ifndef VKG_MODELS_MODEL_RUN_H
#define VKG_MODELS_MODEL_RUN_H

#include "models/decoder.h"

/* ---- running ---------------------------------------------------------------------------------- */

/* A graph compiled for a device and opened as a session. */
typedef struct vkg_runner {
    const vkg_decoder *model;
    vkg_forward_graph gg;
    vkg_plan *plan;
    vkg_session *session;
    int32_t *position_buf;               /* [T] scratch for the positions input             */
    int32_t start;                       /* the first position of the last run              */
} vkg_runner;

vkg_status vkg_runner_new(const vkg_decoder *m, vkg_device *dev, const vkg_forward_options *o,
                          vkg_runner *out, vkg_error *err);
/* The same, sharing the weights and the KV cache with another runner's session `with` (which
 * must outlive this one): a prefill beside a decode runner. */
vkg_status vkg_runner_new_shared(const vkg_decoder *m, vkg_device *dev, const vkg_forward_options *o,
                                 vkg_session *with, vkg_runner *out, vkg_error *err);
void vkg_runner_free(vkg_runner *r);
/* Runs T ids (exactly the graph's T) at positions start..start+T-1.  With a cache, start is the
 * number of tokens already cached (start + T <= S); without one it must be 0.  Ids outside the
 * vocabulary and runs past the cache are VKG_ERR_INVALID_ARGUMENT naming the id / position. */
vkg_status vkg_runner_run(vkg_runner *r, const int32_t *ids, int32_t start, vkg_error *err);
/* A run of a graph built with seqs >= 1 and a cache: row r (of T) is token ids[r] at position
 * positions[r] of its sequence's slot (0 <= positions[r] < S); the rows of one sequence (all T
 * with seqs <= 1) must be at positions one after the other.  Errors as vkg_runner_run's. */
vkg_status vkg_runner_run_rows(vkg_runner *r, const int32_t *ids, const int32_t *positions, vkg_error *err);
/* After a run: logits (T*V or V floats, as built) and a layer's attention probabilities. */
vkg_status vkg_runner_logits(vkg_runner *r, float *out, size_t floats, vkg_error *err);
vkg_status vkg_runner_attention(vkg_runner *r, int layer, float *out, size_t floats, vkg_error *err);

/* One forward pass over n ids without a cache: the last position's logits [V] (or, all_logits,
 * [n, V]) into logits, and when attention_out is non-NULL, layer attention_layer's
 * probabilities [H, n, n] into it, or with VKG_ALL_LAYERS every layer's, [n_layer, H, n, n],
 * from the same one pass.  logits may be NULL when attention_out is not: then only the layers up
 * to attention_layer run. */
vkg_status vkg_decoder_forward(const vkg_decoder *m, vkg_device *dev, const int32_t *ids, int n, int all_logits,
                               float *logits, int attention_layer, float *attention_out, vkg_error *err);

/* ---- generation ------------------------------------------------------------------------------ */

/* Decoding over a KV cache.  One plan for one new token (T = 1) over a cache of cache_len
 * positions is compiled once and run for every token with only the positions and the "pos"
 * index changing.  Several tokens fed at once (a prompt) go through one T-token prefill plan
 * whose session shares the weights and the cache with the decode session. */
typedef struct vkg_generator_options {
    int cache_len;                       /* the longest sequence (prompt + generated) the
                                            generator will hold, 1 to n_ctx; 0 means n_ctx  */
    int all_logits;                      /* logits after every token of a feed, [n, V]       */
    int no_logits;                       /* no logits: only the layers up to the attention run */
    int attention_layer;                 /* VKG_NO_ATTENTION, a layer or VKG_ALL_LAYERS:
                                            each feed keeps their probabilities [H, n, S]     */
    int batch;                           /* the tokens of the feeds the generator is made for:
                                            its first plan runs this many (0 means 1, decoding);
                                            a feed of another size compiles its own plan     */
} vkg_generator_options;

typedef struct vkg_generator {
    const vkg_decoder *model;
    vkg_device *device;
    vkg_generator_options opts;
    vkg_runner base;                     /* the first plan (opts.batch tokens a run): its
                                            session owns the weights and the KV cache        */
    vkg_runner step;                     /* one token a run, sharing base's weights and cache;
                                            made on the first one-token feed (batch > 1)     */
    vkg_runner other;                    /* a feed of another size: kept until the next feed,
                                            so that its outputs can still be read           */
    int has_step, has_other;
    vkg_runner *last;                    /* the runner of the last feed; NULL before any    */
    int32_t length;                      /* tokens in the cache                             */
    int32_t fed;                         /* tokens of the last feed (0 before any)          */
    float *logits;                       /* [V]: the prediction after the last token fed
                                            (read after each feed; with all_logits only when
                                            vkg_generator_last_logits asks for it)          */
    size_t logits_cap;                   /* floats allocated                                */
    int restored;                        /* logits holds a loaded state's prediction: no run
                                            since the load, so no other output to read      */
} vkg_generator;

/* cache_len: the longest sequence (prompt + generated) the generator will hold, 1 to
 * n_ctx; 0 means n_ctx.  Last-position logits, no attention. */
vkg_status vkg_generator_new(const vkg_decoder *m, vkg_device *dev, int cache_len, vkg_generator *out,
                             vkg_error *err);
/* The same with what each feed keeps chosen by o. */
vkg_status vkg_generator_new_with(const vkg_decoder *m, vkg_device *dev, const vkg_generator_options *o,
                                  vkg_generator *out, vkg_error *err);
void vkg_generator_free(vkg_generator *gen);
/* Runs n ids after those already fed; gen->logits then predicts the next one.  Feeding past the
 * cache is VKG_ERR_INVALID_ARGUMENT saying how long the cache is. */
vkg_status vkg_generator_feed(vkg_generator *gen, const int32_t *ids, int n, vkg_error *err);
/* The prediction after the last token fed: *out = gen->logits, [V]. */
vkg_status vkg_generator_last_logits(vkg_generator *gen, float **out, vkg_error *err);
/* The last feed's outputs, read from its session: logits (fed * V floats with all_logits, else
 * V) and layer `layer`'s probabilities [H, fed, S] (a layer the generator was made to keep). */
vkg_status vkg_generator_logits(vkg_generator *gen, float *out, size_t floats, vkg_error *err);
vkg_status vkg_generator_attention(vkg_generator *gen, int layer, float *out, size_t floats,
                                   vkg_error *err);
/* Forgets every token fed (the cache is cleared). */
vkg_status vkg_generator_reset(vkg_generator *gen, vkg_error *err);
/* Keeps the first n tokens (0 <= n <= length): the next feed writes position n, and the rows
 * after it get weight exactly 0 from the causal mask until they are written again. */
vkg_status vkg_generator_truncate(vkg_generator *gen, int n, vkg_error *err);

/* The KV cache's rows of the first `length` positions, layer by layer, plane by plane (keys
 * then values of each KV head), position by position: vkg_generator_cache_floats(gen, length)
 * floats.  Read holds gen->length positions; write empties the cache, puts `length` positions
 * back and leaves nothing fed (the next feed writes position length). */
size_t vkg_generator_cache_floats(const vkg_generator *gen, int length);
vkg_status vkg_generator_cache_read(vkg_generator *gen, float *out, vkg_error *err);
vkg_status vkg_generator_cache_write(vkg_generator *gen, const float *in, int length, vkg_error *err);

#endif
