/* The CPU executor: one host buffer per plan region, and a run that walks the plan's steps in
 * order, calling the C kernel of each step's family on its bindings, spread over a thread pool.
 * Constants are read straight from the caller's memory (never copied, never written). */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <unistd.h>

#include "runtime/backend.h"
#include "base/error.h"
#include "base/half.h"
#include "cpu/cpu_check.h"
#include "cpu/kernels.h"
#include "cpu/threadpool.h"

enum {
    REGION_ALIGN = 64,           /* bytes; a cache line, and enough for any vector load      */
    MAX_THREADS = 1024,
    PARALLEL_MIN_WORK = 1 << 15, /* below this many element operations a step runs inline:
                                    waking the workers would cost more than it saves       */
    CHUNK_STATE_MAX = 1 << 24    /* floats of chunk states an attention step may use (64 MiB) */
};

typedef struct cpu_session {
    const vkg_plan *plan;
    vkg_threadpool *pool;
    unsigned char **region_base;            /* one per region                               */
    char *owned;                            /* per region: mapped here, unmapped at the end */
    void *(*bind)[VKG_MAX_BINDINGS];        /* per step: each binding's first byte, or NULL */
    float *chunk_state;                     /* attention's chunk states (run_attention_chunks) */
    size_t chunk_state_floats;
} cpu_session;

/* ---- running one step ---------------------------------------------------------------------- */

typedef struct step_job {
    const vkg_step *step;
    void *const *bind;
} step_job;

/* Per family (graph/kernels.def): <name>_range runs its C kernel over a range of work units with
 * the step's first n_bindings binding pointers, in slot order. */
#define BIND_ARGS_1(b) b[0]
#define BIND_ARGS_2(b) BIND_ARGS_1(b), b[1]
#define BIND_ARGS_3(b) BIND_ARGS_2(b), b[2]
#define BIND_ARGS_4(b) BIND_ARGS_3(b), b[3]
#define BIND_ARGS_5(b) BIND_ARGS_4(b), b[4]
#define BIND_ARGS_6(b) BIND_ARGS_5(b), b[5]
#define VKG_KERNEL(ENUM, name, n_bindings, units, cost, ...)                                 \
    static void name##_range(void *ctx, size_t begin, size_t end) {                          \
        const step_job *j = ctx;                                                             \
        vkg_cpu_##name(&j->step->params.name, BIND_ARGS_##n_bindings(j->bind), begin, end); \
    }
#include "graph/kernels.def"

/* The step's work units, the function that computes a range of them, and a rough count of
 * element operations per unit (to decide whether threads are worth waking). */
static void step_work(const vkg_step *s, size_t *units, double *unit_cost, vkg_parallel_fn *fn) {
    switch (s->kernel) {
#define VKG_KERNEL(ENUM, name, n_bindings, units_of_p, cost_of_p, ...) \
    case VKG_KERNEL_##ENUM: {                                          \
        const vkg_##name##_params *p = &s->params.name;                \
        *units = units_of_p;                                           \
        *unit_cost = cost_of_p;                                        \
        *fn = name##_range;                                            \
        return;                                                        \
    }
#include "graph/kernels.def"
    case VKG_KERNEL_COUNT: break;
    }
    *units = 0; /* the plan check refused every other kernel id */
    *unit_cost = 0;
    *fn = NULL;
}

/* An attention step whose units do not share out evenly over the threads (a decode step: a unit
 * per key/value head, 3 of them in SmolLM2's on 2 threads, 8 in Llama-3.2-1B's on 16) leaves
 * threads idle for part of it, over a long cache most of its time; its units' keys are split
 * into chunks spread over the threads instead, then folded (vkg_cpu_attention_chunk, _merge:
 * the same bits).  Chunks cost a little more than one walk (each restarts the memory's
 * streams: Qwen2.5-0.5B's 2 units split on 2 threads were 5% slower, PERFORMANCE.md), so a
 * step splits only where the busiest thread's share of whole units, ceil(units / threads),
 * exceeds the even share by a quarter.  Returns 0 where the step runs whole: units that share
 * out, one chunk, or no memory for the states (the same bits either way). */
static int worth_chunks(size_t units, size_t threads) {
    return threads > 1 && units > 0 && 4 * threads * ((units + threads - 1) / threads) > 5 * units;
}

typedef struct chunk_job {
    const vkg_attention_params *p;
    void *const *bind;
    float *state;
} chunk_job;

