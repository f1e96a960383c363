/* Saving a context's state and loading it into another context of the same model (vkgraph_model.h):
 * a header of counts that the loading context checks, the tokens, the last logits, the
 * generate sampler's options and random stream, and the KV cache rows the tokens filled.
 * Numbers are stored in the machine's byte order (the header's endian mark refuses another). */
#include "models/model_handles.h"

#include "base/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char MAGIC[8] = {'V', 'K', 'G', 'C', 'T', 'X', 0, 1};
enum { VERSION = 1, ENDIAN_MARK = 0x01020304 };

typedef struct state_header {
    char magic[8];
    uint32_t endian, version;
    uint32_t n_layer, planes, row, n_vocab;   /* the cache's shape and the vocabulary      */
    int32_t n_tokens, length;                 /* tokens (with a pending one), cached tokens */
    uint32_t has_logits, has_sampler, options_bytes;
} state_header;

/* The cache's planes per layer (2 * KV heads) and row length (the head size). */
static void cache_dims(const vkg_context *ctx, uint32_t *planes, uint32_t *row) {
    const vkg_decoder_facts *f = &ctx->model->dec->facts;
    *planes = 2u * (uint32_t)f->n_kv_head;
    *row = (uint32_t)(f->n_embd / f->n_head);
}

static size_t state_bytes(const state_header *h, size_t cache_floats) {
    return sizeof *h + (size_t)h->n_tokens * sizeof(int32_t) + (h->has_logits ? (size_t)h->n_vocab * sizeof(float) : 0) +
           (h->has_sampler ? sizeof(vkg_sampling_options) + sizeof(vkg_rng) : 0) + cache_floats * sizeof(float);
}

vkg_status vkg_context_state_save(vkg_context *ctx, void **data, size_t *bytes, vkg_error *err) {
    if (data) *data = NULL;
    if (bytes) *bytes = 0;
    if (!ctx || !data || !bytes) return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_context_state_save: NULL argument");
    const vkg_decoder_facts *f = &ctx->model->dec->facts;
    state_header h = {.endian = ENDIAN_MARK, .version = VERSION, .n_layer = (uint32_t)f->n_layer,
                      .n_vocab = (uint32_t)f->n_vocab, .n_tokens = ctx->n_tokens, .length = ctx->gen.length,
                      .options_bytes = sizeof(vkg_sampling_options)};
    memcpy(h.magic, MAGIC, sizeof MAGIC);
    cache_dims(ctx, &h.planes, &h.row);
    /* The prediction after the last token: kept when it is the one sampling reads next. */
    h.has_logits = ctx->gen.fed && !ctx->gen.opts.all_logits && !ctx->gen.opts.no_logits &&
                   ctx->n_tokens == ctx->gen.length;
    h.has_sampler = (uint32_t)ctx->sampler_ready;
    const size_t cache_floats = vkg_generator_cache_floats(&ctx->gen, ctx->gen.length);
    const size_t total = state_bytes(&h, cache_floats);
    unsigned char *out = malloc(total), *at = out;
    if (!out) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory for a context state of %zu bytes", total);
    memcpy(at, &h, sizeof h);
    at += sizeof h;
    memcpy(at, ctx->tokens, (size_t)h.n_tokens * sizeof(int32_t));
    at += (size_t)h.n_tokens * sizeof(int32_t);
    if (h.has_logits) {
        memcpy(at, ctx->gen.logits, (size_t)h.n_vocab * sizeof(float));
        at += (size_t)h.n_vocab * sizeof(float);
    }
    if (h.has_sampler) {
        memcpy(at, &ctx->sampler.opts, sizeof ctx->sampler.opts);
        at += sizeof ctx->sampler.opts;
        memcpy(at, vkg_sampler_chain_rng(ctx->sampler.chain), sizeof(vkg_rng));
        at += sizeof(vkg_rng);
    }
    float *cache = (float *)(void *)at; /* sizeof(state_header) and every part before are multiples of 4 */
    vkg_status st = vkg_generator_cache_read(&ctx->gen, cache, err);
    if (st != VKG_OK) {
        free(out);
        return st;
    }
    *data = out;
    *bytes = total;
    return VKG_OK;
}

