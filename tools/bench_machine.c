/* What the machine can do, measured in the same run as the figures it is set beside: the FMA
 * peak (what a matmul could reach) and the read bandwidth (what decoding, which reads every
 * weight once per token, could reach); and the process's peak resident memory.
 *
 * Both measurements run one job per thread, as many threads as a model run uses (POSIX threads
 * of their own: the CPU executor's pool is not part of the public API).  They are built for
 * every x86-64 machine: the FMA loops are compiled
 * for AVX-512 and AVX2 through target attributes and chosen from the CPU's features at run time,
 * like any kernel that must not need -march=native. */
#include "bench.h"

#include <pthread.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define BENCH_X86 1
#endif

enum { CHAINS = 12 };            /* independent FMA chains: 2 units x 4-cycle latency, and spare */
#define FMA_SECONDS_MS 150.0     /* each FMA measurement runs about this long                   */
#define READ_PASSES 5

/* n threads, each running fn on its share [i * items / n, (i + 1) * items / n) of the items. */
typedef void (*bench_chunk_fn)(void *ctx, size_t begin, size_t end);

typedef struct bench_pool {
    int threads;
} bench_pool;

typedef struct chunk_arg {
    bench_chunk_fn fn;
    void *ctx;
    size_t begin, end;
} chunk_arg;

static void *run_chunk(void *p) {
    chunk_arg *a = p;
    a->fn(a->ctx, a->begin, a->end);
    return NULL;
}

/* Runs every share at once, the last on the calling thread; 1 when a thread could not start
 * (its share then runs on the calling thread, so the work is still done). */
static int pool_for(const bench_pool *pool, size_t items, bench_chunk_fn fn, void *ctx) {
    enum { MAX_THREADS = 1024 };
    const int n = pool->threads < MAX_THREADS ? pool->threads : MAX_THREADS;
    pthread_t tid[MAX_THREADS];
    chunk_arg args[MAX_THREADS];
    int started[MAX_THREADS], failed = 0;
    for (int i = 0; i < n; i++) {
        args[i] = (chunk_arg){fn, ctx, items * (size_t)i / (size_t)n, items * (size_t)(i + 1) / (size_t)n};
        started[i] = i < n - 1 && pthread_create(&tid[i], NULL, run_chunk, &args[i]) == 0;
        if (!started[i]) failed |= i < n - 1, run_chunk(&args[i]);
    }
    for (int i = 0; i < n; i++)
        if (started[i]) pthread_join(tid[i], NULL);
    return failed;
}

typedef struct fma_job {
    const char *isa;
    long iterations;             /* per thread                                                  */
    atomic_uint_fast64_t sink;   /* keeps the results live                                      */
} fma_job;

/* Each call does CHAINS x lanes x 2 flops per iteration. */
#ifdef BENCH_X86
__attribute__((target("avx512f"))) static float fma_avx512(long iterations) {
    __m512 acc[CHAINS];
    const __m512 mul = _mm512_set1_ps(0.999999f), add = _mm512_set1_ps(1e-6f);
    for (int c = 0; c < CHAINS; c++) acc[c] = _mm512_set1_ps((float)c);
    for (long i = 0; i < iterations; i++)
        for (int c = 0; c < CHAINS; c++) acc[c] = _mm512_fmadd_ps(acc[c], mul, add);
    for (int c = 1; c < CHAINS; c++) acc[0] = _mm512_add_ps(acc[0], acc[c]);
    return _mm512_reduce_add_ps(acc[0]);
}

__attribute__((target("avx2,fma"))) static float fma_avx2(long iterations) {
    __m256 acc[CHAINS];
    const __m256 mul = _mm256_set1_ps(0.999999f), add = _mm256_set1_ps(1e-6f);
    for (int c = 0; c < CHAINS; c++) acc[c] = _mm256_set1_ps((float)c);
    for (long i = 0; i < iterations; i++)
        for (int c = 0; c < CHAINS; c++) acc[c] = _mm256_fmadd_ps(acc[c], mul, add);
    for (int c = 1; c < CHAINS; c++) acc[0] = _mm256_add_ps(acc[0], acc[c]);
    float out[8];
    _mm256_storeu_ps(out, acc[0]);
    return out[0] + out[7];
}
#endif

/* Without FMA: a multiply and an add per element, 4 lanes (SSE, which every x86-64 has; the
 * compiler's own vectors elsewhere). */
static float mul_add_scalar(long iterations) {
    float acc[CHAINS * 4];
    for (int c = 0; c < CHAINS * 4; c++) acc[c] = (float)c;
    for (long i = 0; i < iterations; i++)
        for (int c = 0; c < CHAINS * 4; c++) acc[c] = acc[c] * 0.999999f + 1e-6f;
    float s = 0;
    for (int c = 0; c < CHAINS * 4; c++) s += acc[c];
    return s;
}

static const char *widest_fma(int *lanes) {
#ifdef BENCH_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return *lanes = 16, "avx512f fma";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return *lanes = 8, "avx2 fma";
    return *lanes = 4, "sse";
#else
    return *lanes = 4, "portable C";
#endif
}

static float fma_run(const char *isa, long iterations) {
#ifdef BENCH_X86
    if (!strcmp(isa, "avx512f fma")) return fma_avx512(iterations);
    if (!strcmp(isa, "avx2 fma")) return fma_avx2(iterations);
#endif
    return mul_add_scalar(iterations);
}

