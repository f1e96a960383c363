/* The public model API (vkgraph_model.h): opaque handles over a model behind the model
 * interface (decoder.h; choosing the loader is the one place here that names models), the tokenizer,
 * the generator, the sampler and the stop strings.  What each call does lives in those files;
 * this one holds the handles, the tokens of a context and the stage timings. */
#include "vkgraph_model.h"

#include "base/error.h"
#include "base/keep.h"
#include "io/tokenizer.h"
#include "base/json.h"
#include "models/checkpoint.h"
#include "models/gpt2.h"
#include "models/llama.h"
#include "models/gpt2_random.h"
#include "models/model_handles.h"
#include "models/context_fit.h"
#include "runtime/backend.h"
#include "models/model_run.h"
#include "models/sampling.h"
#include "models/stop_strings.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *vkg_weight_dtype_name(vkg_weight_dtype d) {
    switch (d) {
    case VKG_WEIGHTS_AS_STORED: return "as stored";
    case VKG_WEIGHTS_F32: return "f32";
    case VKG_WEIGHTS_F16: return "f16";
    case VKG_WEIGHTS_BF16: return "bf16";
    }
    return "an unknown dtype";
}

void vkg_model_options_default(vkg_model_options *o) {
    memset(o, 0, sizeof *o);
    o->dtype = VKG_WEIGHTS_AS_STORED;
}

/* The loader's dtype for a public one; -2 for none of them. */
static int load_dtype(vkg_weight_dtype d) {
    switch (d) {
    case VKG_WEIGHTS_AS_STORED: return VKG_GPT2_DTYPE_AS_STORED;
    case VKG_WEIGHTS_F32: return VKG_F32;
    case VKG_WEIGHTS_F16: return VKG_F16;
    case VKG_WEIGHTS_BF16: return VKG_BF16;
    }
    return -2;
}

_Static_assert(VKG_NO_TOKEN == VKG_GPT2_NO_TOKEN, "the public missing-token id is GPT-2's");

vkg_status vkg_model_choose_loader(const char *dir, int *llama, vkg_error *err) {
    *llama = 0;
    char *path = vkg_path_join(dir, "config.json");
    if (!path) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
    vkg_json *root = NULL;
    vkg_error ignored = {0};
    vkg_status st = VKG_OK;
    if (vkg_json_parse_file(path, &root, &ignored) == VKG_OK && vkg_json_type_of(root) == VKG_JSON_OBJECT) {
        const char *type = vkg_json_string(vkg_json_get(root, "model_type"), NULL);
        const vkg_json *archs = vkg_json_get(root, "architectures");
        if (!type && vkg_json_type_of(archs) == VKG_JSON_ARRAY) type = vkg_json_string(vkg_json_at(archs, 0), NULL);
        if (type && vkg_llama_arch_find(type) >= 0) *llama = 1;
        else if (type && strcmp(type, "gpt2") != 0 && strcmp(type, "GPT2LMHeadModel") != 0 &&
                 strcmp(type, "GPT2Model") != 0)
            st = vkg_error_set(err, VKG_ERR_UNSUPPORTED, "%s: architecture \"%.60s\" is not supported (supported: "
                               "%s)", path, type, vkg_model_architectures());
    }
    vkg_json_free(root);
    free(path);
    return st;
}

const char *vkg_model_architectures(void) {
    return "gpt2 (GPT2LMHeadModel), llama (LlamaForCausalLM), mistral (MistralForCausalLM), "
           "qwen2 (Qwen2ForCausalLM), qwen3 (Qwen3ForCausalLM)";
}

/* Loads the model in dir behind the model interface, with the loader its config names. */
static vkg_status open_decoder(const char *dir, int dtype, const vkg_model_options *mo, const vkg_device *dev,
                               const vkg_decoder **out, vkg_error *err) {
    *out = NULL;
    int llama = 0;
    vkg_status st = vkg_model_choose_loader(dir, &llama, err);
    if (st != VKG_OK) return st;
    if (llama) {
        vkg_llama *m = NULL;
        const vkg_weights_progress progress = {mo->progress, mo->progress_user};
        st = vkg_llama_load(dir, dtype, &progress, &m, err);
        if (st == VKG_OK) *out = &m->decoder;
        return st;
    }
    vkg_gpt2_load_options lo;
    vkg_gpt2_load_options_default(&lo);
    lo.dtype = dtype;
    lo.progress = mo->progress;
    lo.progress_user = mo->progress_user;
    lo.transposed = vkg_device_prefers_transposed_weights(dev);
    vkg_gpt2 *m = NULL;
    st = vkg_gpt2_load_with(dir, &lo, &m, err);
    if (st == VKG_OK) *out = &m->decoder;
    return st;
}

