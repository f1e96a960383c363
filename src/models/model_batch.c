/* Batches of sequences (vkgraph_model.h's vkg_batch_*): n_seq slots, each a block of every
 * layer's KV cache state "<cache>.slots" [2 n_seq, Hkv, S, D] (decoder.h), shared by name
 * between every plan of the context.
 *
 * The decode plans: plans[k] runs rows = 2^k (the last one n_seq) tokens, row r the one new
 * token of slot r.  The first plan made, of n_seq rows, owns the weights and every slot's cache;
 * the others and the prefill plans share them.  A step runs the smallest plan covering the
 * highest slot stepping; the rows of slots not stepping are padding, whose k/v writes must not
 * touch a sequence's cached tokens: an empty slot's go to position 0, a slot with room to its
 * next free position (overwritten by its next token before any query reads it), and a full
 * slot (which can take no more tokens) replays its last token at its last position, writing what
 * is already there: the same values, up to rounding where a prefill pass wrote that position.
 *
 * Prompts (a sequence given several tokens) run before the decode rows, in chunks of at most
 * prefill_chunk tokens, a step taking chunks of at most prefill_chunk tokens in all (chunked
 * prefill): a long prompt goes over several steps, so the sequences decoding beside it wait for
 * one chunk a step, not for the whole prompt (prefill_chunk below).  A prefill plan
 * is bound to its slot (the cache states it names) and its length; the last PREFILL_PLANS used
 * are kept, so a long prompt's chunks, and prompts of a length seen before, compile nothing.
 *
 * Logits that are not finite (finite weights too large for some input) fail their sequence
 * alone: it keeps the message, its logits and adds answer with it, and the others run on. */
#include "models/context_fit.h"
#include "models/model_handles.h"
#include "models/model_run.h"

#include "base/error.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PLANS 8      /* rows 1, 2, 4, .., 64 */
#define PREFILL_PLANS 8  /* prefill plans kept, the least recently run replaced                  */
#define COMBINED_ROWS VKG_BATCH_MAX_SEQ /* the most prompt tokens run in one pass (prefill_chunk) */

typedef struct seq_slot {
    int used;
    int32_t length;                      /* tokens in the cache                              */
    int32_t last;                        /* the last token in the cache                      */
    int32_t *queue;                      /* [n_ctx]: tokens added, not yet run               */
    int queued;
    int has_logits;
    float *logits;                       /* [V]: the prediction after the last token        */
    char failure[200];                   /* why the sequence failed ("": it has not)        */
    vkg_batch_rows_fn rows_fn;           /* vkg_batch_seq_watch_prompt's (NULL: none)        */
    void *rows_user;
} seq_slot;

/* A prefill plan: the chunks of `seqs` prompts in one run, chunk i of tokens[i] tokens into
 * slot slots[i]; with all_rows (one chunk), the logits of every row. */
typedef struct prefill_plan {
    int seqs;                            /* 0: no plan here                                  */
    int all_rows;
    int slots[VKG_BATCH_MAX_SEQ], tokens[VKG_BATCH_MAX_SEQ];
    uint64_t last_run;                   /* the step it last ran in                          */
    vkg_runner runner;
} prefill_plan;

struct vkg_batch_context {
    vkg_model *model;
    const vkg_decoder *dec;
    int n_seq, n_ctx, n_plans, prefill_chunk;
    vkg_runner plans[MAX_PLANS];         /* plans[k]: rows_of(k) rows; made on first use     */
    int made[MAX_PLANS];
    int owner;                           /* the index of the n_seq-row plan                  */
    prefill_plan prefills[PREFILL_PLANS];
    uint64_t steps;                      /* steps run: the prefill plans' clock              */
    int next_prefill;                    /* the slot offered the next step's chunk first     */
    seq_slot *slots;                     /* [n_seq]                                          */
    int32_t *ids, *positions;            /* [n_seq]: a step's rows                           */
    int32_t *prefill_ids, *prefill_positions; /* [COMBINED_ROWS]: a combined prefill's rows  */
    float *rows_logits;                  /* [n_seq, V]                                       */
    float *watched_logits;               /* [watched_rows, V]: a watched prompt pass's rows,
                                            kept while a slot is watched (set_watcher)        */
    int watched_rows;
};

