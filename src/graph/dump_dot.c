/* Graphviz DOT of a graph and of a plan, laid out to stay readable, and fast for dot to lay out, at
 * GPT-2 XL's 48 layers: one cluster per layer, and no hub node.  A node read by many (the runtime
 * position, a tied embedding, a weight) is drawn as a small leaf beside each reader instead of one
 * node that every edge runs through; dot's layout time grows steeply with such nodes. */
#include "graph/dump.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static const char *const graph_header =
    "  rankdir=TB;\n"
    "  node [shape=box, style=rounded, fontname=\"monospace\", fontsize=10];\n"
    "  edge [fontname=\"monospace\", fontsize=8, arrowsize=0.6];\n";

static const char *const leaf_style = "shape=plaintext, fontsize=8, fontcolor=\"#555555\"";

/* name made safe inside a quoted DOT label (quotes and backslashes become '), into buf. */
static const char *label_safe(const char *name, char *buf, size_t size) {
    size_t i = 0;
    for (; name[i] && i + 1 < size; i++) buf[i] = (name[i] == '"' || name[i] == '\\') ? '\'' : name[i];
    buf[i] = '\0';
    return buf;
}

static void cluster_open(FILE *f, int layer) {
    fprintf(f, "  subgraph cluster_layer%d {\n    label=\"layer %d\"; style=rounded; color=\"#9999bb\";\n", layer,
            layer);
}

/* --- graph --------------------------------------------------------------------------------- */

/* Node i with, beside it, a leaf for each leaf operand and each operand the dump does not show. */
static void graph_node(const vkg_graph *g, int i, const unsigned char *shown, FILE *f) {
    const vkg_node *n = &g->nodes[i];
    char shape[96];
    vkg_shape_str(n->ndim, n->shape, shape, sizeof shape);
    char name[160];
    fprintf(f, "    n%d [label=\"%%%d %s\\n%s\\n%s", i, i, vkg_op_name(n->op),
            label_safe(vkg_tensor_name(g, i), name, sizeof name), shape);
    if (n->output_name) fprintf(f, "\\n-> output '%s'", label_safe(n->output_name, name, sizeof name));
    fprintf(f, "\"%s];\n", n->output_name ? ", style=\"rounded,filled\", fillcolor=\"#d8f5d0\"" : "");
    for (int s = 0; s < VKG_MAX_SRC; s++) {
        vkg_tensor t = n->src[s];
        if (t == VKG_NONE) continue;
        if (vkg_node_is_leaf(&g->nodes[t]))
            fprintf(f, "    l%d_%d [label=\"%s %s\", %s];\n", (int)t, i, vkg_op_name(g->nodes[t].op),
                    label_safe(vkg_tensor_bound_name(g, t), name, sizeof name), leaf_style);
        else if (!shown[t])
            fprintf(f, "    l%d_%d [label=\"%%%d %s\", %s];\n", (int)t, i, (int)t,
                    label_safe(vkg_tensor_name(g, t), name, sizeof name), leaf_style);
    }
}

vkg_status vkg_graph_dot(const vkg_graph *g, FILE *f, const unsigned char *shown) {
    int n_layers = vkg_graph_layer_count(g);
    fprintf(f, "digraph vkgraph {\n%s", graph_header);
    for (int layer = -1; layer < n_layers; layer++) {
        int open = 0;
        for (int i = 0; i < g->n_nodes; i++) {
            if (!shown[i] || vkg_node_is_leaf(&g->nodes[i]) || vkg_tensor_layer(g, i) != layer) continue;
            if (layer >= 0 && !open) cluster_open(f, layer);
            open = 1;
            graph_node(g, i, shown, f);
        }
        if (layer >= 0 && open) fprintf(f, "  }\n");
    }
    /* Leaves no shown node reads (an unused input) stand alone. */
    unsigned char *read = calloc((size_t)(g->n_nodes ? g->n_nodes : 1), 1);
    if (!read) return VKG_ERR_OUT_OF_MEMORY;
    for (int i = 0; i < g->n_nodes; i++)
        for (int s = 0; shown[i] && s < VKG_MAX_SRC; s++)
            if (g->nodes[i].src[s] != VKG_NONE) read[g->nodes[i].src[s]] = 1;
    char name[160];
    for (int i = 0; i < g->n_nodes; i++)
        if (shown[i] && vkg_node_is_leaf(&g->nodes[i]) && !read[i])
            fprintf(f, "  n%d [label=\"%s %s\", %s];\n", i, vkg_op_name(g->nodes[i].op),
                    label_safe(vkg_tensor_bound_name(g, i), name, sizeof name), leaf_style);
    free(read);
    for (int i = 0; i < g->n_nodes; i++) {
        if (!shown[i] || vkg_node_is_leaf(&g->nodes[i])) continue;
        for (int s = 0; s < VKG_MAX_SRC; s++) {
            vkg_tensor t = g->nodes[i].src[s];
            if (t == VKG_NONE) continue;
            if (vkg_node_is_leaf(&g->nodes[t]) || !shown[t]) fprintf(f, "  l%d_%d -> n%d;\n", (int)t, i, i);
            else fprintf(f, "  n%d -> n%d;\n", (int)t, i);
        }
    }
    fprintf(f, "}\n");
    return VKG_OK;
}