static void fma_chunk(void *ctx, size_t begin, size_t end) {
    fma_job *job = ctx;
    float s = 0;
    for (size_t t = begin; t < end; t++) s += fma_run(job->isa, job->iterations);
    atomic_fetch_add(&job->sink, (uint64_t)(s != s));
}

/* Runs fn on every thread at once (chunk i of n = threads is thread i's). */
static double timed_for(const bench_pool *pool, bench_chunk_fn fn, void *ctx) {
    const double t0 = bench_now_ms();
    pool_for(pool, (size_t)pool->threads, fn, ctx);
    return bench_now_ms() - t0;
}

static double measure_fma(const bench_pool *pool, const char *isa, int lanes) {
    fma_job job = {.isa = isa, .iterations = 1000};
    /* Grow the loop until one pass takes a tenth of the target, then scale to the target. */
    double ms = 0;
    while ((ms = timed_for(pool, fma_chunk, &job)) < FMA_SECONDS_MS / 10 && job.iterations < (1L << 40))
        job.iterations *= 4;
    job.iterations = (long)((double)job.iterations * FMA_SECONDS_MS / (ms > 0 ? ms : 1));
    ms = timed_for(pool, fma_chunk, &job);
    const double flops = (double)job.iterations * CHAINS * lanes * 2.0 * pool->threads;
    return flops / (ms * 1e6);
}

enum { READ_BLOCK_WORDS = 512 };  /* 4 KiB: the unit the threads split the buffer into */

typedef struct read_job {
    const uint64_t *data;
    atomic_uint_fast64_t sink;
} read_job;

/* Sums blocks [begin, end): whole-integer adds, which the compiler vectorises for any target. */
static void read_chunk(void *ctx, size_t begin, size_t end) {
    read_job *job = ctx;
    const uint64_t *p = job->data + begin * READ_BLOCK_WORDS, *stop = job->data + end * READ_BLOCK_WORDS;
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (; p < stop; p += 4) s0 += p[0], s1 += p[1], s2 += p[2], s3 += p[3];
    atomic_fetch_add(&job->sink, s0 + s1 + s2 + s3);
}

/* Twice the largest cache (sysconf), at least 256 MiB, at most an eighth of the memory. */
static uint64_t read_buffer_bytes(void) {
    long cache = 0;
#ifdef _SC_LEVEL4_CACHE_SIZE
    long l4 = sysconf(_SC_LEVEL4_CACHE_SIZE);
    if (l4 > cache) cache = l4;
#endif
#ifdef _SC_LEVEL3_CACHE_SIZE
    long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (l3 > cache) cache = l3;
#endif
    uint64_t bytes = 2 * (uint64_t)(cache > 0 ? cache : 0), low = (uint64_t)256 << 20;
    if (bytes < low) bytes = low;
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0 && bytes > (uint64_t)pages * (uint64_t)page / 8) bytes = (uint64_t)pages * (uint64_t)page / 8;
    const uint64_t block = READ_BLOCK_WORDS * sizeof(uint64_t);
    return bytes / block * block;
}

static double measure_read(const bench_pool *pool, uint64_t bytes) {
    uint64_t *data = malloc(bytes);
    if (!data) return 0;
    memset(data, 1, bytes); /* every page touched before timing */
    read_job job = {.data = data};
    const size_t blocks = bytes / (READ_BLOCK_WORDS * sizeof(uint64_t));
    double best = 0;
    for (int pass = 0; pass < READ_PASSES; pass++) {
        const double t0 = bench_now_ms();
        pool_for(pool, blocks, read_chunk, &job);
        const double gbs = (double)bytes / ((bench_now_ms() - t0) * 1e6);
        if (gbs > best) best = gbs;
    }
    free(data);
    return best;
}

/* /proc/cpuinfo's "model name", or "". */
static void cpu_name(char *out, size_t size) {
    out[0] = '\0';
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        const char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) != 0 || !colon) continue;
        snprintf(out, size, "%s", colon + 2 <= line + strlen(line) ? colon + 2 : "");
        out[strcspn(out, "\n")] = '\0';
        break;
    }
    fclose(f);
}

int bench_machine_measure(int threads, bench_machine *m) {
    memset(m, 0, sizeof *m);
    cpu_name(m->cpu, sizeof m->cpu);
    m->load_average = -1;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    m->cores = cores > 0 ? (int)cores : 1;
    m->threads = threads > 0 ? threads : m->cores;
    const bench_pool pool_storage = {.threads = m->threads}, *pool = &pool_storage;
    int lanes = 4;
    m->fma_isa = widest_fma(&lanes);
    m->fma_gflops = measure_fma(pool, m->fma_isa, lanes);
    m->read_bytes = read_buffer_bytes();
    m->read_gbs = measure_read(pool, m->read_bytes);
    return m->read_gbs > 0 ? 0 : 1;
}

double bench_load_average(void) {
    FILE *f = fopen("/proc/loadavg", "r");
    double load = -1;
    if (f && fscanf(f, "%lf", &load) != 1) load = -1;
    if (f) fclose(f);
    return load;
}

/* "VmHWM:   123456 kB" in /proc/self/status. */
uint64_t bench_peak_rss_bytes(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    unsigned long long kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %llu kB", &kb) == 1) break;
    fclose(f);
    return (uint64_t)kb * 1024;
}

int bench_reset_peak_rss(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) return 0;
    const int ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok;
}
