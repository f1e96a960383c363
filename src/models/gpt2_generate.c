/* Decoding with a KV cache: one compiled T = 1 plan reused for every token, and a T-token
 * prefill plan sharing its cache for prompts (see gpt2.h). */
#include "models/gpt2.h"

#include "core/error.h"

#include <stdlib.h>
#include <string.h>

vkg_status vkg_gpt2_generator_new(const vkg_gpt2 *m, vkg_device *dev, int cache_len, vkg_gpt2_generator *out,
                                  vkg_error *err) {
    memset(out, 0, sizeof *out);
    out->model = m;
    out->device = dev;
    const int P = m->config.n_positions;
    if (cache_len < 0 || cache_len > P)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "gpt2: a cache of %d tokens; the model's context holds 1 "
                             "to %d (n_positions)", cache_len, P);
    vkg_gpt2_build_options o;
    vkg_gpt2_build_options_default(&o, 1);
    o.cache_len = cache_len ? cache_len : P;
    out->logits = malloc((size_t)m->config.vocab_size * sizeof *out->logits);
    if (!out->logits) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory for the logits");
    vkg_status st = vkg_gpt2_runner_new(m, dev, &o, &out->step, err);
    if (st != VKG_OK) vkg_gpt2_generator_free(out);
    return st;
}

void vkg_gpt2_generator_free(vkg_gpt2_generator *gen) {
    if (gen->step.session) vkg_gpt2_runner_free(&gen->step);
    free(gen->logits);
    memset(gen, 0, sizeof *gen);
}

vkg_status vkg_gpt2_generator_feed(vkg_gpt2_generator *gen, const int32_t *ids, int n, vkg_error *err) {
    const int S = gen->step.gg.cache_len;
    if (n < 0 || gen->length + n > S)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "gpt2: %d tokens after %d would pass the end of the KV "
                             "cache (%d positions%s)", n, (int)gen->length, S,
                             S == gen->model->config.n_positions ? ", the model's whole context" : "");
    vkg_status st = vkg_gpt2_check_ids(gen->model, ids, (size_t)n, err);
    if (st != VKG_OK || n == 0) return st;
    const size_t V = (size_t)gen->model->config.vocab_size;
    if (n == 1) {
        st = vkg_gpt2_runner_run(&gen->step, ids, gen->length, err);
        if (st == VKG_OK) st = vkg_gpt2_runner_logits(&gen->step, gen->logits, V, err);
    } else {
        /* One pass over all n tokens, writing the shared cache at gen->length.. */
        vkg_gpt2_build_options o;
        vkg_gpt2_build_options_default(&o, n);
        o.cache_len = S;
        vkg_gpt2_runner prefill;
        st = vkg_gpt2_runner_new_shared(gen->model, gen->device, &o, gen->step.session, &prefill, err);
        if (st != VKG_OK) return st;
        st = vkg_gpt2_runner_run(&prefill, ids, gen->length, err);
        if (st == VKG_OK) st = vkg_gpt2_runner_logits(&prefill, gen->logits, V, err);
        vkg_gpt2_runner_free(&prefill);
    }
    if (st == VKG_OK) gen->length += n;
    return st;
}

vkg_status vkg_gpt2_generator_reset(vkg_gpt2_generator *gen, vkg_error *err) {
    gen->length = 0;
    return vkg_session_reset_state(gen->step.session, err);
}
