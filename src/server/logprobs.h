/* Log-probabilities of generated tokens (OpenAI's "logprobs"): computed from a position's logits
 * by the scheduler, written as the JSON of either endpoint by the responses. */
#ifndef VKG_SERVER_LOGPROBS_H
#define VKG_SERVER_LOGPROBS_H

#include "server/sbuf.h"
#include "vkgraph_model.h"

#include <stddef.h>
#include <stdint.h>

#define SRV_MAX_TOP_LOGPROBS 20 /* OpenAI's limit on chat's top_logprobs */

/* A token's log-probability under the model, and the most likely tokens' at its position: the
 * log-softmax of the logits as the model gives them, before logit_bias, penalties, temperature
 * and truncation (vLLM's default: what a client asks about is the model, not the sampler). */
typedef struct srv_logprobs {
    float logprob;
    int n_top;                               /* the most likely first, equals by lower id */
    int32_t top_ids[SRV_MAX_TOP_LOGPROBS];
    float top[SRV_MAX_TOP_LOGPROBS];
} srv_logprobs;

/* *out for token id of logits[V], with its n_top (<= SRV_MAX_TOP_LOGPROBS) most likely tokens. */
void srv_logprobs_of(const float *logits, int V, int32_t id, int n_top, srv_logprobs *out);

/* One generated token's entry, kept until its response or event is written. */
typedef struct srv_logprob_entry {
    int32_t id;
    int text_offset;                         /* characters of the answer before this token */
    int unpredicted;                         /* an echoed prompt's first token: no logprobs */
    srv_logprobs lp;
} srv_logprob_entry;

/* The "logprobs" value of a choice for n entries: chat's {"content": [{"token", "logprob",
 * "bytes", "top_logprobs"}]}, or completions' {"tokens", "token_logprobs", "top_logprobs",
 * "text_offset"} (null logprob and alternatives for an unpredicted entry); null when n is 0.
 * tok NULL (a model without a tokenizer): tokens are named "token_id:N". */
void srv_logprobs_json(sbuf *o, int chat, const vkg_tokenizer *tok, const srv_logprob_entry *e, size_t n);

#endif