vkg_status vkg_model_open(const char *dir, vkg_device *dev, const vkg_model_options *opts, vkg_model **out,
                          vkg_error *err) {
    if (out) *out = NULL;
    if (!dir || !out) return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_model_open: NULL argument");
    vkg_model_options o;
    vkg_model_options_default(&o);
    if (opts) o = *opts;
    const int dtype = load_dtype(o.dtype);
    if (dtype == -2)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_model_open: weight dtype %d is none of "
                             "VKG_WEIGHTS_AS_STORED, _F32, _F16, _BF16", (int)o.dtype);
    vkg_model *m = calloc(1, sizeof *m);
    if (!m) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
    m->dev = dev;
    vkg_status st = open_decoder(dir, dtype, &o, dev, &m->dec, err);
    if (st == VKG_OK) m->dtype = m->dec->facts.weight_dtype == VKG_F16    ? VKG_WEIGHTS_F16
                                 : m->dec->facts.weight_dtype == VKG_BF16 ? VKG_WEIGHTS_BF16
                                                                          : VKG_WEIGHTS_F32;
    const char *tok_dir = o.tokenizer_dir ? o.tokenizer_dir : dir;
    if (st == VKG_OK && !o.no_tokenizer && (o.tokenizer_dir || vkg_tokenizer_present(tok_dir))) {
        vkg_error tok_err = {0};
        st = vkg_tokenizer_load(tok_dir, &m->tok, &tok_err);
        /* A Llama-family folder whose own tokenizer is not read yet still runs on token ids: the
         * reason is kept as a note, and a command that needs text says it has no tokenizer. */
        if (st != VKG_OK && st != VKG_ERR_OUT_OF_MEMORY && !o.tokenizer_dir &&
            strcmp(m->dec->facts.architecture, "gpt2") != 0) {
            snprintf(m->tokenizer_note, sizeof m->tokenizer_note, "prompts as token ids only: %.120s", tok_err.message);
            st = VKG_OK;
        } else if (st != VKG_OK) {
            vkg_error_set(err, st, "%s", tok_err.message);
        }
    }
    if (st != VKG_OK) {
        vkg_model_free(m);
        return st;
    }
    st = vkg_generation_config_read(dir, m->dec->facts.n_vocab, &m->gen_config, err);
    if (st != VKG_OK) {
        vkg_model_free(m);
        return st;
    }
    vkg_generation_config_finish_stops(&m->gen_config, m->dec->facts.eos_token, m->tok ? vkg_tokenizer_eos(m->tok) : -1);
    m->random_weights = vkg_gpt2_dir_is_random(dir); /* the marker `vkgraph gpt2-random` writes */
    *out = m;
    return VKG_OK;
}

void vkg_model_free(vkg_model *m) {
    if (!m) return;
    vkg_tokenizer_free(m->tok);
    /* A run that timed out and never finished may still read the weights (imported where they
     * lie): then they, and the model that owns them, stay. */
    if (m->dec && vkg_device_has_abandoned_work(m->dev)) vkg_keep_forever(m->dec->model);
    else if (m->dec) m->dec->free((void *)m->dec->model);
    free(m);
}

