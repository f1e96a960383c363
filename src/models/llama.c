/* Loading a Llama-family model from a Hugging Face folder (see llama.h). */
#include "models/llama.h"

#include "base/error.h"
#include "models/checkpoint.h"
#include "models/gpt2.h"
#include "models/rope.h"
#include "models/weights_read.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The fused q/k/v projection (llama_graph.c) reads the three weights, and the three biases, as one
 * span: the table lists each three in a row and the read joins them. */
_Static_assert(VKG_LLAMA_K_W == VKG_LLAMA_Q_W + 1 && VKG_LLAMA_V_W == VKG_LLAMA_K_W + 1 &&
                   VKG_LLAMA_K_B == VKG_LLAMA_Q_B + 1 && VKG_LLAMA_V_B == VKG_LLAMA_K_B + 1,
               "q, k and v next to each other in the weight table");

/* The tensors the table lists for this config, in its order. */
static vkg_status list_tensors(const vkg_llama *m, vkg_weight_want **out, int *count) {
    const vkg_llama_config *c = &m->config;
    vkg_weight_want *w = calloc(((size_t)c->n_layer + 1) * VKG_LLAMA_N_WEIGHTS, sizeof *w);
    if (!w) return VKG_ERR_OUT_OF_MEMORY;
    int n = 0;
    for (int pass = 0; pass < 3; pass++) /* before the layers, the layers, after them */
        for (int layer = 0; layer < (pass == 1 ? c->n_layer : 1); layer++)
            for (int id = 0; id < VKG_LLAMA_N_WEIGHTS; id++) {
                const vkg_llama_weight_spec *s = &vkg_llama_weights[id];
                const int place = s->per_layer ? 1 : id == VKG_LLAMA_EMBED ? 0 : 2;
                if (place != pass || !vkg_llama_weight_present(c, (vkg_llama_weight)id, m->tied_head)) continue;
                vkg_weight_want *x = &w[n++];
                vkg_llama_weight_name((vkg_llama_weight)id, layer, x->name, sizeof x->name);
                x->ndim = s->d1 == VKG_LLAMA_DIM_NONE ? 1 : 2;
                x->shape[0] = vkg_llama_dim_size(c, s->d0);
                x->shape[1] = vkg_llama_dim_size(c, s->d1);
                x->id = id;
                x->layer = layer;
                x->joined = id == VKG_LLAMA_Q_W || id == VKG_LLAMA_K_W || id == VKG_LLAMA_Q_B || id == VKG_LLAMA_K_B;
            }
    *out = w;
    *count = n;
    return VKG_OK;
}

