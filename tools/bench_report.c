/* A model benchmark's figures, as a table for people or one JSON object for programs
 * (bench/compare-pytorch reads it).  Both print the same figures, derived here once. */
#include "bench.h"


#include <math.h>
#include <stdio.h>
#include <string.h>

#define MIB (1024.0 * 1024.0)

/* What the report derives from the measured times: one place for each formula. */
typedef struct derived {
    double tokens_per_s, matmul_gflops, matmul_share;  /* a forward pass          */
} derived;

static derived forward_derived(const bench_forward *f, const bench_machine *m) {
    derived d;
    d.tokens_per_s = f->tokens / (f->median_ms / 1e3);
    d.matmul_gflops = f->matmul_gflop / (f->matmul_ms / 1e3);          /* NaN when not profiled */
    d.matmul_share = d.matmul_gflops / m->fma_gflops;
    return d;
}

static double decode_tokens_per_s(const bench_decode *d) { return d->steps / (d->total_ms / 1e3); }
/* Decoding reads every weight once per token. */
static double decode_weight_gbs(const bench_decode *d) { return (double)d->weight_bytes * decode_tokens_per_s(d) / 1e9; }

#define FMA_HOW "measured: a loop of independent multiply-adds (%s) on %d thread%s"
#define READ_HOW                                                                                          \
    "measured: a streaming read of %.0f MiB (twice the last-level cache, at least 256 MiB) on %d thread%s, " \
    "best of 5 passes"

/* ---- JSON ---------------------------------------------------------------------------------- */

static void num(FILE *f, const char *key, double v) {
    fprintf(f, "\"%s\": ", key);
    if (isfinite(v)) fprintf(f, "%.6g", v);
    else fputs("null", f);
}

static void ids(FILE *f, const char *key, const int32_t *x, int n) {
    fprintf(f, "\"%s\": [", key);
    for (int i = 0; i < n; i++) fprintf(f, "%s%d", i ? ", " : "", (int)x[i]);
    fputs("]", f);
}

static void memory_json(FILE *f, const vkg_memory_stats *s) {
    fprintf(f, "\"arena_bytes\": %llu, \"naive_bytes\": %llu, \"lower_bound_bytes\": %llu",
            (unsigned long long)s->arena_bytes, (unsigned long long)s->naive_bytes,
            (unsigned long long)s->lower_bound_bytes);
}

