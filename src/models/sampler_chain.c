/* Sampler chains (vkgraph_model.h): stages that narrow a candidate set (sampling_set.h) and a
 * last one that chooses.  vkg_context_generate runs one too (sampling.h), so there is one
 * implementation of every stage. */
#include "models/sampling.h"

#include "base/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef enum stage_kind { PENALTIES, TEMPERATURE, TOP_K, TOP_P, MIN_P, GREEDY, DIST } stage_kind;

typedef struct stage {
    stage_kind kind;
    float value;                     /* temperature, top_p, min_p                  */
    int k;                           /* top_k; the penalties' window               */
    float repeat, frequency, presence;
} stage;

enum { MAX_STAGES = 16 };

struct vkg_sampler_chain {
    int vocab;
    stage stages[MAX_STAGES];
    int n_stages;
    uint64_t seed;
    vkg_rng rng;
    int32_t *history;                /* accepted tokens, oldest first              */
    int n_history, cap_history;
    float *work;                     /* [vocab]: the penalised logits              */
    uint32_t *seen;                  /* [vocab]: stamp of the last call counting an id */
    int32_t *count;                  /* [vocab]: occurrences in the window         */
    int32_t *distinct;               /* [vocab]: the ids of the window             */
    uint32_t stamp;
    vkg_sampling_set set;
};

vkg_status vkg_sampler_chain_new(int n_vocab, vkg_sampler_chain **out, vkg_error *err) {
    if (out) *out = NULL;
    if (!out) return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_sampler_chain_new: NULL argument");
    if (n_vocab < 1) return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "sampling: vocabulary of %d tokens", n_vocab);
    vkg_sampler_chain *c = calloc(1, sizeof *c);
    if (!c) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory for a sampler chain");
    c->vocab = n_vocab;
    c->work = malloc((size_t)n_vocab * sizeof *c->work);
    c->seen = calloc((size_t)n_vocab, sizeof *c->seen);
    c->count = malloc((size_t)n_vocab * sizeof *c->count);
    c->distinct = malloc((size_t)n_vocab * sizeof *c->distinct);
    if (!c->work || !c->seen || !c->count || !c->distinct || !vkg_sampling_set_init(&c->set, n_vocab)) {
        vkg_sampler_chain_free(c);
        return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory for a sampler chain of %d tokens", n_vocab);
    }
    vkg_rng_seed(&c->rng, 0);
    *out = c;
    return VKG_OK;
}

void vkg_sampler_chain_free(vkg_sampler_chain *c) {
    if (!c) return;
    free(c->history);
    free(c->work);
    free(c->seen);
    free(c->count);
    free(c->distinct);
    vkg_sampling_set_free(&c->set);
    free(c);
}

static vkg_status add(vkg_sampler_chain *c, stage s, const char *name, vkg_error *err) {
    if (!c) return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "sampler chain: NULL chain");
    if (c->n_stages && (c->stages[c->n_stages - 1].kind == GREEDY || c->stages[c->n_stages - 1].kind == DIST))
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "sampler chain: %s after %s, which chooses the token: "
                             "add it earlier", name, c->stages[c->n_stages - 1].kind == GREEDY ? "greedy" : "dist");
    if (s.kind == PENALTIES && c->n_stages)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "sampler chain: penalties apply to the logits as given: "
                             "add them first");
    if (c->n_stages == MAX_STAGES)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "sampler chain: more than %d stages", MAX_STAGES);
    c->stages[c->n_stages++] = s;
    return VKG_OK;
}

vkg_status vkg_sampler_chain_add_penalties(vkg_sampler_chain *c, int last_n, float repeat, float frequency,
                                           float presence, vkg_error *err) {
    if (!(isfinite(repeat) && repeat > 0.0f))
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "sampling: the repetition penalty must be a positive "
                             "number (1 = none)");
    if (!isfinite(frequency) || !isfinite(presence))
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "sampling: the frequency and presence penalties must be "
                             "finite numbers (0 = none)");
    if (last_n < -1)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "sampling: repeat-last-n %d; use -1 (the whole context), "
                             "0 (none) or more", last_n);
    return add(c, (stage){.kind = PENALTIES, .k = last_n, .repeat = repeat, .frequency = frequency,
                          .presence = presence}, "penalties", err);
}

