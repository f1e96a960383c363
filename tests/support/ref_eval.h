/* An independent reference interpreter of a graph, for tests: every node, dead or alive, gets its
 * own freshly allocated buffer, computed by plain loops written from the op's definition in
 * vkgraph.h.  No plan, no arena, no fusion, no views: what the compiler produces is checked
 * against this.
 *
 * Values are stored as float per element, node by node in row-major order; i32 tensors (token
 * ids, runtime indices) are stored as the float of the integer, exact below 2^24. */
#ifndef VKG_TEST_REF_EVAL_H
#define VKG_TEST_REF_EVAL_H

#include <stddef.h>
#include <stdint.h>

#include "graph/graph.h"

typedef struct ref_inputs {
    int n_nodes;
    const void **data;   /* per node: an input's data (f32 or i32 as its dtype), a state's value
                            before the run (NULL: zeros); borrowed                          */
    int32_t *index;      /* per node: a runtime index's value                                */
} ref_inputs;

/* 0 on success, -1 when out of memory. */
int ref_inputs_init(ref_inputs *in, const vkg_graph *g);
void ref_inputs_free(ref_inputs *in);
void ref_inputs_set(ref_inputs *in, vkg_tensor t, const void *data);
void ref_inputs_set_index(ref_inputs *in, vkg_tensor t, int32_t value);

/* Evaluates every node of g.  On success returns 0 and *values gets one buffer per node
 * (numel floats each); free with ref_free.  Returns -1 with a message on stderr when the graph
 * is in error, an input has no data, or a write falls outside its state. */
int ref_eval(const vkg_graph *g, const ref_inputs *in, float ***values);
void ref_free(const vkg_graph *g, float **values);

/* The value a state holds after the run: the last write_at of its chain, or its start value
 * when nothing writes it. */
const float *ref_final_state(const vkg_graph *g, float **values, vkg_tensor state);

/* Compares n floats: |got - want| <= atol + rtol * |want| everywhere (NaN never passes; an
 * infinity only itself).  Returns the index of the first mismatch, or -1 when all agree. */
int64_t ref_compare(const float *got, const float *want, int64_t n, double rtol, double atol);

#endif
