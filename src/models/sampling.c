/* Sampling options (vkgraph_model.h), the greedy choice, and vkg_context_generate's sampler: a
 * sampler chain built from the options (see sampling.h). */
#include "models/sampling.h"

#include "base/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

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
    if (!isfinite(o->frequency_penalty) || !isfinite(o->presence_penalty))
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "sampling: the frequency and presence penalties must be "
                             "finite numbers (0 = none)");
    if (o->repeat_last_n < -1)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "sampling: repeat-last-n %d; use -1 (the whole context), "
                             "0 (none) or more", o->repeat_last_n);
    return VKG_OK;
}

int vkg_sampling_is_greedy(const vkg_sampling_options *o) { return o->temperature <= 0.0f || o->top_k == 1; }

vkg_status vkg_sampler_init(vkg_sampler *s, const vkg_sampling_options *o, int vocab, vkg_error *err) {
    memset(s, 0, sizeof *s);
    vkg_status st = vkg_sampler_chain_from_options(o, vocab, &s->chain, err);
    if (st == VKG_OK) s->opts = *o;
    return st;
}

void vkg_sampler_free(vkg_sampler *s) {
    vkg_sampler_chain_free(s->chain);
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

vkg_status vkg_sampler_next(vkg_sampler *s, const float *logits, const int32_t *context, int n_context,
                            int32_t *token, vkg_error *err) {
    return vkg_sampler_chain_run(s->chain, logits, context, n_context, 1, token, err);
}

vkg_status vkg_sampler_candidates(vkg_sampler *s, const float *logits, const int32_t *context, int n_context,
                                  const vkg_sampling_entry **out, int *n, vkg_error *err) {
    int32_t best;
    vkg_status st = vkg_sampler_chain_run(s->chain, logits, context, n_context, 0, &best, err);
    if (st != VKG_OK) return st;
    vkg_sampling_set *set = (vkg_sampling_set *)vkg_sampler_chain_set(s->chain);
    if (vkg_sampler_is_greedy(s)) { /* the greedy stage left the one token it chose */
        set->head[0] = (vkg_sampling_entry){set->best, 1.0f, best};
        *out = set->head;
        *n = 1;
        return VKG_OK;
    }
    vkg_sampling_set_probs(set);
    const double total = vkg_sampling_total(set->p, set->n);
    const int h = vkg_sampling_set_sort_all(set);
    for (int i = 0; i < h; i++) set->head[i].p = (float)(set->head[i].p / total);
    set->head_is_all = 0; /* its p are no longer the set's */
    set->n_head = 0;
    *out = set->head;
    *n = h;
    return VKG_OK;
}
