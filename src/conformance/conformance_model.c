/* The conformance suite's whole-model cases: GPT-2 of a given size with random weights, logits at
 * every position, and a batch context's decode step of several sequences at their own positions.
 * Errors that only show when every op runs at a model's real shapes, one after another over the
 * same arena, show here.
 *
 * The model is written by the random-weights writer into a temporary folder and read back by the
 * loader every user goes through; the files are removed at once (the loader has read them).
 * Variants hold the weight matrices in f16, as `--dtype f16` loads them, and the projections
 * transposed, [out, in], as a model opened for a device that reads those faster holds them
 * (vkg_device_prefers_transposed_weights): the case runs the same graph on both executors,
 * whichever layout the device would choose, so both layouts are checked on every device. */
#include "conformance/conformance_cases.h"
#include "models/gpt2.h"
#include "models/gpt2_random.h"
#include "graph/graph.h"
#include "graph/graph_build.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void free_model(void *m) { vkg_gpt2_free(m); }

/* Writes and loads the model; NULL (and a message in b->shape) when that fails. */
static vkg_gpt2 *random_model(conf_build *b, const int64_t *d, int dtype, int transposed) {
    const char *tmp = getenv("TMPDIR");
    char dir[512], path[600];
    snprintf(dir, sizeof dir, "%s/vkgraph-conformance-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) return NULL;
    vkg_gpt2_random_options o;
    vkg_gpt2_random_options_default(&o);
    o.config.n_layer = (int)d[1], o.config.n_embd = (int)d[2], o.config.n_head = (int)d[3];
    o.config.n_positions = 1024, o.config.vocab_size = 50257;
    o.config.bos_token_id = o.config.eos_token_id = 50256;
    o.seed = vkg_rng_next(b->rng);
    vkg_error err = {0};
    vkg_gpt2 *m = NULL;
    vkg_gpt2_load_options lo;
    vkg_gpt2_load_options_default(&lo);
    lo.dtype = dtype;
    lo.transposed = transposed;
    if (vkg_gpt2_write_random(dir, &o, &err) != VKG_OK || vkg_gpt2_load_with(dir, &lo, &m, &err) != VKG_OK) m = NULL;
    static const char *const files[] = {"config.json", "model.safetensors", "RANDOM-WEIGHTS.txt"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
    }
    rmdir(dir);
    if (!m) b->out_of_memory = err.status == VKG_ERR_OUT_OF_MEMORY;
    return m;
}

/* The model's graph for o into b->g (the case owns it from here on), the model freed after it;
 * 0, or -1 with b left without an output ("the case marks no output") or out of memory. */
static int model_graph(conf_build *b, const int64_t *d, int dtype, int transposed, const vkg_forward_options *o,
                       vkg_forward_graph *gg) {
    vkg_gpt2 *m = random_model(b, d, dtype, transposed);
    if (!m) {
        vkg_graph_free(b->g);   /* an empty graph: "the case marks no output" */
        b->g = vkg_graph_new();
        if (!b->g) b->out_of_memory = 1;
        return -1;
    }
    conf_defer(b, free_model, m);   /* after the graph, which borrows its weights */
    vkg_error err = {0};
    if (vkg_decoder_build(&m->decoder, o, gg, &err) != VKG_OK) {
        b->out_of_memory = err.status == VKG_ERR_OUT_OF_MEMORY;
        return -1;
    }
    vkg_graph_free(b->g);
    b->g = gg->graph;
    gg->graph = NULL;
    return 0;
}

/* ids drawn from GPT-2's vocabulary and the given positions, as the inputs of gg. */
static void set_tokens(conf_build *b, const vkg_forward_graph *gg, const int32_t *at, int n) {
    int32_t *ids = conf_input_data(b, gg->ids, (size_t)n * sizeof *ids);
    int32_t *positions = conf_input_data(b, gg->positions, (size_t)n * sizeof *positions);
    for (int i = 0; ids && positions && i < n; i++) {
        ids[i] = (int32_t)(vkg_rng_next(b->rng) % 50257u);
        positions[i] = at[i];
    }
}

static void gpt2_model(conf_build *b, const int64_t *d, int dtype, int transposed) {
    const int T = (int)d[0];
    snprintf(b->shape, sizeof b->shape, "GPT-2 %lld layers, %lld wide, %lld heads, T=%d, V=50257%s%s (random)",
             (long long)d[1], (long long)d[2], (long long)d[3], T, dtype == VKG_F16 ? ", f16" : "",
             transposed ? ", W^T" : "");
    vkg_forward_options o;
    vkg_forward_options_default(&o, T);
    o.all_logits = 1;
    vkg_forward_graph gg;
    if (model_graph(b, d, dtype, transposed, &o, &gg) != 0) return;
    int32_t *at = malloc((size_t)T * sizeof *at);
    if (!at) b->out_of_memory = 1;
    for (int i = 0; at && i < T; i++) at[i] = i;
    if (at) set_tokens(b, &gg, at, T);
    free(at);
    b->out[b->n_out++] = gg.logits;   /* already the graph's output "logits" */
    vkg_forward_graph_free(&gg);
}

void conf_gpt2_model(conf_build *b, const int64_t *d) { gpt2_model(b, d, VKG_GPT2_DTYPE_AS_STORED, 0); }
void conf_gpt2_model_f16(conf_build *b, const int64_t *d) { gpt2_model(b, d, VKG_F16, 0); }
void conf_gpt2_model_transposed(conf_build *b, const int64_t *d) { gpt2_model(b, d, VKG_GPT2_DTYPE_AS_STORED, 1); }
void conf_gpt2_model_f16_transposed(conf_build *b, const int64_t *d) { gpt2_model(b, d, VKG_F16, 1); }

/* Each row's position, 1023 down to 0, is a runtime index of its own ("pos.<r>"), so one plan
 * serves every mix of lengths: the rows at the cache's first and last positions are the edges
 * where a row's index could reach past its own slot.  The caches hold random keys and values at
 * every position, those past a row's position too, which its causal mask must keep out. */
void conf_gpt2_batched_decode(conf_build *b, const int64_t *d) {
    enum { S = 1024 };
    const int rows = (int)d[0];
    snprintf(b->shape, sizeof b->shape, "GPT-2 %lld layers, %lld wide, %lld heads, %d rows at %d..0 of %d, V=50257 "
             "(random)", (long long)d[1], (long long)d[2], (long long)d[3], rows, S - 1, S);
    if (rows < 2 || rows > CONF_MAX_INDICES) {
        vkg_graph_fail(b->g, VKG_ERR_INVALID_ARGUMENT, "a batched decode case of %d rows; 2 to %d", rows,
                       CONF_MAX_INDICES);
        return;
    }
    vkg_forward_options o;
    vkg_forward_options_default(&o, rows);
    o.cache_len = S;
    o.seqs = rows;
    o.n_slots = rows;
    vkg_forward_graph gg;
    if (model_graph(b, d, VKG_GPT2_DTYPE_AS_STORED, 0, &o, &gg) != 0) return;
    int32_t at[CONF_MAX_INDICES];
    for (int r = 0; r < rows; r++) {
        at[r] = S - 1 - r * ((S - 1) / (rows - 1));
        conf_set_index(b, gg.row_pos[r], at[r]);
    }
    set_tokens(b, &gg, at, rows);
    int64_t shape[VKG_MAX_DIMS];
    const int nd = vkg_tensor_shape(b->g, gg.kv_cache[0], shape);
    const size_t floats = (size_t)vkg_shape_numel(nd, shape);
    for (int c = 0; c < gg.n_layer; c++) {
        float *kv = conf_state_data(b, gg.kv_cache[c], floats * sizeof *kv);
        for (size_t i = 0; kv && i < floats; i++) kv[i] = conf_normal(b->rng);
    }
    b->out[b->n_out++] = gg.logits;   /* [rows, V] */
    vkg_forward_graph_free(&gg);
}
