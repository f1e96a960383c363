/* Parsing and checking the server's request bodies (request.h), with the project's strict JSON
 * reader. */
#include "server/request.h"

#include "base/json.h"
#include "server/chat_prompt.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void srv_error_set(srv_error *e, int http_status, const char *type, const char *param, const char *code,
                   const char *fmt, ...) {
    e->http_status = http_status;
    e->type = type;
    e->code = code;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
}

#define BAD(param, ...) (srv_error_set(e, 400, "invalid_request_error", param, NULL, __VA_ARGS__), -1)

static int parse_body(const char *body, size_t len, vkg_json **root, srv_error *e) {
    vkg_error err = {0};
    if (vkg_json_parse(body, len, root, &err) != VKG_OK)
        return BAD(NULL, "the body is not valid JSON: %s", err.message);
    vkg_json_type t = vkg_json_type_of(*root);
    if (t != VKG_JSON_OBJECT) {
        vkg_json_free(*root);
        *root = NULL;
        return BAD(NULL, "the body must be a JSON object, not %s", vkg_json_type_name(t));
    }
    return 0;
}

/* A field that is absent or null: the default applies. */
static const vkg_json *field(const vkg_json *root, const char *name) {
    const vkg_json *v = vkg_json_get(root, name);
    return vkg_json_type_of(v) == VKG_JSON_NULL ? NULL : v;
}

static int get_number(const vkg_json *root, const char *name, double lo, double hi, double *out, srv_error *e) {
    const vkg_json *v = field(root, name);
    if (!v) return 0;
    if (vkg_json_type_of(v) != VKG_JSON_NUMBER)
        return BAD(name, "'%s' must be a number, not %s", name, vkg_json_type_name(vkg_json_type_of(v)));
    double x = vkg_json_number(v);
    if (!(x >= lo && x <= hi)) return BAD(name, "'%s' is %g; it must be between %g and %g", name, x, lo, hi);
    *out = x;
    return 0;
}

static int get_int(const vkg_json *root, const char *name, double lo, double hi, long long *out, srv_error *e) {
    const vkg_json *v = field(root, name);
    if (!v) return 0;
    double x;
    if (get_number(root, name, lo, hi, &x, e)) return -1;
    if (x != floor(x)) return BAD(name, "'%s' must be an integer, not %g", name, x);
    *out = (long long)x;
    return 0;
}

static int get_bool(const vkg_json *root, const char *name, int *out, srv_error *e) {
    const vkg_json *v = field(root, name);
    if (!v) return 0;
    if (vkg_json_type_of(v) != VKG_JSON_BOOL)
        return BAD(name, "'%s' must be true or false, not %s", name, vkg_json_type_name(vkg_json_type_of(v)));
    *out = vkg_json_bool(v);
    return 0;
}

/* An array of token ids, each in the vocabulary. */
static int get_ids(const vkg_json *v, const char *name, const srv_model_facts *m, int32_t **ids, size_t *n,
                   srv_error *e) {
    size_t count = vkg_json_length(v);
    *ids = NULL;
    *n = 0;
    if (count == 0) return 0;
    int32_t *out = malloc(count * sizeof *out);
    if (!out) return srv_error_set(e, 500, "server_error", NULL, NULL, "out of memory"), -1;
    for (size_t i = 0; i < count; i++) {
        const vkg_json *x = vkg_json_at(v, i);
        double d = vkg_json_number(x);
        if (vkg_json_type_of(x) != VKG_JSON_NUMBER || d != floor(d) || d < 0 || d >= m->n_vocab) {
            free(out);
            if (vkg_json_type_of(x) != VKG_JSON_NUMBER)
                return BAD(name, "'%s'[%zu] must be a token id (an integer), not %s", name, i,
                           vkg_json_type_name(vkg_json_type_of(x)));
            return BAD(name, "'%s'[%zu] is %g, outside the vocabulary [0, %d)", name, i, d, m->n_vocab);
        }
        out[i] = (int32_t)d;
    }
    *ids = out;
    *n = count;
    return 0;
}