vkg_status vkg_sampler_chain_add_temperature(vkg_sampler_chain *c, float t, vkg_error *err) {
    if (!isfinite(t))
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "sampling: temperature must be a finite number (0 = greedy)");
    return add(c, (stage){.kind = TEMPERATURE, .value = t}, "temperature", err);
}

vkg_status vkg_sampler_chain_add_top_k(vkg_sampler_chain *c, int k, vkg_error *err) {
    if (k < 0) return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "sampling: top-k %d; use 0 (no limit) or more", k);
    return add(c, (stage){.kind = TOP_K, .k = k}, "top-k", err);
}

vkg_status vkg_sampler_chain_add_top_p(vkg_sampler_chain *c, float p, vkg_error *err) {
    if (!isfinite(p))
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "sampling: top-p must be a number in (0, 1] (1 = no limit)");
    return add(c, (stage){.kind = TOP_P, .value = p}, "top-p", err);
}

vkg_status vkg_sampler_chain_add_min_p(vkg_sampler_chain *c, float p, vkg_error *err) {
    if (!(p >= 0.0f && p <= 1.0f))
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "sampling: min-p must be a number in [0, 1] (0 = no limit)");
    return add(c, (stage){.kind = MIN_P, .value = p}, "min-p", err);
}

vkg_status vkg_sampler_chain_add_greedy(vkg_sampler_chain *c, vkg_error *err) {
    return add(c, (stage){.kind = GREEDY}, "greedy", err);
}

vkg_status vkg_sampler_chain_add_dist(vkg_sampler_chain *c, uint64_t seed, vkg_error *err) {
    vkg_status st = add(c, (stage){.kind = DIST}, "dist", err);
    if (st == VKG_OK) {
        c->seed = seed;
        vkg_rng_seed(&c->rng, seed);
    }
    return st;
}

vkg_status vkg_sampler_chain_from_options(const vkg_sampling_options *o, int n_vocab, vkg_sampler_chain **out,
                                          vkg_error *err) {
    if (out) *out = NULL;
    if (!o || !out) return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_sampler_chain_from_options: NULL argument");
    vkg_status st = vkg_sampling_options_check(o, err);
    if (st != VKG_OK) return st;
    vkg_sampler_chain *c;
    if ((st = vkg_sampler_chain_new(n_vocab, &c, err)) != VKG_OK) return st;
    if (o->repeat_penalty != 1.0f || o->frequency_penalty != 0.0f || o->presence_penalty != 0.0f)
        st = vkg_sampler_chain_add_penalties(c, o->repeat_last_n, o->repeat_penalty, o->frequency_penalty,
                                             o->presence_penalty, err);
    if (st == VKG_OK && vkg_sampling_is_greedy(o)) st = vkg_sampler_chain_add_greedy(c, err);
    else if (st == VKG_OK) {
        if (o->top_k > 0) st = vkg_sampler_chain_add_top_k(c, o->top_k, err);
        if (st == VKG_OK) st = vkg_sampler_chain_add_temperature(c, o->temperature, err);
        if (st == VKG_OK && o->top_p > 0.0f && o->top_p < 1.0f) st = vkg_sampler_chain_add_top_p(c, o->top_p, err);
        if (st == VKG_OK && o->min_p > 0.0f) st = vkg_sampler_chain_add_min_p(c, o->min_p, err);
        if (st == VKG_OK) st = vkg_sampler_chain_add_dist(c, o->seed, err);
    }
    if (st != VKG_OK) {
        vkg_sampler_chain_free(c);
        return st;
    }
    *out = c;
    return VKG_OK;
}

