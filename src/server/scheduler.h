/* The server's scheduler: what the HTTP layer asks of the engine.  A request (prompt ids and
 * generation options) is submitted with a sink; the scheduler calls the sink's on_token for each
 * token (from its own threads) and on_done exactly once, after which it never touches the sink
 * again.  cancel() asks a queued or running sequence to end (on_done still comes, with
 * cancelled set).  scheduler_batch.c runs N sequence slots of one batch context (vkg_batch_*),
 * all advanced by one batched step per token, and a bounded queue. */
#ifndef VKG_SERVER_SCHEDULER_H
#define VKG_SERVER_SCHEDULER_H

#include "server/logprobs.h"
#include "vkgraph_model.h"

typedef struct sched sched;
typedef struct sched_job sched_job;

/* What a request asks beyond vkg_generate_options. */
typedef struct sched_extras {
    int logprobs;               /* -1: none; 0 to SRV_MAX_TOP_LOGPROBS: each token's logprob and
                                   that many of the most likely tokens' (srv_logprobs) */
    int prompt_logprobs;        /* with logprobs: the prompt's tokens' too (on_prompt_token) */
    int cache_prompt;           /* the prompt may start from a slot's cache (prompt caching) */
    int n_bias;                 /* logit_bias: bias[i] added to the logit of bias_ids[i] before
                                   the sampler sees them (copied at submission) */
    const int32_t *bias_ids;
    const float *bias;
} sched_extras;

typedef struct sched_sink {
    void *user;
    /* One generated token and the text that can be shown now (vkg_token_callback's text);
     * lp is its logprobs when the request asked for them, else NULL. */
    void (*on_token)(void *user, int32_t id, const char *text, size_t len, const srv_logprobs *lp);
    /* With prompt_logprobs, each prompt token in order before any generated one: lp NULL for the
     * first (nothing predicts it). */
    void (*on_prompt_token)(void *user, int32_t id, const srv_logprobs *lp);
    /* The end: result (generated, reason) and cached (the prompt's tokens found in the slot's
     * cache, not run again) are valid unless cancelled or failed (message set). */
    void (*on_done)(void *user, const vkg_generate_result *result, int cached, int cancelled, const char *failure);
} sched_sink;

typedef struct sched_stats {
    int active, queued;
} sched_stats;

/* n_slots sequences of n_ctx positions each on m (0: the model's context, or the most the device
 * holds: vkg_batch_options), prompts run prefill_chunk tokens a step; at most max_queue requests
 * wait for a slot. */
vkg_status sched_new(vkg_model *m, int n_slots, int n_ctx, int prefill_chunk, int max_queue, sched **out,
                     vkg_error *err);
/* Positions of each slot's cache. */
int sched_n_ctx(const sched *s);
/* Cancels everything, waits for the slots to stop and frees them.  NULL is fine. */
void sched_free(sched *s);
/* opts->prompt, opts->stops and extras' bias (NULL extras: none) are copied.  Returns VKG_OK and a job (released with
 * sched_job_release once the caller is done with it), VKG_ERR_UNSUPPORTED when the queue is
 * full or the scheduler is shutting down, or VKG_ERR_DEVICE_LOST once the device is lost (the
 * sink is then never called). */
vkg_status sched_submit(sched *s, const vkg_generate_options *opts, const sched_extras *extras, const sched_sink *sink,
                        sched_job **out);
void sched_cancel(sched_job *j);
void sched_job_release(sched_job *j);
/* Cancels every job and refuses new ones (the first step of a shutdown). */
void sched_stop(sched *s);
void sched_get_stats(sched *s, sched_stats *out);
/* 1 once a step found the device lost for good (every later request fails; a restart is the
 * cure), with the reason in why[cap]; else 0. */
int sched_device_lost(sched *s, char *why, size_t cap);

#endif