static vkg_status load_into(vkg_llama *m, const char *dir, int dtype, const vkg_weights_progress *progress,
                            vkg_error *err) {
    vkg_status st = vkg_checkpoint_check_folder(dir, err);
    if (st != VKG_OK) return st;
    char *config_path = vkg_path_join(dir, "config.json");
    if (!config_path) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
    vkg_llama_config *c = &m->config;
    st = vkg_llama_config_load(config_path, c, err);
    free(config_path);
    if (st != VKG_OK) return st;
    m->n_ctx = c->n_positions;
    /* cos and sin for every position: 67 MB for 131072 positions of 128 channels; a table past
     * 2 GiB (or a quarter of the memory) is refused before allocating it */
    const uint64_t table = (uint64_t)m->n_ctx * (uint64_t)c->head_dim * sizeof(float);
    const uint64_t quarter = vkg_host_memory_bytes() / 4, limit = quarter < (2ull << 30) ? quarter : 2ull << 30;
    if (table > limit)
        return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "%s: the rotary table for max_position_embeddings %d and "
                             "head_dim %d needs %.1f GiB, more than the %.1f GiB allowed it", dir, m->n_ctx,
                             c->head_dim, (double)table / 1073741824.0, (double)limit / 1073741824.0);
    vkg_checkpoint *ck = NULL;
    st = vkg_checkpoint_open(dir, &ck, err);
    if (st != VKG_OK) return st;
    const int has_head = vkg_checkpoint_find(ck, "lm_head.weight", NULL) != NULL;
    m->tied_head = c->tie_word_embeddings; /* transformers ties whatever the file holds */
    if (!m->tied_head && !has_head)
        st = vkg_error_set(err, VKG_ERR_FORMAT, "%s: config.json sets tie_word_embeddings to false (or leaves it at "
                           "%s's default, false), but there is no lm_head.weight", vkg_checkpoint_path(ck),
                           vkg_llama_arch_class(c->arch));
    m->layers = calloc((size_t)c->n_layer, sizeof *m->layers);
    if (st == VKG_OK && !m->layers) st = vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
    vkg_weight_want *w = NULL;
    int n = 0;
    if (st == VKG_OK && list_tensors(m, &w, &n) != VKG_OK) st = vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
    if (st == VKG_OK) {
        char missing[320], shapes[200];
        snprintf(shapes, sizeof shapes, "hidden_size %d, %d heads of %d over %d key/value heads, intermediate_size "
                 "%d, vocab_size %d", c->hidden_size, c->n_head, c->head_dim, c->n_kv_head, c->intermediate_size,
                 c->vocab_size);
        snprintf(missing, sizeof missing, "%s with %d layers, %s", vkg_llama_arch_class(c->arch), c->n_layer, shapes);
        /* transformers computes the rotary frequencies (older files hold them), and a tied head
         * reads the embedding whatever lm_head.weight the file may also hold */
        const char *const not_read[] = {".rotary_emb.inv_freq", m->tied_head ? "lm_head.weight" : NULL, NULL};
        const vkg_weights_note note = {.missing = missing, .shapes = shapes, .not_read = not_read};
        st = vkg_weights_match(ck, "", w, n, &note, err);
    }
    if (st == VKG_OK) {
        m->weight_dtype = dtype == VKG_GPT2_DTYPE_AS_STORED ? vkg_weights_dtype_of_file(w[0].found->dtype)
                                                            : (vkg_dtype)dtype;
        st = vkg_weights_read(ck, w, n, m->weight_dtype, progress, &m->weights, &m->weights_bytes, err);
    }
    for (int i = 0; st == VKG_OK && i < n; i++) {
        if (vkg_llama_weights[w[i].id].per_layer) m->layers[w[i].layer][w[i].id] = w[i].data;
        else m->global[w[i].id] = w[i].data;
    }
    vkg_checkpoint_close(ck); /* everything is in m->weights: the files may change from here on */
    free(w);
    if (st != VKG_OK) return st;
    if (m->tied_head) m->global[VKG_LLAMA_LM_HEAD] = m->global[VKG_LLAMA_EMBED];
    vkg_rope_config rope = c->rope;
    rope.dim = c->head_dim;
    double *inv_freq = malloc((size_t)c->head_dim / 2 * sizeof *inv_freq), attention_factor = 1.0;
    m->rope = malloc((size_t)table);
    if (!inv_freq || !m->rope) st = vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory for the rotary table");
    if (st == VKG_OK) st = vkg_rope_inv_freq(&rope, inv_freq, &attention_factor, err); /* checked with the config */
    if (st == VKG_OK) vkg_rope_fill_table(inv_freq, c->head_dim / 2, attention_factor, m->n_ctx, m->rope);
    free(inv_freq);
    if (st != VKG_OK) return st;
    snprintf(m->note, sizeof m->note, "%s", c->note);
    return VKG_OK;
}

static void free_model(void *m) { vkg_llama_free(m); }


static void decoder_init(vkg_llama *m) {
    const vkg_llama_config *c = &m->config;
    m->decoder = (vkg_decoder){
        .model = m,
        .facts = {.architecture = vkg_llama_arch_name(c->arch), .ctx_key = "max_position_embeddings",
                  .n_layer = c->n_layer, .n_head = c->n_head, .n_kv_head = c->n_kv_head, .head_dim = c->head_dim,
                  .rope_theta = c->rope.theta, .rope_scaling = vkg_rope_type_name(c->rope.type), .n_embd = c->hidden_size,
                  .n_inner = c->intermediate_size, .n_ctx = m->n_ctx, .n_vocab = c->vocab_size,
                  .bos_token = c->bos_token_id, .eos_token = c->eos_token_id, .tied_head = m->tied_head,
                  .n_params = vkg_llama_weights_numel(c, m->tied_head), .weight_dtype = m->weight_dtype,
                  .weights_transposed = 1, .note = m->note},
        .build = vkg_llama_build_graph,
        .free = free_model,
    };
}

vkg_status vkg_llama_load(const char *dir, int dtype, const vkg_weights_progress *progress, vkg_llama **out,
                          vkg_error *err) {
    *out = NULL;
    if (!dir) return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_llama_load: no folder given");
    if (dtype != VKG_GPT2_DTYPE_AS_STORED && dtype != VKG_F32 && dtype != VKG_F16 && dtype != VKG_BF16)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_llama_load: weight dtype %d: use f32, f16 or bf16",
                             dtype);
    vkg_llama *m = calloc(1, sizeof *m);
    if (!m) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory loading %s", dir);
    vkg_status st = load_into(m, dir, dtype, progress, err);
    if (st != VKG_OK) {
        vkg_llama_free(m);
        return st;
    }
    decoder_init(m);
    *out = m;
    return VKG_OK;
}

void vkg_llama_free(vkg_llama *m) {
    if (!m) return;
    vkg_weights_free(m->weights, m->weights_bytes);
    free(m->layers);
    free(m->rope);
    free(m);
}
