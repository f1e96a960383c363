/* The blocked attention algorithm, once, for any vector width: included by one file per variant
 * (attention_portable.c, attention_avx2.c, attention_avx512.c) after it defines
 *   ATTN_NAME        the variant's entry point (a vkg_attn_fn, attention_variant.h)
 *   vf, VL           its vector type of VL floats (cpu/vec_*.h)
 *   SCORE_ACC        vectors of scores a register tile holds
 *   CH, PV_ROWS      P.V holds PV_ROWS rows x CH vectors of output sums in registers
 *   NARROW_MAX_ROWS  the largest group whose keys go into the vector lanes ("few rows", below)
 *   vzero, vload, vstore, vset1, vmul, vmadd(a, b, c) = a * b + c (fused or not),
 *   vkeep(&x)        keeps x in a register (no effect on the value): a v chunk loaded once
 *                    serves PV_ROWS rows instead of being reloaded into each multiply-add
 *
 * Up to VKG_ATTN_GROUP consecutive query rows of one batch entry (or of the b1 entries of one b0
 * when k and v broadcast over b1: grouped-query attention's heads) form a group; the group's q is
 * packed transposed once (qT[d][r]: vector lanes are rows), and the keys are taken in blocks of
 * KB (blocks start at key 0, KB, 2 KB, ... whatever the group), read in place.  For each block
 * and each row of the group:
 *   s_j   = scale * (q . k_j), the dot summed in d order from 0 by vmadd; keys past the row's
 *           last (the causal mask) get s_j = -inf, as do keys past S in the last block;
 *   m'    = max(m, max_j s_j);  b = m' unless m' = -inf (nothing seen yet: then b = 0)
 *   c     = exp(m - b),  p_j = exp(s_j - b)                         (vkg_cpu_exp)
 *   l     = l c + p_0 + p_1 + ... (in key order)
 *   acc   = acc c, then acc += p_j v_j by vmadd in key order, skipping keys with s_j = -inf
 *   out   = l == 0 ? 0 : acc / l
 * A block whose scores are all -inf leaves a row exactly as it was (c = 1, or c = 0 with
 * everything still 0).  Keys with s_j = -inf and masked keys take no part (not even 0 * v_j,
 * which a non-finite v_j would turn into NaN); a NaN score makes p_j, hence l and the outputs,
 * NaN, as in the reference.  Every step of a row depends on that row, KB and the block's
 * position only, never on the vector width or the other rows of its group: the results do not
 * depend on how the units were cut, and the fused variants agree bit for bit.  A group of one or
 * two rows (a decode step) takes the block's keys into the lanes instead, for the same bits
 * ("few rows", below).
 *
 * The blocks are walked in chunks of VKG_ATTN_CHUNK keys (chunk c: keys c CK .. c CK + CK - 1),
 * each from a fresh state (m = -inf, l = 0, acc = 0), the chunks' states folded into the row's
 * total in key order (vkg_attn_fold) before out = acc / l: one thread walking a group's chunks
 * one after another (ATTN_NAME) and threads taking a chunk each (ATTN_CHUNK_NAME, folded by
 * vkg_cpu_attention_merge) give the same bits. */
#include <stdint.h>
#include <string.h>

#include "cpu/attention_variant.h"
#include "cpu/vec_x4.h"

#define KB VKG_ATTN_KEYS
#define GPAD VKG_ATTN_GROUP /* lanes of the transposed buffers: one per row of a group */
#define ALIGNED __attribute__((aligned(64)))
#define ATTN_CAT2(a, b) a##b
#define ATTN_CAT(a, b) ATTN_CAT2(a, b)
#define ATTN_CHUNK_NAME ATTN_CAT(ATTN_NAME, _chunk)
#define INLINE static inline __attribute__((always_inline))

_Static_assert(VKG_ATTENTION_MAX_DV % (CH * VL) == 0, "output rows are whole register chunks");
_Static_assert(GPAD % PV_ROWS == 0, "P.V row tiles within a group");
_Static_assert(GPAD % VL == 0 && (GPAD / VL & (GPAD / VL - 1)) == 0 && GPAD <= 8 * VL && SCORE_ACC >= 8,
               "a group is 1, 2, 4 or 8 vectors of rows, and a score tile at least 8 vectors");