/* --- plan: step-to-step data flow ------------------------------------------------------------ */

/* Bytes [lo, hi) of a region that step `from` wrote and a later step reads. */
typedef struct flow { int from, region; uint64_t lo, hi; } flow;

#define MAX_FLOWS 32
#define MAX_GAPS 16

static void add_flow(flow *fl, int *n, int from, int region, uint64_t lo, uint64_t hi) {
    for (int i = 0; i < *n; i++)
        if (fl[i].from == from && fl[i].region == region) {
            if (lo < fl[i].lo) fl[i].lo = lo;
            if (hi > fl[i].hi) fl[i].hi = hi;
            return;
        }
    if (*n < MAX_FLOWS) fl[(*n)++] = (flow){from, region, lo, hi};
}

/* The writes that binding b of step s reads: walking back from s, each earlier write overlapping
 * bytes of the binding that no step since has written again.  Returns 1 when some bytes have no
 * writer in the plan (a state's value from an earlier run). */
static int flows_of(const vkg_plan *p, int s, const vkg_binding *b, flow *fl, int *n) {
    uint64_t gap_lo[MAX_GAPS], gap_hi[MAX_GAPS];
    int gaps = 1;
    gap_lo[0] = b->offset;
    gap_hi[0] = b->offset + b->bytes;
    for (int t = s - 1; t >= 0 && gaps > 0; t--)
        for (int k = 0; k < VKG_MAX_BINDINGS; k++) {
            const vkg_binding *w = &p->steps[t].bind[k];
            if (w->region != b->region || !w->writes) continue;
            uint64_t wlo = w->offset, whi = w->offset + w->bytes;
            for (int i = 0; i < gaps; i++) {
                uint64_t lo = gap_lo[i] > wlo ? gap_lo[i] : wlo, hi = gap_hi[i] < whi ? gap_hi[i] : whi;
                if (lo >= hi) continue;
                add_flow(fl, n, t, b->region, lo, hi);
                /* What is left of the gap: below the write, above it, both (a split) or nothing. */
                int below = gap_lo[i] < lo, above = gap_hi[i] > hi;
                if (below && above && gaps < MAX_GAPS) {
                    gap_lo[gaps] = hi;
                    gap_hi[gaps++] = gap_hi[i];
                    gap_hi[i] = lo;
                } else if (below) {
                    gap_hi[i] = lo;
                } else if (above) {
                    gap_lo[i] = hi;
                } else {
                    gap_lo[i] = gap_lo[--gaps];
                    gap_hi[i] = gap_hi[gaps];
                    i--;
                }
            }
        }
    return gaps > 0;
}

/* "arena+512:128", "state(h.0.kv_cache)+0:4096" */
static void bytes_text(const vkg_plan *p, int region, uint64_t lo, uint64_t hi, char *buf, size_t size) {
    const vkg_region *r = &p->regions[region];
    if (r->tensor == VKG_NONE)
        snprintf(buf, size, "%s+%" PRIu64 ":%" PRIu64, vkg_dump_region_kind(r->kind), lo, hi - lo);
    else {
        char name[160];
        snprintf(buf, size, "%s(%s)+%" PRIu64 ":%" PRIu64, vkg_dump_region_kind(r->kind),
                 label_safe(vkg_tensor_bound_name(p->graph, r->tensor), name, sizeof name), lo, hi - lo);
    }
}

/* The runtime index stored at byte offset of the indices region, by name. */
static const char *index_name(const vkg_plan *p, uint64_t offset) {
    for (int t = 0; t < p->graph->n_nodes; t++)
        if (p->graph->nodes[t].op == VKG_OP_INDEX && p->place[t].region >= 0 &&
            p->regions[p->place[t].region].kind == VKG_REGION_INDICES && p->place[t].offset == offset)
            return vkg_tensor_bound_name(p->graph, t);
    return "index";
}

