/* `vkgraph bench matmul|block|all`: matmul throughput at GPT-2's shapes and a transformer block's
 * forward time, on the CPU executor and on a Vulkan device side by side. */
#include "bench.h"
#include "cli.h"
#include "vkgraph_lesson.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What one benchmark runs: a graph with a single f32 input. */
typedef struct bench_case {
    char name[64];
    vkg_graph *g;
    vkg_tensor input;
    float *input_data;
    size_t input_bytes;
    float *weights;             /* constants the graph borrows */
    vkg_block_weights block;
    int has_block;
} bench_case;

static void bench_case_free(bench_case *b) {
    vkg_graph_free(b->g);
    free(b->input_data);
    free(b->weights);
    if (b->has_block) vkg_block_weights_free(&b->block);
    memset(b, 0, sizeof *b);
}

static int bench_input(bench_case *b, vkg_rng *rng, int ndim, const int64_t *shape) {
    size_t n = 1;
    for (int i = 0; i < ndim; i++) n *= (size_t)shape[i];
    b->input_bytes = n * sizeof(float);
    b->input_data = malloc(b->input_bytes);
    if (!b->input_data) return 1;
    vkg_rng_fill_normal(rng, b->input_data, n, 1.0f);
    b->input = vkg_input(b->g, "x", VKG_F32, ndim, shape);
    return 0;
}

/* x [M, K] @ w [K, N], as GPT-2's Conv1D weights are stored; transposed: x @ w^T with w [N, K]
 * (k contiguous), as GPT-2's LM head reads the token embedding. */
static int make_matmul(bench_case *b, vkg_rng *rng, int64_t m, int64_t k, int64_t n, int transposed) {
    snprintf(b->name, sizeof b->name, "matmul %lldx%lldx%lld%s", (long long)m, (long long)k, (long long)n,
             transposed ? " (B^T)" : "");
    b->g = vkg_graph_new();
    b->weights = malloc((size_t)(k * n) * sizeof(float));
    if (!b->g || !b->weights || bench_input(b, rng, 2, (const int64_t[]){m, k})) return 1;
    vkg_rng_fill_normal(rng, b->weights, (size_t)(k * n), 0.02f);
    const int64_t shape[2] = {transposed ? n : k, transposed ? k : n};
    vkg_tensor w = vkg_constant(b->g, "w", VKG_F32, 2, shape, b->weights);
    return vkg_output(b->g, "y", vkg_matmul(b->g, b->input, w, VKG_NONE, transposed ? VKG_TRANSPOSE_B : 0)) != VKG_OK;
}

static int make_block(bench_case *b, vkg_rng *rng, int64_t batch, int64_t t, int c, int heads, const char *what) {
    vkg_block_config cfg = {.d_model = c, .n_heads = heads, .d_ff = 4 * c, .causal = 1};
    snprintf(b->name, sizeof b->name, "block %s B=%lld T=%lld", what, (long long)batch, (long long)t);
    b->g = vkg_graph_new();
    if (!b->g || vkg_block_weights_init(&b->block, &cfg, vkg_rng_next(rng), NULL) != VKG_OK) return 1;
    b->has_block = 1;
    if (bench_input(b, rng, 3, (const int64_t[]){batch, t, c})) return 1;
    return vkg_output(b->g, "y", vkg_block_build(b->g, b->input, &cfg, &b->block, "block", NULL)) != VKG_OK;
}

/* Median milliseconds of one vkg_session_run over repeat runs, after a warm-up run. */
static vkg_status time_runs(vkg_device *d, const vkg_plan *p, const bench_case *b, int repeat, double *median,
                            vkg_error *err) {
    vkg_session *s = NULL;
    vkg_status st = vkg_session_new(d, p, &s, err);
    if (st == VKG_OK) st = vkg_session_set_input(s, b->input, b->input_data, b->input_bytes, err);
    if (st == VKG_OK) st = vkg_session_run(s, err);
    double *ms = calloc((size_t)repeat, sizeof *ms);
    if (!ms && st == VKG_OK) st = VKG_ERR_OUT_OF_MEMORY;
    for (int i = 0; i < repeat && st == VKG_OK; i++) {
        double t0 = bench_now_ms();
        st = vkg_session_run(s, err);
        ms[i] = bench_now_ms() - t0;
    }
    if (st == VKG_OK) *median = bench_median(ms, repeat);
    free(ms);
    vkg_session_free(s);
    return st;
}

static void print_figure(vkg_device *d, const vkg_plan *p, const bench_case *b, double flops, int repeat) {
    double ms = 0;
    vkg_error err = {0};
    if (!d) {
        printf(" %10s %10s", "-", "-");
    } else if (time_runs(d, p, b, repeat, &ms, &err) != VKG_OK) {
        printf(" %10s %10s", "error", "");
        fprintf(stderr, "vkgraph bench: %s on %s: %s\n", b->name, vkg_device_name(d), err.message);
    } else {
        printf(" %10.3f %10.2f", ms, flops / (ms * 1e6));
    }
    fflush(stdout);
}

