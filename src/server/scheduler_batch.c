/* The scheduler (scheduler.h) over one batch context (vkg_batch_*): one engine thread runs every
 * sequence of the running requests in one batched decode step per token, so N users cost one
 * read of the weights a step, not N.  Requests wait in one bounded FIFO queue; a free sequence
 * slot takes the next one at the top of a step, its prompt goes through prefill passes of its
 * own, a chunk a step (vkg_batch_options' prefill_chunk, shared by every prompt in the step), so
 * that the sequences decoding meanwhile are held for a chunk, not a whole prompt; it joins the
 * batched steps after its last chunk.  A cancelled request (a client gone) ends and frees its
 * slot before the next step.  A step that finds the device lost for good fails every request it
 * ran; from then on queued requests fail as they reach a slot and new ones are refused
 * (sched_device_lost), since no later step can succeed.
 *
 * Prompt caching: a slot whose request ended keeps its cache (the tokens in `history`).  A
 * queued request takes the free slot whose cache holds the longest prefix of its prompt (copied
 * into a lower empty slot where there is one); a request that finds none takes the lowest free
 * slot, whose cache first moves to the slot used least recently (slot_for, gather_cache): a step
 * runs the plan covering the highest slot stepping (vkgraph_model.h), so a lone request in slot
 * 7 would pay an 8-row step for every token.  Only the rest of the prompt runs (at least its last
 * token, whose logits choose the first new one).  A multi-turn conversation, which sends its
 * whole history each time, runs only its new turn.  The logits then equal a run of the whole
 * prompt's within rounding (a prompt's rows summed over other passes), not bit for bit; a
 * request can ask for a cold run.
 *
 * Each running sequence chooses its tokens as vkg_context_generate does (the same sampler, stop
 * strings and end-of-text handling), so a request's tokens are those of `vkgraph generate`; a
 * request's logit_bias is added to the logits the sampler sees, and its logprobs come from the
 * logits as the model gives them (logprobs.h). */
#include "server/scheduler.h"

#include "base/error.h"
#include "models/sampling.h"
#include "models/stop_strings.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct sched_job {
    int refs;                       /* under sched.lock */
    int cancelled;                  /* under sched.lock */
    sched *owner;
    sched_job *next;                /* in the queue */
    vkg_generate_options opts;
    int32_t *prompt;
    char **stops;
    int logprobs;                   /* sched_extras' */
    int prompt_logprobs;
    int cache_prompt;
    int n_bias;
    int32_t *bias_ids;
    float *bias;
    sched_sink sink;
};

/* A request in a sequence slot of the batch context. */
typedef struct running {
    sched_job *job;                 /* NULL: the slot is free (under sched.lock) */
    vkg_sampler sampler;
    vkg_stop stop;
    int32_t *history;               /* [n_ctx + 1]: the prompt and the tokens chosen (the
                                       penalties' window), the last one not yet in the cache */
    int n_history;
    int n_cached;                   /* while the slot is free: its cache holds history's first
                                       n_cached tokens (prompt caching) */
    unsigned long used_at;          /* ... since the request that ended when s->clock was this */
    int cached;                     /* the request's prompt tokens found in the cache */
    vkg_generate_result res;
} running;

struct sched {
    pthread_mutex_t lock;
    pthread_cond_t work;            /* a job was queued, or stopping */
    sched_job *head, *tail;
    int queued, max_queue, active, stopping;
    unsigned long clock;            /* requests ended in a slot that keeps their cache */
    char lost[sizeof ((vkg_error *)0)->message]; /* why the device is lost for good; "" while it works */
    vkg_model *model;
    const vkg_tokenizer *tok;
    vkg_batch_context *batch;
    running *slots;                 /* [n_slots]: slot i is sequence i of batch */
    int n_slots, n_ctx, n_vocab;
    int32_t stop_ids[16];           /* vkg_model_stop_ids: the ids that end a turn */
    int n_stop;
    float *logits;                  /* [n_vocab]: a sequence's logits as the model gives them */
    float *shaped;                  /* [n_vocab]: the same with a request's logit_bias (or
                                       ignore_eos) applied, for its sampler */
    pthread_t thread;
    int started;
};

static void job_unref(sched_job *j) {
    sched *s = j->owner;
    pthread_mutex_lock(&s->lock);
    int last = --j->refs == 0;
    pthread_mutex_unlock(&s->lock);
    if (!last) return;
    free(j->prompt);
    for (int i = 0; i < j->opts.n_stops; i++) free(j->stops[i]);
    free(j->stops);
    free(j->bias_ids);
    free(j->bias);
    free(j);
}

