/* A small pool of worker threads for the CPU executor: one parallel-for at a time over [0, n),
 * cut into a few contiguous pieces per thread that the threads (the calling one too) take in
 * turn, so a thread held up by the OS leaves its share to the others.  Which thread runs a piece
 * never changes a result as long as each index writes only its own outputs. */
#ifndef VKG_CPU_THREADPOOL_H
#define VKG_CPU_THREADPOOL_H

#include <stddef.h>

typedef struct vkg_threadpool vkg_threadpool;

/* Computes the work items [begin, end). */
typedef void (*vkg_parallel_fn)(void *ctx, size_t begin, size_t end);

/* threads counts the calling thread: 1 starts no worker.  NULL when threads < 1 or when threads
 * or memory cannot be had. */
vkg_threadpool *vkg_threadpool_new(int threads);
void vkg_threadpool_free(vkg_threadpool *pool);
int vkg_threadpool_threads(const vkg_threadpool *pool);

/* Runs fn over [0, n) and returns when every piece is done: fn is called on contiguous,
 * non-empty, disjoint ranges that cover [0, n), from any of the pool's threads.  Calls from
 * several threads are serialised. */
void vkg_threadpool_for(vkg_threadpool *pool, size_t n, vkg_parallel_fn fn, void *ctx);

#endif
