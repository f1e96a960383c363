/* Logprobs (logprobs.h): the log-softmax of one position's logits, and OpenAI's two JSON shapes
 * for a choice's tokens. */
#include "server/logprobs.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

void srv_logprobs_of(const float *logits, int V, int32_t id, int n_top, srv_logprobs *out) {
    if (n_top > SRV_MAX_TOP_LOGPROBS) n_top = SRV_MAX_TOP_LOGPROBS;
    float max = -INFINITY;
    for (int i = 0; i < V; i++) max = logits[i] > max ? logits[i] : max;
    /* the most likely n_top, kept sorted: a logit enters only past the smallest kept, so equal
       logits keep the lower id first */
    out->n_top = 0;
    double sum = 0;
    for (int i = 0; i < V; i++) {
        sum += expf(logits[i] - max);
        if (n_top == 0 || (out->n_top == n_top && logits[i] <= out->top[n_top - 1])) continue;
        int k = out->n_top < n_top ? out->n_top++ : n_top - 1;
        for (; k > 0 && out->top[k - 1] < logits[i]; k--) {
            out->top[k] = out->top[k - 1];
            out->top_ids[k] = out->top_ids[k - 1];
        }
        out->top[k] = logits[i];
        out->top_ids[k] = i;
    }
    const double lse = (double)max + log(sum);
    out->logprob = (float)((double)logits[id] - lse);
    for (int k = 0; k < out->n_top; k++) out->top[k] = (float)((double)out->top[k] - lse);
}

/* A token as a JSON string: its text when its bytes are whole UTF-8 characters, else OpenAI's
 * "bytes:\xNN..." (a byte-fallback token, or one that ends inside a character); "token_id:N"
 * without a tokenizer. */
static void token_string(sbuf *o, const vkg_tokenizer *tok, int32_t id) {
    size_t len = 0;
    const char *bytes = tok ? vkg_tokenizer_token_bytes(tok, id, &len) : NULL;
    if (!bytes) {
        sbuf_printf(o, "\"token_id:%d\"", (int)id);
    } else if (sbuf_utf8_valid(bytes, len)) {
        sbuf_json_string(o, bytes, len);
    } else {
        sbuf_adds(o, "\"bytes:");
        for (size_t i = 0; i < len; i++) sbuf_printf(o, "\\\\x%02x", (unsigned char)bytes[i]);
        sbuf_adds(o, "\"");
    }
}

/* A logprob as JSON: -9999 stands for -inf (a token the model rules out), as JSON has no
 * infinities; vLLM writes the same. */
static void number(sbuf *o, float v) {
    if (isinf(v)) sbuf_adds(o, "-9999.0");
    else sbuf_printf(o, "%.9g", v);
}

/* Chat's entry of one token: {"token", "logprob", "bytes", "top_logprobs"?}. */
static void chat_token(sbuf *o, const vkg_tokenizer *tok, int32_t id, float logprob) {
    sbuf_adds(o, "{\"token\":");
    token_string(o, tok, id);
    sbuf_adds(o, ",\"logprob\":");
    number(o, logprob);
    sbuf_adds(o, ",\"bytes\":");
    size_t len = 0;
    const char *bytes = tok ? vkg_tokenizer_token_bytes(tok, id, &len) : NULL;
    if (!bytes) {
        sbuf_adds(o, "null");
    } else {
        sbuf_adds(o, "[");
        for (size_t i = 0; i < len; i++) sbuf_printf(o, "%s%u", i ? "," : "", (unsigned char)bytes[i]);
        sbuf_adds(o, "]");
    }
}

static void chat_json(sbuf *o, const vkg_tokenizer *tok, const srv_logprob_entry *e, size_t n) {
    sbuf_adds(o, "{\"content\":[");
    for (size_t i = 0; i < n; i++) {
        if (i) sbuf_adds(o, ",");
        chat_token(o, tok, e[i].id, e[i].lp.logprob);
        sbuf_adds(o, ",\"top_logprobs\":[");
        for (int k = 0; k < e[i].lp.n_top; k++) {
            if (k) sbuf_adds(o, ",");
            chat_token(o, tok, e[i].lp.top_ids[k], e[i].lp.top[k]);
            sbuf_adds(o, "}");
        }
        sbuf_adds(o, "]}");
    }
    sbuf_adds(o, "]}");
}

/* 1 when tokens a and b are written as the same string (the same bytes). */
static int same_string(const vkg_tokenizer *tok, int32_t a, int32_t b) {
    size_t la = 0, lb = 0;
    const char *x = tok ? vkg_tokenizer_token_bytes(tok, a, &la) : NULL;
    const char *y = tok ? vkg_tokenizer_token_bytes(tok, b, &lb) : NULL;
    return a == b || (x && y && la == lb && !memcmp(x, y, la));
}

/* Completions' top_logprobs of one token: a map from token to logprob, the chosen token included
 * (so up to logprobs + 1 entries, as OpenAI documents); a token written as the same string as a
 * more likely one is left out, since a JSON object's keys are unique. */
static void completion_top(sbuf *o, const vkg_tokenizer *tok, const srv_logprob_entry *e) {
    int32_t ids[SRV_MAX_TOP_LOGPROBS + 1];
    float values[SRV_MAX_TOP_LOGPROBS + 1];
    int n = 0;
    for (int k = 0; k <= e->lp.n_top; k++) {
        const int32_t id = k < e->lp.n_top ? e->lp.top_ids[k] : e->id;
        int seen = 0;
        for (int q = 0; q < n; q++) seen |= same_string(tok, ids[q], id);
        if (seen) continue;
        ids[n] = id;
        values[n++] = k < e->lp.n_top ? e->lp.top[k] : e->lp.logprob;
    }
    sbuf_adds(o, "{");
    for (int k = 0; k < n; k++) {
        if (k) sbuf_adds(o, ",");
        token_string(o, tok, ids[k]);
        sbuf_adds(o, ":");
        number(o, values[k]);
    }
    sbuf_adds(o, "}");
}

static void completion_json(sbuf *o, const vkg_tokenizer *tok, const srv_logprob_entry *e, size_t n) {
    sbuf_adds(o, "{\"tokens\":[");
    for (size_t i = 0; i < n; i++) {
        if (i) sbuf_adds(o, ",");
        token_string(o, tok, e[i].id);
    }
    sbuf_adds(o, "],\"token_logprobs\":[");
    for (size_t i = 0; i < n; i++) {
        if (i) sbuf_adds(o, ",");
        if (e[i].unpredicted) sbuf_adds(o, "null");
        else number(o, e[i].lp.logprob);
    }
    sbuf_adds(o, "],\"top_logprobs\":[");
    for (size_t i = 0; i < n; i++) {
        if (i) sbuf_adds(o, ",");
        if (e[i].unpredicted) sbuf_adds(o, "null");
        else completion_top(o, tok, &e[i]);
    }
    sbuf_adds(o, "],\"text_offset\":[");
    for (size_t i = 0; i < n; i++) sbuf_printf(o, "%s%d", i ? "," : "", e[i].text_offset);
    sbuf_adds(o, "]}");
}

void srv_logprobs_json(sbuf *o, int chat, const vkg_tokenizer *tok, const srv_logprob_entry *e, size_t n) {
    if (!n) sbuf_adds(o, "null");
    else if (chat) chat_json(o, tok, e, n);
    else completion_json(o, tok, e, n);
}