static vkg_status bad(vkg_error *err, const char *what) {
    return vkg_error_set(err, VKG_ERR_FORMAT, "context state: %s", what);
}

vkg_status vkg_context_state_load(vkg_context *ctx, const void *data, size_t bytes, vkg_error *err) {
    if (!ctx || (!data && bytes)) return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_context_state_load: NULL argument");
    state_header h;
    if (bytes < sizeof h) return bad(err, "shorter than its header: not a saved state, or cut short");
    memcpy(&h, data, sizeof h);
    if (memcmp(h.magic, MAGIC, sizeof MAGIC) != 0) return bad(err, "not a vkgraph context state (wrong magic)");
    if (h.endian != ENDIAN_MARK) return bad(err, "saved on a machine of the other byte order");
    if (h.version != VERSION)
        return vkg_error_set(err, VKG_ERR_FORMAT, "context state: version %u; this build reads version %d", h.version,
                             VERSION);
    const vkg_decoder_facts *f = &ctx->model->dec->facts;
    uint32_t planes, row;
    cache_dims(ctx, &planes, &row);
    if (h.n_layer != (uint32_t)f->n_layer || h.planes != planes || h.row != row || h.n_vocab != (uint32_t)f->n_vocab)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "context state: saved from a model of %u layers, %u KV "
                             "planes of %u and %u tokens; this context's model has %d, %u of %u and %d", h.n_layer,
                             h.planes, h.row, h.n_vocab, f->n_layer, planes, row, f->n_vocab);
    const int S = ctx->gen.opts.cache_len;
    if (h.length < 0 || h.length > S || h.n_tokens < h.length || h.n_tokens > h.length + 1)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "context state: %d cached tokens (%d in all) do not fit "
                             "this context of %d positions", (int)h.length, (int)h.n_tokens, S);
    if (h.has_logits > 1 || h.has_sampler > 1 || h.options_bytes != sizeof(vkg_sampling_options))
        return bad(err, "malformed header");
    const size_t cache_floats = vkg_generator_cache_floats(&ctx->gen, h.length);
    if (bytes != state_bytes(&h, cache_floats))
        return vkg_error_set(err, VKG_ERR_FORMAT, "context state: %zu bytes, its header says %zu (cut short or "
                             "damaged)", bytes, state_bytes(&h, cache_floats));
    const unsigned char *at = (const unsigned char *)data + sizeof h;
    const int32_t *tokens = (const int32_t *)(const void *)at;
    at += (size_t)h.n_tokens * sizeof(int32_t);
    vkg_status st = vkg_model_check_ids(ctx->model, tokens, (size_t)h.n_tokens, err);
    if (st != VKG_OK) return st;
    const float *logits = NULL;
    if (h.has_logits) {
        logits = (const float *)(const void *)at;
        at += (size_t)h.n_vocab * sizeof(float);
    }
    vkg_sampling_options so;
    vkg_rng rng;
    if (h.has_sampler) {
        memcpy(&so, at, sizeof so);
        at += sizeof so;
        memcpy(&rng, at, sizeof rng);
        at += sizeof rng;
        if ((st = vkg_sampling_options_check(&so, err)) != VKG_OK) return st;
    }
    /* From here the context changes: an error leaves it empty. */
    vkg_sampler fresh = {0};
    if (h.has_sampler && (st = vkg_sampler_init(&fresh, &so, f->n_vocab, err)) != VKG_OK) return st;
    st = vkg_generator_cache_write(&ctx->gen, (const float *)(const void *)at, h.length, err);
    if (st != VKG_OK) {
        vkg_sampler_free(&fresh);
        ctx->n_tokens = 0;
        vkg_error reset_err;
        vkg_generator_reset(&ctx->gen, &reset_err);
        return st;
    }
    memcpy(ctx->tokens, tokens, (size_t)h.n_tokens * sizeof *tokens);
    ctx->n_tokens = h.n_tokens;
    if (logits && !ctx->gen.opts.all_logits && !ctx->gen.opts.no_logits) {
        memcpy(ctx->gen.logits, logits, (size_t)h.n_vocab * sizeof *logits);
        ctx->gen.fed = 1;
        ctx->gen.last = &ctx->gen.base;
        ctx->gen.restored = 1;
    }
    vkg_sampler_free(&ctx->sampler);
    ctx->sampler_ready = 0;
    if (h.has_sampler) {
        ctx->sampler = fresh;
        *vkg_sampler_chain_rng(ctx->sampler.chain) = rng;
        ctx->sampler_ready = 1;
    }
    return VKG_OK;
}