vkg_status vkg_model_get_info(const vkg_model *m, vkg_model_info *info, vkg_error *err) {
    if (!m || !info) return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_model_get_info: NULL argument");
    const vkg_decoder_facts *f = &m->dec->facts;
    memset(info, 0, sizeof *info);
    snprintf(info->architecture, sizeof info->architecture, "%s", f->architecture);
    info->n_layer = f->n_layer;
    info->n_head = f->n_head;
    info->n_embd = f->n_embd;
    info->n_kv_head = f->n_kv_head;
    info->head_dim = f->head_dim;
    info->rope_theta = f->rope_theta;
    snprintf(info->rope_scaling, sizeof info->rope_scaling, "%s", f->rope_scaling ? f->rope_scaling : "");
    info->n_ctx = f->n_ctx;
    info->n_vocab = f->n_vocab;
    info->n_inner = f->n_inner;
    info->n_params = f->n_params;
    info->bos_token = m->gen_config.bos_token != VKG_NO_TOKEN ? m->gen_config.bos_token : f->bos_token;
    info->eos_token = f->eos_token;
    info->tied_head = f->tied_head;
    info->dtype = m->dtype;
    info->weights_transposed = f->weights_transposed;
    info->random_weights = m->random_weights;
    /* the model's note (under 320 bytes) and the tokenizer's (under 320) both fit whole */
    snprintf(info->note, sizeof info->note, "%.319s%s%.318s", f->note, f->note[0] && m->tokenizer_note[0] ? "; " : "",
             m->tokenizer_note);
    info->max_length = m->gen_config.max_length;
    info->max_new_tokens = m->gen_config.max_new_tokens;
    snprintf(info->generation_note, sizeof info->generation_note, "%s", m->gen_config.note);
    return VKG_OK;
}

int vkg_model_stop_ids(const vkg_model *m, int32_t *out, int cap) {
    if (!m) return 0;
    for (int i = 0; out && i < cap && i < m->gen_config.n_stop; i++) out[i] = m->gen_config.stop_ids[i];
    return m->gen_config.n_stop;
}

void vkg_model_generate_defaults(const vkg_model *m, vkg_generate_options *o) {
    if (!o) return;
    if (!m) {
        vkg_generate_options_default(o);
        return;
    }
    vkg_generation_config_options(&m->gen_config, o);
}

/* 1 when id ends a turn. */
static int is_stop_id(const vkg_model *m, int32_t id) {
    for (int i = 0; i < m->gen_config.n_stop; i++)
        if (m->gen_config.stop_ids[i] == id) return 1;
    return 0;
}

vkg_status vkg_model_load_tokenizer(vkg_model *m, const char *dir, vkg_error *err) {
    if (!m || !dir) return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_model_load_tokenizer: NULL argument");
    vkg_tokenizer *t = NULL;
    vkg_status st = vkg_tokenizer_load(dir, &t, err);
    if (st != VKG_OK) return st;
    vkg_tokenizer_free(m->tok);
    m->tok = t;
    return VKG_OK;
}

vkg_device *vkg_model_device(const vkg_model *m) { return m ? m->dev : NULL; }
const vkg_tokenizer *vkg_model_tokenizer(const vkg_model *m) { return m ? m->tok : NULL; }

vkg_status vkg_model_check_ids(const vkg_model *m, const int32_t *ids, size_t n, vkg_error *err) {
    if (!m) return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_model_check_ids: NULL model");
    return vkg_decoder_check_ids(m->dec, ids, n, err);
}

void vkg_model_graph_options_default(vkg_model_graph_options *o, int tokens) {
    memset(o, 0, sizeof *o);
    o->tokens = tokens;
    o->logits = VKG_LOGITS_LAST;
    o->attention_layer = VKG_NO_ATTENTION;
}

vkg_status vkg_model_build_graph(const vkg_model *m, const vkg_model_graph_options *o, vkg_graph **out,
                                 vkg_error *err) {
    if (out) *out = NULL;
    if (!m || !o || !out) return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_model_build_graph: NULL argument");
    vkg_forward_options bo;
    vkg_forward_options_default(&bo, o->tokens);
    bo.cache_len = o->n_ctx;
    bo.all_logits = o->logits == VKG_LOGITS_ALL;
    bo.no_logits = o->logits == VKG_LOGITS_NONE;
    bo.attention_layer = o->attention_layer;
    bo.seqs = o->seqs;
    bo.first_slot = o->first_slot;
    bo.n_slots = o->n_slots;
    vkg_forward_graph gg;
    vkg_status st = vkg_decoder_build(m->dec, &bo, &gg, err);
    if (st != VKG_OK) return st;
    *out = gg.graph; /* the graph outlives the handles that index it */
    gg.graph = NULL;
    vkg_forward_graph_free(&gg);
    return VKG_OK;
}