/* Ends the request of slot i: its sink's on_done; the slot is free at once, its cache kept for a
 * later prompt (what was queued and not run dropped: a request cancelled part-way keeps what it
 * ran), else emptied after a failure. */
static void finish(sched *s, int i, int cancelled, const char *failure) {
    running *r = &s->slots[i];
    sched_job *j = r->job;
    const int length = vkg_batch_seq_length(s->batch, i);
    vkg_batch_seq_watch_prompt(s->batch, i, NULL, NULL, NULL);
    r->n_cached = 0;
    if (failure || r->n_history == 0 || length > r->n_history || vkg_batch_seq_truncate(s->batch, i, length, NULL))
        vkg_batch_seq_remove(s->batch, i, NULL); /* (n_history 0: start() did not get as far) */
    else
        r->n_cached = length, r->used_at = ++s->clock;
    if (!cancelled && !failure && r->res.reason != VKG_STOP_STRING && r->res.reason != VKG_STOP_CALLBACK) {
        /* A stop string that began but never completed is text after all. */
        size_t len = 0;
        const char *rest = vkg_stop_flush(&r->stop, &len);
        if (len) j->sink.on_token(j->sink.user, VKG_NO_TOKEN, rest, len, NULL);
    }
    vkg_sampler_free(&r->sampler); /* both zeroed: a request ended before start() has neither */
    vkg_stop_free(&r->stop);
    pthread_mutex_lock(&s->lock);
    r->job = NULL;
    s->active--;
    pthread_mutex_unlock(&s->lock);
    j->sink.on_done(j->sink.user, &r->res, r->cached, cancelled, failure);
    job_unref(j);
}

/* The tokens a prompt shares with the start of slot i's cache. */
static int common_prefix(const running *r, const sched_job *j) {
    int k = 0;
    while (k < r->n_cached && k < j->opts.n_prompt && r->history[k] == j->prompt[k]) k++;
    return k;
}

/* Whether job j reads and keeps the cache (usage's cached tokens; prompt logprobs need every
 * row, so they run cold). */
static int caching(const sched_job *j) { return j->cache_prompt && !j->prompt_logprobs && j->opts.n_prompt > 0; }

/* The free slot but `skip` whose cache holds a longer prefix of job j's prompt than *k tokens,
 * the longest (*k set to its length); -1 when none does or j does not use the cache. */
static int longest_prefix(const sched *s, const sched_job *j, int skip, int *k) {
    int best = -1;
    for (int t = 0; caching(j) && t < s->n_slots; t++) {
        const int n = t != skip && !s->slots[t].job ? common_prefix(&s->slots[t], j) : 0;
        if (n > *k) best = t, *k = n;
    }
    return best;
}

/* The free slot for job j, -1 when none is free: the one whose cache holds the longest prefix of
 * its prompt, unless a lower slot is empty (gather_cache copies the prefix there); else the
 * lowest free slot, since a step runs the plan covering the highest slot stepping
 * (vkgraph_model.h).  Called under s->lock. */
static int slot_for(const sched *s, const sched_job *j) {
    int lowest = 0, best = 0;
    while (lowest < s->n_slots && s->slots[lowest].job) lowest++;
    if (lowest == s->n_slots) return -1;
    const int src = longest_prefix(s, j, -1, &best);
    return src >= 0 && s->slots[lowest].n_cached ? src : lowest;
}

/* Copies the first n tokens of free slot src's cache into slot dst (the device's copy and the
 * history); 0 on success. */
static int copy_cached(sched *s, int src, int dst, int n) {
    if (vkg_batch_seq_copy(s->batch, src, dst, n, NULL) != VKG_OK) return -1;
    running *to = &s->slots[dst];
    memcpy(to->history, s->slots[src].history, (size_t)n * sizeof *to->history);
    to->n_cached = n;
    to->used_at = s->slots[src].used_at;
    return 0;
}

/* Before job j starts in slot i (slot_for's): the longest prefix of its prompt that another
 * free slot's cache holds is copied in (from a higher slot into an empty one), and a cache slot
 * i holds that the job would overwrite first moves to the free slot used least recently (an
 * empty one first) unless that one's is newer: a new prompt in the lowest slot displaces the
 * oldest cache, not the one it found there.  Looked up again here, since the jobs started
 * before this one in the same round may have moved caches.  A copy that fails costs a cache,
 * never the request. */
