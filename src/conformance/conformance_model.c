/* The conformance suite's whole-model case: GPT-2 of a given size with random weights, logits at
 * every position.  Errors that only show when every op runs at a model's real shapes, one after
 * another over the same arena, show here.
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

static void gpt2_model(conf_build *b, const int64_t *d, int dtype, int transposed) {
    const int T = (int)d[0];
    snprintf(b->shape, sizeof b->shape, "GPT-2 %lld layers, %lld wide, %lld heads, T=%d, V=50257%s%s (random)",
             (long long)d[1], (long long)d[2], (long long)d[3], T, dtype == VKG_F16 ? ", f16" : "",
             transposed ? ", W^T" : "");
    vkg_gpt2 *m = random_model(b, d, dtype, transposed);
    if (!m) {
        vkg_graph_free(b->g);   /* an empty graph: "the case marks no output" */
        b->g = vkg_graph_new();
        if (!b->g) b->out_of_memory = 1;
        return;
    }
    conf_defer(b, free_model, m);   /* after the graph, which borrows its weights */
    vkg_forward_options o;
    vkg_forward_options_default(&o, T);
    o.all_logits = 1;
    vkg_forward_graph gg;
    vkg_error err = {0};
    if (vkg_decoder_build(&m->decoder, &o, &gg, &err) != VKG_OK) {
        b->out_of_memory = err.status == VKG_ERR_OUT_OF_MEMORY;
        return;
    }
    /* The case owns the model's graph from here on. */
    vkg_graph_free(b->g);
    b->g = gg.graph;
    gg.graph = NULL;
    int32_t *ids = conf_input_data(b, gg.ids, (size_t)T * sizeof *ids);
    int32_t *positions = conf_input_data(b, gg.positions, (size_t)T * sizeof *positions);
    for (int i = 0; ids && positions && i < T; i++) {
        ids[i] = (int32_t)(vkg_rng_next(b->rng) % 50257u);
        positions[i] = i;
    }
    b->out[b->n_out++] = gg.logits;   /* already the graph's output "logits" */
    vkg_forward_graph_free(&gg);
}

void conf_gpt2_model(conf_build *b, const int64_t *d) { gpt2_model(b, d, VKG_GPT2_DTYPE_AS_STORED, 0); }
void conf_gpt2_model_f16(conf_build *b, const int64_t *d) { gpt2_model(b, d, VKG_F16, 0); }
void conf_gpt2_model_transposed(conf_build *b, const int64_t *d) { gpt2_model(b, d, VKG_GPT2_DTYPE_AS_STORED, 1); }
void conf_gpt2_model_f16_transposed(conf_build *b, const int64_t *d) { gpt2_model(b, d, VKG_F16, 1); }