typedef struct compile_args {
    const vkg_model *m;
    vkg_model_graph_options *o;
    const vkg_compile_options *opts;
    vkg_graph **graph;
    vkg_plan **plan;
} compile_args;

/* vkg_fit_context's make: the graph and plan with a cache of n_ctx positions. */
static vkg_status compile_make(void *arg, int n_ctx, vkg_error *err) {
    compile_args *a = arg;
    vkg_plan_free(*a->plan);
    vkg_graph_free(*a->graph);
    *a->plan = NULL;
    *a->graph = NULL;
    a->o->n_ctx = n_ctx;
    vkg_status st = vkg_model_build_graph(a->m, a->o, a->graph, err);
    if (st == VKG_OK) st = vkg_plan_compile(*a->graph, a->opts, a->plan, err);
    return st;
}

vkg_status vkg_model_compile_fitted(const vkg_model *m, vkg_model_graph_options *o, const vkg_compile_options *opts,
                                    vkg_graph **graph, vkg_plan **plan, vkg_error *err) {
    if (graph) *graph = NULL;
    if (plan) *plan = NULL;
    if (!m || !o || !opts || !graph || !plan)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_model_compile_fitted: NULL argument");
    if (o->n_ctx < 1)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_model_compile_fitted: n_ctx is %d: a cache to fit "
                             "needs a size to start from", o->n_ctx);
    compile_args a = {m, o, opts, graph, plan};
    vkg_status st = vkg_fit_context(o->n_ctx, o->tokens, compile_make, &a, err);
    if (st != VKG_OK) {
        vkg_plan_free(*plan);
        vkg_graph_free(*graph);
        *plan = NULL;
        *graph = NULL;
    }
    return st;
}

/* ---- contexts ------------------------------------------------------------------------------- */

void vkg_context_options_default(vkg_context_options *o) {
    memset(o, 0, sizeof *o);
    o->logits = VKG_LOGITS_LAST;
    o->attention_layer = VKG_NO_ATTENTION;
}

typedef struct context_make_args {
    vkg_model *m;
    const vkg_context_options *o;
    vkg_context **out;
} context_make_args;

/* A context of n_ctx positions (a vkg_fit_make). */
static vkg_status context_make(void *arg, int n_ctx, vkg_error *err) {
    const context_make_args *a = arg;
    vkg_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
    ctx->model = a->m;
    vkg_generator_options go = {.cache_len = n_ctx,
                                .all_logits = a->o->logits == VKG_LOGITS_ALL,
                                .no_logits = a->o->logits == VKG_LOGITS_NONE,
                                .attention_layer = a->o->attention_layer,
                                .batch = a->o->n_batch};
    vkg_status st = vkg_generator_new_with(a->m->dec, a->m->dev, &go, &ctx->gen, err);
    if (st == VKG_OK && !(ctx->tokens = malloc(((size_t)ctx->gen.opts.cache_len + 1) * sizeof *ctx->tokens)))
        st = vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
    if (st != VKG_OK) {
        vkg_context_free(ctx);
        return st;
    }
    *a->out = ctx;
    return VKG_OK;
}

vkg_status vkg_context_new(vkg_model *m, const vkg_context_options *opts, vkg_context **out, vkg_error *err) {
    if (out) *out = NULL;
    if (!m || !out) return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_context_new: NULL argument");
    if (!m->dev)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_context_new: the model was opened without a device");
    vkg_context_options o;
    vkg_context_options_default(&o);
    if (opts) o = *opts;
    if (o.logits != VKG_LOGITS_LAST && o.logits != VKG_LOGITS_ALL && o.logits != VKG_LOGITS_NONE)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_context_new: logits mode %d is none of "
                             "VKG_LOGITS_LAST, _ALL, _NONE", (int)o.logits);
    if (o.logits == VKG_LOGITS_NONE && o.attention_layer == VKG_NO_ATTENTION)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_context_new: neither logits nor attention asked "
                             "for: a run would compute nothing");
    const int model_ctx = m->dec->facts.n_ctx;
    if (o.n_ctx_fit < 0 || o.n_ctx_fit > model_ctx)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_context_new: n_ctx_fit is %d: use 0 (the model's "
                             "context) to %d", o.n_ctx_fit, model_ctx);
    const double t0 = vkg_clock_seconds();
    context_make_args a = {.m = m, .o = &o, .out = out};
    vkg_status st = o.n_ctx ? context_make(&a, o.n_ctx, err)
                            : vkg_fit_context(o.n_ctx_fit ? o.n_ctx_fit : model_ctx, o.n_batch, context_make, &a, err);
    if (st == VKG_OK) (*out)->t.setup_s = vkg_clock_seconds() - t0;
    return st;
}

