/* `vkgraph bench`: the options, and the helpers every benchmark shares (bench.h). */
#include "bench.h"
#include "cli.h"
#include "commands.h"
#include "gpt2_cli.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: vkgraph bench (-m DIR | --random NAME) [--device D] [-T 8,64,256,1024] [--decode N]\n"
            "                     [--threads N] [--dtype f32|f16|bf16] [--repeat N] [--logits DIR] [--json]\n"
            "       vkgraph bench [matmul|block|all|gpt2-matmul] [-T ...] [--device D] [--repeat N] [--threads N]\n"
            "\n"
            "Times a model: -m DIR (a Hugging Face folder of any architecture vkgraph runs) or --random NAME\n"
            "(a real model's shapes with random weights, written to a temporary folder: %s;\n"
            "%s).\n"
            "  forward  for each T of -T, one pass over T tokens with the logits of every position, [T, V]:\n"
            "           one warm-up run, then the median of --repeat runs (default 5; after 3 runs, no more\n"
            "           once they have taken 20 s), in ms and tokens/s; the graph, plan and session (weights\n"
            "           uploaded) are timed apart, as is loading the model; then one more run, profiled: the\n"
            "           matmul steps' GFLOP/s beside the machine's FMA peak\n"
            "  decode   a prompt of the smallest T, then --decode N tokens (default 64) one at a time with the\n"
            "           KV cache, greedy (each step: run, read the logits, argmax): tokens/s, the median ms per\n"
            "           token, and the weights read per second as a share of the machine's read bandwidth\n"
            "  machine  measured in the same run with --threads threads: the FMA peak (a loop of independent\n"
            "           FMAs, the widest the CPU has) and the read bandwidth (a streaming read of a buffer\n"
            "           twice the last-level cache, best of 5 passes)\n"
            "  memory   peak host memory (VmHWM, from loading the model on), peak device memory, and each\n"
            "           plan's arena against naive (every tensor in its own buffer) and the lower bound (the\n"
            "           most bytes alive at one step)\n"
            "The prompt is the same pseudo-random ids on every run and machine (vkg_rng, seed 1); --json\n"
            "lists them.\n"
            "  --device D    cpu, vulkan or vulkan:N (default: the best device)\n"
            "  --threads N   CPU executor threads (default: every core), and the machine figures' threads;\n"
            "                lavapipe takes LP_NUM_THREADS\n"
            "  --dtype D     the weight matrices in memory: f32, f16 or bf16 (default: as the file stores\n"
            "                them, as every command; --random writes f32)\n"
            "  --logits DIR  also write the logits computed: DIR/forward-T.npy [T, V] for each T and\n"
            "                DIR/decode.npy [N + 1, V] (the predictions after the prompt and each step)\n"
            "  --json        one JSON object on stdout instead of the table\n"
            "\n"
            "Without -m or --random, the op benchmarks, each on the CPU executor and on device D (default:\n"
            "the best Vulkan device), one warm-up run, then the median of --repeat runs (default 10):\n"
            "  matmul  M x K x N = 768x768x768, 128x768x3072 and 1x768x3072 (GFLOP/s)\n"
            "  block   the lesson's block (d_model 64, 4 heads, d_ff 256; B=2, T=10) and a\n"
            "          GPT-2-sized block (768, 12 heads, 3072; T=128): forward time\n"
            "  gpt2-matmul  (not in all) GPT-2 124M's matmuls at each T of -T: qkv, attention out, MLP up\n"
            "          and down, the LM head (B = the 50257 x 768 embedding, transposed) (GFLOP/s)\n",
            vkg_random_gpt2_size_names(), vkg_random_model_shapes());
}

double bench_now_ms(void) { return vkg_clock_seconds() * 1e3; }