/* The penalised logits in c->work, or the logits themselves when nothing is penalised. */
static const float *penalise(vkg_sampler_chain *c, const stage *s, const float *logits, const int32_t *context,
                             int n_context) {
    int window = s->k < 0 ? n_context : s->k;
    if (window > n_context) window = n_context;
    if ((s->repeat == 1.0f && s->frequency == 0.0f && s->presence == 0.0f) || window == 0) return logits;
    memcpy(c->work, logits, (size_t)c->vocab * sizeof *c->work);
    if (++c->stamp == 0) { /* wrapped: forget every old stamp */
        memset(c->seen, 0, (size_t)c->vocab * sizeof *c->seen);
        c->stamp = 1;
    }
    int n = 0;
    for (int i = n_context - window; i < n_context; i++) {
        const int32_t id = context[i];
        if (id < 0 || id >= c->vocab) continue;
        if (c->seen[id] != c->stamp) {
            c->seen[id] = c->stamp;
            c->count[id] = 0;
            c->distinct[n++] = id;
        }
        c->count[id]++;
    }
    for (int i = 0; i < n; i++) {
        const int32_t id = c->distinct[i];
        float x = c->work[id];
        if (s->repeat != 1.0f) x = x > 0.0f ? x / s->repeat : x * s->repeat;
        if (s->frequency != 0.0f || s->presence != 0.0f) x -= (float)c->count[id] * s->frequency + s->presence;
        c->work[id] = x;
    }
    return c->work;
}

/* Keeps the shortest run of best tokens whose probabilities sum to at least p of the set's. */
static void top_p(vkg_sampling_set *set, float p) {
    vkg_sampling_set_probs(set);
    const double target = (double)p * vkg_sampling_total(set->p, set->n);
    for (int pass = 0; pass < 2; pass++) {
        const int h = pass ? vkg_sampling_set_sort_all(set) : vkg_sampling_set_head(set, target);
        double kept = 0.0;
        int keep = 0;
        while (keep < h && (keep == 0 || kept < target)) kept += set->head[keep++].p;
        if (kept >= target || set->head_is_all) {
            vkg_sampling_set_keep_head(set, keep);
            return;
        }
    }
}

static void min_p(vkg_sampling_set *set, float m) {
    vkg_sampling_set_probs(set);
    int n = 0;
    for (int i = 0; i < set->n; i++)
        if (set->p[i] >= m) {
            set->l[n] = set->l[i];
            set->p[n] = set->p[i];
            set->id[n++] = set->id[i];
        }
    set->n = n;
    set->n_head = 0;
    set->head_is_all = 0;
}

/* A draw: the first token, in order, at which the running sum of p / total passes u. */
static int32_t draw(vkg_sampler_chain *c) {
    vkg_sampling_set *set = &c->set;
    vkg_sampling_set_probs(set);
    const double total = vkg_sampling_total(set->p, set->n);
    const double u = (double)vkg_rng_uniform(&c->rng);
    for (int pass = 0; pass < 2; pass++) {
        const int h = pass ? vkg_sampling_set_sort_all(set) : vkg_sampling_set_head(set, u * total);
        double acc = 0.0;
        for (int i = 0; i < h; i++) {
            acc += (double)(float)(set->head[i].p / total);
            if (u < acc) return set->head[i].id;
        }
        if (set->head_is_all) return set->head[h - 1].id; /* u within rounding of 1 */
    }
    return set->best_id; /* not reached: the second pass sorts the whole set */
}

