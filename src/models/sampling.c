/* Next-token choice: greedy, temperature, top-k, top-p (see sampling.h for the exact order). */
#include "models/sampling.h"

#include "core/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Below exp(-CUTOFF) of the best token's probability a token cannot change a float32 sum. */
#define CUTOFF 60.0f

void vkg_sampling_options_default(vkg_sampling_options *o) {
    memset(o, 0, sizeof *o);
    o->temperature = 1.0f;
    o->top_p = 1.0f;
}

vkg_status vkg_sampler_init(vkg_sampler *s, const vkg_sampling_options *o, int vocab, vkg_error *err) {
    memset(s, 0, sizeof *s);
    if (vocab < 1) return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "sampling: vocabulary of %d tokens", vocab);
    if (!isfinite(o->temperature))
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "sampling: temperature must be a finite number (0 = greedy)");
    if (o->top_k < 0) return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "sampling: top-k %d; use 0 (no limit) or more",
                                           o->top_k);
    if (!isfinite(o->top_p))
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "sampling: top-p must be a number in (0, 1] (1 = no limit)");
    s->opts = *o;
    s->vocab = vocab;
    vkg_rng_seed(&s->rng, o->seed);
    s->cand = malloc((size_t)vocab * sizeof *s->cand);
    if (!s->cand) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory for sampling");
    return VKG_OK;
}

void vkg_sampler_free(vkg_sampler *s) {
    free(s->cand);
    memset(s, 0, sizeof *s);
}

int vkg_sampler_is_greedy(const vkg_sampler *s) { return s->opts.temperature <= 0.0f || s->opts.top_k == 1; }

int32_t vkg_argmax(const float *logits, int n) {
    int32_t best = 0;
    float best_value = -INFINITY;
    int found = 0;
    for (int i = 0; i < n; i++)
        if (isfinite(logits[i]) && (!found || logits[i] > best_value)) {
            best = i;
            best_value = logits[i];
            found = 1;
        }
    return best;
}

/* Largest value first; the lower id first among equals, so the order is total and the same on
 * every machine whatever qsort's algorithm. */
static int by_value_desc(const void *a, const void *b) {
    const vkg_sampling_candidate *x = a, *y = b;
    if (x->value != y->value) return x->value > y->value ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

int32_t vkg_sampler_next(vkg_sampler *s, const float *logits) {
    int32_t best = vkg_argmax(logits, s->vocab);
    if (vkg_sampler_is_greedy(s) || !isfinite(logits[best])) return best;
    const float t = s->opts.temperature, top = logits[best];

    int n = 0;
    for (int i = 0; i < s->vocab; i++)
        if (isfinite(logits[i]) && (logits[i] - top) / t >= -CUTOFF)
            s->cand[n++] = (vkg_sampling_candidate){logits[i], i};
    qsort(s->cand, (size_t)n, sizeof *s->cand, by_value_desc);
    if (s->opts.top_k > 0 && n > s->opts.top_k) n = s->opts.top_k;

    double total = 0.0;
    for (int i = 0; i < n; i++) {
        float p = expf((s->cand[i].value - top) / t);
        s->cand[i].value = p;
        total += p;
    }
    if (s->opts.top_p > 0.0f && s->opts.top_p < 1.0f) {
        double kept = 0.0;
        int keep = 0;
        while (keep < n && (keep == 0 || kept < s->opts.top_p * total)) kept += s->cand[keep++].value;
        n = keep;
        total = kept;
    }

    double u = (double)vkg_rng_uniform(&s->rng) * total, acc = 0.0;
    for (int i = 0; i < n; i++) {
        acc += s->cand[i].value;
        if (u < acc) return s->cand[i].id;
    }
    return s->cand[n - 1].id; /* u within rounding of the total */
}
