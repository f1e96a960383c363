/* The server's HTTP side on libmicrohttpd: one thread per connection (a streamed completion
 * blocks its thread while it waits for tokens), bodies gathered up to a limit, the API key
 * checked, and each path routed to its endpoint. */
#include "server/response.h"
#include "server/server_internal.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void srv_options_default(srv_options *o) {
    memset(o, 0, sizeof *o);
    o->host = "127.0.0.1";
    o->port = 8080;
    o->parallel = 1;
    o->max_queue = 64;
    vkg_batch_options batch;
    vkg_batch_options_default(&batch);
    o->prefill_chunk = batch.prefill_chunk;
    o->model_name = "vkgraph";
    o->max_body = 1u << 20;
    o->timeout_s = 30;
}

enum MHD_Result srv_reply(srv *s, struct MHD_Connection *c, int status, const char *type, const char *body,
                          size_t len) {
    struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Content-Type", type);
    if (status == 401) MHD_add_response_header(r, "WWW-Authenticate", "Bearer");
    enum MHD_Result ok = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    srv_metrics_request(s->metrics, status);
    return ok;
}

enum MHD_Result srv_reply_error(srv *s, struct MHD_Connection *c, const srv_error *e) {
    sbuf b = {0};
    resp_error(&b, e);
    enum MHD_Result r = b.oom ? MHD_NO : srv_reply(s, c, e->http_status, "application/json", b.data, b.len);
    sbuf_free(&b);
    return r;
}

static enum MHD_Result reply_json(srv *s, struct MHD_Connection *c, sbuf *b) {
    enum MHD_Result r = b->oom ? MHD_NO : srv_reply(s, c, 200, "application/json", b->data, b->len);
    sbuf_free(b);
    return r;
}

/* Equal strings, in a time that depends on their lengths only, not on where they differ. */
static int same_secret(const char *a, size_t na, const char *b, size_t nb) {
    unsigned diff = na != nb;
    for (size_t i = 0; i < na; i++) diff |= (unsigned char)a[i] ^ (unsigned char)(i < nb ? b[i] : 0);
    return diff == 0;
}

static int authorized(srv *s, struct MHD_Connection *c) {
    if (!s->api_key[0]) return 1;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (!h || strncasecmp(h, "Bearer ", 7) != 0) return 0;
    h += 7;
    while (*h == ' ') h++;
    return same_secret(h, strlen(h), s->api_key, strlen(s->api_key));
}

typedef struct upload {
    sbuf body;
    int too_large;
} upload;

static void request_done(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode t) {
    (void)cls, (void)c, (void)t;
    upload *u = *con_cls;
    if (u) {
        sbuf_free(&u->body);
        free(u);
        *con_cls = NULL;
    }
}

static enum MHD_Result tokenize(srv *s, struct MHD_Connection *c, const char *body, size_t len) {
    int32_t *ids;
    size_t n;
    srv_error e;
    if (srv_parse_tokenize(body, len, &s->facts, &ids, &n, &e)) return srv_reply_error(s, c, &e);
    sbuf b = {0};
    sbuf_adds(&b, "{\"tokens\":[");
    for (size_t i = 0; i < n; i++) sbuf_printf(&b, "%s%d", i ? "," : "", (int)ids[i]);
    sbuf_adds(&b, "]}");
    free(ids);
    return reply_json(s, c, &b);
}

static enum MHD_Result detokenize(srv *s, struct MHD_Connection *c, const char *body, size_t len) {
    int32_t *ids;
    size_t n;
    srv_error e;
    if (srv_parse_detokenize(body, len, &s->facts, &ids, &n, &e)) return srv_reply_error(s, c, &e);
    char *text = NULL;
    size_t tlen = 0;
    vkg_error err = {0};
    vkg_status st = vkg_tokenizer_decode(s->facts.tok, ids, n, &text, &tlen, &err);
    free(ids);
    if (st != VKG_OK) {
        srv_error_set(&e, 400, "invalid_request_error", "tokens", NULL, "%s", err.message);
        return srv_reply_error(s, c, &e);
    }
    sbuf b = {0};
    sbuf_adds(&b, "{\"content\":");
    sbuf_json_string(&b, text, tlen);
    sbuf_adds(&b, "}");
    free(text);
    return reply_json(s, c, &b);
}

/* The routes: path and method.  A path ending in '/' takes one more segment: the model's name
 * of /v1/models/{model} (route_matches). */
typedef enum { R_HEALTH, R_METRICS, R_MODELS, R_MODEL, R_COMPLETIONS, R_CHAT, R_TOKENIZE, R_DETOKENIZE } route_id;
static const struct {
    const char *path, *method;
    route_id id;
} routes[] = {
    {"/health", "GET", R_HEALTH},
    {"/metrics", "GET", R_METRICS},
    {"/v1/models", "GET", R_MODELS},
    {"/v1/models/", "GET", R_MODEL},
    {"/v1/completions", "POST", R_COMPLETIONS},
    {"/v1/chat/completions", "POST", R_CHAT},
    {"/tokenize", "POST", R_TOKENIZE},
    {"/detokenize", "POST", R_DETOKENIZE},
};
#define N_ROUTES ((int)(sizeof routes / sizeof routes[0]))

