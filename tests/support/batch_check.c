#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "support/batch_check.h"
#include "support/test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void check(vkg_status st, const vkg_error *err) {
    if (st != VKG_OK) fail_msg("%s", err->message);
}

int batch_argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

/* The gap between the largest and the second largest logit. */
static float top_gap(const float *x, int n) {
    const int best = batch_argmax(x, n);
    float second = -1e30f;
    for (int i = 0; i < n; i++)
        if (i != best && x[i] > second) second = x[i];
    return x[best] - second;
}

void batch_make_prompt(batch_seq *p, int i, int n, int V) {
    p->n_prompt = n;
    for (int t = 0; t < n; t++) p->prompt[t] = (int32_t)((i * 37 + t * 11 + 3) % V);
}

/* The tokens of a prompt's prefill passes in the batch context. */
static int batch_chunk(const batch_check *f) {
    vkg_batch_options o;
    vkg_batch_options_default(&o);
    const int chunk = f->prefill_chunk ? f->prefill_chunk : o.prefill_chunk;
    return chunk ? chunk : f->n_ctx;
}

void batch_run_alone(const batch_check *f, batch_seq *p) {
    vkg_context_options o;
    vkg_context_options_default(&o);
    o.n_ctx = f->n_ctx;
    if (p->watch) o.logits = VKG_LOGITS_ALL;
    vkg_context *ctx = NULL;
    vkg_error err = {0};
    check(vkg_context_new(f->model, &o, &ctx, &err), &err);
    p->alone = malloc((size_t)(p->steps + 1) * (size_t)f->V * sizeof *p->alone);
    assert_non_null(p->alone);
    const int chunk = batch_chunk(f);
    const size_t V = (size_t)f->V;
    if (p->watch) {
        p->prompt_rows = malloc((size_t)p->n_prompt * V * sizeof *p->prompt_rows);
        p->watched = malloc((size_t)p->n_prompt * V * sizeof *p->watched);
        assert_true(p->prompt_rows && p->watched);
    }
    for (int t = 0; t < p->n_prompt; t += chunk) {
        const int rows = p->n_prompt - t < chunk ? p->n_prompt - t : chunk;
        check(vkg_context_prefill(ctx, p->prompt + t, rows, &err), &err);
        if (p->watch) check(vkg_context_get_logits(ctx, p->prompt_rows + (size_t)t * V, (size_t)rows * V, &err), &err);
    }
    if (p->watch) /* the prediction after the prompt is its last row */
        memcpy(p->alone, p->prompt_rows + (size_t)(p->n_prompt - 1) * V, V * sizeof *p->alone);
    for (int s = 0;; s++) {
        float *row = p->alone + (size_t)s * (size_t)f->V;
        if (s > 0 || !p->watch) check(vkg_context_get_logits(ctx, row, (size_t)f->V, &err), &err);
        if (s == p->steps) break;
        p->tokens[s] = batch_argmax(row, f->V);
        check(vkg_context_decode(ctx, p->tokens[s], &err), &err);
    }
    vkg_context_free(ctx);
}

void batch_compare(const batch_check *f, const float *got, const float *want, int seq, int step) {
    const size_t V = (size_t)f->V;
    if (f->cpu) {
        if (memcmp(got, want, V * sizeof *got) != 0)
            fail_msg("sequence %d step %d: logits differ from the sequence alone (max |diff| %g)", seq, step,
                     test_max_abs_diff(got, want, V));
        return;
    }
    const double e = test_nmse(got, want, V);
    if (e > 5e-4) fail_msg("sequence %d step %d: NMSE %g against the sequence alone", seq, step, e);
    if (batch_argmax(got, f->V) != batch_argmax(want, f->V) && top_gap(want, f->V) > 1e-3f)
        fail_msg("sequence %d step %d: argmax %d, alone %d", seq, step, batch_argmax(got, f->V), batch_argmax(want, f->V));
}

/* A watched prompt's pass: its rows kept for the comparison at the end. */
static void keep_rows(void *user, int seq, int32_t first, int rows, const float *logits) {
    (void)seq;
    batch_seq *p = user;
    const size_t V = (size_t)p->n_vocab;
    assert_int_equal(first, p->n_watched); /* the passes in order */
    assert_true(first + rows <= p->n_prompt);
    memcpy(p->watched + (size_t)first * V, logits, (size_t)rows * V * sizeof *logits);
    p->n_watched += rows;
}