static void gather_cache(sched *s, int i, const sched_job *j) {
    running *r = &s->slots[i];
    int best = caching(j) ? common_prefix(r, j) : 0;
    const int src = longest_prefix(s, j, i, &best);
    if (r->n_cached > (src < 0 ? best : 0)) {
        int spare = -1;
        unsigned long spare_at = 0;
        for (int t = 0; t < s->n_slots; t++) {
            const running *u = &s->slots[t];
            const unsigned long at = u->n_cached ? u->used_at : 0;
            if (t != i && t != src && !u->job && (spare < 0 || at < spare_at)) spare = t, spare_at = at;
        }
        if (spare >= 0 && spare_at < r->used_at) copy_cached(s, i, spare, r->n_cached);
    }
    if (src >= 0 && copy_cached(s, src, i, best)) r->n_cached = 0;
}

/* A watched prompt pass of slot seq (vkg_batch_seq_watch_prompt): the row at position p predicts
 * the prompt's token p + 1, whose logprobs go to the sink; the first token, which nothing
 * predicts, goes with the first pass. */
static void prompt_rows(void *user, int seq, int32_t first, int rows, const float *logits) {
    sched *s = user;
    sched_job *j = s->slots[seq].job;
    if (first == 0) j->sink.on_prompt_token(j->sink.user, j->prompt[0], NULL);
    for (int r = 0; r < rows && first + r + 1 < j->opts.n_prompt; r++) {
        srv_logprobs lp;
        const int32_t next = j->prompt[first + r + 1];
        srv_logprobs_of(logits + (size_t)r * (size_t)s->n_vocab, s->n_vocab, next, j->logprobs, &lp);
        j->sink.on_prompt_token(j->sink.user, next, &lp);
    }
}

/* Starts job j in free slot i: checks what vkg_context_generate checks, then queues its prompt
 * in the batch.  Returns 0 when the request ended here (answered). */
static int start(sched *s, int i, sched_job *j) {
    running *r = &s->slots[i];
    const vkg_generate_options *o = &j->opts;
    memset(&r->res, 0, sizeof r->res);
    r->res.stop_index = -1;
    r->n_history = 0;
    r->cached = 0;
    vkg_error err = {0};
    vkg_status st = VKG_OK;
    if (s->lost[0]) /* written by this thread only */
        st = vkg_error_set(&err, VKG_ERR_DEVICE_LOST, "%s", s->lost);
    else if (o->max_tokens < 0)
        st = vkg_error_set(&err, VKG_ERR_INVALID_ARGUMENT, "generate: max_tokens %d; use 0 or more", o->max_tokens);
    else if (o->n_stops && !s->tok)
        st = vkg_error_set(&err, VKG_ERR_INVALID_ARGUMENT, "generate: stop strings match text, and the model has no "
                           "tokenizer");
    else if (o->n_prompt < 1 || o->n_prompt > s->n_ctx)
        st = vkg_error_set(&err, VKG_ERR_INVALID_ARGUMENT, "generate: a prompt of %d tokens; the context holds 1 to %d",
                           o->n_prompt, s->n_ctx);
    for (int k = 0; st == VKG_OK && k < j->n_bias; k++)
        if (j->bias_ids[k] < 0 || j->bias_ids[k] >= s->n_vocab)
            st = vkg_error_set(&err, VKG_ERR_INVALID_ARGUMENT, "generate: logit_bias for token %d, outside the "
                               "vocabulary [0, %d)", (int)j->bias_ids[k], s->n_vocab);
    vkg_status sampler = VKG_ERR_INVALID_ARGUMENT, stop = VKG_ERR_INVALID_ARGUMENT;
    if (st == VKG_OK) st = sampler = vkg_sampler_init(&r->sampler, &o->sampling, s->n_vocab, &err);
    if (st == VKG_OK) st = stop = vkg_stop_init(&r->stop, o->stops, o->n_stops, &err);
    if (st == VKG_OK) { /* the cached prefix stays; the last prompt token runs in any case */
        gather_cache(s, i, j);
        int keep = caching(j) ? common_prefix(r, j) : 0;
        if (keep == o->n_prompt) keep--;
        st = keep ? vkg_batch_seq_truncate(s->batch, i, keep, &err) : vkg_batch_seq_remove(s->batch, i, &err);
        r->cached = st == VKG_OK ? keep : 0;
    }
    r->n_cached = 0;
    if (st == VKG_OK && j->prompt_logprobs) {
        st = vkg_batch_seq_watch_prompt(s->batch, i, prompt_rows, s, &err);
        if (st == VKG_OK && o->n_prompt == 1) prompt_rows(s, i, 0, 0, NULL); /* no pass: the first token alone */
    }
    if (st == VKG_OK) st = vkg_batch_add(s->batch, i, o->prompt + r->cached, o->n_prompt - r->cached, &err);
    if (st == VKG_OK) {
        memcpy(r->history, o->prompt, (size_t)o->n_prompt * sizeof *r->history);
        r->n_history = o->n_prompt;
        return 1;
    }
    if (sampler != VKG_OK) memset(&r->sampler, 0, sizeof r->sampler);
    if (stop != VKG_OK) memset(&r->stop, 0, sizeof r->stop);
    finish(s, i, 0, err.message);
    return 0;
}

