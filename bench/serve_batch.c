/* Aggregate decode throughput of a batch context (vkg_batch_*) for 1, 2, 4, 8 and 16 sequences a
 * step, side by side, on one device: each sequence gets a short prompt, then every step adds one
 * token to each; the figure is the median over steps of (sequences / step time).
 *
 *   serve_batch MODEL_DIR [--device cpu|vulkan|vulkan:N] [--steps N] [--ctx N] [--threads N]
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
    fprintf(stderr, "usage: serve_batch MODEL_DIR [--device D] [--steps N] [--ctx N] [--threads N] [--profile]\n");
    return 1;
}

/* Median tokens/s of `steps` decode steps of n sequences; < 0 on an error (printed). */
static double measure(vkg_model *m, int n, int steps, int ctx, int vocab) {
    vkg_batch_options o;
    vkg_batch_options_default(&o);
    o.n_seq = n;
    o.n_ctx = ctx;
    vkg_batch_context *b = NULL;
    vkg_error err = {0};
    double *rate = malloc((size_t)steps * sizeof *rate);
    double result = -1;
    if (!rate || vkg_batch_context_new(m, &o, &b, &err) != VKG_OK) goto done;
    for (int s = 0; s < n; s++) { /* prompts of different lengths: the sequences at different positions */
        int32_t prompt[8];
        const int len = 2 + s % 7;
        for (int t = 0; t < len; t++) prompt[t] = (int32_t)((s * 31 + t * 7 + 1) % vocab);
        if (vkg_batch_add(b, s, prompt, len, &err) != VKG_OK) goto done;
    }
    if (vkg_batch_step(b, &err) != VKG_OK) goto done;
    for (int k = -1; k < steps; k++) { /* one step to warm up (the plan's first run) */
        for (int s = 0; s < n; s++) {
            const int32_t id = (int32_t)(((k + 1) * 13 + s * 5 + 3) % vocab);
            if (vkg_batch_add(b, s, &id, 1, &err) != VKG_OK) goto done;
        }
        const double t0 = now();
        if (vkg_batch_step(b, &err) != VKG_OK) goto done;
        if (k >= 0) rate[k] = n / (now() - t0);
    }
    qsort(rate, (size_t)steps, sizeof *rate, cmp_double);
    result = rate[steps / 2];
done:
    if (result < 0) fprintf(stderr, "serve_batch: %d sequences: %s\n", n, err.message);
    vkg_batch_context_free(b);
    free(rate);
    return result;
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
        else return usage();
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
    printf("%s, %d layers, n_embd %d, weights %s, device %s, median of %d steps\n", info.architecture, info.n_layer,
           info.n_embd, vkg_weight_dtype_name(info.dtype), device, steps);
    printf("%10s %14s %12s\n", "sequences", "tokens/s", "vs 1");
    const int counts[5] = {1, 2, 4, 8, 16};
    double one = 0;
    int rc = 0;
    for (int c = 0; c < 5; c++) {
        const double r = measure(m, counts[c], steps, ctx, info.n_vocab);
        if (r < 0) {
            rc = 1;
            break;
        }
        if (c == 0) one = r;
        printf("%10d %14.1f %11.2fx\n", counts[c], r, r / one);
        fflush(stdout);
    }
    if (profile) vkg_device_profile_print(dev, VKG_PROFILE_BY_OP, stdout);
    vkg_model_free(m);
    vkg_device_free(dev);
    return rc;
}