/* The buffers of one group (on the stack: about 170 KiB). */
typedef struct group {
    float qT[VKG_ATTN_MAX_D * GPAD] ALIGNED;   /* q transposed: row r's q_d at d * GPAD + r      */
    float s[KB * GPAD] ALIGNED;                /* the block's scores: row r's s_j at j * GPAD + r */
    float p[KB * GPAD] ALIGNED;                /* their weights, laid out alike                   */
    float vp[KB * VKG_ATTENTION_MAX_DV];       /* the block's values, where not read in place     */
    float kT[VKG_ATTN_MAX_D * KB] ALIGNED;     /* few rows: the block's keys transposed, k_j[d] at
                                                  d * KB + j (vector lanes are keys)              */
    float sn[NARROW_MAX_ROWS * KB] ALIGNED;    /* few rows: row r's scores s_j at r * KB + j       */
    float acc[VKG_ATTN_GROUP * VKG_ATTENTION_MAX_DV]; /* row r's output sums at r * dv_pad     */
    float m[GPAD] ALIGNED, l[GPAD] ALIGNED, base[GPAD] ALIGNED, corr[GPAD] ALIGNED;
    /* the rows' states over the chunks before this one (vkg_attn_fold), laid out as m, l, acc */
    float tacc[VKG_ATTN_GROUP * VKG_ATTENTION_MAX_DV], tm[GPAD], tl[GPAD];
    vkg_attn_row rows[VKG_ATTN_GROUP];
} group;

/* A decode step reads a long cache's keys and values from memory, once: the few-rows path (below)
 * and the one-row P.V prefetch each key's and value's row PREFETCH_KEYS keys before reading it,
 * where the hardware's prefetchers alone held GPT-2's decode attention over 1000 keys to a third
 * of the read bandwidth the matmuls reach (64 keys ahead: 1.2 times faster on one thread; 32 and
 * 128 no better).  Only keys the walk goes on to read are prefetched, and a group's first
 * PREFETCH_KEYS while the group before it runs (prefetch_group): a batched decode step's many
 * short caches (GPT-2 124M, 8 sequences of 10 to 30 keys) spent a quarter of their attention
 * prefetching lines past their ends and much of the rest waiting for their first keys; both
 * changes made that step's attention 1.4 to 1.6 times faster.  The row-lanes path, whose keys a
 * prompt's rows share from cache, does without. */
enum { PREFETCH_KEYS = 64 };

/* Prefetches n floats from x + ahead floats on (computed as an address: past a buffer's end a
 * prefetch is harmless, it never faults). */
INLINE void prefetch_row(const float *x, size_t ahead, size_t n) {
    const uintptr_t a = (uintptr_t)x + ahead * sizeof(float);
    for (size_t i = 0; i < n; i += 64 / sizeof(float)) __builtin_prefetch((const void *)(a + i * sizeof(float)));
}

/* s[j][r] = scale * (q_r . k_j) for JT keys (k_j[d] at kr[j * ks + d * kds]) x RV vectors of
 * rows; RV and JT are constants wherever it is inlined. */
INLINE void score_tile(int RV, int JT, const float *qT, size_t D, const float *kr, size_t ks, size_t kds,
                       float scale, float *s) {
    vf acc[SCORE_ACC];
    for (int i = 0; i < RV * JT; i++) acc[i] = vzero();
    for (size_t d = 0; d < D; d++) {
        vf qd[SCORE_ACC];
        for (int c = 0; c < RV; c++) qd[c] = vload(qT + d * GPAD + c * VL);
        for (int j = 0; j < JT; j++) {
            const vf kd = vset1(kr[j * ks + d * kds]);
            for (int c = 0; c < RV; c++) acc[j * RV + c] = vmadd(kd, qd[c], acc[j * RV + c]);
        }
    }
    const vf sc = vset1(scale);
    for (int j = 0; j < JT; j++)
        for (int c = 0; c < RV; c++) vstore(s + j * GPAD + c * VL, vmul(sc, acc[j * RV + c]));
}

