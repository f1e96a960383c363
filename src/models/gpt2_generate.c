/* Decoding with a KV cache: one compiled T = 1 plan reused for every token, and a T-token
 * prefill plan sharing its cache for prompts (see gpt2.h).  The first plan is made for the feeds
 * the caller expects (opts.batch tokens: 1 for decoding, the prompt's length for one pass over a
 * prompt); its session owns the weights and the cache, and every other plan shares them. */
#include "models/gpt2.h"

#include "base/error.h"

#include <stdlib.h>
#include <string.h>

/* The build options of a run of `tokens` over the generator's cache, keeping what o asks for. */
static void run_options(const vkg_gpt2_generator *gen, int tokens, vkg_gpt2_build_options *o) {
    vkg_gpt2_build_options_default(o, tokens);
    o->cache_len = gen->opts.cache_len;
    o->all_logits = gen->opts.all_logits;
    o->no_logits = gen->opts.no_logits;
    o->attention_layer = gen->opts.attention_layer;
}

static int kept_layers(const vkg_gpt2_generator *gen) {
    const int a = gen->opts.attention_layer;
    return a == VKG_GPT2_ALL_LAYERS ? gen->model->config.n_layer : a == VKG_GPT2_NO_ATTENTION ? 0 : 1;
}

vkg_status vkg_gpt2_generator_new_with(const vkg_gpt2 *m, vkg_device *dev, const vkg_gpt2_generator_options *o,
                                       vkg_gpt2_generator *out, vkg_error *err) {
    memset(out, 0, sizeof *out);
    out->model = m;
    out->device = dev;
    out->opts = *o;
    const int P = m->config.n_positions;
    if (o->cache_len < 0 || o->cache_len > P)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "gpt2: a cache of %d tokens; the model's context holds 1 "
                             "to %d (n_positions)", o->cache_len, P);
    out->opts.cache_len = o->cache_len ? o->cache_len : P;
    out->opts.batch = o->batch ? o->batch : 1;
    if (out->opts.batch < 1 || out->opts.batch > out->opts.cache_len)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "gpt2: feeds of %d tokens into a cache of %d", o->batch,
                             out->opts.cache_len);
    vkg_gpt2_build_options bo;
    run_options(out, out->opts.batch, &bo);
    out->logits_cap = (size_t)m->config.vocab_size;
    out->logits = malloc(out->logits_cap * sizeof *out->logits);
    if (!out->logits) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory for the logits");
    vkg_status st = vkg_gpt2_runner_new(m, dev, &bo, &out->base, err);
    if (st != VKG_OK) vkg_gpt2_generator_free(out);
    return st;
}

vkg_status vkg_gpt2_generator_new(const vkg_gpt2 *m, vkg_device *dev, int cache_len, vkg_gpt2_generator *out,
                                  vkg_error *err) {
    vkg_gpt2_generator_options o = {.cache_len = cache_len, .attention_layer = VKG_GPT2_NO_ATTENTION};
    return vkg_gpt2_generator_new_with(m, dev, &o, out, err);
}

