/* The candidate set of a sampler chain: filled from a logits row, narrowed in place in id order,
 * with only the head that a stage's answer can lie in sorted (see sampling_set.h). */
#include "models/sampling_set.h"

#include <stdlib.h>
#include <string.h>

/* Histogram bins of p by the top bits of its float encoding: a quarter octave each, from 1
 * down to e^-60 (about 2^-86.6), so 4 * 87 bins and a few spare. */
#define BINS 352

int vkg_sampling_set_init(vkg_sampling_set *s, int vocab) {
    memset(s, 0, sizeof *s);
    s->cap = vocab;
    s->l = malloc((size_t)vocab * sizeof *s->l);
    s->p = malloc((size_t)vocab * sizeof *s->p);
    s->id = malloc((size_t)vocab * sizeof *s->id);
    s->head = malloc((size_t)vocab * sizeof *s->head);
    s->bins = malloc(4 * BINS * sizeof *s->bins);
    s->keys = malloc((size_t)vocab * sizeof *s->keys);
    if (!s->l || !s->p || !s->id || !s->head || !s->bins || !s->keys) {
        vkg_sampling_set_free(s);
        return 0;
    }
    return 1;
}

void vkg_sampling_set_free(vkg_sampling_set *s) {
    free(s->l);
    free(s->p);
    free(s->id);
    free(s->head);
    free(s->bins);
    free(s->keys);
    memset(s, 0, sizeof *s);
}

