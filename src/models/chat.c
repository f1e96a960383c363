/* A conversation kept in a context's KV cache (vkgraph_chat.h): its messages, their rendering
 * with the chat template, the tokens a turn feeds past those the context holds, and dropping
 * the oldest turns when the conversation outgrows the context. */
#include "vkgraph_chat.h"

#include "base/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct chat_message {
    char role[16];
    char *text;
} chat_message;

struct vkg_chat {
    vkg_context *ctx;
    const vkg_chat_template *tpl;
    const vkg_tokenizer *tok;
    chat_message *msg;
    int n, cap;
    int has_system;
};

/* text[0..len) with each ill-formed UTF-8 run as U+FFFD (as Hugging Face's decode shows it), so
 * that the conversation stays valid JSON; NULL when out of memory. */
static char *valid_utf8(const char *text, size_t len) {
    char *out = malloc(len * 3 + 1), *w = out;
    if (!out) return NULL;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        const size_t k = vkg_utf8_decode(text + i, len - i, &cp);
        if (cp == VKG_UTF8_INVALID) w += vkg_utf8_encode(0xFFFD, w);
        else if (cp != 0) { /* a NUL would end the message early */
            memcpy(w, text + i, k);
            w += k;
        }
        i += k;
    }
    *w = '\0';
    return out;
}

static vkg_status push(vkg_chat *c, const char *role, const char *text, size_t len, vkg_error *err) {
    if (c->n == c->cap) {
        const int cap = c->cap ? 2 * c->cap : 8;
        chat_message *bigger = realloc(c->msg, (size_t)cap * sizeof *bigger);
        if (!bigger) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "chat: out of memory");
        c->msg = bigger;
        c->cap = cap;
    }
    chat_message *m = &c->msg[c->n];
    snprintf(m->role, sizeof m->role, "%s", role);
    if (!(m->text = valid_utf8(text, len))) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "chat: out of memory");
    c->n++;
    return VKG_OK;
}

/* Removes messages [from, from + count). */
static void drop(vkg_chat *c, int from, int count) {
    for (int i = from; i < from + count; i++) free(c->msg[i].text);
    memmove(c->msg + from, c->msg + from + count, (size_t)(c->n - from - count) * sizeof *c->msg);
    c->n -= count;
}

vkg_status vkg_chat_new(vkg_context *ctx, const vkg_chat_template *tpl, const char *system, vkg_chat **out,
                        vkg_error *err) {
    if (out) *out = NULL;
    if (!ctx || !tpl || !out) return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_chat_new: NULL argument");
    const vkg_tokenizer *tok = vkg_model_tokenizer(vkg_context_model(ctx));
    if (!tok) return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "chat: the model has no tokenizer");
    vkg_chat *c = calloc(1, sizeof *c);
    if (!c) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "chat: out of memory");
    c->ctx = ctx;
    c->tpl = tpl;
    c->tok = tok;
    vkg_status st = system ? push(c, "system", system, strlen(system), err) : VKG_OK;
    c->has_system = system != NULL;
    if (st == VKG_OK) st = vkg_context_reset(ctx, err);
    if (st != VKG_OK) {
        vkg_chat_free(c);
        return st;
    }
    *out = c;
    return VKG_OK;
}

void vkg_chat_free(vkg_chat *c) {
    if (!c) return;
    drop(c, 0, c->n);
    free(c->msg);
    free(c);
}

vkg_status vkg_chat_clear(vkg_chat *c, vkg_error *err) {
    if (!c) return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_chat_clear: NULL chat");
    drop(c, c->has_system, c->n - c->has_system);
    return vkg_context_reset(c->ctx, err);
}

int vkg_chat_count(const vkg_chat *c) { return c ? c->n : 0; }

const char *vkg_chat_message(const vkg_chat *c, int i, const char **role) {
    if (!c || i < 0 || i >= c->n) return NULL;
    if (role) *role = c->msg[i].role;
    return c->msg[i].text;
}

/* The conversation rendered (with the assistant's header) and tokenized as
 * apply_chat_template(tokenize=True): special tokens in the text read as such, none added. */