void vkg_gpt2_generator_free(vkg_gpt2_generator *gen) {
    if (gen->has_step) vkg_gpt2_runner_free(&gen->step); /* before the session it shares */
    if (gen->base.session) vkg_gpt2_runner_free(&gen->base);
    free(gen->logits);
    free(gen->attention);
    memset(gen, 0, sizeof *gen);
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

/* Copies what a run of n tokens computed out of r, before r is freed. */
static vkg_status keep_outputs(vkg_gpt2_generator *gen, vkg_gpt2_runner *r, int n, vkg_error *err) {
    const size_t V = (size_t)gen->model->config.vocab_size, H = (size_t)gen->model->config.n_head;
    const size_t S = (size_t)r->gg.cache_len;
    vkg_status st = VKG_OK;
    if (!gen->opts.no_logits) {
        const size_t floats = (gen->opts.all_logits ? (size_t)n : 1) * V;
        st = reserve(&gen->logits, &gen->logits_cap, floats, "logits", err);
        if (st == VKG_OK) st = vkg_gpt2_runner_logits(r, gen->logits, floats, err);
    }
    const int layers = kept_layers(gen);
    if (st == VKG_OK && layers) {
        const size_t per_layer = H * (size_t)n * S;
        st = reserve(&gen->attention, &gen->attention_cap, (size_t)layers * per_layer, "attention probabilities", err);
        const int first = layers == 1 ? gen->opts.attention_layer : 0;
        for (int l = 0; st == VKG_OK && l < layers; l++)
            st = vkg_gpt2_runner_attention(r, first + l, gen->attention + (size_t)l * per_layer, per_layer, err);
    }
    return st;
}

vkg_status vkg_gpt2_generator_feed(vkg_gpt2_generator *gen, const int32_t *ids, int n, vkg_error *err) {
    const int S = gen->opts.cache_len;
    if (n < 0 || gen->length + n > S)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "gpt2: %d tokens after %d would pass the end of the KV "
                             "cache (%d positions%s)", n, (int)gen->length, S,
                             S == gen->model->config.n_positions ? ", the model's whole context" : "");
    vkg_status st = vkg_gpt2_check_ids(gen->model, ids, (size_t)n, err);
    if (st != VKG_OK || n == 0) return st;
    vkg_gpt2_runner *r = &gen->base, other;
    int temporary = 0;
    if (n != gen->base.gg.tokens) {
        /* Another size: one pass over all n tokens, writing the shared cache at gen->length.
         * A one-token plan is kept for the next tokens; other sizes are made for this feed. */
        vkg_gpt2_build_options o;
        run_options(gen, n, &o);
        if (n == 1 && !gen->has_step) {
            st = vkg_gpt2_runner_new_shared(gen->model, gen->device, &o, gen->base.session, &gen->step, err);
            if (st != VKG_OK) return st;
            gen->has_step = 1;
        } else if (n != 1) {
            st = vkg_gpt2_runner_new_shared(gen->model, gen->device, &o, gen->base.session, &other, err);
            if (st != VKG_OK) return st;
            temporary = 1;
        }
        r = temporary ? &other : &gen->step;
    }
    st = vkg_gpt2_runner_run(r, ids, gen->length, err);
    if (st == VKG_OK) st = keep_outputs(gen, r, n, err);
    if (temporary) vkg_gpt2_runner_free(&other);
    if (st == VKG_OK) {
        gen->length += n;
        gen->fed = n;
    }
    return st;
}

float *vkg_gpt2_generator_last_logits(vkg_gpt2_generator *gen) {
    const size_t V = (size_t)gen->model->config.vocab_size;
    return gen->logits + (gen->opts.all_logits && gen->fed > 1 ? (size_t)(gen->fed - 1) * V : 0);
}

const float *vkg_gpt2_generator_attention(const vkg_gpt2_generator *gen, int layer) {
    const int a = gen->opts.attention_layer;
    if (!gen->fed || !gen->attention || (a != VKG_GPT2_ALL_LAYERS && a != layer) || layer < 0 ||
        layer >= gen->model->config.n_layer)
        return NULL;
    const size_t per_layer = (size_t)gen->model->config.n_head * (size_t)gen->fed * (size_t)gen->opts.cache_len;
    return gen->attention + (a == VKG_GPT2_ALL_LAYERS ? (size_t)layer * per_layer : 0);
}

vkg_status vkg_gpt2_generator_reset(vkg_gpt2_generator *gen, vkg_error *err) {
    gen->length = 0;
    gen->fed = 0;
    return vkg_session_reset_state(gen->base.session, err); /* the states every plan shares */
}

vkg_status vkg_gpt2_generator_truncate(vkg_gpt2_generator *gen, int n, vkg_error *err) {
    if (n < 0 || n > gen->length)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "gpt2: cannot keep %d tokens of a cache holding %d", n,
                             (int)gen->length);
    gen->length = n;
    gen->fed = 0; /* what the last feed computed no longer follows the cache */
    return VKG_OK;
}
