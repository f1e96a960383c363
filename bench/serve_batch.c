/* Aggregate decode throughput of a batch context (vkg_batch_*) for 1, 2, 4, 8 and 16 sequences a
 * step, side by side, on one device: each sequence gets a short prompt, then every step adds one
 * token to each; the figure is the median over steps of (sequences / step time).  The five
 * contexts are open at once (each with its copy of the weights on the device) and take their
 * steps in turn, so the ratios hold on a noisy machine where absolute times do not.
 *
 *   serve_batch MODEL_DIR [--device cpu|vulkan|vulkan:N] [--steps N] [--ctx N] [--threads N]
 *                         [--cpu-isa avx512|avx2|portable]   (vkg_cpu_set_max_isa)
 *                         [--profile]   (then the time of each op kind, summed over every run)
 *
 * A model of GPT-2 124M's shapes with random weights: `vkgraph gpt2-random --size gpt2 DIR`.
 * Figures, not assertions: the load average of the machine belongs next to them. */
#include "vkgraph_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int usage(void) {
    fprintf(stderr, "usage: serve_batch MODEL_DIR [--device D] [--steps N] [--ctx N] [--threads N] [--cpu-isa ISA] "
                    "[--profile]\n");
    return 1;
}

/* A batch context of n sequences, each given a short prompt and run one step, then one decode
 * step to warm up (its plan's first run).  Returns NULL on an error (printed). */
static vkg_batch_context *start(vkg_model *m, int n, int ctx, int vocab) {
    vkg_batch_options o;
    vkg_batch_options_default(&o);
    o.n_seq = n;
    o.n_ctx = ctx;
    vkg_batch_context *b = NULL;
    vkg_error err = {0};
    if (vkg_batch_context_new(m, &o, &b, &err) != VKG_OK) goto fail;
    for (int s = 0; s < n; s++) { /* prompts of different lengths: the sequences at different positions */
        int32_t prompt[8];
        const int len = 2 + s % 7;
        for (int t = 0; t < len; t++) prompt[t] = (int32_t)((s * 31 + t * 7 + 1) % vocab);
        if (vkg_batch_add(b, s, prompt, len, &err) != VKG_OK) goto fail;
    }
    if (vkg_batch_step(b, &err) != VKG_OK) goto fail;
    return b;
fail:
    fprintf(stderr, "serve_batch: %d sequences: %s\n", n, err.message);
    vkg_batch_context_free(b);
    return NULL;
}

/* One decode step of every sequence of b (step k's tokens): sequences / seconds, < 0 on an
 * error (printed). */
static double step_rate(vkg_batch_context *b, int k, int vocab) {
    vkg_error err = {0};
    const int n = vkg_batch_n_seq(b);
    for (int s = 0; s < n; s++) {
        const int32_t id = (int32_t)(((k + 1) * 13 + s * 5 + 3) % vocab);
        if (vkg_batch_add(b, s, &id, 1, &err) != VKG_OK) goto fail;
    }
    const double t0 = now();
    if (vkg_batch_step(b, &err) != VKG_OK) goto fail;
    return n / (now() - t0);
fail:
    fprintf(stderr, "serve_batch: %d sequences: %s\n", n, err.message);
    return -1;
}

static double median(double *x, int n) {
    qsort(x, (size_t)n, sizeof *x, cmp_double);
    return x[n / 2];
}

int main(int argc, char **argv) {
    if (argc < 2 || argv[1][0] == '-') return usage();
    const char *dir = argv[1], *device = "cpu";
    int steps = 16, ctx = 64, threads = 0, profile = 0;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--profile")) {
            profile = 1;
            continue;
        }
        if (i + 1 >= argc) return usage();
        if (!strcmp(argv[i], "--device")) device = argv[++i];
        else if (!strcmp(argv[i], "--steps")) steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--ctx")) ctx = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads")) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--cpu-isa")) {
            vkg_error err = {0};
            if (vkg_cpu_set_max_isa(argv[++i], &err) != VKG_OK) {
                fprintf(stderr, "serve_batch: %s\n", err.message);
                return 1;
            }
        } else return usage();
    }
    if (steps < 1 || steps > 100000 || ctx < steps + 10) {
        fprintf(stderr, "serve_batch: --steps 1 to 100000 and --ctx at least steps + 10\n");
        return 1;
    }
    vkg_device_options dopts = {.cpu_threads = threads, .quiet = 1, .profile = profile};
    vkg_device *dev = NULL;
    vkg_model *m = NULL;
    vkg_model_info info;
    vkg_error err = {0};
    if (vkg_device_open(device, &dopts, &dev, &err) != VKG_OK || vkg_model_open(dir, dev, NULL, &m, &err) != VKG_OK ||
        vkg_model_get_info(m, &info, &err) != VKG_OK) {
        fprintf(stderr, "serve_batch: %s\n", err.message);
        vkg_model_free(m);
        vkg_device_free(dev);
        return 1;
    }
    printf("%s, %d layers, n_embd %d, weights %s, device %s, median of %d steps, levels interleaved\n", info.architecture, info.n_layer,
           info.n_embd, vkg_weight_dtype_name(info.dtype), device, steps);
    /* The levels' steps interleaved, one step of each in turn, so that a slow spell of a shared
     * machine falls on every level alike; "vs 1" is the median over rounds of the round's rate
     * against its one-sequence step. */
    enum { LEVELS = 5 };
    const int counts[LEVELS] = {1, 2, 4, 8, 16};
    vkg_batch_context *b[LEVELS] = {0};
    double *rate = calloc((size_t)LEVELS * (size_t)steps, sizeof *rate), *ratio = calloc((size_t)steps, sizeof *ratio);
    int rc = !rate || !ratio;
    for (int c = 0; c < LEVELS && !rc; c++)
        if (!(b[c] = start(m, counts[c], ctx, info.n_vocab))) rc = 1;
    for (int k = -1; k < steps && !rc; k++) /* round -1 warms each level's plan up */
        for (int c = 0; c < LEVELS && !rc; c++) {
            const double r = step_rate(b[c], k, info.n_vocab);
            if (r < 0) rc = 1;
            else if (k >= 0) rate[c * steps + k] = r;
        }
    if (!rc) {
        printf("%10s %14s %12s\n", "sequences", "tokens/s", "vs 1");
        for (int c = 0; c < LEVELS; c++) {
            for (int k = 0; k < steps; k++) ratio[k] = rate[c * steps + k] / rate[k];
            printf("%10d %14.1f %11.2fx\n", counts[c], median(rate + c * steps, steps), median(ratio, steps));
        }
    }
    for (int c = 0; c < LEVELS; c++) vkg_batch_context_free(b[c]);
    free(rate);
    free(ratio);
    if (profile) vkg_device_profile_print(dev, VKG_PROFILE_BY_OP, stdout);
    vkg_model_free(m);
    vkg_device_free(dev);
    return rc;
}