static void chunk_range(void *ctx, size_t begin, size_t end) {
    const chunk_job *j = ctx;
    vkg_cpu_attention_chunk(j->p, j->bind[0], j->bind[1], j->bind[2], j->bind[3], j->bind[4], j->state, begin, end);
}

static int run_attention_chunks(cpu_session *ses, const vkg_attention_params *p, void *const *bind) {
    const size_t units = vkg_cpu_attention_units(p), threads = (size_t)vkg_threadpool_threads(ses->pool);
    if (!worth_chunks(units, threads)) return 0;
    const size_t chunks = vkg_cpu_attention_chunks(p, bind[4]);
    if (chunks < 2) return 0;
    const size_t floats = vkg_cpu_attention_state_floats(p, chunks);
    if (floats > CHUNK_STATE_MAX) return 0;
    if (floats > ses->chunk_state_floats) {
        float *grown = realloc(ses->chunk_state, floats * sizeof *grown);
        if (!grown) return 0;
        ses->chunk_state = grown, ses->chunk_state_floats = floats;
    }
    chunk_job job = {p, bind, ses->chunk_state};
    vkg_threadpool_for(ses->pool, chunks * units, chunk_range, &job);
    vkg_cpu_attention_merge(p, bind[0], bind[1], bind[2], bind[3], bind[4], chunks, ses->chunk_state, 0, units);
    return 1;
}

static void run_step(cpu_session *ses, const vkg_step *s, void *const *bind) {
    if (s->kernel == VKG_KERNEL_ATTENTION && run_attention_chunks(ses, &s->params.attention, bind)) return;
    vkg_threadpool *pool = ses->pool;
    step_job job = {s, bind};
    size_t units;
    double unit_cost;
    vkg_parallel_fn fn;
    step_work(s, &units, &unit_cost, &fn);
    if (units == 0) return;
    if (units == 1 || (double)units * unit_cost < PARALLEL_MIN_WORK)
        fn(&job, 0, units);
    else
        vkg_threadpool_for(pool, units, fn, &job);
}

/* ---- sessions ------------------------------------------------------------------------------ */

/* A region's allocation: at least one byte, rounded to REGION_ALIGN. */
static uint64_t region_bytes(const vkg_region *region) {
    uint64_t bytes = region->bytes ? region->bytes : 1;
    if (bytes > UINT64_MAX - REGION_ALIGN) return UINT64_MAX;
    return (bytes + REGION_ALIGN - 1) / REGION_ALIGN * REGION_ALIGN;
}

static void cpu_session_free(void *session) {
    cpu_session *s = session;
    if (!s) return;
    if (s->region_base && s->owned)
        for (int r = 0; r < s->plan->n_regions; r++)
            if (s->owned[r] && s->region_base[r]) munmap(s->region_base[r], (size_t)region_bytes(&s->plan->regions[r]));
    free(s->region_base);
    free(s->owned);
    free(s->bind);
    free(s->chunk_state);
    free(s);
}