static void step_node(const vkg_plan *p, int s, FILE *f) {
    const vkg_step *st = &p->steps[s];
    const vkg_node *n = &p->graph->nodes[st->node];
    char shape[96];
    vkg_shape_str(n->ndim, n->shape, shape, sizeof shape);
    char name[160];
    fprintf(f, "    s%d [label=\"%d%s%s%s %s\\n%s\\n%s\"];\n", s, s, st->barrier || st->in_place ? " " : "",
            st->barrier ? "|" : "", st->in_place ? "*" : "",
            st->label, label_safe(vkg_tensor_name(p->graph, st->node), name, sizeof name), shape);
}

/* The edges into step s and the leaves beside it: inputs and runtime indices it reads, a state's
 * earlier contents, steps the dump does not show, and the outputs it writes. */
static void step_edges(const vkg_plan *p, int s, const unsigned char *shown, FILE *f) {
    flow fl[MAX_FLOWS];
    int n = 0;
    char text[192], name[160];
    for (int b = 0; b < VKG_MAX_BINDINGS; b++) {
        const vkg_binding *bd = &p->steps[s].bind[b];
        if (bd->region < 0) continue;
        const vkg_region *r = &p->regions[bd->region];
        bytes_text(p, bd->region, bd->offset, bd->offset + bd->bytes, text, sizeof text);
        if (bd->writes) {
            if (r->kind == VKG_REGION_OUTPUT)
                fprintf(f, "  o%d_%d [label=\"output %s\", %s];\n  s%d -> o%d_%d [label=\"%s\"];\n", bd->region, s,
                        label_safe(vkg_tensor_bound_name(p->graph, r->tensor), name, sizeof name), leaf_style, s,
                        bd->region, s, text);
            continue;
        }
        if (r->kind == VKG_REGION_INPUT || r->kind == VKG_REGION_INDICES) {
            const char *leaf = r->kind == VKG_REGION_INPUT ? vkg_tensor_bound_name(p->graph, r->tensor)
                                                           : index_name(p, bd->offset);
            fprintf(f, "  i%d_%d_%d [label=\"%s %s\", %s];\n  i%d_%d_%d -> s%d [label=\"%s\"];\n", bd->region, s, b,
                    r->kind == VKG_REGION_INPUT ? "input" : "index", label_safe(leaf, name, sizeof name), leaf_style,
                    bd->region, s, b, s, text);
            continue;
        }
        if (r->kind == VKG_REGION_CONSTANT) continue; /* weights: in the text and JSON dumps */
        if (flows_of(p, s, bd, fl, &n) && r->kind == VKG_REGION_STATE)
            fprintf(f, "  i%d_%d_%d [label=\"state %s\\n(earlier runs)\", %s];\n  i%d_%d_%d -> s%d [label=\"%s\"];\n",
                    bd->region, s, b, label_safe(vkg_tensor_bound_name(p->graph, r->tensor), name, sizeof name),
                    leaf_style, bd->region, s, b, s, text);
    }
    for (int i = 0; i < n; i++) {
        bytes_text(p, fl[i].region, fl[i].lo, fl[i].hi, text, sizeof text);
        if (shown[fl[i].from]) {
            fprintf(f, "  s%d -> s%d [label=\"%s\"];\n", fl[i].from, s, text);
        } else {
            fprintf(f, "  x%d_%d [label=\"step %d\\n%s\", %s];\n  x%d_%d -> s%d [label=\"%s\"];\n", fl[i].from, s,
                    fl[i].from, label_safe(vkg_tensor_name(p->graph, p->steps[fl[i].from].node), name, sizeof name),
                    leaf_style, fl[i].from, s, s, text);
        }
    }
}

vkg_status vkg_plan_dot(const vkg_plan *p, FILE *f, const unsigned char *shown) {
    int n_layers = vkg_graph_layer_count(p->graph);
    fprintf(f, "digraph plan {\n%s", graph_header);
    fprintf(f, "  label=\"plan: %d steps, arena %" PRIu64 " bytes; an edge is bytes one step wrote and a later one "
               "reads; weights are not drawn\";\n  labelloc=t;\n",
            p->n_steps, p->stats.arena_bytes);
    for (int layer = -1; layer < n_layers; layer++) {
        int open = 0;
        for (int s = 0; s < p->n_steps; s++) {
            if (!shown[s] || vkg_tensor_layer(p->graph, p->steps[s].node) != layer) continue;
            if (layer >= 0 && !open) cluster_open(f, layer);
            open = 1;
            step_node(p, s, f);
        }
        if (layer >= 0 && open) fprintf(f, "  }\n");
    }
    for (int s = 0; s < p->n_steps; s++)
        if (shown[s]) step_edges(p, s, shown, f);
    fprintf(f, "}\n");
    return VKG_OK;
}
