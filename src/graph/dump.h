/* Dumps of a range of layers, and what the text, JSON and DOT writers share.  A node's layer comes
 * from its name ("h.N.", see vkg_tensor_layer). */
#ifndef VKG_DUMP_H
#define VKG_DUMP_H

#include "graph/plan.h"

#include <limits.h>
#include <stdio.h>

/* Layers [begin, end) of a model.  What has no layer goes with its neighbours: what comes before
 * every layer (GPT-2's embedding) is shown when begin is 0, what comes after them all (ln_f, the
 * head) when end reaches the layer count, and anything between layers with the layer before it. */
typedef struct vkg_dump_layers { int begin, end; } vkg_dump_layers;
#define VKG_DUMP_ALL_LAYERS ((vkg_dump_layers){0, INT_MAX})

/* 1 + the largest layer of any node: the model's layer count; 0 for a graph without layers. */
int vkg_graph_layer_count(const vkg_graph *g);

vkg_status vkg_graph_dump_layers(const vkg_graph *g, FILE *f, vkg_dump_format fmt, vkg_dump_layers range);
vkg_status vkg_plan_dump_layers(const vkg_plan *p, FILE *f, vkg_dump_format fmt, vkg_dump_layers range);

/* --- shared by dump.c and dump_dot.c ------------------------------------------------------ */

static inline int vkg_node_is_leaf(const vkg_node *n) {
    return n->op == VKG_OP_INPUT || n->op == VKG_OP_CONSTANT || n->op == VKG_OP_STATE || n->op == VKG_OP_INDEX;
}
const char *vkg_dump_region_kind(vkg_region_kind k);
/* Graphviz: the graph (selected nodes) and the plan as step-to-step data flow (selected steps). */
vkg_status vkg_graph_dot(const vkg_graph *g, FILE *f, const unsigned char *shown);
vkg_status vkg_plan_dot(const vkg_plan *p, FILE *f, const unsigned char *shown);

#endif