vkg_status vkg_context_state_save_file(vkg_context *ctx, const char *path, vkg_error *err) {
    if (!path) return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_context_state_save_file: NULL path");
    void *data;
    size_t bytes;
    vkg_status st = vkg_context_state_save(ctx, &data, &bytes, err);
    if (st != VKG_OK) return st;
    FILE *fp = fopen(path, "wb");
    if (!fp) st = vkg_error_set(err, VKG_ERR_IO, "cannot create %s", path);
    else {
        const int wrote = fwrite(data, 1, bytes, fp) == bytes;
        if (fclose(fp) != 0 || !wrote) st = vkg_error_set(err, VKG_ERR_IO, "cannot write %s (disk full?)", path);
    }
    free(data);
    return st;
}

vkg_status vkg_context_state_load_file(vkg_context *ctx, const char *path, vkg_error *err) {
    if (!path) return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_context_state_load_file: NULL path");
    if (!ctx) return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_context_state_load_file: NULL context");
    FILE *fp = fopen(path, "rb");
    if (!fp) return vkg_error_set(err, VKG_ERR_IO, "cannot open %s", path);
    /* No read past what a state of this context can hold: a huge or wrong file is refused
     * before anything is allocated for it. */
    const size_t most = sizeof(state_header) + ((size_t)ctx->gen.opts.cache_len + 1) * sizeof(int32_t) +
                        (size_t)ctx->model->dec->facts.n_vocab * sizeof(float) + sizeof(vkg_sampling_options) +
                        sizeof(vkg_rng) + vkg_generator_cache_floats(&ctx->gen, ctx->gen.opts.cache_len) * sizeof(float);
    vkg_status st = VKG_OK;
    long size = -1;
    if (fseek(fp, 0, SEEK_END) != 0 || (size = ftell(fp)) < 0 || fseek(fp, 0, SEEK_SET) != 0)
        st = vkg_error_set(err, VKG_ERR_IO, "cannot read %s", path);
    else if ((unsigned long)size > most)
        st = vkg_error_set(err, VKG_ERR_FORMAT, "%s: %ld bytes, more than any state of this context (%zu)", path, size,
                           most);
    void *data = NULL;
    if (st == VKG_OK && !(data = malloc(size ? (size_t)size : 1)))
        st = vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory reading %s", path);
    if (st == VKG_OK && fread(data, 1, (size_t)size, fp) != (size_t)size)
        st = vkg_error_set(err, VKG_ERR_IO, "cannot read %s", path);
    fclose(fp);
    if (st == VKG_OK) st = vkg_context_state_load(ctx, data, (size_t)size, err);
    if (st != VKG_OK && err && st == VKG_ERR_FORMAT) {
        char msg[sizeof err->message];
        snprintf(msg, sizeof msg, "%s", err->message);
        vkg_error_set(err, st, "%s: %s", path, msg);
    }
    free(data);
    return st;
}