static int encode(const srv_model_facts *m, const char *name, const char *s, size_t len, int32_t **ids, size_t *n,
                  srv_error *e) {
    if (!m->tok) return BAD(name, "the model has no tokenizer: give '%s' as token ids", name);
    vkg_error err = {0};
    if (vkg_tokenizer_encode(m->tok, s, len, ids, n, &err) != VKG_OK) return BAD(name, "'%s': %s", name, err.message);
    return 0;
}

/* A prompt of n ids (in r->ids) within the context; param names it in the error. */
static int prompt_fits(const srv_model_facts *m, const char *param, size_t n, completion_request *r, srv_error *e) {
    if ((long long)n > m->n_ctx)
        return srv_error_set(e, 400, "invalid_request_error", param, "context_length_exceeded",
                             "this model's maximum context length is %d tokens; the prompt has %zu", m->n_ctx, n),
               -1;
    r->n_ids = (int)n;
    return 0;
}

/* prompt: a string, an array of token ids, or an array of one of either (OpenAI's batch forms,
 * of which one prompt per request is served). */
static int get_prompt(const vkg_json *root, const srv_model_facts *m, completion_request *r, srv_error *e) {
    const vkg_json *p = field(root, "prompt");
    if (!p) return BAD("prompt", "'prompt' is required (a string or an array of token ids)");
    if (vkg_json_type_of(p) == VKG_JSON_ARRAY && vkg_json_length(p) > 0) {
        vkg_json_type first = vkg_json_type_of(vkg_json_at(p, 0));
        if (first == VKG_JSON_STRING || first == VKG_JSON_ARRAY) {
            if (vkg_json_length(p) != 1)
                return BAD("prompt", "'prompt' holds %zu prompts; this server takes one per request",
                           vkg_json_length(p));
            p = vkg_json_at(p, 0);
        }
    }
    size_t n = 0;
    if (vkg_json_type_of(p) == VKG_JSON_STRING) {
        size_t len;
        const char *s = vkg_json_string(p, &len);
        if (encode(m, "prompt", s, len, &r->ids, &n, e)) return -1;
        if (r->echo && !(r->echo_text = malloc(len + 1)))
            return srv_error_set(e, 500, "server_error", NULL, NULL, "out of memory"), -1;
        if (r->echo) memcpy(r->echo_text, s, len), r->echo_len = len;
    } else if (vkg_json_type_of(p) == VKG_JSON_ARRAY) {
        if (get_ids(p, "prompt", m, &r->ids, &n, e)) return -1;
        vkg_error err = {0};
        if (r->echo && m->tok && n && vkg_tokenizer_decode(m->tok, r->ids, n, &r->echo_text, &r->echo_len, &err))
            return srv_error_set(e, 500, "server_error", NULL, NULL, "%s", err.message), -1;
    } else {
        return BAD("prompt", "'prompt' must be a string or an array of token ids, not %s",
                   vkg_json_type_name(vkg_json_type_of(p)));
    }
    if (n == 0) {
        /* As transformers' generate() without input: start from the start token. */
        if (m->bos == VKG_NO_TOKEN) return BAD("prompt", "'prompt' is empty and the model has no start token");
        free(r->ids);
        if (!(r->ids = malloc(sizeof *r->ids))) return srv_error_set(e, 500, "server_error", NULL, NULL, "out of memory"), -1;
        r->ids[0] = m->bos;
        n = 1;
    }
    return prompt_fits(m, "prompt", n, r, e);
}

