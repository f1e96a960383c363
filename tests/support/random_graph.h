/* Random graphs for the planner's tests: a seeded generator (vkg_rng) that builds chains and DAGs
 * mixing every op the library has (matmul with transposes, broadcasting add/mul, attention
 * blocks with masks, layernorm, views, concat, embedding, writes into states), with tensors read
 * several times, dead nodes and several outputs.  Small shapes, so hundreds run in seconds.
 *
 * The same seed gives the same graph and the same data on every machine. */
#ifndef VKG_TEST_RANDOM_GRAPH_H
#define VKG_TEST_RANDOM_GRAPH_H

#include <stddef.h>
#include <stdint.h>

#include "vkgraph.h"
#include "support/ref_eval.h"

#define RG_MAX_POOL 160
#define RG_MAX_INPUTS 96
#define RG_MAX_CONSTANTS 160
#define RG_MAX_INDICES 8
#define RG_MAX_STATES 16
#define RG_MAX_OUTPUTS 4
#define RG_MAX_NUMEL 384       /* elements of the largest tensor made */

typedef struct random_graph {
    vkg_graph *g;
    /* inputs with their values (f32 or i32 as the tensor's dtype) */
    int n_inputs;
    vkg_tensor inputs[RG_MAX_INPUTS];
    void *input_data[RG_MAX_INPUTS];
    size_t input_bytes[RG_MAX_INPUTS];
    /* runtime indices with the value to set before the run */
    int n_indices;
    vkg_tensor indices[RG_MAX_INDICES];
    int32_t index_values[RG_MAX_INDICES];
    int n_states;
    vkg_tensor states[RG_MAX_STATES];
    int n_outputs;
    vkg_tensor outputs[RG_MAX_OUTPUTS];
    /* owned data of the constants */
    int n_constants;
    float *constant_data[RG_MAX_CONSTANTS];
    /* generator state */
    vkg_rng rng;
    int n_pool;
    vkg_tensor pool[RG_MAX_POOL]; /* f32 tensors later ops may read */
    int n_names;
} random_graph;

/* Builds a graph of about n_ops ops from seed.  0 on success; -1 with a message on stderr when
 * the builder refused a call the generator believed valid (a bug on one side or the other). */
int random_graph_build(random_graph *rg, uint64_t seed, int n_ops);
void random_graph_free(random_graph *rg);
/* Points in (initialised for rg->g) at the inputs' data and the indices' values. */
void random_graph_ref_inputs(const random_graph *rg, ref_inputs *in);

#endif
