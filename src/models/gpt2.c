/* Loading GPT-2 weights from a Hugging Face folder: config.json + model.safetensors. */
#include "models/gpt2.h"

#include "base/error.h"
#include "base/json.h"
#include "models/checkpoint.h"
#include "models/gpt2_weights.h"
#include "models/weights_read.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* config.json's tie_word_embeddings (default true, as in Hugging Face's PretrainedConfig). */
static vkg_status read_tie(const char *path, int *tie, vkg_error *err) {
    vkg_json *root = NULL;
    vkg_status st = vkg_json_parse_file(path, &root, err);
    if (st != VKG_OK) return st;
    const vkg_json *v = vkg_json_get(root, "tie_word_embeddings");
    *tie = vkg_json_type_of(v) == VKG_JSON_BOOL ? vkg_json_bool(v) : 1;
    vkg_json_free(root);
    return VKG_OK;
}

/* The tensors to read: the weight table's rows for this config (weights_read.h reads them). */
typedef struct listing {
    const vkg_gpt2 *m;   /* its config and whether it holds the Conv1D matrices transposed */
    vkg_weight_want *w;
    int n;
} listing;

static vkg_status want(void *user, vkg_gpt2_weight id, int layer) {
    listing *l = user;
    const vkg_gpt2_weight_spec *s = &vkg_gpt2_weights[id];
    vkg_weight_want *x = &l->w[l->n++];
    memset(x, 0, sizeof *x);
    vkg_gpt2_weight_name(id, layer, x->name, sizeof x->name);
    x->ndim = s->d1 == VKG_GPT2_DIM_NONE ? 1 : 2;
    x->shape[0] = vkg_gpt2_dim_size(&l->m->config, s->d0);
    x->shape[1] = vkg_gpt2_dim_size(&l->m->config, s->d1);
    x->id = id;
    x->layer = layer;
    x->transpose = vkg_gpt2_held_transposed(l->m, id);
    return VKG_OK;
}

/* Finds the listed tensors, with config.json's sizes in the messages. */
static vkg_status match_tensors(const vkg_gpt2 *m, const vkg_checkpoint *ck, vkg_weight_want *w, int n,
                                vkg_error *err) {
    const vkg_gpt2_config *c = &m->config;
    char missing[160], shapes[160];
    snprintf(missing, sizeof missing, "n_layer %d, n_embd %d, n_inner %d, vocab_size %d, n_positions %d", c->n_layer,
             c->n_embd, vkg_gpt2_inner_size(c), c->vocab_size, c->n_positions);
    snprintf(shapes, sizeof shapes, "n_embd %d, n_inner %d, vocab_size %d, n_positions %d", c->n_embd,
             vkg_gpt2_inner_size(c), c->vocab_size, c->n_positions);
    /* the attention's causal-mask buffers, which older files hold; a stored head the config ties
       to wte (transformers ties it after loading, so the stored one is never used) */
    const char *const not_read[] = {".attn.bias", ".attn.masked_bias", m->tied_head ? "lm_head.weight" : NULL, NULL};
    const vkg_weights_note note = {.missing = missing, .shapes = shapes, .not_read = not_read};
    return vkg_weights_match(ck, m->transformer_prefix ? "transformer." : "", w, n, &note, err);
}

static vkg_status want_required(void *user, vkg_gpt2_weight id, int layer) {
    return vkg_gpt2_weights[id].optional ? VKG_OK : want(user, id, layer);
}

/* Every tensor of the table but the optional head; l->n gets the count.  The caller frees l->w
 * (room for the head is left at the end). */
static vkg_status list_tensors(listing *l) {
    const int n_layer = l->m->config.n_layer;
    l->n = 0;
    l->w = calloc(((size_t)n_layer + 1) * VKG_GPT2_N_WEIGHTS, sizeof *l->w);
    if (!l->w) return VKG_ERR_OUT_OF_MEMORY;
    return vkg_gpt2_weights_each(n_layer, want_required, l);
}

