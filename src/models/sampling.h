/*
 * Choosing the next token from logits: greedy, or sampling with temperature, top-k and top-p
 * (nucleus), from a seeded vkg_rng so that the same seed gives the same tokens on every machine.
 *
 * Sampling, in this order:
 *   1. temperature <= 0, or top_k == 1: greedy, the largest logit (the lowest id among equals).
 *   2. candidates: every token, sorted by logit (largest first, lower id first among equals),
 *      cut to the top_k best when top_k > 0.  Tokens whose probability relative to the best one
 *      is below exp(-60) are left out before sorting: they cannot change a float32 sum.
 *   3. p_i = softmax(logit_i / temperature) over the candidates.
 *   4. top_p in (0, 1): keep the shortest prefix of the sorted candidates whose probabilities sum
 *      to at least top_p (always at least one token).
 *   5. draw u uniform in [0, 1) and walk the kept candidates until their cumulative probability,
 *      renormalised over what was kept, exceeds u.
 * Non-finite logits (NaN, -inf) never get chosen unless every logit is such, in which case the
 * result is token 0 (greedy over nothing).
 */
#ifndef VKG_MODELS_SAMPLING_H
#define VKG_MODELS_SAMPLING_H

#include "vkgraph.h"

#include <stdint.h>

typedef struct vkg_sampling_options {
    float temperature;   /* <= 0: greedy                                   */
    int top_k;           /* 0: no limit                                    */
    float top_p;         /* >= 1 (or <= 0): no limit                       */
    uint64_t seed;
} vkg_sampling_options;

/* temperature 1, no top-k, no top-p, seed 0. */
void vkg_sampling_options_default(vkg_sampling_options *o);

typedef struct vkg_sampling_candidate {
    float value;         /* the logit, then the probability */
    int32_t id;
} vkg_sampling_candidate;

typedef struct vkg_sampler {
    vkg_sampling_options opts;
    vkg_rng rng;
    int vocab;
    vkg_sampling_candidate *cand; /* [vocab] scratch */
} vkg_sampler;

/* Checks the options (temperature finite, top_k >= 0, top_p finite) and allocates scratch. */
vkg_status vkg_sampler_init(vkg_sampler *s, const vkg_sampling_options *o, int vocab, vkg_error *err);
void vkg_sampler_free(vkg_sampler *s);
int vkg_sampler_is_greedy(const vkg_sampler *s);

/* The next token for logits [vocab]. */
int32_t vkg_sampler_next(vkg_sampler *s, const float *logits);

/* The largest finite logit's id (the lowest among equals); 0 when none is finite. */
int32_t vkg_argmax(const float *logits, int n);

#endif