void vkg_context_free(vkg_context *ctx) {
    if (!ctx) return;
    vkg_generator_free(&ctx->gen);
    vkg_sampler_free(&ctx->sampler);
    free(ctx->tokens);
    free(ctx);
}

vkg_model *vkg_context_model(const vkg_context *ctx) { return ctx ? ctx->model : NULL; }
int vkg_context_length(const vkg_context *ctx) { return ctx ? ctx->gen.length : 0; }
int vkg_context_size(const vkg_context *ctx) { return ctx ? ctx->gen.opts.cache_len : 0; }

const int32_t *vkg_context_tokens(const vkg_context *ctx, int *n) {
    *n = ctx ? ctx->n_tokens : 0;
    return ctx ? ctx->tokens : NULL;
}

/* Feeds tokens[gen.length .. n_tokens) in one pass, into the stage the time counts for. */
static vkg_status feed_waiting(vkg_context *ctx, int decode, vkg_error *err) {
    const int n = ctx->n_tokens - ctx->gen.length;
    if (n == 0) return VKG_OK;
    const double t0 = vkg_clock_seconds();
    vkg_status st = vkg_generator_feed(&ctx->gen, ctx->tokens + ctx->gen.length, n, err);
    const double s = vkg_clock_seconds() - t0;
    if (st != VKG_OK) {
        ctx->n_tokens = ctx->gen.length; /* what failed is not in the cache */
        return st;
    }
    if (decode) {
        ctx->t.decode_s += s;
        ctx->t.decode_steps++;
    } else {
        ctx->t.prefill_s += s;
        ctx->t.prefill_tokens += n;
        ctx->t.prefill_passes++;
    }
    return VKG_OK;
}

vkg_status vkg_context_prefill(vkg_context *ctx, const int32_t *ids, int n, vkg_error *err) {
    if (!ctx || (!ids && n > 0)) return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_context_prefill: NULL argument");
    const int S = ctx->gen.opts.cache_len, used = ctx->n_tokens;
    if (n < 1 || n > S - used)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "%d tokens after %d would pass the end of the context "
                             "(%d positions)%s", n, used, S, n < 1 ? ": feed at least one" : "");
    vkg_status st = vkg_model_check_ids(ctx->model, ids, (size_t)n, err);
    if (st != VKG_OK) return st;
    memcpy(ctx->tokens + used, ids, (size_t)n * sizeof *ids);
    ctx->n_tokens += n;
    return feed_waiting(ctx, 0, err);
}

vkg_status vkg_context_decode(vkg_context *ctx, int32_t id, vkg_error *err) { return vkg_context_prefill(ctx, &id, 1, err); }

vkg_status vkg_context_reset(vkg_context *ctx, vkg_error *err) {
    if (!ctx) return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_context_reset: NULL context");
    ctx->n_tokens = 0;
    ctx->sampler_ready = 0; /* a new conversation: the next generate seeds its sampler again */
    return vkg_generator_reset(&ctx->gen, err);
}

vkg_status vkg_context_truncate(vkg_context *ctx, int n, vkg_error *err) {
    if (!ctx) return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_context_truncate: NULL context");
    vkg_status st = vkg_generator_truncate(&ctx->gen, n, err);
    if (st == VKG_OK) ctx->n_tokens = n;
    return st;
}

