/* Loading GPT-2 weights from a Hugging Face folder: config.json + model.safetensors. */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include "models/gpt2.h"

#include "base/error.h"
#include "base/json.h"
#include "models/gpt2_weights.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* One tensor the model needs (a row of gpt2_weights.c's table for one layer): its name (without
 * prefix) and shape, 2-d for a matrix (held in weight_dtype), 1-d for a vector (held in f32). */
typedef struct wanted {
    char name[64];
    int ndim;
    int64_t shape[2];
    vkg_gpt2_weight id;
    int layer;
    const vkg_st_tensor *found;
    size_t offset;                   /* in the weights block */
} wanted;

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

static const vkg_st_tensor *find(const vkg_safetensors *st, const char *prefix, const char *name) {
    char full[96];
    snprintf(full, sizeof full, "%s%s", prefix, name);
    return vkg_safetensors_find(st, full);
}

typedef struct listing {
    const vkg_gpt2_config *config;
    wanted *w;
    int n;
} listing;

static vkg_status want(void *user, vkg_gpt2_weight id, int layer) {
    listing *l = user;
    const vkg_gpt2_weight_spec *s = &vkg_gpt2_weights[id];
    wanted *x = &l->w[l->n++];
    memset(x, 0, sizeof *x);
    vkg_gpt2_weight_name(id, layer, x->name, sizeof x->name);
    x->ndim = s->d1 == VKG_GPT2_DIM_NONE ? 1 : 2;
    x->shape[0] = vkg_gpt2_dim_size(l->config, s->d0);
    x->shape[1] = vkg_gpt2_dim_size(l->config, s->d1);
    x->id = id;
    x->layer = layer;
    return VKG_OK;
}

static vkg_status want_required(void *user, vkg_gpt2_weight id, int layer) {
    return vkg_gpt2_weights[id].optional ? VKG_OK : want(user, id, layer);
}

/* Every tensor of the table but the optional head; l->n gets the count.  The caller frees l->w
 * (room for the head is left at the end). */
static vkg_status list_tensors(listing *l) {
    const int n_layer = l->config->n_layer;
    l->n = 0;
    l->w = calloc(((size_t)n_layer + 1) * VKG_GPT2_N_WEIGHTS, sizeof *l->w);
    if (!l->w) return VKG_ERR_OUT_OF_MEMORY;
    return vkg_gpt2_weights_each(n_layer, want_required, l);
}

/* Finds every tensor of the list and checks its shape and dtype. */
static vkg_status match_tensors(vkg_gpt2 *m, const vkg_safetensors *file, wanted *w, int n, const char *path,
                                vkg_error *err) {
    const char *prefix = m->transformer_prefix ? "transformer." : "";
    for (int i = 0; i < n; i++) {
        char want_s[64], got_s[128];
        const vkg_st_tensor *t = find(file, prefix, w[i].name);
        if (!t) t = find(file, "", w[i].name);
        if (!t) {
            /* The config's sizes help when the file is of another model than config.json. */
            return vkg_error_set(err, VKG_ERR_FORMAT, "%s: tensor %s%s is missing (expected shape %s; config.json "
                                 "says n_layer %d, n_embd %d, n_inner %d, vocab_size %d, n_positions %d)",
                                 path, prefix, w[i].name,
                                 vkg_shape_str(w[i].ndim, w[i].shape, want_s, sizeof want_s), m->config.n_layer,
                                 m->config.n_embd, vkg_gpt2_inner_size(&m->config), m->config.vocab_size,
                                 m->config.n_positions);
        }
        int same = t->ndim == w[i].ndim;
        for (int d = 0; same && d < t->ndim; d++) same = t->shape[d] == w[i].shape[d];
        if (!same)
            return vkg_error_set(err, VKG_ERR_FORMAT, "%s: tensor %s has shape %s, expected %s (from config.json: "
                                 "n_embd %d, n_inner %d, vocab_size %d, n_positions %d)", path, t->name,
                                 vkg_shape_str(t->ndim, t->shape, got_s, sizeof got_s),
                                 vkg_shape_str(w[i].ndim, w[i].shape, want_s, sizeof want_s), m->config.n_embd,
                                 vkg_gpt2_inner_size(&m->config), m->config.vocab_size, m->config.n_positions);
        if (!vkg_st_dtype_convertible(t->dtype))
            return vkg_error_set(err, VKG_ERR_UNSUPPORTED, "%s: tensor %s is %s; only F32, F16 and BF16 weights are "
                                 "supported", path, t->name, vkg_st_dtype_name(t->dtype));
        w[i].found = t;
    }
    return VKG_OK;
}

