/*
 * Chat: a conversation with an instruct model, kept in a context's KV cache from one turn to the
 * next.  Each turn adds the user's message, renders the whole conversation with the model's chat
 * template (add_generation_prompt, as transformers' apply_chat_template), tokenizes it as
 * apply_chat_template(tokenize=True) does (special tokens written in the text recognized, none
 * added: the template writes its own BOS), keeps the tokens at its start that the context holds
 * already and feeds only the rest, then generates the reply until one of the model's stop ids
 * (vkg_model_stop_ids).  The reply's text becomes the assistant's message.  docs/API.md ("Chat").
 *
 *   vkg_chat_template *t;  vkg_chat_template_load(dir, &t, &err);
 *   vkg_chat *chat;        vkg_chat_new(ctx, t, "You are terse.", &chat, &err);
 *   per line:              vkg_chat_turn(chat, line, &gen_options, on_token, user, &res, &err);
 */
#ifndef VKGRAPH_CHAT_H
#define VKGRAPH_CHAT_H

#include "vkgraph_model.h"
#include "vkgraph_template.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct vkg_chat vkg_chat;

/* ctx (whose model must have a tokenizer) and tpl are borrowed: free the chat first.  The
 * context is emptied.  system: the system message's text, or NULL for none. */
vkg_status vkg_chat_new(vkg_context *ctx, const vkg_chat_template *tpl, const char *system, vkg_chat **out,
                        vkg_error *err);
void vkg_chat_free(vkg_chat *c); /* NULL is fine */

/* Forgets every message but the system one and empties the context. */
vkg_status vkg_chat_clear(vkg_chat *c, vkg_error *err);

/* The messages so far, oldest first (the system one first when there is one): message i's
 * role ("system", "user", "assistant") and text, valid until the next call on c; NULL past the
 * last. */
int vkg_chat_count(const vkg_chat *c);
const char *vkg_chat_message(const vkg_chat *c, int i, const char **role);

/* The prompt of the conversation with user_text as the next user message (NULL: the
 * conversation as it stands), rendered with add_generation_prompt and tokenized as above:
 * *ids (the caller frees) holds *n tokens, of which the first *common are in the context
 * already (the longest common prefix with vkg_context_tokens, at most vkg_context_length and
 * n - 1, so that a turn always feeds at least one token): a turn feeds ids[*common .. *n).
 * Changes nothing. */
vkg_status vkg_chat_prompt(vkg_chat *c, const char *user_text, int32_t **ids, size_t *n, size_t *common,
                           vkg_error *err);

typedef struct vkg_chat_turn_result {
    vkg_generate_result gen;   /* why the reply ended: VKG_STOP_EOS at a stop id, ...           */
    int prompt_tokens;         /* the rendered conversation's tokens                            */
    int reused;                /* of them, already in the context (not fed again)               */
    int fed;                   /* fed this turn: prompt_tokens - reused                         */
    int dropped;               /* the oldest messages dropped so that the conversation fits     */
    int refused;               /* 1: the message does not fit even alone (the error says so)    */
} vkg_chat_turn_result;

/* One turn: user_text added as the user's message, the conversation rendered and tokenized
 * (vkg_chat_prompt), the context truncated to the tokens it shares with it and the rest fed,
 * then a reply generated with o (max_tokens, sampling, stops; its prompt fields are ignored;
 * NULL: vkg_model_generate_defaults) and streamed to on_token as vkg_context_generate streams
 * it.  The reply's text (its tokens decoded, the stop id not among them) is added as the
 * assistant's message (ids the tokenizer lacks, as in a vocabulary padded past it, decode as
 * nothing, as tokenizers' decode skips them).
 *
 * The conversation fits when its prompt leaves room for a reply: min(max_tokens, n_ctx / 4)
 * positions, at least 1.  When it does not, the oldest turns (a user message and the replies
 * after it) are dropped, the system message kept, until it does (res->dropped counts the
 * messages; the context is re-fed from where the rendering changed).  When the system message
 * and user_text alone do not fit, the turn is refused (res->refused, VKG_ERR_INVALID_ARGUMENT
 * saying how many tokens it needs and how many the context has), and the conversation is left
 * as it was.
 * A reply that fills the context ends with VKG_STOP_CONTEXT_FULL (kept as it is; the next turn
 * drops old turns).  res may be NULL; its counts of tokens and of messages dropped are set
 * before the reply's first token streams, so on_token may report them first. */
vkg_status vkg_chat_turn(vkg_chat *c, const char *user_text, const vkg_generate_options *o,
                         vkg_token_callback on_token, void *user, vkg_chat_turn_result *res, vkg_error *err);

#ifdef __cplusplus
}
#endif

#endif