static int get_stops(const vkg_json *root, completion_request *r, srv_error *e) {
    const vkg_json *s = field(root, "stop");
    if (!s) return 0;
    size_t count = vkg_json_type_of(s) == VKG_JSON_ARRAY ? vkg_json_length(s) : 1;
    if (vkg_json_type_of(s) != VKG_JSON_ARRAY && vkg_json_type_of(s) != VKG_JSON_STRING)
        return BAD("stop", "'stop' must be a string or an array of strings, not %s",
                   vkg_json_type_name(vkg_json_type_of(s)));
    if (count > SRV_MAX_STOPS) return BAD("stop", "'stop' holds %zu strings; at most %d", count, SRV_MAX_STOPS);
    for (size_t i = 0; i < count; i++) {
        const vkg_json *x = vkg_json_type_of(s) == VKG_JSON_ARRAY ? vkg_json_at(s, i) : s;
        size_t len;
        const char *str = vkg_json_string(x, &len);
        if (!str) return BAD("stop", "'stop'[%zu] must be a string", i);
        if (len == 0) continue; /* an empty stop string stops nothing */
        if (len > SRV_MAX_STOP_BYTES || memchr(str, 0, len))
            return BAD("stop", "'stop'[%zu] is longer than %d bytes or holds a NUL", i, SRV_MAX_STOP_BYTES);
        if (!(r->stops[r->n_stops] = strdup(str))) return srv_error_set(e, 500, "server_error", NULL, NULL, "out of memory"), -1;
        r->n_stops++;
    }
    return 0;
}

void completion_request_free(completion_request *r) {
    free(r->ids);
    free(r->bias_ids);
    free(r->bias);
    free(r->echo_text);
    for (int i = 0; i < r->n_stops; i++) free(r->stops[i]);
    memset(r, 0, sizeof *r);
}

/* OpenAI fields this server does not act on but whose type it checks, so that a client that
 * sends a malformed one hears of it. */
static const struct {
    const char *name;
    vkg_json_type type;
} checked_fields[] = {
    {"user", VKG_JSON_STRING},         {"metadata", VKG_JSON_OBJECT},         {"store", VKG_JSON_BOOL},
    {"service_tier", VKG_JSON_STRING}, {"parallel_tool_calls", VKG_JSON_BOOL},
};

static int check_types(const vkg_json *root, srv_error *e) {
    for (size_t i = 0; i < sizeof checked_fields / sizeof checked_fields[0]; i++) {
        const vkg_json *v = field(root, checked_fields[i].name);
        if (v && vkg_json_type_of(v) != checked_fields[i].type)
            return BAD(checked_fields[i].name, "'%s' must be %s, not %s", checked_fields[i].name,
                       vkg_json_type_name(checked_fields[i].type), vkg_json_type_name(vkg_json_type_of(v)));
    }
    return 0;
}

/* Chat's fields that would change the answer and that this server cannot honour. */
static int refuse_for_chat(const vkg_json *root, srv_error *e) {
    const vkg_json *tools = field(root, "tools");
    if (tools && (vkg_json_type_of(tools) != VKG_JSON_ARRAY || vkg_json_length(tools) > 0))
        return BAD("tools", "'tools' (function calling) is not supported by this server");
    if (field(root, "functions"))
        return BAD("functions", "'functions' (function calling) is not supported by this server");
    const vkg_json *rf = field(root, "response_format");
    if (rf) {
        const char *type = vkg_json_string(vkg_json_get(rf, "type"), NULL);
        if (!type) return BAD("response_format", "'response_format' must be an object with a \"type\"");
        if (strcmp(type, "text") != 0)
            return BAD("response_format", "'response_format' of type '%.40s' is not supported: only \"text\"", type);
    }
    const vkg_json *modalities = field(root, "modalities");
    for (size_t i = 0; i < vkg_json_length(modalities); i++) {
        const char *mod = vkg_json_string(vkg_json_at(modalities, i), NULL);
        if (!mod || strcmp(mod, "text") != 0) return BAD("modalities", "'modalities': this server answers text only");
    }
    return 0;
}

/* The same for completions. */
static int refuse_for_completions(const vkg_json *root, srv_error *e) {
    size_t suffix_len = 0;
    const vkg_json *suffix = field(root, "suffix");
    if (suffix && (!vkg_json_string(suffix, &suffix_len) || suffix_len > 0))
        return BAD("suffix", "'suffix' (insertion) is not supported by this server");
    return 0;
}

