/* `vkgraph serve`: an OpenAI-compatible HTTP server over the scheduler (docs/SERVER.md).
 *
 * The server listens first and loads after (GET /health answers 503 while the model loads):
 *   srv_start(&opts, &srv, &err);   listening, "loading"
 *   srv_set_model(srv, model, &err); slots made, "ready"
 *   ... until a signal ...
 *   srv_stop(srv);                  stops accepting, cancels what runs, answers, frees */
#ifndef VKG_SERVER_SERVER_H
#define VKG_SERVER_SERVER_H

#include "vkgraph_model.h"

#include <stddef.h>

typedef struct srv_options {
    const char *host;           /* address to listen on (default 127.0.0.1)            */
    int port;                   /* 0: any free port (srv_port says which)              */
    int parallel;               /* slots: sequences generated at once                  */
    int ctx_size;               /* positions of each slot's KV cache; 0: the model's   */
    int max_queue;              /* requests that may wait for a slot beyond the slots  */
    int prefill_chunk;          /* prompt tokens run a step (vkg_batch_options)         */
    const char *api_key;        /* NULL: no authentication                             */
    const char *model_name;     /* the id /v1/models lists                             */
    const char *model_dir;      /* its tokenizer_config.json holds the chat template   */
    size_t max_body;            /* bytes of a request body                             */
    unsigned timeout_s;         /* an idle connection is closed after this             */
} srv_options;

void srv_options_default(srv_options *o);

typedef struct srv srv;

vkg_status srv_start(const srv_options *o, srv **out, vkg_error *err);
int srv_port(const srv *s);
/* m stays the caller's; free it after srv_stop. */
vkg_status srv_set_model(srv *s, vkg_model *m, vkg_error *err);
/* After srv_set_model: positions of each slot's cache (--ctx-size, else the model's context or
 * the most the device holds). */
int srv_n_ctx(const srv *s);
/* After srv_set_model: NULL when chat completions are served, else why not (no template). */
const char *srv_chat_unavailable(const srv *s);
void srv_stop(srv *s); /* NULL is fine */

#endif
