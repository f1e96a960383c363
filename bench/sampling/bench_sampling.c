/*
 * Per-token sampling time at GPT-2's vocabulary (50,257) and at 151,936 (the vocabulary of newer
 * models), for the option sets the tool offers, with two implementations side by side in one run:
 *   full sort  the previous way, kept here as the yardstick: every candidate sorted by qsort,
 *              libm's expf;
 *   chain      the library's sampler chain (vkg_sampler_chain_from_options), which sorts only the
 *              head a stage needs.
 * Logits are normal with a spread like a language model's (standard deviation 3, a few tokens
 * ahead), a fresh row each token.  Also counts how often the two chose the same token from the
 * same seed (they compute probabilities with different exp functions, so a draw landing within
 * rounding of a boundary may differ).
 *
 *   bench_sampling [tokens]      (default 200 per configuration)
 * Prints a table; times in microseconds of the thread's own CPU time (CLOCK_THREAD_CPUTIME_ID:
 * time spent waiting for a core on a shared machine does not count), the median and the fastest
 * token of each.  Nothing here is a test.
 */
#include "vkgraph_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- the full-sort sampler (the yardstick) --------------------------------------------------- */

typedef struct cand {
    float value;
    int32_t id;
} cand;

static int by_value_desc(const void *a, const void *b) {
    const cand *x = a, *y = b;
    if (x->value != y->value) return x->value > y->value ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* Repetition penalty over ctx, greedy or top-k / temperature / top-p / min-p and a draw. */
static int32_t full_sort_next(const vkg_sampling_options *o, vkg_rng *rng, const float *in, int V, cand *c,
                              float *work, const int32_t *ctx, int nctx) {
    const float *logits = in;
    if (o->repeat_penalty != 1.0f && nctx) {
        memcpy(work, in, (size_t)V * sizeof *work);
        int w = o->repeat_last_n < 0 || o->repeat_last_n > nctx ? nctx : o->repeat_last_n;
        for (int i = nctx - w; i < nctx; i++) { /* distinct ids: the caller's ctx has no repeats */
            float *x = &work[ctx[i]];
            *x = *x > 0.0f ? *x / o->repeat_penalty : *x * o->repeat_penalty;
        }
        logits = work;
    }
    int32_t best = vkg_argmax(logits, V);
    if (vkg_sampling_is_greedy(o)) return best;
    const float t = o->temperature, top = logits[best];
    int n = 0;
    for (int i = 0; i < V; i++)
        if (isfinite(logits[i]) && (logits[i] - top) / t >= -60.0f) c[n++] = (cand){logits[i], i};
    qsort(c, (size_t)n, sizeof *c, by_value_desc);
    if (o->top_k > 0 && n > o->top_k) n = o->top_k;
    double total = 0.0;
    for (int i = 0; i < n; i++) total += c[i].value = expf((c[i].value - top) / t);
    if (o->top_p > 0.0f && o->top_p < 1.0f) {
        double kept = 0.0;
        int keep = 0;
        while (keep < n && (keep == 0 || kept < o->top_p * total)) kept += c[keep++].value;
        n = keep;
        total = kept;
    }
    if (o->min_p > 0.0f) {
        int keep = 1;
        double kept = c[0].value;
        while (keep < n && c[keep].value >= o->min_p) kept += c[keep++].value;
        n = keep;
        total = kept;
    }
    double u = (double)vkg_rng_uniform(rng), acc = 0.0;
    for (int i = 0; i < n; i++) {
        acc += (float)(c[i].value / total);
        if (u < acc) return c[i].id;
    }
    return c[n - 1].id;
}

/* ---- the bench ---------------------------------------------------------------------------------- */

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int by_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, by_double);
    return v[n / 2];
}

typedef struct config {
    const char *name;
    float temperature, top_p, min_p, repeat;
    int top_k;
} config;

