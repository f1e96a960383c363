/* A batched decode step made ready for vkg_session_compare as `vkgraph compare --decode --batch N`
 * makes it (tools/cmd_compare.c), shared by test_compare and test_compare_scale: sequence r holds
 * the first lengths[r] ids, prefilled alone into slot r on each device (a plan of seqs 1,
 * first_slot r, run by a session that shares the step's caches), and row r of the step (one plan
 * of seqs = rows) is ids[lengths[r]] at position lengths[r]. */
#ifndef VKG_TEST_DECODE_COMPARE_H
#define VKG_TEST_DECODE_COMPARE_H

#include "vkgraph.h"
#include "vkgraph_model.h"

typedef struct decode_compare {
    vkg_graph *graph;          /* the step's                                            */
    vkg_plan *plan;            /* compiled for the limits of both devices               */
    vkg_session *test, *ref;   /* their caches prefilled, the step's inputs set          */
} decode_compare;

/* Builds and prefills; fails the test on any error.  The caches hold n_ctx positions. */
void decode_compare_setup(decode_compare *d, vkg_model *m, vkg_device *test, vkg_device *ref, const int32_t *ids,
                          const int *lengths, int rows, int n_ctx);
void decode_compare_free(decode_compare *d);

#endif
