/* A small pool of worker threads for the CPU executor: one parallel-for at a time over [0, n),
 * cut into one contiguous chunk per thread (the calling thread runs the first chunk).  Which
 * thread runs a chunk never changes a result as long as each index writes only its own outputs. */
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

/* Runs fn over [0, n) and returns when every chunk is done.  Chunk t of T is
 * [n*t/T, n*(t+1)/T); empty chunks are skipped.  Calls from several threads are serialised. */
void vkg_threadpool_for(vkg_threadpool *pool, size_t n, vkg_parallel_fn fn, void *ctx);

#endif