int main(int argc, char **argv) {
    const int tokens = argc > 1 ? atoi(argv[1]) : 200;
    if (tokens < 1) {
        fprintf(stderr, "bench_sampling: tokens must be 1 or more\n");
        return 1;
    }
    const int vocabs[] = {50257, 151936};
    const config configs[] = {
        {"--temperature 0.8", 0.8f, 1.0f, 0.0f, 1.0f, 0},
        {"--top-k 40 --temperature 0.8", 0.8f, 1.0f, 0.0f, 1.0f, 40},
        {"--top-p 0.95", 1.0f, 0.95f, 0.0f, 1.0f, 0},
        {"--min-p 0.05", 1.0f, 1.0f, 0.05f, 1.0f, 0},
        {"--top-k 40 --top-p 0.95 --min-p 0.05 --temp 0.8", 0.8f, 0.95f, 0.05f, 1.0f, 40},
        {"--top-p 0.9 --repeat-penalty 1.1", 1.0f, 0.9f, 0.0f, 1.1f, 0},
    };
    printf("%-50s %7s %21s %21s %7s %6s\n", "options", "vocab", "full sort: median min", "chain: median min",
           "ratio", "same");
    for (size_t vi = 0; vi < sizeof vocabs / sizeof *vocabs; vi++) {
        const int V = vocabs[vi];
        float *rows = malloc((size_t)V * 8 * sizeof *rows), *work = malloc((size_t)V * sizeof *work);
        cand *c = malloc((size_t)V * sizeof *c);
        double *ta = malloc((size_t)tokens * sizeof *ta), *tb = malloc((size_t)tokens * sizeof *tb);
        int32_t ctx[64];
        if (!rows || !work || !c || !ta || !tb) {
            fprintf(stderr, "bench_sampling: out of memory\n");
            return 1;
        }
        vkg_rng r;
        vkg_rng_seed(&r, 1);
        for (int k = 0; k < 8; k++) { /* eight rows used in turn */
            float *x = rows + (size_t)k * V;
            for (int i = 0; i < V; i++) x[i] = 3.0f * vkg_rng_normal(&r);
            for (int j = 0; j < 5; j++) x[vkg_rng_next(&r) % (uint64_t)V] = 12.0f + (float)j;
        }
        for (int i = 0; i < 64; i++) ctx[i] = i * 97 % V; /* distinct ids */
        for (size_t ci = 0; ci < sizeof configs / sizeof *configs; ci++) {
            const config *cf = &configs[ci];
            vkg_sampling_options o;
            vkg_sampling_options_default(&o);
            o.temperature = cf->temperature;
            o.top_k = cf->top_k;
            o.top_p = cf->top_p;
            o.min_p = cf->min_p;
            o.repeat_penalty = cf->repeat;
            o.seed = 42;
            vkg_sampler_chain *chain = NULL;
            vkg_error err = {0};
            if (vkg_sampler_chain_from_options(&o, V, &chain, &err) != VKG_OK) {
                fprintf(stderr, "bench_sampling: %s\n", err.message);
                return 1;
            }
            for (int i = 0; i < 64; i++) vkg_sampler_chain_accept(chain, ctx[i], &err);
            vkg_rng ra;
            vkg_rng_seed(&ra, 42);
            int same = 0;
            for (int t = 0; t < tokens; t++) {
                const float *x = rows + (size_t)(t % 8) * V;
                double t0 = now_us();
                int32_t a = full_sort_next(&o, &ra, x, V, c, work, ctx, 64);
                double t1 = now_us();
                int32_t b = -1;
                if (vkg_sampler_chain_sample(chain, x, (size_t)V, &b, &err) != VKG_OK) {
                    fprintf(stderr, "bench_sampling: %s\n", err.message);
                    return 1;
                }
                double t2 = now_us();
                ta[t] = t1 - t0;
                tb[t] = t2 - t1;
                same += a == b;
            }
            const double ma = median(ta, tokens), mb = median(tb, tokens); /* sorts them: [0] is the least */
            printf("%-50s %7d %10.1f %10.1f %10.1f %10.1f %6.1fx %5.1f%%\n", cf->name, V, ma, ta[0], mb, tb[0], ma / mb,
                   100.0 * same / tokens);
            vkg_sampler_chain_free(chain);
        }
        free(rows);
        free(work);
        free(c);
        free(ta);
        free(tb);
    }
    return 0;
}