vkg_status vkg_context_get_logits(vkg_context *ctx, float *out, size_t floats, vkg_error *err) {
    if (!ctx || !out) return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_context_get_logits: NULL argument");
    if (ctx->gen.opts.no_logits)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "the context was made with VKG_LOGITS_NONE");
    if (!ctx->gen.fed) return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "no logits yet: feed a token first");
    const size_t V = (size_t)ctx->model->dec->facts.n_vocab;
    const size_t want = (ctx->gen.opts.all_logits ? (size_t)ctx->gen.fed : 1) * V;
    if (floats != want)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "logits: %zu floats asked for, the last feed has %zu "
                             "(%s x %zu)", floats, want, ctx->gen.opts.all_logits ? "its tokens" : "1", V);
    return vkg_generator_logits(&ctx->gen, out, floats, err);
}

vkg_status vkg_context_get_logits_rows(vkg_context *ctx, const int *rows, int n_rows, float *out, size_t floats,
                                       vkg_error *err) {
    if (!ctx || !rows || !out)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_context_get_logits_rows: NULL argument");
    if (ctx->gen.opts.no_logits)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "the context was made with VKG_LOGITS_NONE");
    if (!ctx->gen.fed) return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "no logits yet: feed a token first");
    const size_t V = (size_t)ctx->model->dec->facts.n_vocab;
    const int fed = ctx->gen.fed;
    if (n_rows < 1 || floats != (size_t)n_rows * V)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "logits rows: %zu floats for %d rows of %zu", floats,
                             n_rows, V);
    const int all = ctx->gen.opts.all_logits && !ctx->gen.restored;
    for (int i = 0; i < n_rows; i++) {
        const int r = rows[i] < 0 ? rows[i] + fed : rows[i];
        if (r < 0 || r >= fed)
            return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "logits row %d: the last feed had %d tokens", rows[i], fed);
        if (!all && r != fed - 1)
            return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "logits row %d: the context keeps only the last "
                                 "token's logits; make it with VKG_LOGITS_ALL for the others", rows[i]);
    }
    if (!all) {
        for (int i = 0; i < n_rows; i++) memcpy(out + (size_t)i * V, ctx->gen.logits, V * sizeof *out);
        return VKG_OK;
    }
    float *every = malloc((size_t)fed * V * sizeof *every);
    if (!every) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory for %d rows of logits", fed);
    vkg_status st = vkg_generator_logits(&ctx->gen, every, (size_t)fed * V, err);
    for (int i = 0; st == VKG_OK && i < n_rows; i++) {
        const int r = rows[i] < 0 ? rows[i] + fed : rows[i];
        memcpy(out + (size_t)i * V, every + (size_t)r * V, V * sizeof *out);
    }
    free(every);
    return st;
}

vkg_status vkg_context_get_attention(vkg_context *ctx, int layer, float *out, size_t floats, vkg_error *err) {
    if (!ctx || !out) return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_context_get_attention: NULL argument");
    const int a = ctx->gen.opts.attention_layer;
    if (!ctx->gen.fed || (a != VKG_ALL_LAYERS && a != layer) || layer < 0 || layer >= ctx->model->dec->facts.n_layer)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "%s: layer %d's attention %s", ctx->gen.fed ? "attention"
                             : "no attention yet", layer, ctx->gen.fed ? "was not asked for when the context was made"
                                                                      : "comes after a feed");
    const size_t H = (size_t)ctx->model->dec->facts.n_head, T = (size_t)ctx->gen.fed;
    const size_t S = (size_t)ctx->gen.opts.cache_len, L = (size_t)ctx->gen.length;
    if (floats != H * T * L)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "attention: %zu floats asked for, the last feed has %zu "
                             "(%zu heads x %zu queries x %zu keys)", floats, H * T * L, H, T, L);
    if (L == S) return vkg_generator_attention(&ctx->gen, layer, out, floats, err); /* a full cache */
    /* The run's rows hold every cache position: keep the first L of each. */
    float *rows = malloc(H * T * S * sizeof *rows);
    if (!rows) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory for %zu attention rows", H * T);
    vkg_status st = vkg_generator_attention(&ctx->gen, layer, rows, H * T * S, err);
    if (st == VKG_OK)
        for (size_t row = 0; row < H * T; row++) memcpy(out + row * L, rows + row * S, L * sizeof *out);
    free(rows);
    return st;
}