void vkg_batch_options_default(vkg_batch_options *o) {
    memset(o, 0, sizeof *o);
    o->n_seq = 8;
    o->prefill_chunk = 256;
}

static int rows_of(const vkg_batch_context *b, int k) { return k == b->owner ? b->n_seq : 1 << k; }

/* Marks sequence seq failed: its tokens are consumed, its logits unknown from now on. */
static void fail_seq(vkg_batch_context *b, int seq, const char *why) {
    seq_slot *q = &b->slots[seq];
    snprintf(q->failure, sizeof q->failure, "sequence %d: %s", seq, why);
    q->queued = 0;
    q->has_logits = 0;
}

/* A row of logits with a value that is not finite fails its sequence, naming where. */
static int check_row(vkg_batch_context *b, int seq, const float *row, size_t V, int32_t position) {
    for (size_t i = 0; i < V; i++) {
        if (isfinite(row[i])) continue;
        char why[160];
        snprintf(why, sizeof why, "%s: the model's outputs overflowed: logits at position %d are not finite (%s at "
                 "index %zu); the weights are finite but too large", b->dec->facts.architecture, (int)position,
                 isnan(row[i]) ? "NaN" : row[i] > 0 ? "Inf" : "-Inf", i);
        fail_seq(b, seq, why);
        return 0;
    }
    return 1;
}

/* Slot s of a valid id, or an error naming the range. */
static vkg_status check_seq(const vkg_batch_context *b, int seq, const char *fn, vkg_error *err) {
    if (!b) return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "%s: NULL context", fn);
    if (seq < 0 || seq >= b->n_seq)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "%s: sequence id %d is outside 0..%d (the context holds "
                             "%d sequences)", fn, seq, b->n_seq - 1, b->n_seq);
    return VKG_OK;
}

static vkg_status make_plan(vkg_batch_context *b, int k, vkg_error *err) {
    if (b->made[k]) return VKG_OK;
    vkg_forward_options o;
    const int rows = rows_of(b, k);
    vkg_forward_options_default(&o, rows);
    o.cache_len = b->n_ctx;
    o.seqs = rows;
    o.n_slots = b->n_seq;
    vkg_session *with = k == b->owner ? NULL : b->plans[b->owner].session;
    vkg_status st = vkg_runner_new_shared(b->dec, b->model->dev, &o, with, &b->plans[k], err);
    if (st == VKG_OK) b->made[k] = 1;
    return st;
}

typedef struct batch_make_args {
    vkg_model *m;
    const vkg_batch_options *o;
    vkg_batch_context **out;
} batch_make_args;

/* A batch context of n_ctx positions a sequence (a vkg_fit_make), its n_seq-row plan compiled. */
static vkg_status batch_make(void *arg, int n_ctx, vkg_error *err) {
    const batch_make_args *a = arg;
    const vkg_decoder_facts *f = &a->m->dec->facts;
    vkg_batch_context *b = calloc(1, sizeof *b);
    if (!b) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
    b->model = a->m;
    b->dec = a->m->dec;
    b->n_seq = a->o->n_seq;
    b->n_ctx = n_ctx;
    b->prefill_chunk = a->o->prefill_chunk ? a->o->prefill_chunk : INT_MAX / 2; /* sums of chunks stay ints */
    while (b->n_plans < MAX_PLANS && (1 << b->n_plans) < b->n_seq) b->n_plans++;
    b->owner = b->n_plans++; /* rows 1, 2, .. below n_seq, then n_seq itself */
    const size_t V = (size_t)f->n_vocab, n = (size_t)b->n_seq;
    b->slots = calloc(n, sizeof *b->slots);
    b->ids = malloc(n * sizeof *b->ids);
    b->positions = malloc(n * sizeof *b->positions);
    b->prefill_ids = malloc(COMBINED_ROWS * sizeof *b->prefill_ids);
    b->prefill_positions = malloc(COMBINED_ROWS * sizeof *b->prefill_positions);
    b->rows_logits = malloc(n * V * sizeof *b->rows_logits);
    vkg_status st = b->slots && b->ids && b->positions && b->prefill_ids && b->prefill_positions && b->rows_logits
                        ? VKG_OK : vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
    for (int s = 0; st == VKG_OK && s < b->n_seq; s++) {
        b->slots[s].queue = malloc((size_t)b->n_ctx * sizeof *b->slots[s].queue);
        b->slots[s].logits = malloc(V * sizeof *b->slots[s].logits);
        if (!b->slots[s].queue || !b->slots[s].logits)
            st = vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory for %d sequences' logits", b->n_seq);
    }
    if (st == VKG_OK) st = make_plan(b, b->owner, err);
    if (st != VKG_OK) {
        vkg_batch_context_free(b);
        return st;
    }
    *a->out = b;
    return VKG_OK;
}