vkg_status vkg_sampler_chain_run(vkg_sampler_chain *c, const float *logits, const int32_t *context, int n_context,
                                 int do_draw, int32_t *token, vkg_error *err) {
    const float *row = logits;
    int first = 0;
    if (c->n_stages && c->stages[0].kind == PENALTIES) {
        row = penalise(c, &c->stages[0], logits, context, n_context);
        first = 1;
    }
    vkg_sampling_set *set = &c->set;
    int32_t bad;
    /* A chain that goes greedy first keeps the largest logit alone: found in the checking pass,
     * without copying the row (the later stages, given one token, keep it). */
    const stage *lead = first < c->n_stages ? &c->stages[first] : NULL;
    const int greedy = lead && (lead->kind == GREEDY || (lead->kind == TEMPERATURE && lead->value <= 0.0f));
    const int n = greedy ? vkg_sampling_set_fill_best(set, row, &bad) : vkg_sampling_set_fill(set, row, &bad);
    first += greedy;
    if (bad >= 0)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "sampling: the logit of token %d is %s: no token can be "
                             "chosen from it", (int)bad, isnan(row[bad]) ? "NaN" : "+inf");
    if (n == 0) return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "sampling: every logit is -inf: no token can be chosen");
    for (int i = first; i < c->n_stages; i++) {
        const stage *s = &c->stages[i];
        switch (s->kind) {
        case PENALTIES: break; /* first only */
        case TEMPERATURE:
            if (s->value <= 0.0f) {
                vkg_sampling_set_keep_to(set, set->best, set->best_id);
            } else {
                set->t *= s->value;
                set->have_p = 0;
                set->n_head = 0;
                set->head_is_all = 0;
            }
            break;
        case TOP_K:
            if (s->k > 0) vkg_sampling_set_top_k(set, s->k);
            break;
        case TOP_P:
            if (s->value > 0.0f && s->value < 1.0f) top_p(set, s->value);
            break;
        case MIN_P:
            if (s->value > 0.0f) min_p(set, s->value);
            break;
        case GREEDY: vkg_sampling_set_keep_to(set, set->best, set->best_id); break;
        case DIST:
            if (do_draw) {
                *token = draw(c);
                return VKG_OK;
            }
            break;
        }
    }
    *token = set->best_id;
    return VKG_OK;
}

vkg_status vkg_sampler_chain_sample(vkg_sampler_chain *c, const float *logits, size_t n, int32_t *token,
                                    vkg_error *err) {
    if (!c || !logits || !token)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_sampler_chain_sample: NULL argument");
    if (n != (size_t)c->vocab)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "sampling: %zu logits for a chain of %d tokens", n,
                             c->vocab);
    return vkg_sampler_chain_run(c, logits, c->history, c->n_history, 1, token, err);
}

vkg_status vkg_sampler_chain_accept(vkg_sampler_chain *c, int32_t token, vkg_error *err) {
    if (!c) return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_sampler_chain_accept: NULL chain");
    if (token < 0 || token >= c->vocab)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "sampling: token %d is outside the vocabulary [0, %d)",
                             (int)token, c->vocab);
    /* Only the penalties' window is kept (all of it for last_n -1). */
    const int keep = c->n_stages && c->stages[0].kind == PENALTIES ? c->stages[0].k : 0;
    if (keep >= 0 && c->n_history >= keep + 1024) {
        memmove(c->history, c->history + c->n_history - keep, (size_t)keep * sizeof *c->history);
        c->n_history = keep;
    }
    if (c->n_history == c->cap_history) {
        const int cap = c->cap_history ? 2 * c->cap_history : 256;
        int32_t *h = realloc(c->history, (size_t)cap * sizeof *h);
        if (!h) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory for the sampler's history");
        c->history = h;
        c->cap_history = cap;
    }
    c->history[c->n_history++] = token;
    return VKG_OK;
}

void vkg_sampler_chain_reset(vkg_sampler_chain *c) {
    if (!c) return;
    c->n_history = 0;
    vkg_rng_seed(&c->rng, c->seed);
}

const vkg_sampling_set *vkg_sampler_chain_set(const vkg_sampler_chain *c) { return &c->set; }
vkg_rng *vkg_sampler_chain_rng(vkg_sampler_chain *c) { return &c->rng; }