void bench_report_json(const bench_options *o, const bench_model_result *r) {
    FILE *f = stdout;
    const vkg_model_info *c = &r->info;
    const bench_machine *m = &r->machine;
    char text[512] = "vkgraph";
    for (int i = 0; i < o->argc; i++)
        snprintf(text + strlen(text), sizeof text - strlen(text), " %s", o->argv[i]);
    fputs("{\"command\": ", f);
    vkg_json_write_string(f, text);
    fputs(",\n \"model\": {\"name\": ", f);
    vkg_json_write_string(f, r->name);
    fprintf(f, ", \"architecture\": \"%s\", \"random_weights\": %s, \"layers\": %d, \"heads\": %d, \"kv_heads\": %d, "
               "\"head_dim\": %d, \"embd\": %d, \"positions\": %d, \"vocab\": %d, \"parameters\": %lld, \"dtype\": \"%s\"},\n "
               "\"device\": ",
            c->architecture, r->random_weights ? "true" : "false", c->n_layer, c->n_head, c->n_kv_head, c->head_dim,
            c->n_embd, c->n_ctx, c->n_vocab, (long long)c->n_params, r->dtype);
    vkg_json_write_string(f, r->device);
    fprintf(f, ", \"cpu_executor\": %s, \"threads\": %d, ", r->cpu ? "true" : "false", m->threads);
    num(f, "load_ms", r->load_ms);
    fputs(",\n \"forward\": [", f);
    for (int i = 0; i < r->n_forward; i++) {
        const bench_forward *b = &r->forward[i];
        const derived d = forward_derived(b, m);
        fprintf(f, "%s\n  {\"tokens\": %d, ", i ? "," : "", b->tokens);
        num(f, "median_ms", b->median_ms), fputs(", ", f);
        num(f, "min_ms", b->min_ms), fprintf(f, ", \"runs\": %d, ", b->runs);
        num(f, "tokens_per_s", d.tokens_per_s), fputs(", ", f);
        num(f, "compile_ms", b->compile_ms), fputs(", ", f);
        num(f, "matmul_gflop", b->matmul_gflop), fputs(", ", f);
        num(f, "matmul_ms", b->matmul_ms), fputs(", ", f);
        num(f, "matmul_gflops", d.matmul_gflops), fputs(", ", f);
        num(f, "matmul_share_of_fma_peak", d.matmul_share), fputs(", ", f);
        memory_json(f, &b->memory);
        fputs("}", f);
    }
    fputs("],\n \"decode\": ", f);
    const bench_decode *dec = &r->decode;
    if (dec->steps > 0) {
        fprintf(f, "{\"prompt_tokens\": %d, \"steps\": %d, ", dec->prompt, dec->steps);
        num(f, "tokens_per_s", decode_tokens_per_s(dec)), fputs(", ", f);
        num(f, "median_token_ms", dec->median_token_ms), fputs(", ", f);
        num(f, "total_ms", dec->total_ms), fputs(", ", f);
        num(f, "prefill_ms", dec->prefill_ms), fputs(", ", f);
        num(f, "compile_ms", dec->compile_ms), fprintf(f, ", \"weight_bytes\": %llu, ", (unsigned long long)dec->weight_bytes);
        num(f, "weight_gbs", decode_weight_gbs(dec)), fputs(", ", f);
        num(f, "share_of_read_bandwidth", decode_weight_gbs(dec) / m->read_gbs), fputs(", ", f);
        memory_json(f, &dec->memory);
        fputs(",\n  ", f);
        ids(f, "ids", dec->ids, dec->steps + 1);
        fputs("}", f);
    } else {
        fputs("null", f);
    }
    char how[256];
    fputs(",\n \"machine\": {\"cpu\": ", f);
    vkg_json_write_string(f, m->cpu);
    fputs(", ", f);
    num(f, "load_average", m->load_average >= 0 ? m->load_average : NAN);
    fprintf(f, ", \"cores\": %d, \"threads\": %d, \"fma_isa\": \"%s\", ", m->cores, m->threads, m->fma_isa);
    num(f, "fma_peak_gflops", m->fma_gflops);
    snprintf(how, sizeof how, FMA_HOW, m->fma_isa, m->threads, m->threads == 1 ? "" : "s");
    fputs(", \"fma_peak_how\": ", f);
    vkg_json_write_string(f, how);
    fputs(", ", f);
    num(f, "read_gbs", m->read_gbs);
    snprintf(how, sizeof how, READ_HOW, (double)m->read_bytes / MIB, m->threads, m->threads == 1 ? "" : "s");
    fprintf(f, ", \"read_buffer_bytes\": %llu, \"read_how\": ", (unsigned long long)m->read_bytes);
    vkg_json_write_string(f, how);
    fprintf(f, "},\n \"memory\": {\"peak_host_bytes\": %llu, \"peak_host_includes_setup\": %s, \"peak_device_bytes\": ",
            (unsigned long long)r->peak_host_bytes, r->peak_host_includes_setup ? "true" : "false");
    if (r->cpu) fputs("null", f);
    else fprintf(f, "%llu", (unsigned long long)r->peak_device_bytes);
    fputs("},\n ", f);
    ids(f, "prompt", r->prompt, r->prompt_len);
    fputs("}\n", f);
}

/* ---- the table ----------------------------------------------------------------------------- */

static void arena_text(FILE *f, const vkg_memory_stats *s) {
    fprintf(f, "arena %.1f MiB (naive %.1f, lower bound %.1f)", (double)s->arena_bytes / MIB,
            (double)s->naive_bytes / MIB, (double)s->lower_bound_bytes / MIB);
}

