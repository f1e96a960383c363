/* Next-token choice: repetition penalty, greedy, temperature, top-k, top-p, min-p (see sampling.h
 * for the exact order). */
#include "models/sampling.h"

#include "base/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Below exp(-CUTOFF) of the best token's probability a token cannot change a float32 sum. */
#define CUTOFF 60.0f

void vkg_sampling_options_default(vkg_sampling_options *o) {
    memset(o, 0, sizeof *o);
    o->temperature = 1.0f;
    o->top_p = 1.0f;
    o->repeat_penalty = 1.0f;
    o->repeat_last_n = 64;
}

vkg_status vkg_sampling_options_check(const vkg_sampling_options *o, vkg_error *err) {
    if (!isfinite(o->temperature))
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "sampling: temperature must be a finite number (0 = greedy)");
    if (o->top_k < 0) return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "sampling: top-k %d; use 0 (no limit) or more",
                                           o->top_k);
    if (!isfinite(o->top_p))
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "sampling: top-p must be a number in (0, 1] (1 = no limit)");
    if (!(o->min_p >= 0.0f && o->min_p <= 1.0f))
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "sampling: min-p must be a number in [0, 1] (0 = no limit)");
    if (!(isfinite(o->repeat_penalty) && o->repeat_penalty > 0.0f))
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "sampling: the repetition penalty must be a positive "
                             "number (1 = none)");
    if (o->repeat_last_n < -1)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "sampling: repeat-last-n %d; use -1 (the whole context), "
                             "0 (none) or more", o->repeat_last_n);
    return VKG_OK;
}

int vkg_sampling_is_greedy(const vkg_sampling_options *o) { return o->temperature <= 0.0f || o->top_k == 1; }

vkg_status vkg_sampler_init(vkg_sampler *s, const vkg_sampling_options *o, int vocab, vkg_error *err) {
    memset(s, 0, sizeof *s);
    if (vocab < 1) return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "sampling: vocabulary of %d tokens", vocab);
    vkg_status st = vkg_sampling_options_check(o, err);
    if (st != VKG_OK) return st;
    s->opts = *o;
    s->vocab = vocab;
    vkg_rng_seed(&s->rng, o->seed);
    s->cand = malloc((size_t)vocab * sizeof *s->cand);
    s->work = malloc((size_t)vocab * sizeof *s->work);
    s->seen = calloc((size_t)vocab, sizeof *s->seen);
    if (!s->cand || !s->work || !s->seen) {
        vkg_sampler_free(s);
        return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory for sampling");
    }
    return VKG_OK;
}

void vkg_sampler_free(vkg_sampler *s) {
    free(s->cand);
    free(s->work);
    free(s->seen);
    memset(s, 0, sizeof *s);
}

int vkg_sampler_is_greedy(const vkg_sampler *s) { return vkg_sampling_is_greedy(&s->opts); }

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

/* Step 1: the penalised logits in s->work, or the logits themselves when nothing is penalised. */
static const float *penalise(vkg_sampler *s, const float *logits, const int32_t *context, int n_context) {
    const float penalty = s->opts.repeat_penalty;
    int window = s->opts.repeat_last_n < 0 ? n_context : s->opts.repeat_last_n;
    if (window > n_context) window = n_context;
    if (penalty == 1.0f || window == 0) return logits;
    memcpy(s->work, logits, (size_t)s->vocab * sizeof *s->work);
    if (++s->stamp == 0) { /* wrapped: forget every old stamp */
        memset(s->seen, 0, (size_t)s->vocab * sizeof *s->seen);
        s->stamp = 1;
    }
    for (int i = n_context - window; i < n_context; i++) {
        int32_t id = context[i];
        if (id < 0 || id >= s->vocab || s->seen[id] == s->stamp) continue;
        s->seen[id] = s->stamp;
        float *x = &s->work[id];
        *x = *x > 0.0f ? *x / penalty : *x * penalty;
    }
    return s->work;
}

/* Steps 1-6: the kept candidates, most likely first, with their probabilities summing to 1.
 * *draw: whether a random draw chooses among them (not for greedy, nor when no logit is finite). */
static int candidates(vkg_sampler *s, const float *logits_in, const int32_t *context, int n_context, int *draw) {
    const float *logits = penalise(s, logits_in, context, n_context);
    int32_t best = vkg_argmax(logits, s->vocab);
    *draw = !vkg_sampler_is_greedy(s) && isfinite(logits[best]);
    if (!*draw) {
        s->cand[0] = (vkg_sampling_candidate){1.0f, best};
        return 1;
    }
    const float t = s->opts.temperature, top = logits[best];

    int n = 0;
    for (int i = 0; i < s->vocab; i++)
        if (isfinite(logits[i]) && (logits[i] - top) / t >= -CUTOFF)
            s->cand[n++] = (vkg_sampling_candidate){logits[i], i};
    qsort(s->cand, (size_t)n, sizeof *s->cand, by_value_desc);
    if (s->opts.top_k > 0 && n > s->opts.top_k) n = s->opts.top_k;

    /* Probabilities relative to the best token's (cand[0] gets exp(0) = 1 = p_max). */
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
    if (s->opts.min_p > 0.0f) {
        int keep = 1;
        double kept = s->cand[0].value;
        while (keep < n && s->cand[keep].value >= s->opts.min_p) kept += s->cand[keep++].value;
        n = keep;
        total = kept;
    }
    for (int i = 0; i < n; i++) s->cand[i].value = (float)(s->cand[i].value / total);
    return n;
}

int vkg_sampler_candidates(vkg_sampler *s, const float *logits, const int32_t *context, int n_context) {
    int draw;
    return candidates(s, logits, context, n_context, &draw);
}

int32_t vkg_sampler_next(vkg_sampler *s, const float *logits, const int32_t *context, int n_context) {
    int draw;
    int n = candidates(s, logits, context, n_context, &draw);
    if (!draw) return s->cand[0].id;
    double u = (double)vkg_rng_uniform(&s->rng), acc = 0.0;
    for (int i = 0; i < n; i++) {
        acc += s->cand[i].value;
        if (u < acc) return s->cand[i].id;
    }
    return s->cand[n - 1].id; /* u within rounding of 1 */
}