static int compare_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double bench_median(double *x, int n) {
    if (n <= 0) return NAN;
    qsort(x, (size_t)n, sizeof *x, compare_double);
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

/* -T 8,64,256: distinct lengths, kept in the order given. */
static int parse_tokens(const char *spec, bench_options *o) {
    int32_t *t = NULL;
    size_t n = 0;
    if (cli_parse_ids("bench", "-T", spec, &t, &n)) return 1;
    int rc = 0;
    if (n > BENCH_MAX_T) rc = cli_fail("bench", "-T: %zu lengths; at most %d", n, BENCH_MAX_T);
    for (size_t i = 0; i < n && !rc; i++) {
        if (t[i] < 1) rc = cli_fail("bench", "-T: %d tokens; each length is 1 or more", (int)t[i]);
        for (size_t j = 0; j < i && !rc; j++)
            if (t[j] == t[i]) rc = cli_fail("bench", "-T: %d is given twice", (int)t[i]);
        o->tokens[i] = t[i];
    }
    o->n_tokens = (int)n;
    free(t);
    return rc;
}

int cmd_bench(int argc, char **argv) {
    bench_options o = {.dtype = VKG_WEIGHTS_AS_STORED, .tokens = {8, 64, 256, 1024}, .n_tokens = 4, .decode = 64,
                       .argc = argc, .argv = argv};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = NULL;
        long n = 0;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "matmul") || !strcmp(a, "block") || !strcmp(a, "all") ||
                   !strcmp(a, "gpt2-matmul")) {
            o.ops = a;
        } else if (!strcmp(a, "--json")) {
            o.json = 1;
        } else if (a[0] != '-') {
            static const char *const benchmarks[] = {"matmul", "block", "all", "gpt2-matmul"};
            const char *meant = cli_closest(a, benchmarks, 4);
            return cli_fail("bench", "unknown benchmark '%s'%s%s%s (one of: matmul, block, all, gpt2-matmul; a model is "
                            "timed with -m DIR or --random NAME)", a, meant ? "; did you mean '" : "", meant ? meant : "",
                            meant ? "'?" : "");
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model") || !strcmp(a, "--random") || !strcmp(a, "--device") ||
                   !strcmp(a, "--dtype") || !strcmp(a, "--logits") || !strcmp(a, "-T") || !strcmp(a, "--tokens") ||
                   !strcmp(a, "--decode") || !strcmp(a, "--repeat") || !strcmp(a, "--threads")) {
            if (!(v = cli_value("bench", argc, argv, &i))) return 1;
            if (!strcmp(a, "-m") || !strcmp(a, "--model")) o.model_dir = v;
            else if (!strcmp(a, "--random")) o.random_size = v;
            else if (!strcmp(a, "--device")) o.device = v;
            else if (!strcmp(a, "--dtype")) {
                if (gpt2_cli_dtype("bench", v, &o.dtype)) return 1;
            }
            else if (!strcmp(a, "--logits")) o.logits_dir = v;
            else if (!strcmp(a, "-T") || !strcmp(a, "--tokens")) {
                if (parse_tokens(v, &o)) return 1;
            } else if (!strcmp(a, "--decode")) {
                if (cli_int("bench", a, v, 0, 1 << 20, &n)) return 1;
                o.decode = (int)n;
            } else if (!strcmp(a, "--repeat")) {
                if (cli_int("bench", a, v, 1, 100000, &o.repeat)) return 1;
            } else if (cli_int("bench", a, v, 0, 1024, &o.threads)) {
                return 1;
            }
        } else {
            return cli_unknown_option("bench", a, usage);
        }
    }
    const int model = o.model_dir || o.random_size;
    if (o.model_dir && o.random_size) return cli_fail("bench", "give one model: -m DIR or --random NAME, not both");
    if (model && o.ops) return cli_fail("bench", "'%s' times ops, -m / --random a model: give one", o.ops);
    if (!model) {
        const char *model_only = o.json ? "--json" : o.logits_dir ? "--logits" : o.dtype != VKG_WEIGHTS_AS_STORED ? "--dtype"
                                                                                                        : NULL;
        if (model_only) return cli_fail("bench", "%s is for a model: give -m DIR or --random NAME", model_only);
        if (!o.ops) o.ops = "all";
        if (!o.repeat) o.repeat = 10;
        return bench_ops(&o);
    }
    if (!o.repeat) o.repeat = 5;
    return bench_model(&o);
}