static int refuse_unsupported(const vkg_json *root, int chat, srv_error *e) {
    if (check_types(root, e)) return -1;
    return chat ? refuse_for_chat(root, e) : refuse_for_completions(root, e);
}

/* Completions' "logprobs": null or an integer, the alternatives listed beside each token.  Chat's
 * "logprobs": true asks for them, "top_logprobs" says how many alternatives (OpenAI's rule: only
 * with logprobs true). */
static int get_logprobs(const vkg_json *root, int chat, completion_request *r, srv_error *e) {
    long long top = -1;
    r->logprobs = -1;
    if (!chat) {
        if (get_int(root, "logprobs", 0, SRV_MAX_TOP_LOGPROBS, &top, e)) return -1;
        r->logprobs = (int)top;
        return 0;
    }
    int on = 0;
    if (get_bool(root, "logprobs", &on, e) || get_int(root, "top_logprobs", 0, SRV_MAX_TOP_LOGPROBS, &top, e))
        return -1;
    if (top >= 0 && !on) return BAD("top_logprobs", "'top_logprobs' needs \"logprobs\": true");
    r->logprobs = on ? (top < 0 ? 0 : (int)top) : -1;
    return 0;
}

/* "logit_bias": {"ID": BIAS, ...}, each ID a token id written in decimal (no sign, no leading
 * zero, so no two keys name one token), each BIAS -100 to 100, added to that token's logit. */
static int get_logit_bias(const vkg_json *root, const srv_model_facts *m, completion_request *r, srv_error *e) {
    const vkg_json *b = field(root, "logit_bias");
    if (!b) return 0;
    if (vkg_json_type_of(b) != VKG_JSON_OBJECT)
        return BAD("logit_bias", "'logit_bias' must be an object, not %s", vkg_json_type_name(vkg_json_type_of(b)));
    const size_t n = vkg_json_length(b);
    if (n > SRV_MAX_LOGIT_BIAS)
        return BAD("logit_bias", "'logit_bias' holds %zu tokens; at most %d", n, SRV_MAX_LOGIT_BIAS);
    if (!n) return 0;
    r->bias_ids = malloc(n * sizeof *r->bias_ids);
    r->bias = malloc(n * sizeof *r->bias);
    if (!r->bias_ids || !r->bias) return srv_error_set(e, 500, "server_error", NULL, NULL, "out of memory"), -1;
    for (size_t i = 0; i < n; i++) {
        size_t len;
        const char *key = vkg_json_key_at(b, i, &len);
        long long id = 0;
        int digits = len > 0 && len <= 10 && (key[0] != '0' || len == 1);
        for (size_t k = 0; digits && k < len; k++) {
            digits = key[k] >= '0' && key[k] <= '9';
            id = id * 10 + (key[k] - '0');
        }
        if (!digits || id >= m->n_vocab)
            return BAD("logit_bias", "'logit_bias': the key \"%.*s\" is not a token id of this model (0 to %d)",
                       (int)(len < 24 ? len : 24), key, m->n_vocab - 1);
        const vkg_json *v = vkg_json_at(b, i);
        const double x = vkg_json_number(v);
        if (vkg_json_type_of(v) != VKG_JSON_NUMBER || !(x >= -100 && x <= 100))
            return BAD("logit_bias", "'logit_bias' of token %lld must be a number from -100 to 100", id);
        r->bias_ids[r->n_bias] = (int32_t)id;
        r->bias[r->n_bias++] = (float)x;
    }
    return 0;
}

/* The fields both endpoints share: n, sampling, stream, stop.  *max_tokens is -1 when absent;
 * chat takes max_completion_tokens first, OpenAI's newer name. */
