/* Decoding with a KV cache: one compiled T = 1 plan reused for every token, and a T-token
 * prefill plan sharing its cache for prompts (see model_run.h).  The first plan is made for the feeds
 * the caller expects (opts.batch tokens: 1 for decoding, the prompt's length for one pass over a
 * prompt); its session owns the weights and the cache, and every other plan shares them. */
#include "models/model_run.h"

#include "base/error.h"

#include <stdlib.h>
#include <string.h>

/* The build options of a run of `tokens` over the generator's cache, keeping what o asks for. */
static void run_options(const vkg_generator *gen, int tokens, vkg_forward_options *o) {
    vkg_forward_options_default(o, tokens);
    o->cache_len = gen->opts.cache_len;
    o->all_logits = gen->opts.all_logits;
    o->no_logits = gen->opts.no_logits;
    o->attention_layer = gen->opts.attention_layer;
}

vkg_status vkg_generator_new_with(const vkg_decoder *m, vkg_device *dev, const vkg_generator_options *o,
                                  vkg_generator *out, vkg_error *err) {
    memset(out, 0, sizeof *out);
    out->model = m;
    out->device = dev;
    out->opts = *o;
    const int P = m->facts.n_ctx;
    if (o->cache_len < 0 || o->cache_len > P)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "%s: a cache of %d tokens; the model's context holds 1 "
                             "to %d (%s)", m->facts.architecture, o->cache_len, P, m->facts.ctx_key);
    out->opts.cache_len = o->cache_len ? o->cache_len : P;
    out->opts.batch = o->batch ? o->batch : 1;
    if (out->opts.batch < 1 || out->opts.batch > out->opts.cache_len)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "%s: feeds of %d tokens into a cache of %d",
                             m->facts.architecture, o->batch, out->opts.cache_len);
    vkg_forward_options bo;
    run_options(out, out->opts.batch, &bo);
    out->logits_cap = (size_t)m->facts.n_vocab;
    out->logits = malloc(out->logits_cap * sizeof *out->logits);
    if (!out->logits) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory for the logits");
    vkg_status st = vkg_runner_new(m, dev, &bo, &out->base, err);
    if (st != VKG_OK) vkg_generator_free(out);
    return st;
}

vkg_status vkg_generator_new(const vkg_decoder *m, vkg_device *dev, int cache_len, vkg_generator *out,
                             vkg_error *err) {
    vkg_generator_options o = {.cache_len = cache_len, .attention_layer = VKG_NO_ATTENTION};
    return vkg_generator_new_with(m, dev, &o, out, err);
}

/* Makes *buf hold at least want floats. */
static vkg_status reserve(float **buf, size_t *cap, size_t want, const char *what, vkg_error *err) {
    if (want <= *cap) return VKG_OK;
    float *bigger = realloc(*buf, want * sizeof *bigger);
    if (!bigger) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory for the %s (%zu floats)", what, want);
    *buf = bigger;
    *cap = want;
    return VKG_OK;
}

/* Frees the runner of a feed of another size, if one is kept. */
static void drop_other(vkg_generator *gen) {
    if (gen->has_other) vkg_runner_free(&gen->other);
    gen->has_other = 0;
    if (gen->last == &gen->other) gen->last = NULL;
}

void vkg_generator_free(vkg_generator *gen) {
    drop_other(gen); /* before the session they share */
    if (gen->has_step) vkg_runner_free(&gen->step);
    if (gen->base.session) vkg_runner_free(&gen->base);
    free(gen->logits);
    memset(gen, 0, sizeof *gen);
}

vkg_status vkg_generator_feed(vkg_generator *gen, const int32_t *ids, int n, vkg_error *err) {
    const int S = gen->opts.cache_len;
    if (n < 0 || gen->length + n > S)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "%s: %d tokens after %d would pass the end of the KV "
                             "cache (%d positions%s)", gen->model->facts.architecture, n, (int)gen->length, S,
                             S == gen->model->facts.n_ctx ? ", the model's whole context" : "");
    vkg_status st = vkg_decoder_check_ids(gen->model, ids, (size_t)n, err);
    if (st != VKG_OK || n == 0) return st;
    drop_other(gen);
    gen->fed = 0; /* until this feed has run */
    gen->restored = 0;
    vkg_runner *r = &gen->base;
    if (n != gen->base.gg.tokens) {
        /* Another size: one pass over all n tokens, writing the shared cache at gen->length.
         * A one-token plan is kept for the next tokens; another size's, until the next feed. */
        vkg_forward_options o;
        run_options(gen, n, &o);
        r = n == 1 ? &gen->step : &gen->other;
        if (n != 1 || !gen->has_step) {
            st = vkg_runner_new_shared(gen->model, gen->device, &o, gen->base.session, r, err);
            if (st != VKG_OK) return st;
            *(n == 1 ? &gen->has_step : &gen->has_other) = 1;
        }
    }
    gen->last = r;
    st = vkg_runner_run(r, ids, gen->length, err);
    if (st != VKG_OK) return st;
    gen->length += n;
    gen->fed = n;
    /* The prediction sampling reads; every position's logits stay in the session until asked for. */
    if (!gen->opts.no_logits && !gen->opts.all_logits)
        st = vkg_runner_logits(r, gen->logits, (size_t)gen->model->facts.n_vocab, err);
    return st;
}

static vkg_status need_feed(const vkg_generator *gen, vkg_error *err) {
    return gen->fed && gen->last ? VKG_OK
                                 : vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "%s: nothing fed since the cache "
                                                 "was made, reset or truncated", gen->model->facts.architecture);
}