/* 0 when b can run; a graph in error is left for run_case to report with its message. */
static int built(const bench_case *b, int failed) {
    if (failed && (!b->g || vkg_graph_status(b->g) == VKG_OK)) return cli_fail("bench", "%s: out of memory", b->name);
    return 0;
}

static int run_case(vkg_device *cpu, vkg_device *gpu, bench_case *b, int repeat) {
    vkg_compile_options co;
    vkg_compile_options_default(&co);
    vkg_device_compile_options(cpu, &co);
    if (gpu) vkg_device_compile_options(gpu, &co);
    vkg_plan *p = NULL;
    vkg_error err = {0};
    if (vkg_graph_status(b->g) != VKG_OK) return cli_fail("bench", "%s: %s", b->name, vkg_graph_error(b->g));
    if (vkg_plan_compile(b->g, &co, &p, &err) != VKG_OK) return cli_fail("bench", "%s: %s", b->name, err.message);
    double flops = vkg_plan_matmul_flops(p);
    printf("%-36s %9.3f", b->name, flops / 1e9);
    print_figure(cpu, p, b, flops, repeat);
    print_figure(gpu, p, b, flops, repeat);
    printf("\n");
    vkg_plan_free(p);
    return 0;
}

int bench_ops(const bench_options *o) {
    const char *what = o->ops;
    const int repeat = (int)o->repeat;
    vkg_device *cpu = NULL, *gpu = NULL;
    if (cli_open_device("bench", "cpu", (int)o->threads, &cpu)) return 1;
    const char *spec = o->device ? o->device : "vulkan";
    if (strcmp(spec, "cpu") != 0 && cli_open_device("bench", spec, (int)o->threads, &gpu))
        fprintf(stderr, "vkgraph bench: no device %s; timing the CPU only\n", spec);

    printf("# vkgraph");
    for (int i = 0; i < o->argc; i++) printf(" %s", o->argv[i]);
    printf("\n# time per vkg_session_run: median of %d runs after one warm-up run\n", repeat);
    printf("# GFLOP: 2 x the multiply-adds of the plan's matmul steps (the rest is not counted)\n");
    printf("# cpu:    %s\n# device: %s\n", vkg_device_name(cpu), gpu ? vkg_device_name(gpu) : "(none)");
    printf("%-36s %9s %10s %10s %10s %10s\n", "", "", "cpu", "cpu", "device", "device");
    printf("%-36s %9s %10s %10s %10s %10s\n", "benchmark", "GFLOP", "ms", "GFLOP/s", "ms", "GFLOP/s");

    vkg_rng rng;
    vkg_rng_seed(&rng, 7);
    int rc = 0;
    if (!strcmp(what, "matmul") || !strcmp(what, "all")) {
        static const int64_t shapes[][3] = {{768, 768, 768}, {128, 768, 3072}, {1, 768, 3072}};
        for (int i = 0; i < 3 && !rc; i++) {
            bench_case b = {0};
            int failed = make_matmul(&b, &rng, shapes[i][0], shapes[i][1], shapes[i][2], 0);
            rc = built(&b, failed) || run_case(cpu, gpu, &b, repeat);
            bench_case_free(&b);
        }
    }
    if (!strcmp(what, "gpt2-matmul")) {
        /* A GPT-2 124M forward's matmuls over T tokens: qkv, attention out, MLP up and down, and the
         * LM head against the tied embedding (50257 x 768, read transposed). */
        static const struct { int64_t k, n; int transposed; } gpt2[] = {
            {768, 2304, 0}, {768, 768, 0}, {768, 3072, 0}, {3072, 768, 0}, {768, 50257, 1}};
        for (int t = 0; t < o->n_tokens && !rc; t++)
            for (int i = 0; i < 5 && !rc; i++) {
                bench_case b = {0};
                int failed = make_matmul(&b, &rng, o->tokens[t], gpt2[i].k, gpt2[i].n, gpt2[i].transposed);
                rc = built(&b, failed) || run_case(cpu, gpu, &b, repeat);
                bench_case_free(&b);
            }
    }
    if (!strcmp(what, "block") || !strcmp(what, "all")) {
        static const struct { int64_t batch, t; int c, heads; const char *what; } blocks[] = {
            {2, 10, 64, 4, "lesson (64/4/256)"}, {1, 128, 768, 12, "GPT-2 (768/12/3072)"}};
        for (int i = 0; i < 2 && !rc; i++) {
            bench_case b = {0};
            int failed = make_block(&b, &rng, blocks[i].batch, blocks[i].t, blocks[i].c, blocks[i].heads, blocks[i].what);
            rc = built(&b, failed) || run_case(cpu, gpu, &b, repeat);
            bench_case_free(&b);
        }
    }
    cli_close_device("bench", gpu);
    cli_close_device("bench", cpu);
    return rc;
}
