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
    s->bins = malloc(BINS * sizeof *s->bins);
    if (!s->l || !s->p || !s->id || !s->head || !s->bins) {
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
    memset(s, 0, sizeof *s);
}

float vkg_sampling_exp(float x) {
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
    q = q * r + 8.3333519073e-3f;
    q = q * r + 4.1665795894e-2f;
    q = q * r + 1.6666665459e-1f;
    q = q * r + 5.0000001201e-1f;
    const float e = (q * r2 + r) + 1.0f;
    const int32_t bits = ((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return e * scale;
}

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

int vkg_sampling_set_fill(vkg_sampling_set *s, const float *logits, int32_t *bad_id) {
    *bad_id = -1;
    int bad = 0;
    for (int i = 0; i < s->cap; i++) bad |= !(logits[i] < __builtin_inff()) && logits[i] != -__builtin_inff();
    if (bad) {
        for (int i = 0; i < s->cap; i++)
            if (!(logits[i] < __builtin_inff()) && logits[i] != -__builtin_inff()) {
                *bad_id = i;
                break;
            }
        s->n = 0;
        return 0;
    }
    int n = 0;
    float best = -__builtin_inff();
    int32_t best_id = -1;
    for (int i = 0; i < s->cap; i++) {
        const float v = logits[i];
        if (v == -__builtin_inff()) continue;
        s->l[n] = v;
        s->id[n++] = i;
        if (best_id < 0 || v > best) {
            best = v;
            best_id = i;
        }
    }
    s->n = n;
    s->best = best;
    s->best_id = best_id;
    s->t = 1.0f;
    s->have_p = 0;
    forget_head(s);
    return n;
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

void vkg_sampling_set_probs(vkg_sampling_set *s) {
    if (s->have_p) return;
    const float best = s->best, t = s->t;
    int cut = 0;
    for (int i = 0; i < s->n; i++) {
        const float x = (s->l[i] - best) / t;
        cut += x < -VKG_SAMPLING_CUTOFF;
        s->p[i] = x < -VKG_SAMPLING_CUTOFF ? 0.0f : vkg_sampling_exp(x);
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

int vkg_sampling_set_sort_all(vkg_sampling_set *s) {
    if (s->head_is_all) return s->n_head;
    for (int i = 0; i < s->n; i++) s->head[i] = (vkg_sampling_entry){s->l[i], s->p[i], s->id[i]};
    qsort(s->head, (size_t)s->n, sizeof *s->head, by_order);
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
     * the rounding of the walks that read the head. */
    for (int b = 0; b < BINS; b++) s->bins[b] = 0.0;
    for (int i = 0; i < s->n; i++) s->bins[bin_of(s->p[i])] += s->p[i];
    const double want = mass * (1.0 + 1e-6);
    double cum = 0.0;
    int last = BINS - 1;
    for (int b = 0; b < BINS; b++) {
        cum += s->bins[b];
        if (cum >= want) {
            last = b;
            break;
        }
    }
    if (last >= BINS - 2) return vkg_sampling_set_sort_all(s);
    last++;
    int h = 0;
    for (int i = 0; i < s->n; i++)
        if (bin_of(s->p[i]) <= last) s->head[h++] = (vkg_sampling_entry){s->l[i], s->p[i], s->id[i]};
    qsort(s->head, (size_t)h, sizeof *s->head, by_order);
    s->n_head = h;
    s->head_is_all = h == s->n;
    return h;
}

void vkg_sampling_set_keep_head(vkg_sampling_set *s, int k) { keep_head(s, k); }