/* The scores of nb keys from kr for RV vectors of rows: whole tiles, then one key at a time. */
INLINE void score_keys(int RV, const float *qT, size_t D, const float *kr, size_t ks, size_t kds, float scale,
                       float *s, size_t nb) {
    const int JT = SCORE_ACC / RV;
    size_t j = 0;
    for (; j + (size_t)JT <= nb; j += JT) score_tile(RV, JT, qT, D, kr + j * ks, ks, kds, scale, s + j * GPAD);
    for (; j < nb; j++) score_tile(RV, 1, qT, D, kr + j * ks, ks, kds, scale, s + j * GPAD);
}

/* One row's P.V over n keys of a block: acc = acc c + the live keys' p_j v_j (v_j at
 * vrows + j * v_step, dv_pad floats); s and p point at the row's lane of the first key.  Values
 * are prefetched PREFETCH_KEYS keys ahead while within the `ahead` keys the walk reads from
 * vrows on. */
INLINE void row_values(const float *s, const float *p, size_t n, float corr, float *acc, size_t dv_pad,
                       const float *vrows, size_t v_step, size_t ahead) {
    const vf cv = vset1(corr);
    for (size_t x = 0; x < dv_pad; x += CH * VL) {
        vf a[CH];
        for (int c = 0; c < CH; c++) a[c] = vmul(vload(acc + x + c * VL), cv);
        for (size_t j = 0; j < n; j++) {
            if (j + PREFETCH_KEYS < ahead) prefetch_row(vrows + j * v_step + x, PREFETCH_KEYS * v_step, CH * VL);
            if (s[j * GPAD] == -INFINITY) continue;
            const vf pj = vset1(p[j * GPAD]);
            const float *vr = vrows + j * v_step + x;
            for (int c = 0; c < CH; c++) a[c] = vmadd(pj, vload(vr + c * VL), a[c]);
        }
        for (int c = 0; c < CH; c++) vstore(acc + x + c * VL, a[c]);
    }
}

/* The same for PV_ROWS consecutive rows none of whose first n keys has a -inf score: each v
 * chunk loaded once serves every row (row i's lane is i, its sums at acc + i * dv_pad). */
INLINE void rows_values(const float *p, size_t n, const float *corr, float *acc, size_t dv_pad,
                        const float *vrows, size_t v_step) {
    for (size_t x = 0; x < dv_pad; x += CH * VL) {
        vf a[PV_ROWS][CH];
        for (int i = 0; i < PV_ROWS; i++) {
            const vf cv = vset1(corr[i]);
            for (int c = 0; c < CH; c++) a[i][c] = vmul(vload(acc + i * dv_pad + x + c * VL), cv);
        }
        for (size_t j = 0; j < n; j++) {
            const float *vr = vrows + j * v_step + x;
            vf pj[PV_ROWS];
            for (int i = 0; i < PV_ROWS; i++) pj[i] = vset1(p[j * GPAD + i]);
            for (int c = 0; c < CH; c++) {
                vf vj = vload(vr + c * VL);
                vkeep(&vj);
                for (int i = 0; i < PV_ROWS; i++) a[i][c] = vmadd(pj[i], vj, a[i][c]);
            }
        }
        for (int i = 0; i < PV_ROWS; i++)
            for (int c = 0; c < CH; c++) vstore(acc + i * dv_pad + x + c * VL, a[i][c]);
    }
}

/* The scores of nb keys for the first lanes rows (lanes a multiple of VL): RV constant. */
static void score_block(size_t lanes, const float *qT, size_t D, const float *kr, size_t ks, size_t kds,
                        float scale, float *s, size_t nb) {
    if (lanes <= VL) score_keys(1, qT, D, kr, ks, kds, scale, s, nb);
    else if (lanes <= 2 * VL) score_keys(2, qT, D, kr, ks, kds, scale, s, nb);
    else if (lanes <= 4 * VL) score_keys(4, qT, D, kr, ks, kds, scale, s, nb);
    else score_keys(8, qT, D, kr, ks, kds, scale, s, nb);
}