/* After a step: slot i's next token chosen from its logits and passed on, as generate_loop
 * does, and queued for the next step; *end set when the request ends here instead. */
static vkg_status next_token(sched *s, int i, int *end, vkg_error *err) {
    running *r = &s->slots[i];
    sched_job *j = r->job;
    const vkg_generate_options *o = &j->opts;
    *end = 1;
    if (o->max_tokens == 0) return VKG_OK;
    vkg_status st = vkg_batch_get_logits(s->batch, i, s->logits, (size_t)s->n_vocab, err);
    if (st != VKG_OK) return st;
    float *logits = s->logits;
    if (o->ignore_eos || j->n_bias) {
        logits = s->shaped;
        memcpy(logits, s->logits, (size_t)s->n_vocab * sizeof *logits);
        for (int k = 0; k < j->n_bias; k++) logits[j->bias_ids[k]] += j->bias[k];
        if (o->ignore_eos) /* as llama.cpp */
            for (int k = 0; k < s->n_stop; k++) logits[s->stop_ids[k]] = -INFINITY;
    }
    int32_t next;
    st = vkg_sampler_next(&r->sampler, logits, r->history, r->n_history, &next, err);
    if (st != VKG_OK) return st;
    for (int k = 0; k < s->n_stop; k++)
        if (next == s->stop_ids[k]) {
            r->res.reason = VKG_STOP_EOS;
            return VKG_OK;
        }
    r->history[r->n_history++] = next;
    r->res.generated++;
    size_t len = 0, ready_len = 0;
    const char *bytes = s->tok ? vkg_tokenizer_token_bytes(s->tok, next, &len) : NULL, *ready = "";
    st = vkg_stop_push(&r->stop, bytes ? bytes : "", len, &ready, &ready_len, err);
    if (st != VKG_OK) return st;
    srv_logprobs lp;
    if (j->logprobs >= 0) srv_logprobs_of(s->logits, s->n_vocab, next, j->logprobs, &lp);
    j->sink.on_token(j->sink.user, next, ready, ready_len, j->logprobs >= 0 ? &lp : NULL);
    if (r->stop.matched >= 0) {
        r->res.reason = VKG_STOP_STRING;
        r->res.stop_index = r->stop.matched;
        return VKG_OK;
    }
    if (r->res.generated == o->max_tokens) return VKG_OK;
    if (r->n_history - 1 >= s->n_ctx) { /* the cache is full: the token just chosen cannot go in */
        r->res.reason = VKG_STOP_CONTEXT_FULL;
        return VKG_OK;
    }
    *end = 0;
    return vkg_batch_add(s->batch, i, &next, 1, err);
}

static void advance(sched *s, int i) {
    vkg_error err = {0};
    int end = 0;
    if (next_token(s, i, &end, &err) != VKG_OK) finish(s, i, 0, err.message);
    else if (end) finish(s, i, 0, NULL);
}

/* The engine: between steps, cancelled requests end and queued ones take the free slots; then
 * one step runs every sequence, and each chooses its next token. */
