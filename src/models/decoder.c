/* The model interface's shared part: the options checked against a model's facts, the forward
 * graph's arrays, and the ids checked against the vocabulary (see decoder.h). */
#include "models/decoder.h"

#include "base/error.h"

#include <stdlib.h>
#include <string.h>

void vkg_forward_options_default(vkg_forward_options *o, int tokens) {
    memset(o, 0, sizeof *o);
    o->tokens = tokens;
    o->attention_layer = VKG_NO_ATTENTION;
}

/* The rows a step over o->seqs > 1 sequences has (-1 where a sequence has none). */
static long long rows_of_seqs(const vkg_forward_options *o) {
    if (!o->seq_tokens) return o->seqs;
    long long rows = 0;
    for (int r = 0; r < o->seqs; r++) {
        if (o->seq_tokens[r] < 1) return -1;
        rows += o->seq_tokens[r];
    }
    return rows;
}

/* The slot of sequence r. */
static int slot_of(const vkg_forward_options *o, int r) {
    return o->seqs > 1 && o->seq_slots ? o->seq_slots[r] : o->first_slot + r;
}

/* The slots each cache holds: n_slots, or where it is 0 one past the highest slot used (1 for
 * a plain cache). */
static int slots_of(const vkg_forward_options *o) {
    if (!o->seqs) return 1;
    if (o->n_slots > 0) return o->n_slots;
    int most = 0;
    for (int r = 0; r < o->seqs; r++) {
        if (slot_of(o, r) + 1 > most) most = slot_of(o, r) + 1;
    }
    return most;
}

static vkg_status check_options(const vkg_decoder_facts *f, const vkg_forward_options *o, vkg_error *err) {
    const int P = f->n_ctx;
    const char *a = f->architecture;
    /* the most tokens of one sequence: several sequences' rows each go to their own cache */
    int tokens = o->tokens;
    if (o->seqs > 1 && o->seq_tokens) {
        tokens = o->seq_tokens[0];
        for (int r = 1; r < o->seqs; r++) tokens = o->seq_tokens[r] > tokens ? o->seq_tokens[r] : tokens;
    }
    if (tokens < 1 || tokens > P)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "%s: %d tokens per run; the model takes 1 to %d (%s)", a,
                             tokens, P, f->ctx_key);
    if (o->cache_len && (o->cache_len < tokens || o->cache_len > P))
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "%s: a KV cache of %d positions for runs of %d tokens; "
                             "it must hold from %d to %d (%s)", a, o->cache_len, tokens, tokens, P, f->ctx_key);
    if (o->attention_layer != VKG_NO_ATTENTION && o->attention_layer != VKG_ALL_LAYERS &&
        (o->attention_layer < 0 || o->attention_layer >= f->n_layer))
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "%s: layer %d does not exist; the model has layers 0 to %d",
                             a, o->attention_layer, f->n_layer - 1);
    if (o->no_logits && o->attention_layer == VKG_NO_ATTENTION && !o->cache_len)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "%s: neither logits nor attention asked for: the graph "
                             "would compute nothing", a);
    if (o->seqs < 0 || o->first_slot < 0 || (o->seqs == 0 && o->first_slot != 0))
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "%s: %d sequence slots from slot %d", a, o->seqs,
                             o->first_slot);
    if (o->seqs > 1 && (!o->cache_len || rows_of_seqs(o) != o->tokens || o->attention_layer != VKG_NO_ATTENTION ||
                        o->no_logits)) {
        if (!o->seq_tokens) /* the public API's batched steps: one token a sequence */
            return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "%s: a step over %d sequences takes one token of "
                                 "each (%d tokens), a KV cache, logits and no attention outputs", a, o->seqs,
                                 o->tokens);
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "%s: a step over %d sequences of %lld tokens in all (each "
                             "1 or more; %d given) takes a KV cache, logits and no attention outputs", a, o->seqs,
                             rows_of_seqs(o), o->tokens);
    }
    for (int r = 0; o->seqs > 1 && o->seq_slots && r < o->seqs; r++)
        for (int q = 0; q < r; q++)
            if (o->seq_slots[r] < 0 || o->seq_slots[q] == o->seq_slots[r])
                return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "%s: sequence %d's slot %d is negative or another "
                                     "sequence's", a, r, o->seq_slots[r]);
    /* every sequence's slot within the cache's n_slots */
    const int n_slots = slots_of(o);
    for (int r = 0; r < o->seqs; r++) {
        const int slot = slot_of(o, r);
        if (o->cache_len && slot >= n_slots)
            return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "%s: sequence %d's slot %d; the cache holds %d slots", a,
                                 r, slot, n_slots);
    }
    if (o->attention_keys < 0 || (o->attention_keys > 0 && (!o->cache_len || o->attention_keys > o->cache_len)))
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "%s: attention_keys %d needs a cache of at least as many "
                             "positions", a, o->attention_keys);
    return VKG_OK;
}

