/* OpenAI's response bodies, written as JSON. */
#ifndef VKG_SERVER_RESPONSE_H
#define VKG_SERVER_RESPONSE_H

#include "server/request.h"
#include "server/sbuf.h"

/* {"error":{"message","type","param","code"}} */
void resp_error(sbuf *o, const srv_error *e);

typedef struct resp_completion {
    int chat;                   /* a chat completion (chat.completion objects), else text_completion */
    const char *id;             /* "cmpl-...", "chatcmpl-..." */
    long created;
    const char *model;
    const char *finish_reason;  /* "stop", "length", or NULL (a chunk before the end) */
    int prompt_tokens, completion_tokens;
    int cached_tokens;          /* of prompt_tokens, those found in the slot's cache */
    int with_tokens;            /* the choice lists "tokens" (return_tokens): */
    const char *tokens;         /* the ids generated since the last chunk (all of them in a body),
                                   as JSON numbers between commas ("15496,995"; NULL: none) */
    size_t tokens_len;
    int with_logprobs;          /* the request asked for logprobs: */
    const vkg_tokenizer *tok;   /* (NULL: tokens named by id) */
    const srv_logprob_entry *logprobs; /* the entries of the tokens since the last chunk */
    size_t n_logprobs;
} resp_completion;

/* The whole completion (stream false). */
void resp_completion_body(sbuf *o, const resp_completion *c, const char *text, size_t len);
/* One server-sent event of a stream: "data: {...}\n\n" with the text (and finish_reason).  For
 * chat, text NULL gives an empty delta (the last chunk, with finish_reason). */
void resp_completion_chunk(sbuf *o, const resp_completion *c, const char *text, size_t len);
/* A chat stream's first event: the delta {"role": "assistant", "content": ""}. */
void resp_chat_role_chunk(sbuf *o, const resp_completion *c);
/* The usage event of stream_options.include_usage: no choices, the usage. */
void resp_usage_chunk(sbuf *o, const resp_completion *c);
/* GET /v1/models/{model}: the model object; GET /v1/models: the list of it alone. */
void resp_model(sbuf *o, const char *model, long created);
void resp_models(sbuf *o, const char *model, long created);

#endif
