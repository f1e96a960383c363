/* The server's metrics (metrics.h).  Histogram buckets in seconds cover a token from a tenth of
 * a millisecond (a tiny model on a GPU) to tens of seconds (a long prompt on the CPU). */
#include "server/metrics.h"

#include <pthread.h>
#include <stdlib.h>

static const double bounds[] = {0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};
#define N_BOUNDS ((int)(sizeof bounds / sizeof bounds[0]))

typedef struct histogram {
    unsigned long count[N_BOUNDS]; /* per bucket, not cumulative */
    unsigned long total;
    double sum;
} histogram;

struct srv_metrics {
    pthread_mutex_t lock;
    unsigned long requests_ok, requests_client_error, requests_server_error;
    unsigned long prompt_tokens, cached_tokens, generated_tokens;
    histogram ttft, token;
};

srv_metrics *srv_metrics_new(void) {
    srv_metrics *m = calloc(1, sizeof *m);
    if (m) pthread_mutex_init(&m->lock, NULL);
    return m;
}

void srv_metrics_free(srv_metrics *m) {
    if (!m) return;
    pthread_mutex_destroy(&m->lock);
    free(m);
}

void srv_metrics_request(srv_metrics *m, int status) {
    pthread_mutex_lock(&m->lock);
    if (status < 400) m->requests_ok++;
    else if (status < 500) m->requests_client_error++;
    else m->requests_server_error++;
    pthread_mutex_unlock(&m->lock);
}

void srv_metrics_tokens(srv_metrics *m, long prompt, long cached, long generated) {
    pthread_mutex_lock(&m->lock);
    m->prompt_tokens += (unsigned long)prompt;
    m->cached_tokens += (unsigned long)cached;
    m->generated_tokens += (unsigned long)generated;
    pthread_mutex_unlock(&m->lock);
}

static void observe(srv_metrics *m, histogram *h, double x) {
    pthread_mutex_lock(&m->lock);
    int i = 0;
    while (i < N_BOUNDS && x > bounds[i]) i++;
    if (i < N_BOUNDS) h->count[i]++;
    h->total++;
    h->sum += x;
    pthread_mutex_unlock(&m->lock);
}

void srv_metrics_first_token(srv_metrics *m, double s) { observe(m, &m->ttft, s); }
void srv_metrics_token_gap(srv_metrics *m, double s) { observe(m, &m->token, s); }

static void write_histogram(sbuf *o, const char *name, const char *help, const histogram *h) {
    sbuf_printf(o, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    unsigned long cum = 0;
    for (int i = 0; i < N_BOUNDS; i++) {
        cum += h->count[i];
        sbuf_printf(o, "%s_bucket{le=\"%g\"} %lu\n", name, bounds[i], cum);
    }
    sbuf_printf(o, "%s_bucket{le=\"+Inf\"} %lu\n%s_sum %.9g\n%s_count %lu\n", name, h->total, name, h->sum, name,
                h->total);
}

void srv_metrics_write(srv_metrics *m, int active, int queued, int device_lost, sbuf *o) {
    pthread_mutex_lock(&m->lock);
    sbuf_printf(o,
                "# HELP vkgraph_requests_total HTTP requests answered, by class of status.\n"
                "# TYPE vkgraph_requests_total counter\n"
                "vkgraph_requests_total{class=\"ok\"} %lu\n"
                "vkgraph_requests_total{class=\"client_error\"} %lu\n"
                "vkgraph_requests_total{class=\"server_error\"} %lu\n"
                "# HELP vkgraph_prompt_tokens_total Prompt tokens of the completions served.\n"
                "# TYPE vkgraph_prompt_tokens_total counter\n"
                "vkgraph_prompt_tokens_total %lu\n"
                "# HELP vkgraph_prompt_tokens_cached_total Prompt tokens found in a slot's cache (not run again).\n"
                "# TYPE vkgraph_prompt_tokens_cached_total counter\n"
                "vkgraph_prompt_tokens_cached_total %lu\n"
                "# HELP vkgraph_generated_tokens_total Tokens generated.\n"
                "# TYPE vkgraph_generated_tokens_total counter\n"
                "vkgraph_generated_tokens_total %lu\n"
                "# HELP vkgraph_sequences_active Sequences running in a slot.\n"
                "# TYPE vkgraph_sequences_active gauge\n"
                "vkgraph_sequences_active %d\n"
                "# HELP vkgraph_sequences_queued Sequences waiting for a slot.\n"
                "# TYPE vkgraph_sequences_queued gauge\n"
                "vkgraph_sequences_queued %d\n"
                "# HELP vkgraph_device_lost 1 once the device is lost for good (a restart is due).\n"
                "# TYPE vkgraph_device_lost gauge\n"
                "vkgraph_device_lost %d\n",
                m->requests_ok, m->requests_client_error, m->requests_server_error, m->prompt_tokens,
                m->cached_tokens, m->generated_tokens, active, queued, device_lost);
    write_histogram(o, "vkgraph_time_to_first_token_seconds", "From a completion's arrival to its first token.",
                    &m->ttft);
    write_histogram(o, "vkgraph_time_per_output_token_seconds", "Between one generated token and the next.",
                    &m->token);
    pthread_mutex_unlock(&m->lock);
}
