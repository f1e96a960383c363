/* The scheduler (scheduler.h) as N slots, each a thread with a context (its own KV cache), fed
 * from one bounded FIFO queue.
 *
 * The slots share one device.  Whether a device may run two plans from two threads at once is
 * not promised by the library, so a slot holds the device lock while it computes and gives it
 * up between tokens (in the token callback): the slots' sequences advance token by token in
 * turn.  The lock is a ticket lock so that the turns are fair (a plain mutex lets the thread that
 * just released it take it again). */
#include "server/scheduler.h"

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
    sched_sink sink;
};

typedef struct slot {
    sched *s;
    int index;
    pthread_t thread;
    int started;
    vkg_context *ctx;
    sched_job *job;                 /* running, under sched.lock */
} slot;

struct sched {
    pthread_mutex_t lock;
    pthread_cond_t work;            /* a job was queued, or stopping */
    sched_job *head, *tail;
    int queued, max_queue, active, stopping;
    slot *slots;
    int n_slots;
    /* the device's ticket lock */
    pthread_mutex_t dev_lock;
    pthread_cond_t dev_turn;
    unsigned long next_ticket, serving;
};

static void device_acquire(sched *s) {
    pthread_mutex_lock(&s->dev_lock);
    unsigned long mine = s->next_ticket++;
    while (s->serving != mine) pthread_cond_wait(&s->dev_turn, &s->dev_lock);
    pthread_mutex_unlock(&s->dev_lock);
}

static void device_release(sched *s) {
    pthread_mutex_lock(&s->dev_lock);
    s->serving++;
    pthread_cond_broadcast(&s->dev_turn);
    pthread_mutex_unlock(&s->dev_lock);
}

static void job_unref(sched_job *j) {
    sched *s = j->owner;
    pthread_mutex_lock(&s->lock);
    int last = --j->refs == 0;
    pthread_mutex_unlock(&s->lock);
    if (!last) return;
    free(j->prompt);
    for (int i = 0; i < j->opts.n_stops; i++) free(j->stops[i]);
    free(j->stops);
    free(j);
}

typedef struct run_state {
    slot *sl;
    sched_job *job;
} run_state;

static int on_token(void *user, int32_t id, const char *text, size_t len) {
    run_state *r = user;
    sched *s = r->sl->s;
    r->job->sink.on_token(r->job->sink.user, id, text, len);
    /* Between tokens: the others' turn on the device. */
    device_release(s);
    device_acquire(s);
    pthread_mutex_lock(&s->lock);
    int stop = r->job->cancelled;
    pthread_mutex_unlock(&s->lock);
    return stop;
}

static void *slot_main(void *arg) {
    slot *sl = arg;
    sched *s = sl->s;
    for (;;) {
        pthread_mutex_lock(&s->lock);
        while (!s->head && !s->stopping) pthread_cond_wait(&s->work, &s->lock);
        if (s->stopping) {
            pthread_mutex_unlock(&s->lock);
            return NULL;
        }
        sched_job *j = s->head;
        s->head = j->next;
        if (!s->head) s->tail = NULL;
        s->queued--;
        s->active++;
        sl->job = j;
        int cancelled = j->cancelled;
        pthread_mutex_unlock(&s->lock);

        vkg_generate_result res = {0};
        vkg_error err = {0};
        vkg_status st = VKG_OK;
        if (!cancelled) {
            run_state r = {sl, j};
            device_acquire(s);
            st = vkg_context_reset(sl->ctx, &err);
            if (st == VKG_OK) st = vkg_context_generate(sl->ctx, &j->opts, on_token, &r, &res, &err);
            device_release(s);
        }
        pthread_mutex_lock(&s->lock);
        cancelled = j->cancelled;
        sl->job = NULL;
        s->active--;
        pthread_mutex_unlock(&s->lock);
        j->sink.on_done(j->sink.user, &res, cancelled || res.reason == VKG_STOP_CALLBACK,
                        st == VKG_OK ? NULL : err.message);
        job_unref(j);
    }
}

vkg_status sched_new(vkg_model *m, int n_slots, int n_ctx, int max_queue, sched **out, vkg_error *err) {
    *out = NULL;
    sched *s = calloc(1, sizeof *s);
    slot *slots = calloc((size_t)n_slots, sizeof *slots);
    if (!s || !slots) {
        free(s);
        free(slots);
        snprintf(err->message, sizeof err->message, "out of memory");
        return err->status = VKG_ERR_OUT_OF_MEMORY;
    }
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->work, NULL);
    pthread_mutex_init(&s->dev_lock, NULL);
    pthread_cond_init(&s->dev_turn, NULL);
    s->slots = slots;
    s->n_slots = n_slots;
    s->max_queue = max_queue;
    vkg_context_options co;
    vkg_context_options_default(&co);
    co.n_ctx = n_ctx;
    for (int i = 0; i < n_slots; i++) {
        slots[i].s = s;
        slots[i].index = i;
        vkg_status st = vkg_context_new(m, &co, &slots[i].ctx, err);
        if (st != VKG_OK) {
            sched_free(s);
            return st;
        }
    }
    for (int i = 0; i < n_slots; i++) {
        if (pthread_create(&slots[i].thread, NULL, slot_main, &slots[i]) != 0) {
            sched_free(s);
            snprintf(err->message, sizeof err->message, "could not start the slots' threads");
            return err->status = VKG_ERR_OUT_OF_MEMORY;
        }
        slots[i].started = 1;
    }
    *out = s;
    return VKG_OK;
}

void sched_stop(sched *s) {
    pthread_mutex_lock(&s->lock);
    s->stopping = 1;
    for (int i = 0; i < s->n_slots; i++)
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
        q->sink.on_done(q->sink.user, &res, 1, NULL);
        job_unref(q);
        q = next;
    }
}

void sched_free(sched *s) {
    if (!s) return;
    sched_stop(s);
    for (int i = 0; i < s->n_slots; i++)
        if (s->slots[i].started) pthread_join(s->slots[i].thread, NULL);
    for (int i = 0; i < s->n_slots; i++) vkg_context_free(s->slots[i].ctx);
    free(s->slots);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->work);
    pthread_mutex_destroy(&s->dev_lock);
    pthread_cond_destroy(&s->dev_turn);
    free(s);
}

vkg_status sched_submit(sched *s, const vkg_generate_options *opts, const sched_sink *sink, sched_job **out) {
    *out = NULL;
    sched_job *j = calloc(1, sizeof *j);
    if (!j) return VKG_ERR_OUT_OF_MEMORY;
    j->owner = s;
    j->opts = *opts;
    j->sink = *sink;
    j->prompt = opts->n_prompt ? malloc((size_t)opts->n_prompt * sizeof *j->prompt) : NULL;
    j->stops = opts->n_stops ? calloc((size_t)opts->n_stops, sizeof *j->stops) : NULL;
    int ok = (!opts->n_prompt || j->prompt) && (!opts->n_stops || j->stops);
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
    if (s->stopping || !room) {
        pthread_mutex_unlock(&s->lock);
        j->refs = 1;
        job_unref(j);
        return VKG_ERR_UNSUPPORTED;
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
        j->sink.on_done(j->sink.user, &res, 1, NULL);
        job_unref(j);
    }
}

void sched_job_release(sched_job *j) {
    if (j) job_unref(j);
}

void sched_get_stats(sched *s, sched_stats *out) {
    pthread_mutex_lock(&s->lock);
    out->active = s->active;
    out->queued = s->queued;
    pthread_mutex_unlock(&s->lock);
}
