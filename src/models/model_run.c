/* Running a model's forward graphs on a device: a compiled plan with its session, and one-shot forward passes. */
#include "models/model_run.h"

#include "base/error.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

vkg_status vkg_runner_new(const vkg_decoder *m, vkg_device *dev, const vkg_forward_options *o,
                          vkg_runner *out, vkg_error *err) {
    return vkg_runner_new_shared(m, dev, o, NULL, out, err);
}

vkg_status vkg_runner_new_shared(const vkg_decoder *m, vkg_device *dev, const vkg_forward_options *o,
                                 vkg_session *with, vkg_runner *out, vkg_error *err) {
    memset(out, 0, sizeof *out);
    out->model = m;
    vkg_status st = vkg_decoder_build(m, o, &out->gg, err);
    if (st != VKG_OK) return st;
    vkg_compile_options co;
    vkg_compile_options_default(&co);
    vkg_device_compile_options(dev, &co);
    st = vkg_plan_compile(out->gg.graph, &co, &out->plan, err);
    if (st == VKG_OK) st = vkg_session_new_shared(dev, out->plan, with, &out->session, err);
    if (st == VKG_OK) { /* the session's track in a profile's trace */
        char label[64];
        if (o->seqs > 1) snprintf(label, sizeof label, "decode (%d sequences)", o->seqs);
        else if (o->cache_len && o->tokens == 1) snprintf(label, sizeof label, "decode");
        else snprintf(label, sizeof label, "%s (T=%d)", o->cache_len ? "prefill" : "forward", o->tokens);
        vkg_session_set_label(out->session, label);
    }
    if (st == VKG_OK && !(out->position_buf = malloc((size_t)o->tokens * sizeof *out->position_buf)))
        st = vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
    if (st != VKG_OK) vkg_runner_free(out);
    return st;
}

void vkg_runner_free(vkg_runner *r) {
    vkg_session_free(r->session);
    vkg_plan_free(r->plan);
    vkg_forward_graph_free(&r->gg);
    free(r->position_buf);
    memset(r, 0, sizeof *r);
}

vkg_status vkg_runner_run(vkg_runner *r, const int32_t *ids, int32_t start, vkg_error *err) {
    const vkg_forward_graph *gg = &r->gg;
    const int T = gg->tokens, limit = gg->cache_len ? gg->cache_len : T;
    if (start < 0 || start + T > limit)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "%s: tokens at positions %d..%d do not fit %s of %d "
                             "positions", r->model->facts.architecture, (int)start, (int)start + T - 1,
                             gg->cache_len ? "the KV cache" : "this run", limit);
    for (int i = 0; i < T; i++) {
        if (ids[i] < 0 || ids[i] >= r->model->facts.n_vocab)
            return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "token id %d at position %d is outside the vocabulary "
                                 "[0, %d)", (int)ids[i], (int)start + i, r->model->facts.n_vocab);
        r->position_buf[i] = start + i;
    }
    const size_t bytes = (size_t)T * sizeof(int32_t);
    vkg_status st = vkg_session_set_input(r->session, gg->ids, ids, bytes, err);
    if (st == VKG_OK) st = vkg_session_set_input(r->session, gg->positions, r->position_buf, bytes, err);
    if (st == VKG_OK && gg->pos != VKG_NONE) st = vkg_session_set_index(r->session, gg->pos, start, err);
    if (st == VKG_OK) st = vkg_session_run(r->session, err);
    if (st == VKG_OK) r->start = start;
    return st;
}

vkg_status vkg_runner_run_rows(vkg_runner *r, const int32_t *ids, const int32_t *positions, vkg_error *err) {
    const vkg_forward_graph *gg = &r->gg;
    if (gg->seqs <= 1) return vkg_runner_run(r, ids, positions[0], err);
    for (int i = 0; i < gg->tokens; i++) {
        if (positions[i] < 0 || positions[i] >= gg->cache_len)
            return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "%s: row %d's position %d is outside the KV cache of "
                                 "%d positions", r->model->facts.architecture, i, (int)positions[i], gg->cache_len);
        if (ids[i] < 0 || ids[i] >= r->model->facts.n_vocab)
            return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "token id %d of row %d is outside the vocabulary "
                                 "[0, %d)", (int)ids[i], i, r->model->facts.n_vocab);
    }
    for (int s = 0, row = 0; s < gg->seqs; row += gg->seq_tokens[s++])
        for (int t = 1; t < gg->seq_tokens[s]; t++)
            if (positions[row + t] != positions[row] + t)
                return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "%s: sequence %d's rows are at positions %d and "
                                     "%d, not one after the other", r->model->facts.architecture, s,
                                     (int)positions[row + t - 1], (int)positions[row + t]);
    const size_t bytes = (size_t)gg->tokens * sizeof(int32_t);
    vkg_status st = vkg_session_set_input(r->session, gg->ids, ids, bytes, err);
    if (st == VKG_OK) st = vkg_session_set_input(r->session, gg->positions, positions, bytes, err);
    for (int s = 0, row = 0; st == VKG_OK && s < gg->seqs; row += gg->seq_tokens[s++])
        st = vkg_session_set_index(r->session, gg->row_pos[s], positions[row], err);
    if (st == VKG_OK) st = vkg_session_run(r->session, err);
    if (st == VKG_OK) r->start = 0;
    return st;
}