static int parse_options(const vkg_json *root, const srv_model_facts *m, int chat, completion_request *r,
                         long long *max_tokens, srv_error *e) {
    long long n = 1, top_k = 0, seed = -1, best_of = 1;
    double temperature = 1, top_p = 1, min_p = 0, presence = 0, frequency = 0, repetition = 1;
    *max_tokens = -1;
    if (get_int(root, "n", 1, 128, &n, e)) return -1;
    if (n != 1) return BAD("n", "'n' is %lld; this server generates one choice per request (n = 1)", n);
    if (!chat && get_int(root, "best_of", 1, 128, &best_of, e)) return -1;
    if (best_of != 1) return BAD("best_of", "'best_of' must be 1 on this server");
    if (refuse_unsupported(root, chat, e) || get_logprobs(root, chat, r, e) || get_logit_bias(root, m, r, e) ||
        (!chat && get_bool(root, "echo", &r->echo, e)))
        return -1;
    const char *max_name = chat && field(root, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
    if (get_int(root, max_name, 0, 1e9, max_tokens, e) || get_number(root, "temperature", 0, 2, &temperature, e) ||
        get_number(root, "top_p", 0, 1, &top_p, e) || get_int(root, "top_k", -1, 1e9, &top_k, e) ||
        get_number(root, "min_p", 0, 1, &min_p, e) || get_int(root, "seed", -9.2e18, 9.2e18, &seed, e) ||
        get_number(root, "presence_penalty", -2, 2, &presence, e) ||
        get_number(root, "frequency_penalty", -2, 2, &frequency, e) ||
        get_number(root, "repetition_penalty", 1e-3, 100, &repetition, e) || get_bool(root, "stream", &r->stream, e))
        return -1;
    long long unused;
    if (strcmp(max_name, "max_tokens") != 0 && get_int(root, "max_tokens", 0, 1e9, &unused, e)) return -1;
    const vkg_json *so = field(root, "stream_options");
    if (so) {
        if (vkg_json_type_of(so) != VKG_JSON_OBJECT) return BAD("stream_options", "'stream_options' must be an object");
        if (!r->stream) return BAD("stream_options", "'stream_options' is only allowed with \"stream\": true");
        if (get_bool(so, "include_usage", &r->include_usage, e)) return -1;
    }
    r->return_tokens = m->tok == NULL;
    r->cache_prompt = 1;
    if (get_bool(root, "return_tokens", &r->return_tokens, e) || get_bool(root, "cache_prompt", &r->cache_prompt, e))
        return -1;
    if (get_stops(root, r, e)) return -1;
    if (r->n_stops && !m->tok) return BAD("stop", "the model has no tokenizer: stop strings cannot be matched");

    vkg_sampling_options_default(&r->sampling);
    r->sampling.temperature = (float)temperature;
    r->sampling.top_k = top_k < 0 ? 0 : (int)top_k;
    r->sampling.top_p = (float)top_p;
    r->sampling.min_p = (float)min_p;
    /* The penalties' window is the whole context, prompt included (llama-server's
     * --repeat-last-n -1); OpenAI counts the generated tokens only. */
    r->sampling.repeat_penalty = (float)repetition;
    r->sampling.presence_penalty = (float)presence;
    r->sampling.frequency_penalty = (float)frequency;
    r->sampling.repeat_last_n = -1;
    /* Without a seed each request draws its own, as OpenAI's sampling differs from call to call. */
    if (seed < 0 && field(root, "seed") == NULL) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        r->sampling.seed = (uint64_t)ts.tv_nsec * 0x9E3779B97F4A7C15ull ^ (uint64_t)ts.tv_sec;
    } else {
        r->sampling.seed = (uint64_t)seed;
    }
    return 0;
}

/* max_tokens against the room the prompt leaves; absent (-1), the default: 16 for completions
 * (OpenAI's), the whole room for chat (as OpenAI and llama-server), each within the context. */