vkg_status vkg_batch_context_new(vkg_model *m, const vkg_batch_options *opts, vkg_batch_context **out,
                                 vkg_error *err) {
    if (out) *out = NULL;
    if (!m || !out) return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_batch_context_new: NULL argument");
    if (!m->dev)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_batch_context_new: the model was opened without a "
                             "device");
    vkg_batch_options o;
    vkg_batch_options_default(&o);
    if (opts) o = *opts;
    const vkg_decoder_facts *f = &m->dec->facts;
    if (o.n_seq < 1 || o.n_seq > VKG_BATCH_MAX_SEQ)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_batch_context_new: %d sequences; a batch context "
                             "holds 1 to %d", o.n_seq, VKG_BATCH_MAX_SEQ);
    if (o.n_ctx < 0 || o.n_ctx > f->n_ctx)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "%s: a cache of %d positions; the model's context holds "
                             "1 to %d (%s)", f->architecture, o.n_ctx, f->n_ctx, f->ctx_key);
    if (o.prefill_chunk < 0)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_batch_context_new: a prefill chunk of %d tokens; "
                             "1 or more (0: each prompt in one step)", o.prefill_chunk);
    batch_make_args a = {.m = m, .o = &o, .out = out};
    return o.n_ctx ? batch_make(&a, o.n_ctx, err) : vkg_fit_context(f->n_ctx, 1, batch_make, &a, err);
}

void vkg_batch_context_free(vkg_batch_context *b) {
    if (!b) return;
    for (int i = 0; i < PREFILL_PLANS; i++)
        if (b->prefills[i].seqs) vkg_runner_free(&b->prefills[i].runner);
    for (int k = 0; k < b->n_plans; k++) /* the owner's session last: the others share it */
        if (k != b->owner && b->made[k]) vkg_runner_free(&b->plans[k]);
    if (b->made[b->owner]) vkg_runner_free(&b->plans[b->owner]);
    for (int s = 0; b->slots && s < b->n_seq; s++) {
        free(b->slots[s].queue);
        free(b->slots[s].logits);
    }
    free(b->slots);
    free(b->ids);
    free(b->positions);
    free(b->prefill_ids);
    free(b->prefill_positions);
    free(b->rows_logits);
    free(b->watched_logits);
    free(b);
}

int vkg_batch_n_seq(const vkg_batch_context *b) { return b ? b->n_seq : 0; }
int vkg_batch_n_ctx(const vkg_batch_context *b) { return b ? b->n_ctx : 0; }

int vkg_batch_seq_length(const vkg_batch_context *b, int seq) {
    return b && seq >= 0 && seq < b->n_seq ? b->slots[seq].length : 0;
}

int vkg_batch_seq_queued(const vkg_batch_context *b, int seq) {
    return b && seq >= 0 && seq < b->n_seq ? b->slots[seq].queued : 0;
}

vkg_status vkg_batch_seq_claim(vkg_batch_context *b, int *seq, vkg_error *err) {
    if (!b || !seq) return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_batch_seq_claim: NULL argument");
    for (int s = 0; s < b->n_seq; s++)
        if (!b->slots[s].used) {
            b->slots[s].used = 1;
            *seq = s;
            return VKG_OK;
        }
    return vkg_error_set(err, VKG_ERR_UNSUPPORTED, "vkg_batch_seq_claim: all %d sequence slots are in use", b->n_seq);
}

