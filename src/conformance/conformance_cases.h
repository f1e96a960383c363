/* Inside the conformance suite: how a case builds its graph and where the list of cases lives.
 * conformance_build.c holds the helpers a case builds with (inputs filled from the rng, owned
 * host data), conformance_cases.c the cases, conformance.c runs and compares them. */
#ifndef VKG_CONFORMANCE_CASES_H
#define VKG_CONFORMANCE_CASES_H

#include "vkgraph.h"

#include <stddef.h>
#include <stdint.h>

/* What values an input or constant gets (N(0, 1) stands for conf_normal's draws, below). */
typedef enum conf_fill {
    CONF_FILL_NORMAL = 0,   /* N(0, 1)                                                      */
    CONF_FILL_WIDE,         /* N(0, 5^2): reaches the tails of gelu and softmax             */
    CONF_FILL_OFFSET,       /* 20 + N(0, 1): layernorm's variance must not cancel            */
    CONF_FILL_SPECIAL,      /* N(0, 1) with about one value in four +inf, -inf or NaN        */
    CONF_FILL_KEEP,         /* boolean mask: 1 (keep) with probability 3/4, else 0           */
    CONF_FILL_KEEP_NONE_ROW,/* boolean mask whose rows 0 and 2 (of the last two axes) block
                               everything: those softmax rows must come out as zeros        */
    CONF_FILL_ADDITIVE      /* additive mask: N(0, 1), about one value in four -inf           */
} conf_fill;

typedef struct conf_data {
    vkg_tensor tensor;      /* an input or a state (set before each run), or a constant
                               (borrowed)                                                    */
    void *host;
    size_t bytes;
    int is_input;
    int is_state;
} conf_data;

typedef struct conf_deferred {
    void (*fn)(void *);
    void *arg;
} conf_deferred;

#define CONF_MAX_INDICES 16
#define CONF_MAX_OUTPUTS 4

/* One case being built: the graph, the data it reads and what it outputs. */
typedef struct conf_build {
    vkg_graph *g;
    vkg_rng *rng;
    conf_data *data;
    int n_data, cap_data;
    conf_deferred *deferred;     /* run after the graph is freed: data the graph borrowed   */
    int n_deferred, cap_deferred;
    vkg_tensor index[CONF_MAX_INDICES];
    int32_t index_value[CONF_MAX_INDICES];
    int n_index;
    vkg_tensor out[CONF_MAX_OUTPUTS];
    int n_out;
    char shape[96];              /* set by the case to override the automatic description  */
    int out_of_memory;
} conf_build;

/* A draw of mean 0 and standard deviation 1 shaped like a normal, bounded by 6 (cheap; inputs
 * only). */
float conf_normal(vkg_rng *r);

/* Each returns the new tensor, or VKG_NONE (with b->out_of_memory or the graph in error). */
vkg_tensor conf_input(conf_build *b, int ndim, const int64_t *shape, conf_fill fill);
vkg_tensor conf_constant(conf_build *b, int ndim, const int64_t *shape, conf_fill fill);
/* A constant of 16-bit elements (dtype VKG_F16 or VKG_BF16): the fill's values rounded to it. */
vkg_tensor conf_constant16(conf_build *b, int ndim, const int64_t *shape, conf_fill fill, vkg_dtype dtype);
/* i32 ids in [0, vocab), and where out_of_range is set every fifth one -1 or vocab. */
vkg_tensor conf_ids(conf_build *b, int ndim, const int64_t *shape, int64_t vocab, int out_of_range);
vkg_tensor conf_index(conf_build *b, int32_t value);
/* Host data of `bytes` for an input already in b->g (a graph a model builder made), set before
 * each run; the caller fills it.  NULL when out of memory (b->out_of_memory is then set). */
void *conf_input_data(conf_build *b, vkg_tensor input, size_t bytes);
/* The same for a state already in b->g (a model's KV cache): written before each run. */
void *conf_state_data(conf_build *b, vkg_tensor state, size_t bytes);
/* A runtime index already in b->g (a model's "pos.<r>"), set to value before each run. */
void conf_set_index(conf_build *b, vkg_tensor index, int32_t value);
vkg_tensor conf_state(conf_build *b, int ndim, const int64_t *shape);
void conf_output(conf_build *b, vkg_tensor t);
/* fn(arg) runs when the case is done, after its graph is freed. */
void conf_defer(conf_build *b, void (*fn)(void *), void *arg);
/* Frees everything the build owns, graph included, and zeroes b. */
void conf_build_free(conf_build *b);
/* "[17, 33] [33]": the shapes of the inputs and constants, in creation order ("[33, 17] f16" for a
 * 16-bit constant). */
void conf_describe(const conf_build *b, char *buf, size_t size);

/* A point of a sweep: the dimensions a case builder reads, and the smallest level that runs it
 * (a vkg_conformance_level).  A sweep ends with level -1. */
typedef struct conf_point {
    int level;
    int64_t d[4];
} conf_point;

typedef void (*conf_build_fn)(conf_build *b, const int64_t *d);

typedef struct conf_case_def {
    const char *op;          /* the group it is reported under                              */
    const char *variant;
    double threshold;
    conf_build_fn build;
    const conf_point *sweep;
} conf_case_def;

/* The whole-model case (conformance_model.c), d = {T, n_layer, n_embd, n_head}: a GPT-2 of those
 * shapes with random weights (GPT-2's 50257 tokens and 1024 positions), logits at every one of
 * T positions. */
void conf_gpt2_model(conf_build *b, const int64_t *d);
/* The same with the weight matrices in f16 (as `--dtype f16` loads them). */
void conf_gpt2_model_f16(conf_build *b, const int64_t *d);
/* ... and both with the projections held transposed, [out, in]. */
void conf_gpt2_model_transposed(conf_build *b, const int64_t *d);
void conf_gpt2_model_f16_transposed(conf_build *b, const int64_t *d);
/* A batch context's decode step, d = {rows, n_layer, n_embd, n_head}: row r the one new token of
 * slot r at its own position (1023 down to 0, spread evenly) over that slot's cache of 1024
 * positions, the caches holding N(0, 1) keys and values; logits of every row. */
void conf_gpt2_batched_decode(conf_build *b, const int64_t *d);

int vkg_conformance_case_count(void);
const conf_case_def *vkg_conformance_case_def(int i);

#endif