/* ---- few rows: keys in the vector lanes ----------------------------------------------------
 * A group of a few rows (a decode step of a model whose query heads each have their own KV head,
 * as GPT-2's, or share one in pairs, threes or fours, as Qwen3-0.6B's, SmolLM2's, Llama-3.2's)
 * would leave all but a few lanes of the row-lanes tiles above idle, and their softmax would take
 * the exponential of KB x VL scores for KB x g live ones.  Such a group takes the block's keys transposed into lanes instead
 * (kT, one pass over the block shared by the group's rows), and each row's scores a vector of
 * keys at a time: the same vmadd of the same q_d k_j[d] products in d order from 0 per score, so
 * the same bits as the row-lanes tiles; then the same online softmax, one row at a time over its
 * keys (the maximum is exact whatever the order; l still sums the weights in key order).
 * Measured with the keys in cache (1000 keys, 64 wide, one thread): one row per group 1.2 (AVX2)
 * to 1.5 (portable) times faster than the row-lanes tiles, two rows 1.1 to 1.2; three rows no
 * faster on AVX2 and portable, four or more slower (the transposition is then paid for fewer
 * lanes saved).  A decode step over a cache read from memory (about 1930 keys, 2 threads) puts
 * the line elsewhere: groups of 3 (SmolLM2) took 0.6 to 0.8 of the row-lanes time with AVX-512
 * and about 0.85 with AVX2, groups of 4 (Llama-3.2-1B) 0.8 and 0.9, groups of 8 (TinyLlama)
 * about 1.1 (AVX-512).  So the AVX2 and AVX-512 variants take up to 4 rows this way, the
 * portable one 2. */
enum { KV = KB / VL, /* vectors of a block's keys */
       /* rows a tile holds: as many as fit SCORE_ACC vectors of sums, up to NARROW_MAX_ROWS */
       NARROW_RT = SCORE_ACC / KV < 1 ? 1 : SCORE_ACC / KV > NARROW_MAX_ROWS ? NARROW_MAX_ROWS : SCORE_ACC / KV };
_Static_assert(KB % VL == 0, "a block's keys are whole vectors");
_Static_assert(NARROW_MAX_ROWS >= 1 && NARROW_MAX_ROWS <= VKG_ATTN_GROUP, "few rows are a group's");

/* Whether a group of g rows takes the keys in the vector lanes (the same bits, faster). */
INLINE int few_rows(size_t g) { return g <= NARROW_MAX_ROWS; }

/* kT[d * KB + j] = k_j[d] for the nb keys of a block (kr: its first, nb >= 1); past them, up
 * to a multiple of 4, copies of the last key, then zeros: finite values whose scores the mask
 * replaces by -inf.  Keys whose d is contiguous move 4 x 4 at a time through registers (one
 * element at a time, the strided reads and the stores to kT made this the costliest part of a
 * decode step's attention), and the zeros are whole vectors (a fill of each row's keys past a
 * short cache took a quarter of the time of its block).  Keys are prefetched PREFETCH_KEYS ahead
 * while within the `ahead` keys from kr on that the walk reads. */
static void transpose_keys(float *kT, size_t D, const float *kr, size_t ks, size_t kds, size_t nb, size_t ahead) {
    const size_t nb4 = (nb + 3) / 4 * 4, d4 = kds == 1 ? D / 4 * 4 : 0;
    for (size_t c = 0; c < KV; c++)
        if ((c + 1) * VL > nb4)
            for (size_t d = 0; d < D; d++) vstore(kT + d * KB + c * VL, vzero());
    for (size_t j = 0; j < nb4; j += 4) {
        const float *key[4];
        for (size_t i = 0; i < 4; i++) {
            key[i] = kr + (j + i < nb ? j + i : nb - 1) * ks;
            if (kds == 1 && j + i + PREFETCH_KEYS < ahead) prefetch_row(key[i], PREFETCH_KEYS * ks, D);
        }
        for (size_t d = 0; d < d4; d += 4) {
            mm_x4 r[4];
            for (int i = 0; i < 4; i++) memcpy(&r[i], key[i] + d, sizeof r[i]);
            transpose4(r);
            for (int i = 0; i < 4; i++) memcpy(kT + (d + i) * KB + j, &r[i], sizeof r[i]);
        }
        for (size_t d = d4; d < D; d++)
            for (size_t i = 0; i < 4; i++) kT[d * KB + j + i] = key[i][d * kds];
    }
}

