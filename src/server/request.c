/* Parsing and checking the server's request bodies (request.h), with the project's strict JSON
 * reader. */
#include "server/request.h"

#include "base/json.h"

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
    } else if (vkg_json_type_of(p) == VKG_JSON_ARRAY) {
        if (get_ids(p, "prompt", m, &r->ids, &n, e)) return -1;
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
    if ((long long)n > m->n_ctx)
        return srv_error_set(e, 400, "invalid_request_error", "prompt", "context_length_exceeded",
                             "this model's maximum context length is %d tokens; the prompt has %zu", m->n_ctx, n),
               -1;
    r->n_ids = (int)n;
    return 0;
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
    for (int i = 0; i < r->n_stops; i++) free(r->stops[i]);
    memset(r, 0, sizeof *r);
}

static int parse_completion(const vkg_json *root, const srv_model_facts *m, completion_request *r, srv_error *e) {
    long long n = 1, max_tokens = -1, top_k = 0, seed = -1;
    double temperature = 1, top_p = 1, min_p = 0, presence = 0, frequency = 0, repetition = 1;
    if (get_int(root, "n", 1, 128, &n, e)) return -1;
    if (n != 1) return BAD("n", "'n' is %lld; this server generates one choice per request (n = 1)", n);
    long long best_of = 1;
    if (get_int(root, "best_of", 1, 128, &best_of, e)) return -1;
    if (best_of != 1) return BAD("best_of", "'best_of' must be 1 on this server");
    if (field(root, "logprobs") && vkg_json_type_of(vkg_json_get(root, "logprobs")) != VKG_JSON_NULL)
        return BAD("logprobs", "'logprobs' is not supported by this server");
    if (get_int(root, "max_tokens", 0, 1e9, &max_tokens, e) || get_number(root, "temperature", 0, 2, &temperature, e) ||
        get_number(root, "top_p", 0, 1, &top_p, e) || get_int(root, "top_k", -1, 1e9, &top_k, e) ||
        get_number(root, "min_p", 0, 1, &min_p, e) || get_int(root, "seed", -9.2e18, 9.2e18, &seed, e) ||
        get_number(root, "presence_penalty", -2, 2, &presence, e) ||
        get_number(root, "frequency_penalty", -2, 2, &frequency, e) ||
        get_number(root, "repetition_penalty", 1e-3, 100, &repetition, e) || get_bool(root, "stream", &r->stream, e) ||
        get_bool(root, "echo", &r->echo, e))
        return -1;
    if (r->echo) return BAD("echo", "'echo' is not supported by this server");
    /* The engine's sampler has the multiplicative repetition penalty (repetition_penalty) but not
     * OpenAI's additive presence and frequency penalties: a nonzero one would be silently ignored,
     * so it is refused. */
    if (presence != 0) return BAD("presence_penalty", "'presence_penalty' other than 0 is not supported yet");
    if (frequency != 0) return BAD("frequency_penalty", "'frequency_penalty' other than 0 is not supported yet");
    const vkg_json *so = field(root, "stream_options");
    if (so) {
        if (vkg_json_type_of(so) != VKG_JSON_OBJECT) return BAD("stream_options", "'stream_options' must be an object");
        if (!r->stream) return BAD("stream_options", "'stream_options' is only allowed with \"stream\": true");
        if (get_bool(so, "include_usage", &r->include_usage, e)) return -1;
    }
    if (get_prompt(root, m, r, e) || get_stops(root, r, e)) return -1;
    if (r->n_stops && !m->tok) return BAD("stop", "the model has no tokenizer: stop strings cannot be matched");

    const long long room = m->n_ctx - r->n_ids;
    if (max_tokens < 0) max_tokens = room < 16 ? room : 16; /* OpenAI's default, within the context */
    if (max_tokens > room)
        return srv_error_set(e, 400, "invalid_request_error", "max_tokens", "context_length_exceeded",
                             "this model's maximum context length is %d tokens; the request asks for %d in the "
                             "prompt and %lld to generate",
                             m->n_ctx, r->n_ids, max_tokens),
               -1;
    r->max_tokens = (int)max_tokens;
    vkg_sampling_options_default(&r->sampling);
    r->sampling.temperature = (float)temperature;
    r->sampling.top_k = top_k < 0 ? 0 : (int)top_k;
    r->sampling.top_p = (float)top_p;
    r->sampling.min_p = (float)min_p;
    r->sampling.repeat_penalty = (float)repetition;
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

int srv_parse_completion(const char *body, size_t len, const srv_model_facts *m, completion_request *out,
                         srv_error *e) {
    memset(out, 0, sizeof *out);
    vkg_json *root = NULL;
    if (parse_body(body, len, &root, e)) return -1;
    int rc = parse_completion(root, m, out, e);
    vkg_json_free(root);
    if (rc) completion_request_free(out);
    return rc;
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
