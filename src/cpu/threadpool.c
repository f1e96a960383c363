/* The pool: a job is posted by bumping a generation number; workers notice it, take pieces of
 * [0, n) from a shared counter until none is left, and count themselves out.  Pieces, not one
 * fixed chunk per thread: on a machine shared with other threads (a server's connections, its
 * clients) a thread the OS preempts mid-job would otherwise hold up the whole job by as long as
 * it waits for its core, while here the others take over its remaining pieces.
 * A model runs hundreds of short steps per token, so both sides first poll the atomics for a
 * short while (a wake-up through a condition variable costs tens of microseconds) and only then
 * sleep.  Each poll yields the core, so polling costs little when the machine has more runnable
 * threads than cores. */
#include "cpu/threadpool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

enum {
    POLLS = 200,          /* polls (each a sched_yield) before sleeping                         */
    PIECES_PER_THREAD = 4 /* a job's pieces: enough to even out a preempted thread, few enough
                             that taking them (an atomic on a shared cache line) costs nothing */
};

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
    atomic_size_t next;              /* the current job's first index not yet taken         */
    size_t n, piece;                 /* the current job; written before generation moves   */
    vkg_parallel_fn fn;
    void *ctx;
};

/* Runs pieces of the current job until every index is taken. */
static void run_pieces(vkg_threadpool *pool) {
    const size_t n = pool->n, piece = pool->piece;
    for (;;) {
        const size_t begin = atomic_fetch_add_explicit(&pool->next, piece, memory_order_relaxed);
        if (begin >= n) return;
        pool->fn(pool->ctx, begin, n - begin < piece ? n : begin + piece);
    }
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
    vkg_threadpool *pool = arg;
    uint64_t seen = 0;
    for (;;) {
        seen = wait_for_job(pool, seen);
        if (atomic_load(&pool->shutdown)) break;
        run_pieces(pool);
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
    atomic_init(&pool->next, 0);
    pthread_mutex_init(&pool->run_lock, NULL);
    pthread_mutex_init(&pool->lock, NULL);
    pthread_cond_init(&pool->wake, NULL);
    pthread_cond_init(&pool->done, NULL);
    for (int i = 0; i < threads - 1; i++) {
        if (pthread_create(&pool->workers[i], NULL, worker_main, pool) != 0) {
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
    const size_t pieces = (size_t)pool->threads * PIECES_PER_THREAD;
    pool->n = n;
    pool->piece = n / pieces + (n % pieces != 0);
    pool->fn = fn;
    pool->ctx = ctx;
    atomic_store_explicit(&pool->next, 0, memory_order_relaxed);
    atomic_store(&pool->pending, pool->threads - 1);
    /* Under the lock, so a worker between its check and its wait cannot miss the wake-up. */
    pthread_mutex_lock(&pool->lock);
    atomic_fetch_add_explicit(&pool->generation, 1, memory_order_release);
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->lock);

    run_pieces(pool);

    for (int i = 0; i < POLLS && atomic_load(&pool->pending) > 0; i++) sched_yield();
    if (atomic_load(&pool->pending) > 0) {
        pthread_mutex_lock(&pool->lock);
        while (atomic_load(&pool->pending) > 0) pthread_cond_wait(&pool->done, &pool->lock);
        pthread_mutex_unlock(&pool->lock);
    }
    pthread_mutex_unlock(&pool->run_lock);
}