/* url is path, or path ends in '/' and url adds one segment to it (not empty, no '/'). */
static int route_matches(const char *path, const char *url) {
    const size_t n = strlen(path);
    if (path[n - 1] != '/') return strcmp(url, path) == 0;
    return strncmp(url, path, n) == 0 && url[n] && !strchr(url + n, '/');
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                              const char *version, const char *data, size_t *data_size, void **con_cls) {
    (void)version;
    srv *s = cls;
    srv_error e;
    upload *u = *con_cls;
    if (!u) {
        if (!(u = calloc(1, sizeof *u))) return MHD_NO;
        *con_cls = u;
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        if (cl && strtoull(cl, NULL, 10) > s->opts.max_body) u->too_large = 1;
        if (!u->too_large) return MHD_YES;
    }
    if (*data_size) {
        if (u->body.len + *data_size > s->opts.max_body) u->too_large = 1;
        if (!u->too_large) sbuf_add(&u->body, data, *data_size);
        *data_size = 0;
        if (!u->too_large && !u->body.oom) return MHD_YES;
    }
    if (u->too_large || u->body.oom) {
        /* Answered at once; libmicrohttpd closes the connection after it, unread body and all. */
        srv_error_set(&e, 413, "invalid_request_error", NULL, "request_too_large",
                      "the request body is larger than the limit of %zu bytes", s->opts.max_body);
        u->too_large = 0;
        u->body.oom = 0;
        return srv_reply_error(s, c, &e);
    }

    int r = 0;
    while (r < N_ROUTES && !route_matches(routes[r].path, url)) r++;
    if (r == N_ROUTES) {
        srv_error_set(&e, 404, "invalid_request_error", NULL, "not_found", "no endpoint %s %s", method, url);
        return srv_reply_error(s, c, &e);
    }
    if (strcmp(method, routes[r].method) != 0) {
        srv_error_set(&e, 405, "invalid_request_error", NULL, "method_not_allowed", "%s takes %s, not %s", url,
                      routes[r].method, method);
        return srv_reply_error(s, c, &e);
    }
    route_id id = routes[r].id;
    if (id != R_HEALTH && !authorized(s, c)) {
        srv_error_set(&e, 401, "invalid_request_error", NULL, "invalid_api_key",
                      "a valid API key is required: send the header 'Authorization: Bearer KEY'");
        return srv_reply_error(s, c, &e);
    }
    int ready = atomic_load(&s->ready);
    if (!ready && id != R_METRICS) {
        srv_error_set(&e, 503, "server_error", NULL, "loading", "the model is loading");
        return srv_reply_error(s, c, &e);
    }
    const char *body = u->body.data ? u->body.data : "";
    sbuf b = {0};
    switch (id) {
    case R_HEALTH:
        if (srv_device_lost(s, &e)) return srv_reply_error(s, c, &e);
        sbuf_adds(&b, "{\"status\":\"ok\"}");
        return reply_json(s, c, &b);
    case R_METRICS: {
        sched_stats st = {0, 0};
        if (ready) sched_get_stats(s->sched, &st);
        const int lost = ready && sched_device_lost(s->sched, NULL, 0);
        srv_metrics_write(s->metrics, st.active, st.queued, lost, &b);
        enum MHD_Result res = b.oom ? MHD_NO : srv_reply(s, c, 200, "text/plain; version=0.0.4", b.data, b.len);
        sbuf_free(&b);
        return res;
    }
    case R_MODELS:
        resp_models(&b, s->model_name, s->started);
        return reply_json(s, c, &b);
    case R_MODEL: {
        const char *name = url + strlen(routes[r].path);
        if (strcmp(name, s->model_name) != 0) {
            srv_error_set(&e, 404, "invalid_request_error", "model", "model_not_found",
                          "the model '%.200s' does not exist: this server serves '%s'", name, s->model_name);
            return srv_reply_error(s, c, &e);
        }
        resp_model(&b, s->model_name, s->started);
        return reply_json(s, c, &b);
    }
    case R_COMPLETIONS:
        return srv_completion(s, c, body, u->body.len, 0);
    case R_CHAT:
        return srv_completion(s, c, body, u->body.len, 1);
    case R_TOKENIZE:
        return tokenize(s, c, body, u->body.len);
    case R_DETOKENIZE:
        return detokenize(s, c, body, u->body.len);
    }
    return MHD_NO;
}

int srv_device_lost(srv *s, srv_error *e) {
    char why[sizeof ((vkg_error *)0)->message];
    if (!sched_device_lost(s->sched, why, sizeof why)) return 0;
    srv_error_set(e, 503, "server_error", NULL, "device_lost", "the device is lost (%s): restart the server", why);
    return 1;
}