static vkg_status load_into(vkg_gpt2 *m, const char *dir, const vkg_gpt2_load_options *o, vkg_error *err) {
    vkg_status st = vkg_checkpoint_check_folder(dir, err);
    if (st != VKG_OK) return st;
    char *config_path = vkg_path_join(dir, "config.json");
    if (!config_path) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
    struct stat sb;
    int tie = 1;
    if (stat(config_path, &sb) != 0)
        st = vkg_error_set(err, VKG_ERR_IO, "%s: no config.json (a Hugging Face GPT-2 folder holds config.json and "
                           "model.safetensors)", dir);
    if (st == VKG_OK) st = vkg_gpt2_config_load(config_path, &m->config, err); /* checks it, names the file */
    if (st == VKG_OK) st = read_tie(config_path, &tie, err);
    vkg_checkpoint *ck = NULL;
    if (st == VKG_OK) st = vkg_checkpoint_open(dir, &ck, err);
    if (st == VKG_OK) {
        m->transformer_prefix = vkg_checkpoint_find(ck, "transformer.wte.weight", NULL) != NULL;
        m->layers = calloc((size_t)m->config.n_layer, sizeof *m->layers);
        if (!m->layers) st = vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
    }
    m->transposed = o->transposed;
    listing l = {.m = m};
    if (st == VKG_OK && list_tensors(&l) != VKG_OK) st = vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
    vkg_weight_want *w = l.w;
    if (st == VKG_OK) {
        /* The head: wte when config.json ties them (its default), else lm_head.weight. */
        m->tied_head = tie;
        const int has_head = vkg_checkpoint_find(ck, "lm_head.weight", NULL) ||
                             vkg_checkpoint_find(ck, "transformer.lm_head.weight", NULL);
        if (!tie)
            st = has_head ? want(&l, VKG_GPT2_LM_HEAD, 0)
                          : vkg_error_set(err, VKG_ERR_FORMAT, "%s: config.json sets tie_word_embeddings to false, "
                                          "but the file has no lm_head.weight for the untied output head",
                                          vkg_checkpoint_path(ck));
    }
    if (st == VKG_OK) st = match_tensors(m, ck, w, l.n, err);
    if (st == VKG_OK) {
        m->dtype = w[0].found->dtype;
        m->weight_dtype =
            o->dtype == VKG_GPT2_DTYPE_AS_STORED ? vkg_weights_dtype_of_file(m->dtype) : (vkg_dtype)o->dtype;
        const vkg_weights_progress progress = {o->progress, o->progress_user};
        st = vkg_weights_read(ck, w, l.n, m->weight_dtype, &progress, &m->weights, &m->weights_bytes, err);
    }
    for (int i = 0; st == VKG_OK && i < l.n; i++) vkg_gpt2_weight_set(m, (vkg_gpt2_weight)w[i].id, w[i].layer, w[i].data);
    vkg_checkpoint_close(ck); /* everything is in m->weights: the files may change from here on */
    if (st == VKG_OK && m->tied_head) m->lm_head = m->wte;
    if (st == VKG_OK) {
        m->activation = vkg_gpt2_activation_kind(m->config.activation);
        snprintf(m->note, sizeof m->note, "%s", m->config.note);
        vkg_gpt2_decoder_init(m);
    }
    free(w);
    free(config_path);
    return st;
}

void vkg_gpt2_load_options_default(vkg_gpt2_load_options *o) {
    memset(o, 0, sizeof *o);
    o->dtype = VKG_GPT2_DTYPE_AS_STORED;
}

vkg_status vkg_gpt2_load(const char *dir, vkg_gpt2 **out, vkg_error *err) { return vkg_gpt2_load_with(dir, NULL, out, err); }

vkg_status vkg_gpt2_load_with(const char *dir, const vkg_gpt2_load_options *opts, vkg_gpt2 **out, vkg_error *err) {
    *out = NULL;
    if (!dir) return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_gpt2_load: no folder given");
    vkg_gpt2_load_options o;
    if (opts) o = *opts;
    else vkg_gpt2_load_options_default(&o);
    if (o.dtype != VKG_GPT2_DTYPE_AS_STORED && o.dtype != VKG_F32 && o.dtype != VKG_F16 && o.dtype != VKG_BF16)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_gpt2_load: weight dtype %d: use f32, f16 or bf16",
                             o.dtype);
    vkg_gpt2 *m = calloc(1, sizeof *m);
    if (!m) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory loading %s", dir);
    vkg_status st = load_into(m, dir, &o, err);
    if (st != VKG_OK) {
        vkg_gpt2_free(m);
        return st;
    }
    *out = m;
    return VKG_OK;
}

void vkg_gpt2_free(vkg_gpt2 *m) {
    if (!m) return;
    vkg_weights_free(m->weights, m->weights_bytes);
    free(m->layers);
    free(m);
}

int64_t vkg_gpt2_parameter_count(const vkg_gpt2 *m) {
    return vkg_gpt2_weights_numel(&m->config, m->tied_head);
}

static void free_model(void *m) { vkg_gpt2_free(m); }

void vkg_gpt2_decoder_init(vkg_gpt2 *m) {
    const vkg_gpt2_config *c = &m->config;
    m->decoder = (vkg_decoder){
        .model = m,
        .facts = {.architecture = "gpt2", .ctx_key = "n_positions", .n_layer = c->n_layer, .n_head = c->n_head,
                  .n_kv_head = c->n_head, .head_dim = c->n_embd / c->n_head, .rope_scaling = "", .n_embd = c->n_embd, .n_inner = vkg_gpt2_inner_size(c),
                  .n_ctx = c->n_positions, .n_vocab = c->vocab_size, .bos_token = c->bos_token_id,
                  .eos_token = c->eos_token_id, .tied_head = m->tied_head, .n_params = vkg_gpt2_parameter_count(m),
                  .weight_dtype = m->weight_dtype, .weights_transposed = m->transposed, .note = m->note},
        .build = vkg_gpt2_build_graph,
        .free = free_model,
    };
}