static vkg_status cpu_session_new(void *device, const vkg_plan *p, void *share, const int *share_map, void **out,
                                  vkg_error *err) {
    *out = NULL;
    vkg_status st = vkg_cpu_check_plan(p, err);
    if (st != VKG_OK) return st;

    cpu_session *s = calloc(1, sizeof *s);
    if (!s) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory creating a CPU session");
    s->plan = p;
    s->pool = device;
    s->region_base = calloc((size_t)p->n_regions + 1, sizeof *s->region_base);
    s->bind = calloc((size_t)p->n_steps + 1, sizeof *s->bind);
    s->owned = calloc((size_t)p->n_regions + 1, 1);
    if (!s->region_base || !s->bind || !s->owned) {
        cpu_session_free(s);
        return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory creating a CPU session");
    }

    /* The whole session's need, summed and checked before the first region is allocated: a
     * config of thousands of layers and a million positions must be refused, not allocated
     * region by region until memory runs out. */
    uint64_t need = 0, states = 0;
    for (int r = 0; r < p->n_regions; r++)
        if ((p->regions[r].kind != VKG_REGION_CONSTANT || vkg_region_widens(&p->regions[r])) &&
            !(share && share_map[r] >= 0)) {
            uint64_t bytes = region_bytes(&p->regions[r]);
            need = need > UINT64_MAX - bytes ? UINT64_MAX : need + bytes;
            if (p->regions[r].kind == VKG_REGION_STATE) states = states > UINT64_MAX - bytes ? UINT64_MAX : states + bytes;
        }
    const uint64_t have = vkg_host_memory_bytes();
    if (need > have || need > SIZE_MAX) {
        cpu_session_free(s);
        return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY,
                             "the CPU session needs %.1f GiB (%.1f GiB of states such as a KV cache; the rest "
                             "arena, inputs and outputs; %d regions) but this machine has %.1f GiB of memory",
                             (double)need / 1073741824.0, (double)states / 1073741824.0, p->n_regions,
                             (double)have / 1073741824.0);
    }

    for (int r = 0; r < p->n_regions; r++) {
        const vkg_region *region = &p->regions[r];
        if (region->kind == VKG_REGION_CONSTANT && !vkg_region_widens(region)) {
            /* Borrowed; no step writes it (checked) and write() refuses it. */
            s->region_base[r] = (unsigned char *)region->host;
            continue;
        }
        if (share && share_map[r] >= 0) {
            s->region_base[r] = ((const cpu_session *)share)->region_base[share_map[r]];
            continue;
        }
        /* Anonymous pages are zero and cost nothing until touched: a KV cache sized for the
         * whole context but filled a few positions at a time stays small (malloc + memset
         * touched every page at once).  Page-aligned, more than REGION_ALIGN. */
        void *m = mmap(NULL, (size_t)region_bytes(region), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        s->region_base[r] = m == MAP_FAILED ? NULL : m;
#ifdef MADV_HUGEPAGE
        /* The arena, inputs and outputs are written whole by every run: in huge pages where the
         * kernel has them (a hint), the first run takes 512 times fewer page faults, which cost
         * microseconds each (a quarter of a first 1024-token prefill of Qwen3's shapes on a
         * virtual machine).  Not states: a cache's rows are touched a few positions at a time,
         * in one run of memory per head, and a huge page per head would commit far more than
         * the positions used. */
        if (m != MAP_FAILED && region->kind != VKG_REGION_STATE)
            (void)madvise(m, (size_t)region_bytes(region), MADV_HUGEPAGE);
#endif
        if (!s->region_base[r]) {
            cpu_session_free(s);
            return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY,
                                 "out of memory: region %d needs %llu bytes", r,
                                 (unsigned long long)region->bytes);
        }
        s->owned[r] = 1;
        if (vkg_region_widens(region)) { /* a plan compiled with read_16bit 0: f32 copies of the weights */
            const uint16_t *h = region->host;
            float *f = (float *)s->region_base[r];
            for (uint64_t i = 0; i < region->bytes / 4; i++)
                f[i] = region->host_dtype == VKG_F16 ? vkg_f16_to_f32(h[i]) : vkg_bf16_to_f32(h[i]);
        }
    }

    for (int i = 0; i < p->n_steps; i++)
        for (int slot = 0; slot < VKG_MAX_BINDINGS; slot++) {
            const vkg_binding *b = &p->steps[i].bind[slot];
            unsigned char *base = b->region < 0 ? NULL : s->region_base[b->region];
            s->bind[i][slot] = base ? base + b->offset : NULL; /* NULL: an empty constant */
        }
    *out = s;
    return VKG_OK;
}

/* region, [offset, offset + bytes) inside it, or an error naming what was asked. */
static vkg_status check_range(const cpu_session *s, int region, uint64_t offset, size_t bytes,
                              const char *what, vkg_error *err) {
    const vkg_plan *p = s->plan;
    if (region < 0 || region >= p->n_regions)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "%s region %d: the plan has %d regions",
                             what, region, p->n_regions);
    uint64_t size = p->regions[region].bytes;
    if (offset > size || bytes > size - offset)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT,
                             "%s bytes [%llu, %llu) of region %d, which holds %llu bytes", what,
                             (unsigned long long)offset, (unsigned long long)(offset + bytes), region,
                             (unsigned long long)size);
    return VKG_OK;
}

static vkg_status cpu_write(void *session, int region, uint64_t offset, const void *data,
                            size_t bytes, vkg_error *err) {
    cpu_session *s = session;
    vkg_status st = check_range(s, region, offset, bytes, "cannot write", err);
    if (st != VKG_OK) return st;
    if (s->plan->regions[region].kind == VKG_REGION_CONSTANT)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT,
                             "cannot write region %d: it is a constant (the caller's own memory)", region);
    if (bytes == 0) return VKG_OK;
    if (!data) return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "cannot write region %d from NULL", region);
    memcpy(s->region_base[region] + offset, data, bytes);
    return VKG_OK;
}