vkg_status srv_start(const srv_options *o, srv **out, vkg_error *err) {
    *out = NULL;
    srv *s = calloc(1, sizeof *s);
    if (!s || !(s->metrics = srv_metrics_new())) {
        free(s);
        snprintf(err->message, sizeof err->message, "out of memory");
        return err->status = VKG_ERR_OUT_OF_MEMORY;
    }
    s->opts = *o;
    snprintf(s->host, sizeof s->host, "%s", o->host);
    snprintf(s->model_name, sizeof s->model_name, "%s", o->model_name);
    snprintf(s->api_key, sizeof s->api_key, "%s", o->api_key ? o->api_key : "");
    s->opts.host = s->host;
    s->opts.model_name = s->model_name;
    s->opts.api_key = NULL;
    snprintf(s->model_dir, sizeof s->model_dir, "%s", o->model_dir ? o->model_dir : "");
    s->opts.model_dir = s->model_dir[0] ? s->model_dir : NULL;
    s->started = (long)time(NULL);
    atomic_init(&s->ready, 0);
    atomic_init(&s->next_id, 1);
    atomic_init(&s->open_streams, 0);

    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)o->port);
    if (inet_pton(AF_INET, o->host, &addr.sin_addr) != 1) {
        srv_metrics_free(s->metrics);
        free(s);
        snprintf(err->message, sizeof err->message, "--host %s is not an IPv4 address (such as 127.0.0.1 or 0.0.0.0)",
                 o->host);
        return err->status = VKG_ERR_INVALID_ARGUMENT;
    }
    s->daemon = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_ITC |
                                     MHD_USE_ERROR_LOG,
                                 0, NULL, NULL, handle, s, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
                                 MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)o->timeout_s,
                                 MHD_OPTION_CONNECTION_LIMIT, (unsigned int)256, MHD_OPTION_NOTIFY_COMPLETED,
                                 request_done, s, MHD_OPTION_END);
    if (!s->daemon) {
        srv_metrics_free(s->metrics);
        free(s);
        snprintf(err->message, sizeof err->message, "could not listen on %s:%d (in use, or not an address of this "
                 "machine)", o->host, o->port);
        return err->status = VKG_ERR_IO;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
    s->port = di ? di->port : o->port;
    *out = s;
    return VKG_OK;
}

int srv_n_ctx(const srv *s) { return s->facts.n_ctx; }

int srv_port(const srv *s) { return s->port; }

const char *srv_chat_unavailable(const srv *s) { return s->chat ? NULL : s->chat_missing; }

/* The chat template of tokenizer_config.json beside the model.  Without one (or with one this
 * server cannot run) the server still serves completions; chat requests get a 400 saying why. */
static void load_chat_template(srv *s) {
    vkg_error err = {0};
    if (!s->opts.model_dir) {
        snprintf(s->chat_missing, sizeof s->chat_missing, "no model folder was given");
        return;
    }
    if (vkg_chat_template_load(s->opts.model_dir, &s->chat, &err) != VKG_OK) {
        snprintf(s->chat_missing, sizeof s->chat_missing, "%s", err.message);
        s->chat = NULL;
        return;
    }
    s->facts.chat = s->chat;
}

vkg_status srv_set_model(srv *s, vkg_model *m, vkg_error *err) {
    vkg_model_info info;
    vkg_status st = vkg_model_get_info(m, &info, err);
    if (st != VKG_OK) return st;
    /* 0: the model's context, or the most the device holds */
    const int n_ctx = s->opts.ctx_size > 0 && s->opts.ctx_size < info.n_ctx ? s->opts.ctx_size : 0;
    st = sched_new(m, s->opts.parallel, n_ctx, s->opts.prefill_chunk, s->opts.max_queue, &s->sched, err);
    if (st != VKG_OK) return st;
    s->facts.tok = vkg_model_tokenizer(m);
    s->facts.n_ctx = sched_n_ctx(s->sched);
    s->facts.n_vocab = info.n_vocab;
    s->facts.bos = info.bos_token;
    s->facts.eos = info.eos_token;
    load_chat_template(s);
    atomic_store(&s->ready, 1);
    return VKG_OK;
}

void srv_stop(srv *s) {
    if (!s) return;
    /* Stop accepting, end every sequence (their clients get their answers), then close. */
    MHD_socket listen = MHD_quiesce_daemon(s->daemon);
    if (s->sched) sched_stop(s->sched);
    /* The cancelled completions end at their next token: a short grace lets each client get its
     * last event and [DONE] before the connections close. */
    for (int i = 0; i < 300 && atomic_load(&s->open_streams) > 0; i++) usleep(10000);
    MHD_stop_daemon(s->daemon);
    if (listen != MHD_INVALID_SOCKET) close(listen);
    sched_free(s->sched);
    vkg_chat_template_free(s->chat);
    srv_metrics_free(s->metrics);
    free(s);
}
