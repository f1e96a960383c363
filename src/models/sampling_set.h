/*
 * The candidate set a sampler chain narrows (sampler_chain.c): the tokens still in the running,
 * kept in id order, each with its logit and, once a stage needs them, its probability relative
 * to the best token.  The stages that need an order (top-k, top-p, the draw) never sort the whole
 * vocabulary: they sort only the head of the set that their answer can lie in.
 *
 * Definitions every implementation must follow to give the same draws (the tests hold a
 * straightforward full-sort implementation of them):
 *   - order: by logit, largest first, the lower id first among equals (a total order);
 *   - x_i = (logit_i - best logit) / T, T the product of the temperatures applied so far;
 *     a token with x_i < -VKG_SAMPLING_CUTOFF leaves the set when probabilities are computed;
 *   - p_i = vkg_sampling_exp(x_i), in (0, 1], the best token's exactly 1;
 *   - the total of a set is vkg_sampling_total over its p_i in id order.
 */
#ifndef VKG_MODELS_SAMPLING_SET_H
#define VKG_MODELS_SAMPLING_SET_H

#include <stdint.h>

/* Below e^-60 of the best token's probability a token cannot change a float32 sum. */
#define VKG_SAMPLING_CUTOFF 60.0f

/* e^x for x in [-VKG_SAMPLING_CUTOFF, 0], within 2 ulp of the exact value, with the same bits on
 * every machine (float arithmetic without contraction; no libm), and vectorisable. */
float vkg_sampling_exp(float x);
/* The sum of p[0..n) in double: eight partial sums over the indices i mod 8 (each in index
 * order), added as ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7)). */
double vkg_sampling_total(const float *p, int n);

/* One token of a sorted head. */
typedef struct vkg_sampling_entry {
    float logit;
    float p;         /* probability relative to the best (valid when the set's have_p) */
    int32_t id;
} vkg_sampling_entry;

typedef struct vkg_sampling_set {
    int cap;                   /* the vocabulary                                        */
    int n;                     /* tokens in the set, in id order in l, p, id            */
    float *l, *p;              /* [cap]                                                 */
    int32_t *id;               /* [cap]                                                 */
    float best;                /* the best token's logit (it never leaves the set)      */
    int32_t best_id;
    float t;                   /* the product of the temperatures applied               */
    int have_p;                /* p holds the probabilities for the present t           */
    vkg_sampling_entry *head;  /* [cap]: the n_head best tokens of the set, in order    */
    int n_head;
    int head_is_all;           /* head holds the whole set                              */
    double *bins;              /* scratch: four histograms of p                         */
    uint64_t *keys;            /* [cap] scratch: sort keys                              */
} vkg_sampling_set;

int vkg_sampling_set_init(vkg_sampling_set *s, int vocab);   /* 0: out of memory */
void vkg_sampling_set_free(vkg_sampling_set *s);

/* Every token with a finite logit; *bad_id gets the first NaN or +inf id (the set is then left
 * unusable), else -1.  Returns the tokens kept (0: every logit is -inf). */
int vkg_sampling_set_fill(vkg_sampling_set *s, const float *logits, int32_t *bad_id);
/* The same check, and the set that fill then keep_to(best) would leave, its one token the largest
 * logit's (the lowest id among equals), without copying the others: greedy's whole work. */
int vkg_sampling_set_fill_best(vkg_sampling_set *s, const float *logits, int32_t *bad_id);
/* Keeps the tokens in order up to and including the entry `last` (which is in the set). */
void vkg_sampling_set_keep_to(vkg_sampling_set *s, float last_logit, int32_t last_id);
/* Keeps head[0..k) (1 <= k <= n_head): the set becomes exactly that head, sorted. */
void vkg_sampling_set_keep_head(vkg_sampling_set *s, int k);
/* Keeps the k best (k >= 1). */
void vkg_sampling_set_top_k(vkg_sampling_set *s, int k);
/* Computes p for the present temperature (dropping tokens under the cutoff). */
void vkg_sampling_set_probs(vkg_sampling_set *s);
/* Sorts into head at least the best tokens whose probabilities sum to `mass` (p units; the
 * set's probabilities must be computed), more when needed to be sure; `mass` past the total
 * sorts the whole set.  Returns n_head. */
int vkg_sampling_set_head(vkg_sampling_set *s, double mass);
/* The whole set sorted into head. */
int vkg_sampling_set_sort_all(vkg_sampling_set *s);

#endif
