/* The requests of the server's endpoints, parsed from JSON bodies and checked: the fields
 * OpenAI's completions and chat completions APIs and vkgraph's /tokenize and /detokenize take.  A field of the wrong
 * type or out of range is an error naming it (OpenAI's "param"); unknown fields are ignored, as
 * OpenAI ignores them. */
#ifndef VKG_SERVER_REQUEST_H
#define VKG_SERVER_REQUEST_H

#include "vkgraph_model.h"
#include "server/logprobs.h"
#include "vkgraph_template.h"

#include <stddef.h>
#include <stdint.h>

#define SRV_MAX_STOPS 4         /* OpenAI's limit on stop sequences */
#define SRV_MAX_STOP_BYTES 256
#define SRV_MAX_LOGIT_BIAS 1024 /* tokens a logit_bias may name */

typedef struct srv_error {
    int http_status;            /* 400, 401, 404, ... */
    const char *type;           /* "invalid_request_error", ... */
    char param[64];             /* the field at fault, "" when none */
    const char *code;           /* NULL, or a short code ("context_length_exceeded") */
    char message[512];
} srv_error;

void srv_error_set(srv_error *e, int http_status, const char *type, const char *param, const char *code,
                   const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* What the model offers a request: its tokenizer (NULL: prompts only as ids) and limits. */
typedef struct srv_model_facts {
    const vkg_tokenizer *tok;
    int n_ctx;                  /* positions of each slot's context */
    int n_vocab;
    int32_t bos, eos;
    const vkg_chat_template *chat; /* NULL: /v1/chat/completions answers 400 */
} srv_model_facts;

typedef struct completion_request {
    int32_t *ids;               /* the prompt, owned */
    int n_ids;
    int max_tokens;
    vkg_sampling_options sampling;
    char *stops[SRV_MAX_STOPS]; /* owned */
    int n_stops;
    int stream, include_usage;
    int return_tokens;          /* each choice lists its generated ids ("tokens"); the default
                                   without a tokenizer, whose text is empty */
    int logprobs;               /* -1: none; else each token's logprob and that many alternatives
                                   (completions' "logprobs", chat's "top_logprobs") */
    int cache_prompt;           /* the prompt may start from a slot's cache (default 1) */
    int echo;                   /* completions' echo: the answer starts with the prompt, */
    char *echo_text;            /* its text as given, or its ids decoded (owned) */
    size_t echo_len;
    int n_bias;                 /* logit_bias: bias[i] for token bias_ids[i] (owned) */
    int32_t *bias_ids;
    float *bias;
} completion_request;

/* Parses a /v1/completions body.  Returns 0, or -1 with e filled in (e->http_status 400). */
int srv_parse_completion(const char *body, size_t len, const srv_model_facts *m, completion_request *out,
                         srv_error *e);
/* Parses a /v1/chat/completions body: its messages rendered with the model's chat template
 * (add_generation_prompt) and tokenized as transformers tokenizes a rendered template (special
 * tokens in the text read as themselves, no second BOS).  max_completion_tokens (or max_tokens)
 * defaults to the room left in the context.  A model without a template is a 400 (code
 * "chat_template_missing"). */
int srv_parse_chat(const char *body, size_t len, const srv_model_facts *m, completion_request *out, srv_error *e);
void completion_request_free(completion_request *r);

/* /tokenize: {"content" or "prompt": string} -> ids (owned).  /detokenize: {"tokens": [ids]}. */
int srv_parse_tokenize(const char *body, size_t len, const srv_model_facts *m, int32_t **ids, size_t *n,
                       srv_error *e);
int srv_parse_detokenize(const char *body, size_t len, const srv_model_facts *m, int32_t **ids, size_t *n,
                         srv_error *e);

#endif