vkg_status vkg_context_get_timings(const vkg_context *ctx, vkg_context_timings *out, vkg_error *err) {
    if (!ctx || !out) return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_context_get_timings: NULL argument");
    *out = ctx->t;
    return VKG_OK;
}

void vkg_context_reset_timings(vkg_context *ctx) {
    if (ctx) memset(&ctx->t, 0, sizeof ctx->t);
}

/* ---- generation ------------------------------------------------------------------------------ */

void vkg_generate_options_default(vkg_generate_options *o) {
    memset(o, 0, sizeof *o);
    o->max_tokens = 50;
    vkg_sampling_options_default(&o->sampling);
    o->sampling.temperature = 0.0f;
}

/* With a device that profiles: ends the span the previous mark opened and opens "token k" (k = 0:
 * ends only). */
static vkg_status mark_token(vkg_context *ctx, int64_t k, vkg_error *err) {
    char name[32];
    snprintf(name, sizeof name, "token %lld", (long long)k);
    return vkg_device_profile_mark(ctx->model->dev, k ? name : NULL, err);
}

typedef struct generation {
    vkg_context *ctx;
    const vkg_generate_options *o;
    vkg_stop stop;
    vkg_token_callback on_token;
    void *user;
    vkg_generate_result *res;
} generation;

/* Passes token id's text, through the stop strings, to the callback. */
static vkg_status deliver(generation *g, int32_t id, int *stop, vkg_error *err) {
    size_t len = 0;
    const char *bytes = g->ctx->model->tok ? vkg_tokenizer_token_bytes(g->ctx->model->tok, id, &len) : NULL;
    const char *ready = "";
    size_t ready_len = 0;
    vkg_status st = vkg_stop_push(&g->stop, bytes ? bytes : "", len, &ready, &ready_len, err);
    if (st != VKG_OK) return st;
    if (g->stop.matched >= 0) {
        g->res->reason = VKG_STOP_STRING;
        g->res->stop_index = g->stop.matched;
        *stop = 1;
    }
    if (g->on_token && g->on_token(g->user, id, ready, ready_len) != 0) {
        if (!*stop) g->res->reason = VKG_STOP_CALLBACK;
        *stop = 1;
    }
    return VKG_OK;
}

static vkg_status generate_loop(generation *g, vkg_error *err) {
    vkg_context *ctx = g->ctx;
    const vkg_generate_options *o = g->o;
    const vkg_generation_config *gc = &ctx->model->gen_config;
    const int S = ctx->gen.opts.cache_len;
    vkg_status st = mark_token(ctx, ctx->generated + 1, err);
    if (st == VKG_OK && o->n_prompt) {
        memcpy(ctx->tokens + ctx->n_tokens, o->prompt, (size_t)o->n_prompt * sizeof *o->prompt);
        ctx->n_tokens += o->n_prompt;
    }
    if (st == VKG_OK) st = feed_waiting(ctx, 0, err);
    int stop = 0;
    for (int produced = 0; st == VKG_OK && produced < o->max_tokens && !stop;) {
        if (!ctx->gen.fed) {
            st = vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "generate: no logits to choose from: give a prompt (the "
                               "context is empty or was truncated)");
            break;
        }
        float *logits = NULL;
        if ((st = vkg_generator_last_logits(&ctx->gen, &logits, err)) != VKG_OK) break;
        if (o->ignore_eos) /* as llama.cpp */
            for (int i = 0; i < gc->n_stop; i++) logits[gc->stop_ids[i]] = -INFINITY;
        double t0 = vkg_clock_seconds();
        int32_t next;
        st = vkg_sampler_next(&ctx->sampler, logits, ctx->tokens, ctx->gen.length, &next, err);
        ctx->t.sample_s += vkg_clock_seconds() - t0;
        if (st != VKG_OK) break;
        ctx->t.samples++;
        if (is_stop_id(ctx->model, next)) {
            g->res->reason = VKG_STOP_EOS;
            break;
        }
        ctx->tokens[ctx->n_tokens++] = next; /* pending until the next feed */
        produced++;
        ctx->generated++;
        g->res->generated++;
        if ((st = deliver(g, next, &stop, err)) != VKG_OK || stop) break;
        if (produced == o->max_tokens) break;
        if (ctx->gen.length >= S) {
            g->res->reason = VKG_STOP_CONTEXT_FULL;
            break;
        }
        if ((st = mark_token(ctx, ctx->generated + 1, err)) == VKG_OK) st = feed_waiting(ctx, 1, err);
    }
    if (st == VKG_OK) st = mark_token(ctx, 0, err);
    if (st == VKG_OK && g->res->reason != VKG_STOP_STRING && g->res->reason != VKG_STOP_CALLBACK && g->on_token) {
        /* A stop string that began but never completed is text after all. */
        size_t len;
        const char *rest = vkg_stop_flush(&g->stop, &len);
        if (len && g->on_token(g->user, VKG_NO_TOKEN, rest, len) != 0 && g->res->reason == VKG_STOP_MAX_TOKENS)
            g->res->reason = VKG_STOP_CALLBACK;
    }
    return st;
}