/* sn[i * KB + j] = scale * (q_{r0 + i} . k_j) for R rows (a constant where inlined) and KB keys. */
INLINE void narrow_tile(int R, const float *qT, size_t r0, size_t D, const float *kT, float scale, float *sn) {
    vf acc[NARROW_RT * KV];
    for (int i = 0; i < R * KV; i++) acc[i] = vzero();
    for (size_t d = 0; d < D; d++)
        for (int c = 0; c < KV; c++) {
            const vf kd = vload(kT + d * KB + c * VL);
            for (int i = 0; i < R; i++) acc[i * KV + c] = vmadd(kd, vset1(qT[d * GPAD + r0 + i]), acc[i * KV + c]);
        }
    const vf sc = vset1(scale);
    for (int i = 0; i < R; i++)
        for (int c = 0; c < KV; c++) vstore(sn + i * KB + c * VL, vmul(sc, acc[i * KV + c]));
}

/* The scores of rows 0 .. g - 1 (g <= NARROW_MAX_ROWS): tiles of NARROW_RT rows, then one row at a
 * time. */
static void narrow_scores(group *G, size_t g, size_t D, float scale) {
    size_t r = 0;
    for (; r + NARROW_RT <= g; r += NARROW_RT) narrow_tile(NARROW_RT, G->qT, r, D, G->kT, scale, G->sn + r * KB);
    for (; r < g; r++) narrow_tile(1, G->qT, r, D, G->kT, scale, G->sn + r * KB);
}

/* How many of a row's first `keys` keys fall in the block of nb keys from key j0. */
INLINE size_t keys_in_block(size_t keys, size_t j0, size_t nb) {
    return keys <= j0 ? 0 : keys - j0 < nb ? keys - j0 : nb;
}

/* A block's weights (rows in the vector lanes): the scores of its nb keys from kr (key j0) for
 * rows 0 .. g - 1 (lanes of them computed), masked, into G->s; the online softmax's step into
 * G->p, m, l and corr; and neg[r], the -inf scores among row r's KB (a hole for the P.V). */
static void wide_weights(group *G, size_t lanes, size_t g, size_t D, const float *kr, size_t ks, size_t kds,
                         float scale, size_t j0, size_t nb, int *neg) {
    score_block(lanes, G->qT, D, kr, ks, kds, scale, G->s, nb);
    /* the mask: each row's keys past its last, and every row's past S */
    for (size_t r = 0; r < g; r++) {
        const size_t n = keys_in_block(G->rows[r].keys, j0, nb);
        for (size_t j = n; j < nb; j++) G->s[j * GPAD + r] = -INFINITY;
        /* the window: keys before the row's first (a hole for the P.V below) */
        for (size_t j = 0; j < nb && j0 + j < G->rows[r].first; j++) G->s[j * GPAD + r] = -INFINITY;
    }
    for (size_t j = nb; j < KB; j++)
        for (size_t r = 0; r < lanes; r++) G->s[j * GPAD + r] = -INFINITY;
    /* the online softmax, lane by lane (each loop vectorizes over rows) */
    float mx[GPAD] ALIGNED;
    for (size_t r = 0; r < lanes; r++) mx[r] = -INFINITY;
    for (size_t j = 0; j < KB; j++)
        for (size_t r = 0; r < lanes; r++) {
            const float x = G->s[j * GPAD + r];
            mx[r] = x > mx[r] ? x : mx[r];
        }
    for (size_t r = 0; r < lanes; r++) {
        const float mn = mx[r] > G->m[r] ? mx[r] : G->m[r];
        G->base[r] = mn == -INFINITY ? 0.0f : mn;
        G->corr[r] = vkg_cpu_exp(G->m[r] - G->base[r]);
        G->m[r] = mn;
        G->l[r] *= G->corr[r];
    }
    for (size_t j = 0; j < KB; j++)
        for (size_t r = 0; r < lanes; r++) {
            const float e = vkg_cpu_exp(G->s[j * GPAD + r] - G->base[r]);
            G->p[j * GPAD + r] = e;
            G->l[r] += e;
        }
    for (size_t r = 0; r < lanes; r++) neg[r] = 0;
    for (size_t j = 0; j < KB; j++)
        for (size_t r = 0; r < lanes; r++) neg[r] += G->s[j * GPAD + r] == -INFINITY;
}