/* A watched prompt: every row its passes gave against the rows alone; every token but a last one
 * left alone (a prompt's single last token decodes) was watched. */
static void compare_watched(const batch_check *f, const batch_seq *p, int seq) {
    const size_t V = (size_t)f->V;
    assert_true(p->n_watched >= p->n_prompt - 1 && p->n_watched > 0);
    for (int r = 0; r < p->n_watched; r++) /* prompt row r is "step -1 - r" in a failure's message */
        batch_compare(f, p->watched + (size_t)r * V, p->prompt_rows + (size_t)r * V, seq, -1 - r);
}

/* Runs the schedule through one batch context of n_seq slots; every sequence's logits at every
 * step are compared with the sequence alone.  A prompt longer than a chunk has no logits until
 * its last chunk has run: the sequence waits, and its steps count from there. */
int batch_run_schedule(const batch_check *f, batch_seq *plans, int n, int n_seq) {
    for (int i = 0; i < n; i++) batch_run_alone(f, &plans[i]);
    vkg_batch_options o;
    vkg_batch_options_default(&o);
    o.n_seq = n_seq;
    o.n_ctx = f->n_ctx;
    if (f->prefill_chunk) o.prefill_chunk = f->prefill_chunk;
    vkg_batch_context *b = NULL;
    vkg_error err = {0};
    check(vkg_batch_context_new(f->model, &o, &b, &err), &err);
    /* seen[i]: the logits of sequence i compared so far (0: its prompt's still to come) */
    int slot[BATCH_MAX_SEQ], seen[BATCH_MAX_SEQ] = {0}, done[BATCH_MAX_SEQ] = {0}, left = n, part_way = 0;
    float *got = malloc((size_t)f->V * sizeof *got);
    assert_non_null(got);
    for (int i = 0; i < n; i++) slot[i] = -1;
    for (int t = 0; left > 0; t++) {
        for (int i = 0; i < n; i++) {
            batch_seq *p = &plans[i];
            if (p->join == t) { /* joins: its prompt */
                check(vkg_batch_seq_claim(b, &slot[i], &err), &err);
                p->n_vocab = f->V;
                if (p->watch) check(vkg_batch_seq_watch_prompt(b, slot[i], keep_rows, p, &err), &err);
                check(vkg_batch_add(b, slot[i], p->prompt, p->n_prompt, &err), &err);
            } else if (slot[i] >= 0 && seen[i] > 0) { /* running: the token the sequence alone chose */
                check(vkg_batch_add(b, slot[i], &p->tokens[seen[i] - 1], 1, &err), &err);
            }
        }
        check(vkg_batch_step(b, &err), &err);
        for (int i = 0; i < n; i++) {
            batch_seq *p = &plans[i];
            if (slot[i] < 0 || t < p->join) continue;
            const int queued = vkg_batch_seq_queued(b, slot[i]);
            if (queued) { /* a prompt part-way through its chunks: no logits yet */
                assert_int_equal(seen[i], 0);
                assert_int_equal(vkg_batch_seq_length(b, slot[i]) + queued, p->n_prompt);
                assert_int_not_equal(vkg_batch_get_logits(b, slot[i], got, (size_t)f->V, &err), VKG_OK);
                part_way++;
                continue;
            }
            const int step = seen[i]++;
            check(vkg_batch_get_logits(b, slot[i], got, (size_t)f->V, &err), &err);
            batch_compare(f, got, p->alone + (size_t)step * (size_t)f->V, i, step);
            assert_int_equal(vkg_batch_seq_length(b, slot[i]), p->n_prompt + step);
            if (step == p->steps) { /* leaves: its slot is free for the next one */
                check(vkg_batch_seq_remove(b, slot[i], &err), &err);
                slot[i] = -1;
                done[i] = 1;
                left--;
            }
        }
    }
    for (int i = 0; i < n; i++) {
        assert_true(done[i]);
        if (plans[i].watch) compare_watched(f, &plans[i], i);
        free(plans[i].alone);
        free(plans[i].prompt_rows);
        free(plans[i].watched);
    }
    free(got);
    vkg_batch_context_free(b);
    return part_way;
}