vkg_status vkg_context_generate(vkg_context *ctx, const vkg_generate_options *opts, vkg_token_callback on_token,
                                void *user, vkg_generate_result *result, vkg_error *err) {
    vkg_generate_result local;
    vkg_generate_result *res = result ? result : &local;
    memset(res, 0, sizeof *res);
    res->stop_index = -1;
    if (!ctx) return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_context_generate: NULL context");
    vkg_generate_options o;
    vkg_generate_options_default(&o);
    if (opts) o = *opts;
    if (o.max_tokens < 0)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "generate: max_tokens %d; use 0 or more", o.max_tokens);
    if (ctx->gen.opts.no_logits)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "generate: the context was made with VKG_LOGITS_NONE");
    if (o.n_stops && !ctx->model->tok)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "generate: stop strings match text, and the model has no "
                             "tokenizer");
    if (o.n_prompt < 0 || (o.n_prompt && !o.prompt) || o.n_prompt > ctx->gen.opts.cache_len - ctx->n_tokens)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "generate: a prompt of %d tokens after %d would pass the "
                             "end of the context (%d positions)", o.n_prompt, ctx->n_tokens, ctx->gen.opts.cache_len);
    vkg_status st = o.n_prompt ? vkg_model_check_ids(ctx->model, o.prompt, (size_t)o.n_prompt, err) : VKG_OK;
    if (st != VKG_OK) return st;
    if (!ctx->sampler_ready || memcmp(&ctx->sampler.opts, &o.sampling, sizeof o.sampling) != 0) {
        vkg_sampler_free(&ctx->sampler);
        ctx->sampler_ready = 0;
        st = vkg_sampler_init(&ctx->sampler, &o.sampling, ctx->model->dec->facts.n_vocab, err);
        if (st != VKG_OK) return st;
        ctx->sampler_ready = 1;
    }
    generation g = {.ctx = ctx, .o = &o, .on_token = on_token, .user = user, .res = res};
    st = vkg_stop_init(&g.stop, o.stops, o.n_stops, err);
    if (st == VKG_OK) st = generate_loop(&g, err);
    vkg_stop_free(&g.stop);
    return st;
}

const vkg_plan *vkg_context_plan(const vkg_context *ctx, int tokens) {
    if (!ctx) return NULL;
    const vkg_generator *g = &ctx->gen;
    if (tokens == g->base.gg.tokens) return g->base.plan;
    if (tokens == 1 && g->has_step) return g->step.plan;
    if (g->has_other && g->other.gg.tokens == tokens) return g->other.plan;
    return NULL;
}

vkg_status vkg_context_enable_profiling(vkg_context *ctx, int enable, vkg_error *err) {
    if (!ctx) return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_context_enable_profiling: NULL context");
    vkg_generator *g = &ctx->gen;
    vkg_status st = vkg_session_enable_profiling(g->base.session, enable, err);
    if (st == VKG_OK && g->has_step) st = vkg_session_enable_profiling(g->step.session, enable, err);
    if (st == VKG_OK && g->has_other) st = vkg_session_enable_profiling(g->other.session, enable, err);
    return st;
}