static void *engine_main(void *arg) {
    sched *s = arg;
    for (;;) {
        sched_job *fresh[VKG_BATCH_MAX_SEQ] = {0};
        int cancelled[VKG_BATCH_MAX_SEQ] = {0}, busy = 0;
        pthread_mutex_lock(&s->lock);
        while (!s->head && !s->active && !s->stopping) pthread_cond_wait(&s->work, &s->lock);
        if (s->stopping && !s->active) {
            pthread_mutex_unlock(&s->lock);
            return NULL;
        }
        for (int i = 0; i < s->n_slots; i++)
            if (s->slots[i].job) cancelled[i] = s->slots[i].job->cancelled || s->stopping;
        while (s->head && !s->stopping) { /* queued requests take the free slots */
            const int i = slot_for(s, s->head);
            if (i < 0) break;
            sched_job *j = s->head;
            s->head = j->next;
            if (!s->head) s->tail = NULL;
            s->queued--;
            s->active++;
            s->slots[i].job = fresh[i] = j;
            cancelled[i] = j->cancelled;
        }
        pthread_mutex_unlock(&s->lock);
        for (int i = 0; i < s->n_slots; i++) {
            if (cancelled[i]) finish(s, i, 1, NULL);
            else if (fresh[i]) busy += start(s, i, fresh[i]);
            else busy += s->slots[i].job != NULL;
        }
        if (!busy) continue;
        vkg_error err = {0};
        vkg_status st = vkg_batch_step(s->batch, &err);
        if (st != VKG_OK) {
            /* a step that fails fails every request in it; the slots are emptied for the next */
            if (st == VKG_ERR_DEVICE_LOST) {
                pthread_mutex_lock(&s->lock);
                snprintf(s->lost, sizeof s->lost, "%s", err.message);
                pthread_mutex_unlock(&s->lock);
            }
            for (int i = 0; i < s->n_slots; i++)
                if (s->slots[i].job) finish(s, i, 0, err.message);
            continue;
        }
        for (int i = 0; i < s->n_slots; i++) /* a prompt with chunks to go chooses nothing yet */
            if (s->slots[i].job && !vkg_batch_seq_queued(s->batch, i)) advance(s, i);
    }
}

vkg_status sched_new(vkg_model *m, int n_slots, int n_ctx, int prefill_chunk, int max_queue, sched **out,
                     vkg_error *err) {
    *out = NULL;
    vkg_model_info info;
    vkg_status st = vkg_model_get_info(m, &info, err);
    if (st != VKG_OK) return st;
    sched *s = calloc(1, sizeof *s);
    if (!s) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->work, NULL);
    s->model = m;
    s->tok = vkg_model_tokenizer(m);
    s->n_slots = n_slots;
    s->max_queue = max_queue;
    s->n_vocab = info.n_vocab;
    s->n_stop = vkg_model_stop_ids(m, s->stop_ids, 16);
    if (s->n_stop > 16) s->n_stop = 16;
    vkg_batch_options bo;
    vkg_batch_options_default(&bo);
    bo.n_seq = n_slots;
    bo.n_ctx = n_ctx;
    bo.prefill_chunk = prefill_chunk;
    st = vkg_batch_context_new(m, &bo, &s->batch, err);
    if (st == VKG_OK) {
        s->n_ctx = vkg_batch_n_ctx(s->batch);
        s->slots = calloc((size_t)n_slots, sizeof *s->slots);
        s->logits = malloc((size_t)s->n_vocab * sizeof *s->logits);
        s->shaped = malloc((size_t)s->n_vocab * sizeof *s->shaped);
        if (!s->slots || !s->logits || !s->shaped) st = vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
    }
    for (int i = 0; st == VKG_OK && i < n_slots; i++)
        if (!(s->slots[i].history = malloc(((size_t)s->n_ctx + 1) * sizeof *s->slots[i].history)))
            st = vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
    if (st == VKG_OK && pthread_create(&s->thread, NULL, engine_main, s) != 0)
        st = vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "could not start the scheduler's thread");
    if (st != VKG_OK) {
        sched_free(s);
        return st;
    }
    s->started = 1;
    *out = s;
    return VKG_OK;
}

void sched_stop(sched *s) {
    pthread_mutex_lock(&s->lock);
    s->stopping = 1;
    for (int i = 0; s->slots && i < s->n_slots; i++)
        if (s->slots[i].job) s->slots[i].job->cancelled = 1;
    sched_job *q = s->head;
    s->head = s->tail = NULL;
    s->queued = 0;
    pthread_cond_broadcast(&s->work);
    pthread_mutex_unlock(&s->lock);
    /* Queued jobs end here, cancelled, so that their clients are answered. */
    while (q) {
        sched_job *next = q->next;
        vkg_generate_result res = {0};
        q->sink.on_done(q->sink.user, &res, 0, 1, NULL);
        job_unref(q);
        q = next;
    }
}

void sched_free(sched *s) {
    if (!s) return;
    sched_stop(s);
    if (s->started) pthread_join(s->thread, NULL);
    for (int i = 0; s->slots && i < s->n_slots; i++) free(s->slots[i].history);
    free(s->slots);
    free(s->logits);
    free(s->shaped);
    vkg_batch_context_free(s->batch);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->work);
    free(s);
}

