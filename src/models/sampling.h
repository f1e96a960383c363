/*
 * Choosing the next token from logits: greedy, or sampling with a repetition penalty, temperature,
 * top-k, top-p (nucleus) and min-p, from a seeded vkg_rng so that the same seed gives the same
 * tokens on every machine.  The order is transformers' (its logits processors, then its warpers):
 *   1. repetition penalty (repeat_penalty != 1): every distinct id among the last repeat_last_n
 *      tokens of the context (0: none, -1: the whole context; the prompt counts, as it does in
 *      transformers' input_ids and in llama.cpp) has its logit divided by the penalty when
 *      positive, multiplied by it otherwise (RepetitionPenaltyLogitsProcessor; llama.cpp's
 *      penalty_repeat).  An id is penalised once however often it occurs.
 *   2. temperature <= 0, or top_k == 1: greedy, the largest (penalised) logit, the lowest id
 *      among equals.  Nothing below changes that choice.
 *   3. candidates: every token, sorted by logit (largest first, lower id first among equals),
 *      cut to the top_k best when top_k > 0.  Tokens whose probability relative to the best one
 *      is below exp(-60) are left out before sorting: they cannot change a float32 sum.
 *   4. p_i = softmax(logit_i / temperature) over the candidates.
 *   5. top_p in (0, 1): keep the shortest prefix of the sorted candidates whose probabilities sum
 *      to at least top_p (always at least one token).
 *   6. min_p in (0, 1]: keep the candidates with p_i >= min_p * p_max, p_max the best one's
 *      probability after the temperature (transformers' MinPLogitsWarper; llama.cpp's default
 *      chain applies min-p before the temperature instead, which keeps other tokens when T != 1).
 *   7. draw u uniform in [0, 1) and walk the kept candidates until their cumulative probability,
 *      renormalised over what was kept, exceeds u.
 * Non-finite logits (NaN, -inf) never get chosen unless every logit is such, in which case the
 * result is token 0 (greedy over nothing).
 */
#ifndef VKG_MODELS_SAMPLING_H
#define VKG_MODELS_SAMPLING_H

#include "vkgraph_model.h"

#include <stdint.h>

/* vkg_sampling_options, vkg_sampling_options_default, _check and _is_greedy are public
 * (vkgraph_model.h). */

typedef struct vkg_sampling_candidate {
    float value;         /* the logit, then the probability */
    int32_t id;
} vkg_sampling_candidate;

typedef struct vkg_sampler {
    vkg_sampling_options opts;
    vkg_rng rng;
    int vocab;
    vkg_sampling_candidate *cand; /* [vocab] scratch */
    float *work;                  /* [vocab]: the penalised logits */
    uint32_t *seen;               /* [vocab]: stamp of the last call that penalised each id */
    uint32_t stamp;
} vkg_sampler;

/* Checks the options (temperature finite, top_k >= 0, top_p finite, min_p in [0, 1],
 * repeat_penalty finite and > 0, repeat_last_n >= -1) and allocates scratch. */
vkg_status vkg_sampler_init(vkg_sampler *s, const vkg_sampling_options *o, int vocab, vkg_error *err);
void vkg_sampler_free(vkg_sampler *s);
int vkg_sampler_is_greedy(const vkg_sampler *s);

/* The next token for logits [vocab] after context[0..n_context) (the prompt and what was
 * generated so far, oldest first; only the repetition penalty reads it, and ids outside the
 * vocabulary are ignored).  context may be NULL when n_context is 0. */
int32_t vkg_sampler_next(vkg_sampler *s, const float *logits, const int32_t *context, int n_context);

/* Steps 1-6 alone: the tokens that the next draw chooses among, in s->cand[0..returned), most
 * likely first, each with its probability (they sum to 1; greedy: one token of probability 1).
 * Draws nothing. */
int vkg_sampler_candidates(vkg_sampler *s, const float *logits, const int32_t *context, int n_context);

#endif