static vkg_status build_into(const vkg_decoder *d, const vkg_forward_options *o, vkg_forward_graph *gg,
                             vkg_error *err) {
    const int n_layer = d->facts.n_layer;
    gg->n_layer = n_layer;
    gg->tokens = o->tokens;
    gg->cache_len = o->cache_len;
    gg->seqs = o->seqs;
    gg->ids = gg->positions = gg->pos = gg->logits = VKG_NONE;
    gg->graph = vkg_graph_new();
    gg->attention = malloc((size_t)n_layer * sizeof *gg->attention);
    if (o->cache_len) {
        gg->kv_cache = malloc((size_t)n_layer * sizeof *gg->kv_cache);
    }
    if (o->seqs > 1) {
        gg->row_pos = malloc((size_t)o->seqs * sizeof *gg->row_pos);
        gg->seq_tokens = malloc((size_t)o->seqs * sizeof *gg->seq_tokens);
    }
    if (o->seqs >= 1) gg->seq_slots = malloc((size_t)o->seqs * sizeof *gg->seq_slots);
    if (!gg->graph || !gg->attention || (o->cache_len && !gg->kv_cache) ||
        (o->seqs > 1 && (!gg->row_pos || !gg->seq_tokens)) || (o->seqs >= 1 && !gg->seq_slots))
        return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory building the %s graph", d->facts.architecture);
    for (int r = 0; r < o->seqs && gg->seq_tokens; r++) gg->seq_tokens[r] = o->seq_tokens ? o->seq_tokens[r] : 1;
    for (int i = 0; i < n_layer; i++) gg->attention[i] = VKG_NONE;
    for (int i = 0; o->cache_len && i < n_layer; i++) gg->kv_cache[i] = VKG_NONE;
    for (int r = 0; r < o->seqs; r++) gg->seq_slots[r] = slot_of(o, r);
    for (int r = 0; r < o->seqs && gg->row_pos; r++) gg->row_pos[r] = VKG_NONE;
    vkg_status st = d->build(d->model, o, gg, err);
    if (st == VKG_OK && vkg_graph_status(gg->graph) != VKG_OK)
        st = vkg_error_set(err, vkg_graph_status(gg->graph), "%s: building the graph failed: %s", d->facts.architecture,
                           vkg_graph_error(gg->graph));
    return st;
}

vkg_status vkg_decoder_build(const vkg_decoder *d, const vkg_forward_options *o, vkg_forward_graph *out,
                             vkg_error *err) {
    memset(out, 0, sizeof *out);
    vkg_status st = check_options(&d->facts, o, err);
    vkg_forward_options with_slots = *o;
    with_slots.n_slots = slots_of(o);
    if (st == VKG_OK) st = build_into(d, &with_slots, out, err);
    if (st != VKG_OK) vkg_forward_graph_free(out);
    return st;
}

void vkg_forward_graph_free(vkg_forward_graph *gg) {
    vkg_graph_free(gg->graph);
    free(gg->attention);
    free(gg->kv_cache);
    free(gg->row_pos);
    free(gg->seq_tokens);
    free(gg->seq_slots);
    memset(gg, 0, sizeof *gg);
}

vkg_status vkg_decoder_check_ids(const vkg_decoder *d, const int32_t *ids, size_t n, vkg_error *err) {
    const vkg_decoder_facts *f = &d->facts;
    if (n == 0) return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "the prompt is empty: give at least one token");
    if (n > (size_t)f->n_ctx)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "the prompt has %zu tokens, more than the model's context "
                             "of %d positions (%s)", n, f->n_ctx, f->ctx_key);
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= f->n_vocab)
            return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "token id %d at position %zu is outside the "
                                 "vocabulary [0, %d)", (int)ids[i], i, f->n_vocab);
    return VKG_OK;
}