vkg_status vkg_batch_add(vkg_batch_context *b, int seq, const int32_t *ids, int n, vkg_error *err) {
    vkg_status st = check_seq(b, seq, "vkg_batch_add", err);
    if (st != VKG_OK) return st;
    seq_slot *q = &b->slots[seq];
    if (n < 1 || !ids) return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_batch_add: no tokens given");
    if (q->failure[0])
        return vkg_error_set(err, VKG_ERR_NOT_FINITE, "vkg_batch_add: %s (remove the sequence to use its slot again)",
                             q->failure);
    if ((int64_t)q->length + q->queued + n > b->n_ctx)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "%s: sequence %d holds %d tokens and %d queued; %d more "
                             "would pass the end of its cache of %d positions", b->dec->facts.architecture, seq,
                             (int)q->length, q->queued, n, b->n_ctx);
    st = vkg_decoder_check_ids(b->dec, ids, (size_t)n, err);
    if (st != VKG_OK) return st;
    memcpy(q->queue + q->queued, ids, (size_t)n * sizeof *ids);
    q->queued += n;
    q->used = 1;
    return VKG_OK;
}

/* The prefill plan of n chunks (slots[i], tokens[i]): a kept one, else one compiled in place of
 * an empty or the least recently run. */
static vkg_status prefill_plan_for(vkg_batch_context *b, int n, const int *slots, const int *tokens, int all_rows,
                                   vkg_runner **out, vkg_error *err) {
    prefill_plan *oldest = &b->prefills[0];
    const size_t bytes = (size_t)n * sizeof(int);
    for (int i = 0; i < PREFILL_PLANS; i++) {
        prefill_plan *p = &b->prefills[i];
        if (p->seqs == n && p->all_rows == all_rows && !memcmp(p->slots, slots, bytes) &&
            !memcmp(p->tokens, tokens, bytes)) {
            p->last_run = b->steps;
            *out = &p->runner;
            return VKG_OK;
        }
        if (!p->seqs || (oldest->seqs && p->last_run < oldest->last_run)) oldest = p;
    }
    if (oldest->seqs) vkg_runner_free(&oldest->runner);
    oldest->seqs = 0;
    int rows = 0;
    for (int i = 0; i < n; i++) rows += tokens[i];
    vkg_forward_options o;
    vkg_forward_options_default(&o, rows);
    o.cache_len = b->n_ctx;
    o.seqs = n;
    o.n_slots = b->n_seq;
    o.first_slot = n == 1 ? slots[0] : 0;
    o.seq_tokens = n > 1 ? tokens : NULL;
    o.seq_slots = n > 1 ? slots : NULL;
    o.all_logits = all_rows;
    vkg_status st = vkg_runner_new_shared(b->dec, b->model->dev, &o, b->plans[b->owner].session, &oldest->runner, err);
    if (st != VKG_OK) return st;
    oldest->seqs = n;
    oldest->all_rows = all_rows;
    memcpy(oldest->slots, slots, bytes);
    memcpy(oldest->tokens, tokens, bytes);
    oldest->last_run = b->steps;
    *out = &oldest->runner;
    return VKG_OK;
}

/* The first `tokens` of slot seq's queued tokens have run; `row` holds the logits of the last
 * of them, which are the sequence's when they were the last queued. */
static void prefilled(vkg_batch_context *b, int seq, int tokens, const float *row) {
    seq_slot *q = &b->slots[seq];
    const size_t V = (size_t)b->dec->facts.n_vocab;
    const int last = tokens == q->queued;
    q->length += tokens;
    q->last = q->queue[tokens - 1];
    q->queued -= tokens;
    memmove(q->queue, q->queue + tokens, (size_t)q->queued * sizeof *q->queue);
    q->has_logits = last && check_row(b, seq, row, V, q->length - 1);
    if (q->has_logits && row != q->logits) memcpy(q->logits, row, V * sizeof *q->logits);
}

/* A watched prompt's pass (vkg_batch_seq_watch_prompt) of `tokens` tokens: every row's logits
 * read, checked and handed to the watcher; the last row's are the sequence's after its last chunk. */
