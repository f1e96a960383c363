/* The server's counters and latency histograms, written as Prometheus text at /metrics. */
#ifndef VKG_SERVER_METRICS_H
#define VKG_SERVER_METRICS_H

#include "server/sbuf.h"

typedef struct srv_metrics srv_metrics;

srv_metrics *srv_metrics_new(void);
void srv_metrics_free(srv_metrics *m);
void srv_metrics_request(srv_metrics *m, int http_status);
void srv_metrics_tokens(srv_metrics *m, long prompt, long cached, long generated);
void srv_metrics_first_token(srv_metrics *m, double seconds);
void srv_metrics_token_gap(srv_metrics *m, double seconds);
/* active and queued are the scheduler's gauges at the time of the scrape. */
void srv_metrics_write(srv_metrics *m, int active, int queued, int device_lost, sbuf *out);

#endif
