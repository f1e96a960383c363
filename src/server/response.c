/* OpenAI's response bodies (response.h). */
#include "server/response.h"

#include <string.h>

void resp_error(sbuf *o, const srv_error *e) {
    sbuf_adds(o, "{\"error\":{\"message\":");
    sbuf_json_string(o, e->message, strlen(e->message));
    sbuf_adds(o, ",\"type\":");
    sbuf_json_string(o, e->type, strlen(e->type));
    sbuf_adds(o, ",\"param\":");
    if (e->param[0]) sbuf_json_string(o, e->param, strlen(e->param));
    else sbuf_adds(o, "null");
    sbuf_adds(o, ",\"code\":");
    if (e->code) sbuf_json_string(o, e->code, strlen(e->code));
    else sbuf_adds(o, "null");
    sbuf_adds(o, "}}");
}

/* The object's name: completions have one for the whole answer and its chunks, chat two. */
static const char *object_name(const resp_completion *c, int chunk) {
    return !c->chat ? "text_completion" : chunk ? "chat.completion.chunk" : "chat.completion";
}

static void head(sbuf *o, const resp_completion *c, int chunk) {
    sbuf_adds(o, "{\"id\":");
    sbuf_json_string(o, c->id, strlen(c->id));
    sbuf_printf(o, ",\"object\":\"%s\",\"created\":%ld,\"model\":", object_name(c, chunk), c->created);
    sbuf_json_string(o, c->model, strlen(c->model));
}

/* The one choice: completions' {"text"}; chat's {"message"} in the whole answer, {"delta"} in a
 * chunk, which holds the role (role_delta), the content, or nothing (text NULL: the last). */
static void choice(sbuf *o, const resp_completion *c, int chunk, int role_delta, const char *text, size_t len) {
    if (!c->chat) {
        sbuf_adds(o, ",\"choices\":[{\"text\":");
        sbuf_json_string(o, text ? text : "", text ? len : 0);
    } else {
        sbuf_adds(o, chunk ? ",\"choices\":[{\"delta\":{" : ",\"choices\":[{\"message\":{\"role\":\"assistant\",");
        if (role_delta) sbuf_adds(o, "\"role\":\"assistant\",");
        if (text || role_delta || !chunk) {
            sbuf_adds(o, "\"content\":");
            sbuf_json_string(o, text ? text : "", text ? len : 0);
        }
        sbuf_adds(o, "}");
    }
    if (c->with_tokens) {
        sbuf_adds(o, ",\"tokens\":[");
        if (c->tokens) sbuf_add(o, c->tokens, c->tokens_len);
        sbuf_adds(o, "]");
    }
    sbuf_adds(o, ",\"index\":0,\"logprobs\":");
    srv_logprobs_json(o, c->chat, c->tok, c->logprobs, c->with_logprobs ? c->n_logprobs : 0);
    sbuf_adds(o, ",\"finish_reason\":");
    if (c->finish_reason) sbuf_json_string(o, c->finish_reason, strlen(c->finish_reason));
    else sbuf_adds(o, "null");
    sbuf_adds(o, "}]");
}

static void usage(sbuf *o, const resp_completion *c) {
    sbuf_printf(o, ",\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d,\"total_tokens\":%d,"
                "\"prompt_tokens_details\":{\"cached_tokens\":%d}}",
                c->prompt_tokens, c->completion_tokens, c->prompt_tokens + c->completion_tokens, c->cached_tokens);
}

void resp_completion_body(sbuf *o, const resp_completion *c, const char *text, size_t len) {
    head(o, c, 0);
    choice(o, c, 0, 0, text, len);
    usage(o, c);
    sbuf_adds(o, "}");
}

static void chunk(sbuf *o, const resp_completion *c, int role_delta, const char *text, size_t len) {
    sbuf_adds(o, "data: ");
    head(o, c, 1);
    choice(o, c, 1, role_delta, text, len);
    sbuf_adds(o, "}\n\n");
}

void resp_completion_chunk(sbuf *o, const resp_completion *c, const char *text, size_t len) {
    chunk(o, c, 0, text, len);
}

void resp_chat_role_chunk(sbuf *o, const resp_completion *c) { chunk(o, c, 1, NULL, 0); }

void resp_usage_chunk(sbuf *o, const resp_completion *c) {
    sbuf_adds(o, "data: ");
    head(o, c, 1);
    sbuf_adds(o, ",\"choices\":[]");
    usage(o, c);
    sbuf_adds(o, "}\n\n");
}

void resp_model(sbuf *o, const char *model, long created) {
    sbuf_adds(o, "{\"id\":");
    sbuf_json_string(o, model, strlen(model));
    sbuf_printf(o, ",\"object\":\"model\",\"created\":%ld,\"owned_by\":\"vkgraph\"}", created);
}

void resp_models(sbuf *o, const char *model, long created) {
    sbuf_adds(o, "{\"object\":\"list\",\"data\":[");
    resp_model(o, model, created);
    sbuf_adds(o, "]}");
}
