/* OpenAI's chat messages to prompt ids (chat_prompt.h).  The messages are checked here, not left
 * to the template, so that a malformed one is a 400 naming the message and field; the template
 * then sees what transformers' apply_chat_template sees: {"messages": [{"role", "content"}]}
 * with each content a string. */
#include "server/chat_prompt.h"

#include "server/sbuf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BAD(param, ...) (srv_error_set(e, 400, "invalid_request_error", param, NULL, __VA_ARGS__), -1)

/* OpenAI's roles that a chat template renders.  "developer" is OpenAI's newer name for the
 * system message, and reaches the template as "system", the role templates know. */
static const char *template_role(const char *role) {
    if (strcmp(role, "developer") == 0) return "system";
    if (strcmp(role, "system") == 0 || strcmp(role, "user") == 0 || strcmp(role, "assistant") == 0) return role;
    return NULL;
}

/* content: a string, or a list of parts of which only {"type": "text", "text": ...} is taken
 * (joined with "\n", as llama-server and vLLM join them). */
static int add_content(sbuf *o, const vkg_json *content, size_t i, srv_error *e) {
    size_t len;
    const char *s = vkg_json_string(content, &len);
    if (s) {
        sbuf_json_string(o, s, len);
        return 0;
    }
    if (vkg_json_type_of(content) != VKG_JSON_ARRAY)
        return BAD("messages", "messages[%zu].content must be a string or an array of text parts, not %s", i,
                   vkg_json_type_name(vkg_json_type_of(content)));
    sbuf joined = {0};
    for (size_t p = 0; p < vkg_json_length(content); p++) {
        const vkg_json *part = vkg_json_at(content, p);
        size_t plen;
        const char *type = vkg_json_string(vkg_json_get(part, "type"), NULL);
        const char *text = vkg_json_string(vkg_json_get(part, "text"), &plen);
        if (!type || strcmp(type, "text") != 0 || !text) {
            sbuf_free(&joined);
            if (type && strcmp(type, "text") != 0)
                return BAD("messages", "messages[%zu].content[%zu] is of type '%.40s': this server takes text "
                           "parts only", i, p, type);
            return BAD("messages", "messages[%zu].content[%zu] must be {\"type\": \"text\", \"text\": string}", i, p);
        }
        if (p) sbuf_add(&joined, "\n", 1);
        sbuf_add(&joined, text, plen);
    }
    sbuf_json_string(o, joined.data ? joined.data : "", joined.len);
    int oom = joined.oom;
    sbuf_free(&joined);
    return oom ? (srv_error_set(e, 500, "server_error", NULL, NULL, "out of memory"), -1) : 0;
}

/* {"messages": [...]} for the template, from the request's messages. */
static int template_input(const vkg_json *messages, sbuf *o, srv_error *e) {
    if (vkg_json_type_of(messages) != VKG_JSON_ARRAY)
        return BAD("messages", "'messages' must be an array of messages, not %s",
                   vkg_json_type_name(vkg_json_type_of(messages)));
    size_t n = vkg_json_length(messages);
    if (n == 0) return BAD("messages", "'messages' is empty: give at least one message");
    sbuf_adds(o, "{\"messages\":[");
    for (size_t i = 0; i < n; i++) {
        const vkg_json *msg = vkg_json_at(messages, i);
        if (vkg_json_type_of(msg) != VKG_JSON_OBJECT)
            return BAD("messages", "messages[%zu] must be an object with role and content, not %s", i,
                       vkg_json_type_name(vkg_json_type_of(msg)));
        const char *role = vkg_json_string(vkg_json_get(msg, "role"), NULL);
        if (!role) return BAD("messages", "messages[%zu].role must be a string", i);
        const char *as = template_role(role);
        if (!as)
            return BAD("messages", "messages[%zu].role is '%.40s'; this server takes system, developer, user and "
                       "assistant messages", i, role);
        const vkg_json *content = vkg_json_get(msg, "content");
        if (!content) return BAD("messages", "messages[%zu].content is required", i);
        sbuf_adds(o, i ? ",{\"role\":" : "{\"role\":");
        sbuf_json_string(o, as, strlen(as));
        sbuf_adds(o, ",\"content\":");
        if (add_content(o, content, i, e)) return -1;
        sbuf_adds(o, "}");
    }
    sbuf_adds(o, "]}");
    return o->oom ? (srv_error_set(e, 500, "server_error", NULL, NULL, "out of memory"), -1) : 0;
}

int srv_chat_prompt(const vkg_json *root, const srv_model_facts *m, int32_t **ids, size_t *n, srv_error *e) {
    *ids = NULL;
    *n = 0;
    /* The reason, which names the server's files, goes to its log (srv_chat_unavailable). */
    if (!m->chat)
        return srv_error_set(e, 400, "invalid_request_error", "messages", "chat_template_missing",
                             "this model has no chat template (a \"chat_template\" in the tokenizer_config.json "
                             "beside it): use /v1/completions with a prompt"),
               -1;
    if (!m->tok) return BAD("messages", "this model has no tokenizer: chat messages cannot be tokenized");
    const vkg_json *messages = vkg_json_get(root, "messages");
    if (!messages) return BAD("messages", "'messages' is required (an array of {\"role\", \"content\"})");
    sbuf input = {0};
    if (template_input(messages, &input, e)) {
        sbuf_free(&input);
        return -1;
    }
    vkg_chat_render_options ro = {.add_generation_prompt = 1};
    char *text = NULL;
    size_t len = 0;
    vkg_error err = {0};
    vkg_status st = vkg_chat_template_render(m->chat, input.data, input.len, &ro, &text, &len, &err);
    sbuf_free(&input);
    if (st != VKG_OK) return BAD("messages", "the chat template refused these messages: %s", err.message);
    /* transformers tokenizes a rendered template with add_special_tokens=False: the template
     * wrote the BOS it wants, and special tokens written in it are read as themselves. */
    st = vkg_tokenizer_encode_with(m->tok, text, len, VKG_TOKENIZE_NO_SPECIAL, ids, n, &err);
    free(text);
    if (st != VKG_OK) return BAD("messages", "the rendered conversation could not be tokenized: %s", err.message);
    return 0;
}
