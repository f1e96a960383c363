/* `vkgraph bench`: figures, never verdicts.  cmd_bench.c reads the options and runs one of
 *   bench_ops.c     matmul and transformer-block micro-benchmarks, the CPU beside a Vulkan device;
 *   bench_model.c   a GPT-2 model: a forward pass at each prompt length, and decoding with the
 *                   KV cache;
 * with bench_machine.c measuring the machine they ran on (FMA peak, read bandwidth, peak memory)
 * and bench_report.c printing a model's figures as a table or as one JSON object. */
#ifndef VKG_TOOLS_BENCH_H
#define VKG_TOOLS_BENCH_H

#include "vkgraph_model.h"
#include "vkgraph.h"

#include <stdint.h>

#define BENCH_MAX_T 16

typedef struct bench_options {
    const char *ops;             /* "matmul", "block" or "all": the micro-benchmarks; NULL: a model */
    const char *model_dir;       /* -m DIR                                                        */
    const char *random_size;     /* --random NAME (vkg_gpt2_random_size)                          */
    const char *device;          /* --device; NULL: the best device                               */
    vkg_weight_dtype dtype;      /* --dtype: the weight matrices' dtype (default: as stored)     */
    const char *logits_dir;      /* --logits DIR: the logits computed, as .npy files              */
    int tokens[BENCH_MAX_T];     /* -T: prompt lengths of the forward passes                      */
    int n_tokens;
    int decode;                  /* --decode N: tokens decoded after the prompt                   */
    long threads;                /* CPU executor threads; 0: every core                          */
    long repeat;                 /* timed runs per figure                                        */
    int json;
    char **argv;                 /* the command line, echoed in the report                       */
    int argc;
} bench_options;

/* Milliseconds on a monotonic clock. */
double bench_now_ms(void); /* vkg_clock_seconds in ms */
/* The median of x[0..n) (sorted in place); NaN when n is 0. */
double bench_median(double *x, int n);

int bench_ops(const bench_options *o);

/* ---- the machine -------------------------------------------------------------------------- */

/* bench_machine.c finds the widest FMA from the CPU's features itself (__builtin_cpu_supports). */

typedef struct bench_machine {
    char cpu[128];               /* the CPU's model name, "" when unknown                       */
    double load_average;         /* the 1-minute load average when the benchmark began; -1:
                                    unknown (other work on the machine skews every figure)      */
    int cores;                   /* online processors                                           */
    int threads;                 /* the threads the figures below were measured with           */
    const char *fma_isa;         /* the widest FMA the CPU has: "avx512f fma", "avx2 fma", or
                                    "sse" (none: separate multiplies and adds, 4 wide)          */
    double fma_gflops;           /* measured: FMA loop over independent registers, all threads */
    double read_gbs;             /* measured: a streaming read of read_bytes, all threads, best
                                    of several passes                                           */
    uint64_t read_bytes;
} bench_machine;

/* Measures the FMA peak and the read bandwidth with `threads` threads (0: every core). */
int bench_machine_measure(int threads, bench_machine *m);
/* /proc/loadavg's 1-minute figure; -1 when unknown. */
double bench_load_average(void);
/* The process's peak resident memory (VmHWM) in bytes; 0 when unknown. */
uint64_t bench_peak_rss_bytes(void);
/* Restarts the VmHWM count from the current resident size (Linux's /proc/self/clear_refs):
 * 1 when done. */
int bench_reset_peak_rss(void);

/* ---- a model ------------------------------------------------------------------------------ */

typedef struct bench_forward {
    int tokens;                  /* T                                                           */
    double compile_ms;           /* vkg_context_new: build, compile, open the session (weights
                                    uploaded)                                                   */
    double median_ms, min_ms;    /* run + read the [T, V] logits                                */
    int runs;
    double matmul_gflop;         /* 2 x the multiply-adds of the plan's matmul steps            */
    double matmul_ms;            /* their time in one profiled run; NaN when not recorded        */
    vkg_memory_stats memory;     /* the plan's arena against naive and lower bound              */
} bench_forward;

typedef struct bench_decode {
    int prompt, steps;           /* prompt tokens, then tokens decoded one at a time            */
    double compile_ms;           /* the prefill and decode plans and sessions: vkg_context_new
                                    (the prefill's), then the first one-token feed, which
                                    compiles the decode plan (and runs it once)                 */
    double prefill_ms;
    double total_ms;             /* the steps, each: run, read the logits, argmax               */
    double median_token_ms;
    uint64_t weight_bytes;       /* the decode plan's constants: what each step reads            */
    vkg_memory_stats memory;
    int32_t *ids;                /* steps + 1: the prefill's prediction, then each step's        */
} bench_decode;

typedef struct bench_model_result {
    vkg_model_info info;         /* the model: its shape and parameter count                  */
    const char *name;            /* the folder, or the size's name with --random               */
    int random_weights;
    const char *dtype;
    char device[256];
    int cpu;                     /* the device is the CPU executor                              */
    double load_ms;
    int32_t *prompt;             /* the ids of the longest forward; every run takes a prefix     */
    int prompt_len;
    bench_forward forward[BENCH_MAX_T];
    int n_forward;
    bench_decode decode;         /* steps == 0: not run                                         */
    uint64_t peak_host_bytes;    /* VmHWM after the runs                                        */
    int peak_host_includes_setup;/* it could not be reset after writing the random model        */
    uint64_t peak_device_bytes;  /* Vulkan memory at most; 0 on the CPU                         */
    bench_machine machine;
} bench_model_result;

int bench_model(const bench_options *o);

void bench_report_text(const bench_options *o, const bench_model_result *r);
void bench_report_json(const bench_options *o, const bench_model_result *r);

#endif