static vkg_status prefill_watched(vkg_batch_context *b, int seq, int tokens, vkg_runner *r, vkg_error *err) {
    seq_slot *q = &b->slots[seq];
    const size_t V = (size_t)b->dec->facts.n_vocab;
    if (tokens > b->watched_rows) {
        float *grown = realloc(b->watched_logits, (size_t)tokens * V * sizeof *grown);
        if (!grown)
            return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory for the logits of %d prompt tokens",
                                 tokens);
        b->watched_logits = grown;
        b->watched_rows = tokens;
    }
    const int32_t first = q->length;
    vkg_status st = vkg_runner_run(r, q->queue, first, err);
    if (st == VKG_OK)
        st = vkg_session_get_output(r->session, r->gg.logits, b->watched_logits, (size_t)tokens * V * sizeof(float),
                                    err);
    if (st != VKG_OK) return st;
    for (int t = 0; t < tokens; t++) /* a row that is not finite fails the sequence, as a last row does */
        if (!check_row(b, seq, b->watched_logits + (size_t)t * V, V, first + t)) return VKG_OK;
    q->rows_fn(q->rows_user, seq, first, tokens, b->watched_logits);
    prefilled(b, seq, tokens, b->watched_logits + (size_t)(tokens - 1) * V);
    return VKG_OK;
}

/* Chunks of n prompts (slots[i], tokens[i]) through one prefill pass; their logits are read. */
static vkg_status prefill(vkg_batch_context *b, int n, const int *slots, const int *tokens, vkg_error *err) {
    const size_t V = (size_t)b->dec->facts.n_vocab;
    const int watched = n == 1 && b->slots[slots[0]].rows_fn;
    vkg_runner *r;
    vkg_status st = prefill_plan_for(b, n, slots, tokens, watched, &r, err);
    if (st != VKG_OK) return st;
    if (watched) return prefill_watched(b, slots[0], tokens[0], r, err);
    if (n == 1) {
        seq_slot *q = &b->slots[slots[0]];
        st = vkg_runner_run(r, q->queue, q->length, err);
        if (st == VKG_OK && tokens[0] == q->queued) /* the logits are read after a prompt's last chunk */
            st = vkg_session_get_output(r->session, r->gg.logits, q->logits, V * sizeof(float), err);
        if (st == VKG_OK) prefilled(b, slots[0], tokens[0], q->logits);
        return st;
    }
    int rows = 0;
    for (int i = 0; i < n; i++) /* each chunk's ids and positions, one after the other */
        for (int t = 0; t < tokens[i]; t++, rows++) {
            b->prefill_ids[rows] = b->slots[slots[i]].queue[t];
            b->prefill_positions[rows] = b->slots[slots[i]].length + t;
        }
    st = vkg_runner_run_rows(r, b->prefill_ids, b->prefill_positions, err);
    if (st == VKG_OK)
        st = vkg_session_get_output(r->session, r->gg.logits, b->rows_logits, (size_t)n * V * sizeof(float), err);
    for (int i = 0; st == VKG_OK && i < n; i++) prefilled(b, slots[i], tokens[i], b->rows_logits + (size_t)i * V);
    return st;
}

/* This step's prompt chunks.  A prompt runs in chunks of prefill_chunk tokens counted from its
 * first queued token (the last one shorter), so a sequence's passes are its own whatever runs
 * beside it; the slots take turns, from the one after the slot served first last time, and the
 * step takes chunks while they add up to at most prefill_chunk tokens (at least one chunk).
 * Chunks adding up to COMBINED_ROWS tokens or fewer run in one pass (each attending to its own
 * cache), others (and every chunk of a step with a watched prompt) one pass each: up to that many
 * rows the CPU matmul sums each row as it would alone, so a sequence's logits keep their bits
 * whatever it is prefilled with. */
static vkg_status prefill_chunk(vkg_batch_context *b, vkg_error *err) {
    const int chunk = b->prefill_chunk;
    int total = 0, first = -1, n = 0, watched = 0;
    int slots[VKG_BATCH_MAX_SEQ], tokens[VKG_BATCH_MAX_SEQ];
    for (int i = 0; i < b->n_seq && total < chunk; i++) {
        const int s = (b->next_prefill + i) % b->n_seq;
        const int queued = b->slots[s].queued, t = queued < chunk ? queued : chunk;
        if (queued < 2 || total + t > chunk) continue;
        slots[n] = s;
        tokens[n++] = t;
        total += t;
        watched |= b->slots[s].rows_fn != NULL;
        if (first < 0) first = s;
    }
    if (first < 0) return VKG_OK;
    b->next_prefill = (first + 1) % b->n_seq;
    if (total <= COMBINED_ROWS && !watched) return prefill(b, n, slots, tokens, err);
    vkg_status st = VKG_OK;
    for (int i = 0; st == VKG_OK && i < n; i++) st = prefill(b, 1, slots + i, tokens + i, err);
    return st;
}