vkg_status sched_submit(sched *s, const vkg_generate_options *opts, const sched_extras *extras, const sched_sink *sink,
                        sched_job **out) {
    *out = NULL;
    sched_job *j = calloc(1, sizeof *j);
    if (!j) return VKG_ERR_OUT_OF_MEMORY;
    j->owner = s;
    j->opts = *opts;
    j->sink = *sink;
    j->logprobs = extras ? extras->logprobs : -1;
    j->prompt_logprobs = extras && extras->logprobs >= 0 && extras->prompt_logprobs;
    j->cache_prompt = extras && extras->cache_prompt;
    j->n_bias = extras ? extras->n_bias : 0;
    j->prompt = opts->n_prompt ? malloc((size_t)opts->n_prompt * sizeof *j->prompt) : NULL;
    j->stops = opts->n_stops ? calloc((size_t)opts->n_stops, sizeof *j->stops) : NULL;
    j->bias_ids = j->n_bias ? malloc((size_t)j->n_bias * sizeof *j->bias_ids) : NULL;
    j->bias = j->n_bias ? malloc((size_t)j->n_bias * sizeof *j->bias) : NULL;
    int ok = (!opts->n_prompt || j->prompt) && (!opts->n_stops || j->stops) && (!j->n_bias || (j->bias_ids && j->bias));
    if (ok && j->n_bias) {
        memcpy(j->bias_ids, extras->bias_ids, (size_t)j->n_bias * sizeof *j->bias_ids);
        memcpy(j->bias, extras->bias, (size_t)j->n_bias * sizeof *j->bias);
    }
    if (j->prompt) memcpy(j->prompt, opts->prompt, (size_t)opts->n_prompt * sizeof *j->prompt);
    for (int i = 0; ok && i < opts->n_stops; i++) ok = (j->stops[i] = strdup(opts->stops[i])) != NULL;
    j->opts.prompt = j->prompt;
    j->opts.stops = (const char *const *)j->stops;
    j->refs = 2; /* the caller's and the scheduler's */
    if (!ok) {
        j->refs = 1;
        job_unref(j);
        return VKG_ERR_OUT_OF_MEMORY;
    }
    pthread_mutex_lock(&s->lock);
    /* A job may wait when a slot is free (it is about to be taken) or the queue has room. */
    int room = s->queued < (s->n_slots - s->active) + s->max_queue;
    if (s->stopping || !room || s->lost[0]) {
        vkg_status refused = s->lost[0] ? VKG_ERR_DEVICE_LOST : VKG_ERR_UNSUPPORTED;
        pthread_mutex_unlock(&s->lock);
        j->refs = 1;
        job_unref(j);
        return refused;
    }
    if (s->tail) s->tail->next = j;
    else s->head = j;
    s->tail = j;
    s->queued++;
    pthread_cond_signal(&s->work);
    pthread_mutex_unlock(&s->lock);
    *out = j;
    return VKG_OK;
}

void sched_cancel(sched_job *j) {
    sched *s = j->owner;
    pthread_mutex_lock(&s->lock);
    j->cancelled = 1;
    /* A queued job leaves the queue now; its on_done comes from here. */
    sched_job **p = &s->head, *prev = NULL;
    while (*p && *p != j) prev = *p, p = &(*p)->next;
    int was_queued = *p == j;
    if (was_queued) {
        *p = j->next;
        if (s->tail == j) s->tail = prev;
        s->queued--;
    }
    pthread_mutex_unlock(&s->lock);
    if (was_queued) {
        vkg_generate_result res = {0};
        j->sink.on_done(j->sink.user, &res, 0, 1, NULL);
        job_unref(j);
    }
}

void sched_job_release(sched_job *j) {
    if (j) job_unref(j);
}

int sched_n_ctx(const sched *s) { return s->n_ctx; }

void sched_get_stats(sched *s, sched_stats *out) {
    pthread_mutex_lock(&s->lock);
    out->active = s->active;
    out->queued = s->queued;
    pthread_mutex_unlock(&s->lock);
}

int sched_device_lost(sched *s, char *why, size_t cap) {
    pthread_mutex_lock(&s->lock);
    const int lost = s->lost[0] != 0;
    if (lost && cap) snprintf(why, cap, "%s", s->lost);
    pthread_mutex_unlock(&s->lock);
    return lost;
}