/* vkg_sampling_exp, inlined where the probabilities are computed so that the loop vectorizes. */
static inline float exp_core(float x) {
    /* e^x = 2^n e^r with n = round(x log2 e) and |r| <= ln 2 / 2, r = x - n ln 2 in two steps
     * (Cody and Waite: the first constant has few bits, so n * C1 is exact), e^r by Cephes'
     * minimax polynomial for expf, and 2^n put together from its exponent bits. */
    x = x < -VKG_SAMPLING_CUTOFF ? -VKG_SAMPLING_CUTOFF : x;
    x = x > 0.0f ? 0.0f : x;
    const float magic = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
    const float n = (x * 1.44269504088896341f + magic) - magic;
    float r = x - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    const float r2 = r * r;
    float q = 1.9875691500e-4f;
    q = q * r + 1.3981999507e-3f;
    q = q * r + 8.3334519073e-3f;
    q = q * r + 4.1665795894e-2f;
    q = q * r + 1.6666665459e-1f;
    q = q * r + 5.0000001201e-1f;
    const float e = (q * r2 + r) + 1.0f;
    const int32_t bits = ((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return e * scale;
}

float vkg_sampling_exp(float x) { return exp_core(x); }

double vkg_sampling_total(const float *p, int n) {
    double s[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) s[j] += p[i + j];
    for (int j = 0; i + j < n; j++) s[j] += p[i + j];
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

static void forget_head(vkg_sampling_set *s) {
    s->n_head = 0;
    s->head_is_all = 0;
}

/* x86-64: AVX2 copies of the loops below beside the baseline ones, chosen when the CPU has it (the
 * same operations, no fma: the same bits either way). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define WIDE_VECTORS __attribute__((target_clones("avx2", "default")))
#else
#define WIDE_VECTORS
#endif

/* The check both fills begin with, one pass that vectorizes over the row: *bad_id the first NaN or
 * +inf (-1: none), *minus_inf how many logits are -inf, *best the largest.  Returns 0 when no token
 * can be kept (a bad logit, every logit -inf, no vocabulary): the set is then empty. */
static inline __attribute__((always_inline)) int scan(vkg_sampling_set *s, const float *logits, int32_t *bad_id,
                                                      int *minus_inf_out, float *best_out) {
    const int V = s->cap;
    *bad_id = -1;
    s->n = 0;
    if (V < 1) return 0;
    /* The largest logit as the largest of integers that order like the floats (negative ones'
     * magnitude bits flipped): an integer maximum vectorizes where a float one may not. */
    int bad = 0, minus_inf = 0;
    int32_t top_key = INT32_MIN;
    for (int i = 0; i < V; i++) {
        const float v = logits[i];
        bad |= !(v < __builtin_inff()) & (v != -__builtin_inff());
        minus_inf += v == -__builtin_inff();
        uint32_t bits;
        memcpy(&bits, &v, sizeof bits);
        const int32_t key = (int32_t)(bits ^ ((uint32_t)((int32_t)bits >> 31) & 0x7fffffffu));
        top_key = key > top_key ? key : top_key;
    }
    const uint32_t top_bits = top_key >= 0 ? (uint32_t)top_key : (uint32_t)top_key ^ 0x7fffffffu;
    memcpy(best_out, &top_bits, sizeof *best_out);
    if (bad)
        for (int i = 0; i < V; i++)
            if (!(logits[i] < __builtin_inff()) && logits[i] != -__builtin_inff()) {
                *bad_id = i;
                break;
            }
    *minus_inf_out = minus_inf;
    return !bad && minus_inf < V;
}

/* The set's facts once its n tokens are in place, the largest logit best's (token best_id). */
static void kept(vkg_sampling_set *s, int n, float best, int32_t best_id) {
    s->n = n;
    s->best = best;
    s->best_id = best_id;
    s->t = 1.0f;
    s->have_p = 0;
    forget_head(s);
}

WIDE_VECTORS int vkg_sampling_set_fill(vkg_sampling_set *s, const float *logits, int32_t *bad_id) {
    int minus_inf;
    float best;
    if (!scan(s, logits, bad_id, &minus_inf, &best)) return 0;
    const int V = s->cap;
    int n = 0;
    if (!minus_inf) { /* every token: a copy */
        memcpy(s->l, logits, (size_t)V * sizeof *s->l);
        for (int i = 0; i < V; i++) s->id[i] = i;
        n = V;
    } else {
        for (int i = 0; i < V; i++)
            if (logits[i] != -__builtin_inff()) {
                s->l[n] = logits[i];
                s->id[n++] = i;
            }
    }
    int32_t at = 0;
    while (s->l[at] != best) at++; /* the lowest id among equals */
    kept(s, n, best, s->id[at]);
    return n;
}

WIDE_VECTORS int vkg_sampling_set_fill_best(vkg_sampling_set *s, const float *logits, int32_t *bad_id) {
    int minus_inf;
    float best;
    if (!scan(s, logits, bad_id, &minus_inf, &best)) return 0;
    int32_t best_id = 0;
    while (logits[best_id] != best) best_id++; /* the lowest id among equals */
    s->l[0] = best;
    s->id[0] = best_id;
    kept(s, 1, best, best_id);
    return 1;
}

/* a comes before b in the order. */
static inline int before(float al, int32_t aid, float bl, int32_t bid) { return al > bl || (al == bl && aid < bid); }

static int by_order(const void *a, const void *b) {
    const vkg_sampling_entry *x = a, *y = b;
    if (x->logit != y->logit) return x->logit > y->logit ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* Keeps head[0..k) (the k best, sorted): the set becomes exactly its head. */
static void keep_head(vkg_sampling_set *s, int k) {
    const float ll = s->head[k - 1].logit;
    const int32_t lid = s->head[k - 1].id;
    int n = 0;
    for (int i = 0; i < s->n; i++)
        if (!before(ll, lid, s->l[i], s->id[i])) { /* at or before the last kept */
            s->l[n] = s->l[i];
            s->p[n] = s->p[i];
            s->id[n++] = s->id[i];
        }
    s->n = n;
    s->n_head = k;
    s->head_is_all = 1;
}

void vkg_sampling_set_keep_to(vkg_sampling_set *s, float last_logit, int32_t last_id) {
    int n = 0;
    for (int i = 0; i < s->n; i++)
        if (!before(last_logit, last_id, s->l[i], s->id[i])) {
            s->l[n] = s->l[i];
            s->p[n] = s->p[i];
            s->id[n++] = s->id[i];
        }
    s->n = n;
    forget_head(s);
}

/* The heap below keeps the worst of the k best at its root. */
static inline int worse(const vkg_sampling_entry *a, const vkg_sampling_entry *b) {
    return before(b->logit, b->id, a->logit, a->id);
}

static void sift_down(vkg_sampling_entry *h, int k, int i) {
    for (;;) {
        int c = 2 * i + 1;
        if (c >= k) return;
        if (c + 1 < k && worse(&h[c + 1], &h[c])) c++;
        if (!worse(&h[c], &h[i])) return;
        vkg_sampling_entry t = h[i];
        h[i] = h[c];
        h[c] = t;
        i = c;
    }
}

void vkg_sampling_set_top_k(vkg_sampling_set *s, int k) {
    if (k >= s->n) return;
    vkg_sampling_entry *h = s->head;
    for (int i = 0; i < k; i++) h[i] = (vkg_sampling_entry){s->l[i], s->p[i], s->id[i]};
    for (int i = k / 2 - 1; i >= 0; i--) sift_down(h, k, i);
    for (int i = k; i < s->n; i++) {
        if (s->l[i] < h[0].logit) continue; /* the common case: not among the k best */
        const vkg_sampling_entry e = {s->l[i], s->p[i], s->id[i]};
        if (!worse(&h[0], &e)) continue;
        h[0] = e;
        sift_down(h, k, 0);
    }
    qsort(h, (size_t)k, sizeof *h, by_order);
    keep_head(s, k);
}

WIDE_VECTORS void vkg_sampling_set_probs(vkg_sampling_set *s) {
    if (s->have_p) return;
    const float best = s->best, t = s->t;
    const float *restrict l = s->l;
    float *restrict p = s->p;
    const int count = s->n;
    int cut = 0;
    for (int i = 0; i < count; i++) {
        const float x = (l[i] - best) / t;
        cut += x < -VKG_SAMPLING_CUTOFF;
        const float e = exp_core(x);
        p[i] = x < -VKG_SAMPLING_CUTOFF ? 0.0f : e;
    }
    if (cut) {
        int n = 0;
        for (int i = 0; i < s->n; i++)
            if (s->p[i] > 0.0f) {
                s->l[n] = s->l[i];
                s->p[n] = s->p[i];
                s->id[n++] = s->id[i];
            }
        s->n = n;
    }
    s->have_p = 1;
    forget_head(s); /* its p are for another temperature */
}

/* ---- sorting: 64-bit keys that order like the entries, sorted without a comparison callback */

/* The key of the set's token i: the logit's order reversed in the high half (the largest
 * first), i in the low half (the lower id first among equals: the set is in id order). */
static inline uint64_t key_of(const vkg_sampling_set *s, int i) {
    const float v = s->l[i] + 0.0f; /* -0 and +0 are equal logits: one key */
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    const int32_t k = (int32_t)(bits ^ ((uint32_t)((int32_t)bits >> 31) & 0x7fffffffu));
    return ((uint64_t)((int64_t)INT32_MAX - (int64_t)k) << 32) | (uint32_t)i;
}

static void insertion_sort(uint64_t *k, int n) {
    for (int i = 1; i < n; i++) {
        const uint64_t x = k[i];
        int j = i - 1;
        while (j >= 0 && k[j] > x) {
            k[j + 1] = k[j];
            j--;
        }
        k[j + 1] = x;
    }
}

static void sift(uint64_t *k, int n, int i) {
    for (;;) {
        int c = 2 * i + 1;
        if (c >= n) return;
        if (c + 1 < n && k[c + 1] > k[c]) c++;
        if (k[c] <= k[i]) return;
        const uint64_t t = k[i];
        k[i] = k[c];
        k[c] = t;
        i = c;
    }
}

static void heap_sort(uint64_t *k, int n) {
    for (int i = n / 2 - 1; i >= 0; i--) sift(k, n, i);
    for (int i = n - 1; i > 0; i--) {
        const uint64_t t = k[0];
        k[0] = k[i];
        k[i] = t;
        sift(k, i, 0);
    }
}

/* Quicksort of distinct keys (median of three), heap sort past a depth limit, insertion sort
 * for short runs. */
static void sort_keys(uint64_t *k, int n, int depth) {
    while (n > 16) {
        if (depth-- == 0) {
            heap_sort(k, n);
            return;
        }
        uint64_t a = k[0], b = k[n / 2], c = k[n - 1];
        const uint64_t pivot = a < b ? (b < c ? b : a < c ? c : a) : (a < c ? a : b < c ? c : b);
        int i = 0, j = n - 1;
        for (;;) {
            while (k[i] < pivot) i++;
            while (k[j] > pivot) j--;
            if (i >= j) break;
            const uint64_t t = k[i];
            k[i++] = k[j];
            k[j--] = t;
        }
        /* [0, j] <= pivot <= [j + 1, n): recurse into the shorter side */
        const int left = j + 1;
        if (left < n - left) {
            sort_keys(k, left, depth);
            k += left;
            n -= left;
        } else {
            sort_keys(k + left, n - left, depth);
            n = left;
        }
    }
    insertion_sort(k, n);
}

/* Sorts the set's tokens idx[0..h) (held as keys) into head. */
static void sort_into_head(vkg_sampling_set *s, int h) {
    int depth = 2;
    for (int m = h; m > 1; m >>= 1) depth += 2;
    sort_keys(s->keys, h, depth);
    for (int i = 0; i < h; i++) {
        const uint32_t at = (uint32_t)s->keys[i];
        s->head[i] = (vkg_sampling_entry){s->l[at], s->p[at], s->id[at]};
    }
}

int vkg_sampling_set_sort_all(vkg_sampling_set *s) {
    if (s->head_is_all) return s->n_head;
    for (int i = 0; i < s->n; i++) s->keys[i] = key_of(s, i);
    sort_into_head(s, s->n);
    s->n_head = s->n;
    s->head_is_all = 1;
    return s->n;
}

/* The bin of a probability in (0, 1]: 0 for 1, one more each quarter octave below. */
static inline int bin_of(float p) {
    uint32_t bits;
    memcpy(&bits, &p, sizeof bits);
    const int32_t d = (int32_t)(0x3f800000u - bits) >> 21;
    return d < 0 ? 0 : d >= BINS ? BINS - 1 : d;
}

int vkg_sampling_set_head(vkg_sampling_set *s, double mass) {
    if (s->head_is_all) return s->n_head;
    if (s->n <= 256) return vkg_sampling_set_sort_all(s);
    /* p follows the logit (within the 2 ulp by which vkg_sampling_exp may step back, which
     * moves a token at most one bin), so a token before one of bin b in the order is in a bin
     * <= b + 1: the bins down to the one where the mass is reached, and one more, hold a sorted
     * prefix of the whole order with at least that mass.  The margin of 1e-6 of the mass covers
     * the rounding of the walks that read the head.  Four histograms, added into by turns, keep
     * the additions to one bin from waiting on each other. */
    double *bins = s->bins;
    for (int b = 0; b < 4 * BINS; b++) bins[b] = 0.0;
    const float *p = s->p;
    const int n = s->n;
    int i = 0;
    for (; i + 4 <= n; i += 4)
        for (int j = 0; j < 4; j++) bins[j * BINS + bin_of(p[i + j])] += p[i + j];
    for (; i < n; i++) bins[bin_of(p[i])] += p[i];
    const double want = mass * (1.0 + 1e-6);
    double cum = 0.0;
    int last = BINS - 1;
    for (int b = 0; b < BINS; b++) {
        cum += (bins[b] + bins[BINS + b]) + (bins[2 * BINS + b] + bins[3 * BINS + b]);
        if (cum >= want) {
            last = b;
            break;
        }
    }
    if (last >= BINS - 2) return vkg_sampling_set_sort_all(s);
    last++;
    /* Bins 0..last are the probabilities above the float whose encoding starts bin last + 1. */
    const uint32_t floor_bits = 0x3f800000u - ((uint32_t)(last + 1) << 21);
    float floor_p;
    memcpy(&floor_p, &floor_bits, sizeof floor_p);
    int h = 0;
    for (i = 0; i < n; i++)
        if (p[i] > floor_p) s->keys[h++] = key_of(s, i);
    sort_into_head(s, h);
    s->n_head = h;
    s->head_is_all = h == s->n;
    return h;
}

void vkg_sampling_set_keep_head(vkg_sampling_set *s, int k) { keep_head(s, k); }