/* Every sequence with one token queued, in one run of the smallest plan covering them. */
static vkg_status decode(vkg_batch_context *b, vkg_error *err) {
    int top = -1;
    for (int s = 0; s < b->n_seq; s++)
        if (b->slots[s].queued == 1) top = s;
    if (top < 0) return VKG_OK;
    int k = 0;
    while (rows_of(b, k) <= top) k++;
    vkg_status st = make_plan(b, k, err);
    if (st != VKG_OK) return st;
    const int rows = rows_of(b, k);
    for (int s = 0; s < rows; s++) {
        const seq_slot *q = &b->slots[s];
        if (q->queued == 1) { /* a row that counts */
            b->ids[s] = q->queue[0];
            b->positions[s] = q->length;
        } else if (q->length == 0) { /* padding: see the top of the file */
            b->ids[s] = 0;
            b->positions[s] = 0;
        } else {
            const int full = q->length == b->n_ctx;
            b->ids[s] = q->last;
            b->positions[s] = full ? q->length - 1 : q->length;
        }
    }
    const size_t V = (size_t)b->dec->facts.n_vocab;
    const vkg_runner *plan = &b->plans[k];
    st = vkg_runner_run_rows(&b->plans[k], b->ids, b->positions, err);
    if (st == VKG_OK)
        st = vkg_session_get_output(plan->session, plan->gg.logits, b->rows_logits, (size_t)rows * V * sizeof(float),
                                    err);
    if (st != VKG_OK) return st;
    for (int s = 0; s < rows; s++) {
        seq_slot *q = &b->slots[s];
        if (q->queued != 1) continue;
        const float *row = b->rows_logits + (size_t)s * V;
        q->last = q->queue[0];
        q->length++;
        q->queued = 0;
        q->has_logits = check_row(b, s, row, V, q->length - 1);
        if (q->has_logits) memcpy(q->logits, row, V * sizeof *q->logits);
    }
    return VKG_OK;
}

vkg_status vkg_batch_step(vkg_batch_context *b, vkg_error *err) {
    if (!b) return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_batch_step: NULL context");
    b->steps++;
    vkg_status st = prefill_chunk(b, err);
    return st == VKG_OK ? decode(b, err) : st;
}

vkg_status vkg_batch_get_logits(vkg_batch_context *b, int seq, float *out, size_t floats, vkg_error *err) {
    vkg_status st = check_seq(b, seq, "vkg_batch_get_logits", err);
    if (st != VKG_OK) return st;
    const size_t V = (size_t)b->dec->facts.n_vocab;
    if (floats != V || !out)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_batch_get_logits: %zu floats for logits of %zu",
                             floats, V);
    if (b->slots[seq].failure[0])
        return vkg_error_set(err, VKG_ERR_NOT_FINITE, "%s", b->slots[seq].failure);
    if (!b->slots[seq].has_logits)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, b->slots[seq].queued
                             ? "vkg_batch_get_logits: sequence %d has a prompt part-way through its prefill (%d "
                               "tokens still queued)"
                             : "vkg_batch_get_logits: sequence %d has run nothing since it was emptied, claimed or "
                               "copied into%.0d", seq, b->slots[seq].queued);
    memcpy(out, b->slots[seq].logits, V * sizeof *out);
    return VKG_OK;
}

vkg_status vkg_batch_seq_truncate(vkg_batch_context *b, int seq, int n, vkg_error *err) {
    vkg_status st = check_seq(b, seq, "vkg_batch_seq_truncate", err);
    if (st != VKG_OK) return st;
    seq_slot *q = &b->slots[seq];
    if (q->failure[0] || n < 0 || n > q->length)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_batch_seq_truncate: sequence %d (%d tokens%s) "
                             "cannot keep %d", seq, (int)q->length, q->failure[0] ? ", failed" : "", n);
    /* The cached rows past n are written again as tokens come; `last` only matters to a full
       slot's padding row (the top of this file), and a truncated slot is not full. */
    q->length = n;
    q->queued = 0;
    q->has_logits = 0;
    return VKG_OK;
}