static int fit_max_tokens(const srv_model_facts *m, int chat, long long max_tokens, completion_request *r,
                          srv_error *e) {
    const long long room = m->n_ctx - r->n_ids;
    if (max_tokens < 0) max_tokens = chat || room < 16 ? room : 16;
    if (max_tokens > room)
        return srv_error_set(e, 400, "invalid_request_error", chat ? "max_completion_tokens" : "max_tokens",
                             "context_length_exceeded",
                             "this model's maximum context length is %d tokens; the request asks for %d in the "
                             "prompt and %lld to generate",
                             m->n_ctx, r->n_ids, max_tokens),
               -1;
    r->max_tokens = (int)max_tokens;
    return 0;
}

static int parse_completion(const vkg_json *root, const srv_model_facts *m, completion_request *r, srv_error *e) {
    long long max_tokens;
    if (parse_options(root, m, 0, r, &max_tokens, e) || get_prompt(root, m, r, e)) return -1;
    return fit_max_tokens(m, 0, max_tokens, r, e);
}

static int parse_chat(const vkg_json *root, const srv_model_facts *m, completion_request *r, srv_error *e) {
    long long max_tokens;
    if (parse_options(root, m, 1, r, &max_tokens, e)) return -1;
    size_t n = 0;
    if (srv_chat_prompt(root, m, &r->ids, &n, e) || prompt_fits(m, "messages", n, r, e)) return -1;
    if (n == 0) return BAD("messages", "the chat template rendered no tokens for these messages");
    return fit_max_tokens(m, 1, max_tokens, r, e);
}

typedef int (*body_parser)(const vkg_json *root, const srv_model_facts *m, completion_request *r, srv_error *e);

static int parse_request(body_parser parse, const char *body, size_t len, const srv_model_facts *m,
                         completion_request *out, srv_error *e) {
    memset(out, 0, sizeof *out);
    vkg_json *root = NULL;
    if (parse_body(body, len, &root, e)) return -1;
    int rc = parse(root, m, out, e);
    vkg_json_free(root);
    if (rc) completion_request_free(out);
    return rc;
}

int srv_parse_completion(const char *body, size_t len, const srv_model_facts *m, completion_request *out,
                         srv_error *e) {
    return parse_request(parse_completion, body, len, m, out, e);
}

int srv_parse_chat(const char *body, size_t len, const srv_model_facts *m, completion_request *out, srv_error *e) {
    return parse_request(parse_chat, body, len, m, out, e);
}

int srv_parse_tokenize(const char *body, size_t len, const srv_model_facts *m, int32_t **ids, size_t *n,
                       srv_error *e) {
    *ids = NULL;
    *n = 0;
    vkg_json *root = NULL;
    if (parse_body(body, len, &root, e)) return -1;
    const char *name = field(root, "content") ? "content" : "prompt";
    const vkg_json *v = field(root, name);
    size_t slen;
    const char *s = vkg_json_string(v, &slen);
    int rc = !v ? BAD("content", "'content' (the text to tokenize) is required")
             : !s ? BAD(name, "'%s' must be a string, not %s", name, vkg_json_type_name(vkg_json_type_of(v)))
                  : encode(m, name, s, slen, ids, n, e);
    vkg_json_free(root);
    return rc;
}

int srv_parse_detokenize(const char *body, size_t len, const srv_model_facts *m, int32_t **ids, size_t *n,
                         srv_error *e) {
    *ids = NULL;
    *n = 0;
    vkg_json *root = NULL;
    if (parse_body(body, len, &root, e)) return -1;
    const vkg_json *v = field(root, "tokens");
    int rc = !v ? BAD("tokens", "'tokens' (an array of token ids) is required")
             : vkg_json_type_of(v) != VKG_JSON_ARRAY
                 ? BAD("tokens", "'tokens' must be an array of token ids, not %s", vkg_json_type_name(vkg_json_type_of(v)))
                 : get_ids(v, "tokens", m, ids, n, e);
    if (rc == 0 && !m->tok) rc = BAD("tokens", "the model has no tokenizer");
    if (rc) free(*ids), *ids = NULL, *n = 0;
    vkg_json_free(root);
    return rc;
}
