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

#endif