/* Sets slot seq's watcher; the watched passes' logits (up to a chunk's rows times the vocabulary:
 * 155 MB for Qwen's) are freed once no slot is watched. */
static void set_watcher(vkg_batch_context *b, int seq, vkg_batch_rows_fn fn, void *user) {
    b->slots[seq].rows_fn = fn;
    b->slots[seq].rows_user = fn ? user : NULL;
    for (int s = 0; s < b->n_seq; s++)
        if (b->slots[s].rows_fn) return;
    free(b->watched_logits);
    b->watched_logits = NULL;
    b->watched_rows = 0;
}

vkg_status vkg_batch_seq_watch_prompt(vkg_batch_context *b, int seq, vkg_batch_rows_fn fn, void *user,
                                      vkg_error *err) {
    vkg_status st = check_seq(b, seq, "vkg_batch_seq_watch_prompt", err);
    if (st != VKG_OK) return st;
    set_watcher(b, seq, fn, user);
    return VKG_OK;
}

vkg_status vkg_batch_seq_remove(vkg_batch_context *b, int seq, vkg_error *err) {
    vkg_status st = check_seq(b, seq, "vkg_batch_seq_remove", err);
    if (st != VKG_OK) return st;
    seq_slot *q = &b->slots[seq];
    q->used = 0;
    set_watcher(b, seq, NULL, NULL);
    q->length = q->queued = q->has_logits = 0;
    q->last = 0;
    q->failure[0] = '\0';
    return VKG_OK;
}

/* Copies the first n positions of every layer's cache from slot src to slot dst, on the device:
 * in the state [2 n_seq, Hkv, S, D] a slot's block is its 2 Hkv planes, each plane's first n
 * rows copied. */
static vkg_status copy_cache(vkg_batch_context *b, int src, int dst, int n, vkg_error *err) {
    const vkg_runner *r = &b->plans[b->owner];
    const vkg_forward_graph *gg = &r->gg;
    int64_t shape[VKG_MAX_DIMS];
    vkg_tensor_shape(gg->graph, gg->kv_cache[0], shape);
    const size_t planes = 2 * (size_t)shape[1], row = (size_t)shape[3] * sizeof(float), plane = (size_t)shape[2] * row;
    vkg_status st = VKG_OK;
    for (int l = 0; st == VKG_OK && l < gg->n_layer; l++)
        st = vkg_session_copy_state_at(r->session, gg->kv_cache[l], (size_t)src * planes * plane, gg->kv_cache[l],
                                       (size_t)dst * planes * plane, plane, planes, (size_t)n * row, err);
    return st;
}

vkg_status vkg_batch_seq_copy(vkg_batch_context *b, int src, int dst, int n, vkg_error *err) {
    vkg_status st = check_seq(b, src, "vkg_batch_seq_copy", err);
    if (st == VKG_OK) st = check_seq(b, dst, "vkg_batch_seq_copy", err);
    if (st != VKG_OK) return st;
    seq_slot *from = &b->slots[src], *to = &b->slots[dst];
    if (from->failure[0] || to->failure[0])
        return vkg_error_set(err, VKG_ERR_NOT_FINITE, "vkg_batch_seq_copy: %s", from->failure[0] ? from->failure
                                                                                                  : to->failure);
    if (src == dst || n < 0 || n > from->length || to->queued)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_batch_seq_copy: cannot copy %d tokens of sequence %d "
                             "(%d cached) into sequence %d (%d queued): another sequence, an empty queue and 0 to the "
                             "source's length", n, src, (int)from->length, dst, to->queued);
    st = copy_cache(b, src, dst, n, err);
    if (st != VKG_OK) return st;
    to->used = 1;
    to->length = n;
    to->has_logits = 0;
    /* the token at n - 1 (a full copy's padding row replays it) is not kept by the cache: a
     * copy of the whole source takes the source's last token, a shorter one cannot be full */
    to->last = n == from->length ? from->last : 0;
    return VKG_OK;
}
