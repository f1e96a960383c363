/* The prompt of a chat completion: OpenAI's messages, checked, rendered with the model's chat
 * template and tokenized (request.h says how). */
#ifndef VKG_SERVER_CHAT_PROMPT_H
#define VKG_SERVER_CHAT_PROMPT_H

#include "base/json.h"
#include "server/request.h"

/* root: the request's body (its "messages").  On success *ids (owned, *n of them) is the prompt;
 * else -1 with e filled in. */
int srv_chat_prompt(const vkg_json *root, const srv_model_facts *m, int32_t **ids, size_t *n, srv_error *e);

#endif
