/*
 * Choosing the next token inside the library: vkg_context_generate's sampler, a sampler chain
 * (vkgraph_model.h; sampler_chain.c) built from its vkg_sampling_options, whose penalties read
 * the context's own tokens (the prompt counts, as it does in transformers' input_ids and in
 * llama.cpp) instead of a history of accepted tokens.  The options' order is transformers' (its
 * logits processors, then its warpers): penalties, then greedy (temperature <= 0 or top_k == 1:
 * the largest penalised logit, the lowest id among equals) or top-k, temperature, top-p, min-p
 * (after the temperature, as transformers' MinPLogitsWarper; llama.cpp's default chain applies
 * it before) and a seeded draw.  The arithmetic of each stage is in sampling_set.h and
 * docs/API.md.
 */
#ifndef VKG_MODELS_SAMPLING_H
#define VKG_MODELS_SAMPLING_H

#include "vkgraph_model.h"
#include "models/sampling_set.h"

#include <stdint.h>

typedef struct vkg_sampler {
    vkg_sampling_options opts;
    vkg_sampler_chain *chain;
} vkg_sampler;

/* Checks the options (vkg_sampling_options_check) and builds the chain. */
vkg_status vkg_sampler_init(vkg_sampler *s, const vkg_sampling_options *o, int vocab, vkg_error *err);
void vkg_sampler_free(vkg_sampler *s);
int vkg_sampler_is_greedy(const vkg_sampler *s);

/* The next token for logits [vocab] after context[0..n_context) (the prompt and what was
 * generated so far, oldest first; only the penalties read it, and ids outside the vocabulary
 * are ignored).  context may be NULL when n_context is 0.  NaN or +inf logits, or none finite:
 * VKG_ERR_INVALID_ARGUMENT. */
vkg_status vkg_sampler_next(vkg_sampler *s, const float *logits, const int32_t *context, int n_context,
                            int32_t *token, vkg_error *err);

/* Every stage but the draw: the tokens that the next draw chooses among, most likely first, each
 * with its probability (p / the set's total, rounded to float; greedy: one token of probability
 * 1) in (*out)[0..*n).  Draws nothing; *out is valid until the next call on s. */
vkg_status vkg_sampler_candidates(vkg_sampler *s, const float *logits, const int32_t *context, int n_context,
                                  const vkg_sampling_entry **out, int *n, vkg_error *err);

/* The chain's internals the sampler above and a context's saved state reach for. */
vkg_status vkg_sampler_chain_run(vkg_sampler_chain *c, const float *logits, const int32_t *context, int n_context,
                                 int draw, int32_t *token, vkg_error *err);
const vkg_sampling_set *vkg_sampler_chain_set(const vkg_sampler_chain *c);
vkg_rng *vkg_sampler_chain_rng(vkg_sampler_chain *c);

#endif