/* The same for rows 0 .. g - 1 with the keys in the lanes (the results of wide_weights, bit for
 * bit, for the g rows). */
static void narrow_weights(group *G, size_t g, size_t D, const float *kr, size_t ks, size_t kds, float scale,
                           size_t j0, size_t nb, size_t ahead, int *neg) {
    transpose_keys(G->kT, D, kr, ks, kds, nb, ahead);
    narrow_scores(G, g, D, scale);
    for (size_t r = 0; r < g; r++) {
        float *sr = G->sn + r * KB, pr[KB] ALIGNED;
        const size_t n = keys_in_block(G->rows[r].keys, j0, nb);
        for (size_t j = n; j < KB; j++) sr[j] = -INFINITY;
        for (size_t j = 0; j < nb && j0 + j < G->rows[r].first; j++) sr[j] = -INFINITY;
        float mx = -INFINITY;
        for (size_t j = 0; j < KB; j++) mx = sr[j] > mx ? sr[j] : mx;
        const float mn = mx > G->m[r] ? mx : G->m[r];
        G->base[r] = mn == -INFINITY ? 0.0f : mn;
        G->corr[r] = vkg_cpu_exp(G->m[r] - G->base[r]);
        G->m[r] = mn;
        G->l[r] *= G->corr[r];
        for (size_t j = 0; j < KB; j++) pr[j] = vkg_cpu_exp(sr[j] - G->base[r]);
        int holes = 0;
        for (size_t j = 0; j < KB; j++) {
            G->l[r] += pr[j];
            G->p[j * GPAD + r] = pr[j];
            G->s[j * GPAD + r] = sr[j];
            holes += sr[j] == -INFINITY;
        }
        neg[r] = holes;
    }
}

/* The lanes a group of g rows uses: whole vectors, a power of two of them (the score tiles'
 * shapes). */
INLINE size_t lanes_for(size_t g) {
    size_t lanes = VL;
    while (lanes < g) lanes *= 2;
    return lanes;
}

/* An output row's floats in the group's buffers: whole register chunks. */
INLINE size_t dv_pad_of(size_t Dv) { return (Dv + CH * VL - 1) / (CH * VL) * (CH * VL); }

/* Sets G up for rows r0 .. r0 + g - 1, all reading the same keys and values (consecutive
 * positions of one batch entry, or of consecutive b1 entries whose keys and values are one,
 * stride 0): their rows and q, transposed.  The keys any of them sees: *first_min .. *keys_max - 1. */
static void group_begin(group *G, const vkg_attention_params *p, const float *q, const float *k, const float *v,
                        float *out, size_t r0, size_t g, const int32_t *indices, size_t *first_min, size_t *keys_max) {
    const size_t lanes = few_rows(g) ? g : lanes_for(g); /* few rows: only theirs are read */
    *keys_max = 0, *first_min = SIZE_MAX;
    for (size_t r = 0; r < g; r++) {
        vkg_attn_row *w = &G->rows[r];
        *w = vkg_attn_row_of(p, q, k, v, out, r0 + r, indices);
        if (w->keys > *keys_max) *keys_max = w->keys;
        if (w->first < *first_min) *first_min = w->first;
    }
    for (size_t d = 0; d < p->D; d++)
        for (size_t r = 0; r < lanes; r++) G->qT[d * GPAD + r] = r < g ? G->rows[r].q[d * p->q_stride_d] : 0.0f;
}

