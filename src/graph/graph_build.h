/* Helpers shared by graph.c (leaves, outputs) and ops.c (the ops and their shape checks). */
#ifndef VKG_GRAPH_BUILD_H
#define VKG_GRAPH_BUILD_H

#include "base/error.h"
#include "graph/graph.h"

#include <stdio.h>

/* Puts the graph into its error state (the first error wins). */
void vkg_graph_fail(vkg_graph *g, vkg_status status, const char *fmt, ...) VKG_PRINTF(3, 4);
/* 1 when the graph is healthy and t names one of its nodes; otherwise records why and returns 0. */
int vkg_graph_check(vkg_graph *g, const char *op, const char *operand, vkg_tensor t);
void vkg_node_init(vkg_node *n, vkg_op op, vkg_dtype dtype, int ndim, const int64_t *shape);
vkg_tensor vkg_graph_add_node(vkg_graph *g, const vkg_node *proto);

/* vkg_write_at with x placed at lead_offset along a second axis, lead_axis (x is no longer
 * there than the state holds from that offset): one slot's block of a cache that holds several. */
vkg_tensor vkg_write_at_block(vkg_graph *g, vkg_tensor state, vkg_tensor x, int axis, int64_t offset,
                              vkg_tensor dyn_offset, int lead_axis, int64_t lead_offset);
/* 1 when first .. first + n - 1 (n >= 1) are index nodes made one after another, whose slots of
 * the indices region follow one another too (kernels read indices[dyn_index + r]). */
int vkg_graph_indices(const vkg_graph *g, vkg_tensor first, int n);
/* Rows of x [R, G, A, D] into state [P, A, S, D] (R G <= P): row r's G planes into planes
 * [r G, r G + G) at the position the runtime index first + r holds along axis 2 (indices made one
 * after another).  One step for every row of a decode step, each sequence's keys and values into
 * its own slot of a cache at its own position. */
vkg_tensor vkg_write_rows(vkg_graph *g, vkg_tensor state, vkg_tensor x, vkg_tensor first, int rows);
/* vkg_mask_causal_window whose entries along axis 0 (rows of them) each add a runtime index of
 * their own: entry i the index node first + i (indices made one after another); with
 * one_position every query row of an entry (axis -2) sits at that one position, its index not
 * added (the G query heads of a group as rows).  Runs fused into softmax or attention. */
vkg_tensor vkg_mask_causal_rows(vkg_graph *g, vkg_tensor x, int32_t offset, vkg_tensor first, int rows,
                                uint32_t window, int one_position);

#endif