static vkg_st_dtype file_dtype_of(vkg_dtype d) {
    return d == VKG_F16 ? VKG_ST_F16 : d == VKG_BF16 ? VKG_ST_BF16 : VKG_ST_F32;
}
static vkg_dtype dtype_of_file(vkg_st_dtype d) {
    return d == VKG_ST_F16 ? VKG_F16 : d == VKG_ST_BF16 ? VKG_BF16 : VKG_F32;
}

/* The dtype a wanted tensor is held in: the matrices' one, or f32 for a vector. */
static vkg_dtype held_dtype(const vkg_gpt2 *m, const wanted *w) { return w->ndim == 2 ? m->weight_dtype : VKG_F32; }

/* The first element that is NaN or +-Inf in n elements of dtype d, or n. */
static size_t first_nonfinite(const void *data, vkg_dtype d, size_t n, const char **what) {
    for (size_t i = 0; i < n; i++) {
        uint32_t bits;
        if (d == VKG_F32) memcpy(&bits, (const float *)data + i, 4);
        else bits = d == VKG_F16 ? vkg_bits_from_f32(vkg_f16_to_f32(((const uint16_t *)data)[i]))
                                 : (uint32_t)((const uint16_t *)data)[i] << 16;
        if ((bits & 0x7F800000u) != 0x7F800000u) continue;
        *what = (bits & 0x7FFFFFu) ? "NaN" : (bits >> 31) ? "-Inf" : "Inf";
        return i;
    }
    return n;
}

/* A weight holding NaN or Inf would turn every answer into NaN (printed as token 0), so it is
 * refused at load, naming the first bad element.  One pass over the tensor as held (f32 or
 * 16-bit), small beside the read itself. */
static vkg_status check_finite(const char *path, const vkg_st_tensor *t, const void *v, vkg_dtype d, vkg_error *err) {
    const size_t n = (size_t)vkg_st_tensor_numel(t);
    const char *what = "";
    size_t i = first_nonfinite(v, d, n, &what);
    if (i == n) return VKG_OK;
    char where[64] = "", converted[96] = "";
    if (t->ndim == 2)
        snprintf(where, sizeof where, " (row %zu, column %zu)", i / (size_t)t->shape[1], i % (size_t)t->shape[1]);
    if (file_dtype_of(d) != t->dtype)
        snprintf(converted, sizeof converted, " once converted from %s to %s%s", vkg_st_dtype_name(t->dtype),
                 vkg_dtype_name(d), d == VKG_F16 ? " (f16 ends at 65504)" : "");
    return vkg_error_set(err, VKG_ERR_FORMAT, "%s: tensor %s holds %s at index %zu%s%s", path, t->name, what, i,
                         where, converted);
}

static size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

/* Reads every wanted tensor into one page-aligned block, each at a 256-byte offset (the largest
 * storage-buffer offset alignment devices ask for), in the dtype it is held in; checks that each
 * is finite and that the file did not change meanwhile. */
static vkg_status read_tensors(vkg_gpt2 *m, const vkg_safetensors *file, wanted *w, int n, const char *path,
                               vkg_error *err) {
    enum { TENSOR_ALIGN = 256 };
    const size_t page = (size_t)sysconf(_SC_PAGESIZE) > TENSOR_ALIGN ? (size_t)sysconf(_SC_PAGESIZE) : TENSOR_ALIGN;
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        w[i].offset = total;
        total = round_up(total + (size_t)vkg_st_tensor_numel(w[i].found) * vkg_dtype_size(held_dtype(m, &w[i])),
                         TENSOR_ALIGN);
    }
    total = round_up(total ? total : 1, page);
    if ((uint64_t)total > vkg_host_memory_bytes())
        return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "%s: the weights need %.1f GiB, more than this machine's "
                             "%.1f GiB of memory", path, (double)total / 1073741824.0,
                             (double)vkg_host_memory_bytes() / 1073741824.0);
    void *block = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (block == MAP_FAILED)
        return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory for the weights (%zu MB)", total >> 20);
    m->weights = block;
    m->weights_bytes = total;
    for (int i = 0; i < n; i++) {
        const vkg_st_tensor *t = w[i].found;
        const vkg_dtype d = held_dtype(m, &w[i]);
        void *dst = (unsigned char *)block + w[i].offset;
        vkg_status st = vkg_safetensors_read(file, t, file_dtype_of(d), dst, err);
        if (st == VKG_OK) st = check_finite(path, t, dst, d, err);
        if (st != VKG_OK) return st;
        vkg_gpt2_weight_set(m, w[i].id, w[i].layer, dst);
    }
    return vkg_safetensors_check_unchanged(file, err);
}

/* A path dir/name, or NULL when out of memory. */
static char *join(const char *dir, const char *name) {
    size_t len = strlen(dir) + strlen(name) + 2;
    char *p = malloc(len);
    if (p) snprintf(p, len, "%s/%s", dir, name);
    return p;
}