/* The softmax state (G->m, G->l, G->acc) of the group's g rows over keys c0 .. c1 - 1 (c0 a
 * multiple of KB, c1 at most keys_max), from scratch; the walk goes on to key end - 1 (what is
 * worth prefetching). */
static void run_chunk(group *G, const vkg_attention_params *p, size_t g, size_t first_min, size_t c0, size_t c1,
                      size_t end) {
    const size_t D = p->D, Dv = p->Dv, dv_pad = dv_pad_of(Dv);
    const size_t ks = p->k_stride_s, kds = p->k_stride_d, vs = p->v_stride_s, vds = p->v_stride_d;
    const size_t lanes = lanes_for(g);
    /* values are read in place when their rows are contiguous whole chunks */
    const int v_direct = vds == 1 && Dv == dv_pad;
    const int narrow = few_rows(g);
    for (size_t r = 0; r < g; r++) memset(G->acc + r * dv_pad, 0, dv_pad * sizeof(float));
    for (size_t r = 0; r < lanes; r++) G->m[r] = -INFINITY, G->l[r] = 0.0f;
    const float *kb = G->rows[0].k, *vb = G->rows[0].v;
    /* blocks wholly before every row's window change nothing: the walk starts at the first
     * block that holds a visible key (still a multiple of KB) */
    const size_t start = first_min / KB * KB;
    for (size_t j0 = c0 > start ? c0 : start; j0 < c1; j0 += KB) {
        const size_t nb = c1 - j0 < KB ? c1 - j0 : KB;
        int neg[GPAD] ALIGNED;
        if (narrow) narrow_weights(G, g, D, kb + j0 * ks, ks, kds, p->scale, j0, nb, end - j0, neg);
        else wide_weights(G, lanes, g, D, kb + j0 * ks, ks, kds, p->scale, j0, nb, neg);
        const float *vrows = vb + j0 * vs;
        size_t v_step = vs;
        if (!v_direct) {
            for (size_t j = 0; j < nb; j++)
                for (size_t x = 0; x < dv_pad; x++)
                    G->vp[j * dv_pad + x] = x < Dv ? vb[(j0 + j) * vs + x * vds] : 0.0f;
            vrows = G->vp;
            v_step = dv_pad;
        }
        /* each row's keys in this block */
        size_t n[GPAD];
        for (size_t r = 0; r < g; r++) n[r] = keys_in_block(G->rows[r].keys, j0, nb);
        /* P.V: PV_ROWS rows at a time over the keys they all have, unless one has a hole; then
         * each row over the rest of its keys (a row without keys here stays as it is) */
        for (size_t r = 0; r < g;) {
            size_t shared = 0, rows = 1;
            if (r + PV_ROWS <= g) {
                shared = n[r];
                for (size_t i = r; i < r + PV_ROWS; i++) {
                    if (neg[i] > (int)(KB - n[i])) shared = 0;
                    if (n[i] < shared) shared = n[i];
                }
                if (shared) {
                    rows = PV_ROWS;
                    rows_values(G->p + r, shared, G->corr + r, G->acc + r * dv_pad, dv_pad, vrows, v_step);
                }
            }
            for (size_t i = r; i < r + rows; i++)
                if (n[i] > shared)
                    row_values(G->s + shared * GPAD + i, G->p + shared * GPAD + i, n[i] - shared,
                               shared ? 1.0f : G->corr[i], G->acc + i * dv_pad, dv_pad, vrows + shared * v_step,
                               v_step, end - j0 - shared);
            r += rows;
        }
    }
}

/* Rows r0 .. r0 + g - 1 of one group, chunk by chunk, each chunk's state folded into the rows'
 * totals in key order (vkg_attn_fold), then written out. */