vkg_status vkg_generator_last_logits(vkg_generator *gen, float **out, vkg_error *err) {
    *out = gen->logits;
    vkg_status st = need_feed(gen, err);
    if (st != VKG_OK || !gen->opts.all_logits) return st;
    /* Every position's logits are in the session: read them, keep the last row. */
    const size_t V = (size_t)gen->model->facts.n_vocab, all = (size_t)gen->fed * V;
    st = reserve(&gen->logits, &gen->logits_cap, all, "logits", err);
    if (st == VKG_OK) st = vkg_runner_logits(gen->last, gen->logits, all, err);
    if (st == VKG_OK) memmove(gen->logits, gen->logits + all - V, V * sizeof *gen->logits);
    *out = gen->logits;
    return st;
}

vkg_status vkg_generator_logits(vkg_generator *gen, float *out, size_t floats, vkg_error *err) {
    vkg_status st = need_feed(gen, err);
    if (st != VKG_OK) return st;
    if (!gen->opts.all_logits) {
        const size_t V = (size_t)gen->model->facts.n_vocab;
        if (floats != V)
            return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "%s: %zu floats for logits of %zu",
                                 gen->model->facts.architecture, floats, V);
        memcpy(out, gen->logits, V * sizeof *out);
        return VKG_OK;
    }
    return vkg_runner_logits(gen->last, out, floats, err);
}

vkg_status vkg_generator_attention(vkg_generator *gen, int layer, float *out, size_t floats,
                                   vkg_error *err) {
    vkg_status st = need_feed(gen, err);
    if (st == VKG_OK && gen->restored)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "%s: no attention since the state was loaded: feed a "
                             "token first", gen->model->facts.architecture);
    return st == VKG_OK ? vkg_runner_attention(gen->last, layer, out, floats, err) : st;
}

vkg_status vkg_generator_reset(vkg_generator *gen, vkg_error *err) {
    drop_other(gen);
    gen->length = 0;
    gen->fed = 0;
    gen->restored = 0;
    return vkg_session_reset_state(gen->base.session, err); /* the states every plan shares */
}

vkg_status vkg_generator_truncate(vkg_generator *gen, int n, vkg_error *err) {
    if (n < 0 || n > gen->length)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "%s: cannot keep %d tokens of a cache holding %d",
                             gen->model->facts.architecture, n, (int)gen->length);
    drop_other(gen);
    gen->length = n;
    gen->fed = 0; /* what the last feed computed no longer follows the cache */
    gen->restored = 0;
    return VKG_OK;
}

/* The cache of layer 0's shape [2, Hkv, S, D]: planes = 2 * Hkv, rows S, row D floats. */
static vkg_status cache_shape(const vkg_generator *gen, int64_t *planes, int64_t *rows, int64_t *row,
                              vkg_error *err) {
    const vkg_forward_graph *gg = &gen->base.gg;
    int64_t shape[VKG_MAX_DIMS];
    if (!gg->kv_cache || vkg_tensor_shape(gg->graph, gg->kv_cache[0], shape) != 4)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "%s: the context has no KV cache",
                             gen->model->facts.architecture);
    *planes = shape[0] * shape[1];
    *rows = shape[2];
    *row = shape[3];
    return VKG_OK;
}

size_t vkg_generator_cache_floats(const vkg_generator *gen, int length) {
    int64_t planes = 0, rows = 0, row = 0;
    if (cache_shape(gen, &planes, &rows, &row, NULL) != VKG_OK) return 0;
    return (size_t)gen->model->facts.n_layer * (size_t)planes * (size_t)length * (size_t)row;
}

/* One layer's whole state in a scratch buffer, read or written plane by plane around the rows
 * [0, length) that out / in hold. */
static vkg_status cache_copy(vkg_generator *gen, float *out, const float *in, int length, vkg_error *err) {
    int64_t planes = 0, rows = 0, row = 0;
    vkg_status st = cache_shape(gen, &planes, &rows, &row, err);
    if (st != VKG_OK) return st;
    const size_t layer = (size_t)(planes * rows * row), part = (size_t)length * (size_t)row;
    float *scratch = calloc(layer, sizeof *scratch);
    if (!scratch) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory for a layer of the KV cache");
    for (int l = 0; l < gen->model->facts.n_layer && st == VKG_OK; l++) {
        const vkg_tensor t = gen->base.gg.kv_cache[l];
        const size_t at = (size_t)l * (size_t)planes * part;
        if (out) {
            st = vkg_session_get_state(gen->base.session, t, scratch, layer * sizeof *scratch, err);
            for (int64_t p = 0; st == VKG_OK && p < planes; p++)
                memcpy(out + at + (size_t)p * part, scratch + (size_t)(p * rows * row), part * sizeof *out);
        } else {
            for (int64_t p = 0; p < planes; p++)
                memcpy(scratch + (size_t)(p * rows * row), in + at + (size_t)p * part, part * sizeof *in);
            st = vkg_session_set_state(gen->base.session, t, scratch, layer * sizeof *scratch, err);
        }
    }
    free(scratch);
    return st;
}

vkg_status vkg_generator_cache_read(vkg_generator *gen, float *out, vkg_error *err) {
    return cache_copy(gen, out, NULL, gen->length, err);
}

vkg_status vkg_generator_cache_write(vkg_generator *gen, const float *in, int length, vkg_error *err) {
    if (length < 0 || length > gen->opts.cache_len)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "%s: %d cached tokens do not fit a cache of %d",
                             gen->model->facts.architecture, length, gen->opts.cache_len);
    vkg_status st = vkg_generator_reset(gen, err); /* the rows past length: zero */
    if (st == VKG_OK) st = cache_copy(gen, NULL, in, length, err);
    if (st == VKG_OK) gen->length = length;
    return st;
}
