/* What the server's HTTP glue (http.c) and its completion endpoint (completion.c) share. */
#ifndef VKG_SERVER_INTERNAL_H
#define VKG_SERVER_INTERNAL_H

#include "server/metrics.h"
#include "server/request.h"
#include "server/scheduler.h"
#include "server/server.h"

#include <microhttpd.h>
#include <stdatomic.h>

struct srv {
    srv_options opts;
    char host[256], model_name[256], api_key[512], model_dir[4096];
    struct MHD_Daemon *daemon;
    int port;
    atomic_int ready;           /* the model and the slots are set */
    long started;               /* time(), for /v1/models' "created" */
    sched *sched;
    srv_model_facts facts;
    vkg_chat_template *chat;    /* the model's chat template, NULL when it has none */
    char chat_missing[512];     /* why there is none */
    srv_metrics *metrics;
    atomic_ulong next_id;
    atomic_int open_streams;    /* completions not yet answered in full */
};

/* Queues body with the status (and the JSON content type) and counts it in the metrics. */
enum MHD_Result srv_reply(srv *s, struct MHD_Connection *c, int status, const char *type, const char *body,
                          size_t len);
enum MHD_Result srv_reply_error(srv *s, struct MHD_Connection *c, const srv_error *e);
/* Once the device is lost for good (sched_device_lost), every request and /health answer 503
 * with code device_lost: returns 1 with e set, else 0. */
int srv_device_lost(srv *s, srv_error *e);

/* POST /v1/completions (chat 0) or /v1/chat/completions (chat 1) with its whole body. */
enum MHD_Result srv_completion(srv *s, struct MHD_Connection *c, const char *body, size_t len, int chat);

#endif