static vkg_status render_ids(const vkg_chat *c, int32_t **ids, size_t *n, vkg_error *err) {
    char *json = NULL, *text = NULL;
    size_t json_len = 0, text_len = 0;
    FILE *f = open_memstream(&json, &json_len);
    if (!f) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "chat: out of memory");
    fputc('[', f);
    for (int i = 0; i < c->n; i++) {
        fputs(i ? ", {\"role\": " : "{\"role\": ", f);
        vkg_json_write_string(f, c->msg[i].role);
        fputs(", \"content\": ", f);
        vkg_json_write_string(f, c->msg[i].text);
        fputc('}', f);
    }
    fputc(']', f);
    const int bad = ferror(f);
    fclose(f);
    vkg_status st = bad ? vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "chat: out of memory") : VKG_OK;
    vkg_chat_render_options ro = {.add_generation_prompt = 1};
    if (st == VKG_OK) st = vkg_chat_template_render(c->tpl, json, json_len, &ro, &text, &text_len, err);
    if (st == VKG_OK) st = vkg_tokenizer_encode_with(c->tok, text, text_len, VKG_TOKENIZE_NO_SPECIAL, ids, n, err);
    if (st == VKG_OK && *n == 0)
        st = vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "chat: the template renders the conversation as no text");
    free(json);
    free(text);
    return st;
}

/* Of ids[0..n), how many the context holds already (see vkg_chat_prompt). */
static size_t common_prefix(const vkg_chat *c, const int32_t *ids, size_t n) {
    int held = 0;
    const int32_t *have = vkg_context_tokens(c->ctx, &held);
    size_t k = 0;
    const size_t limit = (size_t)vkg_context_length(c->ctx) < n - 1 ? (size_t)vkg_context_length(c->ctx) : n - 1;
    while (k < limit && k < (size_t)held && have[k] == ids[k]) k++;
    return k;
}

vkg_status vkg_chat_prompt(vkg_chat *c, const char *user_text, int32_t **ids, size_t *n, size_t *common,
                           vkg_error *err) {
    if (ids) *ids = NULL;
    if (!c || !ids || !n || !common) return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_chat_prompt: NULL argument");
    vkg_status st = user_text ? push(c, "user", user_text, strlen(user_text), err) : VKG_OK;
    const int pushed = user_text && st == VKG_OK;
    if (st == VKG_OK) st = render_ids(c, ids, n, err);
    if (st == VKG_OK) *common = common_prefix(c, *ids, *n);
    if (pushed) drop(c, c->n - 1, 1);
    return st;
}

/* Drops the oldest turn after the system message: its message and those up to the next user
 * message.  0 when only the last message (the new one) is left to drop. */
static int drop_oldest_turn(vkg_chat *c) {
    const int first = c->has_system;
    if (first >= c->n - 1) return 0;
    int end = first + 1;
    while (end < c->n - 1 && strcmp(c->msg[end].role, "user") != 0) end++;
    const int count = end - first;
    drop(c, first, count);
    return count;
}

typedef struct turn_stream {
    vkg_token_callback on_token;
    void *user;
    int32_t *ids;
    int n, cap;
    int oom;
} turn_stream;

static int stream_token(void *user, int32_t id, const char *text, size_t len) {
    turn_stream *s = user;
    if (id != VKG_NO_TOKEN) {
        if (s->n == s->cap) {
            const int cap = s->cap ? 2 * s->cap : 64;
            int32_t *bigger = realloc(s->ids, (size_t)cap * sizeof *bigger);
            if (!bigger) return s->oom = 1;
            s->ids = bigger;
            s->cap = cap;
        }
        s->ids[s->n++] = id;
    }
    return s->on_token ? s->on_token(s->user, id, text, len) : 0;
}