/* Every output a caller reads passes here: NaN or Inf (weights that overflow, on either
 * executor) is an error naming where it appears, never an answer (an argmax over NaN is token 0).
 * The scan is one pass over what was just copied out, cheap beside the forward pass.  out holds
 * the tensor t's values, rows of its last dimension; its second-to-last dimension is the
 * position (the query position for attention). */
static vkg_status check_outputs(const vkg_runner *r, vkg_tensor t, const float *out, size_t floats,
                                const char *what, vkg_error *err) {
    for (size_t i = 0; i < floats; i++) {
        if (isfinite(out[i])) continue;
        int64_t shape[VKG_MAX_DIMS];
        const int nd = vkg_tensor_shape(r->gg.graph, t, shape);
        const size_t cols = (size_t)shape[nd - 1], rows = nd >= 2 ? (size_t)shape[nd - 2] : 1, row = (i / cols) % rows;
        /* the last position only (logits without all_logits) is one row: the run's last token */
        const int32_t position = r->start + (rows == 1 ? r->gg.tokens - 1 : (int32_t)row);
        char head[48] = "";
        if (nd >= 3) snprintf(head, sizeof head, " (head %zu)", (i / (cols * rows)) % (size_t)shape[nd - 3]);
        return vkg_error_set(err, VKG_ERR_NOT_FINITE, "%s: the model's outputs overflowed: %s%s at position %d are "
                             "not finite (%s at index %zu of that row); the weights are finite but too large",
                             r->model->facts.architecture, what, head, (int)position, isnan(out[i]) ? "NaN" : out[i] > 0 ? "Inf" : "-Inf",
                             i % cols);
    }
    return VKG_OK;
}

vkg_status vkg_runner_logits(vkg_runner *r, float *out, size_t floats, vkg_error *err) {
    if (r->gg.logits == VKG_NONE)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "%s: the graph was built without logits (no_logits)",
                             r->model->facts.architecture);
    vkg_status st = vkg_session_get_output(r->session, r->gg.logits, out, floats * sizeof(float), err);
    return st == VKG_OK ? check_outputs(r, r->gg.logits, out, floats, "logits", err) : st;
}

vkg_status vkg_runner_attention(vkg_runner *r, int layer, float *out, size_t floats, vkg_error *err) {
    if (layer < 0 || layer >= r->gg.n_layer || r->gg.attention[layer] == VKG_NONE)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "%s: layer %d's attention was not requested when the "
                             "graph was built", r->model->facts.architecture, layer);
    vkg_status st = vkg_session_get_output(r->session, r->gg.attention[layer], out, floats * sizeof(float), err);
    if (st != VKG_OK) return st;
    char what[64];
    snprintf(what, sizeof what, "layer %d's attention", layer);
    st = check_outputs(r, r->gg.attention[layer], out, floats, what, err);
    if (st != VKG_OK) return st;
    /* Each query sees at least itself, so each row sums to 1.  Scores that overflowed to -Inf or
     * NaN can come out of a softmax as a row of zeros instead (the Vulkan kernel gives a row whose
     * every entry is blocked zeros): finite, and just as wrong. */
    int64_t shape[VKG_MAX_DIMS];
    const int nd = vkg_tensor_shape(r->gg.graph, r->gg.attention[layer], shape);
    const size_t cols = (size_t)shape[nd - 1], rows = (size_t)shape[nd - 2];
    for (size_t i = 0; i + cols <= floats; i += cols) {
        double sum = 0;
        for (size_t j = 0; j < cols; j++) sum += out[i + j];
        if (fabs(sum - 1.0) > 1e-2)
            return vkg_error_set(err, VKG_ERR_NOT_FINITE, "%s: the model's outputs overflowed: %s (head %zu) at "
                                 "position %d sums to %g, not 1 (its scores were not finite)",
                                 r->model->facts.architecture, what,
                                 i / (cols * rows), (int)(r->start + (int32_t)((i / cols) % rows)), sum);
    }
    return VKG_OK;
}

vkg_status vkg_decoder_forward(const vkg_decoder *m, vkg_device *dev, const int32_t *ids, int n, int all_logits,
                               float *logits, int attention_layer, float *attention_out, vkg_error *err) {
    vkg_status st = vkg_decoder_check_ids(m, ids, n > 0 ? (size_t)n : 0, err);
    if (st != VKG_OK) return st;
    vkg_forward_options o;
    vkg_forward_options_default(&o, n);
    o.all_logits = all_logits;
    o.no_logits = logits == NULL;
    if (attention_out) o.attention_layer = attention_layer;
    vkg_runner r;
    st = vkg_runner_new(m, dev, &o, &r, err);
    if (st != VKG_OK) return st;
    const size_t V = (size_t)m->facts.n_vocab, H = (size_t)m->facts.n_head;
    st = vkg_runner_run(&r, ids, 0, err);
    if (st == VKG_OK && logits) st = vkg_runner_logits(&r, logits, (all_logits ? (size_t)n : 1) * V, err);
    const size_t per_layer = H * (size_t)n * (size_t)n;
    if (st == VKG_OK && attention_out && attention_layer == VKG_ALL_LAYERS)
        for (int l = 0; st == VKG_OK && l < m->facts.n_layer; l++)
            st = vkg_runner_attention(&r, l, attention_out + (size_t)l * per_layer, per_layer, err);
    else if (st == VKG_OK && attention_out)
        st = vkg_runner_attention(&r, attention_layer, attention_out, per_layer, err);
    vkg_runner_free(&r);
    return st;
}
