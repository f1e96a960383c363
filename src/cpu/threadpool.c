/* The pool: a job is posted by bumping a generation number; workers notice it, run their chunk,
 * and count themselves out.  A model runs hundreds of short steps per token, so both sides first
 * poll the atomics for a short while (a wake-up through a condition variable costs tens of
 * microseconds) and only then sleep.  Each poll yields the core, so polling costs little when
 * the machine has more runnable threads than cores. */
#include "cpu/threadpool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

enum { POLLS = 200 }; /* polls (each a sched_yield) before sleeping */

struct vkg_threadpool {
    int threads;                     /* including the calling thread                       */
    pthread_t *workers;              /* threads - 1 of them; worker i runs chunk i + 1      */
    pthread_mutex_t run_lock;        /* one parallel-for at a time                         */
    pthread_mutex_t lock;            /* pairs with the condition variables                 */
    pthread_cond_t wake;             /* a job was posted, or shutdown                      */
    pthread_cond_t done;             /* the last worker finished its chunk                 */
    atomic_uint_fast64_t generation; /* bumped (after the job fields are set) per job      */
    atomic_int pending;              /* workers still running the current job              */
    atomic_int shutdown;
    size_t n;                        /* the current job; written before generation moves   */
    vkg_parallel_fn fn;
    void *ctx;
};

typedef struct worker_arg {
    vkg_threadpool *pool;
    int index;                       /* chunk number this worker runs */
} worker_arg;

static void run_chunk(size_t n, int chunk, int chunks, vkg_parallel_fn fn, void *ctx) {
    size_t begin = n * (size_t)chunk / (size_t)chunks;
    size_t end = n * (size_t)(chunk + 1) / (size_t)chunks;
    if (begin < end) fn(ctx, begin, end);
}

/* Waits until the generation differs from seen or the pool shuts down; returns the generation. */
static uint64_t wait_for_job(vkg_threadpool *pool, uint64_t seen) {
    for (int i = 0; i < POLLS; i++) {
        uint64_t g = atomic_load_explicit(&pool->generation, memory_order_acquire);
        if (g != seen || atomic_load(&pool->shutdown)) return g;
        sched_yield();
    }
    pthread_mutex_lock(&pool->lock);
    while (atomic_load(&pool->generation) == seen && !atomic_load(&pool->shutdown))
        pthread_cond_wait(&pool->wake, &pool->lock);
    pthread_mutex_unlock(&pool->lock);
    return atomic_load(&pool->generation);
}

static void *worker_main(void *arg) {
    worker_arg self = *(worker_arg *)arg;
    free(arg);
    vkg_threadpool *pool = self.pool;
    uint64_t seen = 0;
    for (;;) {
        seen = wait_for_job(pool, seen);
        if (atomic_load(&pool->shutdown)) break;
        run_chunk(pool->n, self.index, pool->threads, pool->fn, pool->ctx);
        if (atomic_fetch_sub(&pool->pending, 1) == 1) {
            /* Taking the lock orders this signal after the caller's check-then-wait. */
            pthread_mutex_lock(&pool->lock);
            pthread_cond_signal(&pool->done);
            pthread_mutex_unlock(&pool->lock);
        }
    }
    return NULL;
}

/* Stops and joins the first `started` workers. */
static void stop_workers(vkg_threadpool *pool, int started) {
    pthread_mutex_lock(&pool->lock);
    atomic_store(&pool->shutdown, 1);
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->lock);
    for (int i = 0; i < started; i++) pthread_join(pool->workers[i], NULL);
}

static void destroy_sync(vkg_threadpool *pool) {
    pthread_cond_destroy(&pool->done);
    pthread_cond_destroy(&pool->wake);
    pthread_mutex_destroy(&pool->lock);
    pthread_mutex_destroy(&pool->run_lock);
}

vkg_threadpool *vkg_threadpool_new(int threads) {
    if (threads < 1) return NULL;
    vkg_threadpool *pool = calloc(1, sizeof *pool);
    if (!pool) return NULL;
    pool->threads = threads;
    if (threads > 1) {
        pool->workers = calloc((size_t)threads - 1, sizeof *pool->workers);
        if (!pool->workers) {
            free(pool);
            return NULL;
        }
    }
    atomic_init(&pool->generation, 0);
    atomic_init(&pool->pending, 0);
    atomic_init(&pool->shutdown, 0);
    pthread_mutex_init(&pool->run_lock, NULL);
    pthread_mutex_init(&pool->lock, NULL);
    pthread_cond_init(&pool->wake, NULL);
    pthread_cond_init(&pool->done, NULL);
    for (int i = 0; i < threads - 1; i++) {
        worker_arg *arg = malloc(sizeof *arg);
        if (arg) {
            arg->pool = pool;
            arg->index = i + 1;
        }
        if (!arg || pthread_create(&pool->workers[i], NULL, worker_main, arg) != 0) {
            free(arg);
            stop_workers(pool, i);
            destroy_sync(pool);
            free(pool->workers);
            free(pool);
            return NULL;
        }
    }
    return pool;
}

void vkg_threadpool_free(vkg_threadpool *pool) {
    if (!pool) return;
    stop_workers(pool, pool->threads - 1);
    destroy_sync(pool);
    free(pool->workers);
    free(pool);
}

int vkg_threadpool_threads(const vkg_threadpool *pool) { return pool->threads; }

void vkg_threadpool_for(vkg_threadpool *pool, size_t n, vkg_parallel_fn fn, void *ctx) {
    if (n == 0) return;
    if (pool->threads == 1) {
        fn(ctx, 0, n);
        return;
    }
    pthread_mutex_lock(&pool->run_lock);
    pool->n = n;
    pool->fn = fn;
    pool->ctx = ctx;
    atomic_store(&pool->pending, pool->threads - 1);
    /* Under the lock, so a worker between its check and its wait cannot miss the wake-up. */
    pthread_mutex_lock(&pool->lock);
    atomic_fetch_add_explicit(&pool->generation, 1, memory_order_release);
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->lock);

    run_chunk(n, 0, pool->threads, fn, ctx);

    for (int i = 0; i < POLLS && atomic_load(&pool->pending) > 0; i++) sched_yield();
    if (atomic_load(&pool->pending) > 0) {
        pthread_mutex_lock(&pool->lock);
        while (atomic_load(&pool->pending) > 0) pthread_cond_wait(&pool->done, &pool->lock);
        pthread_mutex_unlock(&pool->lock);
    }
    pthread_mutex_unlock(&pool->run_lock);
}