/* Renders the conversation, dropping the oldest turns until it leaves `reserve` positions. */
static vkg_status fit(vkg_chat *c, int reserve, int32_t **ids, size_t *n, int *dropped, int *refused, vkg_error *err) {
    const size_t S = (size_t)vkg_context_size(c->ctx);
    for (;;) {
        vkg_status st = render_ids(c, ids, n, err);
        if (st != VKG_OK) return st;
        if (*n + (size_t)reserve <= S) return VKG_OK;
        const int count = drop_oldest_turn(c);
        if (count == 0) {
            *refused = 1;
            st = vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "this message does not fit the context: with %sthe "
                               "template's text it takes %zu tokens, and a reply needs %d more, but the context "
                               "holds %zu; write a shorter message%s", c->has_system ? "the system message and " : "",
                               *n, reserve, S, c->has_system ? " (or a shorter system message)" : "");
            free(*ids);
            *ids = NULL;
            return st;
        }
        *dropped += count;
        free(*ids);
        *ids = NULL;
    }
}

vkg_status vkg_chat_turn(vkg_chat *c, const char *user_text, const vkg_generate_options *o,
                         vkg_token_callback on_token, void *user, vkg_chat_turn_result *res, vkg_error *err) {
    vkg_chat_turn_result local;
    if (!res) res = &local;
    memset(res, 0, sizeof *res);
    res->gen.stop_index = -1;
    if (!c || !user_text) return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_chat_turn: NULL argument");
    vkg_generate_options go;
    if (o) go = *o;
    else vkg_model_generate_defaults(vkg_context_model(c->ctx), &go);
    if (go.max_tokens < 0)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "chat: max_tokens %d; use 0 or more", go.max_tokens);
    /* kept whole until the turn is taken: a refused turn leaves the conversation as it was */
    chat_message *saved = malloc((size_t)(c->n ? c->n : 1) * sizeof *saved);
    if (!saved) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "chat: out of memory");
    const int saved_n = c->n;
    for (int i = 0; i < c->n; i++)
        if (saved[i] = c->msg[i], !(saved[i].text = strdup(c->msg[i].text))) {
            for (int k = 0; k < i; k++) free(saved[k].text);
            free(saved);
            return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "chat: out of memory");
        }
    vkg_status st = push(c, "user", user_text, strlen(user_text), err);
    const int S = vkg_context_size(c->ctx);
    int reserve = go.max_tokens < S / 4 ? go.max_tokens : S / 4;
    if (reserve < 1) reserve = 1;
    int32_t *ids = NULL;
    size_t n = 0;
    if (st == VKG_OK) st = fit(c, reserve, &ids, &n, &res->dropped, &res->refused, err);
    if (st != VKG_OK) { /* the conversation as it was */
        drop(c, 0, c->n);
        for (int i = 0; i < saved_n; i++) c->msg[i] = saved[i];
        c->n = saved_n;
        free(saved);
        res->dropped = 0;
        return st;
    }
    for (int i = 0; i < saved_n; i++) free(saved[i].text);
    free(saved);
    const size_t keep = common_prefix(c, ids, n);
    res->prompt_tokens = (int)n; /* set before the first token streams: a caller may say so first */
    res->reused = (int)keep;
    res->fed = (int)(n - keep);
    st = vkg_context_truncate(c->ctx, (int)keep, err);
    turn_stream s = {.on_token = on_token, .user = user};
    go.prompt = ids + keep;
    go.n_prompt = (int)(n - keep);
    if (st == VKG_OK) st = vkg_context_generate(c->ctx, &go, stream_token, &s, &res->gen, err);
    if (st == VKG_OK && s.oom) st = vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "chat: out of memory for the reply");
    free(ids);
    size_t len_unused;
    /* ids the tokenizer lacks (a vocabulary padded past it, as Qwen's) decode as nothing, as
     * tokenizers' decode skips them */
    int known = 0;
    for (int i = 0; i < s.n; i++)
        if (vkg_tokenizer_token_bytes(c->tok, s.ids[i], &len_unused)) s.ids[known++] = s.ids[i];
    char *text = NULL;
    size_t len = 0;
    if (st == VKG_OK && known) st = vkg_tokenizer_decode(c->tok, s.ids, (size_t)known, &text, &len, err);
    if (st == VKG_OK) st = push(c, "assistant", text ? text : "", len, err);
    if (st != VKG_OK && c->n && !strcmp(c->msg[c->n - 1].role, "user")) drop(c, c->n - 1, 1);
    free(text);
    free(s.ids);
    return st;
}