static vkg_status cpu_read(void *session, int region, uint64_t offset, void *data, size_t bytes,
                           vkg_error *err) {
    cpu_session *s = session;
    vkg_status st = check_range(s, region, offset, bytes, data ? "cannot read" : "cannot zero", err);
    if (st != VKG_OK) return st;
    if (bytes == 0) return VKG_OK;
    if (data) {
        memcpy(data, s->region_base[region] + offset, bytes);
        return VKG_OK;
    }
    if (s->plan->regions[region].kind == VKG_REGION_CONSTANT)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "cannot zero region %d: it is a constant", region);
    memset(s->region_base[region] + offset, 0, bytes);
    return VKG_OK;
}

static vkg_status cpu_copy(void *session, int src, uint64_t src_offset, int dst, uint64_t dst_offset,
                           uint64_t stride, uint32_t count, uint64_t bytes, vkg_error *err) {
    cpu_session *s = session;
    const uint64_t span = count ? (uint64_t)(count - 1) * stride + bytes : 0;
    vkg_status st = check_range(s, src, src_offset, span, "cannot copy from", err);
    if (st == VKG_OK) st = check_range(s, dst, dst_offset, span, "cannot copy into", err);
    if (st == VKG_OK && s->plan->regions[dst].kind == VKG_REGION_CONSTANT)
        st = vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "cannot copy into region %d: it is a constant", dst);
    for (uint32_t i = 0; st == VKG_OK && i < count; i++)
        memcpy(s->region_base[dst] + dst_offset + i * stride, s->region_base[src] + src_offset + i * stride, bytes);
    return st;
}

static vkg_status run_range(cpu_session *s, int first, int count, vkg_step_times *times, vkg_error *err) {
    const vkg_plan *p = s->plan;
    for (int i = first; i < first + count; i++) {
        const vkg_step *step = &p->steps[i];
        void *const *bind = s->bind[i];
        if (step->kernel == VKG_KERNEL_UNARY && step->params.unary.dyn_index != VKG_NO_INDEX) {
            vkg_status st = vkg_cpu_check_runtime_index(p, i, bind[2], err);
            if (st != VKG_OK) return st;
        }
        if (step->kernel == VKG_KERNEL_ROPE && step->params.rope.cache_index != VKG_NO_INDEX) {
            vkg_status st = vkg_cpu_check_runtime_index(p, i, bind[3], err);
            if (st != VKG_OK) return st;
        }
        if (times) times->begin_ns[i] = vkg_clock_ns();
        run_step(s, step, bind);
        if (times) times->end_ns[i] = vkg_clock_ns();
    }
    return VKG_OK;
}

static vkg_status cpu_run(void *session, vkg_step_times *times, vkg_error *err) {
    cpu_session *s = session;
    if (times) times->clock = "CPU steps timed by the host clock (CLOCK_MONOTONIC)";
    return run_range(s, 0, s->plan->n_steps, times, err);
}

static vkg_status cpu_run_steps(void *session, int first, int count, vkg_error *err) {
    return run_range(session, first, count, NULL, err);
}

/* ---- the device ---------------------------------------------------------------------------- */

static void cpu_device_free(void *device) { vkg_threadpool_free(device); }

static const vkg_backend_ops cpu_ops = {
    .name = "cpu",
    .session_new = cpu_session_new,
    .session_free = cpu_session_free,
    .write = cpu_write,
    .read = cpu_read,
    .copy = cpu_copy,
    .run = cpu_run,
    .run_steps = cpu_run_steps,
    .device_free = cpu_device_free,
};

vkg_status vkg_cpu_device_open(struct vkg_device *d, vkg_error *err) {
    int threads = d->opts.cpu_threads;
    if (threads < 0 || threads > MAX_THREADS)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT,
                             "cpu_threads is %d: use 0 (one per core) to %d", threads, MAX_THREADS);
    if (threads == 0) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        threads = cores < 1 ? 1 : cores > MAX_THREADS ? MAX_THREADS : (int)cores;
    }
    vkg_threadpool *pool = vkg_threadpool_new(threads);
    if (!pool)
        return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "cannot start %d CPU worker threads", threads);
    d->ops = &cpu_ops;
    d->impl = pool;
    snprintf(d->name, sizeof d->name, "CPU (%d thread%s, %s)", threads, threads == 1 ? "" : "s", vkg_cpu_isa());
    d->alignment = 16;
    d->max_binding_bytes = 0;
    d->read_16bit = 1;
    /* The matmul's dot-product path (a weight's k contiguous, [N, K]) streams a decode step's
     * weights at the memory's pace, where [K, N] rows read 4 at a time across pages fall behind
     * it on machines with fast memory: GPT-2 124M f16 decode 1.4-1.6x faster (PERFORMANCE.md). */
    d->transposed_weights = 1;
    return VKG_OK;
}
