/* The pool: workers sleep on a condition variable until a new job (a new generation number)
 * is posted, run their chunk, and the last one to finish wakes the caller. */
#include "cpu/threadpool.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

struct vkg_threadpool {
    int threads;                /* including the calling thread                 */
    pthread_t *workers;         /* threads - 1 of them; worker i runs chunk i+1  */
    pthread_mutex_t run_lock;   /* one parallel-for at a time                   */
    pthread_mutex_t lock;       /* guards everything below                      */
    pthread_cond_t wake;        /* a job was posted, or shutdown                */
    pthread_cond_t done;        /* the last worker finished its chunk           */
    uint64_t generation;        /* bumped for every job                         */
    int pending;                /* workers still running the current job        */
    int shutdown;
    size_t n;                   /* the current job                              */
    vkg_parallel_fn fn;
    void *ctx;
};

typedef struct worker_arg {
    vkg_threadpool *pool;
    int index;                  /* chunk number this worker runs */
} worker_arg;

static void run_chunk(size_t n, int chunk, int chunks, vkg_parallel_fn fn, void *ctx) {
    size_t begin = n * (size_t)chunk / (size_t)chunks;
    size_t end = n * (size_t)(chunk + 1) / (size_t)chunks;
    if (begin < end) fn(ctx, begin, end);
}

static void *worker_main(void *arg) {
    worker_arg self = *(worker_arg *)arg;
    free(arg);
    vkg_threadpool *pool = self.pool;
    uint64_t seen = 0;
    pthread_mutex_lock(&pool->lock);
    for (;;) {
        while (pool->generation == seen && !pool->shutdown) pthread_cond_wait(&pool->wake, &pool->lock);
        if (pool->shutdown) break;
        seen = pool->generation;
        size_t n = pool->n;
        vkg_parallel_fn fn = pool->fn;
        void *ctx = pool->ctx;
        pthread_mutex_unlock(&pool->lock);

        run_chunk(n, self.index, pool->threads, fn, ctx);

        pthread_mutex_lock(&pool->lock);
        if (--pool->pending == 0) pthread_cond_signal(&pool->done);
    }
    pthread_mutex_unlock(&pool->lock);
    return NULL;
}

/* Stops and joins the first `started` workers. */
static void stop_workers(vkg_threadpool *pool, int started) {
    pthread_mutex_lock(&pool->lock);
    pool->shutdown = 1;
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
    pthread_mutex_lock(&pool->lock);
    pool->n = n;
    pool->fn = fn;
    pool->ctx = ctx;
    pool->pending = pool->threads - 1;
    pool->generation++;
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->lock);

    run_chunk(n, 0, pool->threads, fn, ctx);

    pthread_mutex_lock(&pool->lock);
    while (pool->pending > 0) pthread_cond_wait(&pool->done, &pool->lock);
    pthread_mutex_unlock(&pool->lock);
    pthread_mutex_unlock(&pool->run_lock);
}
