/* Dumps of a range of layers, and what the text, JSON and DOT writers share.  A node's layer comes
 * from its name ("h.N." or "model.layers.N.", see vkg_name_layer). */
#ifndef VKG_DUMP_H
#define VKG_DUMP_H

#include "graph/plan.h"

#include <limits.h>
#include <stdio.h>

/* vkg_dump_layers, vkg_graph_layer_count and the _dump_layers functions are public (vkgraph.h). */

/* --- shared by dump.c and dump_dot.c ------------------------------------------------------ */

static inline int vkg_node_is_leaf(const vkg_node *n) {
    return n->op == VKG_OP_INPUT || n->op == VKG_OP_CONSTANT || n->op == VKG_OP_STATE || n->op == VKG_OP_INDEX;
}
const char *vkg_dump_region_kind(vkg_region_kind k);
/* Graphviz: the graph (selected nodes) and the plan as step-to-step data flow (selected steps). */
vkg_status vkg_graph_dot(const vkg_graph *g, FILE *f, const unsigned char *shown);
vkg_status vkg_plan_dot(const vkg_plan *p, FILE *f, const unsigned char *shown);

#endif