static void run_group(group *G, const vkg_attention_params *p, const float *q, const float *k, const float *v,
                      float *out, size_t r0, size_t g, const int32_t *indices) {
    const size_t Dv = p->Dv, dv_pad = dv_pad_of(Dv);
    size_t first_min, keys_max;
    group_begin(G, p, q, k, v, out, r0, g, indices, &first_min, &keys_max);
    for (size_t r = 0; r < g; r++) {
        G->tm[r] = -INFINITY, G->tl[r] = 0.0f;
        memset(G->tacc + r * dv_pad, 0, Dv * sizeof(float));
    }
    for (size_t c0 = first_min / VKG_ATTN_CHUNK * VKG_ATTN_CHUNK; c0 < keys_max; c0 += VKG_ATTN_CHUNK) {
        const size_t c1 = keys_max < c0 + VKG_ATTN_CHUNK ? keys_max : c0 + VKG_ATTN_CHUNK;
        run_chunk(G, p, g, first_min, c0, c1, keys_max);
        for (size_t r = 0; r < g; r++)
            vkg_attn_fold(&G->tm[r], &G->tl[r], G->tacc + r * dv_pad, G->m[r], G->l[r], G->acc + r * dv_pad, Dv);
    }
    for (size_t r = 0; r < g; r++) vkg_attn_write_out(G->rows[r].o, p->o_stride_d, G->tacc + r * dv_pad, G->tl[r], Dv);
}

/* Prefetches the first PREFETCH_KEYS keys and values row r sees (rows of contiguous floats only),
 * while the group before it runs: a decode step's groups are short walks over keys and values
 * last touched a step ago (evicted since by the weights), too short for the hardware's
 * prefetchers to catch on and too early for the walk's own prefetch (row_values,
 * transpose_keys), which takes over from there. */
static void prefetch_group(const vkg_attention_params *p, const float *q, const float *k, const float *v, float *out,
                           size_t r, const int32_t *indices) {
    if (p->k_stride_d != 1 || p->v_stride_d != 1) return;
    const vkg_attn_row w = vkg_attn_row_of(p, q, k, v, out, r, indices);
    const size_t end = w.keys - w.first < PREFETCH_KEYS ? w.keys : w.first + PREFETCH_KEYS;
    for (size_t j = w.first; j < end; j++) {
        prefetch_row(w.k + j * p->k_stride_s, 0, p->D);
        prefetch_row(w.v + j * p->v_stride_s, 0, p->Dv);
    }
}

void ATTN_NAME(const vkg_attention_params *p, const float *q, const float *k, const float *v, float *out,
               const int32_t *indices, size_t row_begin, size_t row_end) {
    const size_t span = vkg_attn_rows_sharing_keys(p);
    group G;
    for (size_t r = row_begin; r < row_end;) {
        size_t g = span - r % span; /* the rest of the rows that share these keys */
        if (g > row_end - r) g = row_end - r;
        if (g > VKG_ATTN_GROUP) g = VKG_ATTN_GROUP;
        if (r + g < row_end) prefetch_group(p, q, k, v, out, r + g, indices);
        run_group(&G, p, q, k, v, out, r, g, indices);
        r += g;
    }
}

void ATTN_CHUNK_NAME(const vkg_attention_params *p, const float *q, const float *k, const float *v, float *out,
                     const int32_t *indices, size_t r0, size_t g, size_t c0, float *state) {
    const size_t Dv = p->Dv, dv_pad = dv_pad_of(Dv);
    group G;
    size_t first_min, keys_max;
    group_begin(&G, p, q, k, v, out, r0, g, indices, &first_min, &keys_max);
    /* a chunk past the group's keys walks no block: the state of nothing seen */
    const size_t c1 = keys_max < c0 + VKG_ATTN_CHUNK ? keys_max : c0 + VKG_ATTN_CHUNK;
    run_chunk(&G, p, g, first_min, c0, c1, c1);
    for (size_t r = 0; r < g; r++) {
        float *st = state + r * (2 + Dv);
        st[0] = G.m[r], st[1] = G.l[r];
        memcpy(st + 2, G.acc + r * dv_pad, Dv * sizeof(float));
    }
}