void bench_report_text(const bench_options *o, const bench_model_result *r) {
    FILE *f = stdout;
    const vkg_model_info *c = &r->info;
    const bench_machine *m = &r->machine;
    fputs("# vkgraph", f);
    for (int i = 0; i < o->argc; i++) fprintf(f, " %s", o->argv[i]);
    fprintf(f, "\n# sizes in MiB, rates in GB/s (10^9 bytes) and GFLOP/s\n");
    char kv[32] = "";
    if (c->n_kv_head != c->n_head) snprintf(kv, sizeof kv, " over %d KV heads", c->n_kv_head);
    fprintf(f, "model    %s (%s): %d layers, %d heads%s, %d wide, %d positions, %d tokens; %.1fM parameters, %s%s\n",
            r->name, c->architecture, c->n_layer, c->n_head, kv, c->n_embd, c->n_ctx, c->n_vocab,
            (double)c->n_params / 1e6, r->dtype, r->random_weights ? " (RANDOM weights)" : "");
    fprintf(f, "device   %s\n", r->device);
    fprintf(f, "load     %.1f ms\n", r->load_ms);
    char how[256];
    snprintf(how, sizeof how, FMA_HOW, m->fma_isa, m->threads, m->threads == 1 ? "" : "s");
    fprintf(f, "machine  %s, %d cores, load average %.2f; FMA peak %.1f GFLOP/s (%s)\n", m->cpu[0] ? m->cpu : "a CPU",
            m->cores, m->load_average, m->fma_gflops, how);
    snprintf(how, sizeof how, READ_HOW, (double)m->read_bytes / MIB, m->threads, m->threads == 1 ? "" : "s");
    fprintf(f, "         read bandwidth %.1f GB/s (%s)\n", m->read_gbs, how);
    if (r->n_forward) {
        fprintf(f, "forward  all-position logits [T, V]: the median of the runs after one warm-up; matmul from one "
                   "profiled run\n");
        fprintf(f, "%7s %5s %11s %11s %10s %10s %10s %7s %10s %10s %10s\n", "T", "runs", "compile ms", "median ms",
                "tokens/s", "mm GFLOP", "mm GFLOP/s", "% peak", "arena MiB", "naive MiB", "lower MiB");
        for (int i = 0; i < r->n_forward; i++) {
            const bench_forward *b = &r->forward[i];
            const derived d = forward_derived(b, m);
            fprintf(f, "%7d %5d %11.1f %11.2f %10.1f %10.2f %10.1f %6.1f%% %10.1f %10.1f %10.1f\n", b->tokens, b->runs,
                    b->compile_ms, b->median_ms, d.tokens_per_s, b->matmul_gflop, d.matmul_gflops, 100 * d.matmul_share,
                    (double)b->memory.arena_bytes / MIB, (double)b->memory.naive_bytes / MIB,
                    (double)b->memory.lower_bound_bytes / MIB);
        }
    }
    const bench_decode *dec = &r->decode;
    if (dec->steps > 0) {
        fprintf(f, "decode   a prompt of %d, then %d tokens one at a time (greedy, KV cache of %d): %.2f tokens/s, "
                   "median %.2f ms per token; prefill %.1f ms; compile %.1f ms\n",
                dec->prompt, dec->steps, dec->prompt + dec->steps, decode_tokens_per_s(dec), dec->median_token_ms,
                dec->prefill_ms, dec->compile_ms);
        fprintf(f, "         weights %.1f MiB read per token: %.1f GB/s, %.0f%% of the read bandwidth; ",
                (double)dec->weight_bytes / MIB, decode_weight_gbs(dec), 100 * decode_weight_gbs(dec) / m->read_gbs);
        arena_text(f, &dec->memory);
        fputs("\n", f);
    }
    fprintf(f, "memory   peak host %.1f MiB (VmHWM%s); ", (double)r->peak_host_bytes / MIB,
            r->peak_host_includes_setup ? ", with the writing of the random model" : ", from loading the model on");
    if (r->cpu) fprintf(f, "no device memory (the CPU executor's memory is the host's)\n");
    else fprintf(f, "peak device %.1f MiB (Vulkan allocations; weights read in place from host memory are the "
                 "host's)\n", (double)r->peak_device_bytes / MIB);
}