static vkg_status check_folder(const char *dir, vkg_error *err) {
    struct stat sb;
    if (stat(dir, &sb) != 0)
        return vkg_error_set(err, VKG_ERR_IO, "%s: %s (expected a model folder holding config.json and "
                             "model.safetensors)", dir, strerror(errno));
    if (!S_ISDIR(sb.st_mode))
        return vkg_error_set(err, VKG_ERR_IO, "%s is not a folder (expected a model folder holding config.json and "
                             "model.safetensors)", dir);
    return VKG_OK;
}

static vkg_status load_into(vkg_gpt2 *m, const char *dir, const vkg_gpt2_load_options *o, vkg_error *err) {
    vkg_status st = check_folder(dir, err);
    if (st != VKG_OK) return st;
    char *config_path = join(dir, "config.json"), *weights_path = join(dir, "model.safetensors");
    if (!config_path || !weights_path) {
        free(config_path);
        free(weights_path);
        return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
    }
    struct stat sb;
    int tie = 1;
    if (stat(config_path, &sb) != 0)
        st = vkg_error_set(err, VKG_ERR_IO, "%s: no config.json (a Hugging Face GPT-2 folder holds config.json and "
                           "model.safetensors)", dir);
    if (st == VKG_OK) st = vkg_gpt2_config_load(config_path, &m->config, err); /* checks it, names the file */
    if (st == VKG_OK) st = read_tie(config_path, &tie, err);
    if (st == VKG_OK && stat(weights_path, &sb) != 0) {
        char *bin = join(dir, "pytorch_model.bin");
        int has_bin = bin && stat(bin, &sb) == 0;
        free(bin);
        st = vkg_error_set(err, VKG_ERR_IO, "%s: no model.safetensors%s", dir,
                           has_bin ? " (only pytorch_model.bin, which is not read: save the model with "
                                     "safe_serialization=True, or download model.safetensors)" : "");
    }
    vkg_safetensors *file = NULL;
    if (st == VKG_OK) st = vkg_safetensors_open(weights_path, &file, err);
    if (st == VKG_OK) {
        m->transformer_prefix = vkg_safetensors_find(file, "transformer.wte.weight") != NULL;
        m->layers = calloc((size_t)m->config.n_layer, sizeof *m->layers);
        if (!m->layers) st = vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
    }
    listing l = {.config = &m->config};
    if (st == VKG_OK && list_tensors(&l) != VKG_OK) st = vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
    wanted *w = l.w;
    if (st == VKG_OK) {
        /* The head: lm_head.weight when the file has it (never prefixed), else tied to wte. */
        m->tied_head = !vkg_safetensors_find(file, "lm_head.weight") &&
                       !vkg_safetensors_find(file, "transformer.lm_head.weight");
        if (!m->tied_head) {
            st = want(&l, VKG_GPT2_LM_HEAD, 0);
        } else if (!tie) {
            st = vkg_error_set(err, VKG_ERR_FORMAT, "%s: config.json sets tie_word_embeddings to false, but the file "
                               "has no lm_head.weight for the untied output head", weights_path);
        }
    }
    if (st == VKG_OK) st = match_tensors(m, file, w, l.n, weights_path, err);
    if (st == VKG_OK) {
        m->dtype = w[0].found->dtype;
        m->weight_dtype = o->dtype == VKG_GPT2_DTYPE_AS_STORED ? dtype_of_file(m->dtype) : (vkg_dtype)o->dtype;
        st = read_tensors(m, file, w, l.n, weights_path, err);
    }
    vkg_safetensors_close(file); /* everything is in m->weights: the file may change from here on */
    if (st == VKG_OK && m->tied_head) m->lm_head = m->wte;
    if (st == VKG_OK) {
        m->activation = vkg_gpt2_activation_kind(m->config.activation);
        snprintf(m->note, sizeof m->note, "%s", m->config.note);
        vkg_gpt2_decoder_init(m);
    }
    free(w);
    free(config_path);
    free(weights_path);
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
    if (m->weights) munmap(m->weights, m->weights_bytes);
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
                  .n_kv_head = c->n_head, .n_embd = c->n_embd, .n_inner = vkg_gpt2_inner_size(c),
                  .n_ctx = c->n_positions, .n_vocab = c->vocab_size, .bos_token = c->bos_token_id,
                  .eos_token = c->eos_token_id, .tied_head = m->tied_head, .n_params = vkg_gpt2_parameter_count(m),
                  .weight_dtype = m->weight_dtype, .note = m->note},
        .build = vkg_gpt2_build_graph,
        .free = free_model,
    };
}
